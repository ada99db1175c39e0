package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/irdma-emu/irdma-emu/emu/qp"
)

func init() {
	register(&command{
		name:    "wqe",
		summary: "decode an SQ/RQ WQE given as qwords (wqe decode [--rq] [--polarity 0|1] [--json] QWORD…)",
		run:     runWQE,
	})
}

// wqeStdin is where `wqe decode -` reads qwords; tests replace it.
var wqeStdin io.Reader = os.Stdin

const wqeUsage = `usage: irdma-emu wqe decode [--rq] [--polarity 0|1] [--index N] [--rq-quanta N] [--json] QWORD…

Decodes one GEN_2 (E810) WQE with the device model's decoder (emu/qp).
QWORDs are the WQE's little-endian 64-bit words in ring order, in hex
(with or without 0x); "-" reads whitespace-separated words from stdin.
Exit status: 0 valid WQE, 1 violations found (including a valid bit that
does not match the polarity), 2 usage error.

flags:
`

func runWQE(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, wqeUsage)
		return exitUsage
	}
	switch args[0] {
	case "decode":
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, wqeUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "irdma-emu wqe: unknown verb %q\n", args[0])
		fmt.Fprint(stderr, wqeUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("wqe decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rq := fs.Bool("rq", false, "decode an RQ WQE instead of an SQ WQE")
	polarity := fs.Uint("polarity", 1, "expected valid bit: 1 on the ring's first lap, 0 on the second, …")
	index := fs.Uint("index", 0, "SQ quantum index of the WQE, for the 8-quanta chunk check")
	rqQuanta := fs.Int("rq-quanta", 0, "RQ WQE size in quanta (1 << rq_shift); 0 = as long as its fragments")
	asJSON := fs.Bool("json", false, "print one JSON object")
	fs.Usage = func() {
		fmt.Fprint(stderr, wqeUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *polarity > 1 {
		fmt.Fprintf(stderr, "irdma-emu wqe decode: --polarity must be 0 or 1, not %d\n", *polarity)
		return exitUsage
	}
	if *index > 1<<32-1 || *rqQuanta < 0 || *rqQuanta > qp.MaxWQEQuanta {
		fmt.Fprintln(stderr, "irdma-emu wqe decode: --index must fit 32 bits and --rq-quanta be 0..8")
		return exitUsage
	}
	words := fs.Args()
	if len(words) == 1 && words[0] == "-" {
		var err error
		if words, err = readWords(wqeStdin); err != nil {
			fmt.Fprintf(stderr, "irdma-emu wqe decode: reading stdin: %v\n", err)
			return exitUsage
		}
	}
	if len(words) == 0 {
		fmt.Fprintln(stderr, "irdma-emu wqe decode: no qwords given")
		fs.Usage()
		return exitUsage
	}
	b := make([]byte, 8*len(words))
	for i, w := range words {
		v, err := parseQword(w)
		if err != nil {
			fmt.Fprintf(stderr, "irdma-emu wqe decode: qword %d: %v\n", i, err)
			return exitUsage
		}
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}

	p := qp.DecodeParams{
		Index:       uint32(*index),
		Polarity:    uint8(*polarity),
		Limits:      qp.GEN2WQELimits,
		WQEQuanta:   *rqQuanta,
		IgnoreValid: true, // show what the WQE says even if not posted
	}
	var out wqeJSON
	var err error
	if *rq {
		var w qp.RQWQE
		if err = qp.DecodeRQ(&w, b, p); err == nil {
			out = rqToJSON(&w, p)
		}
	} else {
		var w qp.SQWQE
		if err = qp.DecodeSQ(&w, b, p); err == nil {
			out = sqToJSON(&w, p)
		}
	}
	var se *qp.ShortError
	switch {
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "irdma-emu wqe decode: the header implies %d quanta: need %d qwords, got %d\n",
			se.Need/qp.QuantumSize, se.Need/8, len(words))
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "irdma-emu wqe decode: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "irdma-emu wqe decode: %v\n", err)
			return exitUsage
		}
	} else {
		printWQE(stdout, &out)
	}
	if !out.OK {
		return exitFail
	}
	return exitOK
}

func readWords(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Split(bufio.ScanWords)
	var words []string
	for sc.Scan() {
		words = append(words, sc.Text())
	}
	return words, sc.Err()
}

func parseQword(s string) (uint64, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if h == "" || len(h) > 16 {
		return 0, fmt.Errorf("%q is not a 64-bit hex word", s)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 64-bit hex word", s)
	}
	return v, nil
}

// wqeJSON is what `wqe decode --json` prints. Addresses, keys, the header
// and the immediate are hex strings (64-bit values lose precision as JSON
// numbers in many readers); counts and lengths are numbers. Fields an
// opcode does not have are null.
type wqeJSON struct {
	Ring           string       `json:"ring"` // "SQ" or "RQ"
	Index          *uint32      `json:"index"`
	Header         string       `json:"header"`
	Valid          uint8        `json:"valid"`
	Polarity       uint8        `json:"expected_polarity"`
	Opcode         *string      `json:"opcode"`
	OpcodeName     string       `json:"opcode_name,omitempty"`
	AddFragCnt     int          `json:"addfragcnt"`
	Quanta         int          `json:"quanta"`
	WQEQuanta      *int         `json:"rq_wqe_quanta"`
	Signaled       bool         `json:"signaled"`
	Solicited      bool         `json:"solicited"`
	ReadFence      bool         `json:"read_fence"`
	LocalFence     bool         `json:"local_fence"`
	Push           bool         `json:"push"`
	ReportRTT      bool         `json:"report_rtt"`
	ImmFlag        bool         `json:"imm_flag"`
	ImmData        *string      `json:"imm_data"`
	Inline         bool         `json:"inline"`
	InlineLen      int          `json:"inline_length"`
	InlineHex      *string      `json:"inline_data"`
	Fragments      []fragJSON   `json:"fragments"`
	Pad            *fragJSON    `json:"pad_slot"`
	Remote         *remoteJSON  `json:"remote"`
	UD             *udJSON      `json:"ud"`
	InvalidateSTag *string      `json:"invalidate_stag"`
	Atomic         *atomicJSON  `json:"atomic"`
	Bind           *bindJSON    `json:"bind_mw"`
	FastReg        *fastRegJSON `json:"fast_register"`
	TotalLength    uint64       `json:"total_length"`
	Violations     []violJSON   `json:"violations"`
	OK             bool         `json:"ok"`
}

type fragJSON struct {
	Slot  uint8  `json:"slot"`
	Addr  string `json:"addr"`
	Len   uint32 `json:"length"`
	STag  string `json:"stag"`
	Valid uint8  `json:"valid"`
}

type remoteJSON struct {
	Addr string `json:"addr"`
	STag string `json:"stag"`
}

type udJSON struct {
	AHID    uint32 `json:"ah_index"`
	DestQPN string `json:"dest_qpn"`
	QKey    string `json:"qkey"`
}

type atomicJSON struct {
	LocalAddr string  `json:"local_addr"`
	LocalSTag string  `json:"local_stag"`
	SwapAdd   string  `json:"swap_or_add"`
	Compare   *string `json:"compare"`
}

type bindJSON struct {
	VA            string `json:"va"`
	ParentSTag    string `json:"parent_mr_stag"`
	MWSTag        string `json:"mw_stag"`
	Len           uint64 `json:"length"`
	Rights        string `json:"rights"`
	VABased       bool   `json:"va_based"`
	Type1         bool   `json:"type1"`
	RemoteAtomics bool   `json:"remote_atomics"`
}

type fastRegJSON struct {
	VA              string `json:"va_or_fbo"`
	PBLAddr         string `json:"pbl_addr"`
	FirstPMPBLIndex uint32 `json:"first_pm_pbl_index"`
	Len             uint64 `json:"length"`
	STagKey         string `json:"stag_key"`
	STagIndex       string `json:"stag_index"`
	ChunkSize       uint8  `json:"pbl_level"`
	PageSize        string `json:"page_size"`
	Rights          string `json:"rights"`
	VABased         bool   `json:"va_based"`
}

type violJSON struct {
	Code    uint8  `json:"code"`
	Name    string `json:"name"`
	Where   int    `json:"where"`
	Got     uint64 `json:"got"`
	Want    uint64 `json:"want"`
	Message string `json:"message"`
	AE      string `json:"intended_ae"`
	Fatal   bool   `json:"fatal"`
}

func hx(v uint64) string { return fmt.Sprintf("%#x", v) }

func hxp(v uint64) *string { s := hx(v); return &s }

func fragsJSON(fs []qp.Fragment) []fragJSON {
	out := make([]fragJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, fragJSONOf(f))
	}
	return out
}

func fragJSONOf(f qp.Fragment) fragJSON {
	v := uint8(0)
	if f.Valid {
		v = 1
	}
	return fragJSON{Slot: f.Slot, Addr: hx(f.Addr), Len: f.Len, STag: hx(uint64(f.STag)), Valid: v}
}

func violsJSON(vs []qp.Violation, dropped int) []violJSON {
	out := make([]violJSON, 0, len(vs))
	for _, v := range vs {
		r := v.Code.Reaction()
		ae := "none"
		if r.AE != 0 {
			ae = fmt.Sprintf("%#04x", r.AE)
		}
		out = append(out, violJSON{Code: uint8(v.Code), Name: v.Code.String(), Where: v.Where, Got: v.Got, Want: v.Want,
			Message: v.String(), AE: ae, Fatal: r.Fatal})
	}
	if dropped > 0 {
		out = append(out, violJSON{Name: "more", Message: fmt.Sprintf("%d more violations not listed", dropped)})
	}
	return out
}

func sqToJSON(w *qp.SQWQE, p qp.DecodeParams) wqeJSON {
	op := w.Opcode
	opHex := fmt.Sprintf("%#02x", uint8(op))
	idx := w.Index
	out := wqeJSON{
		Ring: "SQ", Index: &idx, Header: fmt.Sprintf("%#016x", uint64(w.Header)), Valid: w.Header.ValidBit(),
		Polarity: p.Polarity, Opcode: &opHex, OpcodeName: op.String(), AddFragCnt: w.AddFragCnt, Quanta: w.Quanta,
		Signaled: w.Signaled, Solicited: w.Solicited, ReadFence: w.ReadFence, LocalFence: w.LocalFence,
		Push: w.Push, ReportRTT: w.ReportRTT, ImmFlag: w.ImmFlag, Inline: w.Inline, InlineLen: w.InlineLen,
		Fragments: fragsJSON(w.Fragments()), TotalLength: w.TotalLen,
		Violations: violsJSON(w.Violations(), w.Dropped), OK: w.OK(),
	}
	if w.ImmFlag && op.CarriesImm() {
		out.ImmData = hxp(uint64(w.ImmData))
	}
	if w.Inline && op.CarriesInline() {
		s := hex.EncodeToString(w.InlineData())
		out.InlineHex = &s
	}
	if pad, ok := w.PadSlot(); ok {
		f := fragJSONOf(pad)
		out.Pad = &f
	}
	switch {
	case op.IsWrite(), op.IsRead(), op.IsAtomic():
		out.Remote = &remoteJSON{Addr: hx(w.RemoteVA), STag: hx(uint64(w.RemoteSTag))}
	case op.IsSend():
		out.UD = &udJSON{AHID: w.UD.AHID, DestQPN: hx(uint64(w.UD.DestQPN)), QKey: hx(uint64(w.UD.QKey))}
	}
	if op.Invalidates() || op == qp.OpLocalInvalidate {
		out.InvalidateSTag = hxp(uint64(w.InvalidateSTag))
	}
	switch {
	case op.IsAtomic():
		a := &atomicJSON{LocalAddr: hx(w.Atomic.LocalVA), LocalSTag: hx(uint64(w.Atomic.LocalSTag)), SwapAdd: hx(w.Atomic.SwapAdd)}
		if op == qp.OpAtomicCompareSwap {
			a.Compare = hxp(w.Atomic.Compare)
		}
		out.Atomic = a
	case op == qp.OpBindMW:
		b := w.Bind
		out.Bind = &bindJSON{VA: hx(b.VA), ParentSTag: hx(uint64(b.ParentSTag)), MWSTag: hx(uint64(b.MWSTag)), Len: b.Len,
			Rights: hx(uint64(b.Rights)), VABased: b.VABased, Type1: b.Type1, RemoteAtomics: b.RemoteAtomics}
	case op == qp.OpFastRegister:
		f := w.FastReg
		out.FastReg = &fastRegJSON{VA: hx(f.VA), PBLAddr: hx(f.PBLAddr), FirstPMPBLIndex: f.FirstPMPBLIndex, Len: f.Len,
			STagKey: hx(uint64(f.STagKey)), STagIndex: hx(uint64(f.STagIndex)), ChunkSize: f.ChunkSize,
			PageSize: f.PageSize.String(), Rights: hx(uint64(f.Rights)), VABased: f.VABased}
	}
	return out
}

func rqToJSON(w *qp.RQWQE, p qp.DecodeParams) wqeJSON {
	wq := w.WQEQuanta
	out := wqeJSON{
		Ring: "RQ", Header: fmt.Sprintf("%#016x", uint64(w.Header)), Valid: w.Header.ValidBit(), Polarity: p.Polarity,
		AddFragCnt: w.AddFragCnt, Quanta: w.Quanta, WQEQuanta: &wq, Fragments: fragsJSON(w.Fragments()),
		TotalLength: w.TotalLen, Violations: violsJSON(w.Violations(), w.Dropped), OK: w.OK(),
	}
	if pad, ok := w.PadSlot(); ok {
		f := fragJSONOf(pad)
		out.Pad = &f
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printWQE prints the decoded WQE as aligned "name  value" lines; fields
// an opcode does not have are left out.
func printWQE(w io.Writer, o *wqeJSON) {
	line := func(name, format string, a ...any) {
		fmt.Fprintf(w, "  %-16s"+format+"\n", append([]any{name}, a...)...)
	}
	if o.Ring == "SQ" {
		fmt.Fprintf(w, "SQ WQE at index %d\n", *o.Index)
	} else {
		fmt.Fprintln(w, "RQ WQE")
	}
	line("header", "%s", o.Header)
	state := "posted"
	if o.Valid != o.Polarity {
		state = "NOT posted for this polarity"
	}
	line("valid", "%d (expected %d): %s", o.Valid, o.Polarity, state)
	if o.Opcode != nil {
		line("opcode", "%s %s", *o.Opcode, o.OpcodeName)
	}
	if o.WQEQuanta != nil {
		line("quanta", "%d of a %d-quanta WQE (ADDFRAGCNT %d)", o.Quanta, *o.WQEQuanta, o.AddFragCnt)
	} else {
		line("quanta", "%d (ADDFRAGCNT %d)", o.Quanta, o.AddFragCnt)
	}
	if o.Ring == "SQ" {
		line("signaled", "%s", yesNo(o.Signaled))
		line("solicited", "%s", yesNo(o.Solicited))
		line("read fence", "%s", yesNo(o.ReadFence))
		line("local fence", "%s", yesNo(o.LocalFence))
		line("push", "%s", yesNo(o.Push))
		line("report rtt", "%s", yesNo(o.ReportRTT))
		switch {
		case o.ImmData != nil:
			line("immediate", "%s", *o.ImmData)
		case o.ImmFlag:
			line("immediate", "flag set on an opcode without immediate")
		default:
			line("immediate", "none")
		}
		if o.InlineHex != nil {
			line("inline", "%d bytes: %s", o.InlineLen, *o.InlineHex)
		} else {
			line("inline", "no")
		}
	}
	for i, f := range o.Fragments {
		line(fmt.Sprintf("fragment %d", i), "slot %d addr %s len %d stag %s valid %d", f.Slot, f.Addr, f.Len, f.STag, f.Valid)
	}
	if o.Pad != nil {
		line("pad slot", "slot %d valid %d", o.Pad.Slot, o.Pad.Valid)
	}
	if o.Remote != nil {
		line("remote", "addr %s stag %s", o.Remote.Addr, o.Remote.STag)
	}
	if o.UD != nil {
		line("UD", "ah index %d dest qpn %s qkey %s", o.UD.AHID, o.UD.DestQPN, o.UD.QKey)
	}
	if o.InvalidateSTag != nil {
		line("invalidate stag", "%s", *o.InvalidateSTag)
	}
	if a := o.Atomic; a != nil {
		line("atomic local", "addr %s stag %s", a.LocalAddr, a.LocalSTag)
		line("atomic operand", "%s", a.SwapAdd)
		if a.Compare != nil {
			line("atomic compare", "%s", *a.Compare)
		}
	}
	if b := o.Bind; b != nil {
		line("bind MW", "va %s len %d mr stag %s mw stag %s", b.VA, b.Len, b.ParentSTag, b.MWSTag)
		line("bind rights", "%s va-based %s type-1 %s remote atomics %s", b.Rights, yesNo(b.VABased), yesNo(b.Type1), yesNo(b.RemoteAtomics))
	}
	if f := o.FastReg; f != nil {
		line("fast register", "va/fbo %s len %d key %s index %s", f.VA, f.Len, f.STagKey, f.STagIndex)
		line("fast reg PBL", "addr %s first index %d level %d page %s", f.PBLAddr, f.FirstPMPBLIndex, f.ChunkSize, f.PageSize)
		line("fast reg rights", "%s va-based %s", f.Rights, yesNo(f.VABased))
	}
	line("total length", "%d", o.TotalLength)
	if len(o.Violations) == 0 {
		fmt.Fprintln(w, "violations: none")
		return
	}
	fmt.Fprintln(w, "violations:")
	for _, v := range o.Violations {
		fmt.Fprintf(w, "  %s (intended AE %s)\n", v.Message, v.AE)
	}
}

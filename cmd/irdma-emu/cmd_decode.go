package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func init() {
	register(&command{
		name:    "decode",
		summary: "decode the RoCEv2 packets of a pcap/pcapng file, checking every ICRC",
		run:     runDecode,
	})
}

const decodeUsage = `usage: irdma-emu decode [--json] FILE

Reads a pcap or pcapng capture (Ethernet, Linux cooked SLL/SLL2 or raw IP
link types) and prints one line per RoCEv2 packet (UDP to port 4791):
time, source and destination, the opcode as Wireshark names it, DestQP,
PSN, AckReq, the fields of every extension header, the payload length and
whether the ICRC is right. A UD SEND to QP1 carrying a communication
manager MAD (class 0x07) also gets the CM message named, with its
transaction ID, comm IDs, service ID, QPN, starting PSN, REJ reason or
SIDR status (docs/cm.md); "cm" in --json. A packet that cannot be decoded gets a line
with the reason. Other frames (ARP, ICMP, other UDP, ...) are skipped and
counted in a summary line at the end.

A capture taken on lo or veth holds a daemon's segmentation offload sends
uncut: one datagram carrying a run of packets. decode cuts such a
datagram into its packets as the kernel would (each line marked
"[gso K/N]", "gso_part"/"gso_parts" in --json); one it cannot cut gets a
hint (docs/transport.md "Segmentation offload").

With --json each packet is one JSON object per line (numeric "opcode" and
"opcode_name", "dqpn", "psn", "ackreq", "payload_len", "icrc_ok", header
fields named <header>_<field>, "time", "src", "dst"; a packet that cannot
be decoded has "error" instead), and the summary is a last object of the
form {"summary": {...}} on standard output.

Exit status: 0 if every RoCEv2 packet decodes with a good ICRC, 1 if any
does not, 2 for usage errors and unreadable or non-capture files.

flags:
`

// linkType is a pcap LINKTYPE_ value. gopacket v1.1.19 keeps link types in
// a uint8 (layers.LinkType), which cannot hold LINKTYPE_LINUX_SLL2 (276),
// so this command reads the pcap header's value itself.
type linkType uint32

// The link types this command reads (https://www.tcpdump.org/linktypes.html).
const (
	linkTypeEthernet  linkType = 1
	linkTypeRawBSD    linkType = 12 // raw IP as some BSDs write it
	linkTypeRawOpen   linkType = 14
	linkTypeRaw       linkType = 101
	linkTypeLinuxSLL  linkType = 113 // tcpdump -i any before libpcap 1.10
	linkTypeIPv4      linkType = 228
	linkTypeIPv6      linkType = 229
	linkTypeLinuxSLL2 linkType = 276 // tcpdump -i any since libpcap 1.10

	sllHeaderSize  = 16 // LINUX_SLL: protocol at offset 14
	sll2HeaderSize = 20 // LINUX_SLL2: protocol at offset 0
)

func runDecode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print one JSON object per packet, and a final {\"summary\": ...} object")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), decodeUsage)
		fs.PrintDefaults()
	}
	// Accept flags before and after the file name.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "irdma-emu decode: need exactly one capture file")
		fs.Usage()
		return exitUsage
	}

	fh, err := os.Open(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu decode: %v\n", err)
		return exitUsage
	}
	defer fh.Close()
	src, err := openCapture(bufio.NewReaderSize(fh, 1<<16))
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu decode: %s: %v\n", files[0], err)
		return exitUsage
	}

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	d := decoder{json: *jsonOut, out: out, enc: json.NewEncoder(out)}
	var readErr error
	for n := 1; ; n++ {
		data, ci, err := src.read()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		d.frame(n, data, ci, src.linkType(ci))
	}
	d.summary()
	if readErr != nil {
		out.Flush()
		fmt.Fprintf(stderr, "irdma-emu decode: %s: %v\n", files[0], readErr)
		return exitUsage
	}
	if d.bad+d.malformed > 0 {
		return exitFail
	}
	return exitOK
}

// capture reads frames from a pcap or pcapng file.
type capture struct {
	read     func() ([]byte, gopacket.CaptureInfo, error)
	linkType func(gopacket.CaptureInfo) linkType
}

// openCapture picks the reader by the file's magic number: pcap (either
// byte order, micro- or nanosecond) or pcapng (section header block).
func openCapture(r *bufio.Reader) (*capture, error) {
	magic, err := r.Peek(4)
	if err != nil {
		return nil, errors.New("not a pcap or pcapng file (too short)")
	}
	switch m := binary.BigEndian.Uint32(magic); m {
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
		// The file header's link type is the 32-bit word at offset 20
		// (its low 16 bits; the upper ones carry FCS flags), in the
		// byte order the magic shows.
		hdr, err := r.Peek(24)
		if err != nil {
			return nil, errors.New("pcap file header truncated")
		}
		var lt linkType
		if m == 0xa1b2c3d4 || m == 0xa1b23c4d {
			lt = linkType(binary.BigEndian.Uint32(hdr[20:]) & 0xffff)
		} else {
			lt = linkType(binary.LittleEndian.Uint32(hdr[20:]) & 0xffff)
		}
		pr, err := pcapgo.NewReader(r)
		if err != nil {
			return nil, err
		}
		return &capture{
			read:     pr.ReadPacketData,
			linkType: func(gopacket.CaptureInfo) linkType { return lt },
		}, nil
	case 0x0a0d0d0a:
		nr, err := pcapgo.NewNgReader(r, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, err
		}
		return &capture{
			read: nr.ReadPacketData,
			linkType: func(ci gopacket.CaptureInfo) linkType {
				// With WantMixedLinkType the interface's link type
				// travels in AncillaryData[0], cut to 8 bits by gopacket:
				// 20 there is SLL2 (276), a value no link type has.
				if len(ci.AncillaryData) > 0 {
					if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
						if lt == layers.LinkType(linkTypeLinuxSLL2&0xff) {
							return linkTypeLinuxSLL2
						}
						return linkType(lt)
					}
				}
				return 0
			},
		}, nil
	}
	return nil, fmt.Errorf("not a pcap or pcapng file (magic %#08x)", binary.BigEndian.Uint32(magic))
}

// parseLink runs the wire gate on one captured frame of link type lt.
func parseLink(lt linkType, data []byte, f *wire.Frame) error {
	switch lt {
	case linkTypeEthernet:
		return wire.ParseFrame(data, f)
	case linkTypeLinuxSLL:
		if len(data) < sllHeaderSize {
			return wire.ErrNotRoCEv2
		}
		return parseIPByProtocol(binary.BigEndian.Uint16(data[14:]), data[sllHeaderSize:], f)
	case linkTypeLinuxSLL2:
		if len(data) < sll2HeaderSize {
			return wire.ErrNotRoCEv2
		}
		return parseIPByProtocol(binary.BigEndian.Uint16(data[0:]), data[sll2HeaderSize:], f)
	case linkTypeRaw, linkTypeIPv4, linkTypeIPv6, linkTypeRawBSD, linkTypeRawOpen:
		return wire.ParseIP(data, f)
	}
	return wire.ErrNotRoCEv2
}

func parseIPByProtocol(proto uint16, data []byte, f *wire.Frame) error {
	if proto != wire.EtherTypeIPv4 && proto != wire.EtherTypeIPv6 {
		return wire.ErrNotRoCEv2
	}
	return wire.ParseIP(data, f)
}

// decoder prints frames and keeps the counts for the summary.
type decoder struct {
	json bool
	out  *bufio.Writer
	enc  *json.Encoder

	roce, ok, bad, malformed, other int
	f                               wire.Frame
}

func (d *decoder) frame(n int, data []byte, ci gopacket.CaptureInfo, lt linkType) {
	f := &d.f
	err := parseLink(lt, data, f)
	if errors.Is(err, wire.ErrNotRoCEv2) {
		d.other++
		return
	}
	ts := formatTime(ci.Timestamp)
	if (err != nil && looksLikeGSO(f, err)) || (err == nil && f.VerifyICRC() != nil) {
		// A daemon's segmentation offload send, captured uncut
		// (decode_gso.go): each packet on its own.
		if pkts, ok := cutGSO(lt, data); ok {
			for k, p := range pkts {
				d.roce++
				if perr := wire.ParseFrame(p, f); perr != nil {
					d.malformed++
					d.printError(n, ts, f, perr.Error(), perr, "")
					continue
				}
				d.packet(n, ts, f, gsoPart{k + 1, len(pkts)})
			}
			return
		}
	}
	d.roce++
	if err != nil {
		d.malformed++
		msg := err.Error()
		if ci.CaptureLength < ci.Length && errors.Is(err, wire.ErrTruncated) {
			msg += fmt.Sprintf(" (frame cut to %d of %d bytes by the capture)", ci.CaptureLength, ci.Length)
		}
		hint := ""
		if looksLikeGSO(f, err) {
			hint = gsoHint
		}
		d.printError(n, ts, f, msg, err, hint)
		return
	}
	d.packet(n, ts, f, gsoPart{})
}

// gsoPart is the place of a packet in a segmentation offload send cut
// apart by decode: packet K of N (N 0: a frame of its own).
type gsoPart struct{ K, N int }

// printError prints a packet that failed the gate.
func (d *decoder) printError(n int, ts string, f *wire.Frame, msg string, err error, hint string) {
	src, dst := endpoints(f)
	if d.json {
		d.enc.Encode(jsonError{Frame: n, Time: ts, Src: src, Dst: dst, Error: msg, Reason: wire.ReasonOf(err).String(), Hint: hint})
		return
	}
	fmt.Fprintf(d.out, "%5d %s %s → %s error: %s\n", n, ts, src, dst, msg)
	if hint != "" {
		fmt.Fprintf(d.out, "      hint: %s\n", hint)
	}
}

// packet prints a packet that passed the gate and counts its ICRC.
func (d *decoder) packet(n int, ts string, f *wire.Frame, part gsoPart) {
	icrcOK := f.VerifyICRC() == nil
	if icrcOK {
		d.ok++
	} else {
		d.bad++
	}
	hint := !icrcOK && looksLikeGSO(f, nil)
	if d.json {
		j := newJSONPacket(n, ts, f, icrcOK)
		if hint {
			j.Hint = gsoHint
		}
		if part.N > 0 {
			j.GSOPart, j.GSOParts = part.K, part.N
		}
		d.enc.Encode(j)
		return
	}
	line := textLine(n, ts, f, icrcOK)
	if part.N > 0 {
		line = strings.TrimSuffix(line, "\n") + fmt.Sprintf(" [gso %d/%d]\n", part.K, part.N)
	}
	d.out.WriteString(line)
	if hint {
		fmt.Fprintf(d.out, "      hint: %s\n", gsoHint)
	}
}

func (d *decoder) summary() {
	if d.json {
		d.enc.Encode(struct {
			Summary jsonSummary `json:"summary"`
		}{jsonSummary{d.roce, d.ok, d.bad, d.malformed, d.other}})
		return
	}
	fmt.Fprintf(d.out, "%d RoCEv2 packets (%d icrc ok, %d bad, %d malformed), %d other frames skipped\n",
		d.roce, d.ok, d.bad, d.malformed, d.other)
}

// formatTime prints UTC with microseconds, or nanoseconds when the
// capture has them.
func formatTime(t time.Time) string {
	if t.Nanosecond()%1000 != 0 {
		return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// endpoints returns "ip:port" for source and destination as far as f was
// parsed.
func endpoints(f *wire.Frame) (src, dst string) {
	if f.IPv4 == nil && f.IPv6 == nil {
		return "?", "?"
	}
	if f.UDP == nil {
		if f.IPv4 != nil {
			return f.IPv4.SourceAddress().String(), f.IPv4.DestinationAddress().String()
		}
		return f.IPv6.SourceAddress().String(), f.IPv6.DestinationAddress().String()
	}
	return f.Src().String(), f.Dst().String()
}

// syndromeText decodes an AETH syndrome for the text output.
func syndromeText(s wire.Syndrome) string {
	switch s.Type() {
	case wire.SyndromeACK:
		return fmt.Sprintf("%#02x/ACK credits=%v", uint8(s), s.CreditCode())
	case wire.SyndromeRNRNAK:
		return fmt.Sprintf("%#02x/RNR-NAK timer=%d(%v)", uint8(s), s.RNRTimer(), s.RNRTimer().Duration())
	case wire.SyndromeNAK:
		return fmt.Sprintf("%#02x/NAK code=%d(%v)", uint8(s), s.NAKCode(), s.NAKCode())
	}
	return fmt.Sprintf("%#02x/reserved", uint8(s))
}

func textLine(n int, ts string, f *wire.Frame, icrcOK bool) string {
	p := &f.Packet
	b := p.BTH
	var sb strings.Builder
	fmt.Fprintf(&sb, "%5d %s %s → %s %s dqpn=%#06x psn=%d ackreq=%d",
		n, ts, f.Src(), f.Dst(), p.Opcode(), b.DestQP(), b.PSN(), btoi(b.AckReq()))
	if b.SE() {
		sb.WriteString(" se=1")
	}
	if b.MigReq() {
		sb.WriteString(" migreq=1")
	}
	if b.FECN() {
		sb.WriteString(" fecn=1")
	}
	if b.BECN() {
		sb.WriteString(" becn=1")
	}
	if b.PKey() != wire.DefaultPKey {
		fmt.Fprintf(&sb, " pkey=%#04x", b.PKey())
	}
	if h := p.DETH; h != nil {
		fmt.Fprintf(&sb, " qkey=%#08x srcqp=%#06x", h.QKey(), h.SrcQP())
	}
	if h := p.FETH; h != nil {
		fmt.Fprintf(&sb, " sel=%d plt=%d", h.SelectivityLevel(), h.PlacementType())
	}
	if h := p.RETH; h != nil {
		fmt.Fprintf(&sb, " va=%#x rkey=%#08x dmalen=%d", h.VA(), h.RKey(), h.DMALen())
	}
	if h := p.AtomicETH; h != nil {
		fmt.Fprintf(&sb, " va=%#x rkey=%#08x swap_add=%#x compare=%#x", h.VA(), h.RKey(), h.SwapAdd(), h.Compare())
	}
	if h := p.AETH; h != nil {
		fmt.Fprintf(&sb, " syndrome=%s msn=%d", syndromeText(h.Syndrome()), h.MSN())
	}
	if h := p.AtomicAckETH; h != nil {
		fmt.Fprintf(&sb, " orig=%#x", h.OrigRemoteData())
	}
	if h := p.ImmDt; h != nil {
		fmt.Fprintf(&sb, " imm=%#08x", h.Imm())
	}
	if h := p.IETH; h != nil {
		fmt.Fprintf(&sb, " inv_rkey=%#08x", h.RKey())
	}
	fmt.Fprintf(&sb, " len=%d", len(p.Payload))
	if cs, ok, err := cmMAD(p); ok {
		if err != nil {
			fmt.Fprintf(&sb, " cm=BAD (%v)", err)
		} else {
			sb.WriteString(" " + cs.String())
		}
	}
	if icrcOK {
		sb.WriteString(" icrc=ok\n")
	} else {
		fmt.Fprintf(&sb, " icrc=BAD (carried %#08x, computed %#08x)\n", p.ICRC(), f.ComputeICRC())
	}
	return sb.String()
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// jsonPacket is the --json form of a decoded packet. Extension header
// fields are present exactly when the opcode carries the header.
type jsonPacket struct {
	Frame      int    `json:"frame"`
	Time       string `json:"time"`
	Src        string `json:"src"`
	Dst        string `json:"dst"`
	Opcode     uint8  `json:"opcode"`
	OpcodeName string `json:"opcode_name"`
	DQPN       uint32 `json:"dqpn"`
	PSN        uint32 `json:"psn"`
	AckReq     bool   `json:"ackreq"`
	SE         bool   `json:"se"`
	MigReq     bool   `json:"migreq"`
	PadCount   uint8  `json:"pad_count"`
	PKey       uint16 `json:"pkey"`
	FECN       bool   `json:"fecn"`
	BECN       bool   `json:"becn"`

	DETHQKey  *uint32 `json:"deth_qkey,omitempty"`
	DETHSrcQP *uint32 `json:"deth_src_qp,omitempty"`

	FETHSelectivity *uint8 `json:"feth_selectivity_level,omitempty"`
	FETHPlacement   *uint8 `json:"feth_placement_type,omitempty"`

	RETHVA     *uint64 `json:"reth_va,omitempty"`
	RETHRKey   *uint32 `json:"reth_rkey,omitempty"`
	RETHDMALen *uint32 `json:"reth_dma_len,omitempty"`

	AtomicVA      *uint64 `json:"atomic_va,omitempty"`
	AtomicRKey    *uint32 `json:"atomic_rkey,omitempty"`
	AtomicSwapAdd *uint64 `json:"atomic_swap_add,omitempty"`
	AtomicCompare *uint64 `json:"atomic_compare,omitempty"`

	AETHSyndrome   *uint8  `json:"aeth_syndrome,omitempty"`
	AETHType       string  `json:"aeth_type,omitempty"` // "ack", "rnr_nak", "nak", "reserved"
	AETHCreditCode *uint8  `json:"aeth_credit_code,omitempty"`
	AETHCredits    *int    `json:"aeth_credits,omitempty"` // absent for the invalid code 0x1f
	AETHRNRTimer   *uint8  `json:"aeth_rnr_timer,omitempty"`
	AETHRNRDelayUS *int64  `json:"aeth_rnr_delay_us,omitempty"`
	AETHNAKCode    *uint8  `json:"aeth_nak_code,omitempty"`
	AETHNAK        string  `json:"aeth_nak,omitempty"`
	AETHMSN        *uint32 `json:"aeth_msn,omitempty"`

	AtomicAckOrig *uint64 `json:"atomic_ack_orig,omitempty"`
	ImmDt         *uint32 `json:"immdt,omitempty"`
	IETHRKey      *uint32 `json:"ieth_rkey,omitempty"`

	PayloadLen int    `json:"payload_len"`
	ICRC       uint32 `json:"icrc"`
	ICRCOK     bool   `json:"icrc_ok"`

	// CM is the CM MAD a UD SEND to QP1 carries (decode_cm.go).
	CM *jsonCM `json:"cm,omitempty"`
	// Hint explains a bad ICRC that may be no packet's (gsoHint).
	Hint string `json:"hint,omitempty"`
	// GSOPart and GSOParts: packet GSOPart of the GSOParts of a
	// segmentation offload send that the capture holds as one frame
	// (decode_gso.go).
	GSOPart  int `json:"gso_part,omitempty"`
	GSOParts int `json:"gso_parts,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func newJSONPacket(n int, ts string, f *wire.Frame, icrcOK bool) *jsonPacket {
	p := &f.Packet
	b := p.BTH
	j := &jsonPacket{
		Frame: n, Time: ts, Src: f.Src().String(), Dst: f.Dst().String(),
		Opcode: uint8(p.Opcode()), OpcodeName: p.Opcode().String(),
		DQPN: b.DestQP(), PSN: uint32(b.PSN()), AckReq: b.AckReq(), SE: b.SE(), MigReq: b.MigReq(),
		PadCount: b.PadCount(), PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(),
		PayloadLen: len(p.Payload), ICRC: p.ICRC(), ICRCOK: icrcOK,
	}
	if h := p.DETH; h != nil {
		j.DETHQKey, j.DETHSrcQP = ptr(h.QKey()), ptr(h.SrcQP())
	}
	if h := p.FETH; h != nil {
		j.FETHSelectivity, j.FETHPlacement = ptr(h.SelectivityLevel()), ptr(h.PlacementType())
	}
	if h := p.RETH; h != nil {
		j.RETHVA, j.RETHRKey, j.RETHDMALen = ptr(h.VA()), ptr(h.RKey()), ptr(h.DMALen())
	}
	if h := p.AtomicETH; h != nil {
		j.AtomicVA, j.AtomicRKey = ptr(h.VA()), ptr(h.RKey())
		j.AtomicSwapAdd, j.AtomicCompare = ptr(h.SwapAdd()), ptr(h.Compare())
	}
	if h := p.AETH; h != nil {
		s := h.Syndrome()
		j.AETHSyndrome, j.AETHMSN = ptr(uint8(s)), ptr(h.MSN())
		switch s.Type() {
		case wire.SyndromeACK:
			j.AETHType = "ack"
			j.AETHCreditCode = ptr(uint8(s.CreditCode()))
			if c, ok := s.CreditCode().Credits(); ok {
				j.AETHCredits = &c
			}
		case wire.SyndromeRNRNAK:
			j.AETHType = "rnr_nak"
			j.AETHRNRTimer = ptr(uint8(s.RNRTimer()))
			j.AETHRNRDelayUS = ptr(s.RNRTimer().Duration().Microseconds())
		case wire.SyndromeNAK:
			j.AETHType = "nak"
			j.AETHNAKCode = ptr(uint8(s.NAKCode()))
			j.AETHNAK = s.NAKCode().String()
		default:
			j.AETHType = "reserved"
		}
	}
	if h := p.AtomicAckETH; h != nil {
		j.AtomicAckOrig = ptr(h.OrigRemoteData())
	}
	if h := p.ImmDt; h != nil {
		j.ImmDt = ptr(h.Imm())
	}
	if h := p.IETH; h != nil {
		j.IETHRKey = ptr(h.RKey())
	}
	if cs, ok, err := cmMAD(p); ok {
		j.CM = newJSONCM(cs, err)
	}
	return j
}

// jsonError is the --json form of a RoCEv2 packet that failed the gate.
type jsonError struct {
	Frame  int    `json:"frame"`
	Time   string `json:"time"`
	Src    string `json:"src"`
	Dst    string `json:"dst"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
	Hint   string `json:"hint,omitempty"`
}

// gsoHint explains a datagram that is no RoCEv2 packet because it holds
// several: what a capture on lo or veth shows of a daemon's UDP
// segmentation offload send, which the kernel cuts only at the receiver
// (docs/transport.md "Segmentation offload").
const gsoHint = "several RoCEv2 packets in one datagram? A capture on lo or veth shows an " +
	"irdma-emu daemon's segmentation offload send uncut, and this one could not be cut apart: " +
	"record with the daemon's --pcap, or run it with --transport …,gso=off (docs/transport.md \"Segmentation offload\")"

// looksLikeGSO reports whether a packet the gate refused, or one whose
// ICRC is bad, may be a run of packets sent as one datagram: too long
// for one packet, or a payload length no single packet of its opcode has.
func looksLikeGSO(f *wire.Frame, err error) bool {
	if err != nil {
		return wire.ReasonOf(err) == wire.ErrBadLength
	}
	return len(f.Packet.Payload) > wire.MaxPMTU
}

// jsonSummary is the last --json object, under the key "summary".
type jsonSummary struct {
	RoCEv2    int `json:"roce_packets"`
	ICRCOK    int `json:"icrc_ok"`
	ICRCBad   int `json:"icrc_bad"`
	Malformed int `json:"malformed"`
	Other     int `json:"other_frames"`
}

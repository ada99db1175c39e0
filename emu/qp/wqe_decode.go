package qp

import (
	"errors"
	"fmt"
)

// ErrNotValid is returned when the header's VALID bit is not the expected
// polarity: the slot holds no posted WQE (yet). It is not a violation; the
// device stops scanning the ring there (docs/hw-datapath.md "Valid bit and
// NOP padding").
var ErrNotValid = errors.New("qp: WQE header valid bit does not match the ring polarity")

// ShortError is returned when the bytes given hold fewer quanta than the
// header implies. Need and Have are byte counts.
type ShortError struct {
	Need int // bytes the WQE occupies (a multiple of QuantumSize)
	Have int // bytes given
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("qp: WQE needs %d bytes (%d quanta), have %d", e.Need, e.Need/QuantumSize, e.Have)
}

// DecodeParams says where the device found a WQE and what it expects.
type DecodeParams struct {
	// Index is the SQ quantum index of the WQE's first quantum, for the
	// chunk-boundary check. Unused for RQ WQEs.
	Index uint32
	// Polarity is the expected VALID bit (the ring's current lap).
	Polarity uint8
	// Limits are the generation limits; the zero value means
	// GEN2WQELimits.
	Limits WQELimits
	// WQEQuanta is the fixed RQ WQE size in quanta (1 << rq_shift, from
	// the QP context). 0 derives it from ADDFRAGCNT (tools, which do not
	// know the QP). Unused for SQ WQEs.
	WQEQuanta int
	// IgnoreValid decodes a WQE whose VALID bit is not Polarity instead
	// of returning ErrNotValid, reporting ViolHeaderNotValid and checking
	// the fragment valid bits against the header's own VALID. For tools.
	IgnoreValid bool
}

// Fragment is one decoded fragment slot (GEN_2 format, docs/hw-datapath.md
// "Fragments").
type Fragment struct {
	Addr  uint64 // FRAG_TO
	Len   uint32 // FRAG_LEN, 31 bits
	STag  uint32 // FRAG_STAG (L_Key)
	Valid bool   // the slot's VALID bit
	Slot  uint8  // slot number within the WQE (FragSlotOffset gives its bytes)
}

// fragments is the fixed-size fragment list shared by SQ and RQ WQEs:
// every slot the header covers, the pad slot (if any) last.
type fragments struct {
	slots  [MaxFragSlots]Fragment
	nslots uint8
	pad    bool
}

// Fragments are the SGEs: every fragment slot the header covers except
// the pad slot. The slice aliases the decoded WQE.
func (f *fragments) Fragments() []Fragment {
	n := f.nslots
	if f.pad {
		n--
	}
	return f.slots[:n]
}

// PadSlot is the empty slot GEN_2 writes after an even fragment count,
// when the last slot covered by ADDFRAGCNT has that shape.
func (f *fragments) PadSlot() (Fragment, bool) {
	if !f.pad {
		return Fragment{}, false
	}
	return f.slots[f.nslots-1], true
}

// decodeSlots reads fragment slots [first, n) of v, checks their valid
// bits against pol and decides whether the last one is the pad slot.
// The pad is recognised by shape (address, length and STag zero): a real
// zero-length SGE at address 0 with STag 0 looks the same, and moves no
// data either way.
func (f *fragments) decodeSlots(v WQEView, first, n int, pol uint8, vs *violations) (total uint64) {
	for k := first; k < n; k++ {
		fs := v.FragSlot(k)
		fr := Fragment{Addr: fs.Addr(), Len: fs.Len(), STag: fs.STag(), Valid: fs.Valid(), Slot: uint8(k)}
		f.slots[f.nslots] = fr
		f.nslots++
		if fr.Valid != (pol == 1) {
			vs.add(ViolFragValid, k, b2u(fr.Valid), uint64(pol))
		}
		total += uint64(fr.Len)
	}
	if n > first && v.FragSlot(n-1).Empty() {
		f.pad = true
	}
	return total
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// UDFields are the UD addressing fields of a SEND WQE (docs/hw-datapath.md
// "SQ WQE body").
type UDFields struct {
	AHID    uint32 // header AHID [16:0]
	DestQPN uint32 // qword2 DESTQPN [55:32]
	QKey    uint32 // qword2 DESTQKEY [31:0]
}

// AtomicFields are the fields of a FETCH_ADD / COMPARE_SWAP WQE
// (docs/hw-datapath.md "Atomic WQEs"). The result length is implicit: 8
// bytes.
type AtomicFields struct {
	LocalVA   uint64 // qword0: where the original value is written
	LocalSTag uint32 // qword1 LOCSTAG
	SwapAdd   uint64 // qword4: add value or swap value
	Compare   uint64 // qword5: compare value (COMPARE_SWAP)
}

// BindFields are the fields of a BIND_MW WQE (docs/hw-datapath.md "Memory and
// NOP WQEs", GEN_2 layout).
type BindFields struct {
	VA            uint64 // qword0 (0 when zero-based)
	ParentSTag    uint32 // qword1 PARENTMRSTAG: the MR's STag
	MWSTag        uint32 // qword1 MWSTAG: the window's new STag
	Len           uint64 // qword2 MWLEN
	Rights        uint8  // STAGRIGHTS: remote read 1<<2, remote write 1<<3
	VABased       bool   // VABASEDTO
	Type1         bool   // MEMWINDOWTYPE
	RemoteAtomics bool   // REMOTE_ATOMICS_EN
}

// FastRegFields are the fields of a FAST_REGISTER WQE (docs/hw-datapath.md
// "Memory and NOP WQEs", irdma_sc_mr_fast_register).
type FastRegFields struct {
	VA              uint64   // qword0: VA (VA-based) or first-byte offset
	PBLAddr         uint64   // qword1 PBLADDR [63:12]
	FirstPMPBLIndex uint32   // FIRSTPMPBLIDXHI:FIRSTPMPBLIDXLO
	Len             uint64   // qword2 STAGLEN [40:0]
	STagKey         uint8    // header STAGKEY
	STagIndex       uint32   // header STAGINDEX
	ChunkSize       uint8    // header LPBLSIZE
	PageSize        PageSize // header HPAGESIZE
	Rights          uint8    // header STAGRIGHTS
	VABased         bool     // header VABASEDTO
}

// SQWQE is a decoded SQ WQE. Decoding fills it in place and allocates
// nothing: fragments, inline bytes and violations live in fixed arrays.
type SQWQE struct {
	Index      uint32 // quantum index of the first quantum
	Header     Header // the raw header qword
	Valid      bool   // header VALID
	Opcode     Opcode
	Quanta     int // quanta the WQE occupies
	AddFragCnt int // header ADDFRAGCNT

	Signaled   bool // SIGCOMPL
	Solicited  bool // from the opcode (SEND_SOL*, WRITE_SOL)
	ReadFence  bool // READFENCE
	LocalFence bool // LOCALFENCE (UDPHEADER on a UD send)
	Push       bool // PUSHWQE
	Inline     bool // INLINEDATAFLAG
	ImmFlag    bool // IMMDATAFLAG (not on FAST_REG, where bit 47 is HPAGESIZE)
	ReportRTT  bool // REPORTRTT
	L4Len      uint8

	ImmData        uint32 // qword0 low 32 bits, when ImmFlag on SEND/WRITE
	RemoteVA       uint64 // WRITE, READ, atomics
	RemoteSTag     uint32 // R_Key of WRITE, READ, atomics
	InvalidateSTag uint32 // SEND_INV*: REMSTAG; LOCAL_INV: target STag
	UD             UDFields
	Atomic         AtomicFields
	Bind           BindFields
	FastReg        FastRegFields

	// InlineLen is the header's INLINEDATALEN; InlineData holds the bytes
	// the WQE's quanta carry (all of them unless the length is over the
	// 8-quanta capacity, which is a violation anyway).
	InlineLen  int
	inline     [MaxInlineCapacity]byte
	inlineHave int

	// TotalLen is the message length: the SGE lengths summed, the inline
	// length, 8 for atomics, 0 otherwise (sq_wrtrk_array wr_len).
	TotalLen uint64

	fragments
	violations
}

// InlineData is the inline payload gathered from the WQE (aliases w).
func (w *SQWQE) InlineData() []byte { return w.inline[:w.inlineHave] }

// SQQuanta is how many quanta the device reads for a WQE with header h
// (docs/hw-datapath.md "Quanta and ADDFRAGCNT", "Inline data", "Atomic
// WQEs"): inline WQEs by INLINEDATALEN, atomics 2, SEND/WRITE/READ 1 +
// ADDFRAGCNT/2 (GEN_2 counts the pad slot), every other opcode, known or not,
// 1.
func SQQuanta(h Header) int { return SQQuantaPad(h, false) }

// SQQuantaPad is SQQuanta under either pad rule: with padUncounted (GEN_3)
// an odd ADDFRAGCNT's last fragment opens one more quantum.
func SQQuantaPad(h Header, padUncounted bool) int {
	op := h.Opcode()
	switch {
	case op.CarriesInline() && h.InlineFlag():
		return InlineQuanta(h.InlineLen())
	case op.IsAtomic():
		return 2
	case op.hasFragments():
		if padUncounted {
			return 1 + (h.AddFragCnt()+1)/2
		}
		return 1 + h.AddFragCnt()/2
	}
	return 1
}

// RQQuanta is how many quanta an RQ WQE's fragment slots 0..ADDFRAGCNT
// occupy: 1 + ADDFRAGCNT/2 for the even counts the GEN_2 pad rule
// produces (irdma_uk_post_receive), one more for an odd count, at most
// MaxWQEQuanta. Unlike the SQ, the RQ's stride is fixed by the QP, so
// reading the quantum that holds an odd count's last slot costs nothing.
func RQQuanta(h Header) int { return min(1+(h.AddFragCnt()+1)/2, MaxWQEQuanta) }

// DecodeSQ decodes the SQ WQE whose first quantum is b[0:32]; b may run
// on past the WQE. As the device does, it reads the header, checks VALID
// against p.Polarity (ErrNotValid if it differs, unless p.IgnoreValid),
// derives the quanta from the opcode, ADDFRAGCNT and INLINEDATALEN
// (a *ShortError if b holds fewer), then reads only the bytes the header's
// lengths and flags cover: other bytes of a quantum may hold anything
// (0xff after a ring wrap; qword1 when IMMDATAFLAG is set).
//
// Layout violations do not stop decoding; they are listed in w.
func DecodeSQ(w *SQWQE, b []byte, p DecodeParams) error {
	*w = SQWQE{}
	p.Limits = p.Limits.orGEN2()
	if len(b) < QuantumSize {
		return &ShortError{Need: QuantumSize, Have: len(b)}
	}
	v := WQEView(b)
	h := v.Header()
	op := h.Opcode()
	w.Index = p.Index
	w.Header = h
	w.Valid = h.Valid()
	w.Opcode = op
	w.AddFragCnt = h.AddFragCnt()
	pol := p.Polarity & 1
	if h.ValidBit() != pol {
		if !p.IgnoreValid {
			return ErrNotValid
		}
		w.add(ViolHeaderNotValid, -1, uint64(h.ValidBit()), uint64(pol))
		pol = h.ValidBit()
	}
	w.Quanta = SQQuantaPad(h, p.Limits.PadUncounted)
	if need := w.Quanta * QuantumSize; len(b) < need {
		return &ShortError{Need: need, Have: len(b)}
	}

	w.Signaled = h.Signaled()
	w.Solicited = op.Solicited()
	w.ReadFence = h.ReadFence()
	w.LocalFence = h.LocalFence()
	w.Push = h.Push()
	w.Inline = h.InlineFlag()
	w.ImmFlag = h.ImmDataFlag() && op != OpFastRegister // bit 47 is HPAGESIZE there
	// Bits 46 and 45:42 are HPAGESIZE and LPBLSIZE on FAST_REG; L4LEN is
	// a UD send field.
	w.ReportRTT = h.ReportRTT() && op != OpFastRegister
	if op.IsSend() {
		w.L4Len = h.L4Len()
	}

	if c := p.Limits.ChunkQuanta; c > 0 && int(p.Index%uint32(c))+w.Quanta > c {
		w.add(ViolCrossesChunk, int(p.Index), uint64(w.Quanta), uint64(c))
	}
	if !op.Known() {
		if op == OpGenRTSAE {
			w.add(ViolIWARPOnly, -1, uint64(h), 0)
		} else {
			w.add(ViolUnknownOpcode, -1, uint64(op), 0)
		}
		return nil
	}
	if h.StreamMode() || h.WaitForRcvPDU() {
		w.add(ViolIWARPOnly, -1, uint64(h), 0)
	}
	if w.ImmFlag && !op.CarriesImm() {
		w.add(ViolImmNotAllowed, -1, uint64(op), 0)
	}
	if w.Inline && !op.CarriesInline() {
		w.add(ViolInlineNotAllowed, -1, uint64(op), 0)
	}
	if w.ImmFlag && op.CarriesImm() {
		w.ImmData = v.ImmData()
	}

	switch {
	case op.CarriesInline() && w.Inline:
		w.decodeInline(v, pol, p.Limits)
	case op.hasFragments():
		w.decodeFrags(v, pol, p.Limits)
	case op.IsAtomic():
		w.expectAddFragCnt(1)
		w.Atomic = AtomicFields{
			LocalVA:   v.AtomicLocalVA(),
			LocalSTag: v.AtomicLocalSTag(),
			SwapAdd:   v.AtomicSwapAdd(),
		}
		if op == OpAtomicCompareSwap {
			w.Atomic.Compare = v.AtomicCompare()
		}
		// qword7 carries only the polarity (irdma_uk_atomic_*: byte 56).
		if got := uint8(v.Qword(7) >> 63); got != pol {
			w.add(ViolFragValid, 2, uint64(got), uint64(pol))
		}
		w.TotalLen = 8
	case op == OpLocalInvalidate:
		w.expectAddFragCnt(0)
		w.InvalidateSTag = v.LocalInvSTag()
	case op == OpBindMW:
		w.expectAddFragCnt(0)
		w.Bind = BindFields{
			VA:            v.BindVA(),
			ParentSTag:    v.BindParentSTag(),
			MWSTag:        v.BindMWSTag(),
			Len:           v.BindLen(),
			Rights:        h.STagRights(),
			VABased:       h.VABased(),
			Type1:         h.MemWindowType1(),
			RemoteAtomics: h.RemoteAtomics(),
		}
	case op == OpFastRegister:
		w.expectAddFragCnt(0)
		w.FastReg = FastRegFields{
			VA:              v.FastRegVA(),
			PBLAddr:         v.FastRegPBLAddr(),
			FirstPMPBLIndex: v.FastRegFirstPBLIndex(),
			Len:             v.FastRegLen(),
			STagKey:         h.STagKey(),
			STagIndex:       h.STagIndex(),
			ChunkSize:       h.LPBLSize(),
			PageSize:        h.HPageSize(),
			Rights:          h.STagRights(),
			VABased:         h.VABased(),
		}
		if w.FastReg.PageSize > PageSize1G {
			w.add(ViolReservedField, -1, uint64(w.FastReg.PageSize), 0)
		}
	case op == OpNOP:
		w.expectAddFragCnt(0)
	}

	switch {
	case op.IsSend():
		// REMSTAG and AHID share bits [31:0]; a SEND_INV is RC-only, so
		// there they hold the STag to invalidate.
		w.UD = UDFields{DestQPN: v.DestQPN(), QKey: v.DestQKey()}
		if op.Invalidates() {
			w.InvalidateSTag = h.RemSTag()
		} else {
			w.UD.AHID = h.AHID()
		}
	case op.IsWrite(), op.IsRead(), op.IsAtomic():
		w.RemoteVA = v.RemoteVA()
		w.RemoteSTag = h.RemSTag()
	}
	return nil
}

func (w *SQWQE) expectAddFragCnt(want int) {
	if w.AddFragCnt != want {
		w.add(ViolAddFragCnt, -1, uint64(w.AddFragCnt), uint64(want))
	}
}

// decodeFrags reads the fragment slots of a SEND/WRITE/READ WQE: slot 0
// unless it holds the immediate, then two per further quantum, as many as
// ADDFRAGCNT + 1 covers (docs/hw-datapath.md "Fragments", "Quanta and
// ADDFRAGCNT").
func (w *SQWQE) decodeFrags(v WQEView, pol uint8, lim WQELimits) {
	first := 0
	if w.ImmFlag && w.Opcode.CarriesImm() {
		first = 1
	}
	if w.AddFragCnt%2 == 1 && !lim.PadUncounted {
		w.add(ViolPadRule, -1, uint64(w.AddFragCnt), 0)
	}
	n := w.AddFragCnt + 1
	if inQuanta := 1 + 2*(w.Quanta-1); n > inQuanta {
		n = inQuanta // odd ADDFRAGCNT: the last slot lies past the WQE
	}
	w.TotalLen = w.decodeSlots(v, first, n, pol, &w.violations)
	limit := lim.MaxFrags
	if w.Opcode.IsRead() {
		limit = lim.MaxReadSGEs
	}
	if sges := len(w.Fragments()); sges > limit {
		w.add(ViolTooManyFrags, -1, uint64(sges), uint64(limit))
	}
}

// decodeInline gathers the inline payload (irdma_copy_inline_data): bytes
// 0..7 from WQE bytes 8..15, then 31 bytes from each further quantum whose
// byte 31 is the inline valid byte.
func (w *SQWQE) decodeInline(v WQEView, pol uint8, lim WQELimits) {
	w.expectAddFragCnt(0)
	n := w.Header.InlineLen()
	w.InlineLen = n
	w.TotalLen = uint64(n)
	if n > lim.MaxInline {
		w.add(ViolInlineTooLong, -1, uint64(n), uint64(lim.MaxInline))
	}
	have := min(n, 8+31*(w.Quanta-1))
	i := copy(w.inline[:min(have, 8)], v[8:16])
	for k := 1; i < have; k++ {
		i += copy(w.inline[i:have], v[QuantumSize*k:QuantumSize*k+31])
	}
	w.inlineHave = have
	want := pol << 7
	for k := 1; k < w.Quanta; k++ {
		if got := v[QuantumSize*k+inlineValidAt]; got != want {
			w.add(ViolInlineValid, k, uint64(got), uint64(want))
		}
	}
}

// RQWQE is a decoded RQ WQE (docs/hw-datapath.md "RQ WQE"): fragment slots,
// ADDFRAGCNT and VALID in qword3; qword2 is 0 (the wr_id stays in software).
type RQWQE struct {
	Header     Header
	Valid      bool
	AddFragCnt int
	// Quanta is how many quanta the fragments occupy (1 + ADDFRAGCNT/2);
	// WQEQuanta is the WQE's fixed size in the ring.
	Quanta    int
	WQEQuanta int
	TotalLen  uint64 // receive capacity: the SGE lengths summed

	fragments
	violations
}

// DecodeRQ decodes the RQ WQE at b (its WQE size in bytes, or more).
// VALID is checked as in DecodeSQ. With p.WQEQuanta = 0 the WQE is taken
// to be as long as its fragments.
//
// A receive posted with 0 SGEs has ADDFRAGCNT 0 and slot 0 holding
// whatever the poster's SGE array held (irdma_uk_post_receive writes
// sg_list[0] regardless): it decodes as one SGE unless that slot is empty.
// The device cannot tell it from a 1-SGE receive, and need not.
func DecodeRQ(w *RQWQE, b []byte, p DecodeParams) error {
	*w = RQWQE{}
	p.Limits = p.Limits.orGEN2()
	if len(b) < QuantumSize {
		return &ShortError{Need: QuantumSize, Have: len(b)}
	}
	v := WQEView(b)
	h := v.Header()
	w.Header = h
	w.Valid = h.Valid()
	w.AddFragCnt = h.AddFragCnt()
	pol := p.Polarity & 1
	if h.ValidBit() != pol {
		if !p.IgnoreValid {
			return ErrNotValid
		}
		w.add(ViolHeaderNotValid, -1, uint64(h.ValidBit()), uint64(pol))
		pol = h.ValidBit()
	}
	if w.AddFragCnt%2 == 1 && !p.Limits.PadUncounted {
		w.add(ViolPadRule, -1, uint64(w.AddFragCnt), 0)
	}
	w.Quanta = RQQuanta(h)
	w.WQEQuanta = p.WQEQuanta
	if w.WQEQuanta <= 0 {
		w.WQEQuanta = w.Quanta
	}
	w.WQEQuanta = min(w.WQEQuanta, MaxWQEQuanta)
	if w.Quanta > w.WQEQuanta {
		w.add(ViolRQFragsExceedWQE, -1, uint64(w.Quanta), uint64(w.WQEQuanta))
		w.Quanta = w.WQEQuanta
	}
	if need := w.Quanta * QuantumSize; len(b) < need {
		return &ShortError{Need: need, Have: len(b)}
	}
	n := min(w.AddFragCnt+1, 1+2*(w.Quanta-1))
	w.TotalLen = w.decodeSlots(v, 0, n, pol, &w.violations)
	if sges := len(w.Fragments()); sges > p.Limits.MaxFrags {
		w.add(ViolTooManyFrags, -1, uint64(sges), uint64(p.Limits.MaxFrags))
	}
	return nil
}

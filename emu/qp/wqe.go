// Package qp holds the queue-pair side of the device model. The files
// named wqe*.go are its SQ/RQ work-queue-element formats: typed views over
// the ring bytes that libirdma and our driver write, and the decoder the
// send engine uses to consume them (also behind `irdma-emu wqe decode`).
//
// The layouts are GEN_2 (E810) as rdma-core's and Linux's uk.c write them
// (docs/hw-datapath.md, "SQ opcodes" to "RQ WQE"), and pinned by the bytes
// the real, unmodified libirdma wrote (testdata/libirdma-wqe.json). They are
// written here independently of the driver half's encoder (driver/uk): the
// two sides of the hardware interface must not share code.
//
// Conventions follow irdma: "qwordN" is the little-endian 64-bit word at
// byte offset 8·N of a WQE; a quantum is 32 bytes; a WQE is 1..8 quanta;
// the header is qword3 of the first quantum and is written last, with the
// valid bit at the ring's current polarity.
package qp

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Ring geometry (docs/hw-datapath.md "SQ ring geometry").
const (
	// QuantumSize is the size of one SQ/RQ quantum (IRDMA_QP_WQE_MIN_SIZE).
	QuantumSize = 32
	// MaxWQEQuanta is the largest WQE, IRDMA_QP_WQE_MAX_SIZE (256 B) / 32.
	MaxWQEQuanta = 8
	// FragSlotSize is the size of one fragment slot (docs/hw-datapath.md
	// "Fragments").
	FragSlotSize = 16
	// MaxFragSlots is how many fragment slots fit in MaxWQEQuanta quanta:
	// slot 0 in the first quantum, two in every further one. It is one
	// more than GEN_2's 13 fragments + pad, so that an over-limit WQE can
	// still be decoded whole and reported.
	MaxFragSlots = 1 + 2*(MaxWQEQuanta-1)
	// MaxInlineCapacity is how many inline bytes 8 quanta can carry (8 in the
	// first quantum, 31 in each further one, docs/hw-datapath.md "Inline
	// data").
	MaxInlineCapacity = 8 + 31*(MaxWQEQuanta-1)
)

// WQELimits are the generation limits the decoder enforces, from the
// device profile (WQELimitsFrom); GEN2WQELimits holds the E810 values.
type WQELimits struct {
	MaxFrags    int // max_hw_wq_frags: SGEs per SEND/WRITE/RQ WQE
	MaxReadSGEs int // max_hw_read_sges: sink SGEs per RDMA READ
	MaxInline   int // max_hw_inline: inline bytes per WQE
	ChunkQuanta int // max_hw_sq_chunk: a WQE never crosses a multiple of this
	// PadUncounted: an even fragment count's pad slot is not counted in
	// ADDFRAGCNT (GEN_3, uk.c counts it only on GEN_2), so an odd
	// ADDFRAGCNT is legal and its quanta round up. The zero value is
	// GEN_2's rule.
	PadUncounted bool
}

// GEN2WQELimits are the E810 values (docs/hw-datapath.md "GEN_2
// capabilities", irdma_sc_dev_init and icrdma_init_hw).
var GEN2WQELimits = WQELimits{
	MaxFrags:    13,
	MaxReadSGEs: 13,
	MaxInline:   101,
	ChunkQuanta: 8,
}

// WQELimitsFrom takes the limits from a device profile's uk_attrs.
func WQELimitsFrom(p profile.Profile) WQELimits {
	return WQELimits{
		MaxFrags:    int(p.UK.MaxHWWQFrags),
		MaxReadSGEs: int(p.UK.MaxHWReadSGEs),
		MaxInline:   int(p.UK.MaxHWInline),
		ChunkQuanta: int(p.UK.MaxHWSQChunk),

		PadUncounted: !p.Queues.PadFragCounted,
	}
}

func (l WQELimits) orGEN2() WQELimits {
	if l == (WQELimits{}) || l == (WQELimits{PadUncounted: true}) {
		g := GEN2WQELimits
		g.PadUncounted = l.PadUncounted
		return g
	}
	return l
}

// Header qword (qword3 of the first quantum) field positions,
// docs/hw-datapath.md "SQ WQE header" (IRDMAQPSQ_* in defs.h). Several fields
// overlap; which one a bit means depends on the opcode.
const (
	hdrRemSTagMask      = 0xffff_ffff // [31:0] REMSTAG
	hdrAHIDMask         = 0x1_ffff    // [16:0] AHID (overlaps REMSTAG; OOT widens to [24:0])
	hdrSTagKeyMask      = 0xff        // [7:0] STAGKEY (fast register)
	hdrSTagIndexShift   = 8           // [31:8] STAGINDEX (fast register)
	hdrSTagIndexMask    = 0xff_ffff
	hdrOpcodeShift      = 32 // [37:32] OPCODE
	hdrOpcodeMask       = 0x3f
	hdrAddFragCntShift  = 38 // [41:38] ADDFRAGCNT
	hdrAddFragCntMask   = 0xf
	hdrL4LenShift       = 42 // [45:42] L4LEN (UD)
	hdrL4LenMask        = 0xf
	hdrCopyHostPBLBit   = 43 // COPY_HOST_PBL, never set by the verbs paths
	hdrLPBLSizeShift    = 44 // [45:44] LPBLSIZE (fast register)
	hdrLPBLSizeMask     = 0x3
	hdrReportRTTBit     = 46
	hdrHPageSizeShift   = 46 // [47:46] HPAGESIZE (fast register)
	hdrHPageSizeMask    = 0x3
	hdrImmDataFlagBit   = 47
	hdrInlineLenShift   = 48 // [55:48] INLINEDATALEN
	hdrInlineLenMask    = 0xff
	hdrSTagRightsShift  = 48 // [52:48] STAGRIGHTS (bind MW, fast register)
	hdrSTagRightsMask   = 0x1f
	hdrVABasedTOBit     = 53
	hdrMemWindowTypeBit = 54
	hdrRemoteAtomicsBit = 55
	hdrPushWQEBit       = 56
	hdrInlineFlagBit    = 57
	hdrStreamModeBit    = 58 // iWARP LSMM
	hdrWaitRcvPDUBit    = 59 // iWARP LSMM
	hdrReadFenceBit     = 60
	hdrLocalFenceBit    = 61 // also UDPHEADER on a UD send
	hdrSigComplBit      = 62
	hdrValidBit         = 63
)

// Header is the SQ WQE header qword (qword3 of the first quantum), or the
// RQ WQE's qword3, which uses the same ADDFRAGCNT and VALID positions.
// Accessors extract one field each; overlapping fields are all offered and
// the caller picks by opcode, as the hardware must.
type Header uint64

func (h Header) bit(n uint) bool { return h>>n&1 == 1 }

// Valid is the VALID bit [63].
func (h Header) Valid() bool { return h.bit(hdrValidBit) }

// ValidBit is VALID as 0 or 1.
func (h Header) ValidBit() uint8 { return uint8(h >> hdrValidBit) }

// Opcode is OPCODE [37:32].
func (h Header) Opcode() Opcode { return Opcode(h >> hdrOpcodeShift & hdrOpcodeMask) }

// AddFragCnt is ADDFRAGCNT [41:38].
func (h Header) AddFragCnt() int { return int(h >> hdrAddFragCntShift & hdrAddFragCntMask) }

// RemSTag is REMSTAG [31:0]: the R_Key of WRITE/READ/atomics, or the STag
// to invalidate of SEND_INV.
func (h Header) RemSTag() uint32 { return uint32(h & hdrRemSTagMask) }

// AHID is AHID [16:0], the UD address-handle index.
func (h Header) AHID() uint32 { return uint32(h & hdrAHIDMask) }

// L4Len is L4LEN [45:42] (UD; 0 from verbs).
func (h Header) L4Len() uint8 { return uint8(h >> hdrL4LenShift & hdrL4LenMask) }

// ReportRTT is REPORTRTT [46].
func (h Header) ReportRTT() bool { return h.bit(hdrReportRTTBit) }

// ImmDataFlag is IMMDATAFLAG [47]: immediate data in qword0.
func (h Header) ImmDataFlag() bool { return h.bit(hdrImmDataFlagBit) }

// InlineLen is INLINEDATALEN [55:48].
func (h Header) InlineLen() int { return int(h >> hdrInlineLenShift & hdrInlineLenMask) }

// InlineFlag is INLINEDATAFLAG [57].
func (h Header) InlineFlag() bool { return h.bit(hdrInlineFlagBit) }

// Push is PUSHWQE [56].
func (h Header) Push() bool { return h.bit(hdrPushWQEBit) }

// ReadFence is READFENCE [60] (IB_SEND_FENCE).
func (h Header) ReadFence() bool { return h.bit(hdrReadFenceBit) }

// LocalFence is LOCALFENCE [61]; on a UD send the same bit is UDPHEADER.
func (h Header) LocalFence() bool { return h.bit(hdrLocalFenceBit) }

// Signaled is SIGCOMPL [62]: generate a CQE.
func (h Header) Signaled() bool { return h.bit(hdrSigComplBit) }

// StreamMode is STREAMMODE [58] (iWARP LSMM only).
func (h Header) StreamMode() bool { return h.bit(hdrStreamModeBit) }

// WaitForRcvPDU is WAITFORRCVPDU [59] (iWARP LSMM only).
func (h Header) WaitForRcvPDU() bool { return h.bit(hdrWaitRcvPDUBit) }

// STagRights is STAGRIGHTS [52:48] (bind MW, fast register).
func (h Header) STagRights() uint8 { return uint8(h >> hdrSTagRightsShift & hdrSTagRightsMask) }

// VABased is VABASEDTO [53]: 1 = VA-based, 0 = zero-based.
func (h Header) VABased() bool { return h.bit(hdrVABasedTOBit) }

// MemWindowType1 is MEMWINDOWTYPE [54]: 1 = type-1 window.
func (h Header) MemWindowType1() bool { return h.bit(hdrMemWindowTypeBit) }

// RemoteAtomics is REMOTE_ATOMICS_EN [55] (bind MW).
func (h Header) RemoteAtomics() bool { return h.bit(hdrRemoteAtomicsBit) }

// STagKey is STAGKEY [7:0] (fast register).
func (h Header) STagKey() uint8 { return uint8(h & hdrSTagKeyMask) }

// STagIndex is STAGINDEX [31:8] (fast register).
func (h Header) STagIndex() uint32 { return uint32(h >> hdrSTagIndexShift & hdrSTagIndexMask) }

// LPBLSize is LPBLSIZE [45:44], the fast-register PBL level.
func (h Header) LPBLSize() uint8 { return uint8(h >> hdrLPBLSizeShift & hdrLPBLSizeMask) }

// HPageSize is HPAGESIZE [47:46], the fast-register page size.
func (h Header) HPageSize() PageSize { return PageSize(h >> hdrHPageSizeShift & hdrHPageSizeMask) }

// PageSize is the fast-register HPAGESIZE encoding (irdma_page_size).
type PageSize uint8

// HPAGESIZE values; 3 is reserved.
const (
	PageSize4K PageSize = 0
	PageSize2M PageSize = 1
	PageSize1G PageSize = 2
)

func (p PageSize) String() string {
	switch p {
	case PageSize4K:
		return "4K"
	case PageSize2M:
		return "2M"
	case PageSize1G:
		return "1G"
	}
	return "reserved"
}

// Fragment slot layout, GEN_2 (docs/hw-datapath.md "Fragments",
// irdma_set_fragment): the first qword is the address, the second VALID[63] |
// FRAG_LEN[62:32] | FRAG_STAG[31:0].
const (
	fragLenShift  = 32
	fragLenMask   = 0x7fff_ffff
	fragSTagMask  = 0xffff_ffff
	fragValidBit  = 63
	qwordSize     = 8
	headerOffset  = 24 // qword3 of the first quantum
	inlineValidAt = 31 // per-quantum inline valid byte (quantum k ≥ 1, irdma_copy_inline_data)
)

// FragSlot is a 16-byte fragment slot view. Accessors do not bounds-check:
// callers slice it from a WQE whose length they have checked.
type FragSlot []byte

// Addr is FRAG_TO, the fragment address.
func (f FragSlot) Addr() uint64 { return binary.LittleEndian.Uint64(f[0:]) }

// Len is FRAG_LEN [62:32] of the second qword (31 bits).
func (f FragSlot) Len() uint32 {
	return uint32(binary.LittleEndian.Uint64(f[8:]) >> fragLenShift & fragLenMask)
}

// STag is FRAG_STAG [31:0] of the second qword (the L_Key).
func (f FragSlot) STag() uint32 { return uint32(binary.LittleEndian.Uint64(f[8:]) & fragSTagMask) }

// Valid is VALID [63] of the second qword.
func (f FragSlot) Valid() bool { return binary.LittleEndian.Uint64(f[8:])>>fragValidBit == 1 }

// Empty reports whether the slot has the shape of an empty (pad) slot:
// address, length and STag all zero (irdma_set_fragment with sge == NULL).
func (f FragSlot) Empty() bool { return f.Addr() == 0 && f.Len() == 0 && f.STag() == 0 }

// FragSlotOffset is the byte offset of fragment slot k in a WQE: slot 0 is
// bytes 0..15 of the first quantum, slot k ≥ 1 starts at 32 + 16·(k−1)
// (irdma_uk_send: byte_off = 32, += 16 per SGE).
func FragSlotOffset(k int) int {
	if k == 0 {
		return 0
	}
	return QuantumSize + FragSlotSize*(k-1)
}

// InlineByteOffset is the byte offset in a GEN_2 WQE of inline byte i
// (irdma_copy_inline_data): bytes 0..7 at WQE bytes 8..15, then 31 bytes
// per further quantum, skipping each quantum's last byte (the inline valid
// byte).
func InlineByteOffset(i int) int {
	if i < 8 {
		return 8 + i
	}
	k := (i-8)/31 + 1
	return QuantumSize*k + (i-8)%31
}

// InlineQuanta is irdma_inline_data_size_to_quanta for GEN_2/3: the quanta
// an inline WQE of n bytes occupies (capped at MaxWQEQuanta).
func InlineQuanta(n int) int {
	if n <= 8 {
		return 1
	}
	q := 1 + (n-8+30)/31
	if q > MaxWQEQuanta {
		q = MaxWQEQuanta
	}
	return q
}

// WQEView is the byte view of one WQE (SQ or RQ) as it lies in the ring,
// starting at its first quantum. Accessors do not bounds-check; the
// decoder checks the length first (gVisor header style, G3).
type WQEView []byte

// Qword is the little-endian 64-bit word at byte offset 8·i.
func (v WQEView) Qword(i int) uint64 { return binary.LittleEndian.Uint64(v[qwordSize*i:]) }

// Header is qword3 of the first quantum.
func (v WQEView) Header() Header { return Header(v.Qword(3)) }

// FragSlot is fragment slot k.
func (v WQEView) FragSlot(k int) FragSlot {
	off := FragSlotOffset(k)
	return FragSlot(v[off : off+FragSlotSize])
}

// ImmData is the immediate in qword0 (IRDMAQPSQ_IMMDATA; only the low 32
// bits are meaningful, docs/hw-datapath.md "SQ WQE body").
func (v WQEView) ImmData() uint32 { return uint32(v.Qword(0)) }

// RemoteVA is qword2 as FRAG_TO/REMTO: the remote address of WRITE, READ
// and atomics.
func (v WQEView) RemoteVA() uint64 { return v.Qword(2) }

// DestQKey is qword2 DESTQKEY [31:0] (UD sends).
func (v WQEView) DestQKey() uint32 { return uint32(v.Qword(2)) }

// DestQPN is qword2 DESTQPN [55:32] (UD sends).
func (v WQEView) DestQPN() uint32 { return uint32(v.Qword(2) >> 32 & 0xff_ffff) }

// AtomicLocalVA is qword0 of an atomic WQE: where the original value lands.
func (v WQEView) AtomicLocalVA() uint64 { return v.Qword(0) }

// AtomicLocalSTag is qword1 LOCSTAG [31:0] of an atomic WQE.
func (v WQEView) AtomicLocalSTag() uint32 { return uint32(v.Qword(1)) }

// AtomicSwapAdd is qword4 (byte 32) of an atomic WQE: the add value
// (FETCH_ADD) or the swap value (COMPARE_SWAP), docs/hw-datapath.md "Atomic
// WQEs".
func (v WQEView) AtomicSwapAdd() uint64 { return v.Qword(4) }

// AtomicCompare is qword5 (byte 40) of a COMPARE_SWAP WQE.
func (v WQEView) AtomicCompare() uint64 { return v.Qword(5) }

// LocalInvSTag is the target STag of a LOCAL_INV WQE: FRAG_STAG of qword1
// (whose valid bit is forced 0, docs/hw-datapath.md "Memory and NOP WQEs").
func (v WQEView) LocalInvSTag() uint32 { return uint32(v.Qword(1) & fragSTagMask) }

// BindVA is qword0 of a BIND_MW WQE: the window VA (0 when zero-based).
func (v WQEView) BindVA() uint64 { return v.Qword(0) }

// BindParentSTag is PARENTMRSTAG [63:32] of qword1 (GEN_2 layout).
func (v WQEView) BindParentSTag() uint32 { return uint32(v.Qword(1) >> 32) }

// BindMWSTag is MWSTAG [31:0] of qword1 (GEN_2 layout).
func (v WQEView) BindMWSTag() uint32 { return uint32(v.Qword(1)) }

// BindLen is MWLEN, qword2 in full.
func (v WQEView) BindLen() uint64 { return v.Qword(2) }

// FastRegVA is qword0 of a FAST_REGISTER WQE: the VA (VA-based) or the
// first-byte offset (zero-based).
func (v WQEView) FastRegVA() uint64 { return v.Qword(0) }

// FastRegPBLAddr is PBLADDR [63:12] of qword1: the page-list address.
func (v WQEView) FastRegPBLAddr() uint64 { return v.Qword(1) &^ 0xfff }

// FastRegFirstPBLIndex joins FIRSTPMPBLIDXHI (qword1 [11:0], bits 27:16
// of the index) and FIRSTPMPBLIDXLO (qword2 [63:48], bits 15:0).
func (v WQEView) FastRegFirstPBLIndex() uint32 {
	return uint32(v.Qword(1)&0xfff)<<16 | uint32(v.Qword(2)>>48)
}

// FastRegLen is STAGLEN [40:0] of qword2: the region length.
func (v WQEView) FastRegLen() uint64 { return v.Qword(2) & (1<<41 - 1) }

package uk

// Hardware layout constants, written from defs.h (IRDMAQPSQ_*, IRDMA_CQ_*,
// IRDMACQ_*) and uk.c (docs/hw-datapath.md), independently of emu/qp.

// Ring geometry (docs/hw-datapath.md "SQ ring geometry").
const (
	QuantumSize = 32  // IRDMA_QP_WQE_MIN_SIZE
	MaxWQEBytes = 256 // IRDMA_QP_WQE_MAX_SIZE
	// SQReserve is IRDMA_SQ_RSVD: quanta the SQ depth keeps spare.
	SQReserve = 258
	// sqFreeSlack is the 257 of IRDMA_SQ_RING_FREE_QUANTA.
	sqFreeSlack = 257
	// RQReserve is IRDMA_RQ_RSVD.
	RQReserve = 1
	// clrStride is the irdma_clr_wqes granule: every 128th WQE index
	// clears the 128 quanta (4 KiB) one stride ahead.
	clrStride = 128
	// CQESize is a GEN_2 CQE (struct irdma_cqe).
	CQESize = 32
	// ShadowAreaSize is the QP and CQ shadow area.
	ShadowAreaSize = 64
)

// Hardware SQ opcodes, header OPCODE [37:32] (docs/hw-datapath.md "SQ
// opcodes").
const (
	OpRDMAWrite         uint8 = 0x00
	OpRDMARead          uint8 = 0x01
	OpSend              uint8 = 0x03
	OpSendInv           uint8 = 0x04
	OpSendSol           uint8 = 0x05
	OpSendSolInv        uint8 = 0x06
	OpBindMW            uint8 = 0x08
	OpFastRegNSMR       uint8 = 0x09
	OpInvSTag           uint8 = 0x0a
	OpRDMAReadInvSTag   uint8 = 0x0b
	OpNOP               uint8 = 0x0c
	OpRDMAWriteSol      uint8 = 0x0d
	OpAtomicFetchAdd    uint8 = 0x0f
	OpAtomicCompareSwap uint8 = 0x11
	OpRec               uint8 = 0x3e // software-only RQ completion codes
	OpRecImm            uint8 = 0x3f
)

// SQ WQE header bits (qword3 of the first quantum, docs/hw-datapath.md "SQ
// WQE header").
const (
	sqOpcodeShift      = 32
	sqAddFragCntShift  = 38
	sqL4LenShift       = 42
	sqLPBLSizeShift    = 44
	sqHPageSizeShift   = 46
	sqInlineLenShift   = 48
	sqSTagRightsShift  = 48
	sqSTagIndexShift   = 8
	sqAHIDMask         = 0x1_ffff
	sqImmDataFlag      = uint64(1) << 47
	sqVABasedTO        = uint64(1) << 53
	sqMemWindowType1   = uint64(1) << 54
	sqRemoteAtomicsEn  = uint64(1) << 55
	sqPushWQE          = uint64(1) << 56
	sqInlineDataFlag   = uint64(1) << 57
	sqReadFence        = uint64(1) << 60
	sqLocalFence       = uint64(1) << 61
	sqSigCompl         = uint64(1) << 62
	sqValidShift       = 63
	fragLenShift       = 32
	fragLenMask        = 0x7fff_ffff
	destQPNShift       = 32
	destQPNMask        = 0xff_ffff
	stagLenMask        = uint64(1)<<41 - 1
	firstPBLIdxLoShift = 48
	inlineValidShift   = 7 // IRDMA_INLINE_VALID_S
)

// QP shadow area (docs/hw-datapath.md "QP shadow area"): qword0 [14:0] is the
// hardware SQ tail.
const qpShadowHWSQTailMask = 0x7fff

// CQ shadow area (docs/hw-datapath.md "CQ shadow area and arming").
const (
	cqShadowHeadMask    = 0xf_ffff // qword0 IRDMA_CQ_DBSA_CQEIDX
	cqShadowArmOffset   = 32       // qword4
	cqArmSWCQSelectMask = 0x3fff   // [13:0]
	cqArmNextBit        = 14
	cqArmNextSEBit      = 15
	cqArmSeqShift       = 16 // [17:16]
	cqArmSeqMask        = 0x3
)

// CQE fields (docs/hw-datapath.md "CQE layout", "CQE extension").
const (
	cqeQword3Offset = 24
	cqeMinErrMask   = 0xffff
	cqeMajErrShift  = 16
	cqeWQEIdxShift  = 32
	cqeWQEIdxMask   = 0x7fff
	cqeExtBit       = 50
	cqePushDropBit  = 51
	cqeSRQBit       = 52
	cqeSTagBit      = 53 // also IPv4 on UD
	cqeSolEventBit  = 54
	cqeErrorBit     = 55
	cqeOpShift      = 56
	cqeOpMask       = 0x3f
	cqeSQBit        = 62
	cqeValidBit     = 63
	cqeQPIDShift    = 32
	cqeQPIDMask     = 0xff_ffff
	cqeUDVLANValid  = 60
	cqeUDSMACValid  = 61
	cqeImmValid     = 62
	cqeUDSMACMask   = uint64(1)<<48 - 1
	cqeUDVLANShift  = 48
)

// CQE major error codes (docs/hw-datapath.md "CQE error codes").
const (
	MajorFlush         uint16 = 0x0001 // IRDMA_FLUSH_MAJOR_ERR
	MajorSRQFlushRsvd  uint16 = 0xfffe // IRDMA_SRQFLUSH_RSVD_MAJOR_ERR (GEN_3)
	cieSignatureNibble uint16 = 0xe    // IRDMA_CIE_SIGNATURE, major [15:12]
)

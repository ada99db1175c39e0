package cq

// CQE qword 3 fields (docs/hw-datapath.md "CQE layout"; defs.h IRDMA_CQ_*,
// IRDMACQ_*).
const (
	cqeMinorMask     = 0xffff // [15:0] IRDMA_CQ_MINERR
	cqeMajorShift    = 16     // [31:16] IRDMA_CQ_MAJERR
	cqeMajorMask     = 0xffff
	cqeWQEIdxShift   = 32 // [46:32] IRDMA_CQ_WQEIDX
	cqeWQEIdxMask    = 0x7fff
	cqeExtBit        = 50 // IRDMA_CQ_EXTCQE
	cqePushDropBit   = 51 // IRDMACQ_PSHDROP
	cqeSRQBit        = 52 // IRDMA_CQ_SRQ (GEN_3)
	cqeSTagBit       = 53 // IRDMACQ_STAG and IRDMACQ_IPV4 (same bit)
	cqeSolEventBit   = 54 // IRDMACQ_SOEVENT
	cqeErrorBit      = 55 // IRDMA_CQ_ERROR
	cqeOpShift       = 56 // [61:56] IRDMACQ_OP
	cqeOpMask        = 0x3f
	cqeSQBit         = 62 // IRDMA_CQ_SQ: 1 = SQ, 0 = RQ
	cqeValidBit      = 63 // IRDMA_CQ_VALID
	cqeQPIDShift     = 32 // qword2 [55:32] IRDMACQ_QPID
	cqeQPIDMask      = 0xff_ffff
	cqeExtVLANShift  = 48 // qword6 [63:48] IRDMA_CQ_UDVLAN
	cqeExtVLANValid  = 60 // qword7 IRDMA_CQ_UDVLANVALID
	cqeExtSMACValid  = 61 // qword7 IRDMA_CQ_UDSMACVALID
	cqeExtImmValid   = 62 // qword7 IRDMA_CQ_IMMVALID
	validMask        = uint64(1) << cqeValidBit
	cqeQword3NoValid = ^validMask
)

// Error codes a CQE carries (docs/hw-datapath.md "CQE error codes").
const (
	// MajorFlush is IRDMA_FLUSH_MAJOR_ERR: the minor is a flush code.
	MajorFlush uint16 = 0x0001
)

// Flush minor codes, enum irdma_flush_opcode (docs/hw-datapath.md "Flush
// codes").
const (
	FlushInvalid       uint16 = 0
	FlushGeneralErr    uint16 = 1
	FlushProtErr       uint16 = 2
	FlushRemAccessErr  uint16 = 3
	FlushLocQPOpErr    uint16 = 4
	FlushRemOpErr      uint16 = 5
	FlushLocLenErr     uint16 = 6
	FlushFatalErr      uint16 = 7
	FlushRetryExcErr   uint16 = 8
	FlushMWBindErr     uint16 = 9
	FlushRemInvReqErr  uint16 = 10
	FlushRNRRetryExErr uint16 = 11
)

// CQE is one completion, every field of the GEN_2 32-byte CQE and its
// extension (docs/hw-datapath.md "CQE layout", "CQE extension"). The valid
// bit is not a field: the CQ writes it at its polarity.
type CQE struct {
	PayloadLen uint32 // qword0 [31:0] IRDMACQ_PAYLDLEN
	PSN        uint32 // qword0 [63:32] IRDMACQ_TCPSQN_ROCEPSN_RTT_TS
	QPCtx      uint64 // qword1 IRDMA_CQ_QPCTX (SRQ CQEs: the WQE's wr_id; CCQEs: the CQP context)
	// Qword2Low is qword2 [31:0]: IRDMACQ_INVSTAG (RC), IRDMACQ_UDSRCQPN
	// (UD), or OP_RETVAL in a CCQE.
	Qword2Low uint32
	// Qword2High is qword2 [63:32]: IRDMACQ_QPID in [55:32] of a CQE, or
	// DEFINFO in a CCQE. QPID sets it for ordinary CQEs.
	Qword2High uint32
	Minor      uint16 // qword3 [15:0]
	Major      uint16 // qword3 [31:16]
	WQEIdx     uint16 // qword3 [46:32], quanta (15 bits)
	PushDrop   bool   // qword3 b51
	SRQ        bool   // qword3 b52
	STagOrIPv4 bool   // qword3 b53: invalidated STag valid (RC) / IPv4 (UD)
	SolEvent   bool   // qword3 b54: solicited event
	Error      bool   // qword3 b55
	Op         uint8  // qword3 [61:56]
	SQ         bool   // qword3 b62: 1 SQ, 0 RQ

	// Ext asks for the extension (EXTCQE b50): qwords 4–7 in the next
	// ring slot (32-byte CQEs) or in bytes 32–63 (64-byte CQEs).
	Ext       bool
	Imm       uint32  // qword4 [31:0] IRDMA_CQ_IMMDATALOW32
	ImmValid  bool    // qword7 b62
	SRQQPCtx  uint64  // qword5: QP context of an SRQ completion
	SMAC      [6]byte // qword6 [47:0], SMAC[0] in [47:40]
	SMACValid bool    // qword7 b61
	VLAN      uint16  // qword6 [63:48]
	VLANValid bool    // qword7 b60
}

// SetQPID places a QP number in qword2 [55:32].
func (e *CQE) SetQPID(id uint32) { e.Qword2High = id & cqeQPIDMask }

// QPID returns qword2 [55:32].
func (e *CQE) QPID() uint32 { return e.Qword2High & cqeQPIDMask }

func b64(b bool, bit uint) uint64 {
	if b {
		return 1 << bit
	}
	return 0
}

// Encode returns the base qwords (qword3 without the valid bit) and, when
// e.Ext, the extension qwords (qword7 without the valid bit).
func (e *CQE) Encode() (base, ext [4]uint64) {
	base[0] = uint64(e.PayloadLen) | uint64(e.PSN)<<32
	base[1] = e.QPCtx
	base[2] = uint64(e.Qword2Low) | uint64(e.Qword2High)<<32
	base[3] = uint64(e.Minor) | uint64(e.Major)<<cqeMajorShift |
		uint64(e.WQEIdx&cqeWQEIdxMask)<<cqeWQEIdxShift |
		b64(e.Ext, cqeExtBit) | b64(e.PushDrop, cqePushDropBit) | b64(e.SRQ, cqeSRQBit) |
		b64(e.STagOrIPv4, cqeSTagBit) | b64(e.SolEvent, cqeSolEventBit) |
		b64(e.Error, cqeErrorBit) | uint64(e.Op&cqeOpMask)<<cqeOpShift | b64(e.SQ, cqeSQBit)
	if e.Ext {
		var mac uint64
		for _, b := range e.SMAC {
			mac = mac<<8 | uint64(b)
		}
		ext[0] = uint64(e.Imm)
		ext[1] = e.SRQQPCtx
		ext[2] = mac | uint64(e.VLAN)<<cqeExtVLANShift
		ext[3] = b64(e.VLANValid, cqeExtVLANValid) | b64(e.SMACValid, cqeExtSMACValid) | b64(e.ImmValid, cqeExtImmValid)
	}
	return base, ext
}

// DecodeCQE is the inverse of Encode for a base CQE (qword3 as read from
// the ring, valid bit ignored) and its extension; for tests and tools.
func DecodeCQE(base, ext [4]uint64) CQE {
	q3 := base[3]
	e := CQE{
		PayloadLen: uint32(base[0]),
		PSN:        uint32(base[0] >> 32),
		QPCtx:      base[1],
		Qword2Low:  uint32(base[2]),
		Qword2High: uint32(base[2] >> 32),
		Minor:      uint16(q3 & cqeMinorMask),
		Major:      uint16(q3 >> cqeMajorShift & cqeMajorMask),
		WQEIdx:     uint16(q3 >> cqeWQEIdxShift & cqeWQEIdxMask),
		Ext:        q3>>cqeExtBit&1 == 1,
		PushDrop:   q3>>cqePushDropBit&1 == 1,
		SRQ:        q3>>cqeSRQBit&1 == 1,
		STagOrIPv4: q3>>cqeSTagBit&1 == 1,
		SolEvent:   q3>>cqeSolEventBit&1 == 1,
		Error:      q3>>cqeErrorBit&1 == 1,
		Op:         uint8(q3 >> cqeOpShift & cqeOpMask),
		SQ:         q3>>cqeSQBit&1 == 1,
	}
	if e.Ext {
		e.Imm = uint32(ext[0])
		e.SRQQPCtx = ext[1]
		for i := range e.SMAC {
			e.SMAC[i] = byte(ext[2] >> (40 - 8*uint(i)))
		}
		e.VLAN = uint16(ext[2] >> cqeExtVLANShift)
		e.VLANValid = ext[3]>>cqeExtVLANValid&1 == 1
		e.SMACValid = ext[3]>>cqeExtSMACValid&1 == 1
		e.ImmValid = ext[3]>>cqeExtImmValid&1 == 1
	}
	return e
}

package uk

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"syscall"
)

// Errors are errno values, as irdma's uk functions return them: EINVAL
// for a request the QP or device cannot carry, ENOMEM for a full ring,
// ENOENT for an empty CQ, EFAULT for a CQE of a destroyed QP. Test with
// errors.Is. (A syscall.Errno below 256 converts to error without
// allocating.)
var (
	ErrInvalid     error = syscall.EINVAL
	ErrNoMem       error = syscall.ENOMEM
	ErrCQEmpty     error = syscall.ENOENT
	ErrQPDestroyed error = syscall.EFAULT
)

// QPType is irdma's qp_type.
type QPType uint8

// QP types (defs.h IRDMA_QP_TYPE_*); the emulator is RoCEv2 only.
const (
	QPTypeRC QPType = 3 // IRDMA_QP_TYPE_ROCE_RC
	QPTypeUD QPType = 4 // IRDMA_QP_TYPE_ROCE_UD (also GSI)
)

// QPCaps is irdma's qp_caps (user.h).
type QPCaps uint8

// QP capability bits.
const (
	CapWriteWithImm QPCaps = 1 // IRDMA_WRITE_WITH_IMM
	CapSendWithImm  QPCaps = 2 // IRDMA_SEND_WITH_IMM
)

// DefaultCaps are the caps irdma_create_qp gives a RoCE QP: RC both
// immediates, UD send-with-immediate only (docs/hw-datapath.md "Posting from
// the kernel").
func DefaultCaps(t QPType) QPCaps {
	if t == QPTypeUD {
		return CapSendWithImm
	}
	return CapSendWithImm | CapWriteWithImm
}

// ring is irdma's struct irdma_ring and the IRDMA_RING_* macros.
type ring struct {
	head, tail atomic.Uint32 // head: the poster's; tail: the poller's (read by both, under different locks)
	size       uint32
}

func (r *ring) used() uint32   { return (r.head.Load() + r.size - r.tail.Load()) % r.size }
func (r *ring) moreWork() bool { return r.used() != 0 }
func (r *ring) full() bool     { return r.used() == r.size-1 }

// sqFree is IRDMA_SQ_RING_FREE_QUANTA: size − used − 257, never negative.
func (r *ring) sqFree() uint32 {
	if f := int64(r.size) - int64(r.used()) - sqFreeSlack; f > 0 {
		return uint32(f)
	}
	return 0
}

// SQTrack is one entry of the SQ tracking array (sq_wrtrk_array),
// indexed by the WQE's first quantum: what a completion maps back to.
type SQTrack struct {
	WrID     uint64
	WrLen    uint32 // total length posted, reported as byte_len on success
	Quanta   uint16 // quanta the WQE occupies; the SQ tail advances by it
	Signaled bool
}

// QPConfig describes a kernel-mode QP's rings (irdma_qp_uk_init_info).
type QPConfig struct {
	Limits Limits
	ID     uint32 // QP number: the SQ doorbell value
	Type   QPType
	// Caps are the QP's caps; zero means DefaultCaps(Type).
	Caps QPCaps
	// SQ is the SQ ring: depth × 32 bytes, depth a power of two (see
	// KernelQPSizes). SQShift is its WQE shift.
	SQ      []byte
	SQShift uint8
	// RQ is the RQ ring: rq_size WQEs of (32 << RQShift) bytes.
	RQ      []byte
	RQShift uint8
	// Shadow is the QP shadow area; qword0 [14:0] is the hardware SQ tail the
	// doorbell suppression reads (docs/hw-datapath.md "QP shadow area").
	Shadow []byte
	// MaxSQFragCnt, MaxRQFragCnt and MaxInlineData are the QP's
	// max_send_sge, max_recv_sge and max_inline_data.
	MaxSQFragCnt  int
	MaxRQFragCnt  int
	MaxInlineData int
	// SignalAll is IB_SIGNAL_ALL_WR.
	SignalAll bool
	// SRQ is the shared receive queue the QP takes its receives from
	// (irdma_qp_uk_init_info srq_uk; GEN_3): its SRQ CQEs retire the SRQ's
	// WQEs, and PostReceive on the QP is refused.
	SRQ *SRQ
}

// QP is the uk QP: SQ and RQ producer state (irdma_qp_uk).
type QP struct {
	lim    Limits
	id     uint32
	typ    QPType
	caps   QPCaps
	sqBuf  []byte
	rqBuf  []byte
	shadow []byte

	sq          ring
	initialHead uint32 // initial_ring.head: the head at the last doorbell decision
	swqePol     uint8
	sqTrk       []SQTrack

	rq        ring
	rwqePol   uint8
	rqMult    uint32 // rq_wqe_size_multiplier = 1 << rq_shift
	rqWrID    []uint64
	maxSQFrag int
	maxRQFrag int
	maxInline int
	sigAll    bool
	srq       *SRQ
}

// NewQP sets up a QP over the given rings, as irdma_uk_qp_init does for
// a RoCE QP: both rings empty, SQ and RQ polarity 0 (so the first lap is
// written with VALID=1, since index 0 toggles it).
func NewQP(cfg QPConfig) (*QP, error) {
	lim := cfg.Limits
	bad := func(format string, a ...any) (*QP, error) {
		return nil, fmt.Errorf("uk: "+format+": %w", append(a, ErrInvalid)...)
	}
	if cfg.Type != QPTypeRC && cfg.Type != QPTypeUD {
		return bad("QP type %d is not RoCE RC or UD", cfg.Type)
	}
	if cfg.MaxSQFragCnt < 0 || cfg.MaxSQFragCnt > lim.MaxWQFrags || cfg.MaxRQFragCnt < 0 || cfg.MaxRQFragCnt > lim.MaxWQFrags {
		return bad("fragment counts %d/%d over max_hw_wq_frags %d", cfg.MaxSQFragCnt, cfg.MaxRQFragCnt, lim.MaxWQFrags)
	}
	if cfg.MaxInlineData < 0 || cfg.MaxInlineData > lim.MaxInline {
		return bad("max inline %d over max_hw_inline %d", cfg.MaxInlineData, lim.MaxInline)
	}
	sqSize := uint32(len(cfg.SQ) / QuantumSize)
	if len(cfg.SQ)%QuantumSize != 0 || sqSize == 0 || bits.OnesCount32(sqSize) != 1 || sqSize < lim.MaxSQChunk || sqSize > lim.MaxWQQuanta {
		return bad("SQ of %d bytes is not a power-of-two number of quanta within %d..%d", len(cfg.SQ), lim.MaxSQChunk, lim.MaxWQQuanta)
	}
	if cfg.RQShift > 3 {
		return bad("RQ shift %d", cfg.RQShift)
	}
	mult := uint32(1) << cfg.RQShift
	rqQuanta := uint32(len(cfg.RQ) / QuantumSize)
	if len(cfg.RQ)%QuantumSize != 0 || rqQuanta%mult != 0 || rqQuanta/mult < 2 || rqQuanta > lim.MaxRQQuanta {
		return bad("RQ of %d bytes does not hold at least 2 WQEs of %d quanta", len(cfg.RQ), mult)
	}
	if len(cfg.Shadow) < 8 {
		return bad("shadow area of %d bytes", len(cfg.Shadow))
	}
	caps := cfg.Caps
	if caps == 0 {
		caps = DefaultCaps(cfg.Type)
	}
	rqSize := rqQuanta / mult
	return &QP{
		lim:       lim,
		id:        cfg.ID,
		typ:       cfg.Type,
		caps:      caps,
		sqBuf:     cfg.SQ,
		rqBuf:     cfg.RQ,
		shadow:    cfg.Shadow,
		sq:        ring{size: sqSize},
		sqTrk:     make([]SQTrack, sqSize),
		rq:        ring{size: rqSize},
		rqMult:    mult,
		rqWrID:    make([]uint64, rqSize),
		maxSQFrag: cfg.MaxSQFragCnt,
		maxRQFrag: cfg.MaxRQFragCnt,
		maxInline: cfg.MaxInlineData,
		sigAll:    cfg.SignalAll,
		srq:       cfg.SRQ,
	}, nil
}

// ID is the QP number.
func (q *QP) ID() uint32 { return q.id }

// Type is the QP type.
func (q *QP) Type() QPType { return q.typ }

// SQHead is the SQ producer index in quanta (where the next WQE goes).
func (q *QP) SQHead() uint32 { return q.sq.head.Load() }

// SQTail is the oldest SQ quantum not yet retired by a completion.
func (q *QP) SQTail() uint32 { return q.sq.tail.Load() }

// SQSize is the SQ ring size in quanta.
func (q *QP) SQSize() uint32 { return q.sq.size }

// SQPolarity is the valid bit of the WQEs of the current SQ lap.
func (q *QP) SQPolarity() uint8 { return q.swqePol }

// SQFreeQuanta is IRDMA_SQ_RING_FREE_QUANTA.
func (q *QP) SQFreeQuanta() uint32 { return q.sq.sqFree() }

// SQTrack is the tracking entry of the WQE starting at quantum idx.
func (q *QP) SQTrack(idx uint32) SQTrack { return q.sqTrk[idx%q.sq.size] }

// RQHead is the RQ producer index in WQEs.
func (q *QP) RQHead() uint32 { return q.rq.head.Load() }

// RQTail is the oldest RQ WQE not yet completed.
func (q *QP) RQTail() uint32 { return q.rq.tail.Load() }

// RQSize is the RQ ring size in WQEs.
func (q *QP) RQSize() uint32 { return q.rq.size }

// RQPolarity is the valid bit of the WQEs of the current RQ lap.
func (q *QP) RQPolarity() uint8 { return q.rwqePol }

// RQWrID is the wr_id of the receive posted at RQ WQE index idx.
func (q *QP) RQWrID(idx uint32) uint64 { return q.rqWrID[idx%q.rq.size] }

// QPCap are the sizes a consumer asks for at create time (ib_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QPSizes are the ring sizes irdma_setup_kmode_qp derives, and the caps
// it reports back.
type QPSizes struct {
	SQDepth uint32 // SQ ring quanta (memory: SQDepth × 32 bytes)
	SQShift uint8
	RQDepth uint32 // RQ ring quanta (memory: RQDepth × 32 bytes)
	RQShift uint8
	// MaxSendWR = (SQDepth − 258) >> SQShift and MaxRecvWR =
	// (RQDepth − 1) >> RQShift are reported in init_attr->cap.
	MaxSendWR, MaxRecvWR uint32
}

// WQEShift is irdma_get_wqe_shift for GEN_2/3: the log2 of the WQE size in
// quanta needed for sge fragments and inline bytes (docs/hw-datapath.md "SQ
// ring geometry").
func WQEShift(sge, inline uint32) uint8 {
	switch {
	case sge <= 1 && inline <= 8:
		return 0
	case sge < 4 && inline <= 39:
		return 1
	case sge < 8 && inline <= 101:
		return 2
	}
	return 3
}

// roundUpPow2 is irdma_qp_round_up.
func roundUpPow2(v uint32) uint32 {
	if v <= 1 {
		return 1
	}
	return 1 << bits.Len32(v-1)
}

// SQDepth is irdma_get_sqdepth: roundup_pow2((sqSize << shift) + 258),
// at least min_hw_wq_size << shift, at most max_hw_wq_quanta.
func SQDepth(lim Limits, sqSize uint32, shift uint8) (uint32, error) {
	return wqDepth(uint64(sqSize)<<shift+SQReserve, lim.MinWQSize<<shift, lim.MaxWQQuanta)
}

// RQDepth is irdma_get_rqdepth: roundup_pow2((rqSize << shift) + 1),
// at least min_hw_wq_size << shift, at most max_hw_rq_quanta.
func RQDepth(lim Limits, rqSize uint32, shift uint8) (uint32, error) {
	return wqDepth(uint64(rqSize)<<shift+RQReserve, lim.MinWQSize<<shift, lim.MaxRQQuanta)
}

func wqDepth(want uint64, minSize, maxSize uint32) (uint32, error) {
	if want > uint64(maxSize) {
		return 0, ErrInvalid
	}
	d := roundUpPow2(uint32(want))
	if d < minSize {
		return minSize, nil
	}
	if d > maxSize {
		return 0, ErrInvalid
	}
	return d, nil
}

// KernelQPSizes is irdma_setup_kmode_qp's sizing (with the
// irdma_validate_qp_attrs limits): the SQ shift counts one more fragment
// for the immediate on GEN_2 (irdma_uk_calc_depth_shift_sq), the RQ shift
// ignores inline.
func KernelQPSizes(lim Limits, c QPCap) (QPSizes, error) {
	if c.MaxInlineData > uint32(lim.MaxInline) || c.MaxSendSGE > uint32(lim.MaxWQFrags) || c.MaxRecvSGE > uint32(lim.MaxWQFrags) {
		return QPSizes{}, ErrInvalid
	}
	var s QPSizes
	var err error
	s.SQShift = WQEShift(c.MaxSendSGE+1, c.MaxInlineData)
	if s.SQDepth, err = SQDepth(lim, c.MaxSendWR, s.SQShift); err != nil {
		return QPSizes{}, err
	}
	s.RQShift = WQEShift(c.MaxRecvSGE, 0)
	if s.RQDepth, err = RQDepth(lim, c.MaxRecvWR, s.RQShift); err != nil {
		return QPSizes{}, err
	}
	s.MaxSendWR = (s.SQDepth - SQReserve) >> s.SQShift
	s.MaxRecvWR = (s.RQDepth - RQReserve) >> s.RQShift
	return s, nil
}

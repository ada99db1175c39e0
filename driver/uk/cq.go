package uk

import "fmt"

// CQE is a view of one 32-byte GEN_2 CQE (struct irdma_cqe,
// docs/hw-datapath.md "CQE layout"), or of the extension slot after it ("CQE
// extension"). Accessors do not bounds-check.
type CQE []byte

// Qword is the little-endian word at byte offset 8·i.
func (c CQE) Qword(i int) uint64 { return get64(c, 8*i) }

// Base CQE fields (qwords 0–3).

// PayloadLen is IRDMACQ_PAYLDLEN, qword0 [31:0]: bytes received.
func (c CQE) PayloadLen() uint32 { return uint32(c.Qword(0)) }

// StatRaw is qword0 [63:32]: TCP sequence / RoCE PSN / RTT / timestamp.
func (c CQE) StatRaw() uint32 { return uint32(c.Qword(0) >> 32) }

// QPCtx is IRDMA_CQ_QPCTX, qword1: the QP completion context.
func (c CQE) QPCtx() uint64 { return c.Qword(1) }

// InvSTag is IRDMACQ_INVSTAG, qword2 [31:0] (the UD source QPN on UD).
func (c CQE) InvSTag() uint32 { return uint32(c.Qword(2)) }

// QPID is IRDMACQ_QPID, qword2 [55:32].
func (c CQE) QPID() uint32 { return uint32(c.Qword(2) >> cqeQPIDShift & cqeQPIDMask) }

// Qword3 is the qword holding VALID; read it first, atomically.
func (c CQE) Qword3() uint64 { return load64(c, cqeQword3Offset) }

// Extension fields (the next slot on GEN_2).

// ExtImmData is IRDMA_CQ_IMMDATALOW32 of qword4.
func (c CQE) ExtImmData() uint32 { return uint32(c.Qword(0)) }

// ExtUDSMAC is IRDMA_CQ_UDSMAC of qword6, smac[0] in bits [47:40].
func (c CQE) ExtUDSMAC() [6]byte {
	v := c.Qword(2)
	return [6]byte{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// ExtUDVLAN is IRDMA_CQ_UDVLAN, qword6 [63:48].
func (c CQE) ExtUDVLAN() uint16 { return uint16(c.Qword(2) >> cqeUDVLANShift) }

// CompStatus is irdma_cmpl_status.
type CompStatus uint8

// Completion statuses.
const (
	CompSuccess CompStatus = 0 // IRDMA_COMPL_STATUS_SUCCESS
	CompFlushed CompStatus = 1 // IRDMA_COMPL_STATUS_FLUSHED
	CompUnknown CompStatus = 2 // IRDMA_COMPL_STATUS_UNKNOWN: any other error
)

// CQPollInfo is irdma_cq_poll_info: one completion as the uk layer
// reports it.
type CQPollInfo struct {
	WrID        uint64
	QP          *QP    // qp_handle
	QPCtx       uint64 // the CQE's completion context
	BytesXfered uint32
	OpType      uint8 // SQ: the WQE opcode; RQ: the IB BTH opcode received
	IsSQ        bool  // q_type: IRDMA_CQE_QTYPE_SQ
	WQEIdx      uint32
	QPID        uint32
	UDSrcQPN    uint32
	StatRaw     uint32

	Error      bool
	MajorErr   uint16
	MinorErr   uint16 // for flushes, a FlushCode
	CompStatus CompStatus

	SolicitedEvent bool
	StagInvalidSet bool
	InvSTag        uint32
	PushDropped    bool
	IPv4           bool // UD: packet was IPv4 (same bit as StagInvalidSet)

	ImmValid    bool
	ImmData     uint32
	UDSMACValid bool
	UDSMAC      [6]byte
	UDVLANValid bool
	UDVLAN      uint16
}

// CQConfig describes a kernel CQ's memory (irdma_cq_uk_init_info).
type CQConfig struct {
	ID uint32
	// Ring holds size 32-byte CQEs, or 64-byte ones with Wide (see
	// KernelCQSize).
	Ring []byte
	// Shadow is the CQ shadow area: qword0 the head software reports,
	// qword4 the arm word.
	Shadow []byte
	// Wide: 64-byte CQEs with the extension in bytes 32–63 of the same
	// entry (GEN_3 IRDMA_FEATURE_64_BYTE_CQE; CREATE_CQ AVOIDMEMCNFLCT;
	// irdma_cq_uk avoid_mem_cflct).
	Wide bool
	// HWFlushPerWQE: the hardware writes one flush CQE per WQE (GEN_3), so
	// the head is never parked on a flush CQE (uk.c: parking is for
	// hw_rev ≤ GEN_2).
	HWFlushPerWQE bool
}

// CQ is the uk CQ consumer (irdma_cq_uk), GEN_2: 32-byte CQEs, the
// extension in the next slot.
type CQ struct {
	id       uint32
	buf      []byte
	shadow   []byte
	ring     ring
	polarity uint8
	qps      map[uint64]*QP
	entry    uint32 // CQESize or 2·CQESize (Wide)
	wide     bool
	hwFlush  bool
}

// NewCQ is irdma_uk_cq_init: head 0, polarity 1 (hardware writes VALID=1
// on the first lap).
func NewCQ(cfg CQConfig) (*CQ, error) {
	entry := CQESize
	if cfg.Wide {
		entry = 2 * CQESize
	}
	n := len(cfg.Ring) / entry
	if len(cfg.Ring)%entry != 0 || n < 4 || len(cfg.Shadow) < ShadowAreaSize {
		return nil, fmt.Errorf("uk: CQ ring of %d bytes or shadow of %d: %w", len(cfg.Ring), len(cfg.Shadow), ErrInvalid)
	}
	return &CQ{id: cfg.ID, buf: cfg.Ring, shadow: cfg.Shadow, ring: ring{size: uint32(n)}, polarity: 1, qps: map[uint64]*QP{},
		entry: uint32(entry), wide: cfg.Wide, hwFlush: cfg.HWFlushPerWQE}, nil
}

// ID is the CQ number: the arm doorbell value.
func (c *CQ) ID() uint32 { return c.id }

// Head is the index of the next CQE to poll.
func (c *CQ) Head() uint32 { return c.ring.head.Load() }

// Polarity is the VALID value expected at Head.
func (c *CQ) Polarity() uint8 { return c.polarity }

// Size is the ring size in CQEs.
func (c *CQ) Size() uint32 { return c.ring.size }

// BindQP tells the CQ which QP a completion context (the value the
// device returns in CQE qword1; irdma uses the irdma_sc_qp pointer) means.
// ctx must not be 0: a zeroed qword1 marks a destroyed QP's CQE.
func (c *CQ) BindQP(ctx uint64, q *QP) { c.qps[ctx] = q }

// UnbindQP forgets a QP, as its destroy does; CQEs still carrying its
// context then poll as ErrQPDestroyed (irdma's destroy_pending).
func (c *CQ) UnbindQP(ctx uint64) { delete(c.qps, ctx) }

func (c *CQ) cqe(i uint32) CQE { return CQE(c.buf[i*c.entry : i*c.entry+CQESize]) }

// extCQE is the extension of the CQE at i: bytes 32–63 of a wide entry.
func (c *CQ) extCQE(i uint32) CQE { return CQE(c.buf[i*c.entry+CQESize : (i+1)*c.entry]) }

// Empty reports whether no valid CQE waits at the head (irdma_cq_empty).
func (c *CQ) Empty() bool {
	return uint8(c.cqe(c.ring.head.Load()).Qword3()>>cqeValidBit) != c.polarity
}

// Clean is irdma_uk_clean_cq: zero the completion context of every
// valid, unpolled CQE of ctx, so polling skips them.
func (c *CQ) Clean(ctx uint64) {
	head, pol := c.ring.head.Load(), c.polarity
	for range c.ring.size {
		e := c.cqe(head)
		if uint8(e.Qword3()>>cqeValidBit) != pol {
			return
		}
		if e.QPCtx() == ctx {
			store64(e, 8, 0)
		}
		head = (head + 1) % c.ring.size
		if head == 0 {
			pol ^= 1
		}
	}
}

// PollCmpl is irdma_uk_cq_poll_cmpl for a GEN_2 kernel CQ
// (docs/hw-datapath.md "How software consumes a CQE", "CQE error codes"): it
// returns ErrCQEmpty when no valid CQE (or extension) waits, ErrQPDestroyed
// for a CQE of a destroyed QP (consumed; poll again), or nil with info
// filled.
//
// Flushes: a flush CQE (major 1, or GEN_3's 0xfffe) stands for every
// outstanding WQE of its queue. While the queue has more, the CQ head is
// "parked" on it (not advanced) and its WQE index is rewritten to the
// queue's new tail, so each poll yields the next WQE's completion; its
// minor is rewritten to FLUSH_GENERAL_ERR after the first report.
// RoCE only: iWARP connection WQEs (first_sq_wq) and SRQs (GEN_3) are not
// handled.
func (c *CQ) PollCmpl(info *CQPollInfo) error {
	*info = CQPollInfo{}
	e := c.cqe(c.ring.head.Load())
	qword3 := e.Qword3()
	if uint8(qword3>>cqeValidBit) != c.polarity {
		return ErrCQEmpty
	}
	ext := qword3>>cqeExtBit&1 == 1
	isSRQ := qword3>>cqeSRQBit&1 == 1
	var x CQE
	if ext {
		var pol uint8
		if c.wide {
			x = c.extCQE(c.ring.head.Load())
			pol = uint8(x.Qword3() >> cqeValidBit)
		} else {
			peek := (c.ring.head.Load() + 1) % c.ring.size
			x = c.cqe(peek)
			pol = uint8(x.Qword3() >> cqeValidBit)
			if peek == 0 {
				pol ^= 1
			}
		}
		qword7 := x.Qword3()
		if pol != c.polarity {
			return ErrCQEmpty
		}
		info.ImmValid = qword7>>cqeImmValid&1 == 1
		if info.ImmValid {
			info.ImmData = x.ExtImmData()
		}
		info.UDSMACValid = qword7>>cqeUDSMACValid&1 == 1
		info.UDVLANValid = qword7>>cqeUDVLANValid&1 == 1
		if info.UDVLANValid {
			info.UDVLAN = x.ExtUDVLAN()
		}
		if info.UDSMACValid {
			info.UDSMAC = x.ExtUDSMAC()
		}
	}

	info.IsSQ = qword3>>cqeSQBit&1 == 1
	info.Error = qword3>>cqeErrorBit&1 == 1
	info.PushDropped = qword3>>cqePushDropBit&1 == 1
	info.IPv4 = qword3>>cqeSTagBit&1 == 1
	info.QPCtx = e.QPCtx()
	if isSRQ && c.wide {
		// An SRQ CQE carries the WQE's wr_id in qword1 and the QP's
		// completion context in qword5 (uk.c reads byte 40).
		info.QPCtx = c.extCQE(c.ring.head.Load()).Qword(1)
	}
	q := c.qps[info.QPCtx]
	if info.Error {
		info.MajorErr = uint16(qword3 >> cqeMajErrShift)
		info.MinorErr = uint16(qword3 & cqeMinErrMask)
		switch {
		case info.MajorErr == MajorSRQFlushRsvd || info.MajorErr == MajorFlush:
			if info.MajorErr == MajorSRQFlushRsvd {
				info.MinorErr = uint16(AEToFlushCode(info.MinorErr))
			}
			if info.MinorErr != uint16(FlushGeneralErr) {
				qword3 = qword3&^cqeMinErrMask | uint64(FlushGeneralErr)
				store64(e, cqeQword3Offset, qword3)
			}
			info.CompStatus = CompFlushed
		case info.IsSQ && q != nil && q.typ == QPTypeUD && info.MajorErr>>12 == cieSignatureNibble:
			// A non-fatal asynchronous indication on a UD SQ.
			info.Error, info.MajorErr, info.MinorErr = false, 0, 0
			info.CompStatus = CompSuccess
		default:
			info.CompStatus = CompUnknown
		}
	}
	info.StatRaw = e.StatRaw()
	info.QPID = e.QPID()
	info.UDSrcQPN = e.InvSTag()
	info.SolicitedEvent = qword3>>cqeSolEventBit&1 == 1

	moveHead := true
	var pring *ring
	var err error
	if q == nil {
		err = ErrQPDestroyed
	} else {
		info.QP = q
		info.WQEIdx = uint32(qword3 >> cqeWQEIdxShift & cqeWQEIdxMask)
		info.OpType = uint8(qword3 >> cqeOpShift & cqeOpMask)
		switch {
		case info.IsSQ:
			pring, err = c.pollSQ(q, info)
		case isSRQ && q.srq != nil:
			// uk.c: wr_id from qword1, length, invalidated STag; the SRQ
			// ring's tail moves by one.
			info.WrID = e.QPCtx()
			info.BytesXfered = e.PayloadLen()
			if qword3>>cqeSTagBit&1 == 1 {
				info.StagInvalidSet = true
				info.InvSTag = e.InvSTag()
			}
			q.srq.retire()
		default:
			pring, err = c.pollRQ(q, info, e, qword3, &moveHead)
		}
	}

	// GEN_2 parks the head on a flush CQE while its queue has more work;
	// GEN_3 hardware writes one flush CQE per WQE.
	if err == nil && info.CompStatus == CompFlushed && pring != nil && pring.moreWork() {
		moveHead = c.hwFlush
	}
	if !moveHead && pring != nil && c.hwFlush {
		moveHead = true
	}
	if moveHead {
		c.advance()
		if ext && !c.wide {
			c.advance()
		}
		store64(c.shadow, 0, uint64(c.ring.head.Load())&cqShadowHeadMask)
	} else {
		qword3 = qword3&^(cqeWQEIdxMask<<cqeWQEIdxShift) | uint64(pring.tail.Load()&cqeWQEIdxMask)<<cqeWQEIdxShift
		store64(e, cqeQword3Offset, qword3)
	}
	return err
}

func (c *CQ) advance() {
	c.ring.head.Store((c.ring.head.Load() + 1) % c.ring.size)
	if c.ring.head.Load() == 0 {
		c.polarity ^= 1
	}
	c.ring.tail.Store((c.ring.tail.Load() + 1) % c.ring.size)
}

// pollRQ is the RQ branch: wr_id from rq_wrid_array at the CQE's WQE
// index (in quanta, divided by the WQE size), or at the RQ tail for
// flushed and unknown-error CQEs, whose index is not trusted.
func (c *CQ) pollRQ(q *QP, info *CQPollInfo, e CQE, qword3 uint64, moveHead *bool) (*ring, error) {
	arrayIdx := info.WQEIdx / q.rqMult
	if info.CompStatus == CompFlushed || info.CompStatus == CompUnknown {
		if !q.rq.moreWork() {
			return nil, ErrCQEmpty
		}
		arrayIdx = q.rq.tail.Load()
	}
	info.WrID = q.rqWrID[arrayIdx%q.rq.size]
	info.BytesXfered = e.PayloadLen()
	if qword3>>cqeSTagBit&1 == 1 {
		info.StagInvalidSet = true
		info.InvSTag = e.InvSTag()
	}
	q.rq.tail.Store((arrayIdx + 1) % q.rq.size)
	if info.CompStatus == CompFlushed && q.rq.moreWork() {
		*moveHead = false
	}
	return &q.rq, nil
}

// pollSQ is the SQ branch: wr_id, length and quanta from the tracking
// array at the CQE's WQE index, retiring every WQE up to it (unsignaled
// ones complete implicitly); for a flush, the next non-NOP WQE from the
// SQ tail, its opcode read back from its header in the ring.
func (c *CQ) pollSQ(q *QP, info *CQPollInfo) (*ring, error) {
	if info.CompStatus != CompFlushed {
		t := q.sqTrk[info.WQEIdx%q.sq.size]
		info.WrID = t.WrID
		if info.CompStatus == CompSuccess {
			info.BytesXfered = t.WrLen
		}
		q.sq.tail.Store((info.WQEIdx + uint32(max(t.Quanta, 1))) % q.sq.size)
		return &q.sq, nil
	}
	for {
		if !q.sq.moreWork() {
			return nil, ErrCQEmpty
		}
		tail := q.sq.tail.Load()
		hdr := load64(q.sqBuf, int(tail)*QuantumSize+24)
		op := uint8(hdr >> sqOpcodeShift & 0x3f)
		t := q.sqTrk[tail]
		q.sq.tail.Store((tail + uint32(max(t.Quanta, 1))) % q.sq.size)
		if op != OpNOP {
			info.OpType = op
			info.WrID = t.WrID
			info.BytesXfered = t.WrLen
			// The kernel reports a flushed bind as a bind error.
			if op == OpBindMW && info.MinorErr == uint16(FlushProtErr) {
				info.MinorErr = uint16(FlushMWBindErr)
			}
			return &q.sq, nil
		}
	}
}

// Notify selects what a CQ arm waits for (irdma_cmpl_notify).
type Notify uint8

// Arm kinds.
const (
	NotifyAny       Notify = 0 // IRDMA_CQ_COMPL_EVENT: the next completion
	NotifySolicited Notify = 1 // IRDMA_CQ_COMPL_SOLICITED: the next solicited one
)

// RequestNotification is irdma_uk_cq_request_notification: it rewrites the
// arm word (CQ shadow qword4) with ARM_SEQ_NUM [17:16] incremented,
// SW_CQ_SELECT [13:0] kept, ARM_NEXT_SE [15] always set, and ARM_NEXT [14]
// set only for NotifyAny (so a solicited-only arm is ARM_NEXT 0, SE 1;
// docs/hw-datapath.md "CQ shadow area and arming"). It returns the value to
// write to the CQ arm doorbell (the CQ id) after the shadow store.
func (c *CQ) RequestNotification(n Notify) uint32 {
	v := load64(c.shadow, cqShadowArmOffset)
	seq := (v>>cqArmSeqShift + 1) & cqArmSeqMask
	sel := v & cqArmSWCQSelectMask
	next := uint64(0)
	if n == NotifyAny {
		next = 1
	}
	v = seq<<cqArmSeqShift | sel | 1<<cqArmNextSEBit | next<<cqArmNextBit
	store64(c.shadow, cqShadowArmOffset, v)
	return c.id
}

// SetResizedCnt is irdma_uk_cq_set_resized_cnt: adds completed resizes
// to SW_CQ_SELECT, keeping the arm bits.
func (c *CQ) SetResizedCnt(cnt uint16) {
	v := load64(c.shadow, cqShadowArmOffset)
	sel := (v&cqArmSWCQSelectMask + uint64(cnt)) & cqArmSWCQSelectMask
	v = v&^cqArmSWCQSelectMask | sel
	v &= cqArmSWCQSelectMask | 1<<cqArmNextBit | 1<<cqArmNextSEBit | cqArmSeqMask<<cqArmSeqShift
	store64(c.shadow, cqShadowArmOffset, v)
}

// KernelCQSize is irdma_create_cq's ring size for a kernel CQ asked for cqe
// entries on GEN_2 (32-byte CQEs, docs/hw-datapath.md "CQ ring and valid
// bit"): cqe + 2, doubled (every CQE may take an extension slot; the doubling
// also makes it the even size irdma requires), and 2 more if that would be
// exactly one 4 KiB page. cqe must be 1..max_hw_cq_size.
func KernelCQSize(lim Limits, cqe int) (int, error) {
	if cqe < lim.MinCQSize || cqe > lim.MaxCQSize {
		return 0, ErrInvalid
	}
	n := (cqe + 2) * 2
	if n*CQESize == 4096 {
		n += 2
	}
	return max(n, 4), nil
}

// KernelCQSizeWide is the GEN_3 counterpart for 64-byte CQEs: the
// extension lives in the entry, so irdma_create_cq skips the doubling
// (cqe_64byte_ena); the one-page rule stays.
func KernelCQSizeWide(lim Limits, cqe int) (int, error) {
	if cqe < lim.MinCQSize || cqe > lim.MaxCQSize {
		return 0, ErrInvalid
	}
	n := cqe + 2
	if n*2*CQESize == 4096 {
		n += 2
	}
	return max(n, 4), nil
}

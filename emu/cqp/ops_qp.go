package cqp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// CREATE/MODIFY/DESTROY_QP header fields (ctrl.c:irdma_sc_qp_create / _modify
// / _destroy; defs.h IRDMA_CQPSQ_QP_*; docs/hw-controlpath.md "QP WQEs").
const (
	qpIDMask           = 0xffffff // raw qp_id, IRDMA_CQPSQ_QP_QPID_M [23:0]
	qpOrdValidBit      = 42
	qpVQBit            = 45
	qpCQNumValidBit    = 47
	qpTypeShift        = 48 // [50:48]
	qpTypeMask         = 0x7
	qpMACValidBit      = 51
	qpARPIdxValidBit   = 59
	qpNextStateShift   = 60 // [62:60]
	qpNextStateMask    = 0x7
	flushGenAEBit      = 59 // FLUSH_WQES: GENERATE_AE
	flushUserCodeBit   = 60 // USERFLCODE
	flushSQBit         = 61 // FLUSHSQ
	flushRQBit         = 62 // FLUSHRQ
	uploadQPTypeShift  = 48 // UPLOAD_CONTEXT QPTYPE [51:48]
	qpShadowAlign      = 8
	qpRingAlign        = qp.QuantumSize
	maxRQWQEShift      = 3 // RQ WQEs of 1..8 quanta
	qpMinQuanta        = 8 // ICRDMA_MIN_WQ_SIZE WQEs of one quantum
	suspendQPIDMask    = 0xffffff
	resumeQSHandleMask = 0xffffffff
)

func hdrQPType(h uint64) qp.Type { return qp.Type(h >> qpTypeShift & qpTypeMask) }

// readQPContext reads the 256-byte RoCE host context at WQE qword2.
func (c *CQP) readQPContext(w *WQE) ([]byte, *Error) {
	ctx := make([]byte, qp.ContextSize)
	if err := c.cfg.Mem.Read(hostmem.IOVA(w.W[2]), ctx); err != nil {
		return nil, fail(MinorPAFault, "QP host context", err)
	}
	return ctx, nil
}

// qpCQs resolves TXCQNUM/RXCQNUM when CQNUMVALID is set.
func (c *CQP) qpCQs(h uint64, ctx qp.Context) (send, recv *cq.CQ, err *Error) {
	if !bit(h, qpCQNumValidBit) {
		return nil, nil, nil
	}
	send, recv = c.cfg.CQs.Get(ctx.TxCQNum()), c.cfg.CQs.Get(ctx.RxCQNum())
	if send == nil || recv == nil {
		return nil, nil, fail(MinorObjectNotFound, "QP context names a CQ that does not exist", nil)
	}
	return send, recv, nil
}

// checkQPContext validates the fields the device acts on.
func (c *CQP) checkQPContext(h uint64, ctx qp.Context) *Error {
	if bit(h, qpARPIdxValidBit) && uint32(ctx.ARPIdx()) >= c.cfg.HMC.Count(ObjARP) {
		return fail(MinorIndexRange, "ARP index beyond the ARP table", nil)
	}
	if bit(h, qpOrdValidBit) && uint32(ctx.ORDSize()) > c.cfg.Profile.Limits.MaxORD {
		return fail(MinorBadContext, "ORD above the device maximum", nil)
	}
	return nil
}

// storeQPContext writes the context into the HMC QP object (the device's
// copy, as hardware keeps it in HMC backing memory).
func (c *CQP) storeQPContext(id uint32, ctx []byte) (hostmem.IOVA, *Error) {
	a, err := c.cfg.HMC.ObjectIOVA(ObjQP, id)
	if err != nil {
		return 0, fail(MinorPAFault, "HMC QP object not backed", err)
	}
	n := min(int(c.cfg.HMC.Size(ObjQP)), len(ctx))
	if err := c.cfg.Mem.Write(a, ctx[:n]); err != nil {
		return 0, fail(MinorPAFault, "HMC QP object write", err)
	}
	return a, nil
}

func (c *CQP) createQP(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := uint32(h & qpIDMask)
	if err := c.checkIndex(ObjQP, id); err != nil {
		return result{}, err
	}
	if c.cfg.QPs.Get(id) != nil {
		return result{}, fail(MinorObjectExists, "QP exists", nil)
	}
	typ := hdrQPType(h)
	if typ != qp.TypeRoCERC && typ != qp.TypeRoCEUD {
		return result{}, fail(MinorBadQPType, "QP type is not RoCE RC or UD", nil)
	}
	next := qp.State(h >> qpNextStateShift & qpNextStateMask)
	if !qp.CanTransition(qp.StateInvalid, next) {
		return result{}, fail(MinorInvalidState, "CREATE_QP next state", nil)
	}
	raw, err := c.readQPContext(w)
	if err != nil {
		return result{}, err
	}
	ctx, _ := qp.NewContext(raw)
	if err := c.checkQPContext(h, ctx); err != nil {
		return result{}, err
	}
	at := qp.DecodeAttrs(ctx, c.cfg.Profile.Gen >= profile.Gen3)
	uk := c.cfg.Profile.UK
	if at.SQQuanta < qpMinQuanta || at.SQQuanta > uk.MaxHWWQQuanta ||
		at.RQQuanta < qpMinQuanta || at.RQQuanta > uk.MaxHWRQQuanta || at.RQWQEShift > maxRQWQEShift {
		return result{}, fail(MinorBadSize, "SQ/RQ size out of range", nil)
	}
	send, recv, err := c.qpCQs(h, ctx)
	if err != nil {
		return result{}, err
	}
	vq := bit(h, qpVQBit)
	if vq && (ctx.SQAddr() > 0xffffffff || ctx.RQAddr() > 0xffffffff) {
		return result{}, fail(MinorPBLERange, "VQ PBLE index too large", nil)
	}
	sq, err := c.ring(vq, ctx.SQAddr(), uint32(ctx.SQAddr()), qp.QuantumSize, at.SQQuanta, qpRingAlign)
	if err != nil {
		return result{}, err
	}
	rq, err := c.ring(vq, ctx.RQAddr(), uint32(ctx.RQAddr()), qp.QuantumSize, at.RQQuanta, qpRingAlign)
	if err != nil {
		return result{}, err
	}
	shadow := hostmem.IOVA(w.W[5])
	if shadow%qpShadowAlign != 0 {
		return result{}, fail(MinorBadAlignment, "QP shadow area not aligned", nil)
	}
	if e := cq.CheckRange(c.cfg.Mem, shadow, 8); e != nil {
		return result{}, fail(MinorPAFault, "QP shadow area", e)
	}
	srq, err := c.qpSRQ(ctx)
	if err != nil {
		return result{}, err
	}
	hmcIOVA, err := c.storeQPContext(id, raw)
	if err != nil {
		return result{}, err
	}
	q, e := c.cfg.QPs.Create(qp.Spec{
		ID: id, Type: typ, State: next, Context: raw, CtxIOVA: hostmem.IOVA(w.W[2]), HMCIOVA: hmcIOVA,
		Shadow: shadow, SQ: sq, RQ: rq, Virtual: vq, SendCQ: send, RecvCQ: recv,
		SRQ: srq, PadUncounted: !c.cfg.Profile.Queues.PadFragCounted,
		Gen3Context: c.cfg.Profile.Gen >= profile.Gen3,
	})
	if e != nil {
		return result{}, fail(MinorObjectExists, "QP table", e)
	}
	c.cfg.QPs.Loaded(q)
	return result{bytes: qp.ContextSize * 2}, nil
}

func (c *CQP) modifyQP(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := uint32(h & qpIDMask)
	q := c.cfg.QPs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "QP does not exist", nil)
	}
	if hdrQPType(h) != q.Type {
		return result{}, fail(MinorBadQPType, "QPTYPE differs from the QP's", nil)
	}
	next := qp.State(h >> qpNextStateShift & qpNextStateMask)
	if !qp.CanTransition(q.State(), next) {
		return result{}, fail(MinorInvalidState, "QP state transition", nil)
	}
	raw, err := c.readQPContext(w)
	if err != nil {
		return result{}, err
	}
	ctx, _ := qp.NewContext(raw)
	if err := c.checkQPContext(h, ctx); err != nil {
		return result{}, err
	}
	send, recv, err := c.qpCQs(h, ctx)
	if err != nil {
		return result{}, err
	}
	if _, err := c.storeQPContext(id, raw); err != nil {
		return result{}, err
	}
	q.Modify(raw, hostmem.IOVA(w.W[2]), next, send, recv)
	c.cfg.QPs.Loaded(q)
	if next == qp.StateClosing {
		// SQD: the driver waits for QP_SUSPEND_COMPLETE
		// (docs/hw-controlpath.md "MODIFY_QP transitions").
		c.after = append(c.after, func() { c.suspendAE(q) })
	}
	return result{bytes: qp.ContextSize * 2}, nil
}

func (c *CQP) suspendAE(q *qp.QP) {
	_ = c.cfg.CQs.Events().PostAE(cq.AEQE{
		Ctx: q.Attrs().CompletionCtx, ID: q.ID, Code: cq.AEQPSuspendComplete,
		Source: cq.AESourceSQ, State: uint8(q.State()),
	})
}

func (c *CQP) destroyQP(w *WQE) (result, *Error) {
	id := uint32(w.Hdr() & qpIDMask)
	if err := c.cfg.QPs.Destroy(id); err != nil {
		return result{}, fail(MinorObjectNotFound, "QP does not exist", err)
	}
	return result{}, nil
}

func (c *CQP) uploadContext(w *WQE) (result, *Error) {
	id := uint32(w.Hdr() & qpIDMask)
	q := c.cfg.QPs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "QP does not exist", nil)
	}
	ctx := q.Context()
	if err := c.cfg.Mem.Write(hostmem.IOVA(w.W[2]), ctx[:]); err != nil {
		return result{}, fail(MinorPAFault, "upload buffer", err)
	}
	return result{bytes: qp.ContextSize}, nil
}

func (c *CQP) suspendResumeQP(w *WQE) (result, *Error) {
	id := uint32(w.Hdr() & suspendQPIDMask)
	q := c.cfg.QPs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "QP does not exist", nil)
	}
	if w.Opcode() == OpSuspendQP {
		q.SetSuspended(true)
		// The suspend completion is followed by QP_SUSPEND_COMPLETE
		// (ctrl.c:irdma_sc_suspend_qp; docs/hw-controlpath.md "Other WQEs").
		c.after = append(c.after, func() { c.suspendAE(q) })
	} else {
		q.SetSuspended(false)
	}
	return result{}, nil
}

// flushWQEs runs FLUSH_WQES and GEN_AE (the same opcode, 0x22).
func (c *CQP) flushWQEs(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := uint32(h & qpIDMask)
	q := c.cfg.QPs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "QP does not exist", nil)
	}
	if bit(h, flushGenAEBit) {
		// GEN_AE: post that AE for that QP (ctrl.c:irdma_sc_gen_ae).
		code, src := uint16(field(w.W[1], 15, 0)), uint8(field(w.W[1], 19, 16))
		c.after = append(c.after, func() {
			_ = c.cfg.CQs.Events().PostAE(cq.AEQE{Ctx: q.Attrs().CompletionCtx, ID: q.ID, Code: code,
				Source: src, State: uint8(q.State())})
		})
	}
	fsq, frq := bit(h, flushSQBit), bit(h, flushRQBit)
	if !fsq && !frq {
		return result{}, nil
	}
	codes := qp.DefaultFlushCodes
	if bit(h, flushUserCodeBit) {
		codes = qp.FlushCodes{
			RQMinor: uint16(field(w.W[2], 15, 0)), RQMajor: uint16(field(w.W[2], 31, 16)),
			SQMinor: uint16(field(w.W[2], 47, 32)), SQMajor: uint16(field(w.W[2], 63, 48)),
		}
	}
	fr := q.Flush(c.cfg.Mem, fsq, frq, codes, c.cfg.Profile.Queues.HWFlushPerWQE)
	sqDone, rqDone := fsq && fr.SQWQEs > 0, frq && fr.RQWQEs > 0
	res := result{bytes: fr.CQEs * int(c.cfg.Profile.Queues.CQESize)}
	switch {
	case sqDone && rqDone:
		res.st.Minor = MinorSQRQFlushed
	case sqDone:
		res.st.Minor = MinorSQFlushed
	case rqDone:
		res.st.Minor = MinorRQFlushed
	default:
		return res, fail(MinorFlushNoWQE, "flush: no WQE pending", nil)
	}
	return res, nil
}

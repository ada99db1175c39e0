package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The completion stage: every CQE the data plane writes is built and
// posted here (complete; cq.CQ.Post charges timing.CQEWrite) — the SQ's in
// WQE order (retire), the RQ's for a SEND, a WRITE with immediate and a UD
// datagram, and the error CQEs of the flush flow (sqFatal, rqError) with
// the AE and the move to ERROR (enterError; docs/hw-datapath.md "Flush
// generation").

// complete is the completion stage: it writes e to c (cq.CQ.Post charges
// timing.CQEWrite, and the CEQE when the CQ is armed) and counts it. A full
// CQ is the CQ's affair: it raised CQ_OPERATION_ERROR (emu/cq).
func (t *Transport) complete(ctx *Ctx, c *cq.CQ, e *cq.CQE) {
	if c == nil {
		return
	}
	if !t.settleWrites(ctx) && !e.Error {
		return // the QP failed placing data this CQE would vouch for
	}
	// The context's meter shard publishes first: whoever sees the CQE sees
	// the cycles of the work it completes (timing.Meter.Local).
	t.meter(ctx).Publish()
	if err := c.Post(e); err != nil {
		return
	}
	t.count(ctx, CntCQEs, 1)
}

// baseCQE fills the fields every CQE of this QP carries.
func (t *Transport) baseCQE(e *cq.CQE) {
	e.QPCtx = t.attrs.CompletionCtx
	e.SetQPID(t.q.ID)
}

// retire writes the CQEs of the completed WQEs at the head, in order: a
// CQE per signaled WQE; unsignaled ones retire silently, and software
// retires them when a later CQE's WQE index passes them
// (irdma_uk_cq_poll_cmpl).
func (r *requester) retire(t *Transport, ctx *Ctx) bool {
	did := false
	for r.n > 0 {
		e := r.at(0)
		if !e.done {
			break
		}
		if e.signaled {
			var c cq.CQE
			t.baseCQE(&c)
			c.SQ = true
			c.Op = uint8(e.op)
			c.WQEIdx = uint16(e.idx)
			c.PayloadLen = uint32(min(e.length, maxMsgSize))
			c.PSN = uint32(e.lastPSN)
			t.complete(ctx, t.sendCQ, &c)
		}
		r.pop()
		did = true
	}
	return did
}

// retireErrored drops e after its error CQE if it is the oldest entry.
func (r *requester) retireErrored(e *sqEntry) {
	if r.n > 0 && r.at(0) == e {
		if e.started && !e.done {
			r.inflight--
		}
		r.pop()
	}
}

// rqError completes the current receive WQE with the flush code of ae.
func (r *responder) rqError(t *Transport, ctx *Ctx, ae uint16) uint32 {
	var c cq.CQE
	t.baseCQE(&c)
	c.Error = true
	c.Major, c.Minor = cq.MajorFlush, FlushCodeForAE(ae)
	idx := t.recvDone(&c)
	if c.SRQ {
		// An SRQ error CQE carries the AE code itself; software converts
		// it (rdma-core uk.c: IRDMA_SRQFLUSH_RSVD_MAJOR_ERR →
		// irdma_ae_to_qp_err_code).
		c.Major, c.Minor = MajorSRQFlushRsvd, ae
	}
	c.PayloadLen = uint32(r.cur.off)
	t.complete(ctx, t.recvCQ, &c)
	r.cur = curMsg{}
	return idx
}

// completeRecv writes the CQE of the receive WQE a SEND or a WRITE with
// immediate consumed, at the message's last packet p: the message length,
// the opcode, the solicited event, the immediate, and the R_Key a SEND
// with invalidate invalidated (IRDMACQ_STAG, qword 2).
func (t *Transport) completeRecv(ctx *Ctx, p *wire.Packet, length uint64) {
	var c cq.CQE
	t.baseCQE(&c)
	c.PayloadLen = uint32(length)
	c.Op = uint8(p.Opcode())
	c.SolEvent = p.BTH.SE()
	if p.ImmDt != nil {
		c.Ext, c.ImmValid, c.Imm = true, true, p.ImmDt.Imm()
	}
	if p.IETH != nil {
		c.STagOrIPv4, c.Qword2Low = true, p.IETH.RKey()
	}
	t.recvDone(&c)
	t.complete(ctx, t.recvCQ, &c)
}

// completeUD writes the CQE of a UD datagram of length bytes (GRH area
// included) received in frame f: the source QPN, the IP version, the
// source MAC and VLAN (the extended CQE irdma_uk_cq_poll_cmpl reads for
// UD), the immediate.
func (t *Transport) completeUD(ctx *Ctx, f *wire.Frame, length int) {
	p := &f.Packet
	var c cq.CQE
	t.baseCQE(&c)
	c.PayloadLen = uint32(length)
	c.Op = uint8(p.Opcode())
	c.SolEvent = p.BTH.SE()
	c.Qword2Low = p.DETH.SrcQP() // IRDMACQ_UDSRCQPN
	c.STagOrIPv4 = f.IPv4 != nil // IRDMACQ_IPV4
	c.Ext = true
	if f.Ethernet != nil {
		c.SMAC, c.SMACValid = [6]byte(f.Ethernet.Src()), true
	}
	if f.VLAN != nil {
		c.VLAN, c.VLANValid = f.VLAN.TCI(), true
	}
	if p.ImmDt != nil {
		c.ImmValid, c.Imm = true, p.ImmDt.Imm()
	}
	t.recvDone(&c)
	t.complete(ctx, t.recvCQ, &c)
}

// recvDone retires the receive WQE c completes and returns its index in
// quanta (the CQE's WQEIDX); for a WQE taken from an SRQ it makes c an SRQ
// CQE (srqSource.srqCQE).
func (t *Transport) recvDone(c *cq.CQE) uint32 {
	idx := t.recv.Consume()
	c.WQEIdx = uint16(idx)
	if s, ok := t.recv.(*srqSource); ok {
		s.srqCQE(c)
	}
	return idx
}

// enterError raises ae and moves the QP to ERROR, handing the consumer
// indices to the QP so that the driver's FLUSH_WQES finds the WQEs not yet
// completed (docs/hw-datapath.md "Flush generation": the hardware raises the
// AE; irdma's irdma_process_aeq then modifies the QP to ERROR and flushes).
func (t *Transport) enterError(ctx *Ctx, ae uint16, src uint8, wqeIdx uint32) {
	if t.q.State() == StateError {
		return
	}
	t.count(ctx, CntFatalErrors, 1)
	t.q.EnterError(t.req.handback(), t.recv.State())
	t.state = StateError
	t.stopTimers()
	t.resp.reset()
	if t.dp.Events != nil {
		_ = t.dp.Events.PostAE(cq.AEQE{
			Ctx: t.attrs.CompletionCtx, ID: t.q.ID, WQEIdx: uint16(wqeIdx), Code: ae,
			Source: src, State: uint8(StateError),
		})
	}
}

// sqFatal fails the SQ: the error CQE of e (when given) with the flush
// code of ae, the AE with the SQ as source, ERROR.
func (t *Transport) sqFatal(ctx *Ctx, e *sqEntry, ae uint16) {
	if t.q.State() == StateError {
		return
	}
	idx := t.req.fetch.Cons
	if e != nil {
		// WQEs completed before it retire first, in order.
		t.req.retire(t, ctx)
		idx = e.idx
		var c cq.CQE
		t.baseCQE(&c)
		c.SQ, c.Error = true, true
		c.Op = uint8(e.op)
		c.WQEIdx = uint16(e.idx)
		c.Major, c.Minor = cq.MajorFlush, FlushCodeForAE(ae)
		t.complete(ctx, t.sendCQ, &c)
		t.req.retireErrored(e)
	}
	t.enterError(ctx, ae, cq.AESourceSQ, idx)
}

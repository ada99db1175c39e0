package qp

import "github.com/irdma-emu/irdma-emu/emu/wire"

// The segmentation stage of an RC WQE: a SEND or WRITE becomes path-MTU
// packets with consecutive PSNs (IBTA §9.4.1 C9-20..C9-23), a READ one
// request for its whole PSN range, an atomic one request, as far as the
// window, ORD and the burst allow; each packet is built into a pooled
// link.Packet (packet.go), filled from memory (dma.go, payload read) and
// transmitted. No stage of its own is charged here: the build and the wire
// are the transmit stage's.

// segment sends the packets of RC entry e (decoded in w) that the window,
// ORD and the budget allow, from packet r.sendPkt on: a SEND or WRITE
// packet by packet, a READ or an atomic as its one request. sent reports
// a packet went out, ok false that the transmitter must stop (blocked, or
// the QP failed); ok true means e is wholly sent.
func (r *requester) segment(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE, budget *int) (sent, ok bool) {
	if !e.started {
		// A new message follows every PSN sent so far, whatever a go-back-N
		// cut short by an ACK left nextPSN at.
		r.nextPSN = r.maxSent
	}
	win := r.window(t)
	for e.kind == kindSendWr && r.sendPkt < e.npkts || e.kind != kindSendWr && r.sendPkt == 0 {
		if *budget <= 0 {
			r.more = true
			return sent, false
		}
		if r.nextPSN.Diff(r.una) >= win {
			return sent, false // window full (window.go)
		}
		if !e.started && e.kind != kindSendWr && r.readsOut >= int(t.attrs.ORD) {
			return sent, false // ORD outstanding READ/atomics
		}
		if !e.started {
			e.started = true
			e.firstPSN = r.nextPSN
			e.lastPSN = e.firstPSN.Add(e.npkts - 1)
			r.inflight++
			if e.kind != kindSendWr {
				r.readsOut++
			}
		}
		var okp bool
		switch e.kind {
		case kindSendWr:
			okp = r.sendSendWritePacket(t, ctx, e, w)
		case kindRead:
			okp = r.sendReadRequest(t, ctx, e, w)
		case kindAtomic:
			okp = r.sendAtomic(t, ctx, e, w)
		}
		if !okp {
			return sent, false
		}
		sent = true
		*budget--
		if !r.rto.armed {
			r.rto.arm(t.dp.Clock, ctx.now, t.rto())
		}
		if e.kind != kindSendWr {
			break
		}
	}
	r.send++
	r.sendPkt = 0
	return sent, true
}

// countSent records a packet with PSN psn as sent or resent.
func (r *requester) countSent(t *Transport, ctx *Ctx, psn wire.PSN) {
	if psn.LessThan(r.maxSent) {
		t.count(ctx, CntRetransmits, 1)
	} else {
		r.maxSent = psn.Next()
	}
}

// ackReq decides AckReq for the packet with PSN psn: on a message's last
// packet, on every AckReqEvery-th packet (rxe_req.c: RXE_MAX_PKT_PER_ACK),
// and on the packet that fills the window — rxe's window (128) is never
// below its AckReq period (64), ours can be after a loss (window.go), and
// a responder answers only AckReqs: without it a window of middle packets
// would wait for the timer, again and again.
func (r *requester) ackReq(t *Transport, psn wire.PSN, last bool) bool {
	r.sinceAckReq++
	if last || r.sinceAckReq >= t.dp.Tun.AckReqEvery || psn.Next().Diff(r.una) >= r.window(t) {
		r.sinceAckReq = 0
		return true
	}
	return false
}

// sendSendWritePacket builds packet r.sendPkt of a SEND or WRITE: opcode by
// position (IBTA §9.4.1 C9-20..C9-23: first/middle carry exactly the path
// MTU), RETH on the first (whole length, rxe), ImmDt or IETH on the last,
// SE on the last of a solicited SEND or WRITE with immediate.
func (r *requester) sendSendWritePacket(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	i := r.sendPkt
	mtu := uint64(t.mtu)
	off := uint64(i) * mtu
	n := min(mtu, e.length-min(off, e.length))
	first, last := i == 0, i == e.npkts-1
	op := w.Opcode
	imm := w.ImmFlag
	var bop wire.Opcode
	write := op.IsWrite()
	switch {
	case write && first && last && imm:
		bop = wire.RCRDMAWriteOnlyWithImm
	case write && first && last:
		bop = wire.RCRDMAWriteOnly
	case write && first:
		bop = wire.RCRDMAWriteFirst
	case write && last && imm:
		bop = wire.RCRDMAWriteLastWithImm
	case write && last:
		bop = wire.RCRDMAWriteLast
	case write:
		bop = wire.RCRDMAWriteMiddle
	case first && last && op.Invalidates():
		bop = wire.RCSendOnlyWithInvalidate
	case first && last && imm:
		bop = wire.RCSendOnlyWithImm
	case first && last:
		bop = wire.RCSendOnly
	case first:
		bop = wire.RCSendFirst
	case last && op.Invalidates():
		bop = wire.RCSendLastWithInvalidate
	case last && imm:
		bop = wire.RCSendLastWithImm
	case last:
		bop = wire.RCSendLast
	default:
		bop = wire.RCSendMiddle
	}
	psn := e.firstPSN.Add(i)
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	pf := &ctx.pf
	pf.BTH = wire.BTHFields{
		Opcode: bop, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn,
		SE:     last && w.Solicited && (op.IsSend() || imm),
		AckReq: r.ackReq(t, psn, last),
	}
	pf.RETH = wire.RETHFields{VA: w.RemoteVA, RKey: w.RemoteSTag, DMALen: uint32(e.length)}
	pf.ImmDt = wire.ImmDtFields{Imm: w.ImmData}
	pf.IETH = wire.IETHFields{RKey: w.InvalidateSTag}
	if !t.encode(ctx, p, int(n)) {
		return false
	}
	if ae := t.readPayload(ctx, w, off, p, ctx.frame.Packet.Payload); ae != 0 {
		p.Release()
		t.sqFatal(ctx, e, ae)
		return false
	}
	if first && !psn.LessThan(r.maxSent) {
		// Count messages once, on their first transmission.
		if write {
			t.hw(StatRDMATxWrs, 1)
		} else {
			t.hw(StatRDMATxSnds, 1)
		}
	}
	r.countSent(t, ctx, psn)
	t.transmit(ctx, p)
	r.sendPkt++
	r.nextPSN = psn.Next()
	return true
}

// sendReadRequest sends the READ request for what has not arrived yet:
// the first time the whole range, after a retry the rest from the first
// missing PSN (rxe req_retry: "a partially received READ is re-requested").
func (r *requester) sendReadRequest(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	mtu := uint64(t.mtu)
	got := e.readRcvd
	psn := e.firstPSN.Add(uint32(got / mtu))
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	pf := &ctx.pf
	pf.BTH = wire.BTHFields{Opcode: wire.RCRDMAReadRequest, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn,
		AckReq: r.ackReq(t, psn, true)}
	pf.RETH = wire.RETHFields{VA: w.RemoteVA + got, RKey: w.RemoteSTag, DMALen: uint32(e.length - got)}
	if !t.encode(ctx, p, 0) {
		return false
	}
	e.reqOff = got
	if !psn.LessThan(r.maxSent) {
		t.hw(StatRDMATxRds, 1)
	}
	r.countSent(t, ctx, psn)
	if e.lastPSN.Next().Diff(r.maxSent) > 0 {
		r.maxSent = e.lastPSN.Next()
	}
	t.transmit(ctx, p)
	r.sendPkt = 1
	r.nextPSN = e.lastPSN.Next()
	return true
}

// sendAtomic sends a FETCH_ADD or COMPARE_SWAP request (AtomicETH).
func (r *requester) sendAtomic(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	bop := wire.RCFetchAdd
	if w.Opcode == OpAtomicCompareSwap {
		bop = wire.RCCompareSwap
	}
	pf := &ctx.pf
	pf.BTH = wire.BTHFields{Opcode: bop, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: e.firstPSN,
		AckReq: r.ackReq(t, e.firstPSN, true)}
	pf.AtomicETH = wire.AtomicETHFields{VA: w.RemoteVA, RKey: w.RemoteSTag, SwapAdd: w.Atomic.SwapAdd,
		Compare: w.Atomic.Compare}
	if !t.encode(ctx, p, 0) {
		return false
	}
	r.countSent(t, ctx, e.firstPSN)
	t.transmit(ctx, p)
	r.sendPkt = 1
	r.nextPSN = e.firstPSN.Next()
	return true
}

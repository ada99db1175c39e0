package qp

import "github.com/irdma-emu/irdma-emu/emu/timing"

// The pipeline of one QP, top to bottom. A work request travels through
// these stages, each one function (and the timing.Stage it charges, where
// the cycle model prices and will schedule it; docs/dataplane.md "Stages"):
//
//	stage          function                               charges
//	doorbell       Transport.Doorbell → onEvents          timing.Doorbell
//	WQE fetch      requester.fetchWQE, refetchWQE;        timing.WQEFetch
//	               RecvSource.Peek (RQ)
//	payload read   Transport.readPayload, readSpans       timing.PayloadDMARead
//	segmentation   requester.segment (RC), sendUD,        —
//	               execLocal (no packet)
//	transmit       Transport.transmit → Ctx.Send          timing.PacketBuild,
//	               (engine worker: link or loopback)      timing.Serialise
//	receive        engine port.receive (the gate) →       timing.Receive
//	               Transport.Deliver → Transport.receive
//	payload write  Transport.writePayload, writeSpans     timing.PayloadDMAWrite
//	completion     Transport.complete (cq.CQ.Post)        timing.CQEWrite
//
// Run is the order a worker visits them in for one QP: received packets
// (receive → responder: payload write, completion, responses queued; or
// completer: payload write of READ data, completion), expired timers
// (retry.go), the responder's queued responses (response.go: payload read,
// transmit), then the requester (requester.go: WQE fetch, validation,
// segmentation, payload read, transmit; completion of what is done). The
// files follow the same order: fetch.go, validate.go, segment.go, ud.go,
// local.go, dma.go, packet.go (the packet build and transmit),
// receive.go, responder.go, response.go, completer.go, retry.go,
// completion.go.

// Run processes what the QP has: expired timers, received packets (up to
// RxBurst), responses to send, and the SQ (up to TxBurst packets). The
// caller holds the claim (TryClaim). It reports whether more work remains,
// in which case the worker schedules the QP again after the others.
func (t *Transport) Run(ctx *Ctx) (more bool) {
	ctx.now = t.dp.Clock.Now()
	ctx.run++
	did := false
	defer func() {
		if did {
			t.lastWork.Store(int64(ctx.now))
			t.works.Add(1)
		}
		t.publishPeek()
		t.endIntake()
	}()
	if t.dead.Load() || t.dp.QPs != nil && t.dp.QPs.Get(t.q.ID) != t.q {
		t.dead.Store(true)
		t.stopTimers()
		t.drainInbox(DropUnknownQPN)
		return false
	}
	if g := t.q.Gen(); g != t.gen {
		t.refresh(g)
	}
	st := t.q.State()
	t.transition(st)
	if st == StateError || st == StateInvalid || st == StateTerminate {
		t.stopTimers()
		did = t.drainInbox(DropQPState)
		return false
	}
	// Received packets first, in order, while the responder is not busy
	// sending READ responses (responses go out in PSN order, so later
	// requests wait behind them, as in rxe).
	in := t.inbox.Load()
	if in != nil {
		for i := 0; i < t.dp.Tun.RxBurst && t.q.State() != StateError; i++ {
			if t.resp.blocked() {
				// Except the requester asking again for the READ being
				// answered (responder.go restartRead).
				if p := in.Peek(); p == nil || !t.resp.isReadReRequest(&p.Frame) {
					break
				}
			}
			p := in.Pop()
			if p == nil {
				break
			}
			did = true
			t.receive(ctx, p)
		}
	}
	// WRITE payload held for a program's memory is stored before anything
	// else the QP does: its responses and sends come after this point (the
	// only packet sent inside the loop, a fatal NAK, stores it first).
	t.settleWrites(ctx)
	if t.q.State() == StateError {
		t.stopTimers()
		t.drainInbox(DropQPState)
		return false
	}
	// Then the timers, but only once everything that arrived has been
	// seen: an ACK waiting in the inbox while the worker was late must
	// not lose to the retransmission timer it would have stopped.
	if in == nil || in.Len() == 0 || t.resp.blocked() {
		if ev := t.ev.Swap(0); ev != 0 {
			did = true
			t.onEvents(ctx, ev)
		}
		if t.req.rto.due(ctx.now) {
			did = true
			t.req.onRTO(t, ctx)
		}
		if t.req.rnr.due(ctx.now) {
			did = true
			t.req.onRNRTimer(t, ctx)
		}
		if t.q.State() == StateError {
			return false
		}
	}
	if t.resp.flushOut(t, ctx) {
		did = true
	}
	if t.q.State() == StateError {
		return false
	}
	if t.req.run(t, ctx) {
		did = true
	}
	if t.q.State() == StateError {
		return false
	}
	if in != nil && in.Len() > 0 && !t.resp.blocked() || t.ev.Load() != 0 {
		more = true
	}
	if t.stalled {
		// Out of packet buffers: the stall timer brings the QP back.
		t.stalled = false
		return false
	}
	return more || t.resp.sendable(ctx.now) || t.req.more
}

// onEvents handles the event bits.
func (t *Transport) onEvents(ctx *Ctx, ev uint32) {
	clk := t.dp.Clock
	if ev&evRTO != 0 && t.req.rto.fired(clk, ctx.now) {
		t.req.onRTO(t, ctx)
	}
	if ev&evRNR != 0 && t.req.rnr.fired(clk, ctx.now) {
		t.req.onRNRTimer(t, ctx)
	}
	if ev&evAck != 0 {
		t.resp.ackT.fired(clk, ctx.now)
	}
	if ev&evStall != 0 {
		t.stall.fired(clk, ctx.now)
	}
	if ev&evDoorbell != 0 {
		t.charge(ctx, timing.Doorbell, 0)
	}
}

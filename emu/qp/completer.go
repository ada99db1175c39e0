package qp

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The completer (IBTA §9.7.5.1, §9.7.6.1; rxe_comp.c, docs/roce.md "rxe as
// completer") processes what comes back for the requester's packets: ACKs
// (one ACK completes every SEND/WRITE up to its PSN), NAKs (PSN sequence
// error: go back; RNR: wait the NAK's timer and go back; invalid request,
// remote access and remote operational errors: the WQE fails and the QP with
// it), READ responses (placed in order into the WQE's sink SGEs; a response
// ahead of the next expected PSN is dropped and left to the timer, as rxe
// does), and ATOMIC ACKs (the original value written to the local VA). An ACK
// or response beyond an outstanding READ or atomic means its responses were
// lost: an implied NAK, retried at once. Completed WQEs are retired in order
// by requester.retire.
// The CQEs are written by the completion stage (completion.go).

// handleResponse processes one response packet.
func (r *requester) handleResponse(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	psn := p.BTH.PSN()
	if !r.started || t.isUD() {
		t.drop(ctx, DropBadResponse)
		return
	}
	// Nothing beyond what was sent can be acknowledged.
	if !psn.LessThan(r.maxSent) {
		t.drop(ctx, DropStaleResponse)
		return
	}
	switch p.Opcode().Operation() {
	case wire.OpAcknowledge:
		r.onAck(t, ctx, psn, p.AETH)
	case wire.OpRDMAReadResponse:
		r.onReadResponse(t, ctx, f)
	case wire.OpAtomicAcknowledge:
		r.onAtomicAck(t, ctx, psn, p)
	default:
		t.drop(ctx, DropBadResponse)
	}
	if t.q.State() != StateError {
		r.retire(t, ctx)
	}
}

// ackThrough acknowledges every packet up to psn: SEND/WRITE entries whose
// last PSN it covers complete; one it only partly covers moves una. It
// stops at a READ or atomic, reporting implied when psn reaches into or
// beyond it (its responses must have been lost, rxe comp check_psn). It
// returns whether una moved.
func (r *requester) ackThrough(psn wire.PSN) (moved, implied bool) {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if !e.started {
			break
		}
		if e.kind != kindSendWr {
			implied = !psn.LessThan(e.firstPSN)
			break
		}
		if e.lastPSN.LessThanEq(psn) {
			r.markDone(e)
			moved = true
			continue
		}
		if e.firstPSN.LessThanEq(psn) && psn.Next().Diff(r.una) > 0 {
			r.una = psn.Next()
			moved = true
		}
		break
	}
	return moved, implied
}

// onAck handles an ACKNOWLEDGE packet: ACK, RNR NAK or NAK.
func (r *requester) onAck(t *Transport, ctx *Ctx, psn wire.PSN, aeth wire.AETH) {
	syn := aeth.Syndrome()
	switch syn.Type() {
	case wire.SyndromeACK:
		moved, implied := r.ackThrough(psn)
		if moved {
			r.progress(t, ctx)
		}
		if implied {
			// The READ or atomic before this ACK was not answered.
			r.nakRetry(t, ctx)
		}
	case wire.SyndromeRNRNAK:
		t.nakRcvd(ctx, NAKRNR)
		// An RNR NAK acknowledges the packets before the one it names
		// (IBTA §9.7.5.2.8).
		if moved, _ := r.ackThrough(psn.Sub(1)); moved {
			r.progress(t, ctx)
		}
		if psn != r.una {
			t.drop(ctx, DropStaleResponse)
			return
		}
		if r.rnrLeft <= 0 && t.attrs.RNRRetry != 7 {
			// RNRNAK_THRESH 7 is infinite (IBTA C9-142).
			t.sqFatal(ctx, r.oldestPending(), AELLPTooManyRNRs)
			return
		}
		if t.attrs.RNRRetry != 7 {
			r.rnrLeft--
		}
		r.rnrWait = true
		r.rnrPSN = psn
		r.rto.disarm()
		r.rnr.arm(t.dp.Clock, ctx.now, max(syn.RNRTimer().Duration(), 1))
	case wire.SyndromeNAK:
		kind := nakKindOf(syn)
		t.nakRcvd(ctx, kind)
		// Every packet before the NAKed one is acknowledged.
		if moved, _ := r.ackThrough(psn.Sub(1)); moved {
			r.progress(t, ctx)
		}
		if kind == NAKSeq {
			if psn.LessThan(r.una) {
				t.drop(ctx, DropStaleResponse)
				return
			}
			// PSN sequence error: go back to the PSN the responder expects
			// (IBTA §9.7.5.2.1); costs a retry, as in rxe. ackThrough moved
			// una up to it unless a READ or atomic before it is still
			// unanswered: then the retry starts there.
			r.nakRetry(t, ctx)
			return
		}
		e := r.entryWith(psn)
		if e == nil {
			t.drop(ctx, DropStaleResponse)
			return
		}
		ae := AEIBRemoteOpError
		switch kind {
		case NAKInvReq:
			ae = AEIBInvalidRequest
		case NAKRemAccess:
			ae = AEIBRemoteAccessError
		}
		t.sqFatal(ctx, e, ae)
	default:
		// Reserved syndromes are errors (rxe_comp.c).
		if e := r.oldestPending(); e != nil {
			t.sqFatal(ctx, e, AEIBRemoteOpError)
		}
	}
}

// entryWith returns the pending RC entry whose PSN range holds psn.
func (r *requester) entryWith(psn wire.PSN) *sqEntry {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || !e.started || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if psn.InRange(e.firstPSN, e.lastPSN.Next()) {
			return e
		}
	}
	return nil
}

// onReadResponse places one READ response packet.
func (r *requester) onReadResponse(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	psn := p.BTH.PSN()
	// A response acknowledges the SEND/WRITEs before its request.
	if moved, _ := r.ackThrough(psn.Sub(1)); moved {
		r.progress(t, ctx)
	}
	e := r.oldestPending()
	if e == nil || e.kind != kindRead || !psn.InRange(e.firstPSN, e.lastPSN.Next()) {
		if e != nil && e.kind == kindRead && psn.Diff(e.lastPSN) > 0 {
			// Beyond the oldest READ: its responses were lost (implied NAK).
			r.nakRetry(t, ctx)
			return
		}
		t.drop(ctx, DropStaleResponse)
		return
	}
	if psn != r.una {
		// Behind: a duplicate; ahead: one was lost, the timer recovers
		// (rxe drops READ responses ahead of the expected PSN).
		t.drop(ctx, DropStaleResponse)
		return
	}
	op := p.Opcode()
	if p.AETH != nil && !p.AETH.Syndrome().IsACK() {
		t.sqFatal(ctx, e, AEIBRemoteOpError)
		return
	}
	mtu := uint64(t.mtu)
	rest := e.length - e.readRcvd
	n := uint64(len(p.Payload))
	// The packet at una carries the bytes at offset readRcvd whichever
	// request produced it (a re-request asks for the same bytes at the
	// same PSNs), so a late MIDDLE of the first request is as good as the
	// FIRST of a re-request; FIRST and ONLY must start a request (offset 0
	// or the last re-request's), MIDDLE and LAST continue one, and the
	// lengths must be what the position implies (IBTA C9-20..C9-23; rxe
	// comp check_ack accepts a retry restarting at FIRST or ONLY).
	start := e.readRcvd == 0 || e.readRcvd == e.reqOff
	var okLen bool
	switch {
	case op.IsOnly():
		okLen = start && n == rest && n <= mtu
	case op.IsFirst():
		okLen = start && n == mtu && rest > mtu
	case op.IsMiddle():
		okLen = e.readRcvd > 0 && n == mtu && rest > mtu
	case op.IsLast():
		okLen = e.readRcvd > 0 && n == rest && n <= mtu && n > 0
	}
	if !okLen {
		t.sqFatal(ctx, e, AERoCERspLengthError)
		return
	}
	if n > 0 {
		if !r.decodeRd(t, ctx, e) {
			return
		}
		if ae := t.writePayload(ctx, r.rd.Fragments(), e.readRcvd, p.Payload, op.IsEnd()); ae != 0 {
			t.sqFatal(ctx, e, ae)
			return
		}
	}
	e.readRcvd += n
	r.una = psn.Next()
	if op.IsEnd() {
		if e.op == OpRDMAReadLocalInv && e.sinkSTag != 0 {
			// READ with local invalidate: the sink STag is invalidated when
			// the data is in place (our reading: docs/hw-datapath.md "Version
			// differences").
			if err := t.dp.MRs.Invalidate(e.sinkSTag, t.pd(), t.q.ID, false); err != nil {
				t.sqFatal(ctx, e, aeOf(err))
				return
			}
			t.hw(StatRDMAVInv, 1)
		}
		r.markDone(e)
	}
	r.progress(t, ctx)
}

// onAtomicAck completes the oldest atomic with the original value.
func (r *requester) onAtomicAck(t *Transport, ctx *Ctx, psn wire.PSN, p *wire.Packet) {
	if moved, _ := r.ackThrough(psn.Sub(1)); moved {
		r.progress(t, ctx)
	}
	e := r.oldestPending()
	if e == nil || e.kind != kindAtomic || e.firstPSN != psn {
		t.drop(ctx, DropStaleResponse)
		return
	}
	if !p.AETH.Syndrome().IsACK() {
		t.sqFatal(ctx, e, AEIBRemoteOpError)
		return
	}
	if !r.decodeRd(t, ctx, e) {
		return
	}
	var b [8]byte
	// Atomics operate on host-order 64-bit words (rxe_resp.c
	// atomic_reply); the wire carries them big-endian.
	binary.LittleEndian.PutUint64(b[:], p.AtomicAckETH.OrigRemoteData())
	a := &r.rd.Atomic
	var err error
	ctx.spans, err = t.dp.MRs.Translate(a.LocalSTag, t.pd(), t.q.ID, a.LocalVA, 8, mr.AccessLocalWrite, false, ctx.spans[:0])
	if err != nil {
		t.sqFatal(ctx, e, aeOf(err))
		return
	}
	if !t.writeSpans(ctx, ctx.spans, b[:], true, psn) {
		t.sqFatal(ctx, e, AELCEQPCatastrophic)
		return
	}
	r.markDone(e)
	r.progress(t, ctx)
}

// markDone marks e done and moves una past it.
func (r *requester) markDone(e *sqEntry) {
	e.done = true
	r.inflight--
	if e.kind == kindRead || e.kind == kindAtomic {
		r.readsOut--
	}
	if next := e.lastPSN.Next(); next.Diff(r.una) > 0 {
		r.una = next
	}
}

// oldestPending returns the oldest RC entry that was sent and is not
// complete.
func (r *requester) oldestPending() *sqEntry {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if !e.started {
			return nil
		}
		return e
	}
	return nil
}

package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The responder's output: queued ACKs, NAKs, ATOMIC ACKs and READ responses
// leave in PSN order, READ responses at most RespBurst per visit.

// flushOut sends the queued responses in order: READ responses up to
// RespBurst packets per visit, ACKs when due.
func (r *responder) flushOut(t *Transport, ctx *Ctx) bool {
	did := false
	budget := t.dp.Tun.RespBurst
	for r.outN > 0 && t.q.State() != StateError {
		it := &r.out[r.outHead]
		switch it.kind {
		case itemAck:
			if it.due > ctx.now {
				r.ackT.arm(t.dp.Clock, ctx.now, it.due-ctx.now)
				return did
			}
			if !r.sendAck(t, ctx, it.syn, it.psn) {
				return did
			}
			r.ackT.disarm()
		case itemAtomic:
			if !r.sendAtomicAck(t, ctx, it) {
				return did
			}
		case itemRead:
			for !it.sent || it.off < it.length {
				if budget <= 0 {
					return did
				}
				if !r.sendReadResponse(t, ctx, it) {
					return did
				}
				did = true
				budget--
			}
			r.reads--
		}
		did = true
		r.outHead = (r.outHead + 1) % len(r.out)
		r.outN--
	}
	return did
}

// sendAck sends an ACKNOWLEDGE with syndrome syn for psn (AETH with the
// MSN; rxe send_ack). NAKs and RNR NAKs are counted by kind.
func (r *responder) sendAck(t *Transport, ctx *Ctx, syn wire.Syndrome, psn wire.PSN) bool {
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	ctx.pf.BTH = wire.BTHFields{Opcode: wire.RCAcknowledge, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn}
	ctx.pf.AETH = wire.AETHFields{Syndrome: syn, MSN: r.msn}
	if !t.encode(ctx, p, 0) {
		return false
	}
	if syn.IsACK() {
		t.count(ctx, CntAcksSent, 1)
	} else {
		k := nakKindOf(syn)
		t.nakSent(ctx, k)
	}
	t.transmit(ctx, p)
	return true
}

// sendAtomicAck sends an ATOMIC ACKNOWLEDGE with the original value.
func (r *responder) sendAtomicAck(t *Transport, ctx *Ctx, it *respItem) bool {
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	ctx.pf.BTH = wire.BTHFields{Opcode: wire.RCAtomicAcknowledge, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: it.psn}
	ctx.pf.AETH = wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid), MSN: r.msn}
	ctx.pf.AtomicAckETH = wire.AtomicAckETHFields{OrigRemoteData: it.orig}
	if !t.encode(ctx, p, 0) {
		return false
	}
	t.transmit(ctx, p)
	return true
}

// sendReadResponse sends the next READ response packet of it: FIRST,
// MIDDLE…, LAST or ONLY, PSNs from the request's, AETH on all but the
// middle ones, the R_Key checked again for every packet (rxe read_reply).
func (r *responder) sendReadResponse(t *Transport, ctx *Ctx, it *respItem) bool {
	mtu := uint64(t.mtu)
	n := min(mtu, it.length-it.off)
	var op wire.Opcode
	switch {
	case it.length <= mtu:
		op = wire.RCRDMAReadResponseOnly
	case it.off == 0:
		op = wire.RCRDMAReadResponseFirst
	case it.off+n == it.length:
		op = wire.RCRDMAReadResponseLast
	default:
		op = wire.RCRDMAReadResponseMiddle
	}
	psn := it.psn.Add(uint32(it.off / mtu))
	if n > 0 {
		var err error
		ctx.spans, err = t.dp.MRs.Translate(it.rkey, t.pd(), t.q.ID, it.va+it.off, n, mr.AccessRemoteRead, true, ctx.spans[:0])
		if err != nil {
			r.nakFatal(t, ctx, wire.NAKRemoteAccessError, psn, aeOf(err), cq.AESourceOutRR, false)
			return false
		}
	}
	p := t.rcPacket(ctx)
	if p == nil {
		return false
	}
	ctx.pf.BTH = wire.BTHFields{Opcode: op, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn}
	ctx.pf.AETH = wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid), MSN: r.msn}
	if !t.encode(ctx, p, int(n)) {
		return false
	}
	if n > 0 {
		// The spans were translated before the packet was taken; ctx.spans
		// is unchanged since.
		if !t.readSpans(ctx, ctx.spans, p, ctx.frame.Packet.Payload) {
			p.Release()
			r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, AELCEQPCatastrophic, cq.AESourceOutRR, false)
			return false
		}
	}
	t.transmit(ctx, p)
	it.off += n
	it.sent = true
	return true
}

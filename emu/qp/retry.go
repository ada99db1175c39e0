package qp

import "github.com/irdma-emu/irdma-emu/emu/wire"

// Retry: what makes RC reliable on the requester's side. Acknowledgements
// that move una restart the counts and the timer (progress); a timeout, a
// PSN sequence NAK or an implied NAK goes back to una (go-back-N, rewind)
// while retries remain; an RNR NAK waits its timer first.

// progress follows an acknowledgement that moved una: the retry counts
// start again, and the retransmission timer restarts or stops.
func (r *requester) progress(t *Transport, ctx *Ctx) {
	r.windowGrow(t)
	r.resetRetries(t)
	r.retrying = false
	if r.inflight > 0 {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	} else {
		r.rto.disarm()
	}
}

// rewind is go-back-N: the transmitter restarts at the oldest
// unacknowledged PSN to (rxe req_retry). Entries are re-sent from there;
// those already done (local, UD, acknowledged) are skipped.
func (r *requester) rewind(to wire.PSN) {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if !e.started {
			// Everything before it is acknowledged.
			r.send, r.sendPkt = k, 0
			r.nextPSN = r.maxSent
			return
		}
		if e.lastPSN.LessThan(to) {
			continue
		}
		r.send = k
		r.sendPkt = 0
		if e.kind == kindSendWr && to.Diff(e.firstPSN) > 0 {
			r.sendPkt = uint32(to.Diff(e.firstPSN))
		}
		r.nextPSN = e.firstPSN.Add(r.sendPkt)
		return
	}
	r.send, r.sendPkt = r.n, 0
	// Everything sent is acknowledged: the next new packet is maxSent.
	r.nextPSN = r.maxSent
}

// retry consumes a transport retry (timeout or PSN sequence NAK) and goes
// back; false when the count was exhausted and the QP failed.
func (r *requester) retry(t *Transport, ctx *Ctx) bool {
	if r.retryLeft <= 0 && !(t.dp.Tun.InfiniteRetry7 && t.attrs.RetryCnt == 7) {
		if e := r.oldestPending(); e != nil {
			t.sqFatal(ctx, e, AELLPTooManyRetries)
		} else {
			t.sqFatal(ctx, nil, AELLPTooManyRetries)
		}
		return false
	}
	if !(t.dp.Tun.InfiniteRetry7 && t.attrs.RetryCnt == 7) {
		r.retryLeft--
	}
	r.rewind(r.una)
	r.windowCut(t, ctx)
	r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	return true
}

// onRTO is the retransmission timer's expiry.
func (r *requester) onRTO(t *Transport, ctx *Ctx) {
	r.rto.disarm()
	if r.inflight == 0 || r.rnrWait {
		return
	}
	if t.suspended {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto()) // no retry while suspended
		return
	}
	t.count(ctx, CntTimeouts, 1)
	r.retry(t, ctx)
}

// nakRetry is the go-back-N a PSN sequence NAK or an implied NAK asks for:
// one per lack of progress (see retrying).
func (r *requester) nakRetry(t *Transport, ctx *Ctx) {
	if r.retrying {
		return
	}
	if r.retry(t, ctx) {
		r.retrying = true
	}
}

// onRNRTimer ends an RNR wait: retry from the NAKed PSN.
func (r *requester) onRNRTimer(t *Transport, ctx *Ctx) {
	r.rnr.disarm()
	if !r.rnrWait {
		return
	}
	r.rnrWait = false
	t.count(ctx, CntRNRWaits, 1)
	r.rewind(r.una)
	if r.inflight > 0 {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	}
}

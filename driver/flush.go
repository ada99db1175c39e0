package driver

import (
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// flushDelay is verbs.h:IRDMA_FLUSH_DELAY_MS: how long after a post to a
// flushed kernel QP the software flush completions are generated.
const flushDelay = 20 * time.Millisecond

// schedFlush is irdma_sched_qp_flush_work (mod_delayed_work of
// dwork_flush): after a flush was issued, requests posted to a kernel QP
// never reach the hardware; software completes them as flushed after
// flushDelay. Called with q.mu held.
func (d *Device) schedFlush(q *QP) {
	if q.dead || q.destroyPending {
		return
	}
	if q.flushTimer == nil {
		q.flushTimer = d.clock.AfterFunc(flushDelay, func() { d.generateFlushCompletions(q) })
		return
	}
	q.flushTimer.Reset(flushDelay)
}

// within reports whether x lies in the circular range [from, to] of a ring
// of size entries.
func within(x, from, to, size uint32) bool {
	return (x+size-from)%size <= (to+size-from)%size
}

// generateFlushCompletions is utils.c:irdma_generate_flush_completions:
// for each of the QP's CQs that holds no unpolled CQE (irdma_cq_empty), the
// outstanding WQEs of the matching queue become software completions with
// status flushed (FLUSH_MAJOR_ERR / FLUSH_GENERAL_ERR), queued on the CQ's
// cmpl_generated list that PollCQ drains after the ring; a CQ that still
// holds CQEs is retried after flushDelay (the hardware's flushed CQE must
// be expanded by the uk layer first). The CQ handler runs if the CQ was
// armed (irdma_comp_handler).
//
// Deviation: irdma retires the WQEs by moving the SQ/RQ ring tails
// (IRDMA_RING_SET_TAIL); driver/uk has no tail setter, so the driver keeps
// its own cursor per queue (sqGen, rqGen) past the WQEs already generated.
// The ring space of generated WQEs is therefore not reclaimed: after a
// ring's depth of posts to a flushed QP, posting returns ENOMEM.
func (d *Device) generateFlushCompletions(q *QP) {
	retry := false
	gen := func(c *CQ, sq bool) {
		c.mu.Lock()
		if c.ukcq == nil || !c.ukcq.Empty() {
			c.mu.Unlock()
			retry = true
			return
		}
		q.mu.Lock()
		if q.dead || q.destroyPending || q.ukqp == nil {
			q.mu.Unlock()
			c.mu.Unlock()
			return
		}
		base := uk.CQPollInfo{QPID: q.id, QP: q.ukqp, QPCtx: q.ctx.QPComplCtx, Error: true,
			MajorErr: flushMajorErr, MinorErr: flushGeneralErr, CompStatus: uk.CompFlushed}
		n := 0
		if sq {
			size, head, tail := q.ukqp.SQSize(), q.ukqp.SQHead(), q.ukqp.SQTail()
			idx := tail
			if q.sqGenValid && within(q.sqGen, tail, head, size) {
				idx = q.sqGen
			}
			for idx != head && n < int(size) {
				t := q.ukqp.SQTrack(idx)
				info := base
				info.IsSQ, info.WrID, info.WQEIdx = true, t.WrID, idx
				info.OpType = uint8(d.load64(q.kmem.at(int(idx)*32+24))>>32) & 0x3f
				c.generated = append(c.generated, uk.ProcessCQE(&info))
				idx = (idx + uint32(max(t.Quanta, 1))) % size
				n++
			}
			q.sqGen, q.sqGenValid = idx, true
		} else {
			size, head, tail := q.ukqp.RQSize(), q.ukqp.RQHead(), q.ukqp.RQTail()
			idx := tail
			if q.rqGenValid && within(q.rqGen, tail, head, size) {
				idx = q.rqGen
			}
			for idx != head && n < int(size) {
				info := base
				info.WrID, info.WQEIdx, info.OpType = q.ukqp.RQWrID(idx), idx, uk.OpRec
				c.generated = append(c.generated, uk.ProcessCQE(&info))
				idx = (idx + 1) % size
				n++
			}
			q.rqGen, q.rqGenValid = idx, true
		}
		q.mu.Unlock()
		c.mu.Unlock()
		// irdma calls the receive CQ's handler for both queues; the driver
		// notifies the CQ that received the completions.
		if n > 0 && c.armed.CompareAndSwap(true, false) && c.compHandler != nil {
			c.compEvents.Add(1)
			c.compHandler(c)
		}
	}
	gen(q.sendCQ, true)
	gen(q.recvCQ, false)
	if retry {
		q.mu.Lock()
		d.schedFlush(q)
		q.mu.Unlock()
	}
}

// dropGenerated removes a destroyed QP's software completions from the CQ
// (irdma leaves them queued; reporting a freed QP's work requests would
// hand the consumer completions for a QP it no longer has). Called with
// c.mu held.
func (c *CQ) dropGenerated(qpID uint32) {
	kept := c.generated[:0]
	for _, wc := range c.generated {
		if wc.QPNum != qpID {
			kept = append(kept, wc)
		}
	}
	clear(c.generated[len(kept):])
	c.generated = kept
}

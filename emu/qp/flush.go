package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// FlushCodes are the major/minor codes FLUSH_WQES puts in flushed CQEs: the
// WQE's user codes when USERFLCODE is set (docs/hw-controlpath.md "FLUSH_WQES
// and GEN_AE"), else FLUSH_MAJOR_ERR / FLUSH_GENERAL_ERR.
type FlushCodes struct {
	SQMajor, SQMinor uint16
	RQMajor, RQMinor uint16
}

// DefaultFlushCodes are the codes without USERFLCODE.
var DefaultFlushCodes = FlushCodes{
	SQMajor: cq.MajorFlush, SQMinor: cq.FlushGeneralErr,
	RQMajor: cq.MajorFlush, RQMinor: cq.FlushGeneralErr,
}

// FlushResult says what a flush found and wrote.
type FlushResult struct {
	SQWQEs, RQWQEs int   // outstanding WQEs found (NOPs included on the SQ)
	CQEs           int   // flushed CQEs written
	Err            error // first CQE write error (overflow, fault), if any
}

// Flush completes the outstanding WQEs of the selected queues as flushed
// (FLUSH_WQES, docs/hw-controlpath.md "FLUSH_WQES and GEN_AE";
// docs/hw-datapath.md "Flush generation").
//
// It walks the SQ from the device's consumer index while the header's
// valid bit matches the expected polarity, stepping by each WQE's quanta
// as the SQ decoder computes them (SQQuanta: NOPs are one quantum), and
// the RQ likewise by its fixed WQE stride. The consumer indices move past
// every WQE found, and the SQ one is published in the QP shadow area.
//
// perWQE selects the CQEs written. GEN_1/2 hardware (perWQE false, profile
// Queues.HWFlushPerWQE) writes one flushed CQE per queue, at the first
// outstanding WQE: software parks its CQ head on it and expands it into one
// completion per WQE it posted (rdma-core uk.c irdma_uk_cq_poll_cmpl: "park
// CQ head during a flush"; docs/hw-datapath.md "How software consumes a CQE",
// "Flush generation"). More CQEs would each be polled as ENOENT after the
// first one is expanded, ending a poll early with CQEs still queued. GEN_3
// (perWQE true) writes one CQE per outstanding WQE, NOPs excepted (software
// skips NOPs when it matches flushed CQEs to WQEs).
func (q *QP) Flush(mem *hostmem.Memory, flushSQ, flushRQ bool, codes FlushCodes, perWQE bool) FlushResult {
	// The data plane stops running the QP and hands its consumer indices
	// back first (hook.go), so the walk starts at the oldest WQE it has
	// not completed, in-flight ones included.
	end := q.beginControl()
	defer end(false)
	q.mu.Lock()
	defer q.mu.Unlock()
	var res FlushResult
	post := func(c *cq.CQ, e *cq.CQE) {
		if c == nil {
			return
		}
		if err := c.Post(e); err != nil {
			if res.Err == nil {
				res.Err = err
			}
			return
		}
		res.CQEs++
	}
	base := cq.CQE{
		QPCtx: q.attrs.CompletionCtx,
		Error: true,
	}
	base.SetQPID(q.ID)
	if flushSQ {
		e := base
		e.Major, e.Minor, e.SQ = codes.SQMajor, codes.SQMinor, true
		first := true
		q.walkSQ(mem, func(idx uint32, h Header) {
			res.SQWQEs++
			if perWQE && h.Opcode() == OpNOP {
				return
			}
			if perWQE || first {
				e.WQEIdx, e.Op = uint16(idx), uint8(h.Opcode())
				post(q.sendCQ, &e)
				first = false
			}
		})
		q.publishSQTail(mem)
	}
	if flushRQ {
		e := base
		e.Major, e.Minor = codes.RQMajor, codes.RQMinor
		first := true
		q.walkRQ(mem, func(idx uint32) {
			res.RQWQEs++
			if perWQE || first {
				e.WQEIdx = uint16(idx)
				post(q.recvCQ, &e)
				first = false
			}
		})
	}
	return res
}

// walkSQ calls fn for every valid WQE from the consumer index on and moves
// the consumer index past them. At most one lap is walked.
func (q *QP) walkSQ(mem *hostmem.Memory, fn func(idx uint32, h Header)) {
	w := &q.sq
	if w.Mem.Size == 0 {
		return
	}
	for walked := uint32(0); walked < w.Mem.Size; {
		v, err := mem.Load64(w.Mem.Addr(w.cons, 24))
		if err != nil || Header(v).ValidBit() != w.pol {
			return
		}
		n := uint32(SQQuantaPad(Header(v), q.padUncounted))
		if rest := w.Mem.Size - w.cons; n > rest {
			n = rest // a WQE never crosses the ring end (chunk rule); be safe
		}
		fn(w.cons, Header(v))
		w.advance(n)
		walked += n
	}
}

// walkRQ is walkSQ for the RQ, whose WQEs have a fixed stride.
func (q *QP) walkRQ(mem *hostmem.Memory, fn func(idx uint32)) {
	w := &q.rq
	stride := max(w.WQEQuanta, 1)
	if w.Mem.Size < stride {
		return
	}
	for walked := uint32(0); walked < w.Mem.Size; walked += stride {
		v, err := mem.Load64(w.Mem.Addr(w.cons, 24))
		if err != nil || Header(v).ValidBit() != w.pol {
			return
		}
		fn(w.cons)
		w.advance(stride)
	}
}

// AdvanceSQ moves the SQ consumer index by n quanta and publishes it in
// the shadow area (the data plane's hook; flush uses the same path).
func (q *QP) AdvanceSQ(mem *hostmem.Memory, n uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sq.advance(n)
	q.publishSQTail(mem)
}

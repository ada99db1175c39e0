package qp

import (
	"runtime"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Work a program posted before a control change is taken up before it.
//
// On the E810 the doorbell store that ends a post reaches the device
// ahead of the CQP doorbell of any command the kernel issues later
// (posted PCIe writes from one CPU stay in order), and the device fetches
// a doorbelled WQE within about a microsecond, while the command behind it
// costs a system call and a CQP round trip. So a program that posts and at
// once tears down sees its work done first: mckey's sender posts five
// unsignalled UD SENDs, then destroys its address handle and QP, and the
// receiver counts five messages. Here the worker that owns the QP may not
// have run yet when the command arrives (two cores shared with busy
// programs), and the modify to ERROR would flush WQEs the hardware would
// have sent. TakeUpPosted closes that gap: the control path calls it
// before such a command and it returns once the worker has fetched what
// was posted at that moment (or after a bound, so a stuck worker cannot
// stall the control path).

// TakeUpPosted wakes the worker while the QP is in RTS with a WQE posted at
// its fetch index and waits, at most limit, until a Run has fetched it. It
// reports false if the limit passed first. Only for a transport run by
// worker goroutines: with a stepped engine nothing would run it meanwhile
// (the caller does not call it there).
func (t *Transport) TakeUpPosted(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for t.postedAtHead() {
		ch := make(chan struct{})
		t.intake.Store(&ch)
		t.Doorbell() // the Run this wakes closes ch when it ends
		left := time.Until(deadline)
		if left <= 0 {
			t.intake.CompareAndSwap(&ch, nil)
			return false
		}
		tm := time.NewTimer(left)
		select {
		case <-ch:
			tm.Stop()
		case <-tm.C:
			t.intake.CompareAndSwap(&ch, nil)
			return false
		}
	}
	return true
}

// postedAtHead reports, under the claim, a QP in RTS whose SQ holds a WQE
// the requester has not fetched and could fetch now.
func (t *Transport) postedAtHead() bool {
	for !t.TryClaim() {
		if t.dead.Load() {
			return false
		}
		runtime.Gosched() // a Run in progress: it ends within its burst
	}
	defer t.Unclaim()
	if t.dead.Load() || t.q.State() != StateRTS || t.suspended {
		return false
	}
	if !t.req.started {
		// The worker has not run the QP since RTS: its fetch index is
		// where the QP was created or last flushed.
		return t.req.validAtFetch(t.dp.Mem)
	}
	return t.req.sqPosted(t.dp.Mem)
}

// validAtFetch reports a WQE whose valid bit matches at the fetch index.
func (r *requester) validAtFetch(mem *hostmem.Memory) bool {
	if r.sq.Mem.Size == 0 {
		return false
	}
	h, err := mem.Load64(r.sq.Mem.Addr(r.fetch.Cons, headerOffset))
	return err == nil && Header(h).ValidBit() == r.fetch.Pol
}

// The published fetch position (Transport.peek): the IOVA of the header
// qword of the SQ WQE the requester fetches next (8-byte aligned, so the
// low bits are free) with the valid bit it expects and peekFetch set; or
// peekNothing when no post could give the requester work until a packet,
// a timer or a control change runs it anyway; or peekUnknown.
const (
	peekUnknown uint64 = 0
	peekPol     uint64 = 1 << 0
	peekFetch   uint64 = 1 << 1
	peekNothing uint64 = 1 << 2
	peekLowBits uint64 = 7
)

// publishPeek records, at the end of a Run (under the claim), what
// Posted reads without it: sqPosted's test, split into the part only the
// worker may read and the valid-bit load anyone may make.
func (t *Transport) publishPeek() {
	r := &t.req
	v := peekNothing
	if r.fetchable() && r.sq.Mem.Size != 0 {
		v = uint64(r.sq.Mem.Addr(r.fetch.Cons, headerOffset)) | peekFetch | uint64(r.fetch.Pol)&peekPol
	}
	t.peekGen.Store(t.gen)
	t.peek.Store(v)
}

// endIntake ends a TakeUpPosted wait at the end of a Run.
func (t *Transport) endIntake() {
	if p := t.intake.Load(); p != nil && t.intake.CompareAndSwap(p, nil) {
		close(*p)
	}
}

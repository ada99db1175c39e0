package engine

import "github.com/irdma-emu/irdma-emu/emu/timing"

// Run to completion: a goroutine that brings work to a QP whose worker is
// parked — the link's receive goroutine with a packet, a context's
// notification reader with a post — runs the QP itself instead of
// queueing it and waking the worker. On two cores shared with programs
// that spin, every wake-up of another goroutine is a wait for a CPU
// (docs/performance.md, the ib_write_lat profile: the daemon's own code
// is a few per cent, the scheduler's search for work and its futex
// wake-ups most of the rest), so one hand-off fewer per packet on the
// responder's path (a WRITE or SEND arriving, its ACK leaving) and on the
// requester's (the ACK completing the WQE) is one wait fewer. A worker
// that is not parked is about to look at its queue anyway: the QP is
// handed to it as before, and so is a QP whose claim is held.
//
// What stays: at most one goroutine runs a QP (the claim of
// qp.Transport), per-QP packet order (the inbox), and Config.Stepped and
// a manual clock, which never run anything inline (their order of events
// is the tests' and emu/sim's, byte for byte).
//
// A runner is the worker state a Run needs besides the QP's own — its
// qp.Ctx, transmit batch and loopback scratch — owned by whoever took it
// (busy), so several goroutines can run QPs inline at once, each on a
// runner of its own, and none waits: with every runner taken the QP is
// handed off.

// runners is how many runs may go on inline at once: the link's receive
// goroutine and the notification readers, and the runs nested in them —
// an inline run whose frames stay inside the device runs the receiving QP
// inline too when it flushes, on a runner of its own, and that QP's answer
// (the ACK) runs the first QP once more, on a third. With two, that third
// run — the requester's completion — was handed to its worker, one
// wake-up more on every hop between two QPs of one device
// (docs/performance.md "The first WQE after a quiet, with many QPs": 7
// alternated runs each, the first WRITE after 3 s of quiet between two
// QPs of one program, median 665 → 448 µs; one-daemon ib_write_lat
// t_typical 43–53 → 28–32 µs). One more falls back to the hand-off.
const runners = 3

// inlineOK reports whether the engine may run QPs outside its workers.
func inlineOK(cfg *Config, clk timing.Clock) bool {
	if cfg.Stepped || cfg.HandOff {
		return false
	}
	_, wall := clk.(*timing.Wall)
	return wall
}

// takeRunner returns a free runner, or nil when all are in use (or the
// engine runs nothing inline).
func (e *Engine) takeRunner() *worker {
	for _, r := range e.runners {
		if r.busy.CompareAndSwap(false, true) {
			return r
		}
	}
	return nil
}

// runNow runs en's QP on the calling goroutine when its worker is parked
// and a runner is free, and reports whether it did; false leaves the QP
// to the caller to wake. After the Run the QP goes to its worker only if
// it has more to do (a burst limit, a packet or event that came during
// the Run) or the worker has not yet taken it into its rescan set
// (worker.scan, which covers a post whose doorbell word another QP's
// overwrote).
func (e *Engine) runNow(en *entry) bool {
	if !en.w.parked.Load() {
		return false
	}
	r := e.takeRunner()
	if r == nil {
		return false
	}
	defer r.busy.Store(false)
	tr := en.tr
	if !tr.TryClaim() {
		return false
	}
	r.cur = en
	more := tr.Run(&r.ctx)
	r.release(en)
	e.runPending(&r.rx.pend)
	r.ctx.Meter.Publish()
	e.sched.inline.Add(1)
	if !tr.Dead() && (more || tr.Pending() || !en.active.Load()) {
		en.Wake()
	}
	return true
}

// wake runs en's QP now if it can (runNow), or queues it on its worker.
func (e *Engine) wake(en *entry) {
	if !e.runNow(en) {
		en.Wake()
	}
}

// runPending runs (or wakes) the QPs a pass through the gate collected.
func (e *Engine) runPending(p *pending) {
	for _, en := range p.ens {
		e.wake(en)
	}
	clear(p.ens)
	p.ens = p.ens[:0]
}

// pending is a receiving goroutine's list of QPs that got packets in the
// batch being delivered: each is run (or woken) once, after the whole
// batch is in the inboxes, so a burst of packets for one QP is one Run.
type pending struct {
	on  bool // collect (run to completion is on) or wake at once
	ens []*entry
}

// add notes en (once per batch).
func (p *pending) add(en *entry) {
	for _, x := range p.ens {
		if x == en {
			return
		}
	}
	p.ens = append(p.ens, en)
}

package engine

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// worker is one of the engine's fixed goroutines (or, stepped, one
// partition Poll runs). Everything but ready, kickc and the counters is
// touched by the worker only.
type worker struct {
	e     *Engine
	id    int
	ready readyQueue
	kickc chan struct{}
	timer timing.Timer

	ctx    qp.Ctx
	port   qp.Counters
	tx     []*link.Packet
	local  []*link.Packet // the frames of a flush the device keeps (loop)
	rx     rxScratch      // the gate's scratch for them
	batch  int
	run    []*entry
	active []*entry
	cur    *entry // the QP being run (runEntry, runNow): its frames are in tx

	lastScan   time.Duration
	lastWork   time.Duration // when a round or scan last made progress
	lastYield  time.Duration // when a busy worker last yielded its P
	busyRounds int           // busy rounds since it last yielded

	// parked is set while the worker sleeps in park: a goroutine with work
	// for one of its QPs runs it itself then (inline.go).
	parked atomic.Bool
	// busy is a runner's owner flag (Engine.runners; inline.go); workers
	// do not use it.
	busy atomic.Bool
}

func newWorker(e *Engine, id int, pool *link.Pool) *worker {
	w := &worker{e: e, id: id, kickc: make(chan struct{}, 1), batch: link.DefaultBatchSize,
		tx: make([]*link.Packet, 0, link.DefaultBatchSize), local: make([]*link.Packet, 0, link.DefaultBatchSize)}
	w.ready.init()
	w.ctx.Pool = pool
	w.ctx.Port = &w.port
	w.ctx.Send = w.send
	w.ctx.SealAtWire = true // flush seals what leaves the device
	w.ctx.Meter = e.dp.Meter.Local()
	w.rx.meter = w.ctx.Meter
	return w
}

// kick wakes the worker's goroutine if it sleeps.
func (w *worker) kick() {
	select {
	case w.kickc <- struct{}{}:
	default:
	}
}

// send queues a built packet; a full batch goes to the link at once.
func (w *worker) send(p *link.Packet) {
	w.tx = append(w.tx, p)
	if len(w.tx) >= w.batch {
		w.flush()
	}
}

// flush sends the batch (transmit, in the QP's transmit order when a Run
// fills it: txorder.go) and runs the QPs its frames inside the device woke
// (the port's pending list).
func (w *worker) flush() {
	if en := w.cur; en != nil {
		w.transmitInOrder(en, false)
	} else {
		w.transmit()
	}
	w.e.runPending(&w.rx.pend)
}

// transmit hands the batch to the link (which owns the packets from then
// on, whatever happens to them), except the frames addressed to the device
// itself, which go through the port's receive path into their QPs' inboxes
// here, after the link has had the rest (loopback.go); the QPs they are for
// wait in the pending list for flush or the caller. Per-QP order holds: an
// RC QP's frames all take one way, each way keeps the order they were
// built in, and the batches of a QP's runs go in claim order
// (txorder.go).
func (w *worker) transmit() {
	if len(w.tx) == 0 {
		return
	}
	p := w.e.port
	own := p.ownGIDs()
	capture := p.looper != nil && p.looper.Capturing()
	out, local := w.tx[:0], w.local[:0] // out reuses w.tx in place: it never overtakes the reader
	var mcast uint64
	for _, pk := range w.tx {
		// The ICRC is computed here, for the frames that leave the device
		// (and the group copies, cloned from the sealed frame), as a NIC
		// computes it at the wire; a frame kept inside gets one only for
		// the capture (loopback.go).
		switch p.routeOf(own, pk.Data) {
		case toSelf:
			if capture {
				pk.Seal()
			}
			local = append(local, pk)
		case toGroup:
			pk.Seal()
			out = append(out, pk)
			if c := clone(w.ctx.Pool, pk); c != nil {
				local = append(local, c)
				mcast++
			} else {
				p.lb.noBuffer.Add(1)
			}
		default:
			pk.Seal()
			out = append(out, pk)
		}
	}
	if len(out) > 0 {
		if l := p.l; l != nil {
			_ = l.Send(out) // a closed link releases and returns net.ErrClosed
		} else {
			for _, pk := range out {
				pk.Release()
			}
		}
	}
	p.loop(&w.rx, local, mcast)
	clear(w.tx)
	w.tx = w.tx[:0]
	clear(local)
	w.local = local[:0]
}

// round runs every QP queued now, once; QPs with more to do queue again
// for the next round. It reports whether any ran.
func (w *worker) round() bool {
	w.run = w.run[:0]
	for en := w.ready.pop(); en != nil; en = w.ready.pop() {
		w.run = append(w.run, en)
	}
	if len(w.run) == 0 {
		return false
	}
	did := false
	for _, en := range w.run {
		if w.runEntry(en) {
			did = true
		}
	}
	clear(w.run)
	return did
}

// runEntry runs one QP under its claim and reports whether it made
// progress.
func (w *worker) runEntry(en *entry) bool {
	en.queued.Store(false)
	tr := en.tr
	if !tr.TryClaim() {
		return false // the control plane holds it and wakes it when done
	}
	before := tr.Works()
	w.cur = en
	more := tr.Run(&w.ctx)
	did := tr.Works() != before
	w.release(en)
	w.e.runPending(&w.rx.pend)
	w.ctx.Meter.Publish()
	if tr.Dead() {
		return did
	}
	if !en.active.Load() {
		en.active.Store(true)
		w.active = append(w.active, en)
	}
	if more {
		en.queue() // the loop's next round takes it
	}
	return did
}

// scan is the valid-bit rescan: it wakes every active QP with a posted
// WQE or pending work, then runs them; QPs idle for Linger leave the set.
// It reports whether the QPs it ran made progress.
func (w *worker) scan(now time.Duration) bool {
	w.lastScan = now
	j := 0
	linger := w.e.cfg.Scan.Linger
	for _, en := range w.active {
		tr := en.tr
		switch {
		case tr.Dead():
			en.active.Store(false)
			continue
		case tr.HasWork():
			en.queue() // run below
		case now-tr.LastWork() > linger && tr.Idle():
			en.active.Store(false)
			continue
		}
		w.active[j] = en
		j++
	}
	clear(w.active[j:])
	w.active = w.active[:j]
	// Run what the scan woke.
	return w.round()
}

// loop is the worker goroutine. Busy: run what is ready, poll the
// doorbell sources after every round, rescan the active QPs every
// MaxBackoff. Idle: keep polling the sources and rescanning — yielding in
// between — for Spin yields and ScanConfig.Poll after the last work, then
// park: sleep until kicked, with a timer only while a source cannot
// notify (backoff from MinBackoff to MaxBackoff). A parked engine costs
// nothing; timers for real deadlines (retransmission, RNR, ACK delay) are
// the QPs' own and kick the worker when due.
func (w *worker) loop() {
	defer w.e.wg.Done()
	e := w.e
	sc := &e.cfg.Scan
	clk := e.clock
	w.timer = clk.AfterFunc(math.MaxInt64, w.kick)
	w.timer.Stop()
	e.pollers.Add(1)
	e.syncSources(nil)
	idle := 0
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		now := clk.Now()
		ran := w.round()
		if e.pollSources(false, nil) {
			ran = w.round() || ran
		}
		if ran {
			idle = 0
			w.lastWork = now
			if !sc.Disabled && now-w.lastScan >= sc.MaxBackoff {
				w.scan(now)
			}
			if w.yieldDue(now) {
				runtime.Gosched()
			}
			continue
		}
		if !sc.Disabled && w.scan(now) {
			idle = 0
			w.lastWork = now
			continue
		}
		idle++
		if idle <= sc.Spin || now-w.lastWork < sc.Poll {
			runtime.Gosched()
			continue
		}
		if !w.park(idle) {
			return
		}
	}
}

// Busy yields. A worker kept busy would hold its P until the runtime
// preempts it (10 ms), starving the workers and link goroutines that feed
// it, which is the order of the retransmission timer: so it yields — but
// not after every round. A yield while another P is idle makes the runtime
// wake a thread to look for the goroutine it just queued (goschedImpl →
// wakep → futex): one futex wake-up per round, 8–12 % of one daemon's CPU
// at 64 KiB WRITEs (docs/performance.md "Three per-packet costs"). Every
// busyYieldEvery of the engine's clock, or every busyYieldRounds rounds
// where that clock does not move (a manual clock), bounds the starvation
// at a small fraction of the 10 ms.
const (
	busyYieldEvery  = time.Millisecond
	busyYieldRounds = 64
)

// yieldDue counts a busy round ending at now and reports whether the
// worker has held its P long enough to yield it.
func (w *worker) yieldDue(now time.Duration) bool {
	w.busyRounds++
	if now-w.lastYield < busyYieldEvery && w.busyRounds < busyYieldRounds {
		return false
	}
	w.lastYield, w.busyRounds = now, 0
	return true
}

// park sleeps until the worker is kicked (or its backoff timer fires). The
// last worker to park parks the notifying sources and polls them once
// more; if that finds a doorbell the worker goes back to work at once. It
// reports false when the engine stops.
func (w *worker) park(idle int) bool {
	e := w.e
	sc := &e.cfg.Scan
	if w.ready.queued() {
		return true // a QP the worker queued for itself (queue: no kick)
	}
	// Parked before it stops counting as a poller: with no pollers left,
	// every worker takes no more work by itself (Stats().Sched.Pollers 0
	// means work for any of them is run by whoever brings it).
	w.parked.Store(true)
	if e.pollers.Add(-1) == 0 {
		found, backoff := e.syncSources(nil)
		if found {
			w.parked.Store(false)
			e.pollers.Add(1)
			e.syncSources(nil)
			return true
		}
		if backoff && !sc.Disabled {
			shift := min(max(idle-sc.Spin-1, 0), 30)
			w.timer.Reset(min(sc.MinBackoff<<shift, sc.MaxBackoff))
			e.sched.timerArms.Add(1)
		}
	}
	select {
	case <-w.kickc:
	case <-e.stop:
		return false
	}
	w.parked.Store(false)
	w.timer.Stop() // a kick before the backoff ran out: no stray wake-up later
	e.sched.wakeups.Add(1)
	e.pollers.Add(1)
	e.syncSources(nil)
	return true
}

// close releases what the stopped worker still holds.
func (w *worker) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.flush()
	w.ctx.Meter.Publish()
}

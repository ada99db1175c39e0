package engine

import "sync/atomic"

// Parking: a worker with nothing to do polls for ScanConfig.Poll, then
// parks — it sleeps on its kick channel with no timer, unless a source
// cannot notify. The engine counts the workers that are not parked
// (pollers); when the last one parks, the notifying sources are told Park
// (their posters notify from then on) and polled once more; when the first
// one wakes, they are told Unpark. docs/dataplane.md "Idle and wake-up on
// post".

// schedCounters count what the workers' scheduling did: the figures that
// show an idle engine is idle (SchedStats).
type schedCounters struct {
	wakeups   atomic.Uint64 // a parked worker woke (kick or timer)
	timerArms atomic.Uint64 // backoff timers armed (sources that cannot notify)
	parks     atomic.Uint64 // the notifying sources told Park
	unparks   atomic.Uint64 // and Unpark
	found     atomic.Uint64 // doorbells found by the poll right after Park
	inline    atomic.Uint64 // QP runs outside the workers (inline.go)
	skipped   atomic.Uint64 // notifications for a QP with nothing posted (Notify)
	// pollSkipped: QPs a doorbell source named with nothing posted
	pollSkipped atomic.Uint64
}

// SchedStats are the workers' scheduling counters.
type SchedStats struct {
	// Wakeups counts the times a parked worker woke up: a kick (doorbell,
	// packet, timer expiry of a QP, notification, control) or its backoff
	// timer. An idle engine has none.
	Wakeups uint64
	// TimerArms counts the backoff timers armed to poll sources that
	// cannot notify. With no such source there are none.
	TimerArms uint64
	// Parks and Unparks count the transitions published to the notifying
	// sources: every worker parked (posters must notify), or one polls
	// again.
	Parks, Unparks uint64
	// ParkFound counts the doorbells the poll right after a Park found:
	// posts that raced the Park (they read "polling").
	ParkFound uint64
	// Inline counts the QP runs done by the goroutine that brought the
	// work — a packet, a notification — because the QP's worker was
	// parked (run to completion, inline.go).
	Inline uint64
	// NotifySkipped counts the QPs a post notification did not ring:
	// nothing new at the SQ head (Engine.Notify).
	NotifySkipped uint64
	// PollSkipped counts the QPs a doorbell source's poll named and the
	// engine did not ring: nothing new at the SQ head (ringFromSource).
	PollSkipped uint64
	// Pollers is the number of workers not parked now; Parked whether the
	// notifying sources were last told Park.
	Pollers int
	Parked  bool
}

func (e *Engine) schedStats() SchedStats {
	c := &e.sched
	s := SchedStats{Wakeups: c.wakeups.Load(), TimerArms: c.timerArms.Load(), Parks: c.parks.Load(),
		Unparks: c.unparks.Load(), ParkFound: c.found.Load(), Inline: c.inline.Load(), NotifySkipped: c.skipped.Load(),
		PollSkipped: c.pollSkipped.Load(), Pollers: int(e.pollers.Load())}
	e.parkMu.Lock()
	s.Parked = e.parked
	e.parkMu.Unlock()
	return s
}

// pollSources polls every doorbell source once (if no other worker is at
// it: a doorbell seen by one poller need not be seen by two) and reports
// whether any rang. With into, the QPs rung are collected there for the
// caller to run (inline.go) instead of being queued on their workers.
func (e *Engine) pollSources(wait bool, into *pending) bool {
	srcs := e.sources.Load()
	if srcs == nil || len(*srcs) == 0 {
		return false
	}
	if wait {
		e.srcPoll.Lock()
	} else if !e.srcPoll.TryLock() {
		return false
	}
	e.srcRang, e.srcInto = false, into
	for _, s := range *srcs {
		s.Poll(e.srcRing)
	}
	rang := e.srcRang
	e.srcInto = nil
	e.srcPoll.Unlock()
	return rang
}

// ringFromSource is what the sources' Poll calls (e.srcRing, made once:
// a closure per poll would allocate on every idle iteration). A source
// names every QP a doorbell may stand for — a context's doorbell word
// holds only its last ringer, so uverbs names all the context's QPs — and
// only those with a WQE at their SQ fetch index are rung
// (qp.Transport.Posted, one valid-bit load): ringing all of them ran every
// QP of a 1000-QP program for each post (docs/performance.md "The first
// WQE after a quiet, with many QPs").
func (e *Engine) ringFromSource(qpid uint32) {
	tr := e.posted(qpid, &e.sched.pollSkipped)
	if tr == nil {
		return
	}
	e.srcRang = true // under srcPoll
	if e.srcInto != nil {
		tr.Ring()
		e.srcInto.add(tr.Scheduler().(*entry))
		return
	}
	tr.Doorbell()
}

// syncSources makes what the notifying sources were told match pollers:
// Unpark when some worker polls, Park — then poll once more — when none
// does. Called after every change of pollers; parkMu orders the calls, and
// each decides from the counter's latest value, so the last call leaves
// the right state whatever the interleaving. It reports whether the poll
// after a Park found a doorbell (the QPs it rang are queued and their
// workers kicked, or with into collected there) and whether a source still
// wants polling with backoff.
func (e *Engine) syncSources(into *pending) (found, backoff bool) {
	e.parkMu.Lock()
	defer e.parkMu.Unlock()
	park := e.pollers.Load() == 0
	if park == e.parked {
		return false, park && e.backoff
	}
	e.parked = park
	srcs := e.sources.Load()
	if !park {
		e.sched.unparks.Add(1)
		if srcs != nil {
			for _, s := range *srcs {
				if n, ok := s.(NotifyingSource); ok {
					n.Unpark()
				}
			}
		}
		return false, false
	}
	e.sched.parks.Add(1)
	e.backoff = false
	if srcs != nil {
		for _, s := range *srcs {
			if n, ok := s.(NotifyingSource); !ok || n.Park() {
				e.backoff = true
			}
		}
	}
	// The store of "parked" is behind us (Park's atomic stores are
	// sequentially consistent); a poster that read "polling" stored its
	// doorbell before, and this poll sees it.
	if e.pollSources(true, into) {
		e.sched.found.Add(1)
		found = true
	}
	return found, e.backoff
}

// Polling while a batch is delivered. The link's receive goroutine counts
// as a poller from the first frame of a batch until the QPs it ran inline
// are done, so the contexts read "polling" meanwhile and a program's post
// in that time writes no eventfd; the Park at the end polls the doorbell
// pages once more and runs what it finds on the same goroutine. This is
// the post a ping-pong makes on the data just delivered (ib_write_lat
// spins on the buffer a WRITE fills, ibv_rc_pingpong on its receive
// CQE): it lands while the receive goroutine still sends the ACK, and
// goes out after it without the wake-up of the context's notification
// reader — one wake-up of a daemon thread fewer on every one-way hop
// (docs/performance.md "Polling while a batch is delivered"). The fence
// pair is the workers' (syncSources): the Park's store before the last
// poll, the program's doorbell store before its read of the word.
func (e *Engine) beginBatch() {
	if e.pollers.Add(1) == 1 {
		e.syncSources(nil)
	}
}

// endBatch ends what beginBatch began; with the last poller gone it parks
// the sources and runs what the last poll found, on the caller's
// goroutine, through p. A source that must be polled with backoff gets a
// worker to arm its timer, as the last worker to park does.
func (e *Engine) endBatch(p *pending) {
	if e.pollers.Add(-1) != 0 {
		return
	}
	found, backoff := e.syncSources(p)
	if found {
		e.runPending(p)
	}
	if backoff && !e.cfg.Scan.Disabled && len(e.workers) > 0 {
		e.workers[0].kick()
	}
}

// addSource tells a notifying source added while workers poll that they
// do (it starts parked: its posters notify until told otherwise).
func (e *Engine) addSource(s DoorbellSource) {
	n, ok := s.(NotifyingSource)
	if !ok {
		return
	}
	e.parkMu.Lock()
	defer e.parkMu.Unlock()
	if e.parked {
		e.backoff = n.Park() || e.backoff
	} else {
		n.Unpark()
	}
}

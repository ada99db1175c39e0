// Package sim runs emulated devices, the links between them and the
// programs driving them in deterministic virtual time: one discrete-event
// loop in integer picoseconds (timing.Ps), which is also the timing.Clock
// every block of the devices runs its timers on. The device's data path is
// modelled as timed resources (nic.go: doorbell and WQE fetch, PCIe reads
// with a bounded number outstanding per QP and per device, the transmit
// scheduler, the packet engine, MAC and wire, the receive parser, PCIe
// writes) around the real device model: the requester, responder and
// completer of emu/qp run in emu/engine's stepped mode on the WQEs the
// driver half (driver/) writes, and their effects are released when the
// model says they complete. docs/timing.md ("The pipeline model")
// describes the model and its parameters.
//
// A run is a function of its scenario and seed only: events fire in time
// order, ties in the order they were scheduled; nothing reads the wall
// clock except the figures printed under wall_ keys.
package sim

import (
	"container/heap"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Event is one scheduled call. Callers that schedule often keep their
// Events (one per packet in flight, one per resource) so that the loop
// allocates nothing per event.
type Event struct {
	at  timing.Ps
	seq uint64
	idx int // position in the heap; -1 when not scheduled
	f   func()
}

// NewEvent returns an unscheduled event that calls f.
func NewEvent(f func()) *Event { return &Event{f: f, idx: -1} }

// Init makes e an unscheduled event that calls f (for events embedded in
// other structs).
func (e *Event) Init(f func()) { e.f, e.idx = f, -1 }

// Pending reports whether e is scheduled, and when.
func (e *Event) Pending() (timing.Ps, bool) { return e.at, e.idx >= 0 }

// Loop is the event loop and the simulated clock. Everything runs in the
// goroutine calling Run; AfterFunc, At and Cancel may also be called from
// other goroutines while the loop is not running (a device's control path
// during set-up), hence the mutex.
type Loop struct {
	mu sync.Mutex
	// now is the virtual time (read directly by the loop's goroutine);
	// shared mirrors it for other goroutines.
	now    timing.Ps
	shared atomic.Int64
	events eventHeap
	seq    uint64
	fired  uint64
	// after runs after every event (the scenario polls the engines there).
	after func()
	// timerFired is set when a timer of AfterFunc ran: a device timer
	// (retransmission, RNR, ACK delay) may have made work for an engine.
	timerFired bool
}

// NewLoop returns a loop at time 0.
func NewLoop() *Loop { return &Loop{} }

// Time returns the current virtual time.
func (l *Loop) Time() timing.Ps { return timing.Ps(l.shared.Load()) }

// Fired returns how many events have run.
func (l *Loop) Fired() uint64 { return l.fired }

// At schedules e at t (the current time if t is earlier); a pending e
// moves.
func (l *Loop) At(e *Event, t timing.Ps) {
	l.mu.Lock()
	l.atLocked(e, t)
	l.mu.Unlock()
}

func (l *Loop) atLocked(e *Event, t timing.Ps) {
	t = max(t, l.now)
	if e.idx >= 0 {
		heap.Remove(&l.events, e.idx)
	}
	l.seq++
	e.at, e.seq = t, l.seq
	heap.Push(&l.events, e)
}

// AtEarliest schedules e at t unless it is already pending at or before t
// (a wake-up that several conditions may ask for: the earliest wins).
func (l *Loop) AtEarliest(e *Event, t timing.Ps) {
	l.mu.Lock()
	if e.idx < 0 || max(t, l.now) < e.at {
		l.atLocked(e, t)
	}
	l.mu.Unlock()
}

// Cancel unschedules e and reports whether it was pending.
func (l *Loop) Cancel(e *Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.idx < 0 {
		return false
	}
	heap.Remove(&l.events, e.idx)
	return true
}

// Step runs the earliest event, if any is due by limit, and reports
// whether it ran one.
func (l *Loop) Step(limit timing.Ps) bool {
	l.mu.Lock()
	if len(l.events) == 0 || l.events[0].at > limit {
		l.mu.Unlock()
		return false
	}
	e := heap.Pop(&l.events).(*Event)
	l.now = e.at
	l.shared.Store(int64(e.at))
	l.mu.Unlock()
	l.fired++
	e.f()
	if l.after != nil {
		l.after()
	}
	return true
}

// Run runs events in order until done reports true or no event is due by
// limit; it reports whether done held.
func (l *Loop) Run(limit timing.Ps, done func() bool) bool {
	for !done() {
		if !l.Step(limit) {
			return done()
		}
	}
	return true
}

// Now implements timing.Clock: the virtual time as a Duration (whole
// nanoseconds, rounded down).
func (l *Loop) Now() time.Duration { return time.Duration(l.Time() / timing.Nanosecond) }

// AfterFunc implements timing.Clock: f runs in the loop's goroutine once
// virtual time has advanced by d.
func (l *Loop) AfterFunc(d time.Duration, f func()) timing.Timer {
	t := &loopTimer{l: l}
	t.e.Init(func() {
		f()
		l.timerFired = true
	})
	t.Reset(d)
	return t
}

type loopTimer struct {
	l *Loop
	e Event
}

func (t *loopTimer) Stop() bool { return t.l.Cancel(&t.e) }

func (t *loopTimer) Reset(d time.Duration) bool {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	was := t.e.idx >= 0
	at := timing.Ps(math.MaxInt64)
	if d <= 0 {
		at = l.now
	} else if int64(d) < math.MaxInt64/int64(timing.Nanosecond)-int64(l.now) {
		at = l.now + timing.Ps(d)*timing.Nanosecond
	}
	l.atLocked(&t.e, at)
	return was
}

// eventHeap orders events by time, then by scheduling order.
type eventHeap []*Event

func (h eventHeap) Len() int { return len(h) }

func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (h *eventHeap) Push(x any) {
	e := x.(*Event)
	e.idx = len(*h)
	*h = append(*h, e)
}

func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

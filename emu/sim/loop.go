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
	timing.Deadline // in timing.Ps
	f               func()
}

// NewEvent returns an unscheduled event that calls f.
func NewEvent(f func()) *Event { return &Event{f: f} }

// Init makes e an unscheduled event that calls f (for events embedded in
// other structs).
func (e *Event) Init(f func()) { e.f = f }

// Pending reports whether e is scheduled, and when.
func (e *Event) Pending() (timing.Ps, bool) { return e.at(), e.Armed() }

func (e *Event) at() timing.Ps { return timing.Ps(e.Due()) }

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
	events timing.Deadlines[*Event]
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
	l.events.Arm(e, int64(max(t, l.now)))
}

// AtEarliest schedules e at t unless it is already pending at or before t
// (a wake-up that several conditions may ask for: the earliest wins).
func (l *Loop) AtEarliest(e *Event, t timing.Ps) {
	l.mu.Lock()
	if !e.Armed() || max(t, l.now) < e.at() {
		l.atLocked(e, t)
	}
	l.mu.Unlock()
}

// Cancel unschedules e and reports whether it was pending.
func (l *Loop) Cancel(e *Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events.Remove(e)
}

// Step runs the earliest event, if any is due by limit, and reports
// whether it ran one.
func (l *Loop) Step(limit timing.Ps) bool {
	l.mu.Lock()
	if e, ok := l.events.First(); !ok || e.at() > limit {
		l.mu.Unlock()
		return false
	}
	e := l.events.Pop()
	l.now = e.at()
	l.shared.Store(int64(l.now))
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
	was := t.e.Armed()
	at := timing.Ps(math.MaxInt64)
	if d <= 0 {
		at = l.now
	} else if int64(d) < math.MaxInt64/int64(timing.Nanosecond)-int64(l.now) {
		at = l.now + timing.Ps(d)*timing.Nanosecond
	}
	l.atLocked(&t.e, at)
	return was
}

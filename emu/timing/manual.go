package timing

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Manual is a clock for tests: time stands still until Advance moves it.
// Advance fires due timers in deadline order (ties in the order they were
// armed), one at a time, synchronously in the caller's goroutine, with Now
// equal to each timer's deadline while its function runs. Runs are
// therefore deterministic for a given sequence of calls.
//
// All methods are safe for concurrent use. Timer functions may call Now,
// AfterFunc, Stop and Reset (a timer re-armed from its own function with
// deadline ≤ the Advance target fires within the same Advance), but must not
// call Advance.
type Manual struct {
	now atomic.Int64 // time.Duration

	advance sync.Mutex // serialises Advance

	mu     sync.Mutex // guards timers
	timers Deadlines[*manualTimer]
}

// NewManual returns a manual clock at time 0.
func NewManual() *Manual { return &Manual{} }

// Now returns the clock's current time.
func (c *Manual) Now() time.Duration { return time.Duration(c.now.Load()) }

// AfterFunc arms a timer that fires when Advance reaches Now()+d. A timer
// with d ≤ 0 is due at once: it fires at the next Advance, even Advance(0),
// or later in the running Advance if armed from a timer function. It never
// runs inside AfterFunc, so callers may hold their own locks.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{c: c, f: f}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// Advance moves the clock forward by d (d < 0 counts as 0), firing every
// timer whose deadline is reached, in order.
func (c *Manual) Advance(d time.Duration) {
	c.advance.Lock()
	defer c.advance.Unlock()
	target := addSat(c.Now(), max(d, 0))
	for {
		c.mu.Lock()
		if t, ok := c.timers.First(); !ok || t.when() > target {
			c.now.Store(int64(target))
			c.mu.Unlock()
			return
		}
		t := c.timers.Pop()
		if t.when() > c.Now() {
			c.now.Store(int64(t.when()))
		}
		f := t.f
		c.mu.Unlock()
		f()
	}
}

// Pending returns the number of armed timers.
func (c *Manual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timers.Len()
}

// Next returns the deadline of the earliest armed timer, if any (a
// simulated-time loop advances straight to it).
func (c *Manual) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.timers.First()
	if !ok {
		return 0, false
	}
	return t.when(), true
}

func (c *Manual) armLocked(t *manualTimer, d time.Duration) {
	c.timers.Arm(t, int64(addSat(c.Now(), max(d, 0))))
}

type manualTimer struct {
	Deadline // guarded by c.mu
	c        *Manual
	f        func()
}

func (t *manualTimer) when() time.Duration { return time.Duration(t.Due()) }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.timers.Remove(t)
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.Armed()
	t.c.armLocked(t, d)
	return was
}

// addSat returns a+b for b ≥ 0, saturating at the largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

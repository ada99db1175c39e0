package timing

import (
	"container/heap"
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

	mu     sync.Mutex // guards timers, seq
	timers timerHeap
	seq    uint64
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
	t := &manualTimer{c: c, f: f, index: -1}
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
		if len(c.timers) == 0 || c.timers[0].when > target {
			c.now.Store(int64(target))
			c.mu.Unlock()
			return
		}
		t := heap.Pop(&c.timers).(*manualTimer)
		if t.when > c.Now() {
			c.now.Store(int64(t.when))
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
	return len(c.timers)
}

// Next returns the deadline of the earliest armed timer, if any (a
// simulated-time loop advances straight to it).
func (c *Manual) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return 0, false
	}
	return c.timers[0].when, true
}

func (c *Manual) armLocked(t *manualTimer, d time.Duration) {
	t.when = addSat(c.Now(), max(d, 0))
	c.seq++
	t.seq = c.seq
	heap.Push(&c.timers, t)
}

type manualTimer struct {
	c     *Manual
	f     func()
	when  time.Duration // guarded by c.mu
	seq   uint64        // guarded by c.mu; tie-break: arm order
	index int           // guarded by c.mu; position in the heap, -1 if not armed
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.index >= 0
	if was {
		heap.Remove(&t.c.timers, t.index)
	}
	t.c.armLocked(t, d)
	return was
}

// timerHeap orders timers by deadline, then arm order.
type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if h[i].when != h[j].when {
		return h[i].when < h[j].when
	}
	return h[i].seq < h[j].seq
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// addSat returns a+b for b ≥ 0, saturating at the largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Package timing holds the device's notion of time: the Clock every timer
// runs on (wall or manual), and the cycle model every stage of the device
// charges (Model, Meter). docs/timing.md documents the default E810-like
// costs.
//
// # Clocks
//
// A Clock is injected everywhere a timer runs (retransmit, RNR, ACK
// coalescing, CQP timeouts, statistics), so that tests replace real time by a
// Manual clock and step it deterministically. The model is gVisor's
// tcpip.Clock / faketime.ManualClock.
//
// Time is a time.Duration since the clock's epoch (its creation), monotonic.
// The device never needs a calendar date, and durations make a simulated
// clock trivial: the deterministic simulated-time mode (emu/sim) is one
// more Clock, an event loop in integer picoseconds (Ps), behind the same
// interface. Pipeline holds the parameters of the data path it models as
// timed resources.
package timing

import (
	"time"
)

// Clock is a source of monotonic time and timers.
type Clock interface {
	// Now returns the time elapsed since the clock's epoch. It never goes
	// backwards.
	Now() time.Duration
	// AfterFunc arranges for f to be called once d has elapsed (d ≤ 0:
	// as soon as possible) and returns a Timer that can stop or re-arm it.
	// Where f runs depends on the clock: its own goroutine for Wall, the
	// goroutine calling Advance for Manual.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of an AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not run yet, and reports whether it
	// did so (false: already fired or already stopped).
	Stop() bool
	// Reset re-arms the timer to fire d from now, whether or not it has
	// already fired or been stopped, and reports whether it was pending.
	Reset(d time.Duration) bool
}

// Wall is the real clock: Now is monotonic time since NewWall, timers are
// time.AfterFunc timers (f runs in its own goroutine).
type Wall struct {
	start time.Time
}

// NewWall returns a wall clock whose epoch is now.
func NewWall() *Wall { return &Wall{start: time.Now()} }

// Now returns the monotonic time elapsed since NewWall.
func (w *Wall) Now() time.Duration { return time.Since(w.start) }

// Epoch returns the wall time at which Now was zero (for timestamps that
// need a date, such as pcap records).
func (w *Wall) Epoch() time.Time { return w.start }

// AfterFunc calls f in its own goroutine after d.
func (w *Wall) AfterFunc(d time.Duration, f func()) Timer {
	return wallTimer{time.AfterFunc(d, f)}
}

type wallTimer struct{ t *time.Timer }

func (t wallTimer) Stop() bool                 { return t.t.Stop() }
func (t wallTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

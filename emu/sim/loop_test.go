package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// TestLoopOrder: events run in time order, ties in the order they were
// scheduled; moving, cancelling and past times behave as documented.
func TestLoopOrder(t *testing.T) {
	l := NewLoop()
	var got []string
	ev := func(name string) *Event { return NewEvent(func() { got = append(got, name) }) }
	a, b, c, d, e := ev("a"), ev("b"), ev("c"), ev("d"), ev("e")
	l.At(a, 30)
	l.At(b, 10)
	l.At(c, 10) // tie with b: after it
	l.At(d, 5)
	l.At(d, 40) // moved
	l.At(e, 20)
	if !l.Cancel(e) || l.Cancel(e) {
		t.Fatal("Cancel of a pending event, then of a cancelled one")
	}
	if at, ok := d.Pending(); !ok || at != 40 {
		t.Fatalf("d pending at %v %v", at, ok)
	}
	l.Run(35, func() bool { return false })
	if want := []string{"b", "c", "a"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v by 35, want %v", got, want)
	}
	if l.Time() != 30 {
		t.Fatalf("time %v after the last event at 30", l.Time())
	}
	// An event scheduled in the past runs now, after what is due now.
	l.At(e, 1)
	l.Run(100, func() bool { return false })
	if want := []string{"b", "c", "a", "e", "d"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if l.Fired() != 5 {
		t.Errorf("fired %d", l.Fired())
	}
}

// TestLoopClock: the loop as a timing.Clock — Now in whole nanoseconds of
// virtual time, AfterFunc, Stop and Reset as the Manual clock's contract.
func TestLoopClock(t *testing.T) {
	l := NewLoop()
	var clk timing.Clock = l
	var fired []time.Duration
	tm := clk.AfterFunc(3*time.Microsecond, func() { fired = append(fired, clk.Now()) })
	stopped := clk.AfterFunc(time.Microsecond, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop twice")
	}
	now := clk.AfterFunc(0, func() { fired = append(fired, -clk.Now()) })
	_ = now
	l.At(NewEvent(func() {}), 1500*timing.Nanosecond+500) // 1.5005 µs
	l.Step(timing.Second)                                 // the d = 0 timer, at 0
	l.Step(timing.Second)                                 // the plain event
	if clk.Now() != 1500*time.Nanosecond {
		t.Fatalf("Now %v at 1500.5 ns, want whole nanoseconds rounded down", clk.Now())
	}
	if tm.Reset(time.Microsecond) != true {
		t.Error("Reset of a pending timer reports false")
	}
	l.Run(timing.Second, func() bool { return false })
	if want := []time.Duration{0, 2500 * time.Nanosecond}; !slices.Equal(fired, want) {
		t.Fatalf("fired at %v, want %v", fired, want)
	}
	if tm.Reset(time.Hour) {
		t.Error("Reset of a fired timer reports true")
	}
	if at, ok := tm.(*loopTimer).e.Pending(); !ok || at != 2500*timing.Nanosecond+500+timing.Ps(time.Hour)*timing.Nanosecond {
		t.Errorf("re-armed at %v %v", at, ok)
	}
}

// TestBytesAt pins the rounding of the byte terms.
func TestBytesAt(t *testing.T) {
	for _, tc := range []struct {
		n    int
		bps  uint64
		want timing.Ps
	}{
		{4178, 12_500_000_000, 334240}, // a 4096-byte payload with its 82 bytes at 100 Gb/s: 334.24 ns
		{512, 28_000_000_000, 18286},   // 512 / 28 GB/s = 18.2857 ns, rounded up
		{0, 1, 0}, {-5, 1, 0}, {5, 0, 0},
	} {
		if got := timing.BytesAt(tc.n, tc.bps); got != tc.want {
			t.Errorf("BytesAt(%d, %d) = %d, want %d", tc.n, tc.bps, got, tc.want)
		}
	}
}

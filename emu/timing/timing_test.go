package timing_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Both clocks satisfy the interface the rest of the device uses.
var (
	_ timing.Clock = (*timing.Wall)(nil)
	_ timing.Clock = (*timing.Manual)(nil)
	_ timing.Model = (*timing.Linear)(nil)
)

func TestWall(t *testing.T) {
	c := timing.NewWall()
	a := c.Now()
	fired := make(chan time.Duration, 1)
	c.AfterFunc(time.Millisecond, func() { fired <- c.Now() })
	select {
	case at := <-fired:
		if at < a+time.Millisecond {
			t.Errorf("fired at %v, armed at %v for 1ms", at, a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wall timer did not fire")
	}
	stopped := c.AfterFunc(time.Hour, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop: want true then false")
	}
	if stopped.Reset(time.Hour) {
		t.Error("Reset of a stopped timer reported pending")
	}
	stopped.Stop()
	if c.Epoch().After(time.Now()) {
		t.Error("epoch in the future")
	}
}

// recorder logs timer firings as (name, Now at firing).
type recorder struct {
	mu  sync.Mutex
	got []fire
}

type fire struct {
	Name string
	At   time.Duration
}

func (r *recorder) fn(c timing.Clock, name string) func() {
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, fire{name, c.Now()})
	}
}

func (r *recorder) take() []fire {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got = nil
	return g
}

func TestManualOrder(t *testing.T) {
	c := timing.NewManual()
	var r recorder
	c.AfterFunc(30*time.Millisecond, r.fn(c, "c30"))
	c.AfterFunc(10*time.Millisecond, r.fn(c, "a10"))
	c.AfterFunc(20*time.Millisecond, r.fn(c, "b20"))
	c.AfterFunc(10*time.Millisecond, r.fn(c, "a10-second")) // tie: arm order
	c.AfterFunc(50*time.Millisecond, r.fn(c, "e50"))
	if got := r.take(); got != nil {
		t.Fatalf("fired before Advance: %v", got)
	}
	steps := []struct {
		advance time.Duration
		want    []fire
		now     time.Duration
	}{
		{9 * time.Millisecond, nil, 9 * time.Millisecond},
		{1 * time.Millisecond, []fire{{"a10", 10 * time.Millisecond}, {"a10-second", 10 * time.Millisecond}}, 10 * time.Millisecond},
		{25 * time.Millisecond, []fire{{"b20", 20 * time.Millisecond}, {"c30", 30 * time.Millisecond}}, 35 * time.Millisecond},
		{time.Hour, []fire{{"e50", 50 * time.Millisecond}}, 35*time.Millisecond + time.Hour},
	}
	for i, s := range steps {
		c.Advance(s.advance)
		if diff := cmp.Diff(s.want, r.take()); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
		if c.Now() != s.now {
			t.Errorf("step %d: Now = %v, want %v", i, c.Now(), s.now)
		}
	}
	if c.Pending() != 0 {
		t.Errorf("Pending = %d", c.Pending())
	}
}

func TestManualStopReset(t *testing.T) {
	c := timing.NewManual()
	var r recorder
	a := c.AfterFunc(10, r.fn(c, "a"))
	b := c.AfterFunc(20, r.fn(c, "b"))
	if next, ok := c.Next(); !ok || next != 10 {
		t.Errorf("Next = %v, %v", next, ok)
	}
	if !a.Stop() {
		t.Error("Stop of a pending timer = false")
	}
	if a.Stop() {
		t.Error("second Stop = true")
	}
	if !b.Reset(5) {
		t.Error("Reset of a pending timer = false")
	}
	c.Advance(5)
	if diff := cmp.Diff([]fire{{"b", 5}}, r.take()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if b.Stop() {
		t.Error("Stop after firing = true")
	}
	if b.Reset(10) {
		t.Error("Reset after firing reported pending")
	}
	if a.Reset(1) {
		t.Error("Reset after Stop reported pending")
	}
	c.Advance(100)
	if diff := cmp.Diff([]fire{{"a", 6}, {"b", 15}}, r.take()); diff != "" {
		t.Errorf("re-armed timers (-want +got):\n%s", diff)
	}
	if _, ok := c.Next(); ok {
		t.Error("Next with no timers armed")
	}
}

// TestManualRearm: a periodic timer re-armed from its own function fires at
// exact multiples within one Advance; zero-delay timers wait for Advance.
func TestManualRearm(t *testing.T) {
	c := timing.NewManual()
	var ticks []time.Duration
	var tick timing.Timer
	tick = c.AfterFunc(3, func() {
		ticks = append(ticks, c.Now())
		tick.Reset(3)
	})
	c.Advance(10)
	if diff := cmp.Diff([]time.Duration{3, 6, 9}, ticks); diff != "" {
		t.Errorf("ticks (-want +got):\n%s", diff)
	}
	tick.Stop()

	ran := false
	c.AfterFunc(0, func() { ran = true })
	c.AfterFunc(-time.Second, func() {})
	if ran {
		t.Fatal("zero-delay timer ran inside AfterFunc")
	}
	c.Advance(0)
	if !ran || c.Now() != 10 || c.Pending() != 0 {
		t.Errorf("after Advance(0): ran=%v Now=%v Pending=%d", ran, c.Now(), c.Pending())
	}
	c.Advance(-5)
	if c.Now() != 10 {
		t.Errorf("negative Advance moved the clock to %v", c.Now())
	}
}

func TestManualSaturates(t *testing.T) {
	c := timing.NewManual()
	c.Advance(math.MaxInt64 - 5)
	c.AfterFunc(math.MaxInt64, func() {}) // deadline saturates
	c.Advance(math.MaxInt64)
	if c.Now() != math.MaxInt64 {
		t.Errorf("Now = %v, want saturated", c.Now())
	}
	if c.Pending() != 0 {
		t.Errorf("saturated timer did not fire")
	}
}

// TestManualConcurrent arms, stops and resets timers from several goroutines
// while another advances the clock; every timer fires at most once per arm
// and none is lost.
func TestManualConcurrent(t *testing.T) {
	c := timing.NewManual()
	var fired, stopped atomic.Int64
	var wg sync.WaitGroup
	const workers, per = 4, 300
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				tm := c.AfterFunc(time.Duration(i%7), func() { fired.Add(1) })
				if (i+w)%3 == 0 && tm.Stop() {
					stopped.Add(1)
				}
				_ = c.Now()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			c.Advance(1)
		}
	}()
	wg.Wait()
	<-done
	c.Advance(time.Hour)
	if got := fired.Load() + stopped.Load(); got != workers*per {
		t.Errorf("fired %d + stopped %d = %d, want %d", fired.Load(), stopped.Load(), got, workers*per)
	}
}

func TestCyclesConversions(t *testing.T) {
	tests := []struct {
		c    timing.Cycles
		hz   uint64
		want time.Duration
	}{
		{1000, 1e9, time.Microsecond},
		{1000, 2.5e9, 400 * time.Nanosecond},
		{1, 3e9, 0}, // rounds down
		{5, 0, 0},
		{math.MaxUint64, 1, math.MaxInt64},
		{math.MaxUint64, 1e9, math.MaxInt64},
	}
	for _, tc := range tests {
		if got := tc.c.Duration(tc.hz); got != tc.want {
			t.Errorf("Cycles(%d).Duration(%d) = %v, want %v", tc.c, tc.hz, got, tc.want)
		}
	}
	in := []struct {
		d    time.Duration
		hz   uint64
		want timing.Cycles
	}{
		{time.Microsecond, 1e9, 1000},
		{time.Nanosecond, 2.5e9, 3}, // rounds up
		{-time.Second, 1e9, 0},
		{math.MaxInt64, math.MaxUint64, math.MaxUint64},
	}
	for _, tc := range in {
		if got := timing.CyclesIn(tc.d, tc.hz); got != tc.want {
			t.Errorf("CyclesIn(%v, %d) = %d, want %d", tc.d, tc.hz, got, tc.want)
		}
	}
}

// TestE810Costs pins the default model's arithmetic to values worked out by
// hand in docs/timing.md.
func TestE810Costs(t *testing.T) {
	m := timing.E810()
	tests := []struct {
		stage timing.Stage
		bytes int
		want  timing.Cycles
	}{
		{timing.Doorbell, 0, 325},                                      // the posted-write latency, half the 650 ns read round trip
		{timing.Doorbell, 4096, 325},                                   // no byte term
		{timing.WQEFetch, 32, 652},                                     // 650 + ceil(32/28)
		{timing.WQEFetch, 256, 660},                                    // 650 + ceil(256/28 = 9.14)
		{timing.PayloadDMARead, 4096, 797},                             // 650 + ceil(146.3)
		{timing.PacketBuild, 4112, 85},                                 // 20 + ceil(4112/64 = 64.25)
		{timing.Serialise, 4112, 335},                                  // (4112+66)·8/100 = 334.24 ns
		{timing.Serialise, 0, 6},                                       // 66·8/100 = 5.28 ns
		{timing.Receive, 1040, 47},                                     // 30 + ceil(16.25)
		{timing.PayloadDMAWrite, 64, 328},                              // 325 + ceil(2.29)
		{timing.CQEWrite, 32, 327},                                     // 325 + ceil(1.14)
		{timing.Event, 8, 651},                                         // 2 × 325 + ceil(0.29)
		{timing.CQPCommand, 256 + 64, 3012},                            // 3000 + ceil(11.4)
		{timing.Serialise, -100, 6},                                    // negative bytes count as 0
		{timing.NumStages, 100, 0},                                     // unknown stage
		{timing.Stage(200), 100, 0},                                    // unknown stage
		{timing.PayloadDMARead, math.MaxInt, 650 + 329406144173384851}, // ceil((2^63-1)/28)
	}
	for _, tc := range tests {
		if got := m.Cost(tc.stage, tc.bytes); got != tc.want {
			t.Errorf("Cost(%v, %d) = %d, want %d", tc.stage, tc.bytes, got, tc.want)
		}
	}
	if m.Hz() != 1e9 {
		t.Errorf("Hz = %d", m.Hz())
	}
}

// TestE810SmallWrite pins the unpipelined 64-byte RDMA WRITE of
// docs/timing.md: 2025 cycles from doorbell to remote payload.
func TestE810SmallWrite(t *testing.T) {
	m := timing.E810()
	const udp = 12 + 16 + 64 + 4 // BTH + RETH + payload + ICRC
	steps := []struct {
		s     timing.Stage
		bytes int
		want  timing.Cycles
	}{
		{timing.Doorbell, 0, 325},
		{timing.WQEFetch, 32, 652},
		{timing.PayloadDMARead, 64, 653},
		{timing.PacketBuild, udp, 22},
		{timing.Serialise, udp, 13},
		{timing.Receive, udp, 32},
		{timing.PayloadDMAWrite, 64, 328},
	}
	var total timing.Cycles
	for _, st := range steps {
		c := m.Cost(st.s, st.bytes)
		if c != st.want {
			t.Errorf("%v(%d) = %d, want %d", st.s, st.bytes, c, st.want)
		}
		total += c
	}
	if total != 2025 || total.Duration(m.Hz()) != 2025*time.Nanosecond {
		t.Errorf("total %d cycles (%v), want 2025", total, total.Duration(m.Hz()))
	}
}

// TestE810Goodput checks the serialisation stage against the goodput ceilings
// derived in docs/roce.md "Wire overhead and E810 figures" (82 bytes of
// overhead per packet: 92.6 % of line rate at PMTU 1024, 98.0 % at 4096),
// within the rounding to whole cycles.
func TestE810Goodput(t *testing.T) {
	m := timing.E810()
	for _, tc := range []struct {
		pmtu int
		want float64
	}{{1024, 0.926}, {4096, 0.980}} {
		c := m.Cost(timing.Serialise, tc.pmtu+12+4) // BTH + payload + ICRC
		goodput := float64(tc.pmtu*8) / float64(c.Duration(m.Hz()).Nanoseconds()) / 100
		if math.Abs(goodput-tc.want) > 0.01 {
			t.Errorf("PMTU %d: goodput %.3f of line rate, want %.3f", tc.pmtu, goodput, tc.want)
		}
	}
}

func TestLinearSaturates(t *testing.T) {
	m := &timing.Linear{ClockHz: math.MaxUint64}
	m.Stages[timing.Serialise] = timing.StageCost{Fixed: 10, Overhead: math.MaxInt, BytesPerSec: 1}
	m.Stages[timing.Doorbell] = timing.StageCost{Fixed: math.MaxUint64, BytesPerSec: 1}
	if got := m.Cost(timing.Serialise, math.MaxInt); got != math.MaxUint64 {
		t.Errorf("Cost = %d, want saturated", got)
	}
	if got := m.Cost(timing.Doorbell, 1); got != math.MaxUint64 {
		t.Errorf("Cost = %d, want saturated", got)
	}
	var zero timing.Linear
	if got := zero.Cost(timing.Serialise, 100); got != 0 {
		t.Errorf("zero Linear Cost = %d", got)
	}
}

func TestStageString(t *testing.T) {
	want := []string{"doorbell", "wqe-fetch", "payload-dma-read", "packet-build", "serialise",
		"receive", "payload-dma-write", "cqe-write", "event", "cqp-command"}
	var got []string
	for s := range timing.Stage(timing.NumStages) {
		got = append(got, s.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s := timing.Stage(77).String(); s != "Stage(77)" {
		t.Errorf("String = %q", s)
	}
}

func TestMeterConcurrent(t *testing.T) {
	m := timing.NewMeter(nil)
	const workers, per = 4, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				s := timing.Stage((w + i) % timing.NumStages)
				m.Charge(s, 64)
				_ = m.Stage(s)
			}
		}()
	}
	wg.Wait()
	snap := m.Snapshot()
	var count uint64
	var total timing.Cycles
	model := m.Model()
	for s, st := range snap.Stages {
		count += st.Count
		if want := timing.Cycles(st.Count) * model.Cost(timing.Stage(s), 64); st.Cycles != want {
			t.Errorf("%v: %d cycles for %d charges, want %d", timing.Stage(s), st.Cycles, st.Count, want)
		}
		if st.Bytes != 64*st.Count {
			t.Errorf("%v: %d bytes for %d charges", timing.Stage(s), st.Bytes, st.Count)
		}
		total += st.Cycles
	}
	if count != workers*per || snap.Total != total || m.Total() != total {
		t.Errorf("count %d total %d/%d/%d", count, snap.Total, total, m.Total())
	}
	if c := m.Charge(timing.NumStages, 5); c != 0 || m.Total() != total {
		t.Error("unknown stage was charged")
	}
	m.Reset()
	if s := m.Snapshot(); s != (timing.Snapshot{}) {
		t.Errorf("after Reset: %+v", s)
	}
}

func TestMeterNoAllocs(t *testing.T) {
	m := timing.NewMeter(timing.E810())
	if n := testing.AllocsPerRun(1000, func() { m.Charge(timing.Serialise, 4112) }); n != 0 {
		t.Errorf("Charge: %v allocations", n)
	}
}

func BenchmarkCharge(b *testing.B) {
	m := timing.NewMeter(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Charge(timing.PacketBuild, 4112)
		}
	})
}

package sim

import (
	"runtime"
	"testing"
)

// mallocsPerPacket runs the 64 KiB WRITE scenario for iters and returns
// the heap allocations of the measurement per packet sent.
func mallocsPerPacket(t *testing.T, iters int) (float64, uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	rs, err := Run(Scenario{Verb: "write", Sizes: []int{65536}, Iters: iters, Inline: -1})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	_ = rs
	return float64(ms.Mallocs - before), uint64(iters) * 16
}

// TestModelAllocs: the model adds no allocation per packet in the steady
// state: the allocations of a run grow with its set-up and its program
// (one PollCQ result per CQE batch), not with its packets.
func TestModelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, pa := mallocsPerPacket(t, 500)
	b, pb := mallocsPerPacket(t, 2500)
	per := (b - a) / float64(pb-pa)
	t.Logf("%.0f and %.0f allocations for %d and %d packets: %.3f per extra packet", a, b, pa, pb, per)
	if per > 0.05 {
		t.Errorf("%.3f allocations per packet in the steady state, want none (a CQE batch's poll aside)", per)
	}
}

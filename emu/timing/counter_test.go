package timing_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// TestCounter: the counter under a manual clock, at GEN_3's 1 GHz and at
// other rates; the expected values are the clock's time multiplied out by
// hand.
func TestCounter(t *testing.T) {
	for _, tc := range []struct {
		name string
		khz  uint64
		at   time.Duration
		want uint64
	}{
		{"epoch", 1_000_000, 0, 0},
		{"1 GHz: one tick a nanosecond", 1_000_000, 1_234_567 * time.Nanosecond, 1_234_567},
		{"1 GHz at 5 s", 1_000_000, 5 * time.Second, 5_000_000_000},
		{"100 MHz floors", 100_000, 1_234_567 * time.Nanosecond, 123_456},
		{"156.25 MHz", 156_250, 64 * time.Nanosecond, 10},
		{"1 kHz", 1, 2500 * time.Millisecond, 2500},
		{"1 GHz after a day", 1_000_000, 24 * time.Hour, 86_400_000_000_000},
		{"no clock rate", 0, time.Second, 0},
	} {
		c := timing.NewManual()
		c.Advance(tc.at)
		if got := timing.NewCounter(c, tc.khz).Ticks(); got != tc.want {
			t.Errorf("%s: %d ticks, want %d", tc.name, got, tc.want)
		}
	}
	if timing.NewCounter(nil, 1_000_000).Ticks() != 0 {
		t.Error("a counter without a clock ticks")
	}
}

package engine

import (
	"testing"
	"time"
)

// TestYieldDue: a busy worker yields its P once per busyYieldEvery of its
// clock, or once per busyYieldRounds rounds when the clock stands still
// (a manual clock), not after every round.
func TestYieldDue(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		name   string
		rounds []time.Duration // the clock at the end of each busy round
		want   []int           // indices of the rounds that yield
	}{
		{"rounds of 100 µs", steps(0, 100*us, 25), []int{10, 20}},
		{"rounds of 2 ms", steps(2000*us, 2000*us, 3), []int{0, 1, 2}},
		{"a still clock", steps(0, 0, 2*busyYieldRounds+1), []int{busyYieldRounds - 1, 2*busyYieldRounds - 1}},
		{"rounds of 1 µs", steps(0, us, 3*busyYieldRounds), []int{busyYieldRounds - 1, 2*busyYieldRounds - 1, 3*busyYieldRounds - 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w worker
			var got []int
			for i, now := range tc.rounds {
				if w.yieldDue(now) {
					got = append(got, i)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("yielded after rounds %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("yielded after rounds %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// steps returns n clock readings from start, step apart.
func steps(start, step time.Duration, n int) []time.Duration {
	r := make([]time.Duration, n)
	for i := range r {
		r[i] = start + time.Duration(i)*step
	}
	return r
}

package qp

import "testing"

// TestWindowSteps walks the window through slow start, cuts and the
// additive increase with hand-worked values (window.go): it starts at
// initialWindow, doubles with the PSNs acknowledged up to the limit, is
// halved by a cut down to minWindow (or the limit, if smaller), and above
// the cut grows by one PSN per window's worth acknowledged.
func TestWindowSteps(t *testing.T) {
	type step struct {
		cut   bool   // a go-back-N; else an acknowledgement of acked PSNs
		acked uint32 // PSNs acknowledged
		want  int32  // the window after the step
	}
	tests := []struct {
		name  string
		limit uint32
		steps []step
	}{
		{"slow start to the limit, cut, grow", 512, []step{
			{acked: 0, want: 128},
			{acked: 100, want: 228},
			{acked: 200, want: 428},
			{acked: 300, want: 512}, // capped
			{cut: true, want: 256},
			{acked: 255, want: 256},
			{acked: 1, want: 257},
			{acked: 257 + 258, want: 259},
			{cut: true, want: 129},
			{cut: true, want: 64},
			{cut: true, want: 32},
			{cut: true, want: 16},
			{cut: true, want: 16}, // the floor
			{acked: 16, want: 17},
		}},
		{"a limit below the initial window", 64, []step{
			{acked: 0, want: 64},
			{cut: true, want: 32},
			{acked: 32 + 33, want: 34},
		}},
		{"a limit below the floor", 8, []step{
			{acked: 0, want: 8},
			{cut: true, want: 8},
			{acked: 100, want: 8},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{dp: &DataPlane{Tun: Tunables{MaxUnackedPSNs: tc.limit}}}
			ctx := &Ctx{Port: &Counters{}}
			r := &tr.req
			r.windowOpen(tr)
			cuts := uint64(0)
			for i, s := range tc.steps {
				if s.cut {
					r.windowCut(tr, ctx)
					cuts++
				} else {
					r.una = r.una.Add(s.acked)
					r.windowGrow(tr)
				}
				if got := r.window(tr); got != s.want {
					t.Fatalf("step %d %+v: window %d, want %d", i, s, got, s.want)
				}
			}
			if got := tr.C.Get(CntWindowCuts); got != cuts {
				t.Errorf("counted %d cuts, want %d", got, cuts)
			}
		})
	}
}

package qp_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// TestPosted walks Transport.Posted — what a notification or a doorbell
// poll asks before it rings a QP — through a QP's life: it answers from
// what the last Run published, without the claim (a worker holding the
// claim does not make it answer "ring", and it never takes the claim a
// worker would then miss), and "ring" whenever the published state may be
// stale.
func TestPosted(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"no Run yet", func() {}, true},
		{"after a Run with an empty SQ", r.run, false},
		{"a WQE posted, not run", func() { r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 8) }, true},
		{"after the Run that sent it (its ACK outstanding)", r.run, false},
		{"its ACK", func() { r.inject(ack(startPSN), nil); r.run() }, false},
		{"the claim held by a worker, SQ empty", func() {
			if !r.tr.TryClaim() {
				t.Fatal("claim held")
			}
		}, false},
		{"a WQE posted while the worker holds the claim", func() {
			r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 8)
		}, true},
		{"the worker's claim is still its own", func() {
			if r.tr.TryClaim() {
				t.Error("Posted released the worker's claim")
			}
			r.tr.Unclaim()
			r.run()
		}, false},
		{"a control change", r.tr.BeginControl, true},
		{"its end", func() { r.tr.EndControl(false) }, true},
		{"the Run after it", r.run, false},
	}
	for _, st := range steps {
		st.do()
		if got := r.tr.Posted(); got != st.want {
			t.Errorf("%s: Posted %v, want %v", st.name, got, st.want)
		}
	}
}

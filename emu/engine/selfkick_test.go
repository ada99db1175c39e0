package engine

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// TestReadyQueueQueued: queued tells an empty queue from one that still
// holds an entry, in every shape Vyukov's queue takes — the stub at the
// tail, a lone entry at the tail after a pop, several entries.
func TestReadyQueueQueued(t *testing.T) {
	var q readyQueue
	q.init()
	a, b := &entry{}, &entry{}
	steps := []struct {
		name string
		op   func() *entry
		want *entry // what the pop returned (op == pop)
		has  bool
	}{
		{"new", nil, nil, false},
		{"push a", func() *entry { q.push(a); return nil }, nil, true},
		{"pop a", q.pop, a, false},
		{"push a, b", func() *entry { q.push(a); q.push(b); return nil }, nil, true},
		{"pop a (b at the tail)", q.pop, a, true},
		{"pop b", q.pop, b, false},
		{"pop empty", q.pop, nil, false},
	}
	for _, s := range steps {
		if s.op != nil {
			if got := s.op(); got != s.want {
				t.Fatalf("%s: popped %p, want %p", s.name, got, s.want)
			}
		}
		if got := q.queued(); got != s.has {
			t.Fatalf("%s: queued %v, want %v", s.name, got, s.has)
		}
	}
}

// TestScanNoSelfKick: the rescan runs a QP with a WQE at its SQ head
// without leaving a kick on its own worker's channel. A kick there would
// make the worker's next park return at once: with perftest keeping an
// SQ posted, such kicks kept a worker cycling through park and wake-up (docs/performance.md, "Self-kicks, in-device ICRC, syscalls per
// packet").
func TestScanNoSelfKick(t *testing.T) {
	clk := timing.NewManual()
	n := newNode(t, clk, Config{Stepped: true}, ipA, ipB, macB, nil)
	cqs := n.env.Dev.CQs().Get(2)
	n.nop(n.rc, 0)
	n.env.Doorbell(n.rc)
	for n.eng.Poll() {
	}
	if c := cqs.Stats().CQEs; c != 1 {
		t.Fatalf("CQEs %d after the first NOP", c)
	}
	w := n.eng.workers[0]
	select {
	case <-w.kickc: // the doorbell's (a stepped engine never drains it)
	default:
	}
	n.nop(n.rc, 1) // no doorbell: only the rescan finds it
	if !w.scan(clk.Now()) {
		t.Fatal("the rescan ran nothing")
	}
	if c := cqs.Stats().CQEs; c != 2 {
		t.Fatalf("CQEs %d after the rescan", c)
	}
	if len(w.kickc) != 0 || w.ready.queued() {
		t.Fatalf("the rescan left %d kicks and queued %v on its own worker", len(w.kickc), w.ready.queued())
	}
}

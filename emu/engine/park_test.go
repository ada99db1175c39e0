package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// hookSend is a link end that calls hook (once) inside the first Send
// that carries an RC frame: the moment a receive batch sends its ACK.
type hookSend struct {
	*link.End
	once sync.Once
	hook func()
	rc   atomic.Int32 // Sends with an RC frame
}

func (s *hookSend) Send(pkts []*link.Packet) error {
	for _, p := range pkts {
		var f wire.Frame
		if wire.ParseFrame(p.Data, &f) == nil && f.Packet.Opcode().Transport() == wire.TransportRC {
			s.rc.Add(1)
			s.once.Do(s.hook)
			break
		}
	}
	return s.End.Send(pkts)
}

// TestPollingWhileDelivering: while the link's receive goroutine delivers a
// batch and runs its QPs, the notifying sources read "polling" (park.go
// "Polling while a batch is delivered"), so a post made then — here while
// the WRITE's ACK is being sent, as a ping-pong's program posts its reply
// on the data just written — needs no notification; the Park at the end
// of the batch finds it and the same goroutine runs it: its completion is
// written before Receive returns, and no worker woke.
func TestPollingWhileDelivering(t *testing.T) {
	pair, err := link.NewPair(link.PairConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	src := &notifySource{fakeSource: fakeSource{ids: make(chan uint32, 4)}}
	var pollingInSend bool
	var n *node
	spy := &hookSend{End: pair.A()}
	n = newNode(t, timing.NewWall(), Config{Workers: 1}, ipA, ipB, macB, spy)
	n.eng.AddDoorbellSource(src)
	pool := link.NewPool(0)
	write := func(psn wire.PSN) []*link.Packet { return []*link.Packet{n.writeTo(t, pool, psn)} }
	// A first WRITE attaches the QP to the engine; its first run is its
	// worker's.
	spy.once.Do(func() {})
	n.eng.port.Receive(write(0))
	waitFor(t, "the first ACK", func() bool { return spy.rc.Load() == 1 })
	// Settled: parked, and no kick left over from before (AddDoorbellSource
	// kicks every worker) wakes it again meanwhile.
	waitFor(t, "the worker to park for good", func() bool {
		s := n.eng.Stats().Sched
		if s.Pollers != 0 || !s.Parked {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		return n.eng.Stats().Sched == s
	})
	if polling, _, _ := src.state(); polling {
		t.Fatal("source told polling with every worker parked")
	}

	spy.once = sync.Once{}
	spy.hook = func() {
		pollingInSend, _, _ = src.state()
		n.nop(n.rc, 0) // the program's post: a WQE and its doorbell word
		src.ids <- n.rc.Spec.ID
	}
	before := n.eng.Stats().Sched
	cqs := n.env.Dev.CQs().Get(2)
	n.eng.port.Receive(write(1))

	if !pollingInSend {
		t.Error("the source read parked while the batch's ACK was sent: the post would have needed a notification")
	}
	if c := cqs.Stats().CQEs; c != 1 {
		t.Errorf("%d CQEs when Receive returned; want the NOP posted during the batch completed by the receiving goroutine", c)
	}
	after := n.eng.Stats().Sched
	if polling, _, _ := src.state(); polling || !after.Parked {
		t.Errorf("after the batch: source polling %v, engine parked %v; want parked", polling, after.Parked)
	}
	if after.Wakeups != before.Wakeups {
		t.Errorf("a worker woke (%d → %d wake-ups)", before.Wakeups, after.Wakeups)
	}
	if runs := after.Inline - before.Inline; runs != 2 {
		t.Errorf("%d runs to completion; want 2, the WRITE and the NOP", runs)
	}
}

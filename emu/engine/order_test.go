package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// slowSend is a link end whose Send of a frame with PSN hold waits until
// the test lets it go — a send system call that takes its time — and
// which records the PSN of every RC frame once it is on the wire.
type slowSend struct {
	*link.End
	hold    wire.PSN
	inSend  chan struct{} // closed when that Send has started
	release chan struct{} // closed by the test: that Send may finish

	mu   sync.Mutex
	psns []wire.PSN
}

func (s *slowSend) Send(pkts []*link.Packet) error {
	var psns []wire.PSN
	held := false
	for _, p := range pkts {
		var f wire.Frame
		if wire.ParseFrame(p.Data, &f) == nil && f.Packet.Opcode().Transport() == wire.TransportRC {
			psns = append(psns, f.Packet.BTH.PSN())
			held = held || f.Packet.BTH.PSN() == s.hold
		}
	}
	if held {
		close(s.inSend)
		<-s.release
	}
	err := s.End.Send(pkts)
	s.mu.Lock()
	s.psns = append(s.psns, psns...)
	s.mu.Unlock()
	return err
}

func (s *slowSend) wire() []wire.PSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wire.PSN(nil), s.psns...)
}

// TestTransmitOrder: the frames of a QP's runs reach the link in the
// order the runs held the QP's claim (worker.go "Transmit order"). After a
// first WRITE from the peer has been answered, a second comes to the node
// while its worker is parked and is run to completion by the goroutine
// that brought it (runNow), whose ACK is held up in the link's Send; a
// third is put in the QP's inbox meanwhile and run by the worker
// (runEntry). The third ACK must not overtake the second: a run that let
// the claim go and sent by itself, outside the QP's transmit queue, would
// put PSN 2 on the wire before PSN 1.
func TestTransmitOrder(t *testing.T) {
	pair, err := link.NewPair(link.PairConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	spy := &slowSend{End: pair.A(), hold: 1, inSend: make(chan struct{}), release: make(chan struct{})}
	n := newNode(t, timing.NewWall(), Config{Workers: 1}, ipA, ipB, macB, spy)
	tr := n.eng.transportFor(n.env.Dev.QPs().Get(n.rc.Spec.ID))
	waitFor(t, "the worker to park", func() bool { return n.eng.Stats().Sched.Pollers == 0 })

	pool := link.NewPool(0)
	write := func(psn wire.PSN) *link.Packet {
		p := pool.Get()
		frame := seedFrame(t, wire.PacketFields{
			BTH:  wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, DestQP: n.rc.Spec.ID, PSN: psn, AckReq: true},
			RETH: wire.RETHFields{VA: uint64(n.buf), RKey: n.stag, DMALen: 4}}, []byte{1, 2, 3, byte(psn)})
		p.Data = p.Buf()[:copy(p.Buf(), frame)]
		p.ICRC = link.ICRCGood
		return p
	}
	// The test goroutine and the one below are the link's receiver, one
	// after the other (port.Receive has one caller at a time).
	n.eng.port.Receive([]*link.Packet{write(0)})
	waitFor(t, "the first ACK", func() bool { return len(spy.wire()) == 1 })
	waitFor(t, "the worker to park again", func() bool { return n.eng.Stats().Sched.Pollers == 0 })
	inline := n.eng.Stats().Sched.Inline

	done := make(chan struct{})
	go func() { defer close(done); n.eng.port.Receive([]*link.Packet{write(1)}) }()
	select {
	case <-spy.inSend:
	case <-time.After(10 * time.Second):
		t.Fatal("the second ACK never reached the link")
	}
	// The third WRITE, as the gate would hand it over, for the worker.
	p := write(2)
	if err := wire.ParseFrame(p.Data, &p.Frame); err != nil {
		t.Fatal(err)
	}
	if !tr.Deliver(p) {
		t.Fatal("the inbox refused the third WRITE")
	}
	tr.Wake()
	// The worker's run has built its ACK once the QP counts three; give
	// it time to reach the link, as it would outside the transmit queue.
	waitFor(t, "the third ACK to be built", func() bool { return tr.C.Get(qp.CntAcksSent) == 3 })
	time.Sleep(20 * time.Millisecond)
	close(spy.release)
	<-done
	waitFor(t, "the ACKs on the wire", func() bool { return len(spy.wire()) == 3 })
	if got := spy.wire(); got[1] != 1 || got[2] != 2 {
		t.Errorf("ACK PSNs on the wire %v; want [0 1 2]", got)
	}
	if runs := n.eng.Stats().Sched.Inline - inline; runs != 1 {
		t.Errorf("%d runs to completion; the case wants the second WRITE run by the goroutine that brought it", runs)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

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
	write := func(psn wire.PSN) []*link.Packet {
		p := pool.Get()
		frame := seedFrame(t, wire.PacketFields{
			BTH:  wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, DestQP: n.rc.Spec.ID, PSN: psn, AckReq: true},
			RETH: wire.RETHFields{VA: uint64(n.buf), RKey: n.stag, DMALen: 4}}, []byte{1, 2, 3, byte(psn)})
		p.Data = p.Buf()[:copy(p.Buf(), frame)]
		p.ICRC = link.ICRCGood
		return []*link.Packet{p}
	}
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

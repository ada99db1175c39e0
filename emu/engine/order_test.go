package engine

import (
	"sync"
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

// writeTo returns, as received from the link with a good ICRC, a 4-byte
// RDMA WRITE ONLY with AckReq to the node's RC QP at psn, into its buffer.
func (n *node) writeTo(t *testing.T, pool *link.Pool, psn wire.PSN) *link.Packet {
	p := pool.Get()
	frame := seedFrame(t, wire.PacketFields{
		BTH:  wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, DestQP: n.rc.Spec.ID, PSN: psn, AckReq: true},
		RETH: wire.RETHFields{VA: uint64(n.buf), RKey: n.stag, DMALen: 4}}, []byte{1, 2, 3, byte(psn)})
	p.Data = p.Buf()[:copy(p.Buf(), frame)]
	p.ICRC = link.ICRCGood
	return p
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
	write := func(psn wire.PSN) *link.Packet { return n.writeTo(t, pool, psn) }
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

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

// claimSpy is a link end that looks, as each batch reaches it, whether
// the QP that built the batch still holds its claim.
type claimSpy struct {
	*link.End
	tr atomic.Pointer[qp.Transport]

	mu       sync.Mutex
	sent     int // RC frames seen
	released int // of those, handed over after the QP's claim was let go
}

func (s *claimSpy) Send(pkts []*link.Packet) error {
	if tr := s.tr.Load(); tr != nil {
		s.mu.Lock()
		for _, p := range pkts {
			var f wire.Frame
			if wire.ParseFrame(p.Data, &f) != nil || f.Packet.Opcode().Transport() != wire.TransportRC {
				continue
			}
			s.sent++
			if tr.TryClaim() {
				s.released++
				tr.Unclaim()
			}
		}
		s.mu.Unlock()
	}
	return s.End.Send(pkts)
}

func (s *claimSpy) counts() (sent, released int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.released
}

// TestTransmitUnderClaim: the frames a Run of a QP built reach the link
// while the QP's claim is still held — on a worker (runEntry) and in a
// run to completion (runNow). Once the claim is let go another goroutine
// may run the QP and send its later PSNs; frames of the first Run sent
// after that would reach the wire behind them (worker.transmit). The node's
// RC QP answers a WRITE from the peer with an ACK, which the spy checks.
func TestTransmitUnderClaim(t *testing.T) {
	tests := []struct {
		name    string
		stepped bool
	}{
		{"worker", true},
		{"run to completion", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := link.NewPair(link.PairConfig{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pair.Close() })
			spy := &claimSpy{End: pair.A()}
			var clk timing.Clock = timing.NewManual()
			if !tc.stepped {
				clk = timing.NewWall()
			}
			n := newNode(t, clk, Config{Stepped: tc.stepped, Workers: 1}, ipA, ipB, macB, spy)
			spy.tr.Store(n.eng.transportFor(n.env.Dev.QPs().Get(n.rc.Spec.ID)))
			if !tc.stepped {
				waitRunParked(t, n.eng)
			}
			const writes = 8
			pool := link.NewPool(0)
			for i := range writes {
				p := pool.Get()
				frame := seedFrame(t, wire.PacketFields{
					BTH:  wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, DestQP: n.rc.Spec.ID, PSN: wire.PSN(i), AckReq: true},
					RETH: wire.RETHFields{VA: uint64(n.buf), RKey: n.stag, DMALen: 4}}, []byte{1, 2, 3, byte(i)})
				p.Data = p.Buf()[:copy(p.Buf(), frame)]
				p.ICRC = link.ICRCGood
				n.eng.port.Receive([]*link.Packet{p})
				if tc.stepped {
					for n.eng.Poll() {
					}
				} else {
					waitFor(t, "the ACK", func() bool { s, _ := spy.counts(); return s == i+1 })
				}
			}
			sent, released := spy.counts()
			if sent != writes || released != 0 {
				t.Errorf("%d ACKs reached the link, %d of them after the QP's claim was let go; want %d and 0", sent, released, writes)
			}
			if inline := n.eng.Stats().Sched.Inline; !tc.stepped && inline == 0 {
				t.Errorf("no run to completion: the case did not test runNow")
			}
		})
	}
}

// waitRunParked waits until e's workers (wall clock) are parked, so that
// the next packet is run to completion.
func waitRunParked(t *testing.T, e *Engine) {
	t.Helper()
	waitFor(t, "the workers to park", func() bool { s := e.Stats().Sched; return s.Pollers == 0 })
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

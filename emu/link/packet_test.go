package link_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func TestBufferSizes(t *testing.T) {
	if link.MaxFrameSize != 4218 || link.BufferSize != 4224 || link.BufferSize%64 != 0 {
		t.Errorf("MaxFrameSize %d, BufferSize %d", link.MaxFrameSize, link.BufferSize)
	}
	// The largest frame we build fits: IPv6, VLAN, RETH+ImmDt, 4096 bytes.
	if n := 14 + 4 + 40 + 8 + 12 + 16 + 4 + 4096 + 4; n > link.MaxFrameSize || n-18 > link.DefaultMTU {
		t.Errorf("largest RoCEv2 frame %d bytes does not fit", n)
	}
	if link.DefaultMTU > link.MaxMTU || link.MinMTU > link.DefaultMTU {
		t.Errorf("MTU bounds %d ≤ %d ≤ %d", link.MinMTU, link.DefaultMTU, link.MaxMTU)
	}
}

// TestPool checks the bound, the counters, that Release clears the
// packet and that a second Release is caught.
func TestPool(t *testing.T) {
	pool := link.NewPool(3)
	a, b, c := pool.Get(), pool.Get(), pool.Get()
	if a == nil || b == nil || c == nil {
		t.Fatal("Get returned nil below the bound")
	}
	if len(a.Buf()) != link.BufferSize || a.Data != nil {
		t.Errorf("new packet: buffer %d bytes, Data %v", len(a.Buf()), a.Data)
	}
	if pool.Get() != nil {
		t.Fatal("Get beyond the bound")
	}
	a.Data = a.Buf()[:100]
	a.Time, a.ICRC = 5, link.ICRCBad
	a.Release()
	a.Release() // caught, not a second free slot
	s := pool.Stats()
	if s.Outstanding != 2 || s.Exhausted != 1 || s.DoubleReleases != 1 || s.Allocated != 3 {
		t.Errorf("stats %+v", s)
	}
	d := pool.Get()
	if d == nil {
		t.Fatal("Get after Release returned nil")
	}
	if d.Data != nil || d.Time != 0 || d.ICRC != link.ICRCUnchecked {
		t.Errorf("reused packet not cleared: %d bytes, %v, %v", len(d.Data), d.Time, d.ICRC)
	}
	if pool.Get() != nil {
		t.Error("double release made room for a fourth packet")
	}
	for _, p := range []*link.Packet{b, c, d} {
		p.Release()
	}
	if pool.Outstanding() != 0 {
		t.Errorf("%d outstanding", pool.Outstanding())
	}

	var nilPkt *link.Packet
	nilPkt.Release() // no panic
	var zero link.Packet
	zero.Data = zero.Buf()[:1]
	zero.Release() // not from a pool: cleared, nothing else
	if zero.Data != nil {
		t.Error("zero packet not cleared")
	}
	var zp link.Pool // the zero Pool is unbounded
	for range 10 {
		if zp.Get() == nil {
			t.Fatal("zero Pool refused a packet")
		}
	}
}

// TestPoolConcurrent hammers a bounded pool from several goroutines; the
// bound must hold at every moment (run with -race).
func TestPoolConcurrent(t *testing.T) {
	const bound = 16
	pool := link.NewPool(bound)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []*link.Packet
			for i := range 2000 {
				if p := pool.Get(); p != nil {
					held = append(held, p)
				}
				if o := pool.Outstanding(); o > bound {
					t.Errorf("%d outstanding, bound %d", o, bound)
					return
				}
				if i%3 == 0 || len(held) > 6 {
					for _, p := range held {
						p.Release()
					}
					held = held[:0]
				}
			}
			for _, p := range held {
				p.Release()
			}
		}()
	}
	wg.Wait()
	if s := pool.Stats(); s.Outstanding != 0 || s.DoubleReleases != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestSteadyStateAllocs requires a send-deliver-release round through a
// manual-clock pair to allocate nothing once the pool is warm, with and
// without faults and ICRC verification.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	faults := link.Faults{Loss: 0.05, Duplicate: 0.05, Corrupt: 0.05, Reorder: 0.1, ReorderDepth: 2, Seed: 1}
	for _, tc := range []struct {
		payload int
		faults  link.Faults
		verify  bool
	}{
		{64, link.Faults{}, false},
		{4096, link.Faults{}, false},
		{64, faults, true},
		{4096, faults, true},
	} {
		payload := tc.payload
		clock := timing.NewManual()
		pool := link.NewPool(0)
		p, err := link.NewPair(link.PairConfig{Clock: clock, Pool: pool, Rate: 100e9, Delay: 500 * time.Nanosecond,
			AtoB: tc.faults, VerifyICRC: tc.verify})
		if err != nil {
			t.Fatal(err)
		}
		p.B().Attach(releaser{})
		tmpl := newFrame(t, pool, 1, frameOpts{payload: payload})
		batch := make([]*link.Packet, 32)
		round := func() {
			for i := range batch {
				q := pool.Get()
				q.Data = q.Buf()[:copy(q.Buf(), tmpl.Data)]
				batch[i] = q
			}
			_ = p.A().Send(batch)
			// Longer than 32 4-KiB frames take at 100 Gb/s (11 µs), so
			// the wire drains every round.
			clock.Advance(20 * time.Microsecond)
		}
		round()
		if n := testing.AllocsPerRun(100, round); n != 0 {
			t.Errorf("payload %d, faults %q, verify %v: %v allocations per round of 32 frames", payload, tc.faults, tc.verify, n)
		}
		tmpl.Release()
		p.Close()
	}
}

// releaser is a Receiver that releases what it gets.
type releaser struct{}

func (releaser) Receive(pkts []*link.Packet) {
	for _, p := range pkts {
		p.Release()
	}
}

func (releaser) LinkStateChanged(link.State) {}

// lender counts the returns of its loans.
type lender struct{ returns int }

func (l *lender) Return() { l.returns++ }

// TestPacketLend: a lent payload is what Lent reports until the frame is
// sealed, which copies it into the frame's payload (before the ICRC is
// computed over it) and ends the loan; Release, or a second Lend, ends a
// loan the frame never sealed. Each loan is returned once.
func TestPacketLend(t *testing.T) {
	pool := link.NewPool(0)
	build := func() *link.Packet {
		p := pool.Get()
		ff := wire.FrameFields{Dst: wire.MAC{2, 0, 0, 0, 0, 1}, Src: wire.MAC{2, 0, 0, 0, 0, 2},
			SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), HopLimit: 64, SrcPort: 0xc000}
		pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, DestQP: 5, PKey: 0xffff}}
		m, err := wire.EncodeFrame(p.Buf(), &ff, &pf, 8, &p.Frame)
		if err != nil {
			t.Fatal(err)
		}
		p.Data, p.Unsealed = p.Buf()[:m], true
		return p
	}
	src := []byte("payload!")

	p := build()
	var l lender
	p.Lend(src, &l)
	if string(p.Lent()) != "payload!" || string(p.Frame.Packet.Payload) == "payload!" {
		t.Fatalf("lent %q, frame payload %q; want the loan outside the frame", p.Lent(), p.Frame.Packet.Payload)
	}
	p.Seal()
	var f wire.Frame
	if err := wire.ParseFrame(p.Data, &f); err != nil || string(f.Packet.Payload) != "payload!" || f.VerifyICRC() != nil {
		t.Fatalf("sealed frame: parse %v, payload %q, ICRC %v; want the lent bytes under a good ICRC", err, f.Packet.Payload, f.VerifyICRC())
	}
	if p.Lent() != nil || l.returns != 1 {
		t.Fatalf("after Seal: lent %q, %d returns; want none and 1", p.Lent(), l.returns)
	}
	p.Seal()
	p.Release()
	if l.returns != 1 {
		t.Fatalf("returned %d times, want once", l.returns)
	}

	var l1, l2 lender
	p = build()
	p.Lend(src, &l1)
	p.Lend(src[:4], &l2)
	if l1.returns != 1 || l2.returns != 0 || string(p.Lent()) != "payl" {
		t.Fatalf("a second Lend: returns %d and %d, lent %q; want the first loan ended", l1.returns, l2.returns, p.Lent())
	}
	p.Release()
	if l2.returns != 1 {
		t.Fatalf("Release of a lent packet: %d returns, want 1", l2.returns)
	}
	if q := pool.Get(); q.Lent() != nil {
		t.Fatalf("a packet from the pool carries a loan: %q", q.Lent())
	}
}

package udp_test

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

var udpMode = udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}

// faultPair opens a sender on 127.0.0.2 with the given faults and a
// receiver on 127.0.0.3.
func faultPair(t *testing.T, spec string, clock timing.Clock) (a, b *udp.Link, rb *recorder) {
	t.Helper()
	f, err := link.ParseFaults(spec)
	if err != nil {
		t.Fatal(err)
	}
	a = newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udpMode, Faults: f, Clock: clock})
	b = newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udpMode})
	rb = newRecorder()
	b.Attach(rb)
	return a, b, rb
}

// sendSeq sends frames first..first+n-1 in batches of batch, each
// carrying its sequence number in the PSN and the payload.
func sendSeq(t *testing.T, a *udp.Link, first, n, batch int) {
	t.Helper()
	for i := 0; i < n; i += batch {
		var pkts []*link.Packet
		for j := i; j < min(n, i+batch); j++ {
			pkts = append(pkts, build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 64, seq: uint32(first + j)}))
		}
		if err := a.Send(pkts); err != nil {
			t.Fatal(err)
		}
	}
}

func seqOf(t *testing.T, frame []byte) uint32 {
	f, _ := roceOf(t, frame)
	return uint32(f.Packet.BTH.PSN())
}

// TestFaultLoss: exactly the frames the injector loses are missing.
func TestFaultLoss(t *testing.T) {
	a, _, rb := faultPair(t, "loss=0.2,seed=1", nil)
	const n = 500
	sendSeq(t, a, 0, n, 50)
	c := a.Counters()
	if c.Faults.Lost == 0 || c.Faults.Offered != n || c.TxFrames != n {
		t.Fatalf("faults %+v, TxFrames %d", c.Faults, c.TxFrames)
	}
	want := int(n - c.Faults.Lost)
	waitFor(t, "survivors", func() bool { return rb.n() == want })
	time.Sleep(20 * time.Millisecond)
	if rb.n() != want {
		t.Errorf("received %d, want %d (sent %d, lost %d)", rb.n(), want, n, c.Faults.Lost)
	}
	t.Logf("lost %d of %d (%.1f%%)", c.Faults.Lost, n, 100*float64(c.Faults.Lost)/n)
}

// TestFaultDuplicate: each duplicate arrives right after its original,
// the same RoCEv2 packet, and both with a good ICRC. Only the IPv4 ID and
// so the ICRC may differ: a duplicate next to its original goes out in
// the same GSO send, as the next segment, with the next ID (gso.go).
func TestFaultDuplicate(t *testing.T) {
	a, _, rb := faultPair(t, "dup=0.3,seed=2", nil)
	const n = 200
	sendSeq(t, a, 0, n, 20)
	c := a.Counters()
	if c.Faults.Duplicated == 0 {
		t.Fatal("no duplicates injected")
	}
	want := n + int(c.Faults.Duplicated)
	waitFor(t, "frames and duplicates", func() bool { return rb.n() == want })
	got := rb.got()
	// The RoCEv2 packet without its ICRC: after Ethernet, IPv4 and UDP.
	const hdrs = wire.EthernetSize + wire.IPv4MinimumSize + wire.UDPSize
	roce := func(d []byte) []byte { return d[hdrs : len(d)-wire.ICRCSize] }
	dups := 0
	for i := 1; i < len(got); i++ {
		if got[i].icrc != link.ICRCGood {
			t.Errorf("frame %d: ICRC %v", i, got[i].icrc)
		}
		if bytes.Equal(roce(got[i].data), roce(got[i-1].data)) {
			dups++
		}
	}
	if dups != int(c.Faults.Duplicated) {
		t.Errorf("%d back-to-back identical frames, %d duplicated", dups, c.Faults.Duplicated)
	}
}

// TestFaultReorderFrames: held frames are overtaken by reorder_depth later
// frames; none is lost, also at the end of the traffic (hold timeout).
func TestFaultReorderFrames(t *testing.T) {
	a, _, rb := faultPair(t, "reorder=0.2,reorder_depth=3,seed=3", nil)
	const n = 300
	sendSeq(t, a, 0, n, 30)
	waitFor(t, "every frame", func() bool { return rb.n() == n })
	var seqs []uint32
	for _, g := range rb.got() {
		seqs = append(seqs, seqOf(t, g.data))
	}
	sorted := slices.Clone(seqs)
	slices.Sort(sorted)
	for i, s := range sorted {
		if s != uint32(i) {
			t.Fatalf("sequence %d missing or doubled: %v", i, sorted)
		}
	}
	if slices.IsSorted(seqs) {
		t.Error("nothing arrived out of order")
	}
	// A frame held by 3 arrives at most 3 places late... unless its
	// overtakers were held too, or traffic ended (the last few).
	late := 0
	for pos, s := range seqs {
		if pos > int(s) {
			late = max(late, pos-int(s))
		}
	}
	c := a.Counters()
	if c.Faults.Reordered == 0 || late == 0 {
		t.Errorf("reordered %d, latest arrival %d places late", c.Faults.Reordered, late)
	}
	t.Logf("reordered %d of %d; latest arrival %d places late", c.Faults.Reordered, n, late)
}

// TestFaultReorderDelay: on a manual clock, frames held by a delay leave
// exactly when the clock passes it.
func TestFaultReorderDelay(t *testing.T) {
	clock := timing.NewManual()
	a, _, rb := faultPair(t, "reorder=1,reorder_delay=1ms,seed=4", clock)
	sendSeq(t, a, 0, 5, 5)
	time.Sleep(50 * time.Millisecond)
	if rb.n() != 0 {
		t.Fatalf("%d frames arrived before the delay", rb.n())
	}
	clock.Advance(999 * time.Microsecond)
	time.Sleep(20 * time.Millisecond)
	if rb.n() != 0 {
		t.Fatalf("%d frames arrived early", rb.n())
	}
	clock.Advance(time.Microsecond)
	waitFor(t, "delayed frames", func() bool { return rb.n() == 5 })
}

// TestFaultHeldDroppedOnDownAndClose: frames held back when the link goes
// down or closes are dropped and counted, and go back to the pool.
func TestFaultHeldDroppedOnDownAndClose(t *testing.T) {
	clock := timing.NewManual()
	a, _, rb := faultPair(t, "reorder=1,reorder_depth=100,seed=5", clock)
	sendSeq(t, a, 0, 3, 3)
	a.SetUp(false)
	if c := a.Counters(); c.TxDrops[link.DropLinkDown] != 3 {
		t.Errorf("TxDrops[link down] = %d, want 3", c.TxDrops[link.DropLinkDown])
	}
	a.SetUp(true)
	sendSeq(t, a, 3, 2, 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if c := a.Counters(); c.TxDrops[link.DropClosed] != 2 {
		t.Errorf("TxDrops[closed] = %d, want 2", c.TxDrops[link.DropClosed])
	}
	clock.Advance(time.Second)
	time.Sleep(20 * time.Millisecond)
	if rb.n() != 0 {
		t.Errorf("%d held frames were sent anyway", rb.n())
	}
}

// TestFaultCorruptFrameScope: corrupting anywhere in the frame, headers
// included, never panics; what still parses is sent, the rest counted.
func TestFaultCorruptFrameScope(t *testing.T) {
	a, _, rb := faultPair(t, "corrupt=1,corrupt_scope=frame,seed=6", nil)
	const n = 300
	sendSeq(t, a, 0, n, 30)
	c := a.Counters()
	if c.Faults.Corrupted != n {
		t.Fatalf("corrupted %d of %d", c.Faults.Corrupted, n)
	}
	time.Sleep(100 * time.Millisecond)
	t.Logf("corrupted %d: received %d, dropped %v", n, rb.n(), c.TxDrops)
	if uint64(rb.n()) > n || c.TxDropped()+uint64(rb.n()) > n {
		t.Errorf("received %d + dropped %d > sent %d", rb.n(), c.TxDropped(), n)
	}
}

// TestBatchingUnderLoad: a stream of frames from 127.0.0.2 to 127.0.0.3
// goes out in full sendmmsg batches and comes in in recvmmsg batches,
// without loss when the sender stays within the socket buffers.
func TestBatchingUnderLoad(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udpMode})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udpMode})
	rb := &recorder{}
	b.Attach(rb)
	tmpl := build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 1024})
	defer tmpl.Release()
	const batch, window = 64, 1024
	pkts := make([]*link.Packet, batch)
	start := time.Now()
	for sent := 0; sent < n; sent += batch {
		for rb.n() < sent-window {
			time.Sleep(50 * time.Microsecond)
		}
		k := min(batch, n-sent)
		for i := range k {
			p := a.Pool().Get()
			p.Data = p.Buf()[:copy(p.Buf(), tmpl.Data)]
			pkts[i] = p
		}
		if err := a.Send(pkts[:k]); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for rb.n() != n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if rb.n() != n {
		t.Fatalf("received %d of %d\nA %+v\nB %+v", rb.n(), n, a.Counters(), b.Counters())
	}
	el := time.Since(start)
	ca, cb := a.Counters(), b.Counters()
	t.Logf("%d frames in %v (%.0f frames/s); %.1f frames per sendmmsg, %.1f per recvmmsg, largest batch delivered %d",
		n, el, float64(n)/el.Seconds(), float64(ca.TxFrames)/float64(ca.SendCalls), float64(cb.RxFrames)/float64(cb.RecvCalls), rb.maxSeen)
	if ca.SendCalls > uint64(n/batch)+1 {
		t.Errorf("%d sendmmsg calls for %d frames in batches of %d", ca.SendCalls, n, batch)
	}
	if cb.RecvCalls >= cb.RxFrames || rb.maxSeen < 2 {
		t.Errorf("no receive batching: %d calls for %d frames, largest %d", cb.RecvCalls, cb.RxFrames, rb.maxSeen)
	}
	if rb.overlap {
		t.Error("Receive was entered twice at once")
	}
}

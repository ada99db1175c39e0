package engine

import (
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

var (
	ipA  = netip.MustParseAddr("10.9.0.1")
	ipB  = netip.MustParseAddr("10.9.0.2")
	macA = wire.MAC{2, 0, 0, 0, 0, 0x0a}
	macB = wire.MAC{2, 0, 0, 0, 0, 0x0b}
)

// engineGoroutines lists the goroutines running engine code.
func engineGoroutines() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "emu/engine.") && !strings.Contains(g, "engine_test.go") {
			out = append(out, g)
		}
	}
	return out
}

// node is a device brought up with an RC QP (id 2) and a UD QP (id 3) in
// RTS, CQ 2 for both, an MR (STag 0x142) over 64 KiB, ARP 1 to the peer.
type node struct {
	env  *devtest.Env
	eng  *Engine
	rc   *devtest.QP
	ud   *devtest.QP
	buf  hostmem.IOVA
	stag uint32
}

func newNode(t testing.TB, clk timing.Clock, cfg Config, me, peer netip.Addr, peerMAC wire.MAC, l link.Link) *node {
	t.Helper()
	env := devtest.Bringup(t, devtest.Options{Config: device.Config{Clock: clk}})
	env.SetARP(1, [6]byte(peerMAC))
	env.CreateCQ(2, 1024)
	n := &node{env: env}
	n.rc = env.CreateQP(devtest.QPSpec{ID: 2, SendCQ: 2, RecvCQ: 2, PD: 1, LocalIP: me, DestIP: peer, DestQP: 2,
		ARPIdx: 1, RetryCnt: 7, RNRRetry: 7, ORD: 8, IRDEnc: 1, RdOK: true, WrOK: true, CompCtx: 0x22})
	env.Connect(n.rc)
	n.ud = env.CreateQP(devtest.QPSpec{ID: 3, UD: true, SendCQ: 2, RecvCQ: 2, PD: 1, LocalIP: me, QKey: 0x1234, CompCtx: 0x33})
	env.Connect(n.ud)
	r := env.Alloc(64<<10, "buf")
	n.buf = r.IOVA()
	n.stag = env.RegMR(1, 0x42, 1, r, devtest.RightsAll)
	cfg.GIDs = []netip.Addr{me}
	eng, err := New(env.Dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if err := eng.AttachLink(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(); err != nil {
		t.Fatal(err)
	}
	n.eng = eng
	t.Cleanup(func() { eng.Close() })
	return n
}

// nop posts a signaled NOP on QP q's SQ at quantum idx (first lap).
func (n *node) nop(q *devtest.QP, idx uint32) {
	_ = n.env.Mem.Store64(q.SQIOVA+hostmem.IOVA(idx)*32+24, 0x0c<<32|1<<62|1<<63)
}

// TestCloseNoLeak runs engines with worker goroutines on the wall clock,
// gives them work, closes them, and checks that no engine goroutine
// survives and Close is idempotent.
func TestCloseNoLeak(t *testing.T) {
	for round := 0; round < 3; round++ {
		pair, err := link.NewPair(link.PairConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a := newNode(t, timing.NewWall(), Config{Workers: 3}, ipA, ipB, macB, pair.A())
		b := newNode(t, timing.NewWall(), Config{Workers: 2}, ipB, ipA, macA, pair.B())
		if len(engineGoroutines()) < 5 {
			t.Fatalf("%d engine goroutines, want the 5 workers", len(engineGoroutines()))
		}
		for i := uint32(0); i < 4; i++ {
			a.nop(a.rc, i)
		}
		a.env.Doorbell(a.rc)
		b.env.Doorbell(b.rc) // nothing posted: a hint only
		deadline := time.Now().Add(5 * time.Second)
		for {
			if c := a.env.Dev.CQs().Get(2).Stats().CQEs; c == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("NOPs not completed")
			}
			time.Sleep(time.Millisecond)
		}
		for _, e := range []*Engine{a.eng, b.eng} {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
		pair.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := engineGoroutines()
		if len(g) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d engine goroutines left:\n%s", len(g), strings.Join(g, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Stepped engines start none.
	n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
	if g := engineGoroutines(); len(g) != 0 {
		t.Fatalf("stepped engine goroutines: %d", len(g))
	}
	n.eng.Close()
}

// TestDoorbellAndScan: a WQEALLOC write wakes the QP; a WQE posted with
// no doorbell is found by the valid-bit rescan of the active QP (the
// kernel suppresses doorbells, docs/hw-datapath.md "Doorbells").
func TestDoorbellAndScan(t *testing.T) {
	clk := timing.NewManual()
	n := newNode(t, clk, Config{Stepped: true}, ipA, ipB, macB, nil)
	n.nop(n.rc, 0)
	n.env.Doorbell(n.rc)
	for n.eng.Poll() {
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 1 {
		t.Fatalf("CQEs %d after the doorbell", c)
	}
	if st := n.env.Dev.Meter().Stage(timing.Doorbell); st.Count != 1 {
		t.Fatalf("doorbell stage charged %d times", st.Count)
	}
	n.nop(n.rc, 1) // no doorbell
	for n.eng.Poll() {
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 2 {
		t.Fatalf("CQEs %d: the rescan missed the WQE", c)
	}
	// After Linger of idleness the QP leaves the scan set.
	clk.Advance(time.Second)
	n.eng.Poll()
	if len(n.eng.workers[0].active) != 0 {
		t.Fatalf("idle QP still scanned")
	}
	n.nop(n.rc, 2)
	for n.eng.Poll() {
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 2 {
		t.Fatalf("an idle QP was scanned")
	}
	n.env.Doorbell(n.rc)
	for n.eng.Poll() {
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 3 {
		t.Fatalf("CQEs %d after the second doorbell", c)
	}
	if s := n.eng.Stats(); s.QPs != 1 || s.UnknownDoorbells != 0 {
		t.Fatalf("stats %+v", s)
	}
	n.env.Dev.Write32(0x00504400, 55) // WQEALLOC for no QP
	if s := n.eng.Stats(); s.UnknownDoorbells != 1 {
		t.Fatalf("unknown doorbells %d", s.UnknownDoorbells)
	}
}

// fakeSource is a DoorbellSource reporting the QP ids queued in it.
type fakeSource struct{ ids chan uint32 }

func (s *fakeSource) Poll(ring func(uint32)) {
	for {
		select {
		case id := <-s.ids:
			ring(id)
		default:
			return
		}
	}
}

// TestDoorbellSource: a polled source (the later user doorbell pages)
// wakes its QP from the scan even when no QP is active.
func TestDoorbellSource(t *testing.T) {
	n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
	src := &fakeSource{ids: make(chan uint32, 4)}
	n.eng.AddDoorbellSource(src)
	n.nop(n.rc, 0)
	src.ids <- 2
	for n.eng.Poll() {
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 1 {
		t.Fatalf("CQEs %d", c)
	}
}

// TestGate: the receive path's checks in rxe's order, each drop counted by
// reason, and the ICRC outcomes by the link's status (verified here when
// unchecked).
func TestGate(t *testing.T) {
	n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
	pool := link.NewPool(0)
	send := func(frame []byte, st link.ICRCStatus) {
		p := pool.Get()
		p.Data = p.Buf()[:copy(p.Buf(), frame)]
		p.ICRC = st
		n.eng.port.Receive([]*link.Packet{p})
		for n.eng.Poll() {
		}
	}
	good := seedFrame(t, wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAcknowledge, DestQP: 2, PSN: 0},
		AETH: wire.AETHFields{Syndrome: 0x1f}}, nil)
	bad := append([]byte{}, good...)
	bad[len(bad)-1] ^= 1 // the ICRC
	toQPN := func(qpn uint32, op wire.Opcode) []byte {
		pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: op, DestQP: qpn}, AETH: wire.AETHFields{Syndrome: 0x1f}}
		return seedFrame(t, pf, nil)
	}
	otherGID := make([]byte, link.BufferSize)
	m, _ := wire.BuildFrame(otherGID, &wire.FrameFields{Dst: macA, Src: macB, SrcIP: ipB, DstIP: ipB, HopLimit: 1},
		&wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAcknowledge, DestQP: 2, PKey: 0xffff}}, nil)
	send(good, link.ICRCUnchecked)
	send(bad, link.ICRCUnchecked)
	send(good, link.ICRCGood)
	send(good, link.ICRCBad)
	send(bad, link.ICRCUnverifiable) // accepted: the link could not check it
	send([]byte{1, 2, 3}, link.ICRCUnchecked)
	send(otherGID[:m], link.ICRCUnchecked)
	send(toQPN(0, wire.RCAcknowledge), link.ICRCUnchecked)
	send(toQPN(40, wire.RCAcknowledge), link.ICRCUnchecked)
	send(toQPN(3, wire.RCAcknowledge), link.ICRCUnchecked) // RC opcode to the UD QP
	send(toQPN(2, wire.UCSendOnly), link.ICRCUnchecked)    // UC is not ours
	send(bad, link.ICRCInDevice)                           // delivered inside the device: not checked
	s := n.eng.Stats()
	g := s.Gate
	if g.ICRCVerified != 6 || g.ICRCFailed != 2 || g.ICRCLinkGood != 1 || g.ICRCUnverifiable != 1 || g.ICRCInDevice != 1 {
		t.Errorf("ICRC: verified %d failed %d link-good %d unverifiable %d in-device %d", g.ICRCVerified, g.ICRCFailed,
			g.ICRCLinkGood, g.ICRCUnverifiable, g.ICRCInDevice)
	}
	want := map[qp.DropReason]uint64{qp.DropICRC: 2, qp.DropParse: 1, qp.DropNotOurGID: 1, qp.DropQPNZero: 1,
		qp.DropUnknownQPN: 1, qp.DropTransport: 2}
	for r, n := range want {
		if g.Drops[r] != n {
			t.Errorf("drops %v: %d, want %d", r, g.Drops[r], n)
		}
	}
	if s.Delivered != 4 || s.Delivered+g.Dropped() != 12 {
		t.Errorf("delivered %d, dropped %d", s.Delivered, g.Dropped())
	}
	// The four delivered are ACKs for nothing outstanding: the QP counts
	// them received and drops them as responses to nothing.
	if q, _ := n.eng.QPStats(2); q.RxPackets != 4 || q.Drops[qp.DropBadResponse]+q.Drops[qp.DropStaleResponse] != 4 {
		t.Errorf("QP: rx %d drops %v", q.RxPackets, q.Drops)
	}
}

// TestQPChurn: QPs created, used and destroyed over and over leave no
// transport behind, and a destroyed QP's id can be reused at once.
func TestQPChurn(t *testing.T) {
	n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
	for i := 0; i < 140; i++ {
		q := n.env.CreateQP(devtest.QPSpec{ID: 9, SQQuanta: 8, RQWQEs: 8, SendCQ: 2, RecvCQ: 2, PD: 1, LocalIP: ipA,
			DestIP: ipB, DestQP: 2, ARPIdx: 1, ORD: 1, IRDEnc: 0, CompCtx: 0x99})
		n.env.Connect(q)
		n.nop(q, 0)
		n.env.Doorbell(q)
		for n.eng.Poll() {
		}
		n.env.MustOK(n.env.DestroyQP(q), "DESTROY_QP")
		for n.eng.Poll() {
		}
	}
	if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != 140 {
		t.Fatalf("CQEs %d", c)
	}
	if s := n.eng.Stats(); s.QPs > 70 {
		t.Fatalf("%d transports remembered after 140 destroyed QPs", s.QPs)
	}
}

// notifySource is a NotifyingSource: the doorbells of fakeSource, and the
// state the engine publishes (polling or parked) as a poster would read
// it. onPark, if set, runs once inside the next Park, after the parked
// state is stored: a poster that read "polling" just before.
type notifySource struct {
	fakeSource
	mu      sync.Mutex
	polling bool
	parks   int
	unparks int
	legacy  bool // Park answers that the source still wants polling
	onPark  func()
}

func (s *notifySource) Park() bool {
	s.mu.Lock()
	s.polling = false
	s.parks++
	f := s.onPark
	s.onPark = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.legacy
}

func (s *notifySource) Unpark() {
	s.mu.Lock()
	s.polling = true
	s.unparks++
	s.mu.Unlock()
}

func (s *notifySource) state() (polling bool, parks, unparks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polling, s.parks, s.unparks
}

// waitParked advances the manual clock past the poll window until every
// worker of e has parked, the sources were told so, and that lasts: a
// worker may still hold a kick from before it parked (AddDoorbellSource
// kicks them all), which wakes it once more; the counters must stay the
// same over a thousand yields before the engine counts as settled.
func waitParked(t *testing.T, e *Engine, clk *timing.Manual) SchedStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		clk.Advance(e.cfg.Scan.Poll)
		if s := e.Stats().Sched; s.Pollers == 0 && s.Parked {
			for range 1000 {
				runtime.Gosched()
			}
			if s2 := e.Stats().Sched; s2 == s {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers never parked: %+v", e.Stats().Sched)
		}
		runtime.Gosched()
	}
}

// TestIdleNoWakeups: an engine with worker goroutines, an active QP and a
// notifying source parks once its poll window is over, and then nothing
// wakes it: no timer is armed on the device's clock, and ten seconds of
// (manual) time bring no wake-up, no timer arm, no park or unpark. A
// doorbell wakes it; it parks again.
func TestIdleNoWakeups(t *testing.T) {
	clk := timing.NewManual()
	n := newNode(t, clk, Config{Workers: 2}, ipA, ipB, macB, nil)
	src := &notifySource{fakeSource: fakeSource{ids: make(chan uint32, 4)}}
	n.eng.AddDoorbellSource(src)
	cqs := n.env.Dev.CQs().Get(2)
	n.nop(n.rc, 0)
	n.env.Doorbell(n.rc)
	deadline := time.Now().Add(10 * time.Second)
	for cqs.Stats().CQEs < 1 {
		if time.Now().After(deadline) {
			t.Fatal("NOP not completed")
		}
		runtime.Gosched()
	}
	s0 := waitParked(t, n.eng, clk)
	if polling, parks, _ := src.state(); polling || parks == 0 {
		t.Fatalf("source polling %v after %d parks", polling, parks)
	}
	if p := clk.Pending(); p != 0 {
		t.Fatalf("%d timers armed while idle", p)
	}
	clk.Advance(10 * time.Second)
	for range 1000 {
		runtime.Gosched()
	}
	if s := n.eng.Stats().Sched; s.Wakeups != s0.Wakeups || s.TimerArms != 0 || s.Parks != s0.Parks || s.Unparks != s0.Unparks {
		t.Fatalf("idle engine woke: before %+v after %+v", s0, s)
	}
	// A doorbell through the source wakes a worker, which unparks.
	n.nop(n.rc, 1)
	src.ids <- 2
	n.env.Doorbell(n.ud) // a kick: nothing posted there
	for cqs.Stats().CQEs < 2 {
		if time.Now().After(deadline) {
			t.Fatal("NOP 2 not completed")
		}
		clk.Advance(0)
		runtime.Gosched()
	}
	s1 := waitParked(t, n.eng, clk)
	if s1.Wakeups == s0.Wakeups || s1.Unparks == s0.Unparks || s1.Parks == s0.Parks {
		t.Fatalf("no wake-up and park cycle: before %+v after %+v", s0, s1)
	}
}

// TestBackoffForLegacySource: a source that cannot notify (a plain
// DoorbellSource, or Park answering true) is polled with a backoff timer
// while the workers are parked, and its doorbells are found by it.
func TestBackoffForLegacySource(t *testing.T) {
	for _, name := range []string{"plain", "park-true"} {
		t.Run(name, func(t *testing.T) {
			clk := timing.NewManual()
			n := newNode(t, clk, Config{Workers: 1}, ipA, ipB, macB, nil)
			fs := fakeSource{ids: make(chan uint32, 4)}
			var src DoorbellSource = &fs
			if name == "park-true" {
				ns := &notifySource{fakeSource: fs, legacy: true}
				src = ns
			}
			n.eng.AddDoorbellSource(src)
			deadline := time.Now().Add(10 * time.Second)
			for n.eng.Stats().Sched.TimerArms == 0 || clk.Pending() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no backoff timer: %+v", n.eng.Stats().Sched)
				}
				clk.Advance(n.eng.cfg.Scan.Poll)
				runtime.Gosched()
			}
			n.nop(n.rc, 0)
			fs.ids <- 2
			cqs := n.env.Dev.CQs().Get(2)
			for cqs.Stats().CQEs < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the backoff poll never found the doorbell")
				}
				clk.Advance(n.eng.cfg.Scan.MinBackoff)
				runtime.Gosched()
			}
		})
	}
}

// TestParkRace (stepped): a post whose poster read "polling" just before
// the engine parked (its doorbell stored, no notification) is found by
// the poll that follows Park; a Poll that finds work unparks the source.
func TestParkRace(t *testing.T) {
	n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
	src := &notifySource{fakeSource: fakeSource{ids: make(chan uint32, 4)}}
	n.eng.AddDoorbellSource(src)
	if polling, parks, _ := src.state(); polling || parks != 1 {
		t.Fatalf("a source added to a parked engine: polling %v, %d parks", polling, parks)
	}
	cqs := n.env.Dev.CQs().Get(2)
	n.nop(n.rc, 0)
	src.ids <- 2
	if !n.eng.Poll() {
		t.Fatal("the doorbell found nothing")
	}
	if polling, _, unparks := src.state(); !polling || unparks != 1 {
		t.Fatalf("after work: polling %v, %d unparks", polling, unparks)
	}
	// The poster of NOP 1 stores its doorbell while the engine parks.
	src.mu.Lock()
	src.onPark = func() {
		n.nop(n.rc, 1)
		src.ids <- 2
	}
	src.mu.Unlock()
	for n.eng.Poll() {
	}
	s := n.eng.Stats().Sched
	if c := cqs.Stats().CQEs; c != 2 || s.ParkFound != 1 {
		t.Fatalf("CQEs %d, park-found %d: the post that raced the park was lost", c, s.ParkFound)
	}
	if polling, parks, unparks := src.state(); polling || parks != 3 || unparks != 2 {
		t.Fatalf("polling %v parks %d unparks %d", polling, parks, unparks)
	}
}

// TestTakeUpPosted: a control command waits for the worker to take up the
// WQEs posted before it (qp/intake.go). NOPs posted with no doorbell and
// no scan of the QP (it never ran) are all completed when TakeUpPosted
// returns; a stepped engine returns at once and leaves them to Poll.
func TestTakeUpPosted(t *testing.T) {
	const posted = 8
	t.Run("workers", func(t *testing.T) {
		n := newNode(t, timing.NewWall(), Config{}, ipA, ipB, macB, nil)
		for i := uint32(0); i < posted; i++ {
			n.nop(n.rc, i)
		}
		n.eng.TakeUpPosted(n.rc.Spec.ID)
		if c := n.env.Dev.CQs().Get(2).Stats().CQEs; c != posted {
			t.Fatalf("CQEs %d when TakeUpPosted returned, want %d", c, posted)
		}
		if s := n.eng.Stats(); s.IntakeTimeouts != 0 {
			t.Fatalf("intake timeouts %d", s.IntakeTimeouts)
		}
		// Nothing posted: it returns without waking anything.
		n.eng.TakeUpPosted(n.rc.Spec.ID)
		n.eng.TakeUpPosted(99) // no such QP
	})
	t.Run("stepped", func(t *testing.T) {
		n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, nil)
		for i := uint32(0); i < posted; i++ {
			n.nop(n.rc, i)
		}
		n.eng.TakeUpPosted(n.rc.Spec.ID)
		cqs := n.env.Dev.CQs().Get(2)
		if c := cqs.Stats().CQEs; c != 0 {
			t.Fatalf("a stepped engine ran the QP inside TakeUpPosted: %d CQEs", c)
		}
		n.env.Doorbell(n.rc)
		for n.eng.Poll() {
		}
		if c := cqs.Stats().CQEs; c != posted {
			t.Fatalf("CQEs %d after Poll", c)
		}
	})
}

package link_test

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// newPair returns a pair with recorders attached to both ends, closed at
// the end of the test with its pool checked for leaks.
func newPair(t *testing.T, cfg link.PairConfig) (*link.Pair, *recorder, *recorder) {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = link.NewPool(0)
	}
	p, err := link.NewPair(cfg)
	if err != nil {
		t.Fatalf("NewPair: %v", err)
	}
	ra, rb := &recorder{}, &recorder{}
	p.A().Attach(ra)
	p.B().Attach(rb)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := cfg.Pool.Outstanding(); n != 0 {
			t.Errorf("%d packets not returned to the pool after Close", n)
		}
	})
	return p, ra, rb
}

// TestPairDeliversInOrder sends frames of several shapes in batches of
// several sizes, on both clocks, and checks that every frame arrives
// once, intact, in order, in batches no larger than BatchSize.
func TestPairDeliversInOrder(t *testing.T) {
	tests := []struct {
		name   string
		manual bool
		opts   frameOpts
		batch  int // frames per Send
		n      int
		rxMax  int // PairConfig.BatchSize
	}{
		{"manual/ipv4/one-by-one", true, frameOpts{payload: 64}, 1, 100, 0},
		{"manual/ipv4/batches", true, frameOpts{payload: 256}, 17, 300, 8},
		{"manual/ipv6-vlan/4KiB", true, frameOpts{payload: 4096, ipv6: true, vlan: true}, 32, 128, 0},
		{"wall/ipv4/batches", false, frameOpts{payload: 64}, 16, 500, 0},
		{"wall/ipv6/4KiB", false, frameOpts{payload: 4096, ipv6: true}, 8, 200, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := link.PairConfig{BatchSize: tc.rxMax}
			var clock *timing.Manual
			if tc.manual {
				clock = timing.NewManual()
				cfg.Clock = clock
			}
			p, ra, rb := newPair(t, cfg)
			pool := p.A().Pool()
			var want [][]byte
			for first := 0; first < tc.n; first += tc.batch {
				pkts := frames(t, pool, first, min(tc.batch, tc.n-first), tc.opts)
				for _, q := range pkts {
					want = append(want, bytes.Clone(q.Data))
				}
				if err := p.A().Send(pkts); err != nil {
					t.Fatalf("Send: %v", err)
				}
				if clock != nil {
					clock.Advance(0)
				}
			}
			waitFor(t, "all frames", func() bool { return rb.n() >= tc.n })
			got := rb.got()
			if len(got) != tc.n {
				t.Fatalf("received %d frames, want %d", len(got), tc.n)
			}
			for i, f := range got {
				if !bytes.Equal(f.data, want[i]) {
					t.Fatalf("frame %d (seq %d) differs from frame sent %d", i, f.seq, i)
				}
				if f.icrc != link.ICRCUnchecked {
					t.Errorf("frame %d ICRC status %v, want unchecked", i, f.icrc)
				}
			}
			if ra.n() != 0 {
				t.Errorf("A received %d frames it did not send to itself", ra.n())
			}
			limit := tc.rxMax
			if limit == 0 {
				limit = link.DefaultBatchSize
			}
			rb.mu.Lock()
			if rb.maxSeen > limit || rb.overlap {
				t.Errorf("largest batch %d (limit %d), overlapping calls %v", rb.maxSeen, limit, rb.overlap)
			}
			rb.mu.Unlock()
			sa, sb := p.A().Stats(), p.B().Stats()
			var bytesSent uint64
			for _, w := range want {
				bytesSent += uint64(len(w))
			}
			if sa.TxFrames != uint64(tc.n) || sa.TxBytes != bytesSent || sb.RxFrames != uint64(tc.n) || sb.RxBytes != bytesSent || sa.Dropped() != 0 {
				t.Errorf("stats A %+v B %+v, want %d frames / %d bytes each way", sa, sb, tc.n, bytesSent)
			}
		})
	}
}

// TestManualClockNothingMovesUntilAdvance checks that with a Manual clock
// Send never delivers, even with no delay at all, and Advance(0) does.
func TestManualClockNothingMovesUntilAdvance(t *testing.T) {
	clock := timing.NewManual()
	p, _, rb := newPair(t, link.PairConfig{Clock: clock})
	if err := p.A().Send(frames(t, p.A().Pool(), 0, 5, frameOpts{payload: 8})); err != nil {
		t.Fatal(err)
	}
	if rb.n() != 0 {
		t.Fatalf("%d frames delivered before the clock moved", rb.n())
	}
	if clock.Pending() == 0 {
		t.Fatal("no timer armed for the frames in flight")
	}
	clock.Advance(0)
	if got := rb.seqs(); !slices.Equal(got, []uint32{0, 1, 2, 3, 4}) {
		t.Fatalf("after Advance(0) got %v", got)
	}
	if clock.Pending() != 0 {
		t.Errorf("%d timers left armed on an idle link", clock.Pending())
	}
}

// wireBits returns the bits an n-byte frame occupies on the wire: padded
// to 60 bytes, plus FCS, preamble and SFD, and inter-frame gap.
func wireBits(n int) uint64 { return uint64(max(n, 60)+24) * 8 }

// TestManualClockArrivalTimes checks that frames arrive exactly when the
// clock passes their due time: serialisation at the line rate (frames
// queue behind each other, sub-nanosecond remainders carried) plus the
// propagation delay, and not a nanosecond before.
func TestManualClockArrivalTimes(t *testing.T) {
	tests := []struct {
		name  string
		rate  uint64
		delay time.Duration
		sizes []int // payload sizes
	}{
		{"instant", 0, 0, []int{0, 100, 4096}},
		{"delay-only", 0, 3 * time.Microsecond, []int{64, 64, 1024}},
		{"100G", 100e9, 0, []int{0, 64, 1000, 4096, 4096, 17}},
		{"25G+delay", 25e9, 500 * time.Nanosecond, []int{4096, 1, 2, 3, 2048}},
		{"odd-rate", 3e9 + 7, 7 * time.Nanosecond, []int{10, 20, 30, 40, 50, 60, 70}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := timing.NewManual()
			clock.Advance(time.Millisecond) // a non-zero start
			start := clock.Now()
			p, _, rb := newPair(t, link.PairConfig{Clock: clock, Rate: tc.rate, Delay: tc.delay})
			pool := p.A().Pool()
			var pkts []*link.Packet
			var due []time.Duration
			var bits uint64
			for i, size := range tc.sizes {
				q := newFrame(t, pool, uint32(i), frameOpts{payload: size})
				if tc.rate != 0 {
					bits += wireBits(len(q.Data))
				}
				d := start + tc.delay
				if tc.rate != 0 {
					d += time.Duration(bits * uint64(time.Second) / tc.rate)
				}
				due = append(due, d)
				pkts = append(pkts, q)
			}
			if err := p.A().Send(pkts); err != nil {
				t.Fatal(err)
			}
			arrivedBy := func(at time.Duration) int {
				n := 0
				for _, d := range due {
					if d <= at {
						n++
					}
				}
				return n
			}
			for i, d := range due {
				if d > clock.Now() {
					clock.Advance(d - 1 - clock.Now())
					if got, want := rb.n(), arrivedBy(d-1); got != want {
						t.Fatalf("at %v (1ns before frame %d is due): %d frames arrived, want %d", clock.Now(), i, got, want)
					}
					clock.Advance(1)
				} else {
					clock.Advance(0) // due now: delivered by the next Advance
				}
				got := rb.got()
				if len(got) != arrivedBy(d) {
					t.Fatalf("at %v: %d frames arrived, want %d", clock.Now(), len(got), arrivedBy(d))
				}
				if got[i].seq != uint32(i) || got[i].time != d {
					t.Fatalf("frame %d: got seq %d at %v, want at %v", i, got[i].seq, got[i].time, d)
				}
			}

			// After the wire has gone idle, serialisation starts afresh
			// from the time of the next Send.
			clock.Advance(time.Second)
			t0 := clock.Now()
			if err := p.A().Send([]*link.Packet{newFrame(t, pool, 99, frameOpts{payload: 64})}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			got := rb.got()
			last := got[len(got)-1]
			want := t0 + tc.delay
			if tc.rate != 0 {
				want += time.Duration(wireBits(len(last.data)) * uint64(time.Second) / tc.rate)
			}
			if last.seq != 99 || last.time != want {
				t.Errorf("frame after idle: seq %d at %v, want at %v", last.seq, last.time, want)
			}
		})
	}
}

// TestWallClockDelay checks that the wall-clock pair honours the
// propagation delay and stamps arrivals with the clock's time.
func TestWallClockDelay(t *testing.T) {
	clock := timing.NewWall()
	const delay = 20 * time.Millisecond
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, Delay: delay})
	sent := clock.Now()
	if err := p.A().Send(frames(t, p.A().Pool(), 0, 3, frameOpts{payload: 8})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 frames", func() bool { return rb.n() == 3 })
	for _, f := range rb.got() {
		if f.time < sent+delay {
			t.Errorf("frame %d arrived at %v, sent at %v with delay %v", f.seq, f.time, sent, delay)
		}
	}
}

// TestBothDirections runs a ping-pong in which each receiver answers from
// inside Receive, on the manual clock: everything happens within Advance.
func TestBothDirections(t *testing.T) {
	clock := timing.NewManual()
	p, ra, rb := newPair(t, link.PairConfig{Clock: clock, Delay: time.Microsecond})
	pool := p.A().Pool()
	const rounds = 50
	rb.onRecv = func(pkts []*link.Packet) {
		for _, q := range pkts {
			if err := p.B().Send([]*link.Packet{newFrame(t, pool, seqOf(q.Data)+1000, frameOpts{payload: 16})}); err != nil {
				t.Error(err)
			}
		}
	}
	ra.onRecv = func(pkts []*link.Packet) {
		for _, q := range pkts {
			if next := seqOf(q.Data) - 1000 + 1; next < rounds {
				if err := p.A().Send([]*link.Packet{newFrame(t, pool, next, frameOpts{payload: 16})}); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if err := p.A().Send([]*link.Packet{newFrame(t, pool, 0, frameOpts{payload: 16})}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if ra.n() != rounds || rb.n() != rounds {
		t.Fatalf("A got %d, B got %d replies, want %d each", ra.n(), rb.n(), rounds)
	}
	// One microsecond each way per round.
	if last := ra.got()[rounds-1]; last.time != time.Duration(2*rounds)*time.Microsecond {
		t.Errorf("last reply at %v, want %v", last.time, time.Duration(2*rounds)*time.Microsecond)
	}
}

// TestLinkDownUp checks that taking the link down drops the frames in
// flight and those sent meanwhile, tells both receivers, and that bringing
// it up again resumes delivery.
func TestLinkDownUp(t *testing.T) {
	clock := timing.NewManual()
	p, ra, rb := newPair(t, link.PairConfig{Clock: clock, Delay: time.Microsecond})
	pool := p.A().Pool()
	send := func(first, n int) {
		t.Helper()
		if err := p.A().Send(frames(t, pool, first, n, frameOpts{payload: 32})); err != nil {
			t.Fatalf("Send while %v: %v", p.A().State(), err)
		}
	}
	send(0, 3)
	clock.Advance(time.Microsecond)
	send(3, 4) // in flight when the link goes down
	p.SetUp(false)
	if p.A().State() != link.StateDown || p.B().State() != link.StateDown {
		t.Fatalf("states after SetUp(false): %v %v", p.A().State(), p.B().State())
	}
	send(7, 2) // sent while down
	clock.Advance(time.Millisecond)
	p.SetUp(false) // no change: no second notification
	p.SetUp(true)
	send(9, 2)
	clock.Advance(time.Millisecond)

	if got, want := rb.seqs(), []uint32{0, 1, 2, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("B received %v, want %v", got, want)
	}
	wantStates := []link.State{link.StateDown, link.StateUp}
	if d := cmp.Diff(wantStates, ra.stateLog()); d != "" {
		t.Errorf("A's notifications (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantStates, rb.stateLog()); d != "" {
		t.Errorf("B's notifications (-want +got):\n%s", d)
	}
	if s := p.A().Stats(); s.Drops[link.DropLinkDown] != 6 || s.TxFrames != 9 {
		t.Errorf("A stats %+v: want 6 link-down drops (4 in flight, 2 sent while down), 9 frames on the wire", s)
	}
	if clock.Pending() != 0 {
		t.Errorf("%d timers left armed", clock.Pending())
	}
}

// TestQueueFull checks that frames beyond the bound on frames in flight
// are dropped and counted, and the rest delivered.
func TestQueueFull(t *testing.T) {
	clock := timing.NewManual()
	pool := link.NewPool(0)
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, Pool: pool, QueueLen: 8, Rate: 10e9})
	if err := p.A().Send(frames(t, pool, 0, 20, frameOpts{payload: 1000})); err != nil {
		t.Fatal(err)
	}
	if n := pool.Outstanding(); n != 8 {
		t.Errorf("%d packets outstanding with 8 in flight", n)
	}
	clock.Advance(time.Millisecond)
	if got := rb.seqs(); !slices.Equal(got, []uint32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("received %v, want the first 8", got)
	}
	if s := p.A().Stats(); s.Drops[link.DropQueueFull] != 12 || s.TxFrames != 8 {
		t.Errorf("stats %+v, want 12 queue-full drops and 8 frames sent", s)
	}
	// Room again once delivered.
	if err := p.A().Send(frames(t, pool, 20, 8, frameOpts{payload: 1000})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	if rb.n() != 16 {
		t.Errorf("received %d frames, want 16", rb.n())
	}
}

// TestSendChecks checks the frames Send refuses: runts, frames above the
// MTU, nil entries; and that frames without a receiver are counted.
func TestSendChecks(t *testing.T) {
	clock := timing.NewManual()
	pool := link.NewPool(0)
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, Pool: pool, MTU: link.MinMTU})
	runt := pool.Get()
	runt.Data = runt.Buf()[:wire.EthernetSize-1]
	big := newFrame(t, pool, 1, frameOpts{payload: 2048})                // IP packet > 1280
	fits := newFrame(t, pool, 2, frameOpts{payload: 1024})               // 20+8+12+1024+4 ≤ 1280
	tagged := newFrame(t, pool, 3, frameOpts{payload: 1024, vlan: true}) // the tag is not part of the IP packet
	if err := p.A().Send([]*link.Packet{runt, nil, big, fits, tagged}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(0)
	if got := rb.seqs(); !slices.Equal(got, []uint32{2, 3}) {
		t.Errorf("received %v, want [2 3]", got)
	}
	s := p.A().Stats()
	if s.Drops[link.DropRunt] != 1 || s.Drops[link.DropTooBig] != 1 {
		t.Errorf("drops %v, want one runt and one too big", s.Drops)
	}

	p.B().Attach(nil)
	if err := p.A().Send(frames(t, pool, 10, 3, frameOpts{})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(0)
	if n := p.B().Stats().Drops[link.DropNoReceiver]; n != 3 || rb.n() != 2 {
		t.Errorf("no-receiver drops %d (want 3), received %d (want 2)", n, rb.n())
	}
}

// TestClose checks Close on both clocks: goroutines and timers stop,
// frames in flight go back to the pool, Send afterwards returns
// net.ErrClosed (and still releases), the other end is told the link went
// down and drops what it sends, and nothing is delivered any more.
func TestClose(t *testing.T) {
	for _, manual := range []bool{true, false} {
		name := "wall"
		if manual {
			name = "manual"
		}
		t.Run(name, func(t *testing.T) {
			var clock timing.Clock = timing.NewWall()
			if manual {
				clock = timing.NewManual()
			}
			pool := link.NewPool(0)
			p, err := link.NewPair(link.PairConfig{Clock: clock, Pool: pool, Delay: time.Hour,
				AtoB: link.Faults{Reorder: 0.5, ReorderDepth: 3, Seed: 1}})
			if err != nil {
				t.Fatal(err)
			}
			ra, rb := &recorder{}, &recorder{}
			p.A().Attach(ra)
			p.B().Attach(rb)
			if err := p.A().Send(frames(t, pool, 0, 50, frameOpts{payload: 64})); err != nil {
				t.Fatal(err)
			}
			if err := p.B().Send(frames(t, pool, 100, 5, frameOpts{payload: 64})); err != nil {
				t.Fatal(err)
			}
			if err := p.B().Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := p.B().Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if n := pool.Outstanding(); n != 0 {
				t.Errorf("%d packets outstanding after Close", n)
			}
			if m, ok := clock.(*timing.Manual); ok {
				m.Advance(2 * time.Hour)
				if m.Pending() != 0 {
					t.Errorf("%d timers armed after Close", m.Pending())
				}
			}
			q := newFrame(t, pool, 200, frameOpts{})
			if err := p.B().Send([]*link.Packet{q}); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Send on a closed end: %v, want net.ErrClosed", err)
			}
			if err := p.A().Send(frames(t, pool, 300, 2, frameOpts{})); err != nil {
				t.Errorf("Send on the open end: %v", err)
			}
			if n := pool.Outstanding(); n != 0 {
				t.Errorf("%d packets outstanding after Send on a closed pair", n)
			}
			if d := cmp.Diff([]link.State{link.StateDown}, ra.stateLog()); d != "" {
				t.Errorf("A's notifications (-want +got):\n%s", d)
			}
			if len(rb.stateLog()) != 0 {
				t.Errorf("the closed end was notified: %v", rb.stateLog())
			}
			if s := p.A().Stats(); s.Drops[link.DropClosed] != 50 || s.Drops[link.DropLinkDown] != 2 {
				t.Errorf("A drops %v, want 50 closed and 2 link down", s.Drops)
			}
			if p.A().State() != link.StateDown {
				t.Error("A still up after B closed")
			}
			p.SetUp(true)
			if p.A().State() != link.StateDown {
				t.Error("SetUp revived a closed pair")
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			checkNoLinkGoroutines(t)
			if ra.n()+rb.n() != 0 {
				t.Errorf("delivered %d frames with an hour of delay", ra.n()+rb.n())
			}
		})
	}
}

// TestCloseDuringTraffic closes a wall-clock pair while both directions
// are busy and receivers are answering; run with -race.
func TestCloseDuringTraffic(t *testing.T) {
	pool := link.NewPool(0)
	p, err := link.NewPair(link.PairConfig{Pool: pool, QueueLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	echo := func(from *link.End) func([]*link.Packet) {
		return func(pkts []*link.Packet) {
			out := make([]*link.Packet, 0, len(pkts))
			for _, q := range pkts {
				if r := pool.Get(); r != nil {
					r.Data = r.Buf()[:copy(r.Buf(), q.Data)]
					out = append(out, r)
				}
			}
			_ = from.Send(out) // net.ErrClosed once closing has begun
		}
	}
	ra, rb := &recorder{}, &recorder{}
	ra.onRecv, rb.onRecv = echo(p.A()), echo(p.B())
	p.A().Attach(ra)
	p.B().Attach(rb)
	if err := p.A().Send(frames(t, pool, 0, 32, frameOpts{payload: 64})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "traffic", func() bool { return rb.n() > 1000 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoLinkGoroutines(t)
	n := ra.n() + rb.n()
	time.Sleep(10 * time.Millisecond)
	if ra.n()+rb.n() != n {
		t.Error("frames delivered after Close returned")
	}
	if o := pool.Outstanding(); o != 0 {
		t.Errorf("%d packets outstanding", o)
	}
}

// TestNewPairErrors checks the configuration checks.
func TestNewPairErrors(t *testing.T) {
	bad := []link.PairConfig{
		{MTU: 100},
		{MTU: link.MaxMTU + 1},
		{Delay: -1},
		{Delay: 1<<63 - 1},
		{QueueLen: -1},
		{BatchSize: 5000},
		{Rate: 1e16},
		{AtoB: link.Faults{Loss: 2}},
		{BtoA: link.Faults{ReorderDepth: 1, ReorderDelay: 1}},
	}
	for _, cfg := range bad {
		if p, err := link.NewPair(cfg); err == nil {
			p.Close()
			t.Errorf("NewPair(%+v) succeeded", cfg)
		}
	}
	checkNoLinkGoroutines(t)
}

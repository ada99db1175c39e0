package link_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// runFaults sends n frames A→B through a manual-clock pair with faults f,
// in batches of 64, and returns what B received and A's stats.
func runFaults(t *testing.T, f link.Faults, n int, o frameOpts) ([]rxFrame, link.Stats) {
	t.Helper()
	clock := timing.NewManual()
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, AtoB: f, QueueLen: 4096})
	pool := p.A().Pool()
	// Frames are copies of one template with the sequence number patched
	// into the source MAC, which the ICRC does not cover: building each
	// with wire.BuildFrame would make 100k frames slow under -race.
	tmpl := newFrame(t, pool, 0, o)
	defer tmpl.Release()
	pkts := make([]*link.Packet, 0, 64)
	for first := 0; first < n; first += 64 {
		pkts = pkts[:0]
		for i := first; i < min(first+64, n); i++ {
			q := pool.Get()
			q.Data = q.Buf()[:copy(q.Buf(), tmpl.Data)]
			binary.BigEndian.PutUint32(q.Data[8:12], uint32(i))
			pkts = append(pkts, q)
		}
		if err := p.A().Send(pkts); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Microsecond)
	}
	return rb.got(), p.A().Stats()
}

// pattern summarises a received sequence for comparing runs.
func pattern(got []rxFrame) []uint32 {
	s := make([]uint32, len(got))
	for i, f := range got {
		s[i] = f.seq
	}
	return s
}

// TestFaultsReproducible checks that a seed reproduces the whole pattern
// (which frames are lost, duplicated, reordered, which bytes corrupted),
// that another seed gives another, and that the two directions of a pair
// draw from different streams.
func TestFaultsReproducible(t *testing.T) {
	f := link.Faults{Loss: 0.05, Reorder: 0.05, ReorderDepth: 2, Duplicate: 0.05, Corrupt: 0.05, Seed: 42}
	const n = 2000
	a, _ := runFaults(t, f, n, frameOpts{payload: 32})
	b, _ := runFaults(t, f, n, frameOpts{payload: 32})
	// Compared by hand: cmp.Diff over 2000 frames is slow under -race.
	same := len(a) == len(b)
	for i := 0; same && i < len(a); i++ {
		same = a[i].seq == b[i].seq && a[i].time == b[i].time && bytes.Equal(a[i].data, b[i].data)
	}
	if !same {
		t.Fatalf("same seed, different outcome:\n%v\n%v", pattern(a), pattern(b))
	}
	if slices.Equal(pattern(a), seqRange(n)) {
		t.Fatal("faults changed nothing")
	}
	f.Seed = 43
	c, _ := runFaults(t, f, n, frameOpts{payload: 32})
	if slices.Equal(pattern(a), pattern(c)) {
		t.Error("seeds 42 and 43 gave the same pattern")
	}

	// Enabling another kind of fault does not move the losses.
	lost := func(got []rxFrame) []uint32 {
		seen := map[uint32]bool{}
		for _, r := range got {
			seen[r.seq] = true
		}
		var l []uint32
		for i := range uint32(n) {
			if !seen[i] {
				l = append(l, i)
			}
		}
		return l
	}
	onlyLoss, _ := runFaults(t, link.Faults{Loss: 0.05, Seed: 42}, n, frameOpts{payload: 32})
	if d := cmp.Diff(lost(onlyLoss), lost(a)); d != "" {
		t.Errorf("losses depend on the other faults (-loss only +all):\n%s", d)
	}

	// The two directions of one pair do not lose the same frames.
	clock := timing.NewManual()
	fl := link.Faults{Loss: 0.2, Seed: 1}
	p, ra, rb := newPair(t, link.PairConfig{Clock: clock, AtoB: fl, BtoA: fl})
	for first := 0; first < 256; first += 64 {
		if err := p.A().Send(frames(t, p.A().Pool(), first, 64, frameOpts{})); err != nil {
			t.Fatal(err)
		}
		if err := p.B().Send(frames(t, p.A().Pool(), first, 64, frameOpts{})); err != nil {
			t.Fatal(err)
		}
		clock.Advance(0)
	}
	if slices.Equal(ra.seqs(), rb.seqs()) {
		t.Error("both directions lost the same frames")
	}
}

func seqRange(n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

// TestFaultRates sends 100k frames through the brief's example spec and
// checks, from what arrived, that each fault happened as often as the
// injector says it did, and that this is the configured rate within five
// standard deviations.
func TestFaultRates(t *testing.T) {
	f, err := link.ParseFaults("loss=0.03,reorder=0.05,dup=0.01,corrupt=0.001,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	got, st := runFaults(t, f, n, frameOpts{payload: 0})

	count := make([]int, n)
	var dups, bad, reordered int
	maxSeen := -1
	for _, r := range got {
		var fr wire.Frame
		if wire.ParseFrame(r.data, &fr) != nil || fr.VerifyICRC() != nil {
			bad++
		}
		s := int(r.seq)
		if s < 0 || s >= n {
			t.Fatalf("received unknown sequence number %d", s)
		}
		count[s]++
		if count[s] > 1 {
			dups++
			continue
		}
		if s < maxSeen {
			reordered++
		}
		maxSeen = max(maxSeen, s)
	}
	lost := 0
	for _, c := range count {
		if c == 0 {
			lost++
		}
	}
	fs := st.Faults
	t.Logf("lost %d, duplicated %d, corrupted %d, reordered %d (arrived late: %d) of %d", fs.Lost, fs.Duplicated, fs.Corrupted, fs.Reordered, reordered, n)
	if fs.Offered != n || st.TxFrames != n || st.Dropped() != 0 {
		t.Errorf("stats %+v: want %d frames offered and sent, no link drops", st, n)
	}
	if lost != int(fs.Lost) || dups != int(fs.Duplicated) || bad != int(fs.Corrupted) {
		t.Errorf("observed lost %d, duplicates %d, bad ICRC %d; injector says %d, %d, %d", lost, dups, bad, fs.Lost, fs.Duplicated, fs.Corrupted)
	}
	// Only held frames arrive late, but not every held frame does: one
	// at the end of a batch has nothing behind it to overtake it (about
	// 1 in 64 here), and one whose duplicate overtook it counts as a
	// duplicate.
	if reordered > int(fs.Reordered) || float64(reordered) < 0.9*float64(fs.Reordered) {
		t.Errorf("%d frames arrived late, injector reordered %d", reordered, fs.Reordered)
	}
	within := func(name string, got uint64, p float64, trials float64) {
		mean := p * trials
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(got)-mean) > 5*sd {
			t.Errorf("%s: %d, want %.0f ± %.0f", name, got, mean, 5*sd)
		}
	}
	within("lost", fs.Lost, f.Loss, n)
	survivors := float64(n - fs.Lost)
	within("duplicated", fs.Duplicated, f.Duplicate, survivors)
	within("corrupted", fs.Corrupted, f.Corrupt, survivors)
	within("reordered", fs.Reordered, f.Reorder, survivors)
}

// TestCorruption checks each corruption scope on every frame: one byte
// changes, within the scope, and the receiver's checks catch it as the
// scope promises; a link that verifies ICRCs reports them bad.
func TestCorruption(t *testing.T) {
	tests := []struct {
		scope  link.CorruptScope
		opts   frameOpts
		verify bool
	}{
		{link.CorruptRoCE, frameOpts{payload: 100}, false},
		{link.CorruptRoCE, frameOpts{payload: 0, ipv6: true, vlan: true}, true},
		{link.CorruptPayload, frameOpts{payload: 4096}, true},
		{link.CorruptPayload, frameOpts{payload: 0, ipv6: true}, false},
		{link.CorruptFrame, frameOpts{payload: 8}, false},
	}
	for _, tc := range tests {
		t.Run(tc.scope.String(), func(t *testing.T) {
			clock := timing.NewManual()
			f := link.Faults{Corrupt: 1, CorruptScope: tc.scope, Seed: 3}
			p, _, rb := newPair(t, link.PairConfig{Clock: clock, AtoB: f, VerifyICRC: tc.verify})
			pool := p.A().Pool()
			const n = 500
			want := make([][]byte, n)
			for i := range n {
				q := newFrame(t, pool, uint32(i), tc.opts)
				want[i] = bytes.Clone(q.Data)
				if err := p.A().Send([]*link.Packet{q}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(0)
			got := rb.got()
			if len(got) != n {
				t.Fatalf("received %d frames, want %d", len(got), n)
			}
			var gateCaught, icrcCaught, undetected int
			for i, r := range got {
				orig := want[i]
				diff := -1
				for j := range orig {
					if r.data[j] != orig[j] {
						if diff >= 0 {
							t.Fatalf("frame %d: bytes %d and %d changed", i, diff, j)
						}
						diff = j
					}
				}
				if diff < 0 {
					t.Fatalf("frame %d unchanged", i)
				}
				var of wire.Frame
				if err := wire.ParseFrame(orig, &of); err != nil {
					t.Fatal(err)
				}
				udp := len(orig) - len(of.Packet.Raw) // where the RoCEv2 packet starts
				var fr wire.Frame
				perr := wire.ParseFrame(r.data, &fr)
				switch tc.scope {
				case link.CorruptRoCE:
					if diff < udp || diff == udp+wire.BTHECNOffset {
						t.Fatalf("frame %d: byte %d changed, outside the RoCEv2 packet at %d or the masked ECN byte", i, diff, udp)
					}
				case link.CorruptPayload:
					if diff < udp+of.Packet.HeaderLen() {
						t.Fatalf("frame %d: byte %d changed, inside the headers", i, diff)
					}
					if perr != nil {
						t.Fatalf("frame %d: payload corruption failed the gate: %v", i, perr)
					}
				}
				switch {
				case perr != nil:
					gateCaught++
				case fr.VerifyICRC() != nil:
					icrcCaught++
					if tc.verify && r.icrc != link.ICRCBad {
						t.Errorf("frame %d: ICRC status %v, want bad", i, r.icrc)
					}
				default:
					undetected++
				}
			}
			t.Logf("%v: %d caught by the gate, %d by the ICRC, %d undetected", tc.scope, gateCaught, icrcCaught, undetected)
			if tc.scope != link.CorruptFrame && undetected != 0 {
				t.Errorf("%d corrupted frames passed both the gate and the ICRC", undetected)
			}
			if tc.scope == link.CorruptPayload && icrcCaught != n {
				t.Errorf("ICRC caught %d of %d payload corruptions", icrcCaught, n)
			}
			if s := p.A().Stats().Faults; s.Corrupted != n || s.Offered != n {
				t.Errorf("fault stats %+v", s)
			}
		})
	}
}

// TestVerifyICRCGood checks that a verifying pair marks intact frames good.
func TestVerifyICRCGood(t *testing.T) {
	clock := timing.NewManual()
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, VerifyICRC: true})
	if err := p.A().Send(frames(t, p.A().Pool(), 0, 3, frameOpts{payload: 77, ipv6: true})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(0)
	for _, r := range rb.got() {
		if r.icrc != link.ICRCGood {
			t.Errorf("frame %d: ICRC %v, want good", r.seq, r.icrc)
		}
	}
}

// TestDuplicate checks that a duplicate follows its frame, intact even
// when the frame itself is corrupted, and is counted; and that duplicates
// the pool cannot supply are dropped and counted.
func TestDuplicate(t *testing.T) {
	clock := timing.NewManual()
	pool := link.NewPool(0)
	f := link.Faults{Duplicate: 1, Corrupt: 1, CorruptScope: link.CorruptPayload}
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, Pool: pool, AtoB: f})
	pkts := frames(t, pool, 0, 4, frameOpts{payload: 64})
	var want [][]byte
	for _, q := range pkts {
		want = append(want, bytes.Clone(q.Data))
	}
	if err := p.A().Send(pkts); err != nil {
		t.Fatal(err)
	}
	clock.Advance(0)
	got := rb.got()
	if s := pattern(got); !slices.Equal(s, []uint32{0, 0, 1, 1, 2, 2, 3, 3}) {
		t.Fatalf("received %v", s)
	}
	for i := 0; i < len(got); i += 2 {
		if bytes.Equal(got[i].data, want[i/2]) || !bytes.Equal(got[i+1].data, want[i/2]) {
			t.Errorf("frame %d: want the corrupted original, then the intact copy", i/2)
		}
	}

	// A pair whose pool is exhausted cannot duplicate.
	small := link.NewPool(2)
	clock2 := timing.NewManual()
	p2, _, rb2 := newPair(t, link.PairConfig{Clock: clock2, Pool: small, AtoB: link.Faults{Duplicate: 1}})
	if err := p2.A().Send(frames(t, small, 0, 2, frameOpts{})); err != nil {
		t.Fatal(err)
	}
	clock2.Advance(0)
	if rb2.n() != 2 || p2.A().Stats().Drops[link.DropNoBuffer] != 2 {
		t.Errorf("received %d, no-buffer drops %d; want 2 and 2", rb2.n(), p2.A().Stats().Drops[link.DropNoBuffer])
	}
}

// TestReorderDepth checks hold-back-by-N-frames reordering against a naive
// model driven by the same injector decisions: a held frame arrives right
// after the Nth frame queued behind it, or, if fewer follow, after the
// last of them.
func TestReorderDepth(t *testing.T) {
	for _, depth := range []int{1, 3} {
		f := link.Faults{Reorder: 0.2, ReorderDepth: depth, Loss: 0.05, Seed: 99}
		const n = 1000
		clock := timing.NewManual()
		p, _, rb := newPair(t, link.PairConfig{Clock: clock, AtoB: f, Rate: 10e9, Delay: time.Microsecond})
		pkts := frames(t, p.A().Pool(), 0, n, frameOpts{payload: 16})

		// The model: the pair's A→B direction uses stream 0.
		inj, err := link.NewInjector(f, 0)
		if err != nil {
			t.Fatal(err)
		}
		type held struct {
			seq  uint32
			left int
		}
		var want []uint32
		var hs []held
		for i, q := range pkts {
			v := inj.Decide(q.Data)
			switch {
			case v.Drop:
			case v.Reorder:
				if v.HoldFrames != depth {
					t.Fatalf("verdict holds for %d frames, want %d", v.HoldFrames, depth)
				}
				hs = append(hs, held{uint32(i), v.HoldFrames})
			default:
				want = append(want, uint32(i))
				var rest []held
				for _, h := range hs {
					if h.left--; h.left == 0 {
						want = append(want, h.seq)
					} else {
						rest = append(rest, h)
					}
				}
				hs = rest
			}
		}
		for _, h := range hs {
			want = append(want, h.seq)
		}

		if err := p.A().Send(pkts); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if d := cmp.Diff(want, rb.seqs()); d != "" {
			t.Errorf("depth %d: arrival order (-model +pair):\n%s", depth, d)
		}
		if clock.Pending() != 0 {
			t.Errorf("%d timers armed on an idle link", clock.Pending())
		}
	}
}

// TestReorderHeldAlone checks that a held frame with nothing behind it is
// not stuck: it arrives at its own time.
func TestReorderHeldAlone(t *testing.T) {
	clock := timing.NewManual()
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, Delay: time.Microsecond, AtoB: link.Faults{Reorder: 1, ReorderDepth: 5}})
	if err := p.A().Send(frames(t, p.A().Pool(), 0, 1, frameOpts{})); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Microsecond - 1)
	if rb.n() != 0 {
		t.Fatal("held frame arrived early")
	}
	clock.Advance(1)
	if got := rb.got(); len(got) != 1 || got[0].time != time.Microsecond {
		t.Fatalf("held frame: %+v", got)
	}
}

// TestReorderDelay checks delay-mode reordering: a reordered frame arrives
// ReorderDelay after its natural time and everything due meanwhile
// overtakes it.
func TestReorderDelay(t *testing.T) {
	f := link.Faults{Reorder: 0.3, ReorderDelay: 250 * time.Nanosecond, Seed: 5}
	const n = 400
	clock := timing.NewManual()
	const rate = 10e9
	p, _, rb := newPair(t, link.PairConfig{Clock: clock, AtoB: f, Rate: rate})
	pkts := frames(t, p.A().Pool(), 0, n, frameOpts{payload: 64})
	inj, err := link.NewInjector(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	type arrival struct {
		at  time.Duration
		seq uint32
	}
	var want []arrival
	var bits uint64
	for i, q := range pkts {
		bits += wireBits(len(q.Data))
		at := time.Duration(bits * uint64(time.Second) / rate)
		if v := inj.Decide(q.Data); v.Reorder {
			at += v.HoldDelay
		}
		want = append(want, arrival{at, uint32(i)})
	}
	slices.SortStableFunc(want, func(a, b arrival) int { return int(a.at - b.at) })
	if err := p.A().Send(pkts); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	var got []arrival
	for _, r := range rb.got() {
		got = append(got, arrival{r.time, r.seq})
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(arrival{})); d != "" {
		t.Errorf("arrivals (-model +pair):\n%s", d)
	}
}

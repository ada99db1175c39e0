package timing_test

import (
	"sync"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// shardModel prices Serialise at 10 cycles plus one per 1000 bytes
// (rounded up) at 1 GHz, and every other stage at nothing, so the expected
// cycles below are worked by hand.
func shardModel() *timing.Linear {
	m := &timing.Linear{ClockHz: 1_000_000_000}
	m.Stages[timing.Serialise] = timing.StageCost{Fixed: 10, BytesPerSec: 1_000_000_000 * 1000}
	return m
}

// TestMeterShards checks that a shard's charges reach the root's readers
// only when the shard publishes them, that a shard of a shard counts in the
// same root, and that Reset zeroes what was published.
func TestMeterShards(t *testing.T) {
	root := timing.NewMeter(shardModel())
	a := root.Local()
	b := a.Local() // belongs to root, not to a
	steps := []struct {
		name string
		do   func()
		want timing.StageStats // root.Stage(Serialise) afterwards
	}{
		{"root charges at once", func() { root.Charge(timing.Serialise, 1500) }, // 10 + ceil(1.5)
			timing.StageStats{Count: 1, Bytes: 1500, Cycles: 12}},
		{"shard charges, unpublished", func() { a.Charge(timing.Serialise, 1000); a.Charge(timing.Serialise, 1) },
			timing.StageStats{Count: 1, Bytes: 1500, Cycles: 12}},
		{"shard publishes", a.Publish, // + (10 + 1) + (10 + 1)
			timing.StageStats{Count: 3, Bytes: 2501, Cycles: 34}},
		{"publishing twice adds nothing", a.Publish,
			timing.StageStats{Count: 3, Bytes: 2501, Cycles: 34}},
		{"shard of a shard", func() { b.Charge(timing.Serialise, 0); b.Publish() }, // + 10
			timing.StageStats{Count: 4, Bytes: 2501, Cycles: 44}},
		{"Publish on the root does nothing", root.Publish,
			timing.StageStats{Count: 4, Bytes: 2501, Cycles: 44}},
		{"reset from a shard", func() { b.Charge(timing.Serialise, 7); a.Reset() },
			timing.StageStats{}},
		{"a charge pending across the reset", b.Publish, // 10 + ceil(0.007)
			timing.StageStats{Count: 1, Bytes: 7, Cycles: 11}},
	}
	for _, st := range steps {
		st.do()
		for _, m := range []*timing.Meter{root, a, b} {
			if got := m.Stage(timing.Serialise); got != st.want {
				t.Errorf("%s: Stage %+v, want %+v", st.name, got, st.want)
			}
		}
		if got := root.Snapshot(); got.Total != st.want.Cycles || got.Stages[timing.Serialise] != st.want {
			t.Errorf("%s: Snapshot %+v", st.name, got)
		}
	}
}

// TestMeterShardMemo: a shard remembers the last price per stage, and the
// price it returns is the model's whatever the order of stages and sizes —
// a memo keyed by size alone, or kept across stages, fails here. The costs
// are shardModel's, worked by hand: Serialise 10 + ceil(bytes/1000),
// PacketBuild 0.
func TestMeterShardMemo(t *testing.T) {
	sh := timing.NewMeter(shardModel()).Local()
	steps := []struct {
		s     timing.Stage
		bytes int
		want  timing.Cycles
	}{
		{timing.Serialise, 1500, 12},
		{timing.Serialise, 1500, 12},
		{timing.PacketBuild, 1500, 0},
		{timing.Serialise, 1500, 12},
		{timing.Serialise, 1, 11},
		{timing.Serialise, 1500, 12},
		{timing.Serialise, 0, 10},
		{timing.Serialise, -5, 10},
		{timing.Serialise, 2001, 13},
		{timing.PacketBuild, 2001, 0},
		{timing.Serialise, 2001, 13},
	}
	var cycles timing.Cycles
	for i, st := range steps {
		if got := sh.Charge(st.s, st.bytes); got != st.want {
			t.Errorf("step %d: Charge(%v, %d) = %d, want %d", i, st.s, st.bytes, got, st.want)
		}
		if st.s == timing.Serialise {
			cycles += st.want
		}
	}
	sh.Publish()
	if got := sh.Stage(timing.Serialise).Cycles; got != cycles {
		t.Errorf("published %d cycles, want %d", got, cycles)
	}
}

// TestMeterShardsConcurrent charges one shard per goroutine while the root
// is read, for the race detector, and checks the sum.
func TestMeterShardsConcurrent(t *testing.T) {
	const workers, rounds, per = 4, 50, 20
	root := timing.NewMeter(shardModel())
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				_ = root.Snapshot()
			}
		}
	}()
	for range workers {
		l := root.Local()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for range per {
					l.Charge(timing.Serialise, 2000) // 10 + 2
				}
				l.Publish()
			}
		}()
	}
	wg.Wait()
	close(done)
	n := uint64(workers * rounds * per)
	want := timing.StageStats{Count: n, Bytes: 2000 * n, Cycles: timing.Cycles(12 * n)}
	if got := root.Stage(timing.Serialise); got != want {
		t.Errorf("Stage %+v, want %+v", got, want)
	}
}

func TestMeterShardNoAllocs(t *testing.T) {
	l := timing.NewMeter(timing.E810()).Local()
	if n := testing.AllocsPerRun(1000, func() { l.Charge(timing.Serialise, 4112); l.Publish() }); n != 0 {
		t.Errorf("shard Charge and Publish: %v allocations", n)
	}
}

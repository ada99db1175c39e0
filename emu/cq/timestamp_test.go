package cq_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// TestCQETimestamps: with the device clock on (GEN_3: 1 GHz, 32-bit mask)
// qword0 [63:32] of each CQE holds the manual clock's time in nanoseconds
// when the CQE was written, modulo 2³², in place of the PSN the data path
// passed; PAYLDLEN is untouched. CCQEs (PostRaw) and a device without the
// feature keep what they were given.
func TestCQETimestamps(t *testing.T) {
	mem := hostmem.New()
	defer mem.Close()
	clk := timing.NewManual()
	setup := func(stamped bool) (*cq.CQ, hostmem.IOVA) {
		ring, _ := mem.Alloc(16*64, 256, "ring")
		sh, _ := mem.Alloc(64, 0, "shadow")
		ev := cq.NewEvents(mem, nil, nopNotify{}, 4)
		if stamped {
			ev.StampCQEs(timing.NewCounter(clk, 1_000_000), 0xffff_ffff)
		}
		c, err := cq.NewTable(mem, ev, 8).Create(cq.Config{ID: 1, Ring: cq.RingMem{Base: ring.IOVA(), Entry: 64, Size: 16},
			Shadow: sh.IOVA(), AvoidMemCflct: true})
		if err != nil {
			t.Fatal(err)
		}
		return c, ring.IOVA()
	}
	c, ring := setup(true)
	plain, plainRing := setup(false)
	qword0 := func(ring hostmem.IOVA, slot int) uint64 {
		v, err := mem.Load64(ring + hostmem.IOVA(64*slot))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	steps := []struct {
		name  string
		to    time.Duration // the clock when the CQE is written
		want  uint64        // qword0: timestamp [63:32] | PAYLDLEN
		plain uint64        // qword0 without the feature: PSN | PAYLDLEN
	}{
		{"at the epoch", 0, 0x0000_0000_0000_0100, 0x0000_0077_0000_0100},
		{"1234 ns", 1234 * time.Nanosecond, 0x0000_04d2_0000_0100, 0x0000_0077_0000_0100},
		{"1.5 s", 1500 * time.Millisecond, 0x5968_2f00_0000_0100, 0x0000_0077_0000_0100},
		{"wrapped: 2³² + 5 ns", (1<<32 + 5) * time.Nanosecond, 0x0000_0005_0000_0100, 0x0000_0077_0000_0100},
	}
	for i, s := range steps {
		clk.Advance(s.to - clk.Now())
		for _, q := range []*cq.CQ{c, plain} {
			e := cq.CQE{PayloadLen: 0x100, PSN: 0x77, SQ: true}
			if err := q.Post(&e); err != nil {
				t.Fatal(err)
			}
		}
		if got := qword0(ring, i); got != s.want {
			t.Errorf("%s: qword0 %#x, want %#x", s.name, got, s.want)
		}
		if got := qword0(plainRing, i); got != s.plain {
			t.Errorf("%s without timestamps: qword0 %#x, want %#x", s.name, got, s.plain)
		}
	}
	// A CCQE is written as given.
	if err := c.PostRaw([4]uint64{0x1234_5678_9abc_def0, 0, 0, 0}, nil, false); err != nil {
		t.Fatal(err)
	}
	if got := qword0(ring, len(steps)); got != 0x1234_5678_9abc_def0 {
		t.Errorf("CCQE qword0 %#x, want it unstamped", got)
	}
}

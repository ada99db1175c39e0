package qp_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// srqRing is an SRQ of n WQEs of 2 quanta in host memory, its shadow after it.
func srqRing(t testing.TB, n uint32, limit uint32, armed bool) (*hostmem.Memory, *hostmem.Region, *qp.SRQ, *qp.SRQTable) {
	t.Helper()
	mem := hostmem.New()
	r, err := mem.Alloc(int(n)*64+64, 256, "srq")
	if err != nil {
		t.Fatal(err)
	}
	tab := qp.NewSRQTable(16)
	s, err := tab.Create(qp.SRQSpec{ID: 3, Ctx: 0x5e00_0000_0000_00c0,
		Ring:   cq.RingMem{Base: r.IOVA(), Entry: 64, Size: n},
		Shadow: r.IOVA() + hostmem.IOVA(n*64), Limit: limit, Armed: armed})
	if err != nil {
		t.Fatal(err)
	}
	return mem, r, s, tab
}

// putWQE writes qwords at WQE i.
func putWQE(b []byte, i int, q ...uint64) {
	for k, v := range q {
		binary.LittleEndian.PutUint64(b[i*64+8*k:], v)
	}
}

// TestSRQTakeGolden: WQEs written by hand in the layout of rdma-core uk.c
// irdma_uk_srq_post_receive (two fragments, wr_id in qword2, ADDFRAGCNT 1
// with the GEN_3 uncounted pad, VALID at the first lap's polarity 1) are
// taken in ring order, by valid bit; the limit fires once when fewer than
// the limit remain posted (shadow qword0, the producer index).
func TestSRQTakeGolden(t *testing.T) {
	mem, r, s, tab := srqRing(t, 4, 2, true)
	b := r.Bytes()
	putWQE(b, 0, 0x1000, 1<<63|0x40<<32|0x11, 0xdead, 1<<63|1<<38, 0x2000, 1<<63|0x80<<32|0x22, 0, 1<<63)
	putWQE(b, 1, 0x3000, 1<<63|0x10<<32|0x33, 0xbeef, 1<<63)
	binary.LittleEndian.PutUint64(b[4*64:], 2) // producer: 2 posted
	lim := qp.WQELimitsFrom(profile.GEN3())
	meter := timing.NewMeter(nil)
	var w qp.RQWQE
	got, ok, hit, err := s.Take(mem, meter, lim, &w)
	if err != nil || !ok || got.WrID != 0xdead || got.Idx != 0 || !hit {
		t.Fatalf("first take %+v ok %v limit %v err %v (1 left < limit 2)", got, ok, hit, err)
	}
	if fr := w.Fragments(); len(fr) != 2 || fr[0].Addr != 0x1000 || fr[1].Len != 0x80 || fr[1].STag != 0x22 || !w.OK() {
		t.Errorf("fragments %+v violations %v", fr, w.Violations())
	}
	got, ok, hit, err = s.Take(mem, meter, lim, &w)
	if err != nil || !ok || got.WrID != 0xbeef || got.Idx != 2 || hit {
		t.Fatalf("second take %+v ok %v limit %v err %v (disarmed: no second event)", got, ok, hit, err)
	}
	if _, ok, _, _ = s.Take(mem, meter, lim, &w); ok {
		t.Error("a WQE taken past the valid ones")
	}
	if st := s.State(); st.Armed || st.Taken != 2 || st.Cons != 2 {
		t.Errorf("state %+v", st)
	}
	if tab.Get(3) != s || tab.Len() != 1 {
		t.Error("table lookup")
	}
	if err := tab.Destroy(3); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Take(mem, meter, lim, &w); !errors.Is(err, qp.ErrSRQDestroyed) {
		t.Errorf("take from a destroyed SRQ: %v", err)
	}
	if err := tab.Destroy(3); err == nil {
		t.Error("double destroy succeeded")
	}
	if _, err := tab.Create(qp.SRQSpec{ID: 16}); err == nil {
		t.Error("SRQ id beyond the table accepted")
	}
}

// FuzzSRQTake: any ring contents and producer index take without
// panicking, at most one WQE per take, indices within the ring.
func FuzzSRQTake(f *testing.F) {
	f.Add(make([]byte, 4*64), uint64(1))
	w0 := make([]byte, 4*64)
	putWQE(w0, 0, 0x1000, 1<<63|0x40<<32|0x11, 0xdead, 1<<63|1<<38, 0x2000, 1<<63|0x80<<32|0x22, 0, 1<<63)
	f.Add(w0, uint64(3))
	f.Fuzz(func(t *testing.T, ring []byte, prod uint64) {
		mem, r, s, _ := srqRing(t, 4, 3, true)
		copy(r.Bytes()[:4*64], ring)
		binary.LittleEndian.PutUint64(r.Bytes()[4*64:], prod)
		lim := qp.WQELimitsFrom(profile.GEN3())
		var w qp.RQWQE
		for i := range 6 {
			got, ok, _, err := s.Take(mem, timing.NewMeter(nil), lim, &w)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			if got.Idx >= 8 || s.State().Taken != uint64(i+1) {
				t.Fatalf("take %d: %+v state %+v", i, got, s.State())
			}
		}
	})
}

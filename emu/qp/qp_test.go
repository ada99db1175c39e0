package qp_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// TestContextView decodes a context written by hand from
// ctrl.c:irdma_sc_qp_setctx_roce_gen_2 (docs/hw-controlpath.md "QP host
// context").
func TestContextView(t *testing.T) {
	b := make([]byte, 256)
	put := func(off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
	put(0, 2<<8|1<<3|1<<6|3<<20|5<<32|1<<47) // RQWQESIZE 2, IPV4, ISQP1, PDIDXHI 3, PPIDX 5, PMENA
	put(24, 0x40|3<<8|4<<12|0x12<<24|0xc123<<32|4791<<48)
	put(32, 0xc0a8_0102)                  // DESTIPADDR3 = 192.168.1.2
	put(48, 4096<<16|0xe00a<<32|0x1f<<48) // SNDMSS, VLANTAG, ARPIDX
	put(56, 0xabcde|0x1e<<20|0xffff<<32|0x4567<<48)
	put(64, 0x12_3456|0x1111_2222<<32)     // DESTQP, QKEY
	put(128, 0x1234<<32|7<<48|6<<54|5<<57) // ERR_RQ_IDX, REXMIT, RNRNAK, RTOMIN
	put(136, 0x1_0001|0x1_0002<<32)        // TXCQNUM, RXCQNUM (25-bit fields)
	put(152, 0x0a0b_0c0d_0e0f<<16)         // MAC
	put(160, 128|4<<16|1<<19|1<<24|1<<25|1<<26)
	put(168, 0xfeed)
	put(176, 0x3ff<<16)
	put(184, 0xc0a8_0101)
	c, ok := qp.NewContext(b)
	if !ok {
		t.Fatal("NewContext")
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"RQWQESize", uint64(c.RQWQESize()), 2}, {"PD", uint64(c.PD()), 0x3_4567},
		{"PushPageIdx", uint64(c.PushPageIdx()), 5}, {"TTL", uint64(c.TTL()), 0x40},
		{"RQSize", uint64(c.RQSize()), 3}, {"SQSize", uint64(c.SQSize()), 4}, {"TOS", uint64(c.TOS()), 0x12},
		{"SrcPort", uint64(c.SrcPort()), 0xc123}, {"DestPort", uint64(c.DestPort()), 4791},
		{"SndMSS", uint64(c.SndMSS()), 4096}, {"VLANTag", uint64(c.VLANTag()), 0xe00a}, {"ARPIdx", uint64(c.ARPIdx()), 0x1f},
		{"FlowLabel", uint64(c.FlowLabel()), 0xabcde}, {"AckCredits", uint64(c.AckCredits()), 0x1e},
		{"PKey", uint64(c.PKey()), 0xffff}, {"DestQP", uint64(c.DestQP()), 0x12_3456}, {"QKey", uint64(c.QKey()), 0x1111_2222},
		{"ErrRQIdx", uint64(c.ErrRQIdx()), 0x1234}, {"Rexmit", uint64(c.RexmitThresh()), 7},
		{"RNRNak", uint64(c.RNRNakThresh()), 6}, {"RTOMin", uint64(c.RTOMin()), 5},
		{"TxCQ", uint64(c.TxCQNum()), 0x1_0001}, {"RxCQ", uint64(c.RxCQNum()), 0x1_0002},
		{"ORD", uint64(c.ORDSize()), 128}, {"IRD", uint64(qp.IRDEntries(c.IRDSizeEnc())), 256},
		{"CompletionCtx", c.CompletionCtx(), 0xfeed}, {"QSHandle", uint64(c.QSHandle()), 0x3ff},
	}
	for _, k := range checks {
		if k.got != k.want {
			t.Errorf("%s = %#x, want %#x", k.name, k.got, k.want)
		}
	}
	if !c.IPv4() || !c.IsQP1() || !c.PushModeEn() || !c.UDPrivCQEn() || !c.FastRegEn() || !c.PrivEn() || !c.UseStatsInstance() || c.RdOK() {
		t.Error("flag bits")
	}
	if c.LocalMAC() != [6]byte{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f} {
		t.Errorf("MAC % x", c.LocalMAC())
	}
	if c.DestIP() != netip.MustParseAddr("192.168.1.2") || c.LocalIP() != netip.MustParseAddr("192.168.1.1") {
		t.Errorf("IPs %v %v", c.DestIP(), c.LocalIP())
	}
}

func TestCanTransition(t *testing.T) {
	ok := [][2]qp.State{{0, 1}, {1, 1}, {1, 4}, {4, 2}, {2, 2}, {2, 3}, {3, 2}, {2, 6}, {0, 6}, {6, 6}}
	bad := [][2]qp.State{{0, 2}, {1, 2}, {2, 4}, {6, 1}, {6, 2}, {2, 5}, {1, 0}, {4, 3}}
	for _, p := range ok {
		if !qp.CanTransition(p[0], p[1]) {
			t.Errorf("%v → %v refused", p[0], p[1])
		}
	}
	for _, p := range bad {
		if qp.CanTransition(p[0], p[1]) {
			t.Errorf("%v → %v accepted", p[0], p[1])
		}
	}
}

// TestFlushPerWQE checks the GEN_3-style flush (one CQE per WQE, NOPs
// skipped) and the wrap of the SQ walk.
func TestFlushPerWQE(t *testing.T) {
	mem := hostmem.New()
	defer mem.Close()
	alloc := func(n int) hostmem.IOVA {
		r, err := mem.Alloc(n, 256, "t")
		if err != nil {
			t.Fatal(err)
		}
		return r.IOVA()
	}
	ev := cq.NewEvents(mem, nil, nil, 1)
	tab := cq.NewTable(mem, ev, 4)
	ring := alloc(64 * 32)
	c, err := tab.Create(cq.Config{ID: 1, Ring: cq.RingMem{Base: ring, Entry: 32, Size: 64}, Shadow: alloc(64)})
	if err != nil {
		t.Fatal(err)
	}
	sq, rq, sh := alloc(8*32), alloc(8*32), alloc(64)
	ctx := make([]byte, 256)
	binary.LittleEndian.PutUint64(ctx[24:], 1<<8|1<<12) // RQSIZE 1, SQSIZE 1: 8 quanta each
	binary.LittleEndian.PutUint64(ctx[168:], 0x77)
	qps := qp.NewTable(mem, 8)
	q, err := qps.Create(qp.Spec{ID: 2, Type: qp.TypeRoCERC, State: qp.StateError, Context: ctx, Shadow: sh,
		SQ: cq.RingMem{Base: sq, Entry: 32, Size: 8}, RQ: cq.RingMem{Base: rq, Entry: 32, Size: 8}, SendCQ: c, RecvCQ: c})
	if err != nil {
		t.Fatal(err)
	}
	q.AdvanceSQ(mem, 6) // the device consumed 6 quanta; the next WQEs wrap
	for _, w := range []struct {
		idx uint32
		hdr uint64
	}{{6, 1<<63 | 0x03<<32}, {7, 1<<63 | 0x0c<<32}, {0, 0 | 0x01<<32}} { // SEND, NOP, then lap 2 (valid 0)
		_ = mem.Store64(sq+hostmem.IOVA(w.idx*32+24), w.hdr)
	}
	_ = mem.Store64(sq+hostmem.IOVA(1*32+24), 1<<63) // lap-1 garbage: stops the walk
	res := q.Flush(mem, true, false, qp.DefaultFlushCodes, true)
	if res.SQWQEs != 3 || res.CQEs != 2 {
		t.Fatalf("flush %+v", res)
	}
	if v, _ := mem.Load64(sh); v != 1 {
		t.Errorf("HW SQ tail %d, want 1", v)
	}
	q3a, _ := mem.Load64(ring + 24)
	q3b, _ := mem.Load64(ring + 32 + 24)
	if q3a>>32&0x7fff != 6 || q3a>>56&0x3f != 0x03 || q3b>>32&0x7fff != 0 || q3b>>56&0x3f != 0x01 {
		t.Errorf("flush CQEs %#x %#x", q3a, q3b)
	}
}

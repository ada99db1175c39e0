package driver

import (
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

func TestAHVerbs(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	n := f.count()
	attr := AHAttr{GRH: true, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x12345,
		DGID: gidFromAddr(netip.MustParseAddr("192.0.2.2")), DMAC: [6]byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}}
	ah, err := d.CreateAH(pd, attr, false)
	if err != nil {
		t.Fatal(err)
	}
	ops := opsOf(f.since(n))
	if len(ops) != 2 || ops[0] != cqpOpManageARP || ops[1] != cqpOpCreateAddrHandle {
		t.Fatalf("ops %x", ops)
	}
	w := f.since(n)[1]
	want := cqpWQE{
		0: 0x0211_2233_4455_0000, // netdev MAC << 16
		1: uint64(pd.ID())<<48 | 0x20<<32,
		2: 1<<48 | 64<<32 | 0x12345, // ARP index 1 | hop limit | flow label
		4: 0xc000_0202, 6: 0xc000_0201,
		3: 0x0800_001c_0000_0000 | uint64(ah.ID()),
	}
	checkWQE(t, "kernel AH", cqpWQE(w.Q), want)
	if ah.ID() != 1 {
		t.Errorf("AH index %d (0 reserved)", ah.ID())
	}
	if q := d.QueryAH(ah); q.DGID != attr.DGID || q.HopLimit != 64 || q.FlowLabel != 0x12345 || !q.GRH {
		t.Errorf("query %+v", q)
	}
	// Two identical user AHs share one hardware AH.
	n = f.count()
	u1, _ := d.CreateAH(pd, attr, true)
	u2, _ := d.CreateAH(pd, attr, true)
	if u1.ID() != u2.ID() || len(f.wqesOp(cqpOpCreateAddrHandle)) != 2 {
		t.Errorf("shared user AH: %d %d, %d creates", u1.ID(), u2.ID(), len(f.wqesOp(cqpOpCreateAddrHandle)))
	}
	_ = d.DestroyAH(u1)
	if len(f.wqesOp(cqpOpDestroyAddrHandle)) != 0 {
		t.Error("shared AH destroyed with a user left")
	}
	_ = d.DestroyAH(u2)
	if len(f.wqesOp(cqpOpDestroyAddrHandle)) != 1 {
		t.Error("last user did not destroy")
	}
	// IPv6 multicast destination: loopback and the 33:33 MAC in the ARP
	// table (irdma_setup_ah).
	a6 := AHAttr{GRH: true, SGIDIndex: 2, DGID: gidFromAddr(netip.MustParseAddr("ff0e::1:2"))}
	n = f.count()
	ah6, err := d.CreateAH(pd, a6, false)
	if err != nil {
		t.Fatal(err)
	}
	arp := lastOp(t, f, n, cqpOpManageARP)
	c := lastOp(t, f, n, cqpOpCreateAddrHandle)
	if arp.Q[2] != 0x3333_0001_0002 || c.Q[3]&(1<<62) == 0 || c.Q[3]&(1<<59) != 0 || c.Q[5] != 0xff0e_0000_0000_0000 {
		t.Errorf("IPv6 mcast AH arp %#x create %#x", arp.Q, c.Q)
	}
	if _, err := d.CreateAH(pd, AHAttr{SGIDIndex: 7}, false); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("bad sgid: %v", err)
	}
	_ = d.DestroyAH(ah6)
	if err := d.DestroyAH(ah); err != nil {
		t.Error(err)
	}
	if err := d.DestroyAH(ah); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("double destroy: %v", err)
	}
}

func TestMcast(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	cq, _ := d.CreateCQ(CQAttr{CQE: 16})
	var qps []*QP
	for range 9 {
		q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		qps = append(qps, q)
	}
	gid := gidFromAddr(netip.MustParseAddr("239.1.2.3"))
	n := f.count()
	if err := d.AttachMcast(qps[0], gid); err != nil {
		t.Fatal(err)
	}
	cw := lastOp(t, f, n, cqpOpCreateMcastGrp)
	if cw.Q[0] != 0x0100_5e01_0203 || cw.Q[6] != 0xef01_0203 || cw.Q[3]&(1<<60) == 0 || cw.Q[2]&0x3ff != 7 {
		t.Errorf("CREATE_MCAST_GRP %#x", cw.Q)
	}
	if v := d.load64(hostmem.IOVA(cw.Q[4])); v != 1<<31|uint64(qps[0].ID()) {
		t.Errorf("MG ctx[0] %#x", v)
	}
	n = f.count()
	_ = d.AttachMcast(qps[0], gid) // already a member: no command
	if f.count() != n {
		t.Errorf("re-attach issued %x", opsOf(f.since(n)))
	}
	for _, q := range qps[1:8] {
		if err := d.AttachMcast(q, gid); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(f.wqesOp(cqpOpModifyMcastGrp)); got != 7 {
		t.Errorf("%d MODIFY_MCAST_GRP", got)
	}
	if err := d.AttachMcast(qps[8], gid); !errors.Is(err, syscall.ENOMEM) {
		t.Errorf("9th QP: %v", err)
	}
	// qps[0] was attached twice: the first detach only drops a use.
	_ = d.DetachMcast(qps[0], gid)
	n = f.count()
	_ = d.DetachMcast(qps[0], gid)
	mw := lastOp(t, f, n, cqpOpModifyMcastGrp)
	for i := range 8 {
		v := d.load64(hostmem.IOVA(mw.Q[4] + 8*uint64(i)))
		if (i < 7) != (v != 0) || (v != 0 && uint32(v&0x3ffff) == qps[0].ID()) {
			t.Errorf("MG ctx[%d] = %#x", i, v)
		}
	}
	for _, q := range qps[1:7] {
		_ = d.DetachMcast(q, gid)
	}
	n = f.count()
	_ = d.DetachMcast(qps[7], gid)
	if ops := opsOf(f.since(n)); len(ops) != 1 || ops[0] != cqpOpDestroyMcastGrp {
		t.Errorf("last detach %x", ops)
	}
	if err := d.DetachMcast(qps[7], gid); err != nil {
		t.Errorf("unknown group: %v", err)
	}
	// A destroyed QP leaves its groups.
	_ = d.AttachMcast(qps[1], gid)
	_ = d.DestroyQP(qps[1])
	if len(d.mcList) != 0 {
		t.Error("group left behind")
	}
}

func TestHWStats(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	g := f.wqesOp(cqpOpManageStats)
	if len(g) != 1 || g[0].Q[3] != 0x4000_002d_0000_0000 {
		t.Fatalf("MANAGE_STATS alloc %#x", g)
	}
	f.gather = []uint64{0xff_fff0 << 32, 1000}
	st, err := d.GetHWStats()
	if err != nil {
		t.Fatal(err)
	}
	w := f.wqesOp(cqpOpGatherStats)
	if len(w) != 1 || w[0].Q[3] != 0x2000_002e_0000_0005 { // stats instance 5 from OP_RETVAL
		t.Fatalf("GATHER_STATS %#x", w)
	}
	byName := func(st []HWStat, n string) uint64 {
		for _, s := range st {
			if s.Name == n {
				return s.Value
			}
		}
		t.Fatalf("no stat %s", n)
		return 0
	}
	if byName(st, "rxVlanErrors") != 0xfffff0 || byName(st, "ip4InOctets") != 1000 {
		t.Errorf("first gather %+v", st[:3])
	}
	// The 24-bit counter wraps: 0xfffff0 → 0x10 is +0x20.
	f.gather = []uint64{0x10 << 32, 1500}
	st, _ = d.GetHWStats()
	if byName(st, "rxVlanErrors") != 0xfffff0+0x20 || byName(st, "ip4InOctets") != 1500 {
		t.Errorf("second gather vlan %#x octets %d", byName(st, "rxVlanErrors"), byName(st, "ip4InOctets"))
	}
	if len(st) != 46 {
		t.Errorf("%d counters", len(st))
	}
}

// TestAsyncEvents drives AEQEs through the interrupt path.
func TestAsyncEvents(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	var mu sync.Mutex
	var cqEvents []AsyncEvent
	cq, _ := d.CreateCQ(CQAttr{CQE: 16, EventHandler: func(_ *CQ, e AsyncEvent) {
		mu.Lock()
		cqEvents = append(cqEvents, e)
		mu.Unlock()
	}})
	qpEvents := make(chan AsyncEvent, 4)
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4},
		EventHandler: func(_ *QP, e AsyncEvent) { qpEvents <- e }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	n := f.count()
	// Remote access to a bad bound, reported on the RQ at WQE 5.
	f.injectAE(q.ID(), aeAMPBoundsViolation, aeSrcRQ, 5, q.ctx.QPComplCtx)
	ev := <-qpEvents
	if ev.Type != EventQPAccessErr || ev.AECode != aeAMPBoundsViolation {
		t.Errorf("event %+v", ev)
	}
	waitFor(t, func() bool { return q.State() == QPSErr })
	ops := opsOf(f.since(n))
	if len(ops) != 2 || ops[0] != cqpOpModifyQP || ops[1] != cqpOpFlushWQEs {
		t.Fatalf("ops %x", ops)
	}
	fl := f.since(n)[1].Q
	// RQ minor FLUSH_PROT_ERR (the AE came from the RQ), SQ minor GENERAL.
	if fl[2] != 0x0001_0001_0001_0002 {
		t.Errorf("flush codes %#x", fl[2])
	}
	ctx := make([]byte, 256)
	_ = d.mem.Read(hostmem.IOVA(q.ctxPA), ctx)
	if idx := le64(ctx, 128) >> 32 & 0x7fff; idx != 5 || le64(ctx, 0)&(1<<19) == 0 {
		t.Errorf("ERR_RQ_IDX %d qw0 %#x", idx, le64(ctx, 0))
	}
	waitFor(t, func() bool { return f.regv(regs.AEQALLOC) == 1 })
	// A CQ error.
	f.injectAE(cq.ID(), aeCQOperationError, aeSrcCQ, 0, cq.ctx>>1)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(cqEvents) == 1 })
	if cqEvents[0].Type != EventCQErr {
		t.Errorf("cq event %+v", cqEvents[0])
	}
	// An event for a QP that does not exist is consumed and ignored.
	f.injectAE(999, aeAMPBoundsViolation, aeSrcSQ, 0, 0)
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.aeq.head == 3 })
	_ = d.DestroyQP(q)
	if _, ae, err := d.DestroyCQ(cq); ae != 1 || err != nil {
		t.Errorf("async events %d %v", ae, err)
	}
}

func TestParseAEQE(t *testing.T) {
	// QP/CQ id 0x4_0005 (bit 18 from qw1 b46), WQE index 7, code 0x208,
	// source SQ, iWARP state 6, valid.
	qw1 := uint64(0x5) | 1<<46 | 7<<18 | 0x208<<34 | 5<<50 | 6<<54 | 1<<63
	i := parseAEQE(0x1234, qw1)
	if i.QPCQID != 0x40005 || i.WQEIdx != 7 || i.AECode != 0x208 || !i.QP || !i.SQ || i.IWState != 6 || i.ComplCtx != 0x1234 {
		t.Errorf("%+v", i)
	}
	i = parseAEQE(0x10, 3|0x203<<34|2<<50)
	if !i.CQ || i.QP || i.ComplCtx != 0x20 {
		t.Errorf("CQ AE %+v", i)
	}
	i = parseAEQE(0, 3|uint64(aeQPSuspendComplete)<<34)
	if !i.QP {
		t.Errorf("suspend AE not a QP event: %+v", i)
	}
	if c, e := aeToQPErr(aeIBInvalidRequest); c != flushRemInvReqErr || e != EventQPReqErr {
		t.Errorf("IB_INVALID_REQUEST → %d %d", c, e)
	}
	if c, _ := aeToQPErr(aeLLPTooManyRNRs); c != flushRNRRetryExcEr {
		t.Errorf("TOO_MANY_RNRS → %d", c)
	}
}

// TestResources: the counts of allocated objects leave out the reserved
// ids, follow every create and destroy, and refused creates leave nothing.
func TestResources(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	if r := d.Resources(); r != (Resources{}) {
		t.Fatalf("after bring-up %+v, want none", r)
	}
	pd := mustPD(t, d)
	cq, err := d.CreateCQ(CQAttr{CQE: 64})
	if err != nil {
		t.Fatal(err)
	}
	attr := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
	q, _, err := d.CreateQP(pd, attr)
	if err != nil {
		t.Fatal(err)
	}
	bad := attr
	bad.Cap.MaxInlineData = 102
	if _, _, err := d.CreateQP(pd, bad); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("refused create: %v", err)
	}
	mr, err := d.AllocMR(pd, 16)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := d.AllocMW(pd, 1)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := d.CreateAH(pd, AHAttr{GRH: true, SGIDIndex: 1, HopLimit: 64,
		DGID: gidFromAddr(netip.MustParseAddr("192.0.2.2")), DMAC: [6]byte{2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r, want := d.Resources(), (Resources{PDs: 1, CQs: 1, QPs: 1, MRs: 2, AHs: 1}); r != want {
		t.Errorf("with one of each: %+v, want %+v", r, want)
	}
	if err := d.DestroyAH(ah); err != nil {
		t.Fatal(err)
	}
	if err := d.DeallocMW(mw); err != nil {
		t.Fatal(err)
	}
	if err := d.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.DestroyCQ(cq); err != nil {
		t.Fatal(err)
	}
	if err := d.DeallocPD(pd); err != nil {
		t.Fatal(err)
	}
	if r := d.Resources(); r != (Resources{}) {
		t.Errorf("after the destroys %+v, want none", r)
	}
}

package driver

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

func mustPD(t *testing.T, d *Device) *PD {
	t.Helper()
	pd, err := d.AllocPD(false, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pd
}

func TestQueryVerbs(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	a, err := d.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.VendorID != 0x8086 || a.VendorPartID != 0x1592 || a.FWVer != 1<<32|60 || a.MaxQPWR != 4063 ||
		a.MaxSendSGE != 13 || a.MaxCQE != 1048574 || a.MaxQPRdAtom != 127 || a.MaxQPInitRdAtom != 255 ||
		a.MaxPKeys != 1 || a.MaxMcastQPAttach != 8 || a.TimestampMask != 0x1ffff || a.AtomicCap != 0 {
		t.Errorf("device attr %+v", a)
	}
	if a.SysImageGUID != [8]byte{0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55} {
		t.Errorf("guid %x", a.SysImageGUID)
	}
	// 256 QPs committed, 0/1/2 reserved.
	if a.MaxQP != 253 || a.MaxPD != 262144-3 {
		t.Errorf("max_qp %d max_pd %d", a.MaxQP, a.MaxPD)
	}
	p, err := d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if p.ActiveMTU != MTU1024 || p.MaxMTU != MTU4096 || p.State != PortActive || p.PhysState != PhysStateLinkUp ||
		p.GIDTblLen != 32 || p.PKeyTblLen != 1 || p.PortCapFlags != PortCapCMSup|PortCapReinitSup ||
		p.MaxMsgSz != 1<<31-1 || p.ActiveSpeed != 32 || p.ActiveWidth != 2 {
		t.Errorf("port attr %+v", p)
	}
	if _, err := d.QueryPort(2); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("port 2: %v", err)
	}
	gids := d.GIDTable()
	want := []string{"fe80::11:22ff:fe33:4455", "::ffff:192.0.2.1", "2001:db8::1"}
	if len(gids) != len(want) {
		t.Fatalf("%d GIDs", len(gids))
	}
	for i, w := range want {
		if got := netip.AddrFrom16(gids[i].GID).String(); got != w || gids[i].Type != GIDTypeRoCEv2 {
			t.Errorf("GID %d = %s type %d, want %s", i, got, gids[i].Type, w)
		}
	}
	if !gids[1].IPv4 || gids[2].IPv4 {
		t.Error("GID network types")
	}
	if pk, err := d.QueryPKey(1, 0); pk != 0xffff || err != nil {
		t.Errorf("pkey %#x %v", pk, err)
	}
	if _, err := d.QueryPKey(1, 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("pkey index 1: %v", err)
	}
	if _, err := d.QueryGID(1, 3); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("gid 3: %v", err)
	}
	nd := d.netdev.(*StaticNetdev)
	nd.Down = true
	if p, _ := d.QueryPort(1); p.State != PortDown || p.PhysState != PhysStateDisabled {
		t.Errorf("link down: %+v", p)
	}
	if ev := d.PortEvent(); ev.Type != EventPortErr {
		t.Errorf("port event %v", ev)
	}
	_, resp, err := d.AllocUContext(5, false)
	if err != nil || resp.KernelVer != 5 || resp.FeatureFlags != 3 || resp.MaxHWWQFrags != 13 ||
		resp.MaxHWSQChunk != 8 || resp.HWRev != 2 || resp.MinHWWQSize != 8 || resp.DBBarOffset != 0x7f0000 {
		t.Errorf("ucontext %+v %v", resp, err)
	}
	if _, _, err := d.AllocUContext(3, false); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ABI 3: %v", err)
	}
	if _, _, err := d.AllocUContext(5, true); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("legacy: %v", err)
	}
}

func TestPDAndCQVerbs(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	pd := mustPD(t, d)
	if pd.ID() != 3 {
		t.Errorf("first PD %d, want 3", pd.ID())
	}
	for _, c := range []struct {
		attr CQAttr
		want error
	}{
		{CQAttr{CQE: 0}, syscall.EINVAL},
		{CQAttr{CQE: 1048576}, syscall.EINVAL},
		{CQAttr{CQE: 8, Flags: 2}, syscall.EOPNOTSUPP},
	} {
		if _, err := d.CreateCQ(c.attr); !errors.Is(err, c.want) {
			t.Errorf("CreateCQ %+v: %v, want %v", c.attr, err, c.want)
		}
	}
	n := f.count()
	var events atomic.Int32
	cq, err := d.CreateCQ(CQAttr{CQE: 100, CompVector: 1, CompHandler: func(*CQ) { events.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	// irdma_create_cq GEN_2 kernel size: (100 + 2) × 2. Ids rotate
	// (irdma_alloc_rsrc's next pointer): the refused creates used 3 and 4.
	if cq.Size() != 204 || cq.CEQ() != 1 || cq.ID() != 5 {
		t.Errorf("cq size %d ceq %d id %d", cq.Size(), cq.CEQ(), cq.ID())
	}
	w := f.since(n)
	if len(w) != 1 || w[0].Op != cqpOpCreateCQ {
		t.Fatalf("ops %x", opsOf(w))
	}
	q := w[0].Q
	if q[0] != 204 || q[1] != cqCtxValue(5) || q[2] != 102 || q[4] != cq.ringPA || q[5] != cq.shadowPA ||
		q[3] != 0x0003_4003_0040_0005 {
		t.Errorf("CREATE_CQ %#x", q)
	}
	if cq.ringPA%256 != 0 {
		t.Errorf("ring PA %#x", cq.ringPA)
	}
	// Arm, complete, event: CEQE on CEQ 1 → vector 1 → handler, CQACK.
	if r, err := d.ReqNotifyCQ(cq, CQNextComp); r != 0 || err != nil {
		t.Fatal(r, err)
	}
	if f.regv(regs.CQARM) != 5 {
		t.Errorf("CQARM %d", f.regv(regs.CQARM))
	}
	f.completeOnCQ(5, [4]uint64{0, 0x9f00_0000_0000_0077, 0, 1 << 62})
	waitFor(t, func() bool { return events.Load() == 1 })
	waitFor(t, func() bool { return f.acked(5) })
	if v := f.regv(regs.GLINT_DYN_CTL(1)); v != 3 {
		t.Errorf("vector 1 not re-enabled: %#x", v)
	}
	// Missed-events report: a CQE is waiting.
	if r, _ := d.ReqNotifyCQ(cq, CQNextComp|CQReportMissedEvents); r != 1 {
		t.Errorf("report missed events = %d", r)
	}
	// Resize (kernel): (200+1) × 2 entries, MODIFY_CQ with CQRESIZE.
	n = f.count()
	if err := d.ResizeCQ(cq, 200, nil, 0); err != nil {
		t.Fatal(err)
	}
	m := f.since(n)
	if len(m) != 1 || m[0].Op != cqpOpModifyCQ || m[0].Q[0] != 402 || m[0].Q[3]&(1<<43) == 0 || m[0].Q[4] != cq.ringPA {
		t.Errorf("resize %x %#x", opsOf(m), m)
	}
	if err := d.ResizeCQ(cq, 1<<21, nil, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("resize too big: %v", err)
	}
	ce, _, err := d.DestroyCQ(cq)
	if err != nil || ce != 1 {
		t.Errorf("DestroyCQ events %d err %v", ce, err)
	}
	if _, _, err := d.DestroyCQ(cq); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("double destroy: %v", err)
	}
	if err := d.DeallocPD(pd); err != nil {
		t.Error(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCQDestroyScrubsCEQEs: a CEQE pending for a destroyed CQ is
// rewritten to just its valid bit (irdma_sc_cleanup_ceqes). No MSI-X
// vectors here, so nothing consumes the CEQ behind the test's back.
func TestCQDestroyScrubsCEQEs(t *testing.T) {
	f := newFakeHW(t, 0)
	d := openFake(t, f)
	cq, err := d.CreateCQ(CQAttr{CQE: 8})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := d.CreateCQ(CQAttr{CQE: 8})
	q := d.ceqs[0]
	f.mu.Lock()
	a0 := q.ring.at(int(f.ceqs[0].head) * ceqeSize)
	f.postCEQE(0, cq.ctx)
	f.postCEQE(0, other.ctx)
	f.mu.Unlock()
	if _, _, err := d.DestroyCQ(cq); err != nil {
		t.Fatal(err)
	}
	if v := d.load64(a0); v != 1<<63 {
		t.Errorf("scrubbed CEQE %#x, want only the valid bit", v)
	}
	if v := d.load64(a0 + 8); v != 1<<63|other.ctx {
		t.Errorf("other CQ's CEQE %#x", v)
	}
	// Processing skips the zero context and delivers the other event.
	var got atomic.Int32
	other.compHandler = func(*CQ) { got.Add(1) }
	d.processCEQ(q)
	if got.Load() != 1 {
		t.Errorf("%d events", got.Load())
	}
}

func TestQPVerbsAndErrnos(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	pd := mustPD(t, d)
	cq, _ := d.CreateCQ(CQAttr{CQE: 64})
	base := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}}
	bad := []struct {
		mod  func(*QPInitAttr)
		want error
	}{
		{func(a *QPInitAttr) { a.Cap.MaxInlineData = 102 }, syscall.EINVAL},
		{func(a *QPInitAttr) { a.Cap.MaxSendSGE = 14 }, syscall.EINVAL},
		{func(a *QPInitAttr) { a.Cap.MaxRecvSGE = 14 }, syscall.EINVAL},
		{func(a *QPInitAttr) { a.Cap.MaxSendWR = 4064 * 8 }, syscall.EINVAL},
		{func(a *QPInitAttr) { a.CreateFlags = 1 }, syscall.EOPNOTSUPP},
		{func(a *QPInitAttr) { a.Type = 3 }, syscall.EOPNOTSUPP}, // UC
	}
	n := f.count()
	for i, b := range bad {
		a := base
		b.mod(&a)
		if _, _, err := d.CreateQP(pd, a); !errors.Is(err, b.want) {
			t.Errorf("case %d: %v, want %v", i, err, b.want)
		}
	}
	if f.count() != n {
		t.Errorf("refused creates issued %x", opsOf(f.since(n)))
	}
	n = f.count()
	q, resp, err := d.CreateQP(pd, base)
	if err != nil {
		t.Fatal(err)
	}
	// QP 3 (0..2 reserved); WS tree first (root, VSI node, leaf add +
	// enable), then CREATE_QP, whose context carries the leaf's QS handle:
	// irdma_create_qp calls dev->ws_add and irdma_qp_add_qos before
	// irdma_roce_fill_and_set_qpctx_info.
	if q.ID() < 3 || resp.QPCaps != capWriteWithImm|capSendWithImm|capRoCE|capPushMode {
		t.Errorf("qp %d caps %#x", q.ID(), resp.QPCaps)
	}
	ops := opsOf(f.since(n))
	want := []uint8{cqpOpWorkSchedNode, cqpOpWorkSchedNode, cqpOpWorkSchedNode, cqpOpWorkSchedNode, cqpOpCreateQP}
	if string(ops) != string(want) {
		t.Errorf("create ops %x, want %x", ops, want)
	}
	if q.ctx.QSHandle == 0 || q.ctx.QSHandle != d.ws.qos[0].qsHandle {
		t.Errorf("create context QS handle %d, leaf's %d", q.ctx.QSHandle, d.ws.qos[0].qsHandle)
	}
	cw := f.since(n)[4].Q
	if cw[3] != 0x100b_8000_0000_0000|uint64(q.ID()) || cw[2] != q.ctxPA || cw[5] != q.shadowPA || q.ctxPA != q.q2ctx.pa+256 {
		t.Errorf("CREATE_QP %#x", cw)
	}
	// Kernel sizing (irdma_setup_kmode_qp): SQ shift 1 (3 SGEs), depth
	// roundup_pow2(16·2 + 258) = 512; RQ shift 1, depth 64.
	if q.sizes.SQDepth != 512 || q.sizes.RQDepth != 64 || q.cap.MaxSendWR != 127 || q.cap.MaxRecvWR != 31 {
		t.Errorf("sizes %+v cap %+v", q.sizes, q.cap)
	}
	if q.shadowPA != q.kmem.pa+(512+64)*32 {
		t.Errorf("shadow at %#x", q.shadowPA-q.kmem.pa)
	}
	// The context in host memory carries the QS handle after the modify
	// (irdma_qp_add_qos); before it, the pre-tree handle.
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSInit, QPAccessFlags: AccessRemoteRead}, QPAttrState|mPKey|mPort|mAcc); err != nil {
		t.Fatal(err)
	}
	ctx := make([]byte, 256)
	_ = d.mem.Read(hostmem.IOVA(q.ctxPA), ctx)
	if qs := le64(ctx, 176) >> 16 & 0x3ff; qs != 7 {
		t.Errorf("QSHANDLE %d, want 7 (the leaf's OP_RETVAL)", qs)
	}
	if mss := le64(ctx, 48) >> 16 & 0x3fff; mss != 1024 {
		t.Errorf("SNDMSS %d (MTU 1500 → 1024)", mss)
	}
	// Modify errnos before the CQP.
	n = f.count()
	for _, c := range []struct {
		attr QPAttr
		mask QPAttrMask
		want error
	}{
		{QPAttr{QPState: QPSInit}, QPAttrState | 1<<22, syscall.EOPNOTSUPP},
		{QPAttr{PKeyIndex: 1}, mPKey, syscall.EINVAL},
		{QPAttr{MaxDestRdAtomic: 128}, mDestRd, syscall.EINVAL},
		{QPAttr{AH: AHAttr{SGIDIndex: 9}}, mAV, syscall.EINVAL},
		{QPAttr{PathMTU: 9}, mMTU, syscall.EINVAL},
		{QPAttr{QPState: QPSRTS}, QPAttrState, syscall.EINVAL},
	} {
		if err := d.ModifyQP(q, &c.attr, c.mask); !errors.Is(err, c.want) {
			t.Errorf("modify %#x: %v, want %v", c.mask, err, c.want)
		}
	}
	if f.count() != n {
		t.Errorf("refused modifies issued %x", opsOf(f.since(n)))
	}
	// INIT → RTR with an IPv4 AV: MANAGE_ARP for the dmac, the context
	// gets ARPIDX, addresses in driver word order, the UDP source port.
	n = f.count()
	attr := fullAttr(QPSRTR)
	attr.AH.FlowLabel = 0
	if err := d.ModifyQP(q, attr, QPAttrState|mAV|mMTU|mDQPN|mRQPSN|mDestRd|mRNRT); err != nil {
		t.Fatal(err)
	}
	arps := 0
	for _, w := range f.since(n) {
		if w.Op == cqpOpManageARP {
			arps++
			if w.Q[2] != 0x02aa_bbcc_ddee || w.Q[3] != 0x0000_0c0f_0000_0001 {
				t.Errorf("MANAGE_ARP %#x", w.Q)
			}
		}
	}
	if arps != 1 {
		t.Errorf("%d MANAGE_ARP", arps)
	}
	_ = d.mem.Read(hostmem.IOVA(q.ctxPA), ctx)
	if le64(ctx, 32) != 0xc000_0202 || le64(ctx, 184) != 0xc000_0201 || le64(ctx, 0)&8 == 0 {
		t.Errorf("addresses %#x %#x qw0 %#x", le64(ctx, 32), le64(ctx, 184), le64(ctx, 0))
	}
	if arp := le64(ctx, 48) >> 48; arp != 1 {
		t.Errorf("ARPIDX %d", arp)
	}
	if sp := uint16(le64(ctx, 24) >> 32); sp != udpSrcPort(0, q.ID(), 0x34) || sp < 0xc000 {
		t.Errorf("src port %#x", sp)
	}
	if v := le64(ctx, 64); v != 0x34 { // DESTQP; QKEY not in the RC mask
		t.Errorf("QKEY/DESTQP %#x", v)
	}
	// Query returns the cached values, no CQP.
	n = f.count()
	qa, qi := d.QueryQP(q)
	if qa.QPState != QPSRTR || qa.PathMTU != MTU1024 || qa.DestQPNum != 0x34 || qa.RQPSN != 0x200 ||
		qa.MaxDestRdAtomic != 16 || qi.SendCQ != cq || f.count() != n {
		t.Errorf("query %+v", qa)
	}
	// The same destination again: no new ARP op.
	n = f.count()
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSRTS, SQPSN: 5, MaxRdAtomic: 8, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		QPAttrState|mTO|mRetry|mRNR|mSQPSN|mRd); err != nil {
		t.Fatal(err)
	}
	if ops := opsOf(f.since(n)); len(ops) != 1 || ops[0] != cqpOpModifyQP {
		t.Errorf("RTS ops %x", ops)
	}
	// A CQ bound to a QP and a PD in use cannot go.
	if _, _, err := d.DestroyCQ(cq); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("destroy bound CQ: %v", err)
	}
	if err := d.DeallocPD(pd); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("dealloc busy PD: %v", err)
	}
	// Destroy from RTS: modify to error + flush, then DESTROY_QP, then the
	// WS tree goes (leaf, VSI node, root).
	n = f.count()
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	ops = opsOf(f.since(n))
	want = []uint8{cqpOpModifyQP, cqpOpFlushWQEs, cqpOpDestroyQP, cqpOpWorkSchedNode, cqpOpWorkSchedNode, cqpOpWorkSchedNode}
	if string(ops) != string(want) {
		t.Errorf("destroy ops %x, want %x", ops, want)
	}
	// GSI is QP 1, only once; UD QPs come from the bitmap.
	g, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeGSI, SendCQ: cq, RecvCQ: cq, Cap: base.Cap})
	if err != nil || g.ID() != 1 {
		t.Fatalf("GSI %v %v", g, err)
	}
	if _, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeGSI, SendCQ: cq, RecvCQ: cq, Cap: base.Cap}); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("second GSI: %v", err)
	}
	u, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: base.Cap})
	if err != nil || u.ID() < 3 || u.hwType != qpTypeRoCEUD || g.hwType != qpTypeRoCEUD {
		t.Errorf("UD %v %v", u, err)
	}
	_ = d.DestroyQP(u)
	_ = d.DestroyQP(g)
	if _, _, err := d.DestroyCQ(cq); err != nil {
		t.Error(err)
	}
	if err := d.DeallocPD(pd); err != nil {
		t.Error(err)
	}
}

// TestCQPErrorsAndTimeout: an error CCQE is -EIO wrapped in a CQPError
// with the codes; a command that never completes is -ETIMEDOUT on the
// injected clock.
func TestCQPErrorsAndTimeout(t *testing.T) {
	f := newFakeHW(t, 2)
	clk := timing.NewManual()
	d := openFake(t, f, withClock(clk))
	f.fail[cqpOpCreateCQ] = [2]uint16{0xf001, 0x12}
	_, err := d.CreateCQ(CQAttr{CQE: 8})
	var ce *CQPError
	if !errors.Is(err, syscall.EIO) || !errors.As(err, &ce) || ce.Major != 0xf001 || ce.Minor != 0x12 || ce.Opcode != cqpOpCreateCQ {
		t.Fatalf("CreateCQ: %v", err)
	}
	if d.cqIDs.test(3) {
		t.Error("CQ id kept after failure")
	}
	delete(f.fail, cqpOpCreateCQ)
	f.hang[cqpOpCreateCQ] = true
	done := make(chan error, 1)
	go func() { _, err := d.CreateCQ(CQAttr{CQE: 8}); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("returned %v before the clock moved", err)
	case <-time.After(30 * time.Millisecond):
	}
	clk.Advance(3 * time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ETIMEDOUT) {
			t.Fatalf("CreateCQ: %v, want ETIMEDOUT", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no timeout")
	}
	// Un-hang: the stuck WQE completes; later commands work again.
	delete(f.hang, cqpOpCreateCQ)
	f.Write32(regs.CQPDB, 0)
	if _, err := d.AllocPD(false, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateCQ(CQAttr{CQE: 8}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

package driver

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// These tests bring the driver up on the real device model (emu/device)
// through the hardware interface only, and check the device's view of
// what each verb programmed with the device's own accessors (tests may;
// the driver may not).

// recHW wraps a HW and records every CQP WQE at its doorbell, reading the
// ring the driver published through CCQPHIGH/LOW like the device does.
type recHW struct {
	HW
	mu     sync.Mutex
	ring   uint64
	head   uint32
	wqes   []fakeWQE
	dbells int
}

func (r *recHW) Write32(off regs.Offset, v uint32) {
	r.mu.Lock()
	switch off {
	case regs.CCQPLOW:
		hi := r.HW.Read32(regs.CCQPHIGH)
		pa := uint64(hi)<<32 | uint64(v)
		if pa != 0 {
			ring, _ := r.Mem().Load64(hostmem.IOVA(pa + 8))
			r.ring, r.head = ring, 0
		}
	case regs.CQPDB:
		r.dbells++
		for r.head != v && r.ring != 0 {
			var w fakeWQE
			w.Idx = r.head
			for i := range 8 {
				w.Q[i], _ = r.Mem().Load64(hostmem.IOVA(r.ring + uint64(r.head)*64 + 8*uint64(i)))
			}
			w.Q[3] &^= 1 << 63
			w.Op = uint8(w.Q[3]>>32) & 0x3f
			r.wqes = append(r.wqes, w)
			r.head = (r.head + 1) % cqpSQSize
		}
	}
	r.mu.Unlock()
	r.HW.Write32(off, v)
}

func (r *recHW) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.wqes)
}

func (r *recHW) since(n int) []fakeWQE {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fakeWQE(nil), r.wqes[n:]...)
}

type realEnv struct {
	dev *device.Device
	rec *recHW
	d   *Device
}

func openReal(t *testing.T, cfg Config) *realEnv {
	t.Helper()
	dev, err := device.New(device.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recHW{HW: dev}
	if cfg.Netdev == nil {
		cfg.Netdev = testNetdev()
	}
	if cfg.CQPTimeout == 0 {
		cfg.CQPTimeout = 5 * time.Second
	}
	d, err := Open(rec, cfg)
	if err != nil {
		_ = dev.Close()
		t.Fatalf("Open on emu/device: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("driver Close: %v", err)
		}
		if err := dev.Close(); err != nil {
			t.Errorf("device Close: %v", err)
		}
	})
	return &realEnv{dev: dev, rec: rec, d: d}
}

// TestIntegrationTwoDevices brings two devices up with default limits and
// tears them down cleanly: every driver DMA region released, every
// goroutine gone.
func TestIntegrationTwoDevices(t *testing.T) {
	before := runtime.NumGoroutine()
	var devs []*device.Device
	var drvs []*Device
	for range 2 {
		dev, err := device.New(device.Config{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Open(dev, Config{Netdev: testNetdev()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		devs, drvs = append(devs, dev), append(drvs, d)
	}
	for i, d := range drvs {
		a, err := d.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		objs, sds := d.HMCLayout()
		if a.MaxQP != objs[hmcQP].Count-3 || sds == 0 {
			t.Errorf("device %d: max_qp %d, HMC QPs %d, %d SDs", i, a.MaxQP, objs[hmcQP].Count, sds)
		}
		t.Logf("device %d: %d QPs, %d CQs, %d MRs, %d PBLEs, %d SDs, %d CEQs", i, objs[hmcQP].Count,
			objs[hmcCQ].Count, objs[hmcMR].Count, objs[hmcPBLE].Count, sds, d.NumCompVectors())
	}
	for i := range drvs {
		if err := drvs[i].Close(); err != nil {
			t.Errorf("driver %d Close: %v", i, err)
		}
		if n := devs[i].Mem().NumRegions(); n != 0 {
			t.Errorf("device %d: %d regions left after driver Close", i, n)
		}
		if st := devs[i].Stats(); st.CQP.Errors != 0 {
			t.Errorf("device %d: %d CQP errors", i, st.CQP.Errors)
		}
		if err := devs[i].Close(); err != nil {
			t.Errorf("device %d Close: %v", i, err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after", before, n)
	}
}

func allocPages(t *testing.T, m *hostmem.Memory, n int, align uint64, scatter bool) []uint64 {
	t.Helper()
	step := uint64(4096)
	size := n * 4096
	if scatter {
		step, size = 8192, 2*n*4096
	}
	r, err := m.Alloc(size, align, "user-buf")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(r.IOVA()) + uint64(i)*step
	}
	return out
}

// TestIntegrationVerbs exercises every verb on the real device and checks
// what the device recorded.
func TestIntegrationVerbs(t *testing.T) {
	e := openReal(t, Config{MSIXVectors: 2})
	d, dev := e.d, e.dev
	mem := dev.Mem()

	// Device, port, GID, P_Key.
	a, err := d.QueryDevice()
	if err != nil || a.MaxQP == 0 || a.MaxCQE != 1048574 {
		t.Fatalf("QueryDevice %+v %v", a, err)
	}
	if p, err := d.QueryPort(1); err != nil || p.ActiveMTU != MTU1024 {
		t.Fatalf("QueryPort %+v %v", p, err)
	}

	pd := mustPD(t, d)

	// Kernel CQ with a completion handler; the device posts a CQE after
	// the driver armed it: CEQE → MSI-X → handler.
	var events atomic.Int32
	kcq, err := d.CreateCQ(CQAttr{CQE: 64, CompVector: 1, CompHandler: func(*CQ) { events.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	dcq := dev.CQs().Get(kcq.ID())
	if dcq == nil {
		t.Fatal("device has no CQ")
	}
	if c := dcq.Config(); c.Ctx != kcq.ctx || c.CEQ != 1 || !c.CEQValid || !c.CheckOverflow || c.Ring.Size != kcq.Size() {
		t.Errorf("device CQ config %+v", c)
	}
	if _, err := d.ReqNotifyCQ(kcq, CQNextComp); err != nil {
		t.Fatal(err)
	}
	if err := dcq.Post(&cq.CQE{QPCtx: 0x9f00_0000_0000_0099, SQ: true, Op: 3}); err != nil {
		t.Fatalf("device Post: %v", err)
	}
	waitFor(t, func() bool { return events.Load() == 1 })
	if err := d.ResizeCQ(kcq, 500, nil, 0); err != nil {
		t.Fatalf("ResizeCQ: %v", err)
	}
	if c := dev.CQs().Get(kcq.ID()).Config(); c.Ring.Size != 1002 {
		t.Errorf("device ring after resize %d", c.Ring.Size)
	}

	// RC QP through RESET → INIT → RTR → RTS.
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: kcq, RecvCQ: kcq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}})
	if err != nil {
		t.Fatal(err)
	}
	dq := dev.QPs().Get(q.ID())
	if dq == nil || dq.State() != qp.State(qpHWStateIdle) {
		t.Fatalf("device QP %v", dq)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatalf("modify →%s: %v", s, err)
		}
		want := map[QPState]uint8{QPSInit: qpHWStateIdle, QPSRTR: qpHWStateRTR, QPSRTS: qpHWStateRTS}[s]
		if got := dq.State(); got != qp.State(want) {
			t.Errorf("device state after →%s: %v", s, got)
		}
	}
	at := dq.Attrs()
	if at.DestQP != 0x34 || at.MTU != 1024 || at.EPSN != 0x200 || at.PSNNext != 0x100 || !at.IPv4 || at.PD != pd.ID() ||
		at.SendCQ != kcq.ID() || at.SrcPort < 0xc000 || at.DestPort != 4791 || at.CompletionCtx != q.ctx.QPComplCtx ||
		at.LocalMAC != d.mac() || at.ORD != 16 || at.QSHandle != q.ctx.QSHandle {
		t.Errorf("device QP attrs %+v", at)
	}
	if mac, ok := dev.AHs().ARP(uint32(at.ARPIdx)); !ok || mac != fullAttr(0).AH.DMAC {
		t.Errorf("ARP %d = %x %v", at.ARPIdx, mac, ok)
	}
	// SQD: the device must answer with QP_SUSPEND_COMPLETE.
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSSQD}, QPAttrState); err != nil {
		t.Errorf("RTS → SQD: %v (needs AE 0x0900 from the device)", err)
	} else if dq.State() != qp.State(qpHWStateClosing) {
		t.Errorf("device state after SQD %v", dq.State())
	}
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSErr}, QPAttrState); err != nil {
		t.Fatalf("→ERR: %v", err)
	}
	if dq.State() != qp.State(qpHWStateError) {
		t.Errorf("device state after ERR %v", dq.State())
	}
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if dev.QPs().Get(q.ID()) != nil {
		t.Error("device still has the QP")
	}

	// UD and GSI QPs.
	for _, ty := range []QPType{QPTypeUD, QPTypeGSI} {
		u, _, err := d.CreateQP(pd, QPInitAttr{Type: ty, SendCQ: kcq, RecvCQ: kcq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatalf("create type %d: %v", ty, err)
		}
		for _, s := range pathTo[QPSRTS] {
			if err := d.ModifyQP(u, fullAttr(s), kernelTable[transKey(u.State(), s)][qpTypeCol(ty)][0]|QPAttrState); err != nil {
				t.Fatalf("type %d →%s: %v", ty, s, err)
			}
		}
		du := dev.QPs().Get(u.ID())
		if du == nil || du.State() != qp.State(qpHWStateRTS) || du.Attrs().QKey != 0x11111111 {
			t.Errorf("type %d device QP %v", ty, du)
		}
		if err := d.DestroyQP(u); err != nil {
			t.Fatal(err)
		}
	}

	// Memory: level 0, level 1, level 2 (forced small PBLE chunks), phys,
	// DMA, fast-register MR, windows.
	check := func(m *MR, level mr.PBLLevel) mr.Record {
		t.Helper()
		r, ok := dev.MRs().Get(m.LKey() >> 8)
		// ALLOC_STAG carries no key (FAST_REG supplies it): compare the index.
		if !ok || r.PD != pd.ID() || r.Level != level || r.STag>>8 != m.LKey()>>8 || (!m.fastReg && r.STag != m.LKey()) {
			t.Errorf("device MR %+v ok %v (want level %d)", r, ok, level)
		}
		return r
	}
	acc := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead
	contig := allocPages(t, mem, 4, 0, false)
	m0, err := d.RegUserMR(pd, nil, 0x7000_0000_1000, 4*4096, 0x7000_0000_1000, acc, contig, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	if r := check(m0, mr.Level0); r.Addr != contig[0] || r.Length != 4*4096 || r.VA != 0x7000_0000_1000 || !r.RemoteAccess {
		t.Errorf("level-0 record %+v", r)
	}
	sc := allocPages(t, mem, 9, 0, true)
	m1, err := d.RegUserMR(pd, nil, 0x7000_0000_0000, 9*4096, 0x7000_0000_0000, acc, sc, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	if r := check(m1, mr.Level1); r.Addr != uint64(m1.palloc.l1.idx) {
		t.Errorf("level-1 record %+v", r)
	}
	var spans []mr.Span
	spans, err = dev.MRs().Translate(m1.LKey(), pd.ID(), 0, 0x7000_0000_0000+4096, 100, mr.AccessLocalWrite, false, spans)
	if err != nil || len(spans) == 0 || uint64(spans[0].IOVA) != sc[1] {
		t.Errorf("device translation through our PBLEs: %v %v", spans, err)
	}
	saved := d.pble
	d.pble = &pblePool{d: d, base: saved.base, cnt: saved.cnt, nextFPM: saved.nextFPM, limitFPM: saved.limitFPM, maxChunk: 512}
	sc2 := allocPages(t, mem, 600, 0, true)
	m2, err := d.RegUserMR(pd, nil, 0x6000_0000_0000, 600*4096, 0x6000_0000_0000, acc, sc2, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	check(m2, mr.Level2)
	spans, err = dev.MRs().Translate(m2.LKey(), pd.ID(), 0, 0x6000_0000_0000+599*4096, 8, mr.AccessLocalWrite, false, spans[:0])
	if err != nil || len(spans) == 0 || uint64(spans[0].IOVA) != sc2[599] {
		t.Errorf("level-2 translation: %v %v", spans, err)
	}
	for _, m := range []*MR{m0, m1, m2} {
		if err := d.DeregMR(m); err != nil {
			t.Fatalf("DeregMR: %v", err)
		}
		if r, ok := dev.MRs().Get(m.LKey() >> 8); ok && r.State != 0 {
			t.Errorf("record after dereg %+v", r)
		}
	}
	d.pble = saved
	phys, err := d.RegPhysMR(pd, contig[0], 4096, AccessLocalWrite, 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	check(phys, mr.Level0)
	upd, _ := d.AllocPD(false, PDUnsafeGlobalRKey)
	if dma, err := d.GetDMAMR(upd, AccessLocalWrite); err != nil {
		t.Errorf("DMA MR: %v", err)
	} else {
		_ = d.DeregMR(dma)
	}
	fr, err := d.AllocMR(pd, 32)
	if err != nil {
		t.Fatal(err)
	}
	if r := check(fr, mr.Level0); !r.FastReg || r.MaxLength != 32*4096 {
		t.Errorf("fast-reg record %+v", r)
	}
	for _, ty := range []uint8{1, 2} {
		w, err := d.AllocMW(pd, ty)
		if err != nil {
			t.Fatalf("AllocMW %d: %v", ty, err)
		}
		if r, ok := dev.MRs().Get(w.RKey() >> 8); !ok || r.PD != pd.ID() {
			t.Errorf("MW record %+v", r)
		}
		if err := d.DeallocMW(w); err != nil {
			t.Fatal(err)
		}
	}
	_ = d.DeregMR(phys)
	_ = d.DeregMR(fr)

	// Address handles, IPv4 and IPv6.
	for i, dst := range []string{"192.0.2.9", "2001:db8::9"} {
		ah, err := d.CreateAH(pd, AHAttr{GRH: true, SGIDIndex: uint8(1 + i), HopLimit: 9, DGID: gidFromAddr(netip.MustParseAddr(dst)),
			DMAC: [6]byte{2, 0, 0, 0, 0, byte(i)}}, false)
		if err != nil {
			t.Fatalf("CreateAH %s: %v", dst, err)
		}
		rec, ok := dev.AHs().AH(ah.ID())
		if !ok || rec.Dest() != netip.MustParseAddr(dst) || rec.PD != pd.ID() || rec.HopLimit != 9 || rec.IPv4 != (i == 0) {
			t.Errorf("device AH %+v ok %v", rec, ok)
		}
		if err := d.DestroyAH(ah); err != nil {
			t.Fatal(err)
		}
		if _, ok := dev.AHs().AH(ah.ID()); ok {
			t.Error("AH still in the device")
		}
	}

	// Multicast.
	mq, _, _ := d.CreateQP(pd, QPInitAttr{Type: QPTypeUD, SendCQ: kcq, RecvCQ: kcq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	gid := gidFromAddr(netip.MustParseAddr("239.1.2.3"))
	if err := d.AttachMcast(mq, gid); err != nil {
		t.Fatalf("AttachMcast: %v", err)
	}
	ip, _ := ipWords(netip.MustParseAddr("239.1.2.3"))
	if _, g, ok := dev.AHs().LookupMG([4]uint32{0, 0, 0, ip[0]}, true); !ok || len(g.QPs(nil)) != 1 || g.QPs(nil)[0] != mq.ID() {
		t.Errorf("device MG %+v ok %v", g, ok)
	}
	if err := d.DetachMcast(mq, gid); err != nil {
		t.Fatalf("DetachMcast: %v", err)
	}
	_ = d.DestroyQP(mq)

	// Statistics.
	if st, err := d.GetHWStats(); err != nil || len(st) != len(gen2StatMap) {
		t.Errorf("GetHWStats %d %v", len(st), err)
	}

	// User CQ and QP over registered queue memory.
	uc, _, _ := d.AllocUContext(5, false)
	upd2, _ := d.AllocPD(true, 0)
	ring := allocPages(t, mem, 2, 0, true)
	if _, err := d.RegUserMR(upd2, uc, 0x10000, 8192, 0x10000, 0, ring, MemReg{Type: MemRegCQ, CQPages: 2}); err != nil {
		t.Fatal(err)
	}
	sh := allocPages(t, mem, 1, 0, false)
	if _, err := d.RegUserMR(upd2, uc, 0x20000, 64, 0x20000, 0, sh, MemReg{Type: MemRegCQ, CQPages: 1}); err != nil {
		t.Fatal(err)
	}
	ucq, err := d.CreateCQ(CQAttr{CQE: 126, User: &UserCQ{Ctx: uc, CQBuf: 0x10000, ShadowArea: 0x20000}})
	if err != nil {
		t.Fatalf("user CQ: %v", err)
	}
	if c := dev.CQs().Get(ucq.ID()).Config(); !c.Virtual || c.Shadow != hostmem.IOVA(sh[0]) {
		t.Errorf("device user CQ %+v", c)
	}
	qm := allocPages(t, mem, 5, 0, true)
	if _, err := d.RegUserMR(upd2, uc, 0x40000, 5*4096, 0x40000, 0, qm, MemReg{Type: MemRegQP, SQPages: 2, RQPages: 2}); err != nil {
		t.Fatal(err)
	}
	uq, _, err := d.CreateQP(upd2, QPInitAttr{Type: QPTypeRC, SendCQ: ucq, RecvCQ: ucq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8},
		User: &UserQP{Ctx: uc, UserWQEBufs: 0x40000, UserComplCtx: 0xabcdef}})
	if err != nil {
		t.Fatalf("user QP: %v", err)
	}
	if du := dev.QPs().Get(uq.ID()); du == nil || du.Attrs().CompletionCtx != 0xabcdef || du.Shadow() != hostmem.IOVA(qm[4]) {
		t.Errorf("device user QP %v", du)
	}
	_ = d.DestroyQP(uq)
	if _, _, err := d.DestroyCQ(ucq); err != nil {
		t.Error(err)
	}

	// An asynchronous event from the device: a CQ error.
	var cqErr atomic.Int32
	kcq.eventHandler = func(*CQ, AsyncEvent) { cqErr.Add(1) }
	if err := dev.Events().PostAE(cq.AEQE{Ctx: kcq.ctx, ID: kcq.ID(), Code: aeCQOperationError, Source: aeSrcCQ}); err != nil {
		t.Fatalf("PostAE: %v", err)
	}
	waitFor(t, func() bool { return cqErr.Load() == 1 })

	ce, ae, err := d.DestroyCQ(kcq)
	if err != nil || ce != 1 || ae != 1 {
		t.Errorf("DestroyCQ events %d/%d %v", ce, ae, err)
	}
	if dev.CQs().Get(kcq.ID()) != nil {
		t.Error("device still has the CQ")
	}
	if err := d.DeallocPD(pd); err != nil && !errors.Is(err, syscall.EBUSY) {
		t.Error(err)
	}
	// The only error completions: FLUSH_WQES with nothing pending
	// (0xFFFF, 0x8006), which irdma treats as non-critical.
	var errs uint64
	for op := range d.cqpErrs {
		n := d.cqpErrs[op].Load()
		errs += n
		if n != 0 && (op != int(cqpOpFlushWQEs) || d.cqpLastErr[op].Load() != 0xffff_8006) {
			t.Errorf("%d errors for CQP op %#x, last %#x", n, op, d.cqpLastErr[op].Load())
		}
	}
	if st := dev.Stats(); st.CQP.Errors != errs {
		t.Errorf("%d CQP errors on the device, %d CCQEs with ERROR seen", st.CQP.Errors, errs)
	}
}

// TestIntegrationStateMachine runs every ib_modify_qp_is_ok case of RC,
// UD and GSI against the real device: the device must accept every
// MODIFY_QP the driver issues (any CCQE error fails the modify).
func TestIntegrationStateMachine(t *testing.T) {
	e := openReal(t, Config{MSIXVectors: 2, QPLimit: 1024})
	runStateMachine(t, newSMEnvOn(t, e.d, e.rec))
	for op := range e.d.cqpErrs {
		if n := e.d.cqpErrs[op].Load(); n != 0 && (op != int(cqpOpFlushWQEs) || e.d.cqpLastErr[op].Load() != 0xffff_8006) {
			t.Errorf("%d errors for CQP op %#x, last %#x", n, op, e.d.cqpLastErr[op].Load())
		}
	}
}

// TestIntegrationQPAsyncError: a QP error event from the device moves the
// QP to error with the flush codes and raises the consumer's event.
func TestIntegrationQPAsyncError(t *testing.T) {
	e := openReal(t, Config{MSIXVectors: 2, QPLimit: 1024})
	d, dev := e.d, e.dev
	pd := mustPD(t, d)
	kcq, _ := d.CreateCQ(CQAttr{CQE: 16})
	evs := make(chan AsyncEvent, 2)
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: kcq, RecvCQ: kcq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4},
		EventHandler: func(_ *QP, ev AsyncEvent) { evs <- ev }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	n := e.rec.count()
	if err := dev.Events().PostAE(cq.AEQE{Ctx: q.ctx.QPComplCtx, ID: q.ID(), Code: aeLLPTooManyRetries, Source: aeSrcSQ, WQEIdx: 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-evs:
		if ev.Type != EventQPFatal || ev.AECode != aeLLPTooManyRetries {
			t.Errorf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no QP event")
	}
	waitFor(t, func() bool { return dev.QPs().Get(q.ID()).State() == qp.State(qpHWStateError) })
	var fl *fakeWQE
	for _, w := range e.rec.since(n) {
		if w.Op == cqpOpFlushWQEs {
			fl = &w
		}
	}
	// SQ minor FLUSH_RETRY_EXC_ERR (8): the AE came from the SQ.
	if fl == nil || fl.Q[2] != 0x0001_0008_0001_0001 {
		t.Errorf("flush %+v", fl)
	}
	_ = d.DestroyQP(q)
}

// TestIntegrationFlushCompletions posts sends and receives on a kernel RC QP,
// moves it to ERR (FLUSH_WQES) and polls: the device writes one flushed CQE
// per queue at the first outstanding WQE (GEN_2), which the uk layer expands
// into one WR_FLUSH_ERR completion per posted WR, in posting order
// (uk.c:irdma_uk_cq_poll_cmpl; docs/hw-datapath.md "How software consumes a
// CQE", "Flush generation").
func TestIntegrationFlushCompletions(t *testing.T) {
	e := openReal(t, Config{})
	d, dev := e.d, e.dev
	pd := mustPD(t, d)
	var handled atomic.Int32
	kcq, err := d.CreateCQ(CQAttr{CQE: 32, CompHandler: func(*CQ) { handled.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: kcq, RecvCQ: kcq,
		Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatalf("modify →%s: %v", s, err)
		}
	}
	pages := allocPages(t, dev.Mem(), 1, 0, false)
	m, err := d.RegUserMR(pd, nil, 0x5000_0000, 4096, 0x5000_0000, AccessLocalWrite, pages, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	before := dev.Stats().WQEAlloc
	for i := range 2 {
		wr := SendWR{WrID: uint64(0x100 + i), Opcode: uk.WRSend, Flags: uk.SendSignaled,
			SGList: []SGE{{Addr: 0x5000_0000, Length: 64, LKey: m.LKey()}}}
		if n, err := d.PostSend(q, []SendWR{wr}); n != 1 || err != nil {
			t.Fatalf("PostSend: %d %v", n, err)
		}
	}
	for i := range 3 {
		wr := RecvWR{WrID: uint64(0x200 + i), SGList: []SGE{{Addr: 0x5000_0000, Length: 4096, LKey: m.LKey()}}}
		if n, err := d.PostRecv(q, []RecvWR{wr}); n != 1 || err != nil {
			t.Fatalf("PostRecv: %d %v", n, err)
		}
	}
	// uk.c:irdma_uk_qp_post_wr rings WQEALLOC only while the hardware's
	// SQ tail (shadow area) lies inside the newly posted range: the first
	// post rings; with no data plane consuming, the second does not.
	if got := dev.Stats().WQEAlloc - before; got != 1 {
		t.Errorf("WQEALLOC doorbells %d, want 1", got)
	}
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSErr}, QPAttrState); err != nil {
		t.Fatalf("→ERR: %v", err)
	}
	var wcs []WorkCompletion
	deadline := time.Now().Add(2 * time.Second)
	for len(wcs) < 5 && time.Now().Before(deadline) {
		got, err := d.PollCQ(kcq, 8)
		if err != nil {
			t.Fatalf("PollCQ: %v", err)
		}
		wcs = append(wcs, got...)
		if len(got) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	var sq, rq []uint64
	for _, wc := range wcs {
		if wc.Status != uk.WCWRFlushErr || wc.QPNum != q.ID() {
			t.Errorf("completion %+v", wc)
		}
		if wc.Opcode&uk.WCRecv != 0 {
			rq = append(rq, wc.WrID)
		} else {
			sq = append(sq, wc.WrID)
		}
	}
	if len(sq) != 2 || sq[0] != 0x100 || sq[1] != 0x101 || len(rq) != 3 || rq[0] != 0x200 || rq[2] != 0x202 {
		t.Errorf("flushed wr_ids sq %#x rq %#x (all %+v)", sq, rq, wcs)
	}
	if more, _ := d.PollCQ(kcq, 8); len(more) != 0 {
		t.Errorf("extra completions %+v", more)
	}

	// Requests posted after the flush never reach the hardware: after
	// IRDMA_FLUSH_DELAY_MS software completes them as flushed
	// (irdma_generate_flush_completions) and runs the armed CQ's handler.
	if r, _ := d.ReqNotifyCQ(kcq, CQNextComp|CQReportMissedEvents); r != 0 {
		t.Errorf("missed events reported on an empty CQ")
	}
	for round, ids := range [][]uint64{{0x300, 0x301}, {0x302}} {
		for _, id := range ids {
			if n, err := d.PostSend(q, []SendWR{{WrID: id, Opcode: uk.WRRDMAWrite,
				SGList: []SGE{{Addr: 0x5000_0000, Length: 8, LKey: m.LKey()}}}}); n != 1 || err != nil {
				t.Fatalf("PostSend after flush: %d %v", n, err)
			}
		}
		if n, err := d.PostRecv(q, []RecvWR{{WrID: 0x400 + uint64(round)}}); n != 1 || err != nil {
			t.Fatalf("PostRecv after flush: %d %v", n, err)
		}
		if round == 0 {
			waitFor(t, func() bool { return handled.Load() == 1 })
		}
		var got []WorkCompletion
		waitFor(t, func() bool {
			w, _ := d.PollCQ(kcq, 8)
			got = append(got, w...)
			return len(got) >= len(ids)+1
		})
		for i, id := range ids {
			if w := got[i]; w.WrID != id || w.Status != uk.WCWRFlushErr || w.Opcode != uk.WCRDMAWrite || w.VendorErr != 1<<16|1 {
				t.Errorf("round %d generated SQ completion %+v", round, w)
			}
		}
		if w := got[len(ids)]; w.WrID != 0x400+uint64(round) || w.Status != uk.WCWRFlushErr || w.Opcode != uk.WCRecv {
			t.Errorf("round %d generated RQ completion %+v", round, w)
		}
		time.Sleep(2 * flushDelay)
		if more, _ := d.PollCQ(kcq, 8); len(got) != len(ids)+1 || len(more) != 0 {
			t.Errorf("round %d: duplicate completions %+v %+v", round, got, more)
		}
	}
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if err := d.DeregMR(m); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.DestroyCQ(kcq); err != nil {
		t.Fatal(err)
	}
}

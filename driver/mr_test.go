package driver

import (
	"errors"
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// pagesOf returns the 4 KB page IOVAs of a fresh region of n pages.
func pagesOf(t *testing.T, d *Device, n int, align uint64) []uint64 {
	t.Helper()
	r, err := d.mem.Alloc(n*4096, align, "test-buf")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(r.IOVA()) + uint64(i)*4096
	}
	return out
}

// scattered returns n pages from n separate regions (never contiguous).
func scattered(t *testing.T, d *Device, n int) []uint64 {
	t.Helper()
	r, err := d.mem.Alloc(2*n*4096, 0, "test-scatter")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(r.IOVA()) + uint64(2*i)*4096 // every other page
	}
	return out
}

func lastOp(t *testing.T, f *fakeHW, n int, op uint8) fakeWQE {
	t.Helper()
	ws := f.since(n)
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].Op == op {
			return ws[i]
		}
	}
	t.Fatalf("no op %#x in %x", op, opsOf(ws))
	return fakeWQE{}
}

func TestRegUserMR(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	pd := mustPD(t, d)
	acc := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead

	// Contiguous pages at a VA not congruent to the bus address beyond
	// 4 KB: 4 KB pages, level-1 PBLEs found contiguous and freed → level 0.
	pages := pagesOf(t, d, 5, 2<<20)
	va := uint64(0x7f00_0000_1000)
	n := f.count()
	mr, err := d.RegUserMR(pd, nil, va, 5*4096, va, acc, pages, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	w := lastOp(t, f, n, cqpOpRegMR)
	if mr.PageSize() != 4096 || mr.pblAllocated || w.Q[4] != pages[0] || w.Q[0] != va || w.Q[1]&(1<<46-1) != 5*4096 ||
		w.Q[3]>>44&3 != 0 || w.Q[3]>>48&0x1f != 0x0f || uint32(w.Q[2]) != mr.LKey()&0xffffffff {
		t.Errorf("level-0 REG_MR %#x (page %d)", w.Q, mr.PageSize())
	}
	if idx := (mr.LKey() & d.mrStagMask) >> 8; !d.mrIDs.test(idx) || idx == 0 {
		t.Errorf("stag %#x index %d not allocated", mr.LKey(), idx)
	}
	if mr.LKey() != mr.RKey() {
		t.Error("lkey != rkey")
	}
	// Identity VA on a 2 MB-aligned region: 2 MB pages (best page size).
	big := pagesOf(t, d, 1024, 2<<20)
	n = f.count()
	mr2, err := d.RegUserMR(pd, nil, big[0], 4<<20, big[0], acc, big, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpRegMR)
	if mr2.PageSize() < 2<<20 || w.Q[3]>>46&3 == 0 {
		t.Errorf("page size %d hdr %#x", mr2.PageSize(), w.Q[3])
	}
	// Scattered pages: level-1 PBLEs holding each page.
	sc := scattered(t, d, 7)
	n = f.count()
	mr3, err := d.RegUserMR(pd, nil, va, 7*4096, va, acc, sc, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpRegMR)
	if !mr3.pblAllocated || mr3.palloc.level != pbleLevel1 || w.Q[3]>>44&3 != 1 || w.Q[6] != uint64(mr3.palloc.l1.idx) || w.Q[4] != 0 {
		t.Fatalf("level-1 REG_MR %#x", w.Q)
	}
	for i, pg := range sc {
		if got := d.pble.read(mr3.palloc.l1.idx + uint32(i)); got != pg {
			t.Errorf("PBLE %d = %#x, want %#x", i, got, pg)
		}
	}
	// The fake device's SD for the PBLE's FPM address is the one we use.
	fpm := d.pble.base + uint64(mr3.palloc.l1.idx)*8
	if pa, ok := f.sds[uint32(fpm/hmcDirectBPSize)]; !ok || pa == 0 {
		t.Errorf("PBLE SD not programmed")
	}
	// Dereg: DEALLOC_STAG (MR bit), index and PBLEs freed.
	n = f.count()
	inUse := d.pble.inUse
	if err := d.DeregMR(mr3); err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpDeallocSTag)
	if w.Q[3]&(1<<43) == 0 || w.Q[2] != uint64(mr3.LKey()>>8)<<8 || d.pble.inUse != inUse-7 {
		t.Errorf("DEALLOC_STAG %#x, PBLEs %d→%d", w.Q, inUse, d.pble.inUse)
	}
	if d.mrIDs.test((mr3.LKey() & d.mrStagMask) >> 8) {
		t.Error("stag index not freed")
	}
	if err := d.DeregMR(mr3); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("double dereg: %v", err)
	}
	// Dereg failure keeps the MR.
	f.fail[cqpOpDeallocSTag] = [2]uint16{0xffff, 1}
	if err := d.DeregMR(mr); !errors.Is(err, syscall.EIO) {
		t.Errorf("failing dereg: %v", err)
	}
	delete(f.fail, cqpOpDeallocSTag)
	if err := d.DeregMR(mr); err != nil {
		t.Error(err)
	}
	_ = d.DeregMR(mr2)

	// Errnos.
	if _, err := d.RegUserMR(pd, nil, va, 1<<46, va, acc, pages, MemReg{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("length over max_mr_size: %v", err)
	}
	if _, err := d.RegUserMR(pd, nil, va, 6*4096, va, acc, pages, MemReg{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("too few pages: %v", err)
	}
	// The IOVA and the bus address disagree within 4 KB: no page size.
	if _, err := d.RegUserMR(pd, nil, va+8, 4096, va+16, acc, pages, MemReg{}); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("bad page size: %v", err)
	}
}

// TestRegUserMRLevel2 forces level-2 PBLEs with a pool whose chunks hold
// only 512 entries (pble.c get_lvl2_pble layout: root entries hold leaf
// PBLE indices).
func TestRegUserMRLevel2(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	p := &pblePool{d: d, base: d.pble.base, cnt: d.pble.cnt, nextFPM: d.pble.nextFPM, limitFPM: d.pble.limitFPM, maxChunk: 512}
	d.pble = p
	sc := scattered(t, d, 600)
	n := f.count()
	mr, err := d.RegUserMR(pd, nil, 0x10000000, 600*4096, 0x10000000, AccessLocalWrite, sc, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	a := mr.palloc
	if a.level != pbleLevel2 || len(a.leaves) != 2 || a.leaves[0].n != 512 || a.leaves[1].n != 88 {
		t.Fatalf("alloc %+v", a)
	}
	for i, l := range a.leaves {
		if got := p.read(a.root.idx + uint32(i)); got != uint64(l.idx) {
			t.Errorf("root[%d] = %d, want leaf index %d", i, got, l.idx)
		}
	}
	for i, pg := range sc {
		if got := p.read(a.leaves[i/512].idx + uint32(i%512)); got != pg {
			t.Fatalf("page %d: %#x", i, got)
		}
	}
	w := lastOp(t, f, n, cqpOpRegMR)
	if w.Q[3]>>44&3 != 3 || w.Q[6] != uint64(a.root.idx) {
		t.Errorf("REG_MR level 2 %#x", w.Q)
	}
	// Growing the pool programmed new SDs through UPDATE_PE_SDS.
	if len(f.since(n)) < 2 {
		t.Errorf("ops %x", opsOf(f.since(n)))
	}
	if err := d.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	if p.inUse != 0 {
		t.Errorf("%d PBLEs in use", p.inUse)
	}
}

func TestFastRegMWAndPhysMR(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	n := f.count()
	mr, err := d.AllocMR(pd, 16)
	if err != nil {
		t.Fatal(err)
	}
	w := lastOp(t, f, n, cqpOpAllocSTag)
	if w.Q[1] != uint64(pd.ID())<<46|16*4096 || w.Q[2] != uint64(mr.LKey()>>8)<<8 || w.Q[3]&(1<<43) == 0 || w.Q[3]&(1<<53) == 0 {
		t.Errorf("ALLOC_STAG %#x", w.Q)
	}
	pages := scattered(t, d, 3)
	if got, err := d.MapMRSG(mr, 4096, 0x5000, 3*4096, pages); got != 3 || err != nil {
		t.Fatal(got, err)
	}
	for i, pg := range pages {
		if v := d.pble.read(mr.palloc.l1.idx + uint32(i)); v != pg {
			t.Errorf("page %d %#x", i, v)
		}
	}
	wr := mr.FastRegWR(mr.LKey()+1, AccessLocalWrite)
	if wr.NPages != 3 || wr.PBLAddr != pages[0] || wr.FirstPMPBLIndex != mr.palloc.l1.idx || wr.IOVA != 0x5000 {
		t.Errorf("fast-reg fields %+v", wr)
	}
	if _, err := d.MapMRSG(mr, 8192, 0, 4096, pages); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("8K pages: %v", err)
	}
	if got, _ := d.MapMRSG(mr, 4096, 0, 17*4096, scattered(t, d, 17)); got != 16 {
		t.Errorf("mapped %d of 17 into a 16-page MR", got)
	}
	if _, err := d.AllocMR(pd, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("0 pages: %v", err)
	}
	// Memory windows.
	for _, ty := range []uint8{1, 2} {
		n = f.count()
		mw, err := d.AllocMW(pd, ty)
		if err != nil {
			t.Fatal(err)
		}
		w = lastOp(t, f, n, cqpOpAllocSTag)
		if w.Q[3]&(1<<43) != 0 || (w.Q[3]>>42&1 == 1) != (ty == 1) {
			t.Errorf("MW type %d hdr %#x", ty, w.Q[3])
		}
		n = f.count()
		if err := d.DeallocMW(mw); err != nil {
			t.Fatal(err)
		}
		if w = lastOp(t, f, n, cqpOpDeallocSTag); w.Q[3]&(1<<43) != 0 {
			t.Errorf("DEALLOC MW hdr %#x", w.Q[3])
		}
	}
	if _, err := d.AllocMW(pd, 3); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("MW type 3: %v", err)
	}
	// DMA MR: all memory only with IB_PD_UNSAFE_GLOBAL_RKEY.
	n = f.count()
	if _, err := d.GetDMAMR(pd, AccessLocalWrite); !errors.Is(err, syscall.EINVAL) || f.count() != n {
		t.Errorf("DMA MR on a normal PD: %v", err)
	}
	upd, _ := d.AllocPD(false, PDUnsafeGlobalRKey)
	dma, err := d.GetDMAMR(upd, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpRegMR)
	if w.Q[0] != 0 || w.Q[1]&(1<<46-1) != 0 || w.Q[4] != 0 {
		t.Errorf("DMA MR %#x", w.Q)
	}
	_ = d.DeregMR(dma)
	// Physical MR: one 4 KB page, level 0.
	n = f.count()
	phys, err := d.RegPhysMR(pd, 0x1_2345_6000, 0x800, AccessLocalWrite, 0x9000)
	if err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpRegMR)
	if w.Q[4] != 0x1_2345_6000 || w.Q[0] != 0x9000 || w.Q[1]&(1<<46-1) != 0x800 || w.Q[3]>>46&3 != 0 {
		t.Errorf("phys MR %#x", w.Q)
	}
	_ = d.DeregMR(phys)
	if err := d.DeregMR(mr); err != nil {
		t.Error(err)
	}
}

// TestUserQueues covers the user-mode CQ and QP paths: queue memory
// registered first (reg_type CQ/QP, no CQP command), then found by its
// user address at create time.
func TestUserQueues(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd, _ := d.AllocPD(true, 0)
	uc, _, err := d.AllocUContext(5, false)
	if err != nil {
		t.Fatal(err)
	}
	n := f.count()
	ring := scattered(t, d, 2) // 2 non-contiguous ring pages → VIRTMAP
	if _, err := d.RegUserMR(pd, uc, 0x10000, 2*4096, 0x10000, 0, ring, MemReg{Type: MemRegCQ, CQPages: 2}); err != nil {
		t.Fatal(err)
	}
	sh := pagesOf(t, d, 1, 0)
	if _, err := d.RegUserMR(pd, uc, 0x20000, 64, 0x20000, 0, sh, MemReg{Type: MemRegCQ, CQPages: 1}); err != nil {
		t.Fatal(err)
	}
	if f.count() != n {
		t.Errorf("queue registration issued %x", opsOf(f.since(n)))
	}
	if _, err := d.CreateCQ(CQAttr{CQE: 100, User: &UserCQ{Ctx: uc, CQBuf: 0x99000, ShadowArea: 0x20000}}); !errors.Is(err, syscall.EPROTO) {
		t.Errorf("unknown ring: %v", err)
	}
	cq, err := d.CreateCQ(CQAttr{CQE: 100, User: &UserCQ{Ctx: uc, CQBuf: 0x10000, ShadowArea: 0x20000}})
	if err != nil {
		t.Fatal(err)
	}
	w := lastOp(t, f, n, cqpOpCreateCQ)
	if w.Q[0] != 100 || w.Q[4] != 0 || w.Q[5] != sh[0] || w.Q[3]&(1<<47) == 0 || w.Q[3]>>44&3 != 1 || w.Q[6] != uint64(cq.firstPBL) {
		t.Errorf("user CREATE_CQ %#x", w.Q)
	}
	if d.pble.read(cq.firstPBL+1) != ring[1] {
		t.Error("CQ PBLE")
	}
	// User QP: SQ 2 pages, RQ 1 page, shadow 1 page, all contiguous → PAs.
	qm := pagesOf(t, d, 4, 0)
	if _, err := d.RegUserMR(pd, uc, 0x40000, 4*4096, 0x40000, 0, qm, MemReg{Type: MemRegQP, SQPages: 2, RQPages: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8},
		User: &UserQP{Ctx: uc, UserWQEBufs: 0x77000}}); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("unknown WQE buffers: %v", err)
	}
	n = f.count()
	q, resp, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8},
		User: &UserQP{Ctx: uc, UserWQEBufs: 0x40000, UserComplCtx: 0xdead_beef_0000}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ActualSQSize != 8 || resp.QPID != q.ID() {
		t.Errorf("resp %+v", resp)
	}
	w = lastOp(t, f, n, cqpOpCreateQP)
	if w.Q[5] != qm[3] || w.Q[3]&(1<<45) != 0 {
		t.Errorf("user CREATE_QP %#x", w.Q)
	}
	ctx := make([]byte, 256)
	_ = d.mem.Read(hostmem.IOVA(q.ctxPA), ctx)
	if le64(ctx, 8) != qm[0] || le64(ctx, 16) != qm[2] || le64(ctx, 168) != 0xdead_beef_0000 || le64(ctx, 160)&(1<<25) != 0 {
		t.Errorf("user ctx SQ %#x RQ %#x compl %#x qw160 %#x", le64(ctx, 8), le64(ctx, 16), le64(ctx, 168), le64(ctx, 160))
	}
	_ = d.DestroyQP(q)
	// Non-contiguous queues → VQ with level-1 indices (RQ = SQ + sq_pages).
	qs := scattered(t, d, 5)
	if _, err := d.RegUserMR(pd, uc, 0x50000, 5*4096, 0x50000, 0, qs, MemReg{Type: MemRegQP, SQPages: 3, RQPages: 1}); err != nil {
		t.Fatal(err)
	}
	n = f.count()
	q2, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8},
		User: &UserQP{Ctx: uc, UserWQEBufs: 0x50000, UserComplCtx: 1}})
	if err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpCreateQP)
	_ = d.mem.Read(hostmem.IOVA(q2.ctxPA), ctx)
	sqIdx, rqIdx := le64(ctx, 8), le64(ctx, 16)
	if w.Q[3]&(1<<45) == 0 || rqIdx != sqIdx+3 || w.Q[5] != qs[4] || d.pble.read(uint32(sqIdx)+2) != qs[2] {
		t.Errorf("VQ create %#x sq %d rq %d", w.Q, sqIdx, rqIdx)
	}
	_ = d.DestroyQP(q2)
}

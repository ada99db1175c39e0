package driver

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// TestKernelPostPoll drives PostSend/PostRecv/PollCQ/ReqNotifyCQ of a
// kernel RC QP over the uk layer, with the fake writing the CQEs.
func TestKernelPostPoll(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	cq, _ := d.CreateCQ(CQAttr{CQE: 32})
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	buf := pagesOf(t, d, 1, 0)
	f.mu.Lock()
	f.reg[regs.WQEALLOC] = 0
	f.mu.Unlock()
	wrs := []SendWR{{WrID: 0x1234, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []SGE{{Addr: buf[0], Length: 64, LKey: 0x100}}}}
	if n, err := d.PostSend(q, wrs); n != 1 || err != nil {
		t.Fatalf("PostSend %d %v", n, err)
	}
	if v := f.regv(regs.WQEALLOC); v != q.ID() {
		t.Errorf("WQEALLOC %d, want qp %d", v, q.ID())
	}
	// The SEND WQE sits in the SQ ring with the valid bit set.
	hdr := d.load64(q.kmem.at(int(q.ukqp.SQHead())*32 - 32 + 24))
	if hdr>>63 != 1 || hdr>>32&0x3f != uint64(uk.OpSend) {
		t.Errorf("SQ WQE header %#x", hdr)
	}
	// Too many SGEs: nothing posted, the first WR is the bad one.
	bad := []SendWR{{WrID: 1, Opcode: uk.WRSend, SGList: make([]SGE, 3)}}
	if n, err := d.PostSend(q, bad); n != 0 || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("3 SGEs: %d %v", n, err)
	}
	if n, err := d.PostRecv(q, []RecvWR{{WrID: 0x77, SGList: []SGE{{Addr: buf[0], Length: 4096, LKey: 0x100}}}}); n != 1 || err != nil {
		t.Fatalf("PostRecv %d %v", n, err)
	}
	if r, _ := d.ReqNotifyCQ(cq, CQNextComp); r != 0 {
		t.Error("armed CQ reported missed events")
	}
	ctx := q.ctx.QPComplCtx
	f.completeOnCQ(cq.ID(), [4]uint64{0, ctx, uint64(q.ID()) << 32, uint64(uk.OpSend)<<56 | 1<<62})
	f.completeOnCQ(cq.ID(), [4]uint64{100, ctx, uint64(q.ID()) << 32, 0})
	wcs, err := d.PollCQ(cq, 8)
	if err != nil || len(wcs) != 2 {
		t.Fatalf("PollCQ %v %v", wcs, err)
	}
	if wcs[0].WrID != 0x1234 || wcs[0].Status != uk.WCSuccess || wcs[0].Opcode != uk.WCSend || wcs[0].QPNum != q.ID() {
		t.Errorf("send WC %+v", wcs[0])
	}
	if wcs[1].WrID != 0x77 || wcs[1].Status != uk.WCSuccess || wcs[1].ByteLen != 100 || wcs[1].Opcode&uk.WCRecv == 0 {
		t.Errorf("recv WC %+v", wcs[1])
	}
	if wcs, _ := d.PollCQ(cq, 8); len(wcs) != 0 {
		t.Errorf("empty CQ polled %v", wcs)
	}
	// After destroy, the QP's unpolled CQEs are skipped.
	f.completeOnCQ(cq.ID(), [4]uint64{0, ctx, uint64(q.ID()) << 32, 0})
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if wcs, err := d.PollCQ(cq, 8); len(wcs) != 0 || err != nil {
		t.Errorf("destroyed QP's CQE reported: %v %v", wcs, err)
	}
}

// TestGeneratedFlushCompletions: requests posted after a flush are
// completed by software (irdma_generate_flush_completions) only once the
// CQ holds no CQE; a hardware flushed CQE still queued is expanded by the
// uk layer first, covering the new request too, and nothing is reported
// twice. A destroyed QP's generated completions are dropped.
func TestGeneratedFlushCompletions(t *testing.T) {
	f := newFakeHW(t, 1)
	d := openFake(t, f)
	pd := mustPD(t, d)
	cq, _ := d.CreateCQ(CQAttr{CQE: 32})
	q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pathTo[QPSRTS] {
		if err := d.ModifyQP(q, fullAttr(s), kernelTable[transKey(q.State(), s)][0][0]|QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	send := func(id uint64) {
		t.Helper()
		if n, err := d.PostSend(q, []SendWR{{WrID: id, Opcode: uk.WRSend}}); n != 1 || err != nil {
			t.Fatalf("PostSend %d %v", n, err)
		}
	}
	send(0xa)
	if err := d.ModifyQP(q, &QPAttr{QPState: QPSErr}, QPAttrState); err != nil {
		t.Fatal(err)
	}
	if len(f.wqesOp(cqpOpFlushWQEs)) != 1 {
		t.Fatal("no FLUSH_WQES")
	}
	send(0xb)
	// The hardware's flushed CQE for 0xa (WQE 0, major/minor 1/1) arrives
	// before the delayed work runs: the work finds the CQ non-empty and
	// retries.
	f.completeOnCQ(cq.ID(), [4]uint64{0, q.ctx.QPComplCtx, uint64(q.ID()) << 32,
		1<<62 | 1<<55 | uint64(uk.OpSend)<<56 | 1<<16 | 1})
	time.Sleep(3 * flushDelay)
	wcs, err := d.PollCQ(cq, 8)
	if err != nil || len(wcs) != 2 || wcs[0].WrID != 0xa || wcs[1].WrID != 0xb ||
		wcs[0].Status != uk.WCWRFlushErr || wcs[1].Status != uk.WCWRFlushErr {
		t.Fatalf("PollCQ %+v %v", wcs, err)
	}
	time.Sleep(3 * flushDelay)
	if wcs, _ := d.PollCQ(cq, 8); len(wcs) != 0 {
		t.Fatalf("duplicates %+v", wcs)
	}
	// Generated completions wait on the CQ; destroy drops them.
	send(0xc)
	waitFor(t, func() bool {
		r, _ := d.ReqNotifyCQ(cq, CQNextComp|CQReportMissedEvents)
		return r == 1
	})
	if err := d.DestroyQP(q); err != nil {
		t.Fatal(err)
	}
	if wcs, _ := d.PollCQ(cq, 8); len(wcs) != 0 {
		t.Errorf("destroyed QP's generated completion reported: %+v", wcs)
	}
}

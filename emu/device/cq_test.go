package device_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// TestCCQArmNotifies checks one CEQE per arm with the CCQ context, and the
// MSI-X notification on vector 0 gated by CAUSE_ENA and INTENA.
func TestCCQArmNotifies(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	// The arm made during bring-up was consumed by the CREATE_AEQ CCQE
	// (before the interrupt cause was enabled): one CEQE, no interrupt.
	if ctx, ok := e.PollCEQ(); !ok || ctx != devtest.CCQCtxCookie {
		t.Fatalf("bring-up CEQE %#x %v", ctx, ok)
	}
	select {
	case <-e.Dev.MSIX(0):
		t.Fatal("MSI-X raised while the cause was disabled")
	default:
	}
	// Not armed: no CEQE for the next CCQE.
	e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC")
	if _, ok := e.PollCEQ(); ok {
		t.Fatal("CEQE without an arm")
	}
	e.ArmCCQ()
	e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC")
	if ctx, ok := e.PollCEQ(); !ok || ctx != devtest.CCQCtxCookie {
		t.Fatalf("armed CEQE %#x %v", ctx, ok)
	}
	select {
	case <-e.Dev.MSIX(0):
	case <-time.After(5 * time.Second):
		t.Fatal("no MSI-X on vector 0")
	}
	// One CEQE per arm.
	e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC")
	if _, ok := e.PollCEQ(); ok {
		t.Fatal("second CEQE for one arm")
	}
	// INTENA clear: the cause stays pending until INTENA is set again.
	e.Dev.Write32(0x00160000, 0) // GLINT_DYN_CTL(0) = 0
	e.ArmCCQ()
	e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC")
	if _, ok := e.PollCEQ(); !ok {
		t.Fatal("no CEQE")
	}
	select {
	case <-e.Dev.MSIX(0):
		t.Fatal("MSI-X with INTENA clear")
	default:
	}
	e.Dev.Write32(0x00160000, 1) // INTENA
	select {
	case <-e.Dev.MSIX(0):
	case <-time.After(5 * time.Second):
		t.Fatal("pending cause not delivered on INTENA")
	}
}

// TestCQOverflowResizeArm fills a small CQ through FLUSH_WQES-free means:
// the CCQ-independent CQE writer is exercised through the device's CQ
// table (as the data plane will), and the CQP resizes it.
func TestCQOverflowResizeArm(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	r, c := createCQ(t, e, 7, 4, 0x4000_0000_0000_0007)
	e.MustOK(c, "CREATE_CQ 7")
	q := e.Dev.CQs().Get(7)
	post := func() error {
		ce := cqpCQE()
		return q.Post(&ce)
	}
	// A 4-entry ring holds 3 CQEs; the 4th overflows → AE 0x0203 with the
	// raw CQ context and the CQ id (docs/hw-controlpath.md "AEQE").
	for i := range 3 {
		if err := post(); err != nil {
			t.Fatalf("CQE %d: %v", i, err)
		}
	}
	if err := post(); err == nil {
		t.Fatal("no overflow")
	}
	q0, q1 := e.WaitAEQ()
	if q0 != 0x4000_0000_0000_0007 || q1&0x3ffff != 7 || q1>>34&0xfff != 0x203 || q1>>50&0xf != 2 {
		t.Errorf("overflow AEQE %#x %#x", q0, q1)
	}
	// Consume two; writing resumes.
	r.poll(t, e)
	r.poll(t, e)
	if err := post(); err != nil {
		t.Fatalf("after consuming: %v", err)
	}
	// Arm for solicited only: a non-solicited CQE does not notify; a
	// solicited one does.
	for {
		if _, ok := e.PollCEQ(); !ok {
			break
		}
	}
	e.ArmCQ(7, r.shadow, false)
	r.poll(t, e)
	r.poll(t, e)
	if err := post(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.PollCEQ(); ok {
		t.Fatal("solicited-only arm fired on a normal CQE")
	}
	r.poll(t, e)
	sol := cqpCQE()
	sol.SolEvent = true
	if err := q.Post(&sol); err != nil {
		t.Fatal(err)
	}
	if ctx, ok := e.PollCEQ(); !ok || ctx != 0x4000_0000_0000_0007 {
		t.Fatalf("solicited CEQE %#x %v", ctx, ok)
	}

	// MODIFY_CQ with CQRESIZE: a 16-entry ring; the next CQE lands at its
	// index 0 with valid 1.
	ring := e.Scr(16*32, 256)
	e.MustOK(e.Exec([8]uint64{
		0: 16,                                   // qw0: new cq_size
		1: 0x4000_0000_0000_0007,                // qw1: CQ context
		2: 8,                                    // qw2: shadow read threshold
		4: uint64(ring),                         // qw4: new ring PA
		5: uint64(r.shadow),                     // qw5: shadow PA
		3: 0x04<<32 | 7 | 1<<43 | 1<<46 | 1<<48, // MODIFY_CQ | CQID 7 | CQRESIZE | CHKOVERFLOW | ENCEQEMASK
	}), "MODIFY_CQ resize")
	_ = e.Mem.Store64(r.shadow, 0) // software head in the new ring
	if err := post(); err != nil {
		t.Fatal(err)
	}
	if v := load(t, e, ring+24); v>>63 != 1 {
		t.Errorf("resized ring slot 0 qword3 %#x", v)
	}
	// A resize to a size-1 ring is "CQ too small".
	wantStatus(t, "MODIFY_CQ size 1", e.Exec([8]uint64{0: 1, 4: uint64(ring), 5: uint64(r.shadow),
		3: 0x04<<32 | 7 | 1<<43}), 0xffff, cqp.MinorBadSize)
	e.MustOK(e.Exec([8]uint64{3: 0x05<<32 | 7}), "DESTROY_CQ 7")
}

// TestEventQueueLifecycle creates and destroys a second CEQ, and the AEQ.
func TestEventQueueLifecycle(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	ring := e.Scr(64*8, 256)
	create := [8]uint64{
		2: 64,           // qw2: CEQSIZE
		4: uint64(ring), // qw4: ring PA
		3: 0x16<<32 | 1, // CREATE_CEQ | CEQID 1
	}
	e.MustOK(e.Exec(create), "CREATE_CEQ 1")
	wantStatus(t, "CREATE_CEQ 1 twice", e.Exec(create), 0xffff, cqp.MinorObjectExists)
	e.MustOK(e.Exec([8]uint64{2: 64, 3: 0x18<<32 | 1}), "DESTROY_CEQ 1")
	wantStatus(t, "DESTROY_CEQ 1 twice", e.Exec([8]uint64{3: 0x18<<32 | 1}), 0xffff, cqp.MinorObjectNotFound)
	wantStatus(t, "CREATE_AEQ twice", e.Exec(devtest.CreateAEQ(e.AEQ.IOVA())), 0xffff, cqp.MinorObjectExists)
	e.MustOK(e.Exec([8]uint64{3: 0x1b << 32}), "DESTROY_AEQ")
	e.MustOK(e.Exec(devtest.CreateAEQ(e.Scr(devtest.AEQSize*16, 256))), "CREATE_AEQ again")
}

// TestCCQOverflow: with the CCQ full (software head one slot ahead of the
// device's tail), the CCQE is not written, AE CQ_OPERATION_ERROR names the
// CCQ, and CQPTAIL still advances; once the head moves on, CCQEs resume.
func TestCCQOverflow(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	tail, _ := e.Dev.CQs().Get(0).Tail()
	head := load(t, e, e.CCQSh.IOVA())
	_ = e.Mem.Store64(e.CCQSh.IOVA(), uint64(tail+1)%devtest.CCQSize) // ring looks full
	c := e.Exec(devtest.SHMCPagesAllocated())
	if c.CCQE || c.Error {
		t.Fatalf("completion %+v", c)
	}
	q0, q1 := e.WaitAEQ()
	if q0 != devtest.CCQCtxCookie || q1&0x3ffff != 0 || q1>>34&0xfff != 0x203 {
		t.Errorf("CCQ overflow AEQE %#x %#x", q0, q1)
	}
	if s := e.Dev.Stats().CQP; s.CCQLost != 1 {
		t.Errorf("CCQLost %d", s.CCQLost)
	}
	_ = e.Mem.Store64(e.CCQSh.IOVA(), head)
	if c := e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "after overflow"); !c.CCQE {
		t.Error("no CCQE after the head moved")
	}
}

// TestCreateCQSizeField checks that CREATE_CQ takes any ring size the
// 21-bit CQSIZE field holds (qw0 [20:0]), not only up to IRDMA_MAX_CQ_SIZE:
// max_hw_cq_size bounds the CQEs a program asks for, and both drivers
// double that for 32-byte CQEs on GEN_2 — libirdma's get_cq_size
// (2·(cqe+1)) and irdma_create_cq's kernel-mode sizing — so a CQ of
// max_cqe/2 or max_cqe entries reaches the device as a ring of 2^20 or
// more. rdma-core's tests.test_cq.CQAPITest.test_create_cq creates them.
func TestCreateCQSizeField(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	sh := e.Scr(64, 64)
	for i, tc := range []struct {
		size uint32
		ok   bool
	}{
		{1, false},        // "CQ too small": one entry holds no CQE
		{1 << 20, true},   // libirdma: 2·(524287+1), max_cqe/2
		{2097150, true},   // libirdma and kernel mode: 2·(1048574+1), max_cqe
		{1<<21 - 1, true}, // the field's largest value
		{1 << 21, false},  // does not fit: the field reads 0
	} {
		id := uint64(20 + i)
		ring, err := e.Mem.Alloc(int(max(tc.size&(1<<21-1), 2))*32, 4096, "big-cq")
		if err != nil {
			t.Fatal(err)
		}
		c := e.Exec([8]uint64{0: uint64(tc.size), 4: uint64(ring.IOVA()), 5: uint64(sh),
			3: 0x03<<32 | id | 1<<46})
		if got := c.Major == 0; got != tc.ok {
			t.Errorf("CREATE_CQ of %d entries: completion %+v, want ok %v", tc.size, c, tc.ok)
		} else if !tc.ok && c.Minor != cqp.MinorBadSize {
			t.Errorf("CREATE_CQ of %d entries: minor %#x, want bad size %#x", tc.size, c.Minor, cqp.MinorBadSize)
		}
		if tc.ok {
			e.MustOK(e.Exec([8]uint64{3: 0x05<<32 | id}), "DESTROY_CQ")
		}
		if err := e.Mem.Unmap(ring); err != nil {
			t.Fatal(err)
		}
	}
}

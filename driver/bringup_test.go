package driver

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

func opsOf(ws []fakeWQE) []uint8 {
	out := make([]uint8, len(ws))
	for i, w := range ws {
		out[i] = w.Op
	}
	return out
}

// TestBringUpSequence checks the order of irdma_ctrl_init_hw /
// irdma_rt_init_hw, the register programming and the teardown.
func TestBringUpSequence(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	ops := opsOf(f.wqes)
	// QUERY_RDMA_FEATURES, QUERY_FPM, COMMIT_FPM, UPDATE_PE_SDS…,
	// SHMC_PAGES_ALLOCATED, CREATE_CQ (CCQ), CREATE_CEQ 0, MANAGE_STATS,
	// CREATE_CEQ 1, [UPDATE_PE_SDS for the PBLE pool], CREATE_AEQ.
	i := 0
	expect := func(op uint8) {
		t.Helper()
		if i >= len(ops) || ops[i] != op {
			t.Fatalf("op %d: got %x, want %#x (ops %x)", i, ops, op, ops)
		}
		i++
	}
	expect(cqpOpQueryRDMAFeatures)
	expect(cqpOpQueryFPMVal)
	expect(cqpOpCommitFPMVal)
	if ops[i] != cqpOpUpdatePESDs {
		t.Fatalf("no UPDATE_PE_SDS after COMMIT: %x", ops)
	}
	for ops[i] == cqpOpUpdatePESDs {
		i++
	}
	expect(cqpOpSHMCPagesAllocated)
	expect(cqpOpCreateCQ)
	if f.wqes[i-1].Q[3]&0x7ffff != 0 || f.wqes[i-1].Q[0] != ccqSize {
		t.Errorf("CCQ create %#x", f.wqes[i-1].Q)
	}
	expect(cqpOpCreateCEQ)
	expect(cqpOpManageStats)
	expect(cqpOpCreateCEQ)
	for ops[i] == cqpOpUpdatePESDs {
		i++
	}
	expect(cqpOpCreateAEQ)
	if i != len(ops) {
		t.Errorf("extra ops %x", ops[i:])
	}
	// Every HMC object's SDs are programmed, DIRECT, 2 MB aligned.
	for _, ty := range hmcObjTypes {
		o := d.hmc.Obj[ty]
		first, lim := sdRange(o.Base, o.Cnt, o.Size)
		for s := first; s < lim; s++ {
			pa, ok := f.sds[s]
			if !ok || pa%hmcDirectBPSize != 0 {
				t.Errorf("%s: SD %d pa %#x ok %v", hmcNames[ty], s, pa, ok)
			}
		}
	}
	// Registers: CQP context address, CEQ 0 and AEQ causes on vector 0
	// with ITR index 3, interrupts enabled, the CCQ armed.
	if got := uint64(f.regv(regs.CCQPHIGH))<<32 | uint64(f.regv(regs.CCQPLOW)); got != d.cqp.ctxPA {
		t.Errorf("CCQPHIGH/LOW %#x, want %#x", got, d.cqp.ctxPA)
	}
	wantCtl := regs.GLINT_CEQCTL_CAUSE_ENA | 3<<11
	if v := f.regv(regs.GLINT_CEQCTL(0)); v != wantCtl {
		t.Errorf("GLINT_CEQCTL(0) %#x, want %#x", v, wantCtl)
	}
	if v := f.regv(regs.GLINT_CEQCTL(1)); v != wantCtl|1 {
		t.Errorf("GLINT_CEQCTL(1) %#x, want %#x", v, wantCtl|1)
	}
	if v := f.regv(regs.PFINT_AEQCTL); v != wantCtl {
		t.Errorf("PFINT_AEQCTL %#x", v)
	}
	if v := f.regv(regs.GLINT_DYN_CTL(0)); v != 3 {
		t.Errorf("GLINT_DYN_CTL(0) %#x, want INTENA|CLEARPBA", v)
	}
	if a := d.load64(d.ccq.shadow.at(32)); a&(1<<14) == 0 {
		t.Errorf("CCQ arm word %#x", a)
	}
	if d.NumCompVectors() != 2 {
		t.Errorf("%d CEQs", d.NumCompVectors())
	}
	// A device-wide limit sanity check.
	if d.maxQP != 256 || d.mrStagMask != stagMask(d.hmc.Obj[hmcMR].Cnt) {
		t.Errorf("maxQP %d mask %#x", d.maxQP, d.mrStagMask)
	}
	n := f.count()
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	down := opsOf(f.since(n))
	// MANAGE_STATS free, DESTROY_AEQ, DESTROY_CEQ ×2, DESTROY_CQ (CCQ,
	// register-polled), UPDATE_PE_SDS (clear)…
	wantDown := []uint8{cqpOpManageStats, cqpOpDestroyAEQ, cqpOpDestroyCEQ, cqpOpDestroyCEQ, cqpOpDestroyCQ}
	if !slices.Equal(down[:len(wantDown)], wantDown) {
		t.Errorf("teardown ops %x", down)
	}
	for _, op := range down[len(wantDown):] {
		if op != cqpOpUpdatePESDs {
			t.Errorf("teardown op %#x after CCQ destroy", op)
		}
	}
	if len(f.sds) != 0 {
		t.Errorf("%d SDs still valid", len(f.sds))
	}
	if f.regv(regs.CCQPLOW) != 0 || f.regv(regs.CCQPHIGH) != 0 {
		t.Error("CQP not destroyed")
	}
	if n := f.mem.NumRegions(); n != 0 {
		t.Errorf("%d DMA regions left", n)
	}
	if _, err := d.AllocPD(false, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("verb after Close: %v", err)
	}
}

func TestFeatureQueryRetry(t *testing.T) {
	f := newFakeHW(t, 1)
	f.featureCnt = 40 // more than IRDMA_MAX_FEATURES: retried with 40 entries
	f.atomics = true
	d := openFake(t, f)
	q := f.wqesOp(cqpOpQueryRDMAFeatures)
	if len(q) != 2 {
		t.Fatalf("%d QUERY_RDMA_FEATURES, want 2", len(q))
	}
	if l := q[0].Q[3] & 0xffffffff; l != 272 {
		t.Errorf("first BUF_LEN %d, want 272 (ALIGN(8 × 34, 16))", l)
	}
	if l := q[1].Q[3] & 0xffffffff; l != 320 {
		t.Errorf("retry BUF_LEN %d, want 320", l)
	}
	if maj, min := d.FWVersion(); maj != 1 || min != 60 {
		t.Errorf("fw %d.%d", maj, min)
	}
	if d.UKAttrs().FeatureFlags&profile.FeatureAtomicOps == 0 {
		t.Error("ATOMIC_OPS not set from FTN_FLAGS")
	}
	a, _ := d.QueryDevice()
	if a.AtomicCap != 1 {
		t.Errorf("atomic cap %d", a.AtomicCap)
	}
}

func TestBringUpFailures(t *testing.T) {
	cases := []struct {
		name string
		set  func(f *fakeHW)
		want error
	}{
		{"doorbell BAR size", func(f *fakeHW) { f.lbarDBSize = 0 }, syscall.ENODEV},
		{"CCQP error", func(f *fakeHW) { f.ccqpErr = true }, syscall.EIO},
		{"feature count", func(f *fakeHW) { f.featureCnt = 1 }, syscall.EINVAL},
		{"COMMIT_FPM error", func(f *fakeHW) { f.fail[cqpOpCommitFPMVal] = [2]uint16{0xffff, 0x1} }, syscall.EIO},
		{"CREATE_CEQ error", func(f *fakeHW) { f.fail[cqpOpCreateCEQ] = [2]uint16{0xffff, 0x2} }, syscall.EIO},
		{"no SDs", func(f *fakeHW) { f.fpm.maxSDs = 1 }, syscall.EINVAL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeHW(t, 1)
			c.set(f)
			_, err := Open(f, Config{Netdev: testNetdev(), QPLimit: 256, CQPTimeout: time.Second})
			if !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			if n := f.mem.NumRegions(); n != 0 {
				t.Errorf("%d regions left after failed Open", n)
			}
		})
	}
}

// TestBringUpTimeouts runs the register-polled and CCQ-completed waits
// on a manual clock: nothing times out until the clock is advanced.
func TestBringUpTimeouts(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(f *fakeHW)
	}{
		{"PE not ready", func(f *fakeHW) { f.peNotReady = true }},
		{"register-polled QUERY_FPM", func(f *fakeHW) { f.hang[cqpOpQueryFPMVal] = true }},
		{"CCQ-completed CREATE_CEQ", func(f *fakeHW) { f.hang[cqpOpCreateCEQ] = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeHW(t, 1)
			c.set(f)
			clk := timing.NewManual()
			done := make(chan error, 1)
			go func() {
				_, err := Open(f, Config{Netdev: testNetdev(), QPLimit: 256, Clock: clk, CQPTimeout: time.Second})
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("Open returned %v before the clock moved", err)
			case <-time.After(50 * time.Millisecond):
			}
			for {
				clk.Advance(time.Second)
				select {
				case err := <-done:
					if !errors.Is(err, syscall.ETIMEDOUT) {
						t.Fatalf("Open: %v, want ETIMEDOUT", err)
					}
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}

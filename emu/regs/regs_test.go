package regs_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// TestOffsets pins every offset to the value in icrdma_hw.h as listed in
// docs/hw-controlpath.md "Registers".
func TestOffsets(t *testing.T) {
	tests := []struct {
		name string
		got  regs.Offset
		want uint32
	}{
		{"PFPE_CQPDB", regs.CQPDB, 0x00500800},
		{"PFPE_CQPTAIL", regs.CQPTAIL, 0x00500880},
		{"PFPE_CCQPSTATUS", regs.CCQPSTATUS, 0x0050a000},
		{"PFPE_CCQPLOW", regs.CCQPLOW, 0x0050a080},
		{"PFPE_CCQPHIGH", regs.CCQPHIGH, 0x0050a100},
		{"PFPE_CQPERRCODES", regs.CQPERRCODES, 0x0050a200},
		{"PFPE_CQARM", regs.CQARM, 0x00502c00},
		{"PFPE_CQACK", regs.CQACK, 0x00502c80},
		{"PFPE_AEQALLOC", regs.AEQALLOC, 0x00502d00},
		{"PFPE_WQEALLOC", regs.WQEALLOC, 0x00504400},
		{"GLPCI_LBARCTRL", regs.GLPCI_LBARCTRL, 0x0009de74},
		{"GLPE_CPUSTATUS0", regs.GLPE_CPUSTATUS0, 0x0050ba5c},
		{"GLPE_CPUSTATUS1", regs.GLPE_CPUSTATUS1, 0x0050ba60},
		{"GLPE_CPUSTATUS2", regs.GLPE_CPUSTATUS2, 0x0050ba64},
		{"PFINT_AEQCTL", regs.PFINT_AEQCTL, 0x0016cb00},
		{"PFHMC_PDINV", regs.PFHMC_PDINV, 0x00520300},
		{"GLPE_CRITERR", regs.GLPE_CRITERR, 0x00534000},
		{"GLINT_DYN_CTL(0)", regs.GLINT_DYN_CTL(0), 0x00160000},
		{"GLINT_DYN_CTL(5)", regs.GLINT_DYN_CTL(5), 0x00160014},
		{"GLINT_CEQCTL(0)", regs.GLINT_CEQCTL(0), 0x0015c000},
		{"GLINT_CEQCTL(2047)", regs.GLINT_CEQCTL(2047), 0x0015c000 + 4*2047},
		{"GLINT_RATE(0)", regs.GLINT_RATE(0), 0x0015a000},
		{"GLHMC_VFPDINV(1)", regs.GLHMC_VFPDINV(1), 0x00528304},
		{"VSIQF_PE_CTL1(2)", regs.VSIQF_PE_CTL1(2), 0x00414008},
		{"ICRDMA_DB_ADDR_OFFSET", regs.DB_ADDR_OFFSET, 0x007f0000},
		{"user SQ doorbell", regs.DBSQ, 0x007f0000},
		{"user CQ doorbell", regs.DBCQ, 0x007f0040},
		{"first push page", regs.PushOffset, 0x00800000},
	}
	for _, tc := range tests {
		if uint32(tc.got) != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, uint32(tc.got), tc.want)
		}
	}
}

func TestPowerOn(t *testing.T) {
	f := regs.New()
	tests := []struct {
		off  regs.Offset
		want uint32
	}{
		{regs.GLPE_CPUSTATUS0, 0x80},
		{regs.GLPE_CPUSTATUS1, 0x80},
		{regs.GLPE_CPUSTATUS2, 0x80},
		{regs.GLPCI_LBARCTRL, 0x20}, // PE_DB_SIZE [5:4] = 2: 8 MiB
		{regs.CQPTAIL, 0},
		{regs.CCQPSTATUS, 0},
		{regs.CQPERRCODES, 0},
		{regs.GLINT_DYN_CTL(7), 0},
	}
	for _, tc := range tests {
		if got := f.Read32(tc.off); got != tc.want {
			t.Errorf("%s = %#x, want %#x", f.Name(tc.off), got, tc.want)
		}
	}
	if got := regs.Get(f.Read32(regs.GLPCI_LBARCTRL), regs.GLPCI_LBARCTRL_PE_DB_SIZE); got != regs.PEDBSize8M {
		t.Errorf("PE_DB_SIZE = %d, want 2", got)
	}
	if s := f.Stats(); s != (regs.Stats{}) {
		t.Errorf("Stats after power-on reads = %+v", s)
	}
}

func TestLayoutKnown(t *testing.T) {
	f := regs.New()
	l := regs.GEN2Layout()
	offsets := []regs.Offset{l.CQPTAIL, l.CQPDB, l.CCQPSTATUS, l.CCQPHIGH, l.CCQPLOW,
		l.CQARM, l.CQACK, l.AEQALLOC, l.CQPERRCODES, l.WQEALLOC, l.GLINT_DYN_CTL,
		l.GLPCI_LBARCTRL, l.GLPE_CPUSTATUS0, l.GLPE_CPUSTATUS1, l.GLPE_CPUSTATUS2,
		l.PFINT_AEQCTL, l.GLINT_CEQCTL, l.VSIQF_PE_CTL1, l.PFHMC_PDINV, l.GLHMC_VFPDINV,
		l.GLPE_CRITERR, l.GLINT_RATE}
	seen := map[regs.Offset]bool{}
	for _, off := range offsets {
		if !f.Known(off) {
			t.Errorf("layout offset %#x not in File", uint32(off))
		}
		if seen[off] {
			t.Errorf("layout offset %#x twice", uint32(off))
		}
		seen[off] = true
	}
	// The doorbell page is shared memory, not a register (package doc).
	if f.Known(l.DB_ADDR_OFFSET) {
		t.Error("DB_ADDR_OFFSET is in the register File")
	}
	// Array ends.
	for _, tc := range []struct {
		off   regs.Offset
		known bool
	}{
		{regs.GLINT_DYN_CTL(regs.NumGLINT - 1), true},
		{regs.GLINT_DYN_CTL(regs.NumGLINT), false},
		{regs.GLHMC_VFPDINV(31), true},
		{regs.GLHMC_VFPDINV(32), false},
		{regs.VSIQF_PE_CTL1(767), true},
		{regs.VSIQF_PE_CTL1(768), false},
		{regs.GLINT_DYN_CTL(-1), false},
	} {
		if got := f.Known(tc.off); got != tc.known {
			t.Errorf("Known(%s) = %v, want %v", f.Name(tc.off), got, tc.known)
		}
	}
}

func TestUnknownOffsets(t *testing.T) {
	f := regs.New()
	tests := []regs.Offset{
		0, regs.CQPDB + 1, regs.CQPDB + 2, regs.CQPDB + 4, regs.DBSQ, regs.DBCQ,
		0xfffffffc, 0xffffffff, regs.GLINT_DYN_CTL(regs.NumGLINT),
	}
	for i, off := range tests {
		if v := f.Read32(off); v != 0 {
			t.Errorf("Read32(%#x) = %#x, want 0", uint32(off), v)
		}
		f.Write32(off, 0xdeadbeef)
		if v := f.Read32(off); v != 0 {
			t.Errorf("after Write32, Read32(%#x) = %#x, want 0", uint32(off), v)
		}
		want := regs.Stats{UnknownReads: uint64(2 * (i + 1)), UnknownWrites: uint64(i + 1), LastUnknown: off}
		if diff := cmp.Diff(want, f.Stats()); diff != "" {
			t.Errorf("Stats after %#x (-want +got):\n%s", uint32(off), diff)
		}
	}
	if _, err := f.OnWrite(regs.DBSQ, func(uint32) {}); !errors.Is(err, regs.ErrUnknownRegister) {
		t.Errorf("OnWrite(unknown) = %v", err)
	}
	if f.Set(regs.DBSQ, 1) {
		t.Error("Set(unknown) = true")
	}
}

func TestReadOnly(t *testing.T) {
	f := regs.New()
	var called bool
	if _, err := f.OnWrite(regs.CQPERRCODES, func(uint32) { called = true }); err != nil {
		t.Fatal(err)
	}
	for _, off := range []regs.Offset{regs.GLPE_CPUSTATUS0, regs.GLPCI_LBARCTRL, regs.CQPERRCODES, regs.GLPE_CRITERR} {
		before := f.Read32(off)
		f.Write32(off, 0x1234)
		if got := f.Read32(off); got != before {
			t.Errorf("driver write changed RO %s to %#x", f.Name(off), got)
		}
		if a, _ := f.Access(off); a != regs.RO {
			t.Errorf("Access(%s) = %v, want RO", f.Name(off), a)
		}
	}
	if called {
		t.Error("driver write to RO register called a subscriber")
	}
	if s := f.Stats(); s.ReadOnlyWrites != 4 || s.UnknownWrites != 0 {
		t.Errorf("Stats = %+v, want 4 read-only writes", s)
	}
	// The device sets status registers.
	errs := regs.Prep(regs.CQPERRCODES_MAJOR, 0xffff) | regs.Prep(regs.CQPERRCODES_MINOR, 0x8002)
	if !f.Set(regs.CQPERRCODES, errs) || f.Read32(regs.CQPERRCODES) != 0xffff8002 {
		t.Errorf("Set CQPERRCODES: read %#x", f.Read32(regs.CQPERRCODES))
	}
	f.Reset()
	if f.Read32(regs.CQPERRCODES) != 0 || f.Read32(regs.GLPE_CPUSTATUS1) != regs.CPUStatusReady {
		t.Error("Reset did not restore power-on values")
	}
}

// TestOnWrite: subscribers see every driver write with its value, in order,
// including repeated values; Set does not notify; cancel stops delivery.
func TestOnWrite(t *testing.T) {
	f := regs.New()
	var a, b []uint32
	cancelA, err := f.OnWrite(regs.WQEALLOC, func(v uint32) { a = append(a, v) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.OnWrite(regs.WQEALLOC, func(v uint32) { b = append(b, v) }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.OnWrite(regs.WQEALLOC, nil); err == nil {
		t.Error("OnWrite(nil) succeeded")
	}
	f.Write32(regs.WQEALLOC, 5)
	f.Write32(regs.WQEALLOC, 5)
	f.Write32(regs.WQEALLOC, 7)
	f.Set(regs.WQEALLOC, 9) // device-side: no callback
	if got := f.Read32(regs.WQEALLOC); got != 9 {
		t.Errorf("Read32 = %d, want 9", got)
	}
	cancelA()
	cancelA() // idempotent
	f.Write32(regs.WQEALLOC, 11)
	if diff := cmp.Diff([]uint32{5, 5, 7}, a); diff != "" {
		t.Errorf("subscriber a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint32{5, 5, 7, 11}, b); diff != "" {
		t.Errorf("subscriber b (-want +got):\n%s", diff)
	}
}

func TestFields(t *testing.T) {
	tests := []struct {
		name       string
		v, mask    uint32
		want       uint32
		prepInput  uint32
		prepResult uint32
	}{
		{"CQPTAIL tail", 0x800007ff, regs.CQPTAIL_WQTAIL, 0x7ff, 0x123, 0x123},
		{"CQPTAIL error", 0x80000001, regs.CQPTAIL_CQP_OP_ERR, 1, 1, 0x80000000},
		{"ERRCODES major", 0xffff8002, regs.CQPERRCODES_MAJOR, 0xffff, 0xf000, 0xf0000000},
		{"ERRCODES minor", 0xffff8002, regs.CQPERRCODES_MINOR, 0x8002, 0x10005, 0x0005},
		{"WQE_DESC_INDEX", 0x00300011, regs.WQEALLOC_WQE_DESC_INDEX, 3, 0xfff, 0xfff00000},
		{"push qp id", 0x00300011, regs.WQEALLOC_QPID, 0x11, 0x3ffff, 0x3ffff},
		{"DYN_CTL interval", 0x1fffe0, regs.GLINT_DYN_CTL_INTERVAL, 0xfff, 1, 0x20},
		{"DYN_CTL itr", 0x18, regs.GLINT_DYN_CTL_ITR_INDX, 3, 3, 0x18},
		{"CEQCTL msix", 0x40001805, regs.GLINT_CEQCTL_MSIX_INDX, 5, 0x7ff, 0x7ff},
		{"CEQCTL itr", 0x40001805, regs.GLINT_CEQCTL_ITR_INDX, 3, regs.ITRIndexNone, 0x1800},
		{"PDINV pd", 0x01ff8fff, regs.PFHMC_PDINV_PMPDIDX, 0x1ff, 2, 0x20000},
		{"PDINV sd", 0x01ff8fff, regs.PFHMC_PDINV_PMSDIDX, 0xfff, 0x1001, 1},
		{"CCQPSTATUS err", 0x80000001, regs.CCQPSTATUS_ERR, 1, 1, 0x80000000},
		{"zero mask", 0xffffffff, 0, 0, 0xffffffff, 0},
	}
	for _, tc := range tests {
		if got := regs.Get(tc.v, tc.mask); got != tc.want {
			t.Errorf("%s: Get(%#x) = %#x, want %#x", tc.name, tc.v, got, tc.want)
		}
		if got := regs.Prep(tc.mask, tc.prepInput); got != tc.prepResult {
			t.Errorf("%s: Prep(%#x) = %#x, want %#x", tc.name, tc.prepInput, got, tc.prepResult)
		}
	}
}

func TestName(t *testing.T) {
	f := regs.New()
	for off, want := range map[regs.Offset]string{
		regs.CQPDB:              "CQPDB",
		regs.GLINT_DYN_CTL(5):   "GLINT_DYN_CTL(5)",
		regs.VSIQF_PE_CTL1(767): "VSIQF_PE_CTL1(767)",
		regs.DBCQ:               "BAR0+0x7f0040",
	} {
		if got := f.Name(off); got != want {
			t.Errorf("Name(%#x) = %q, want %q", uint32(off), got, want)
		}
	}
}

// TestConcurrent drives the file from a "driver" and a "device" goroutine
// at once, with subscriptions changing underneath, under -race.
func TestConcurrent(t *testing.T) {
	f := regs.New()
	var seen atomic.Uint64
	wake := make(chan struct{}, 1)
	cancel, err := f.OnWrite(regs.CQPDB, func(uint32) {
		seen.Add(1)
		select {
		case wake <- struct{}{}:
		default: // already pending: coalesce
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // driver: post and ring
		defer wg.Done()
		for i := range n {
			f.Write32(regs.CQPDB, uint32(i)&regs.CQPTAIL_WQTAIL)
			_ = f.Read32(regs.CQPTAIL)
		}
	}()
	go func() { // device: publish the tail
		defer wg.Done()
		for i := range n {
			f.Set(regs.CQPTAIL, uint32(i)&regs.CQPTAIL_WQTAIL)
			select {
			case <-wake:
			default:
			}
		}
	}()
	go func() { // another block subscribing and cancelling
		defer wg.Done()
		for range 200 {
			c, err := f.OnWrite(regs.CQPDB, func(uint32) {})
			if err != nil {
				t.Error(err)
				return
			}
			c()
		}
	}()
	wg.Wait()
	cancel()
	if got := seen.Load(); got != n {
		t.Errorf("subscriber saw %d writes, want %d", got, n)
	}
}

func TestNoAllocs(t *testing.T) {
	f := regs.New()
	if _, err := f.OnWrite(regs.WQEALLOC, func(uint32) {}); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func(){
		"Read32":       func() { _ = f.Read32(regs.GLINT_DYN_CTL(100)) },
		"Write32":      func() { f.Write32(regs.WQEALLOC, 3) },
		"Set":          func() { f.Set(regs.CQPTAIL, 3) },
		"Read unknown": func() { _ = f.Read32(0x1000) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

func BenchmarkWrite32(b *testing.B) {
	f := regs.New()
	var n atomic.Uint64
	if _, err := f.OnWrite(regs.WQEALLOC, func(uint32) { n.Add(1) }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.Write32(regs.WQEALLOC, 17)
	}
}

// ExampleFile_OnWrite shows the intended pattern: the device's CQP engine
// subscribes to the CQP doorbell with a coalescing wake-up, then consumes
// the ring until it catches up with the head, whatever the number of
// doorbells.
func ExampleFile_OnWrite() {
	f := regs.New()
	wake := make(chan struct{}, 1)
	cancel, _ := f.OnWrite(regs.CQPDB, func(uint32) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer cancel()

	// Driver: three doorbells in a row (only one wake-up is pending).
	for head := uint32(1); head <= 3; head++ {
		f.Write32(regs.CQPDB, head)
	}

	// Device: one wake-up, then work from the register's current value.
	<-wake
	head := f.Read32(regs.CQPDB)
	f.Set(regs.CQPTAIL, regs.Prep(regs.CQPTAIL_WQTAIL, head))
	fmt.Printf("tail %d, pending wake-ups %d\n", regs.Get(f.Read32(regs.CQPTAIL), regs.CQPTAIL_WQTAIL), len(wake))
	// Output: tail 3, pending wake-ups 0
}

package mr_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hmc/hmctest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// fixture is a committed, backed HMC (hmctest defaults: 256 MR objects,
// so 14 index bits; 4096 PBLEs) with an STag table.
type fixture struct {
	env *hmctest.Env
	tab *mr.Table
}

func setup(t testing.TB, paged bool) *fixture {
	t.Helper()
	env := hmctest.New(t, hmctest.Options{Paged: paged})
	return &fixture{env: env, tab: mr.NewTable(env.Mem, env.HMC, env.Profile)}
}

// idx builds a 24-bit STag index from the driver-key bits and the table
// index (14 index bits for 256 MR objects).
func idx(drv, i uint32) uint32 { return drv<<14 | i }

func stag(index uint32, key uint8) uint32 { return index<<8 | uint32(key) }

// pble writes PBLE i.
func (f *fixture) pble(t testing.TB, i uint32, v uint64) {
	t.Helper()
	a, err := f.env.HMC.ObjectIOVA(hmc.PBLE, i)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.env.Mem.Store64(a, v); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) reg(t testing.TB, a mr.RegArgs) {
	t.Helper()
	if err := f.tab.RegisterNonShared(a); err != nil {
		t.Fatalf("RegisterNonShared(%+v): %v", a, err)
	}
}

func wantAE(t *testing.T, what string, err error, ae mr.AE) {
	t.Helper()
	got, ok := mr.AEOf(err)
	if ae == 0 {
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
		}
		return
	}
	if !ok || got != ae {
		t.Errorf("%s: error %v, want AE %v", what, err, ae)
	}
	if !errors.Is(err, mr.ErrMR) {
		t.Errorf("%s: error %v does not match ErrMR", what, err)
	}
}

func wantReason(t *testing.T, what string, err error, r mr.Reason) {
	t.Helper()
	got, ok := mr.ReasonOf(err)
	if r == 0 {
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
		}
		return
	}
	if !ok || got != r {
		t.Errorf("%s: error %v, want reason %v", what, err, r)
	}
}

func TestIndexBits(t *testing.T) {
	for _, tc := range []struct {
		count uint32
		want  uint
	}{{0, 14}, {1, 14}, {256, 14}, {16384, 14}, {16385, 15}, {65536, 16}, {65537, 17}, {1 << 24, 24}, {1 << 25, 24}} {
		if got := mr.IndexBits(tc.count); got != tc.want {
			t.Errorf("IndexBits(%d) = %d, want %d", tc.count, got, tc.want)
		}
	}
}

// TestRegisterAndTranslate registers regions at every PBL level and page
// size, VA-based and zero-based, over hand-built PBLEs, and checks the
// spans. Page addresses are fake bus addresses: Translate never touches
// payload memory.
func TestRegisterAndTranslate(t *testing.T) {
	for _, paged := range []bool{false, true} {
		f := setup(t, paged)
		// Level 1, 4 KB pages: PBLE 10..13. Pages 1 and 2 are contiguous.
		A := []uint64{0x2_0000_0000, 0x2_0000_5000, 0x2_0000_6000, 0x2_0000_1000}
		for k, a := range A {
			f.pble(t, 10+uint32(k), a)
		}
		// Level 2, 4 KB pages, 600 pages: roots at PBLE 100, 101 hold the
		// PBLE indexes of leaves at 1000 (512 entries) and 2000 (88).
		P := func(k uint64) uint64 { return 0x3_0000_0000 + k*0x2000 }
		f.pble(t, 100, 1000)
		f.pble(t, 101, 2000)
		for k := uint64(0); k < 600; k++ {
			leaf := uint32(1000 + k)
			if k >= 512 {
				leaf = uint32(2000 + k - 512)
			}
			f.pble(t, leaf, P(k))
		}
		// Level 1, 2 MB pages at PBLE 20, 21; level 1, 1 GB page at PBLE 30.
		B := []uint64{0x5_0000_0000, 0x6_0000_0000}
		f.pble(t, 20, B[0])
		f.pble(t, 21, B[1])
		C0 := uint64(0x40_0000_0000)
		f.pble(t, 30, C0)
		// Level 2, 2 MB pages: root PBLE 102 → leaf at PBLE 3000 (3 pages).
		Q := func(k uint64) uint64 { return 0xa_0000_0000 + k*0x40_0000 }
		f.pble(t, 102, 3000)
		for k := uint64(0); k < 3; k++ {
			f.pble(t, uint32(3000+k), Q(k))
		}

		all := mr.AccessLocalRead | mr.AccessLocalWrite | mr.AccessRemoteRead | mr.AccessRemoteWrite
		regs := []mr.RegArgs{
			{STagIndex: idx(1, 1), Key: 0x11, PD: 1, VA: 0x7f00_0000_1234, VABased: true, Length: 0x3000,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize4K, RegAddr: 0x1_0000_0000},
			{STagIndex: idx(1, 2), Key: 0x22, PD: 1, VA: 0x1000_0800, VABased: true, Length: 0x3400,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: 10},
			{STagIndex: idx(1, 3), Key: 0x33, PD: 1, VA: 0x800, VABased: false, Length: 0x3400,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: 10},
			{STagIndex: idx(1, 4), Key: 0x44, PD: 1, VA: 0x4000_0000, VABased: true, Length: 600 * 4096,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize4K, LPBLSize: 3, FirstPBLE: 100},
			{STagIndex: idx(1, 5), Key: 0x55, PD: 1, VA: 0x70_001f_f000, VABased: true, Length: 0x2000,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize2M, LPBLSize: 1, FirstPBLE: 20},
			{STagIndex: idx(1, 6), Key: 0x66, PD: 1, VA: 0x80_1234_5678, VABased: true, Length: 0x1000,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize1G, LPBLSize: 1, FirstPBLE: 30},
			{STagIndex: idx(1, 7), Key: 0x77, PD: 1, VA: 0x1f_0000, VABased: false, Length: 0x20_0000,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize2M, RegAddr: 0x9_0000_0000},
			{STagIndex: idx(1, 8), Key: 0x88, PD: 1, VA: 0x1234_5678, VABased: false, Length: 0x100,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize1G, LPBLSize: 1, FirstPBLE: 30},
			{STagIndex: idx(1, 9), Key: 0x99, PD: 1, VA: 0x7_0000_0000, VABased: true, Length: 3 << 21,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize2M, LPBLSize: 3, FirstPBLE: 102},
			{STagIndex: idx(1, 10), Key: 0xaa, PD: 1, VA: 0x4000_1000, VABased: true, Length: 0x2000,
				Access: all, RemoteAccess: true, PageSize: mr.PageSize1G, RegAddr: 0xc_0000_0000},
		}
		for _, r := range regs {
			f.reg(t, r)
		}
		tests := []struct {
			name    string
			stag    uint32
			va, len uint64
			want    []mr.Span
		}{
			{"L0 4K VA-based", stag(idx(1, 1), 0x11), 0x7f00_0000_1334, 0x2000,
				[]mr.Span{{0x1_0000_0334, 0x2000}}},
			{"L0 4K whole", stag(idx(1, 1), 0x11), 0x7f00_0000_1234, 0x3000,
				[]mr.Span{{0x1_0000_0234, 0x3000}}},
			{"L1 4K VA-based, merge contiguous pages", stag(idx(1, 2), 0x22), 0x1000_0800, 0x3400,
				[]mr.Span{{0x2_0000_0800, 0x800}, {0x2_0000_5000, 0x2000}, {0x2_0000_1000, 0xc00}}},
			{"L1 4K VA-based, inside a page", stag(idx(1, 2), 0x22), 0x1000_2010, 0x10,
				[]mr.Span{{0x2_0000_6010, 0x10}}},
			{"L1 4K zero-based from 0", stag(idx(1, 3), 0x33), 0, 0x3400,
				[]mr.Span{{0x2_0000_0800, 0x800}, {0x2_0000_5000, 0x2000}, {0x2_0000_1000, 0xc00}}},
			{"L1 4K zero-based offset", stag(idx(1, 3), 0x33), 0x1000, 0x100,
				[]mr.Span{{0x2_0000_5800, 0x100}}},
			{"L2 4K across leaves", stag(idx(1, 4), 0x44), 0x4000_0000 + 511*4096 + 0xf00, 0x200,
				[]mr.Span{{hostmem.IOVA(P(511) + 0xf00), 0x100}, {hostmem.IOVA(P(512)), 0x100}}},
			{"L2 4K last page", stag(idx(1, 4), 0x44), 0x4000_0000 + 599*4096, 4096,
				[]mr.Span{{hostmem.IOVA(P(599)), 4096}}},
			{"L1 2M across pages", stag(idx(1, 5), 0x55), 0x70_001f_f000, 0x2000,
				[]mr.Span{{0x5_001f_f000, 0x1000}, {0x6_0000_0000, 0x1000}}},
			{"L1 1G", stag(idx(1, 6), 0x66), 0x80_1234_5678, 0x100,
				[]mr.Span{{0x40_1234_5678, 0x100}}},
			{"L0 2M zero-based", stag(idx(1, 7), 0x77), 0x1000, 0x20,
				[]mr.Span{{0x9_001f_1000, 0x20}}},
			{"L1 1G zero-based", stag(idx(1, 8), 0x88), 0x10, 0x10,
				[]mr.Span{{0x40_1234_5688, 0x10}}},
			{"L2 2M across pages", stag(idx(1, 9), 0x99), 0x7_001f_ff00, 0x200,
				[]mr.Span{{hostmem.IOVA(Q(0) + 0x1fff00), 0x100}, {hostmem.IOVA(Q(1)), 0x100}}},
			{"L0 1G", stag(idx(1, 10), 0xaa), 0x4000_1010, 0x10,
				[]mr.Span{{0xc_0000_1010, 0x10}}},
		}
		for _, tc := range tests {
			for _, remote := range []bool{false, true} {
				need := mr.AccessLocalRead
				if remote {
					need = mr.AccessRemoteWrite
				}
				pre := []mr.Span{{1, 1}} // Translate appends
				got, err := f.tab.Translate(tc.stag, 1, 0, tc.va, tc.len, need, remote, pre)
				if err != nil {
					t.Errorf("paged=%v %s: %v", paged, tc.name, err)
					continue
				}
				if diff := cmp.Diff(append([]mr.Span{{1, 1}}, tc.want...), got); diff != "" {
					t.Errorf("paged=%v %s remote=%v (-want +got):\n%s", paged, tc.name, remote, diff)
				}
			}
		}
	}
}

// TestRecordInHMC pins the serialized record of a registered MR in its HMC
// MR object (Record.Encode layout), and checks it is cleared on Dealloc.
func TestRecordInHMC(t *testing.T) {
	f := setup(t, false)
	f.reg(t, mr.RegArgs{STagIndex: idx(3, 5), Key: 0x42, PD: 7, VA: 0x10000, VABased: true,
		Length: 0x4000, Access: 0x0f, RemoteAccess: true, PageSize: mr.PageSize4K,
		RegAddr: 0x1_0000_0000})
	want, _ := hex.DecodeString(strings.Join([]string{
		"4205c000", "0200030f", // STag 0x00c00542; valid, MR, VA-based|remote, rights 0x0f
		"07000000", "00000000", // PD 7; page size 4K, level 0
		"0000010000000000",     // VA 0x10000
		"0040000000000000",     // length 0x4000
		"0000000001000000",     // first page 0x1_0000_0000
		"00000000", "00000000", // FBO 0, bound windows 0
		"00000000", "00000000", // parent, QP
		"0000000000000000", // fast-register capacity
	}, ""))
	a, err := f.env.HMC.ObjectIOVA(hmc.MR, 5)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, mr.RecordSize)
	if err := f.env.Mem.Read(a, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HMC MR object (-want +got):\n%s", diff)
	}
	rec, err := f.tab.ReadRecord(idx(3, 5))
	g, ok := f.tab.Get(idx(3, 5))
	if err != nil || !ok || rec != g {
		t.Errorf("ReadRecord %+v (%v) != Get %+v (%v)", rec, err, g, ok)
	}
	if err := f.tab.Dealloc(idx(3, 5), 7, true); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Mem.Read(a, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(make([]byte, mr.RecordSize), got); diff != "" {
		t.Errorf("HMC MR object after Dealloc (-want +got):\n%s", diff)
	}
	if _, ok := f.tab.Get(idx(3, 5)); ok {
		t.Errorf("Get after Dealloc found the record")
	}
}

func TestControlErrors(t *testing.T) {
	f := setup(t, false)
	base := mr.RegArgs{STagIndex: idx(1, 10), Key: 1, PD: 2, VA: 0x1000, VABased: true, Length: 0x1000,
		Access: mr.AccessLocalRead | mr.AccessLocalWrite, PageSize: mr.PageSize4K, RegAddr: 0x1_0000_0000}
	f.reg(t, base)
	tests := []struct {
		name string
		mod  func(a *mr.RegArgs)
		want mr.Reason
	}{
		{"index 0", func(a *mr.RegArgs) { a.STagIndex = idx(5, 0) }, mr.ReasonIndexRange},
		{"index ≥ MR count", func(a *mr.RegArgs) { a.STagIndex = 256 }, mr.ReasonIndexRange},
		{"index above 24 bits", func(a *mr.RegArgs) { a.STagIndex = 1 << 24 }, mr.ReasonIndexRange},
		{"already allocated", func(a *mr.RegArgs) {}, mr.ReasonAllocated},
		{"already allocated, other driver bits", func(a *mr.RegArgs) { a.STagIndex = idx(2, 10) }, mr.ReasonAllocated},
		{"PD beyond MaxPDs", func(a *mr.RegArgs) { a.STagIndex = 11; a.PD = 1 << 18 }, mr.ReasonBadPD},
		{"page size 3", func(a *mr.RegArgs) { a.STagIndex = 11; a.PageSize = 3 }, mr.ReasonBadPageSize},
		{"LPBLSIZE 2", func(a *mr.RegArgs) { a.STagIndex = 11; a.LPBLSize = 2 }, mr.ReasonBadPBLLevel},
		{"remote write without local write", func(a *mr.RegArgs) {
			a.STagIndex = 11
			a.Access = mr.AccessLocalRead | mr.AccessRemoteWrite
		}, mr.ReasonBadRights},
		{"length above max MR size", func(a *mr.RegArgs) { a.STagIndex = 11; a.Length = 1<<45 + 1 }, mr.ReasonBadLength},
		{"VA wraps", func(a *mr.RegArgs) { a.STagIndex = 11; a.VA = ^uint64(0) - 10 }, mr.ReasonWrap},
		{"zero-based FBO ≥ page", func(a *mr.RegArgs) { a.STagIndex = 11; a.VABased = false; a.VA = 4096 }, mr.ReasonBadFBO},
		{"first PBLE ≥ count", func(a *mr.RegArgs) { a.STagIndex = 11; a.LPBLSize = 1; a.FirstPBLE = 4096 }, mr.ReasonPBLERange},
		{"page list past PBLE object", func(a *mr.RegArgs) {
			a.STagIndex = 11
			a.LPBLSize = 1
			a.FirstPBLE = 4095
			a.Length = 0x2000
		}, mr.ReasonPBLERange},
		{"level-2 roots past PBLE object", func(a *mr.RegArgs) {
			a.STagIndex = 11
			a.LPBLSize = 3
			a.FirstPBLE = 4095
			a.Length = 513 * 4096
		}, mr.ReasonPBLERange},
	}
	for _, tc := range tests {
		a := base
		tc.mod(&a)
		wantReason(t, "RegisterNonShared "+tc.name, f.tab.RegisterNonShared(a), tc.want)
	}
	// Level 2 with exactly two roots at the end of the PBLE object fits.
	ok := base
	ok.STagIndex, ok.LPBLSize, ok.FirstPBLE, ok.Length = 12, 3, 4094, 1024*4096
	wantReason(t, "level 2 at the end", f.tab.RegisterNonShared(ok), 0)

	allocTests := []struct {
		name string
		a    mr.AllocArgs
		want mr.Reason
	}{
		{"allocated", mr.AllocArgs{STagIndex: idx(1, 10), PD: 2, MR: true}, mr.ReasonAllocated},
		{"index 0", mr.AllocArgs{STagIndex: 0, PD: 2, MR: true}, mr.ReasonIndexRange},
		{"PD", mr.AllocArgs{STagIndex: 20, PD: 1 << 20, MR: true}, mr.ReasonBadPD},
		{"page size", mr.AllocArgs{STagIndex: 20, PD: 2, MR: true, PageSize: 3}, mr.ReasonBadPageSize},
		{"LPBLSIZE", mr.AllocArgs{STagIndex: 20, PD: 2, MR: true, LPBLSize: 2}, mr.ReasonBadPBLLevel},
		{"rights", mr.AllocArgs{STagIndex: 20, PD: 2, MR: true, Access: mr.AccessRemoteWrite}, mr.ReasonBadRights},
		{"length", mr.AllocArgs{STagIndex: 20, PD: 2, MR: true, Length: 1 << 46}, mr.ReasonBadLength},
		{"PBLE", mr.AllocArgs{STagIndex: 20, PD: 2, MR: true, LPBLSize: 1, FirstPBLE: 5000}, mr.ReasonPBLERange},
		{"MW index 0", mr.AllocArgs{STagIndex: idx(3, 0), PD: 2}, mr.ReasonIndexRange},
	}
	for _, tc := range allocTests {
		wantReason(t, "AllocSTag "+tc.name, f.tab.AllocSTag(tc.a), tc.want)
	}

	deallocTests := []struct {
		name      string
		index, pd uint32
		isMR      bool
		want      mr.Reason
	}{
		{"index 0", 0, 2, true, mr.ReasonIndexRange},
		{"beyond count", 300, 2, true, mr.ReasonIndexRange},
		{"not allocated", 13, 2, true, mr.ReasonNotAllocated},
		{"driver bits differ", idx(2, 10), 2, true, mr.ReasonIndexMismatch},
		{"PD differs", idx(1, 10), 3, true, mr.ReasonPDMismatch},
		{"MR dealloc'ed as MW", idx(1, 10), 2, false, mr.ReasonWrongType},
		{"ok", idx(1, 10), 2, true, 0},
		{"twice", idx(1, 10), 2, true, mr.ReasonNotAllocated},
	}
	for _, tc := range deallocTests {
		wantReason(t, "Dealloc "+tc.name, f.tab.Dealloc(tc.index, tc.pd, tc.isMR), tc.want)
	}
}

func TestNotCommitted(t *testing.T) {
	mem := hostmem.New()
	defer mem.Close()
	h := hmc.New(mem, profile.GEN2())
	tab := mr.NewTable(mem, h, profile.GEN2())
	wantReason(t, "RegisterNonShared", tab.RegisterNonShared(mr.RegArgs{STagIndex: 1}), mr.ReasonNotCommitted)
	wantReason(t, "AllocSTag", tab.AllocSTag(mr.AllocArgs{STagIndex: 1}), mr.ReasonNotCommitted)
	wantReason(t, "Dealloc", tab.Dealloc(1, 0, true), mr.ReasonNotCommitted)
	_, err := tab.Translate(0x101, 0, 0, 0, 1, mr.AccessLocalRead, false, nil)
	wantAE(t, "Translate", err, mr.AEBadSTagIndex)
	wantAE(t, "FastRegister", tab.FastRegister(mr.FastRegArgs{STagIndex: 1}), mr.AEBadSTagIndex)
}

// TestRecommit: a new COMMIT_FPM_VAL empties the table.
func TestRecommit(t *testing.T) {
	f := setup(t, false)
	f.reg(t, mr.RegArgs{STagIndex: 9, Key: 1, PD: 1, VABased: true, Length: 8, Access: mr.AccessLocalRead, RegAddr: 0x1_0000_0000})
	if _, err := f.tab.Translate(stag(9, 1), 1, 0, 0, 8, mr.AccessLocalRead, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.env.HMC.Commit(hmctest.CommitBuffer(hmctest.DefaultCounts)); err != nil {
		t.Fatal(err)
	}
	_, err := f.tab.Translate(stag(9, 1), 1, 0, 0, 8, mr.AccessLocalRead, false, nil)
	wantAE(t, "Translate after recommit", err, mr.AEBadSTagIndex)
}

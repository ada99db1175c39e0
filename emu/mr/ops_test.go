package mr_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/mr"
)

const (
	lr = mr.AccessLocalRead
	lw = mr.AccessLocalWrite
	rr = mr.AccessRemoteRead
	rw = mr.AccessRemoteWrite
	ra = mr.AccessRemoteAtomic
	bd = mr.AccessBind
)

// world registers the regions and windows the error tables use:
//
//	A  idx(3,5) key 0x42 PD 7 VA-based [0x10000, 0x14000) LR|LW|RR|RW|BIND, remote on, level 0
//	B  idx(0,6) key 0x01 PD 7 VA-based [0x10000, 0x11000) LR|RR, REMACCENABLED off
//	C  idx(0,7) key 0x02 PD 7 zero-based length 0x4000 LR|LW
//	D  idx(0,8)          PD 7 fast-register MR, allocated, invalid
//	E  idx(0,9) key 0x10 PD 7 type-1 window on A [0x11000, 0x12000) RR
//	F  idx(0,10) key 0x20 PD 7 type-2 window on A, QP 9, zero-based, A's [0x12000, 0x13000) RR|RW
//	G  idx(0,11) key 0x03 PD 7 level 1 at PBLE 4000, 2 pages (PBLEs 4000, 4001 set)
//	H  idx(0,12) key 0x04 PD 7 level 2 root PBLE 4010 → leaf index 0xffffffff
//	I  idx(0,25) key 0x05 PD 7 VA-based [0x20000, 0x21000) LR|LW|RA, REMACCENABLED off (an atomic-only MR)
func world(t *testing.T) *fixture {
	t.Helper()
	f := setup(t, false)
	f.reg(t, mr.RegArgs{STagIndex: idx(3, 5), Key: 0x42, PD: 7, VA: 0x10000, VABased: true, Length: 0x4000,
		Access: lr | lw | rr | rw | bd, RemoteAccess: true, RegAddr: 0x1_0000_0000})
	f.reg(t, mr.RegArgs{STagIndex: 6, Key: 1, PD: 7, VA: 0x10000, VABased: true, Length: 0x1000,
		Access: lr | rr, RemoteAccess: false, RegAddr: 0x1_1000_0000})
	f.reg(t, mr.RegArgs{STagIndex: 7, Key: 2, PD: 7, VA: 0, VABased: false, Length: 0x4000,
		Access: lr | lw, RegAddr: 0x1_2000_0000})
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 8, PD: 7, MR: true, Length: 0x10000, RemoteAccess: true}))
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 9, PD: 7, MWType1: true}))
	must(t, f.tab.BindMW(mr.BindArgs{MWSTag: stag(9, 0x10), MRSTag: stag(idx(3, 5), 0x42), PD: 7, QP: 1,
		VA: 0x11000, Length: 0x1000, Access: rr, VABased: true, Type1: true}))
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 10, PD: 7}))
	must(t, f.tab.BindMW(mr.BindArgs{MWSTag: stag(10, 0x20), MRSTag: stag(idx(3, 5), 0x42), PD: 7, QP: 9,
		VA: 0x12000, Length: 0x1000, Access: rr | rw, VABased: false}))
	f.pble(t, 4000, 0x7_0000_0000)
	f.pble(t, 4001, 0x7_0001_0000)
	f.reg(t, mr.RegArgs{STagIndex: 11, Key: 3, PD: 7, VA: 0x5000, VABased: true, Length: 0x2000,
		Access: lr, LPBLSize: 1, FirstPBLE: 4000})
	f.pble(t, 4010, 0xffff_ffff)
	f.reg(t, mr.RegArgs{STagIndex: 12, Key: 4, PD: 7, VA: 0, VABased: true, Length: 0x1000,
		Access: lr, LPBLSize: 3, FirstPBLE: 4010})
	f.reg(t, mr.RegArgs{STagIndex: 25, Key: 5, PD: 7, VA: 0x20000, VABased: true, Length: 0x1000,
		Access: lr | lw | ra, RemoteAccess: false, RegAddr: 0x1_3000_0000})
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTranslateErrors(t *testing.T) {
	f := world(t)
	A := stag(idx(3, 5), 0x42)
	tests := []struct {
		name        string
		stag, pd    uint32
		qp          uint32
		va, length  uint64
		need        mr.Access
		remote      bool
		ae          mr.AE
		spanIOVA    uint64
		spanLen     uint64
		spanLenZero bool
	}{
		{name: "ok local", stag: A, pd: 7, va: 0x10000, length: 0x4000, need: lr | lw, spanIOVA: 0x1_0000_0000, spanLen: 0x4000},
		{name: "ok remote write at end", stag: A, pd: 7, va: 0x13fff, length: 1, need: rw, remote: true, spanIOVA: 0x1_0000_3fff, spanLen: 1},
		{name: "STag 0", stag: 0, pd: 7, va: 0x10000, length: 1, need: lr, ae: mr.AESTagZeroInvalid},
		{name: "index 0 with a key", stag: 0x42, pd: 7, va: 0x10000, length: 1, need: lr, ae: mr.AEBadSTagIndex},
		{name: "index ≥ MR count", stag: stag(300, 1), pd: 7, length: 1, need: lr, ae: mr.AEBadSTagIndex},
		{name: "unallocated", stag: stag(13, 1), pd: 7, length: 1, need: lr, ae: mr.AEUnallocatedSTag},
		{name: "driver bits differ", stag: stag(idx(4, 5), 0x42), pd: 7, va: 0x10000, length: 1, need: lr, ae: mr.AEBadSTagKey},
		{name: "key differs", stag: stag(idx(3, 5), 0x43), pd: 7, va: 0x10000, length: 1, need: lr, ae: mr.AEBadSTagKey},
		{name: "fast-register MR not registered", stag: stag(8, 0), pd: 7, length: 1, need: lr, ae: mr.AEInvalidSTag},
		{name: "PD differs", stag: A, pd: 8, va: 0x10000, length: 1, need: lr, ae: mr.AEBadPD},
		{name: "local write without right", stag: stag(6, 1), pd: 7, va: 0x10000, length: 1, need: lw, ae: mr.AERightsViolation},
		{name: "remote read, REMACCENABLED off", stag: stag(6, 1), pd: 7, va: 0x10000, length: 1, need: rr, remote: true, ae: mr.AERightsViolation},
		{name: "remote atomic not granted", stag: A, pd: 7, va: 0x10000, length: 8, need: ra, remote: true, ae: mr.AERightsViolation},
		{name: "remote atomic without REMACCENABLED", stag: stag(25, 5), pd: 7, va: 0x20008, length: 8, need: ra, remote: true, spanIOVA: 0x1_3000_0008, spanLen: 8},
		{name: "atomic-only MR refuses remote write", stag: stag(25, 5), pd: 7, va: 0x20008, length: 8, need: rw, remote: true, ae: mr.AERightsViolation},
		{name: "wrap", stag: A, pd: 7, va: ^uint64(0) - 0xfff, length: 0x2000, need: lr, ae: mr.AEToWrap},
		{name: "below VA", stag: A, pd: 7, va: 0xffff, length: 2, need: lr, ae: mr.AEBoundsViolation},
		{name: "past end", stag: A, pd: 7, va: 0x13fff, length: 2, need: lr, ae: mr.AEBoundsViolation},
		{name: "zero-based ok", stag: stag(7, 2), pd: 7, va: 0x3ff0, length: 0x10, need: lw, spanIOVA: 0x1_2000_3ff0, spanLen: 0x10},
		{name: "zero-based past end", stag: stag(7, 2), pd: 7, va: 0x3ff1, length: 0x10, need: lw, ae: mr.AEBoundsViolation},
		{name: "zero length skips bounds", stag: A, pd: 7, va: 0x99999, length: 0, need: lr, spanLenZero: true},
		{name: "zero length still checks key", stag: stag(idx(3, 5), 1), pd: 7, length: 0, need: lr, ae: mr.AEBadSTagKey},
		{name: "type-1 window", stag: stag(9, 0x10), pd: 7, qp: 5, va: 0x11800, length: 0x10, need: rr, remote: true, spanIOVA: 0x1_0000_1800, spanLen: 0x10},
		{name: "window as L_Key", stag: stag(9, 0x10), pd: 7, va: 0x11800, length: 0x10, need: lr, ae: mr.AEInvalidSTag},
		{name: "window key differs", stag: stag(9, 0x11), pd: 7, va: 0x11800, length: 0x10, need: rr, remote: true, ae: mr.AEBadSTagKey},
		{name: "window right missing", stag: stag(9, 0x10), pd: 7, va: 0x11800, length: 0x10, need: rw, remote: true, ae: mr.AERightsViolation},
		{name: "window bounds", stag: stag(9, 0x10), pd: 7, va: 0x12000, length: 1, need: rr, remote: true, ae: mr.AEBoundsViolation},
		{name: "type-2 zero-based window", stag: stag(10, 0x20), pd: 7, qp: 9, va: 0xff0, length: 0x10, need: rw, remote: true, spanIOVA: 0x1_0000_2ff0, spanLen: 0x10},
		{name: "type-2 window, other QP", stag: stag(10, 0x20), pd: 7, qp: 8, va: 0, length: 0x10, need: rw, remote: true, ae: mr.AEBadQP},
		{name: "type-2 window bounds", stag: stag(10, 0x20), pd: 7, qp: 9, va: 0xff0, length: 0x11, need: rw, remote: true, ae: mr.AEBoundsViolation},
		{name: "level 1 across pages", stag: stag(11, 3), pd: 7, va: 0x5ff0, length: 0x20, need: lr, spanIOVA: 0x7_0000_0ff0, spanLen: 0x10},
		{name: "level 2 leaf index beyond PBLEs", stag: stag(12, 4), pd: 7, va: 0, length: 1, need: lr, ae: mr.AELCEQPCatastrophic},
	}
	for _, tc := range tests {
		spans, err := f.tab.Translate(tc.stag, tc.pd, tc.qp, tc.va, tc.length, tc.need, tc.remote, nil)
		wantAE(t, tc.name, err, tc.ae)
		if tc.ae != 0 || err != nil {
			if len(spans) != 0 {
				t.Errorf("%s: spans %v with error", tc.name, spans)
			}
			continue
		}
		if tc.spanLenZero {
			if len(spans) != 0 {
				t.Errorf("%s: spans %v, want none", tc.name, spans)
			}
			continue
		}
		if len(spans) == 0 || uint64(spans[0].IOVA) != tc.spanIOVA || spans[0].Len != tc.spanLen {
			t.Errorf("%s: spans %v, want first {%#x %#x}", tc.name, spans, tc.spanIOVA, tc.spanLen)
		}
	}

	// A PBLE the walk needs behind an invalid SD.
	if err := f.env.HMC.SetSD(hmc.SDEntry{Index: 0, Write: true}); err != nil {
		t.Fatal(err)
	}
	_, err := f.tab.Translate(stag(11, 3), 7, 0, 0x5000, 1, lr, false, nil)
	wantAE(t, "PBLE behind invalid SD", err, mr.AELCEQPCatastrophic)
}

func TestFastRegisterLifeCycle(t *testing.T) {
	f := world(t)
	D := func(key uint8) uint32 { return stag(8, key) }
	f.pble(t, 50, 0x8_0000_0000)
	f.pble(t, 51, 0x8_0000_2000)
	fr := mr.FastRegArgs{STagIndex: 8, Key: 0xa1, PD: 7, VA: 0x6000_0f00, VABased: true, Length: 0x1100,
		Access: lr | lw | rr | rw, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: 50}
	must(t, f.tab.FastRegister(fr))
	spans, err := f.tab.Translate(D(0xa1), 7, 0, 0x6000_0f00, 0x1100, rw, true, nil)
	if err != nil || len(spans) != 2 || spans[0].IOVA != 0x8_0000_0f00 || spans[1].IOVA != 0x8_0000_2000 || spans[1].Len != 0x1000 {
		t.Errorf("after FAST_REG: %v %v", spans, err)
	}
	wantAE(t, "FAST_REG of a valid MR", f.tab.FastRegister(fr), mr.AEFastRegValidSTag)
	wantAE(t, "LOCAL_INV, wrong key", f.tab.Invalidate(D(0xa2), 7, 0, false), mr.AEBadSTagKey)
	wantAE(t, "LOCAL_INV, wrong PD", f.tab.Invalidate(D(0xa1), 6, 0, false), mr.AEBadPD)
	wantAE(t, "LOCAL_INV", f.tab.Invalidate(D(0xa1), 7, 0, false), 0)
	_, err = f.tab.Translate(D(0xa1), 7, 0, 0x6000_0f00, 1, lr, false, nil)
	wantAE(t, "after LOCAL_INV", err, mr.AEInvalidSTag)
	wantAE(t, "LOCAL_INV again", f.tab.Invalidate(D(0xa1), 7, 0, false), 0)
	// Re-register with a new key and level 0; the old key is refused.
	fr.Key, fr.LPBLSize, fr.PBLAddr, fr.Length, fr.VA = 0xa2, 0, 0x8_1000_0000, 0x800, 0x6000_0100
	must(t, f.tab.FastRegister(fr))
	_, err = f.tab.Translate(D(0xa1), 7, 0, 0x6000_0100, 1, lr, false, nil)
	wantAE(t, "old key", err, mr.AEBadSTagKey)
	spans, err = f.tab.Translate(D(0xa2), 7, 0, 0x6000_0100, 0x800, lr, false, nil)
	if err != nil || len(spans) != 1 || spans[0].IOVA != 0x8_1000_0100 {
		t.Errorf("level-0 FAST_REG: %v %v", spans, err)
	}
	// SEND_WITH_INV invalidates remotely: the MR has remote rights.
	wantAE(t, "remote invalidate", f.tab.Invalidate(D(0xa2), 7, 3, true), 0)
	must(t, f.tab.Dealloc(8, 7, true))

	// FAST_REG failures.
	base := mr.FastRegArgs{STagIndex: 20, Key: 1, PD: 7, VA: 0x1000, VABased: true, Length: 0x1000,
		Access: lr | lw, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: 50}
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 20, PD: 7, MR: true, Length: 0x4000, RemoteAccess: true}))
	tests := []struct {
		name string
		mod  func(a *mr.FastRegArgs)
		ae   mr.AE
	}{
		{"index ≥ count", func(a *mr.FastRegArgs) { a.STagIndex = 256 }, mr.AEBadSTagIndex},
		{"unallocated", func(a *mr.FastRegArgs) { a.STagIndex = 21 }, mr.AEUnallocatedSTag},
		{"driver bits", func(a *mr.FastRegArgs) { a.STagIndex = idx(1, 20) }, mr.AEBadSTagKey},
		{"window", func(a *mr.FastRegArgs) { a.STagIndex = 9 }, mr.AEFastRegMWSTag},
		{"valid REG_MR region", func(a *mr.FastRegArgs) { a.STagIndex = 7 }, mr.AEFastRegValidSTag},
		{"PD", func(a *mr.FastRegArgs) { a.PD = 1 }, mr.AEBadPD},
		{"page size 3", func(a *mr.FastRegArgs) { a.PageSize = 3 }, mr.AEFastRegInvalidPBLHPSCfg},
		{"LPBLSIZE 2", func(a *mr.FastRegArgs) { a.LPBLSize = 2 }, mr.AEFastRegInvalidPBLHPSCfg},
		{"remote write without local write", func(a *mr.FastRegArgs) { a.Access = lr | rw }, mr.AEFastRegInvalidRights},
		{"longer than allocated", func(a *mr.FastRegArgs) { a.Length = 0x4001 }, mr.AEFastRegInvalidLength},
		{"VA wraps", func(a *mr.FastRegArgs) { a.VA = ^uint64(0) }, mr.AEFastRegInvalidLength},
		{"first PBLE beyond count", func(a *mr.FastRegArgs) { a.FirstPBLE = 4096 }, mr.AEFastRegPBLEMismatch},
		{"page list past PBLEs", func(a *mr.FastRegArgs) { a.FirstPBLE = 4095; a.Length = 0x2000 }, mr.AEFastRegPBLEMismatch},
		{"ok", func(a *mr.FastRegArgs) {}, 0},
	}
	for _, tc := range tests {
		a := base
		tc.mod(&a)
		wantAE(t, "FastRegister "+tc.name, f.tab.FastRegister(a), tc.ae)
	}
}

func TestInvalidateErrors(t *testing.T) {
	f := world(t)
	A := stag(idx(3, 5), 0x42)
	tests := []struct {
		name     string
		stag, pd uint32
		qp       uint32
		remote   bool
		ae       mr.AE
	}{
		{"STag 0", 0, 7, 0, false, mr.AESTagZeroInvalid},
		{"index ≥ count", stag(999, 1), 7, 0, false, mr.AEBadSTagIndex},
		{"unallocated", stag(14, 1), 7, 0, false, mr.AEUnallocatedSTag},
		{"type-1 window", stag(9, 0x10), 7, 0, false, mr.AEInvalidateType1MW},
		{"type-1 window, remote", stag(9, 0x10), 7, 0, true, mr.AEInvalidateType1MW},
		{"MR with bound windows", A, 7, 0, false, mr.AEInvalidateMRWithBoundWindows},
		{"key", stag(idx(3, 5), 0x41), 7, 0, false, mr.AEBadSTagKey},
		{"PD", A, 1, 0, false, mr.AEBadPD},
		{"remote, no remote rights", stag(7, 2), 7, 0, true, mr.AEInvalidateNoRemoteAccessRights},
		{"remote, REMACCENABLED off", stag(6, 1), 7, 0, true, mr.AEInvalidateNoRemoteAccessRights},
		{"type-2 window, remote, other QP", stag(10, 0x20), 7, 8, true, mr.AEBadQP},
		{"type-2 window, remote, its QP", stag(10, 0x20), 7, 9, true, 0},
		{"type-2 window again: already invalid", stag(10, 0x20), 7, 9, true, 0},
		{"local invalidate of a REG_MR region", stag(7, 2), 7, 0, false, 0},
	}
	for _, tc := range tests {
		wantAE(t, tc.name, f.tab.Invalidate(tc.stag, tc.pd, tc.qp, tc.remote), tc.ae)
	}
	// The type-2 window released A: one window (E) remains bound.
	if r, _ := f.tab.Get(idx(3, 5)); r.BoundMWs != 1 {
		t.Errorf("A bound windows %d, want 1", r.BoundMWs)
	}
}

func TestBindLifeCycle(t *testing.T) {
	f := world(t)
	bound := func(index uint32) uint32 {
		r, ok := f.tab.Get(index)
		if !ok {
			t.Fatalf("Get(%#x) failed", index)
		}
		return r.BoundMWs
	}
	if n := bound(idx(3, 5)); n != 2 {
		t.Fatalf("A has %d windows, want 2", n)
	}
	// DEALLOC_STAG of A is refused while windows are bound.
	wantReason(t, "dealloc A with windows", f.tab.Dealloc(idx(3, 5), 7, true), mr.ReasonBoundWindows)

	// A second MR with BIND; re-bind the type-1 window E there.
	f.reg(t, mr.RegArgs{STagIndex: 30, Key: 5, PD: 7, VA: 0x90000, VABased: true, Length: 0x1000,
		Access: lr | lw | bd, RegAddr: 0x1_5000_0000})
	must(t, f.tab.BindMW(mr.BindArgs{MWSTag: stag(9, 0x11), MRSTag: stag(30, 5), PD: 7, QP: 1,
		VA: 0x90100, Length: 0x100, Access: rr | rw, VABased: true, Type1: true}))
	if bound(idx(3, 5)) != 1 || bound(30) != 1 {
		t.Errorf("after re-bind: A %d, M30 %d windows, want 1, 1", bound(idx(3, 5)), bound(30))
	}
	_, err := f.tab.Translate(stag(9, 0x10), 7, 0, 0x11800, 1, rr, true, nil)
	wantAE(t, "old window key", err, mr.AEBadSTagKey)
	spans, err := f.tab.Translate(stag(9, 0x11), 7, 0, 0x90180, 0x10, rw, true, nil)
	if err != nil || len(spans) != 1 || spans[0].IOVA != 0x1_5000_0180 {
		t.Errorf("re-bound window: %v %v", spans, err)
	}
	// Zero-length bind unbinds it.
	must(t, f.tab.BindMW(mr.BindArgs{MWSTag: stag(9, 0x12), MRSTag: stag(30, 5), PD: 7, VABased: true, Type1: true}))
	if bound(30) != 0 {
		t.Errorf("after zero-length bind M30 has %d windows", bound(30))
	}
	_, err = f.tab.Translate(stag(9, 0x12), 7, 0, 0x90180, 1, rr, true, nil)
	wantAE(t, "unbound window", err, mr.AEInvalidSTag)
	must(t, f.tab.Dealloc(30, 7, true))

	// Type-2 window F is bound to QP 9; DESTROY_QP with IGNOREMWBOUND.
	if n := f.tab.QPWindows(9); n != 1 {
		t.Errorf("QPWindows(9) = %d", n)
	}
	if n, err := f.tab.ReleaseQPWindows(9); n != 1 || err != nil {
		t.Errorf("ReleaseQPWindows(9) = %d, %v", n, err)
	}
	if f.tab.QPWindows(9) != 0 || bound(idx(3, 5)) != 0 {
		t.Errorf("after release: QPWindows %d, A windows %d", f.tab.QPWindows(9), bound(idx(3, 5)))
	}
	// Dealloc of the windows, then of A.
	must(t, f.tab.Dealloc(9, 7, false))
	must(t, f.tab.Dealloc(10, 7, false))
	wantReason(t, "dealloc window twice", f.tab.Dealloc(10, 7, false), mr.ReasonNotAllocated)
	must(t, f.tab.Dealloc(idx(3, 5), 7, true))

	// Deallocating a bound window releases its MR.
	g := world(t)
	wantReason(t, "dealloc window as MR", g.tab.Dealloc(9, 7, true), mr.ReasonWrongType)
	must(t, g.tab.Dealloc(9, 7, false))
	if r, _ := g.tab.Get(idx(3, 5)); r.BoundMWs != 1 {
		t.Errorf("after dealloc of bound window A has %d", r.BoundMWs)
	}
}

func TestBindErrors(t *testing.T) {
	f := world(t)
	A := stag(idx(3, 5), 0x42)
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 40, PD: 7}))                // type-2 window, unbound
	must(t, f.tab.AllocSTag(mr.AllocArgs{STagIndex: 41, PD: 7, MWType1: true})) // type-1 window
	f.reg(t, mr.RegArgs{STagIndex: 42, Key: 6, PD: 7, VA: 0x1000, VABased: true, Length: 0x1000,
		Access: lr | rr, RegAddr: 0x1_6000_0000}) // no BIND right
	f.reg(t, mr.RegArgs{STagIndex: 43, Key: 7, PD: 7, VA: 0, VABased: false, Length: 0x1000,
		Access: lr | lw | bd, RegAddr: 0x1_7000_0000}) // zero-based
	f.reg(t, mr.RegArgs{STagIndex: 44, Key: 8, PD: 7, VA: 0x1000, VABased: true, Length: 0x1000,
		Access: lr | bd, RegAddr: 0x1_8000_0000}) // BIND but no local write
	f.reg(t, mr.RegArgs{STagIndex: 45, Key: 9, PD: 6, VA: 0x1000, VABased: true, Length: 0x1000,
		Access: lr | lw | bd, RegAddr: 0x1_9000_0000}) // other PD
	base := mr.BindArgs{MWSTag: stag(40, 1), MRSTag: A, PD: 7, QP: 3, VA: 0x10000, Length: 0x1000,
		Access: rr, VABased: true}
	tests := []struct {
		name string
		mod  func(a *mr.BindArgs)
		ae   mr.AE
	}{
		{"MW STag 0", func(a *mr.BindArgs) { a.MWSTag = 0 }, mr.AESTagZeroInvalid},
		{"MW index ≥ count", func(a *mr.BindArgs) { a.MWSTag = stag(256, 1) }, mr.AEBadSTagIndex},
		{"MW unallocated", func(a *mr.BindArgs) { a.MWSTag = stag(46, 1) }, mr.AEUnallocatedSTag},
		{"MW driver bits", func(a *mr.BindArgs) { a.MWSTag = stag(idx(2, 40), 1) }, mr.AEBadSTagKey},
		{"bind on an MR STag", func(a *mr.BindArgs) { a.MWSTag = stag(7, 9) }, mr.AEMWBindOfMRSTag},
		{"type-1 WQE on type-2 window", func(a *mr.BindArgs) { a.Type1 = true }, mr.AEMWBindWrongType},
		{"type-2 WQE on type-1 window", func(a *mr.BindArgs) { a.MWSTag = stag(41, 1) }, mr.AEMWBindWrongType},
		{"type-2 window already bound", func(a *mr.BindArgs) { a.MWSTag = stag(10, 0x21) }, mr.AEMWBindValidSTag},
		{"window PD", func(a *mr.BindArgs) { a.PD = 6 }, mr.AEBadPD},
		{"zero-based type-1", func(a *mr.BindArgs) { a.MWSTag = stag(41, 1); a.Type1 = true; a.VABased = false }, mr.AEMWBindZeroBasedType1MW},
		{"parent index ≥ count", func(a *mr.BindArgs) { a.MRSTag = stag(300, 1) }, mr.AEMWBindToInvalidParent},
		{"parent unallocated", func(a *mr.BindArgs) { a.MRSTag = stag(47, 1) }, mr.AEMWBindToInvalidParent},
		{"parent is a window", func(a *mr.BindArgs) { a.MRSTag = stag(9, 0x10) }, mr.AEMWBindToMWSTag},
		{"parent invalid (fast-register MR)", func(a *mr.BindArgs) { a.MRSTag = stag(8, 0) }, mr.AEMWBindToInvalidParent},
		{"parent key", func(a *mr.BindArgs) { a.MRSTag = stag(idx(3, 5), 0x40) }, mr.AEMWBindToInvalidParent},
		{"parent PD", func(a *mr.BindArgs) { a.MRSTag = stag(45, 9); a.VA = 0x1000 }, mr.AEBadPD},
		{"parent zero-based", func(a *mr.BindArgs) { a.MRSTag = stag(43, 7); a.VA = 0 }, mr.AEMWBindToZeroBasedSTag},
		{"parent without BIND", func(a *mr.BindArgs) { a.MRSTag = stag(42, 6); a.VA = 0x1000 }, mr.AEMWBindBindDisabled},
		{"remote write, parent without local write", func(a *mr.BindArgs) { a.MRSTag = stag(44, 8); a.VA = 0x1000; a.Access = rw }, mr.AEMWBindInvalidRights},
		{"below parent", func(a *mr.BindArgs) { a.VA = 0xf000 }, mr.AEMWBindInvalidBounds},
		{"past parent", func(a *mr.BindArgs) { a.VA = 0x13001 }, mr.AEMWBindInvalidBounds},
		{"wraps", func(a *mr.BindArgs) { a.VA = ^uint64(0) - 10 }, mr.AEMWBindInvalidBounds},
		{"ok", func(a *mr.BindArgs) {}, 0},
	}
	for _, tc := range tests {
		a := base
		tc.mod(&a)
		wantAE(t, "BindMW "+tc.name, f.tab.BindMW(a), tc.ae)
	}
}

package driver

import (
	"errors"
	"syscall"
	"testing"
)

// TestReregUserMR: irdma_rereg_user_mr keeps the STag and redoes the
// hardware registration — DEALLOC_STAG then REG_MR of the same STag —
// with the new rights, the new PD's id, and a new translation (its pages,
// PBLEs and length); flags outside TRANS|PD|ACCESS are EOPNOTSUPP, and a
// failing REG_MR leaves an MR that deregisters without a DEALLOC_STAG.
func TestReregUserMR(t *testing.T) {
	f := newFakeHW(t, 2)
	d := openFake(t, f)
	pd, pd2 := mustPD(t, d), mustPD(t, d)
	va := uint64(0x7f00_0000_1000)
	pages := pagesOf(t, d, 2, 0)
	mr, err := d.RegUserMR(pd, nil, va, 2*4096, va, AccessLocalWrite, pages, MemReg{})
	if err != nil {
		t.Fatal(err)
	}
	stag := mr.LKey()

	// Access and PD.
	n := f.count()
	if err := d.ReregUserMR(mr, ReregAccess|ReregPD, pd2, AccessLocalWrite|AccessRemoteWrite, nil); err != nil {
		t.Fatal(err)
	}
	ops := opsOf(f.since(n))
	if len(ops) != 2 || ops[0] != cqpOpDeallocSTag || ops[1] != cqpOpRegMR {
		t.Fatalf("rereg ops %x, want DEALLOC_STAG then REG_MR", ops)
	}
	dw := lastOp(t, f, n, cqpOpDeallocSTag)
	if dw.Q[2]>>8&0xffffff != uint64(stag>>8) || uint32(d.prof.Fields.STagPDID.Get(dw.Q[1])) != pd.id {
		t.Errorf("DEALLOC_STAG %#x: want the STag's index and the old PD %d", dw.Q, pd.id)
	}
	w := lastOp(t, f, n, cqpOpRegMR)
	// ARIGHTS [52:48] (irdma_get_mr_access): LOCALREAD 0x01, LOCALWRITE
	// 0x02, REMOTEWRITE 0x0a; PDID the new PD's.
	if uint32(w.Q[2]) != stag || w.Q[3]>>48&0x1f != 0x0b || uint32(d.prof.Fields.STagPDID.Get(w.Q[1])) != pd2.id {
		t.Errorf("REG_MR %#x: want STag %#x, rights 0x0b, PD %d", w.Q, stag, pd2.id)
	}
	if mr.LKey() != stag || mr.pd != pd2 || pd.users.Load() != 0 || pd2.users.Load() != 1 {
		t.Errorf("after rereg: key %#x, pd users %d/%d", mr.LKey(), pd.users.Load(), pd2.users.Load())
	}

	// Translation: 7 scattered pages at another VA, level-1 PBLEs.
	sc := scattered(t, d, 7)
	va2 := uint64(0x7e00_0000_0000)
	inUse := d.pble.inUse
	n = f.count()
	if err := d.ReregUserMR(mr, ReregTrans, nil, 0, &ReregTranslation{Start: va2, Length: 7 * 4096, Virt: va2, Pages: sc}); err != nil {
		t.Fatal(err)
	}
	w = lastOp(t, f, n, cqpOpRegMR)
	if uint32(w.Q[2]) != stag || w.Q[0] != va2 || w.Q[1]&(1<<46-1) != 7*4096 || w.Q[3]>>44&3 != 1 ||
		!mr.pblAllocated || d.pble.inUse != inUse+7 || mr.Length() != 7*4096 {
		t.Errorf("translated REG_MR %#x (PBLEs %d→%d)", w.Q, inUse, d.pble.inUse)
	}
	for i, pg := range sc {
		if got := d.pble.read(mr.palloc.l1.idx + uint32(i)); got != pg {
			t.Errorf("PBLE %d = %#x, want %#x", i, got, pg)
		}
	}

	// Bad flags, bad translations.
	if err := d.ReregUserMR(mr, 8, nil, 0, nil); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("flag 8: %v", err)
	}
	if err := d.ReregUserMR(mr, ReregTrans, nil, 0, &ReregTranslation{Start: va2, Length: 8 * 4096, Virt: va2, Pages: sc}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("too few pages: %v", err)
	}

	// REG_MR fails: the MR is left unregistered; dereg frees it without
	// a DEALLOC_STAG, and the STag index goes back.
	f.fail[cqpOpRegMR] = [2]uint16{0xffff, 1}
	if err := d.ReregUserMR(mr, ReregAccess, nil, AccessLocalWrite, nil); !errors.Is(err, syscall.EIO) {
		t.Errorf("failing REG_MR: %v", err)
	}
	delete(f.fail, cqpOpRegMR)
	n = f.count()
	if err := d.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	for _, op := range opsOf(f.since(n)) {
		if op == cqpOpDeallocSTag {
			t.Error("DEALLOC_STAG of an STag the failed rereg already deallocated")
		}
	}
	if d.mrIDs.test((stag & d.mrStagMask) >> 8) {
		t.Error("stag index not freed")
	}
	if d.pble.inUse != inUse || pd2.users.Load() != 0 {
		t.Errorf("PBLEs %d (want %d), PD users %d", d.pble.inUse, inUse, pd2.users.Load())
	}
}

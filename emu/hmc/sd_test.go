package hmc_test

import (
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hmc/hmctest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

func TestDecodeSDEntry(t *testing.T) {
	tests := []struct {
		name      string
		cmd, data uint64
		want      hmc.SDEntry
	}{
		{
			// hmc.c:irdma_set_sd_entry for a direct SD 3 at 0x1_0020_0000:
			// cmd = 3 | BIT(15) | PMSDWR b31; data = PA | 512<<2 | type 1 | valid.
			name: "set direct",
			cmd:  0x0000_0000_8000_8003,
			data: 0x0000_0001_0020_0803,
			want: hmc.SDEntry{Index: 3, PartSel: true, Write: true, Valid: true,
				Type: hmc.SDDirect, PA: 0x1_0020_0000, BPCount: 512},
		},
		{
			name: "set paged, ENTRY_VALID b63 in cmd",
			cmd:  0x8000_0000_8000_8011,
			data: 0x0000_0002_0000_5801,
			want: hmc.SDEntry{Index: 0x11, PartSel: true, Write: true, Valid: true,
				Type: hmc.SDPaged, PA: 0x2_0000_5000, BPCount: 512},
		},
		{
			// irdma_clr_sd_entry: no address, valid 0.
			name: "clear direct",
			cmd:  0x8000_8005,
			data: 0x802,
			want: hmc.SDEntry{Index: 5, PartSel: true, Write: true, Type: hmc.SDDirect, BPCount: 512},
		},
		{
			name: "index above 12 bits is dropped",
			cmd:  0x8000_1fff,
			data: 0x5,
			want: hmc.SDEntry{Index: 0xfff, Write: true, Valid: true, Type: hmc.SDPaged, BPCount: 1},
		},
	}
	for _, tc := range tests {
		if got := hmc.DecodeSDEntry(tc.cmd, tc.data); got != tc.want {
			t.Errorf("%s: DecodeSDEntry(%#x, %#x) = %+v, want %+v", tc.name, tc.cmd, tc.data, got, tc.want)
		}
	}
}

// committed returns an HMC with hmctest's default counts committed (one SD:
// QP at 0x2000, MR at 0xe200, APBVT at 0, PBLE at 0x14000) and no SD set.
func committed(t *testing.T) (*hostmem.Memory, *hmc.HMC) {
	t.Helper()
	mem, h := newHMC(t)
	if err := h.Commit(hmctest.CommitBuffer(hmctest.DefaultCounts)); err != nil {
		t.Fatal(err)
	}
	return mem, h
}

func alloc(t *testing.T, mem *hostmem.Memory, size int, align uint64) *hostmem.Region {
	t.Helper()
	r, err := mem.Alloc(size, align, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustIOVA(t *testing.T, h *hmc.HMC, ty hmc.ObjType, idx uint32) hostmem.IOVA {
	t.Helper()
	a, err := h.ObjectIOVA(ty, idx)
	if err != nil {
		t.Fatalf("ObjectIOVA(%v, %d): %v", ty, idx, err)
	}
	return a
}

func TestObjectIOVADirect(t *testing.T) {
	mem, h := committed(t)
	bp := alloc(t, mem, hmc.DirectBPSize, hmc.DirectBPSize)
	e := hmc.DecodeSDEntry(0x8000_8000, uint64(bp.IOVA())|0x803)
	if err := h.SetSD(e); err != nil {
		t.Fatalf("SetSD: %v", err)
	}
	base := bp.IOVA()
	tests := []struct {
		ty   hmc.ObjType
		idx  uint32
		want hostmem.IOVA
	}{
		{hmc.APBVT, 0, base},
		{hmc.QP, 0, base + 0x2000},
		{hmc.QP, 5, base + 0x2000 + 5*512},
		{hmc.QP, 63, base + 0x2000 + 63*512},
		{hmc.CQ, 127, base + 0xa000 + 127*128},
		{hmc.ARP, 1, base + 0xe000 + 8},
		{hmc.MR, 3, base + 0xe200 + 3*64},
		{hmc.FSIMC, 15, base + 0x12200 + 15*128},
		{hmc.FSIAV, 2, base + 0x12a00 + 2*64},
		{hmc.PBLE, 7, base + 0x14000 + 7*8},
		{hmc.PBLE, 4095, base + 0x14000 + 4095*8},
	}
	for _, tc := range tests {
		if got := mustIOVA(t, h, tc.ty, tc.idx); got != tc.want {
			t.Errorf("ObjectIOVA(%v, %d) = %#x, want %#x", tc.ty, tc.idx, got, tc.want)
		}
	}
	got, ok := h.SD(0)
	if !ok || got != e {
		t.Errorf("SD(0) = %+v %v, want %+v", got, ok, e)
	}
	// Clearing the SD (irdma_clr_sd_entry) makes every object unreachable.
	if err := h.SetSD(hmc.DecodeSDEntry(0x8000_8000, 0x802)); err != nil {
		t.Fatalf("clear SD: %v", err)
	}
	if _, err := h.ObjectIOVA(hmc.QP, 0); !errors.Is(err, hmc.ErrSDInvalid) {
		t.Errorf("after clear: %v, want ErrSDInvalid", err)
	}
	if got, ok := h.SD(0); !ok || got.Valid || got.Type != hmc.SDInvalid {
		t.Errorf("SD(0) after clear = %+v", got)
	}
}

// TestObjectIOVAPaged builds a PD page by hand: PD entry k points at page
// (7·k mod 512) of a 2 MB region, so only a correct PD walk finds the
// object.
func TestObjectIOVAPaged(t *testing.T) {
	mem, h := committed(t)
	pages := alloc(t, mem, hmc.DirectBPSize, 0)
	pdp := alloc(t, mem, hmc.PagedBPSize, 0)
	page := func(k uint64) hostmem.IOVA { return pages.IOVA() + hostmem.IOVA((7*k%512)*4096) }
	for k := uint64(0); k < 512; k++ {
		if err := mem.Store64(pdp.IOVA()+hostmem.IOVA(8*k), uint64(page(k))|1); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.SetSD(hmc.DecodeSDEntry(0x8000_8000, uint64(pdp.IOVA())|0x801)); err != nil {
		t.Fatalf("SetSD paged: %v", err)
	}
	tests := []struct {
		ty   hmc.ObjType
		idx  uint32
		want hostmem.IOVA
	}{
		{hmc.QP, 0, page(2)},          // FPM 0x2000: PD 2, offset 0
		{hmc.QP, 5, page(2) + 0xa00},  // FPM 0x2a00
		{hmc.QP, 8, page(3)},          // FPM 0x3000
		{hmc.MR, 0, page(14) + 0x200}, // FPM 0xe200
		{hmc.PBLE, 513, page(21) + 8}, // FPM 0x14000 + 0x1008 = 0x15008
		{hmc.FSIAV, 63, page(19) + 0xa00 + 63*64 - 0x1000},
	}
	for _, tc := range tests {
		if got := mustIOVA(t, h, tc.ty, tc.idx); got != tc.want {
			t.Errorf("ObjectIOVA(%v, %d) = %#x, want %#x", tc.ty, tc.idx, got, tc.want)
		}
	}

	// The 8 KB APBVT entry cannot be resolved through 4 KB pages.
	if _, err := h.ObjectIOVA(hmc.APBVT, 0); !errors.Is(err, hmc.ErrSpansPages) {
		t.Errorf("APBVT in paged SD: %v, want ErrSpansPages", err)
	}

	// PD entries are read from host memory on every lookup: a rewritten
	// entry is seen at once, with or without PFHMC_PDINV.
	newPage := pages.IOVA() + 511*4096
	if err := mem.Store64(pdp.IOVA()+3*8, uint64(newPage)|1); err != nil {
		t.Fatal(err)
	}
	if got := mustIOVA(t, h, hmc.QP, 8); got != newPage {
		t.Errorf("after PD rewrite ObjectIOVA(QP, 8) = %#x, want %#x", got, newPage)
	}
	// A cleared PD entry (irdma_remove_pd_bp writes 0).
	if err := mem.Store64(pdp.IOVA()+3*8, 0); err != nil {
		t.Fatal(err)
	}
	before := h.PDInvalidations()
	h.InvalidatePD(0x0003_8000) // PMSDIDX 0, PARTSEL, PMPDIDX 3
	if h.PDInvalidations() != before+1 {
		t.Errorf("PDInvalidations not counted")
	}
	if sd, pd := hmc.DecodePDInv(0x0003_8000); sd != 0 || pd != 3 {
		t.Errorf("DecodePDInv = %d, %d, want 0, 3", sd, pd)
	}
	_, err := h.ObjectIOVA(hmc.QP, 8)
	var he *hmc.Error
	if !errors.Is(err, hmc.ErrPDInvalid) || !errors.As(err, &he) || he.SD != 0 || he.PD != 3 {
		t.Errorf("cleared PD entry: %v, want ErrPDInvalid at SD 0 PD 3", err)
	}
}

func TestObjectIOVABPCount(t *testing.T) {
	mem, h := committed(t)
	pages := alloc(t, mem, 4*4096, 0)
	pdp := alloc(t, mem, hmc.PagedBPSize, 0)
	for k := uint64(0); k < 512; k++ {
		if err := mem.Store64(pdp.IOVA()+hostmem.IOVA(8*k), uint64(pages.IOVA())|1); err != nil {
			t.Fatal(err)
		}
	}
	// A paged SD with PMSDBPCOUNT 4: only FPM [0, 16 KB) is backed.
	if err := h.SetSD(hmc.DecodeSDEntry(0x8000_8000, uint64(pdp.IOVA())|4<<2|1)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ObjectIOVA(hmc.QP, 0); err != nil { // PD 2
		t.Errorf("QP 0 (PD 2): %v", err)
	}
	if _, err := h.ObjectIOVA(hmc.QP, 16); !errors.Is(err, hmc.ErrPDInvalid) { // FPM 0x4000: PD 4
		t.Errorf("QP 16 (PD 4 ≥ BPCount): %v, want ErrPDInvalid", err)
	}
}

func TestObjectIOVAFault(t *testing.T) {
	mem, h := committed(t)
	pdp := alloc(t, mem, hmc.PagedBPSize, 0)
	if err := h.SetSD(hmc.DecodeSDEntry(0x8000_8000, uint64(pdp.IOVA())|0x801)); err != nil {
		t.Fatal(err)
	}
	if err := mem.Unmap(pdp); err != nil {
		t.Fatal(err)
	}
	_, err := h.ObjectIOVA(hmc.QP, 0)
	if !errors.Is(err, hmc.ErrFault) || !errors.Is(err, hostmem.ErrFault) {
		t.Errorf("PD page unmapped: %v, want ErrFault wrapping hostmem.ErrFault", err)
	}
}

func TestObjectIOVAErrors(t *testing.T) {
	_, fresh := newHMC(t)
	if _, err := fresh.ObjectIOVA(hmc.QP, 0); !errors.Is(err, hmc.ErrNotCommitted) {
		t.Errorf("before Commit: %v", err)
	}
	if fresh.Count(hmc.QP) != 0 || fresh.SDCount() != 0 || fresh.Committed() {
		t.Errorf("uncommitted HMC reports counts")
	}
	_, h := committed(t) // no SD set yet
	tests := []struct {
		ty  hmc.ObjType
		idx uint32
		err error
	}{
		{hmc.ObjType(hmc.NumObjTypes), 0, hmc.ErrBadType},
		{255, 0, hmc.ErrBadType},
		{hmc.QP, 64, hmc.ErrIndex},
		{hmc.QP, 0xffffffff, hmc.ErrIndex},
		{hmc.SRQ, 0, hmc.ErrIndex},
		{hmc.HTE, 0, hmc.ErrIndex},
		{hmc.APBVT, 1, hmc.ErrIndex},
		{hmc.PBLE, 4096, hmc.ErrIndex},
		{hmc.QP, 0, hmc.ErrSDInvalid},
		{hmc.PBLE, 4095, hmc.ErrSDInvalid},
	}
	for _, tc := range tests {
		if _, err := h.ObjectIOVA(tc.ty, tc.idx); !errors.Is(err, tc.err) {
			t.Errorf("ObjectIOVA(%v, %d) = %v, want %v", tc.ty, tc.idx, err, tc.err)
		}
	}
}

func TestSetSDErrors(t *testing.T) {
	_, fresh := newHMC(t)
	if err := fresh.SetSD(hmc.SDEntry{Write: true}); !errors.Is(err, hmc.ErrNotCommitted) {
		t.Errorf("SetSD before Commit: %v", err)
	}
	mem, h := committed(t)
	bp := alloc(t, mem, hmc.DirectBPSize, 0)
	small := alloc(t, mem, 4096, 0)
	good := hmc.SDEntry{Index: 0, Write: true, Valid: true, Type: hmc.SDDirect, PA: bp.IOVA(), BPCount: 512}
	tests := []struct {
		name string
		mod  func(e *hmc.SDEntry)
		err  error
	}{
		{"PMSDWR clear", func(e *hmc.SDEntry) { e.Write = false }, hmc.ErrSDEntry},
		{"index beyond SD count", func(e *hmc.SDEntry) { e.Index = 1 }, hmc.ErrSDIndex},
		{"index 4095", func(e *hmc.SDEntry) { e.Index = 4095 }, hmc.ErrSDIndex},
		{"zero address", func(e *hmc.SDEntry) { e.PA = 0 }, hmc.ErrSDEntry},
		{"unaligned address", func(e *hmc.SDEntry) { e.PA++ }, hmc.ErrSDEntry},
		{"invalid type", func(e *hmc.SDEntry) { e.Type = hmc.SDInvalid }, hmc.ErrSDEntry},
		{"paged, no backing pages", func(e *hmc.SDEntry) { e.Type = hmc.SDPaged; e.BPCount = 0 }, hmc.ErrSDEntry},
		{"paged, 513 backing pages", func(e *hmc.SDEntry) { e.Type = hmc.SDPaged; e.BPCount = 513 }, hmc.ErrSDEntry},
		{"direct over a 4 KB region", func(e *hmc.SDEntry) { e.PA = small.IOVA() }, hmc.ErrSDBacking},
		{"direct at unmapped address", func(e *hmc.SDEntry) { e.PA = 0x1000 }, hmc.ErrSDBacking},
		{"direct starting inside region end", func(e *hmc.SDEntry) { e.PA = bp.IOVA() + 4096 }, hmc.ErrSDBacking},
		{"paged PD page unmapped", func(e *hmc.SDEntry) { e.Type = hmc.SDPaged; e.PA = bp.End() }, hmc.ErrSDBacking},
		{"clear beyond SD count", func(e *hmc.SDEntry) { e.Valid = false; e.Index = 9 }, hmc.ErrSDIndex},
	}
	for _, tc := range tests {
		e := good
		tc.mod(&e)
		err := h.SetSD(e)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: SetSD(%+v) = %v, want %v", tc.name, e, err, tc.err)
		}
		if got, _ := h.SD(0); got.Valid {
			t.Errorf("%s: failed SetSD left SD 0 valid", tc.name)
		}
	}
	if err := h.SetSD(good); err != nil {
		t.Errorf("good entry: %v", err)
	}
	small4k := good
	small4k.Type, small4k.PA = hmc.SDPaged, small.IOVA()
	if err := h.SetSD(small4k); err != nil {
		t.Errorf("paged SD over a 4 KB PD page: %v", err)
	}
}

package profile_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// TestGEN2 pins the values user space and the driver see (docs/hw-datapath.md
// "GEN_2 capabilities", docs/hw-controlpath.md "GEN_2 limits", docs/uverbs.md
// "What rdma-core 44 sends (measured)").
func TestGEN2(t *testing.T) {
	p := profile.GEN2()
	if err := p.Validate(); err != nil {
		t.Fatalf("GEN2 does not validate: %v", err)
	}
	wantUK := profile.UKAttrs{
		HWRev:          2,
		FeatureFlags:   0x3,
		MaxHWWQFrags:   13,
		MaxHWReadSGEs:  13,
		MaxHWInline:    101,
		MaxHWRQQuanta:  32768,
		MaxHWWQQuanta:  32768,
		MinHWCQSize:    1,
		MaxHWCQSize:    1048575,
		MaxHWSQChunk:   8,
		MinHWWQSize:    8,
		MaxHWSRQQuanta: 0,
	}
	if diff := cmp.Diff(wantUK, p.UK); diff != "" {
		t.Errorf("uk_attrs (-want +got):\n%s", diff)
	}
	wantID := profile.Identity{VendorID: 0x8086, DeviceID: 0x1592, SubsystemVendorID: 0x8086,
		SubsystemID: 2, Revision: 2, FWMajor: 1, FWMinor: 60}
	if diff := cmp.Diff(wantID, p.Identity); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	if p.Identity.DeviceID != 5522 {
		t.Errorf("vendor_part_id %d, ibv_devinfo showed 5522", p.Identity.DeviceID)
	}
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"max_qp_wr", uint64(p.Limits.MaxQPWR), 4063},
		{"max_cqe", uint64(p.Limits.MaxCQE), 1048574},
		{"max_pd", uint64(p.Limits.MaxPDs), 262144},
		{"IRD", uint64(p.Limits.MaxIRD), 127},
		{"ORD", uint64(p.Limits.MaxORD), 255},
		{"max_mr_size", p.Limits.MaxMRSize, 0x200000000000},
		{"page_size_cap", p.Limits.PageSizeCap, 4096 | 2<<20 | 1<<30},
		{"max_msg_sz", uint64(p.Limits.MaxMsgSize), math.MaxInt32},
		{"device_cap_flags", p.Limits.DeviceCapFlags, 1<<12 | 1<<17 | 1<<21},
		{"timestamp_mask", p.Limits.TimestampMask, 0x1ffff},
		{"hca_core_clock", p.Limits.HCACoreClockKHz, 0},
		{"CQE size", uint64(p.Queues.CQESize), 32},
		{"CCQ size", uint64(p.Queues.CCQSize), 2050},
		{"CQP HW major", uint64(p.Queues.CQPHWMajorVer), 1},
		{"CQID mask", p.Fields.CQID.Mask(), 0x7ffff},
		{"CEQID mask", p.Fields.CQCEQID.Mask(), 0xffc00000},
		{"STag PDID mask", p.Fields.STagPDID.Mask(), 0xffffc00000000000},
		{"COMMIT_FPM CQ count mask", p.Fields.CommitFPMCQCnt.Mask(), 0xfffff},
		{"CCQPSTATUS done", p.Fields.CCQPStatusDone.Mask(), uint64(regs.CCQPSTATUS_DONE)},
		{"CCQPSTATUS err", p.Fields.CCQPStatusErr.Mask(), uint64(regs.CCQPSTATUS_ERR)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, tc.got, tc.want)
		}
	}
	if p.SRQ || p.Atomics || p.Gen != profile.Gen2 || p.Gen.String() != "GEN_2" {
		t.Errorf("SRQ %v Atomics %v Gen %v", p.SRQ, p.Atomics, p.Gen)
	}
	if p.Regs != regs.GEN2Layout() {
		t.Error("register layout is not the GEN_2 layout")
	}
}

func TestWithAtomics(t *testing.T) {
	on := profile.GEN2().WithAtomics(true)
	if !on.Atomics || on.UK.FeatureFlags != 0x43 {
		t.Errorf("WithAtomics(true): Atomics %v flags %#x", on.Atomics, on.UK.FeatureFlags)
	}
	if err := on.Validate(); err != nil {
		t.Error(err)
	}
	off := on.WithAtomics(false)
	if off.Atomics || off.UK.FeatureFlags != 0x3 {
		t.Errorf("WithAtomics(false): Atomics %v flags %#x", off.Atomics, off.UK.FeatureFlags)
	}
	if profile.GEN2().Atomics {
		t.Error("WithAtomics changed the default")
	}
}

// TestValidateCatches: hand edits that make the driver and the device
// disagree are reported.
func TestValidateCatches(t *testing.T) {
	tests := []struct {
		name string
		edit func(*profile.Profile)
	}{
		{"atomics without flag", func(p *profile.Profile) { p.Atomics = true }},
		{"flag without atomics", func(p *profile.Profile) { p.UK.FeatureFlags |= profile.FeatureAtomicOps }},
		{"SRQ on GEN_2 values", func(p *profile.Profile) { p.SRQ = true }},
		{"64-byte CQE without flag", func(p *profile.Profile) { p.Queues.CQESize = 64 }},
		{"max_qp_wr not derived", func(p *profile.Profile) { p.Limits.MaxQPWR = 4096 }},
		{"SGE mismatch", func(p *profile.Profile) { p.Limits.MaxSGE = 14 }},
		{"hw_rev mismatch", func(p *profile.Profile) { p.UK.HWRev = profile.Gen3 }},
		{"CQ ids beyond field", func(p *profile.Profile) { p.Fields.CQID.Width = 16 }},
		{"max_cqe", func(p *profile.Profile) { p.Limits.MaxCQE = p.UK.MaxHWCQSize }},
		{"CQE timestamps without a clock", func(p *profile.Profile) { p.UK.FeatureFlags |= profile.FeatureCQETimestamping }},
		{"a clock without CQE timestamps", func(p *profile.Profile) { p.Limits.HCACoreClockKHz = 1000 }},
		{"timestamp mask wider than the field", func(p *profile.Profile) { p.Limits.TimestampMask = 1 << 32 }},
	}
	for _, tc := range tests {
		p := profile.GEN2()
		tc.edit(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: Validate accepted the profile", tc.name)
		}
	}
}

func TestField(t *testing.T) {
	tests := []struct {
		f          profile.Field
		mask       uint64
		w, get     uint64
		x, prepped uint64
	}{
		{profile.Field{Shift: 46, Width: 18}, 0xffffc00000000000, 0xffffc00000000000, 0x3ffff, 5, 5 << 46},
		{profile.Field{Shift: 0, Width: 19}, 0x7ffff, 0x123456789, 0x56789, 0x80000, 0},
		{profile.Field{Shift: 22, Width: 10}, 0xffc00000, 0x00c00000, 3, 0x3ff, 0xffc00000},
		{profile.Field{Shift: 0, Width: 64}, math.MaxUint64, 42, 42, 7, 7},
		{profile.Field{Shift: 63, Width: 8}, 1 << 63, 1 << 63, 1, 3, 1 << 63},
		{profile.Field{Shift: 64, Width: 1}, 0, math.MaxUint64, 0, 1, 0},
		{profile.Field{}, 0, math.MaxUint64, 0, 1, 0},
	}
	for _, tc := range tests {
		if got := tc.f.Mask(); got != tc.mask {
			t.Errorf("%+v Mask = %#x, want %#x", tc.f, got, tc.mask)
		}
		if got := tc.f.Get(tc.w); got != tc.get {
			t.Errorf("%+v Get(%#x) = %#x, want %#x", tc.f, tc.w, got, tc.get)
		}
		if got := tc.f.Prep(tc.x); got != tc.prepped {
			t.Errorf("%+v Prep(%#x) = %#x, want %#x", tc.f, tc.x, got, tc.prepped)
		}
	}
}

// TestGEN2Independent: each call returns a fresh value; editing one does not
// leak into the next.
func TestGEN2Independent(t *testing.T) {
	a := profile.GEN2()
	a.Queues.QueryFPMBufSizes[0] = 1
	a.Limits.MaxIRD = 1
	if b := profile.GEN2(); b.Queues.QueryFPMBufSizes[0] != 176 || b.Limits.MaxIRD != 127 {
		t.Error("GEN2 values share state between calls")
	}
}

// TestGEN3 pins the E2100 values (ig3rdma_hw.c ig3rdma_init_hw,
// ig3rdma_hw.h ig3rdma_device_caps_const, defs.h IRDMA_SRQ_MAX_QUANTA) and
// that GEN3 leaves what it does not change at GEN_2's values.
func TestGEN3(t *testing.T) {
	p := profile.GEN3()
	if err := p.Validate(); err != nil {
		t.Fatalf("GEN3 does not validate: %v", err)
	}
	wantUK := profile.UKAttrs{
		HWRev:          3,
		FeatureFlags:   0x1 | 0x2 | 0x20 | 0x80 | 0x100,
		MaxHWWQFrags:   14,
		MaxHWReadSGEs:  14,
		MaxHWInline:    216,
		MaxHWRQQuanta:  32768,
		MaxHWWQQuanta:  32768,
		MinHWCQSize:    1,
		MaxHWCQSize:    1048575,
		MaxHWSQChunk:   8,
		MinHWWQSize:    16,
		MaxHWSRQQuanta: 262144,
	}
	if diff := cmp.Diff(wantUK, p.UK); diff != "" {
		t.Errorf("uk_attrs (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name      string
		got, want uint64
	}{
		{"vendor_part_id", uint64(p.Identity.DeviceID), 0x1452},
		{"IRD", uint64(p.Limits.MaxIRD), 64},
		{"ORD", uint64(p.Limits.MaxORD), 64},
		{"max_sge", uint64(p.Limits.MaxSGE), 14},
		{"max_inline", uint64(p.Limits.MaxInline), 216},
		{"max_srq_wr", uint64(p.Limits.MaxSRQWR), 32767},
		{"max_srq_sge", uint64(p.Limits.MaxSRQSGE), 14},
		{"timestamp_mask", p.Limits.TimestampMask, 0xffffffff},
		{"hca_core_clock kHz", p.Limits.HCACoreClockKHz, 1000000},
		{"device_cap_flags", p.Limits.DeviceCapFlags, 1<<12 | 1<<17 | 1<<21 | 1<<24},
		{"push pages", uint64(p.Limits.PushPages), 8192},
		{"CQE size", uint64(p.Queues.CQESize), 64},
		{"CQP HW major", uint64(p.Queues.CQPHWMajorVer), 2},
		{"max_qp_wr", uint64(p.Limits.MaxQPWR), 4063},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %#x, want %#x", tc.name, tc.got, tc.want)
		}
	}
	if !p.SRQ || p.Atomics || p.Gen != profile.Gen3 || p.Gen.String() != "GEN_3" ||
		p.Queues.CQEExtNextSlot || p.Queues.PadFragCounted || !p.Queues.HWFlushPerWQE {
		t.Errorf("SRQ %v Atomics %v Gen %v queues %+v", p.SRQ, p.Atomics, p.Gen, p.Queues)
	}
	if a := p.WithAtomics(true); a.Validate() != nil || a.UK.FeatureFlags&profile.FeatureAtomicOps == 0 {
		t.Errorf("GEN3 with atomics: %v", a.Validate())
	}
	// Unchanged from GEN_2.
	g2 := profile.GEN2()
	if p.Limits.MaxQPID != g2.Limits.MaxQPID || p.Limits.MaxCQE != g2.Limits.MaxCQE || p.Regs != g2.Regs || p.Fields != g2.Fields {
		t.Error("GEN3 changed a value it should keep from GEN_2")
	}
	for name, want := range map[string]profile.Generation{"": 2, "gen2": 2, "gen3": 3} {
		got, err := profile.ByName(name)
		if err != nil || got.Gen != want {
			t.Errorf("ByName(%q) = %v, %v", name, got.Gen, err)
		}
	}
	if _, err := profile.ByName("gen4"); err == nil {
		t.Error("ByName(gen4) accepted")
	}
}

// TestValidateRejectsGEN3Mismatch: the checks that tie GEN_3's new values
// together fire.
func TestValidateRejectsGEN3Mismatch(t *testing.T) {
	for name, mut := range map[string]func(*profile.Profile){
		"SRQ without MaxSRQs":     func(p *profile.Profile) { p.Limits.MaxSRQs = 0 },
		"SRQ WR":                  func(p *profile.Profile) { p.Limits.MaxSRQWR++ },
		"pad counted on GEN_3":    func(p *profile.Profile) { p.Queues.PadFragCounted = true },
		"GEN_2 flush on GEN_3":    func(p *profile.Profile) { p.Queues.HWFlushPerWQE = false },
		"32-byte CQE on GEN_3":    func(p *profile.Profile) { p.Queues.CQESize = 32 },
		"SRQ flag without quanta": func(p *profile.Profile) { p.UK.MaxHWSRQQuanta = 0 },
	} {
		p := profile.GEN3()
		mut(&p)
		if p.Validate() == nil {
			t.Errorf("%s: Validate accepted", name)
		}
	}
}

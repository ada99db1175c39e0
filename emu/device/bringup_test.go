package device_test

import (
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// TestBringup brings a device up as irdma does and checks what the device
// reported and stored at each step.
func TestBringup(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	d := e.Dev

	// QUERY_RDMA_FEATURES: FW_INFO (count 3, FW 1.60), HW_VERSION_INFO,
	// FTN_FLAGS without the atomics bit on the default GEN_2 profile.
	want := []uint64{
		0x0000_0003_0001_003c, // TYPE 0 FW_INFO [63:48] | FEATURE_CNT 3 [47:32] | major 1 [31:16] | minor 60 [15:0]
		0x0001_0000_0000_0002, // TYPE 1 HW_VERSION_INFO | generation 2
		0x0020_0000_0000_0000, // TYPE 32 FTN_FLAGS | no ATOMICS_ALLOWED (bit 1)
	}
	if len(e.Features) != len(want) {
		t.Fatalf("features = %#x, want %#x", e.Features, want)
	}
	for i := range want {
		if e.Features[i] != want[i] {
			t.Errorf("feature %d = %#016x, want %#016x", i, e.Features[i], want[i])
		}
	}

	// QUERY_FPM_VAL: a GEN_2 device writes 176 bytes and no more
	// (docs/hw-controlpath.md "FPM WQEs").
	if got := e.Query[176:200]; string(got) != string(make([]byte, 24)) {
		t.Errorf("QUERY_FPM_VAL wrote beyond byte 176: % x", got)
	}
	if qpmax := binary.LittleEndian.Uint64(e.Query[8:]) & 0xffffffff; qpmax < 64 {
		t.Errorf("QP max %d below the committed 64", qpmax)
	}
	// COMMIT_FPM_VAL write-back: count in the low bits, base/512 above; the
	// APBVT slot (+40) gets a base too (docs/hw-controlpath.md
	// "COMMIT_FPM_VAL buffer").
	for off, n := range devtest.Counts {
		q := binary.LittleEndian.Uint64(e.Commit[off:])
		if q&0xfffff != n {
			t.Errorf("commit slot +%d count %d, want %d", off, q&0xfffff, n)
		}
	}
	bases := map[uint64]int{}
	for _, off := range []int{0, 8, 32, 40, 48, 96, 104, 112} {
		b := binary.LittleEndian.Uint64(e.Commit[off:]) >> 32
		if prev, dup := bases[b]; dup && off != 40 {
			t.Errorf("slots +%d and +%d share base %#x", prev, off, b*512)
		}
		bases[b] = off
	}
	if e.SDCount() == 0 || len(e.SDs) == 0 {
		t.Fatalf("no SDs backed")
	}

	// CQP and CCQ state in registers.
	if v := d.Read32(regs.CCQPSTATUS); v != regs.CCQPSTATUS_DONE {
		t.Errorf("CCQPSTATUS %#x", v)
	}
	if v := d.Read32(regs.CQPTAIL); v&regs.CQPTAIL_CQP_OP_ERR != 0 {
		t.Errorf("CQPTAIL has CQP_OP_ERR after a good bring-up: %#x", v)
	}
	if d.CQs().Get(0) == nil {
		t.Fatal("CCQ missing")
	}
	if d.Events().CEQ(0) == nil || !d.Events().HasAEQ() {
		t.Fatal("CEQ 0 or AEQ missing")
	}
	if s := d.Stats(); s.CQP.Errors != 0 {
		t.Errorf("CQP errors during bring-up: %d", s.CQP.Errors)
	}
	if d.Meter().Stage(9).Count == 0 { // timing.CQPCommand
		t.Error("no CQPCommand charged")
	}
}

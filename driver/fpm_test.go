package driver

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

func putQW(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

func TestParseFPMQuery(t *testing.T) {
	buf := make([]byte, 176)
	putQW(buf, 0, 300<<32|2)        // MAX_PE_SDS 300, FIRST_PE_SD_INDEX 2
	putQW(buf, 8, 9<<32|4096)       // QP: 4096 of 512 B
	putQW(buf, 16, 6<<32|8192)      // CQ
	putQW(buf, 48, 7<<32|65536)     // MR
	putQW(buf, 56, 6<<32|1000)      // XF
	putQW(buf, 64, 16<<32|77)       // XFFL max 77, XF block 16
	putQW(buf, 72, 6<<32|1<<20)     // Q1
	putQW(buf, 80, 8<<32|5)         // Q1FL, Q1 block 8
	putQW(buf, 112, 1<<22)          // PBLE max (size fixed 8)
	putQW(buf, 120, 3<<32|2<<16|16) // TIMERBUCKET 3, HTMULTIPLIER 2, MAX_CEQS 16
	putQW(buf, 136, 4<<32|9)        // RRFFL 9, RRF block 4
	var h hmcInfo
	if err := parseFPMQuery(buf, &h); err != nil {
		t.Fatal(err)
	}
	if h.Misc.MaxSDs != 300 || h.Misc.FirstSDIndex != 2 || h.Misc.MaxCEQs != 16 || h.Misc.HTMultiplier != 2 ||
		h.Misc.TimerBucket != 3 || h.Misc.XFBlockSize != 16 || h.Misc.Q1BlockSize != 8 || h.Misc.RRFBlockSize != 4 {
		t.Errorf("misc %+v", h.Misc)
	}
	if o := h.Obj[hmcQP]; o.MaxCnt != 4096 || o.Size != 512 {
		t.Errorf("QP %+v", o)
	}
	if o := h.Obj[hmcPBLE]; o.MaxCnt != 1<<22 || o.Size != 8 {
		t.Errorf("PBLE %+v", o)
	}
	if o := h.Obj[hmcAPBVT]; o.MaxCnt != 1 || o.Size != 8192 {
		t.Errorf("APBVT %+v", o)
	}
	if o := h.Obj[hmcXFFL]; o.MaxCnt != 77 || o.Size != 4 {
		t.Errorf("XFFL %+v", o)
	}
	putQW(buf, 80, 5) // Q1 block size 0
	if err := parseFPMQuery(buf, &h); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("zero Q1 block: %v", err)
	}
	if err := parseFPMQuery(buf[:100], &h); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("short buffer: %v", err)
	}
}

// TestCfgFPMCounts checks the count selection of irdma_cfg_fpm_val for a
// function whose maxima fit in its SDs and one where they do not.
func TestCfgFPMCounts(t *testing.T) {
	p := profile.GEN2()
	mk := func() hmcInfo {
		var h hmcInfo
		f := defaultFakeFPM()
		for i := range hmcMax {
			h.Obj[i] = hmcObj{MaxCnt: f.max[i], Size: 1 << f.sizeLg[i]}
		}
		h.Obj[hmcAPBVT] = hmcObj{MaxCnt: 1, Size: 8192}
		h.Obj[hmcPBLE].Size = 8
		for _, t := range []int{hmcXFFL, hmcQ1FL, hmcRRFFL} {
			h.Obj[t].Size = 4
		}
		h.Misc = f.misc
		h.Misc.MaxSDs = 512
		return h
	}
	h := mk()
	sd, err := cfgFPMCounts(&h, 300, p)
	if err != nil {
		t.Fatal(err)
	}
	// 300 → largest power of two ≤ 300 = 256.
	want := map[int]uint32{
		hmcQP:    256,
		hmcCQ:    512,          // min(2 × qp, max)
		hmcHTE:   512 * 2,      // roundup_pow2(round_up(256 + 256 FSIMC, 512)) × HTMULTIPLIER 2
		hmcXF:    4 * 4 * 256,  // 4 × xf_block × qp
		hmcXFFL:  4 * 256,      // XF / xf_block
		hmcQ1:    65536,        // roundup_pow2(127 × 2 × 256 + 512)
		hmcQ1FL:  65536 / 4,    // Q1 / q1_block
		hmcTimer: (1 + 1) * 4,  // (round_up(qp, 512) / 512 + 1) × bucket
		hmcHDR:   256,          // qp
		hmcRRF:   32 * 256,     // 32 × qp
		hmcRRFFL: 32 * 256 / 4, // RRF / rrf_block
		hmcARP:   512,          // max
		hmcFSIMC: 256, hmcFSIAV: 1024, hmcMR: 8192, hmcPBLE: 1 << 20, hmcAPBVT: 1, hmcSRQ: 0,
	}
	for ty, n := range want {
		if h.Obj[ty].Cnt != n {
			t.Errorf("%s count %d, want %d", hmcNames[ty], h.Obj[ty].Cnt, n)
		}
	}
	if sd != estSD(&h) || sd > 512 {
		t.Errorf("sd %d est %d", sd, estSD(&h))
	}
	// Tight SD budget: the loop shrinks PBLEs/MRs/QPs until it fits, then
	// hands leftover SDs to PBLEs.
	h = mk()
	h.Obj[hmcPBLE].MaxCnt = 64 << 20 // 512 MB of PBLEs
	h.Misc.MaxSDs = 40
	sd, err = cfgFPMCounts(&h, 1024, p)
	if err != nil {
		t.Fatal(err)
	}
	if sd > 40 {
		t.Errorf("needs %d SDs > 40", sd)
	}
	if h.Obj[hmcPBLE].Cnt >= 64<<20 {
		t.Errorf("PBLEs not reduced: %d", h.Obj[hmcPBLE].Cnt)
	}
	if q := h.Obj[hmcQP].Cnt; q&(q-1) != 0 {
		t.Errorf("QP count %d not a power of two", q)
	}
	// Impossible: even 128 QPs do not fit.
	h = mk()
	h.Misc.MaxSDs = 1
	if _, err := cfgFPMCounts(&h, 1024, p); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("1 SD: %v, want EINVAL", err)
	}
}

func TestFPMCommitBuffers(t *testing.T) {
	var h hmcInfo
	h.Obj[hmcQP] = hmcObj{Cnt: 256, Size: 512}
	h.Obj[hmcCQ] = hmcObj{Cnt: 512, Size: 64}
	h.Obj[hmcPBLE] = hmcObj{Cnt: 1 << 20, Size: 8}
	h.Obj[hmcAPBVT] = hmcObj{Cnt: 1, Size: 8192}
	h.Obj[hmcMD] = hmcObj{Cnt: 3, Size: 64}
	buf := make([]byte, fpmCommitBufSize)
	for i := range buf {
		buf[i] = 0xff
	}
	buildFPMCommit(&h, buf)
	if v := le64(buf, 0); v != 256 {
		t.Errorf("+0 %#x", v)
	}
	if v := le64(buf, 8); v != 512 {
		t.Errorf("+8 %#x", v)
	}
	if v := le64(buf, 40); v != 0 {
		t.Errorf("+40 (APBVT) %#x, want 0", v)
	}
	if v := le64(buf, 112); v != 1<<20 {
		t.Errorf("+112 %#x", v)
	}
	if v := le64(buf, 120); v != 0 {
		t.Errorf("+120 %#x", v)
	}
	if v := le64(buf, 152); v != 3 {
		t.Errorf("+152 %#x", v)
	}
	// Device write-back: base/512 in [63:32], count below.
	putQW(buf, 0, 0<<32|256)
	putQW(buf, 8, 256<<32|512)        // CQ at 128 KB
	putQW(buf, 40, 320<<32)           // APBVT at 160 KB, count forced 1
	putQW(buf, 112, 0x2000<<32|1<<20) // PBLE at 4 MB (highest)
	putQW(buf, 152, 400<<32|3)
	if err := parseFPMCommit(buf, &h, profile.GEN2().Fields); err != nil {
		t.Fatal(err)
	}
	if h.Obj[hmcCQ].Base != 128<<10 || h.Obj[hmcAPBVT].Cnt != 1 || h.Obj[hmcAPBVT].Base != 160<<10 {
		t.Errorf("CQ %+v APBVT %+v", h.Obj[hmcCQ], h.Obj[hmcAPBVT])
	}
	// sd_cnt from the highest base: (4 MB + 8 MB) / 2 MB = 6.
	if h.SDCnt != 6 {
		t.Errorf("sd_cnt %d, want 6", h.SDCnt)
	}
}

func TestSTagMask(t *testing.T) {
	for maxMR, want := range map[uint32]uint32{
		8192:    0x003f_ffff, // order 13 → 14 → 10 driver bits
		1 << 14: 0x003f_ffff,
		1 << 20: 0x0fff_ffff, // 4 driver bits
		1 << 24: 0xffff_ffff, // none
	} {
		if got := stagMask(maxMR); got != want {
			t.Errorf("stagMask(%d) = %#x, want %#x", maxMR, got, want)
		}
	}
}

package driver

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// hmcObj is irdma_hmc_obj_info: what QUERY_FPM_VAL reports (MaxCnt, Size)
// and what the driver commits (Cnt) and gets back (Base).
type hmcObj struct {
	Base   uint64
	MaxCnt uint32
	Cnt    uint32
	Size   uint64
}

// fpmMisc is irdma_hmc_fpm_misc.
type fpmMisc struct {
	MaxCEQs        uint32
	MaxSDs         uint32
	XFBlockSize    uint32
	Q1BlockSize    uint32
	HTMultiplier   uint32
	TimerBucket    uint32
	RRFBlockSize   uint32
	OOISCBlockSize uint32
	FirstSDIndex   uint32
}

// hmcInfo is irdma_hmc_info as far as the counts and layout go.
type hmcInfo struct {
	Obj   [hmcMax]hmcObj
	Misc  fpmMisc
	SDCnt uint32 // sd_table.sd_cnt after COMMIT
}

// Offsets of each object's entry in the QUERY_FPM_VAL buffer (ctrl.c
// irdma_sc_parse_fpm_query_buf; docs/hw-controlpath.md "QUERY_FPM_VAL
// buffer"). APBVT has none.
var fpmQueryOffset = [hmcMax]int{
	hmcQP: 8, hmcCQ: 16, hmcSRQ: 24, hmcHTE: 32, hmcARP: 40, hmcAPBVT: -1,
	hmcMR: 48, hmcXF: 56, hmcXFFL: 64, hmcQ1: 72, hmcQ1FL: 80, hmcTimer: 88,
	hmcFSIMC: 96, hmcFSIAV: 104, hmcPBLE: 112, hmcRRF: 128, hmcRRFFL: 136,
	hmcHDR: 144, hmcMD: 152, hmcOOISC: 160, hmcOOISCFFL: 168,
}

// Offsets of each object's count in the COMMIT_FPM_VAL buffer (ctrl.c
// irdma_sc_cfg_iw_fpm; docs/hw-controlpath.md "COMMIT_FPM_VAL buffer"). +120
// is reserved.
var fpmCommitOffset = [hmcMax]int{
	hmcQP: 0, hmcCQ: 8, hmcSRQ: 16, hmcHTE: 24, hmcARP: 32, hmcAPBVT: 40,
	hmcMR: 48, hmcXF: 56, hmcXFFL: 64, hmcQ1: 72, hmcQ1FL: 80, hmcTimer: 88,
	hmcFSIMC: 96, hmcFSIAV: 104, hmcPBLE: 112, hmcRRF: 128, hmcRRFFL: 136,
	hmcHDR: 144, hmcMD: 152, hmcOOISC: 160, hmcOOISCFFL: 168,
}

func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// parseFPMQuery is irdma_sc_parse_fpm_query_buf for a PF on GEN_2 (RoCE:
// the OOISC entries are read only for iWARP-only and are left zero). The
// buffer must hold at least the 176 bytes a GEN_2 device writes.
func parseFPMQuery(buf []byte, h *hmcInfo) error {
	if len(buf) < 176 {
		return fmt.Errorf("%w: FPM query buffer %d bytes", syscall.EINVAL, len(buf))
	}
	q0 := le64(buf, 0)
	h.Misc.FirstSDIndex = uint32(q0 & 0x3fff)    // FIRST_PE_SD_INDEX [13:0]
	h.Misc.MaxSDs = uint32(q0>>32) & (1<<13 - 1) // MAX_PE_SDS [44:32]
	decode := func(t int) {
		v := le64(buf, fpmQueryOffset[t])
		h.Obj[t].MaxCnt = uint32(v)
		e := v >> 32
		if e >= 64 {
			e = 63
		}
		h.Obj[t].Size = 1 << e
	}
	for _, t := range []int{hmcQP, hmcCQ, hmcSRQ, hmcHTE, hmcARP, hmcMR, hmcXF, hmcQ1, hmcTimer, hmcFSIMC, hmcFSIAV, hmcRRF, hmcHDR, hmcMD} {
		decode(t)
	}
	h.Obj[hmcAPBVT] = hmcObj{Size: 8192, MaxCnt: 1}
	v := le64(buf, 64)
	h.Obj[hmcXFFL] = hmcObj{MaxCnt: uint32(v), Size: 4}
	h.Misc.XFBlockSize = uint32(v >> 32)
	if h.Misc.XFBlockSize == 0 && h.Obj[hmcXF].MaxCnt != 0 {
		return fmt.Errorf("%w: FPM query: XF block size 0", syscall.EINVAL)
	}
	v = le64(buf, 80)
	h.Obj[hmcQ1FL] = hmcObj{MaxCnt: uint32(v), Size: 4}
	h.Misc.Q1BlockSize = uint32(v >> 32)
	if h.Misc.Q1BlockSize == 0 {
		return fmt.Errorf("%w: FPM query: Q1 block size 0", syscall.EINVAL)
	}
	h.Obj[hmcPBLE] = hmcObj{MaxCnt: uint32(le64(buf, 112)), Size: 8}
	v = le64(buf, 120)
	h.Misc.MaxCEQs = uint32(v & 0x3ff)          // MAX_CEQS [9:0]
	h.Misc.HTMultiplier = uint32(v>>16) & 0xf   // HTMULTIPLIER [19:16]
	h.Misc.TimerBucket = uint32(v>>32) & 0xffff // TIMERBUCKET [47:32]
	v = le64(buf, 136)
	h.Obj[hmcRRFFL] = hmcObj{MaxCnt: uint32(v), Size: 4}
	h.Misc.RRFBlockSize = uint32(v >> 32)
	if h.Misc.RRFBlockSize == 0 && h.Obj[hmcRRFFL].MaxCnt != 0 {
		return fmt.Errorf("%w: FPM query: RRF block size 0", syscall.EINVAL)
	}
	h.Obj[hmcOOISC] = hmcObj{}
	h.Obj[hmcOOISCFFL] = hmcObj{Size: 4}
	return nil
}

func roundUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

func roundUpPow2(x uint64) uint64 {
	v := uint64(1)
	for v < x {
		v <<= 1
	}
	return v
}

// estSD is irdma_est_sd: Σ round_up(cnt × size, 512) over all objects, in
// 2 MB SDs rounded up.
func estSD(h *hmcInfo) uint32 {
	var size uint64
	for i := range hmcMax {
		size += roundUp(uint64(h.Obj[i].Cnt)*h.Obj[i].Size, 512)
	}
	sd := size >> 21
	if size&(hmcDirectBPSize-1) != 0 {
		sd++
	}
	if sd > 0xffffffff {
		sd = 0xffffffff - 1
	}
	return uint32(sd)
}

// q1Cnt is irdma_q1_cnt for GEN_2 RoCE: roundup_pow2(max_ird × 2 × qp + 512).
func q1Cnt(maxIRD, qp uint32) uint32 {
	return uint32(roundUpPow2(uint64(maxIRD)*2*uint64(qp) + 512))
}

// cfgFPMCounts is the count selection of ctrl.c:irdma_cfg_fpm_val with
// cfg_fpm_value_gen_2 (docs/hw-controlpath.md "FPM count selection"): start
// from the maxima, cap QPs at the largest power of two ≤ qpLimit
// (rsrc_limits_table[limits_sel]), then shrink QPs, MRs, PBLEs and the
// multicast/AH tables until the SD estimate fits max_sds, and give leftover
// SDs to PBLEs. It returns the SDs needed.
func cfgFPMCounts(h *hmcInfo, qpLimit uint32, p profile.Profile) (uint32, error) {
	for i := range hmcMax {
		h.Obj[i].Cnt = h.Obj[i].MaxCnt
	}
	qpwanted := min(qpLimit, h.Obj[hmcQP].MaxCnt)
	pow := uint32(1)
	for pow <= qpwanted {
		pow *= 2
	}
	qpwanted = pow / 2
	mrwanted := h.Obj[hmcMR].MaxCnt
	pblewanted := h.Obj[hmcPBLE].MaxCnt
	h.Obj[hmcFSIMC].Cnt = h.Obj[hmcFSIMC].MaxCnt
	h.Obj[hmcFSIAV].Cnt = h.Obj[hmcFSIAV].MaxCnt
	h.Obj[hmcARP].Cnt = h.Obj[hmcARP].MaxCnt
	h.Obj[hmcAPBVT].Cnt = 1
	maxIRD := p.Limits.MaxIRD
	for qpwanted > 0 && q1Cnt(maxIRD, qpwanted) > h.Obj[hmcQ1].MaxCnt {
		qpwanted /= 2
	}
	if qpwanted == 0 {
		return 0, fmt.Errorf("%w: FPM: no QP count fits Q1 max %d", syscall.EINVAL, h.Obj[hmcQ1].MaxCnt)
	}
	var sdNeeded uint32
	loop := 0
	for {
		loop++
		h.Obj[hmcQP].Cnt = qpwanted
		h.Obj[hmcCQ].Cnt = min(2*qpwanted, h.Obj[hmcCQ].Cnt)
		h.Obj[hmcSRQ].Cnt = 0 // reserved on GEN_2
		h.Obj[hmcMR].Cnt = mrwanted
		hte := roundUp(uint64(qpwanted)+uint64(h.Obj[hmcFSIMC].Cnt), 512)
		h.Obj[hmcHTE].Cnt = uint32(roundUpPow2(hte) * uint64(h.Misc.HTMultiplier))
		// cfg_fpm_value_gen_2
		h.Obj[hmcXF].Cnt = 4 * h.Misc.XFBlockSize * qpwanted
		h.Obj[hmcHDR].Cnt = qpwanted
		if h.Obj[hmcRRF].MaxCnt != 0 {
			h.Obj[hmcRRF].Cnt = 32 * qpwanted
		}
		if h.Obj[hmcRRFFL].MaxCnt != 0 && h.Misc.RRFBlockSize != 0 {
			h.Obj[hmcRRFFL].Cnt = h.Obj[hmcRRF].Cnt / h.Misc.RRFBlockSize
		}
		h.Obj[hmcOOISC].Cnt, h.Obj[hmcOOISCFFL].Cnt = 0, 0 // iWARP only
		h.Obj[hmcQ1].Cnt = q1Cnt(maxIRD, qpwanted)
		if h.Misc.XFBlockSize != 0 {
			h.Obj[hmcXFFL].Cnt = h.Obj[hmcXF].Cnt / h.Misc.XFBlockSize
		}
		h.Obj[hmcQ1FL].Cnt = h.Obj[hmcQ1].Cnt / h.Misc.Q1BlockSize
		h.Obj[hmcTimer].Cnt = (uint32(roundUp(uint64(qpwanted), 512))/512 + 1) * h.Misc.TimerBucket
		h.Obj[hmcPBLE].Cnt = pblewanted
		sdNeeded = estSD(h)
		if sdNeeded <= h.Misc.MaxSDs || loop >= 2000 {
			break
		}
		sdDiff := sdNeeded - h.Misc.MaxSDs
		if sdDiff > 128 {
			if loop%2 == 0 && qpwanted > 128 {
				qpwanted /= 2
			} else {
				mrwanted /= 2
				pblewanted /= 2
			}
			continue
		}
		if pblewanted > 512*fpmMultiplier*sdDiff {
			pblewanted -= 256 * fpmMultiplier * sdDiff
			continue
		} else if pblewanted > 100*fpmMultiplier {
			pblewanted -= 10 * fpmMultiplier
		} else if pblewanted > fpmMultiplier {
			pblewanted -= fpmMultiplier
		} else if qpwanted <= 128 {
			if h.Obj[hmcFSIMC].Cnt > 256 {
				h.Obj[hmcFSIMC].Cnt /= 2
			}
			if h.Obj[hmcFSIAV].Cnt > 256 {
				h.Obj[hmcFSIAV].Cnt /= 2
			}
		}
		if mrwanted > fpmMultiplier {
			mrwanted -= fpmMultiplier
		}
		if loop%10 == 0 && qpwanted > 128 {
			qpwanted /= 2
			if h.Obj[hmcFSIAV].Cnt > 256 {
				h.Obj[hmcFSIAV].Cnt /= 2
			}
		}
	}
	if sdNeeded > h.Misc.MaxSDs {
		return sdNeeded, fmt.Errorf("%w: FPM: %d SDs needed, max %d", syscall.EINVAL, sdNeeded, h.Misc.MaxSDs)
	}
	if loop > 1 && sdNeeded < h.Misc.MaxSDs {
		pblewanted += (h.Misc.MaxSDs - sdNeeded) * 256 * fpmMultiplier
		h.Obj[hmcPBLE].Cnt = pblewanted
		sdNeeded = estSD(h)
	}
	return sdNeeded, nil
}

// buildFPMCommit is irdma_sc_cfg_iw_fpm's buffer: each object's count as
// a u64 at its commit offset; +40 (APBVT) and +120 written 0; OOISC only
// for iWARP (zero counts here).
func buildFPMCommit(h *hmcInfo, buf []byte) {
	clear(buf)
	for t := range hmcMax {
		if t == hmcAPBVT {
			continue
		}
		off := fpmCommitOffset[t]
		if off+8 > len(buf) {
			continue
		}
		binary.LittleEndian.PutUint64(buf[off:], uint64(h.Obj[t].Cnt))
	}
}

// parseFPMCommit is irdma_sc_parse_fpm_commit_buf / irdma_sc_decode_fpm_commit:
// base = (qw >> 32) × 512 for every object; the count is COMMIT_FPM_QPCNT
// [20:0] for QPs, the device mask for CQs, the low 32 bits otherwise;
// APBVT's count is forced to 1 (GEN ≤ 2). sd_cnt covers the object with
// the highest base.
func parseFPMCommit(buf []byte, h *hmcInfo, f profile.Fields) error {
	if len(buf) < 176 {
		return fmt.Errorf("%w: FPM commit buffer %d bytes", syscall.EINVAL, len(buf))
	}
	var maxBase uint64
	k := -1
	for t := range hmcMax {
		if t == hmcOOISC || t == hmcOOISCFFL {
			continue // iWARP only
		}
		v := le64(buf, fpmCommitOffset[t])
		h.Obj[t].Base = (v >> 32) * 512
		switch t {
		case hmcQP:
			h.Obj[t].Cnt = uint32(v & (1<<21 - 1))
		case hmcCQ:
			h.Obj[t].Cnt = uint32(f.CommitFPMCQCnt.Get(v))
		case hmcAPBVT:
			h.Obj[t].Cnt = 1
		default:
			h.Obj[t].Cnt = uint32(v)
		}
		if h.Obj[t].Base > maxBase || k < 0 {
			maxBase = h.Obj[t].Base
			k = t
		}
	}
	size := uint64(h.Obj[k].Cnt)*h.Obj[k].Size + h.Obj[k].Base
	sd := size / hmcDirectBPSize
	if size%hmcDirectBPSize != 0 {
		sd++
	}
	h.SDCnt = uint32(sd)
	return nil
}

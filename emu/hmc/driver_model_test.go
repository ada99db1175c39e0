package hmc_test

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// This file is a model of the driver side of HMC bring-up, written from the
// rules in docs/hw-controlpath.md ("QUERY_FPM_VAL buffer" to "FPM count
// selection") and the behaviour of ctrl.c:irdma_sc_parse_fpm_query_buf,
// irdma_cfg_fpm_val, irdma_est_sd, irdma_q1_cnt, cfg_fpm_value_gen_2,
// irdma_sc_cfg_iw_fpm, irdma_sc_parse_fpm_commit_buf and
// hmc.c:irdma_sc_create_hmc_obj (GEN_2, RoCE only, PF). It parses our
// QUERY_FPM_VAL bytes, selects counts as the driver does, commits them
// through HMC.Commit, parses the write-back and checks that every object fits
// the SD table the driver would allocate.

type drvObj struct {
	max, cnt   uint32
	size, base uint64
}

type drvHMC struct {
	obj                                 [hmc.NumObjTypes]drvObj
	firstSD, maxSDs                     uint32
	xfBlock, q1Block, rrfBlock, ooBlock uint32
	maxCEQs, htMult, timerBucket        uint32
	sdCnt                               uint32
}

func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// parseQuery decodes the query buffer the way the GEN_2 driver does.
func parseQuery(b []byte) (*drvHMC, error) {
	d := &drvHMC{}
	w := le64(b, 0)
	d.firstSD = uint32(w & 0x3fff)
	d.maxSDs = uint32(w >> 32 & 0x1fff) // MAX_PE_SDS [44:32]
	generic := func(ty hmc.ObjType, off int) {
		v := le64(b, off)
		d.obj[ty].max = uint32(v)
		d.obj[ty].size = 1 << (v >> 32 & 63)
	}
	generic(hmc.QP, 8)
	generic(hmc.CQ, 16)
	generic(hmc.HTE, 32)
	generic(hmc.ARP, 40)
	d.obj[hmc.APBVT] = drvObj{max: 1, size: 8192}
	generic(hmc.MR, 48)
	generic(hmc.XF, 56)
	v := le64(b, 64)
	d.obj[hmc.XFFL] = drvObj{max: uint32(v), size: 4}
	d.xfBlock = uint32(v >> 32)
	if d.xfBlock == 0 {
		return nil, fmt.Errorf("xf_block_size 0")
	}
	generic(hmc.Q1, 72)
	v = le64(b, 80)
	d.obj[hmc.Q1FL] = drvObj{max: uint32(v), size: 4}
	d.q1Block = uint32(v >> 32)
	if d.q1Block == 0 {
		return nil, fmt.Errorf("q1_block_size 0")
	}
	generic(hmc.TIMER, 88)
	d.obj[hmc.PBLE] = drvObj{max: uint32(le64(b, 112)), size: 8}
	v = le64(b, 120)
	d.maxCEQs = uint32(v & 0x3ff)
	d.htMult = uint32(v >> 16 & 0xf)
	d.timerBucket = uint32(v >> 32 & 0xffff)
	generic(hmc.FSIMC, 96)
	generic(hmc.FSIAV, 104)
	generic(hmc.RRF, 128)
	v = le64(b, 136)
	d.obj[hmc.RRFFL] = drvObj{max: uint32(v), size: 4}
	d.rrfBlock = uint32(v >> 32)
	if d.rrfBlock == 0 && d.obj[hmc.RRFFL].max != 0 {
		return nil, fmt.Errorf("rrf_block_size 0")
	}
	generic(hmc.HDR, 144)
	generic(hmc.MD, 152)
	generic(hmc.OOISC, 160)
	v = le64(b, 168)
	d.obj[hmc.OOISCFFL] = drvObj{max: uint32(v), size: 4}
	d.ooBlock = uint32(v >> 32)
	if d.ooBlock == 0 && d.obj[hmc.OOISCFFL].max != 0 {
		return nil, fmt.Errorf("ooiscf_block_size 0")
	}
	return d, nil
}

func ceilPow2(x uint32) uint32 {
	if x <= 1 {
		return 1
	}
	return 1 << bits.Len32(x-1)
}

func floorPow2(x uint32) uint32 {
	if x == 0 {
		return 0
	}
	return 1 << (bits.Len32(x) - 1)
}

func roundUp64(x, a uint64) uint64 { return (x + a - 1) / a * a }

// estSD: every object's bytes rounded up to 512, summed, in 2 MB SDs.
func (d *drvHMC) estSD() uint32 {
	var total uint64
	for ty := range d.obj {
		total += roundUp64(uint64(d.obj[ty].cnt)*d.obj[ty].size, 512)
	}
	return uint32((total + hmc.DirectBPSize - 1) / hmc.DirectBPSize)
}

// q1Need is the RoCE Q1 count for qp QPs.
func q1Need(ird, qp uint32) uint32 { return ceilPow2(ird*2*qp + 512) }

const fpmMultiplier = 1024

type cfgResult struct {
	loops    int
	sdNeeded uint32
}

// cfgFPM is the count selection for a GEN_2 RoCE PF (default HMC profile).
func (d *drvHMC) cfgFPM(qpCount, ird uint32) (cfgResult, error) {
	o := &d.obj
	for ty := range o {
		o[ty].cnt = o[ty].max
	}
	qp := floorPow2(min(qpCount, o[hmc.QP].max))
	mr, pble := o[hmc.MR].max, o[hmc.PBLE].max
	o[hmc.APBVT].cnt = 1
	for q1Need(ird, qp) > o[hmc.Q1].max {
		qp /= 2
	}
	var r cfgResult
	for r.loops < 2000 {
		r.loops++
		o[hmc.QP].cnt = qp
		o[hmc.CQ].cnt = min(2*qp, o[hmc.CQ].cnt)
		o[hmc.SRQ].cnt = 0
		o[hmc.MR].cnt = mr
		o[hmc.HTE].cnt = ceilPow2(uint32(roundUp64(uint64(qp+o[hmc.FSIMC].cnt), 512))) * d.htMult
		o[hmc.XF].cnt = 4 * d.xfBlock * qp
		o[hmc.HDR].cnt = qp
		if o[hmc.RRF].max != 0 {
			o[hmc.RRF].cnt = 32 * qp
		}
		if o[hmc.RRFFL].max != 0 {
			o[hmc.RRFFL].cnt = o[hmc.RRF].cnt / d.rrfBlock
		}
		if o[hmc.OOISC].max != 0 {
			o[hmc.OOISC].cnt = 32 * qp
		}
		if o[hmc.OOISCFFL].max != 0 {
			o[hmc.OOISCFFL].cnt = o[hmc.OOISC].cnt / d.ooBlock
		}
		o[hmc.Q1].cnt = q1Need(ird, qp)
		o[hmc.XFFL].cnt = o[hmc.XF].cnt / d.xfBlock
		o[hmc.Q1FL].cnt = o[hmc.Q1].cnt / d.q1Block
		o[hmc.TIMER].cnt = (uint32(roundUp64(uint64(qp), 512))/512 + 1) * d.timerBucket
		o[hmc.PBLE].cnt = pble
		r.sdNeeded = d.estSD()
		if r.sdNeeded <= d.maxSDs {
			break
		}
		diff := r.sdNeeded - d.maxSDs
		if diff > 128 {
			if r.loops%2 == 0 && qp > 128 {
				qp /= 2
			} else {
				mr /= 2
				pble /= 2
			}
			continue
		}
		if pble > 512*fpmMultiplier*diff {
			pble -= 256 * fpmMultiplier * diff
			continue
		} else if pble > 100*fpmMultiplier {
			pble -= 10 * fpmMultiplier
		} else if pble > fpmMultiplier {
			pble -= fpmMultiplier
		} else if qp <= 128 {
			if o[hmc.FSIMC].cnt > 256 {
				o[hmc.FSIMC].cnt /= 2
			}
			if o[hmc.FSIAV].cnt > 256 {
				o[hmc.FSIAV].cnt /= 2
			}
		}
		if mr > fpmMultiplier {
			mr -= fpmMultiplier
		}
		if r.loops%10 == 0 && qp > 128 {
			qp /= 2
			if o[hmc.FSIAV].cnt > 256 {
				o[hmc.FSIAV].cnt /= 2
			}
		}
	}
	if r.sdNeeded > d.maxSDs {
		return r, fmt.Errorf("cfg_fpm failed: %d SDs needed, %d available", r.sdNeeded, d.maxSDs)
	}
	if r.loops > 1 && r.sdNeeded < d.maxSDs {
		o[hmc.PBLE].cnt = pble + (d.maxSDs-r.sdNeeded)*256*fpmMultiplier
		r.sdNeeded = d.estSD()
	}
	return r, nil
}

// commitBuf writes the counts the way irdma_sc_cfg_iw_fpm does (+40 and
// +120 zero) into a buffer of the given BUFSIZE.
func (d *drvHMC) commitBuf(size int) []byte {
	b := make([]byte, size)
	for ty := hmc.ObjType(0); ty < hmc.NumObjTypes; ty++ {
		if ty == hmc.APBVT {
			continue
		}
		binary.LittleEndian.PutUint64(b[hmc.CommitSlot(ty):], uint64(d.obj[ty].cnt))
	}
	return b
}

// parseCommit reads the write-back and sizes the SD table from the object
// with the highest base.
func (d *drvHMC) parseCommit(b []byte) {
	for ty := hmc.ObjType(0); ty < hmc.NumObjTypes; ty++ {
		if ty == hmc.SRQ {
			continue // skipped by the driver
		}
		v := le64(b, hmc.CommitSlot(ty))
		switch ty {
		case hmc.QP:
			d.obj[ty].cnt = uint32(v & (1<<21 - 1))
		case hmc.CQ:
			d.obj[ty].cnt = uint32(v & (1<<20 - 1))
		case hmc.APBVT:
			d.obj[ty].cnt = 1
		default:
			d.obj[ty].cnt = uint32(v)
		}
		d.obj[ty].base = (v >> 32) * 512
	}
	var maxBase uint64
	last := 0
	for ty := range d.obj {
		if d.obj[ty].base > maxBase {
			maxBase, last = d.obj[ty].base, ty
		}
	}
	end := uint64(d.obj[last].cnt)*d.obj[last].size + d.obj[last].base
	d.sdCnt = uint32((end + hmc.DirectBPSize - 1) / hmc.DirectBPSize)
}

// checkCreate is hmc.c:irdma_sc_create_hmc_obj's SD range check for every
// object the driver creates up front, plus the PBLE range pble.c grows
// into.
func (d *drvHMC) checkCreate() error {
	for ty := range d.obj {
		o := d.obj[ty]
		if o.cnt == 0 || ty == int(hmc.SRQ) {
			continue
		}
		limit := (o.base+uint64(o.cnt)*o.size-1)/hmc.DirectBPSize + 1
		if limit > uint64(d.sdCnt) {
			return fmt.Errorf("%v [%#x, +%d×%d) needs SD %d of %d", hmc.ObjType(ty), o.base, o.cnt, o.size, limit, d.sdCnt)
		}
	}
	return nil
}

// eagerSDs counts the SDs the driver backs at bring-up: every SD touched by
// a non-PBLE object, plus the first PBLE chunk (pble.c adds one at init).
func (d *drvHMC) eagerSDs() int {
	touched := map[uint64]bool{}
	for ty := range d.obj {
		o := d.obj[ty]
		if o.cnt == 0 || ty == int(hmc.SRQ) {
			continue
		}
		end := o.base + uint64(o.cnt)*o.size
		if ty == int(hmc.PBLE) {
			end = min(end, (o.base/hmc.DirectBPSize+1)*hmc.DirectBPSize)
		}
		for sd := o.base / hmc.DirectBPSize; sd*hmc.DirectBPSize < end; sd++ {
			touched[sd] = true
		}
	}
	return len(touched)
}

// bringUp runs query → count selection → Commit → parse on a fresh HMC.
func bringUp(t *testing.T, qpCount, ird uint32, bufSize int) (*drvHMC, cfgResult, *hmc.HMC) {
	t.Helper()
	_, h := newHMC(t)
	q := make([]byte, 200)
	h.EncodeQuery(q)
	d, err := parseQuery(q)
	if err != nil {
		t.Fatalf("parse query: %v", err)
	}
	res, err := d.cfgFPM(qpCount, ird)
	if err != nil {
		t.Fatalf("qp_count %d ird %d: %v", qpCount, ird, err)
	}
	c := d.commitBuf(bufSize)
	if err := h.Commit(c); err != nil {
		t.Fatalf("qp_count %d ird %d: Commit: %v", qpCount, ird, err)
	}
	want := *d
	d.parseCommit(c)
	for ty := range d.obj {
		if ty != int(hmc.SRQ) && ty != int(hmc.APBVT) && d.obj[ty].cnt != want.obj[ty].cnt {
			t.Errorf("%v: committed %d, driver asked %d", hmc.ObjType(ty), d.obj[ty].cnt, want.obj[ty].cnt)
		}
	}
	if d.sdCnt != h.SDCount() {
		t.Errorf("driver sizes %d SDs, device %d", d.sdCnt, h.SDCount())
	}
	if err := d.checkCreate(); err != nil {
		t.Errorf("qp_count %d: %v", qpCount, err)
	}
	if d.sdCnt > d.maxSDs {
		t.Errorf("layout needs %d SDs > MAX_PE_SDS %d", d.sdCnt, d.maxSDs)
	}
	return d, res, h
}

// TestDriverCountSelection runs the driver's count selection on our query
// values for every qplimit of hw.c:rsrc_limits_table (old and new tables)
// and for the IRD values different drivers use, and checks the commit
// fits. The default GEN_2 case (limits_sel 7 = 256 K QPs requested,
// ICRDMA_MAX_IRD_SIZE 127) is pinned exactly: these are the numbers
// docs/hmc.md reports.
func TestDriverCountSelection(t *testing.T) {
	ird := profile.GEN2().Limits.MaxIRD
	d, res, h := bringUp(t, 256*1024, ird, 208)
	got := map[string]uint32{
		"loops": uint32(res.loops), "sd_needed": res.sdNeeded, "sd_cnt": d.sdCnt,
		"qp": d.obj[hmc.QP].cnt, "cq": d.obj[hmc.CQ].cnt, "mr": d.obj[hmc.MR].cnt,
		"pble": d.obj[hmc.PBLE].cnt, "arp": d.obj[hmc.ARP].cnt, "ah": d.obj[hmc.FSIAV].cnt,
		"mc": d.obj[hmc.FSIMC].cnt, "hte": d.obj[hmc.HTE].cnt, "q1": d.obj[hmc.Q1].cnt,
		"xf": d.obj[hmc.XF].cnt, "timer": d.obj[hmc.TIMER].cnt, "rrf": d.obj[hmc.RRF].cnt,
		"max_ceqs": d.maxCEQs, "eager_sds": uint32(d.eagerSDs()),
	}
	want := map[string]uint32{
		"loops": 1, "sd_needed": 45, "sd_cnt": 45,
		"qp": 16384, "cq": 32768, "mr": 65536, "pble": 8 << 20, "arp": 2048,
		"ah": 65536, "mc": 4096, "hte": 32768, "q1": 4 << 20, "xf": 262144,
		"timer": 2112, "rrf": 524288, "max_ceqs": 256, "eager_sds": 13,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d", k, got[k], w)
		}
	}
	t.Logf("GEN_2 default: %v (device SDCount %d, FPM end %#x)", got, h.SDCount(), h.FPMSize())

	qplimits := []uint32{128, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144}
	for _, ird := range []uint32{8, 32, 64, 127, 128, 255} {
		for _, ql := range qplimits {
			for _, size := range []int{176, 192, 208} {
				d, res, _ := bringUp(t, ql, ird, size)
				wantQP := min(floorPow2(ql), hmc.GEN2QPMax)
				for q1Need(ird, wantQP) > d.obj[hmc.Q1].max {
					wantQP /= 2
				}
				if d.obj[hmc.QP].cnt != wantQP || res.loops != 1 {
					t.Errorf("qp_count %d ird %d: qp %d in %d loops, want %d in 1",
						ql, ird, d.obj[hmc.QP].cnt, res.loops, wantQP)
				}
				if size == 208 && ql == 262144 {
					t.Logf("ird %3d, qp_count %6d: qp %5d cq %5d mr %d pble %d, sd_needed %d, eager SDs %d",
						ird, ql, d.obj[hmc.QP].cnt, d.obj[hmc.CQ].cnt, d.obj[hmc.MR].cnt,
						d.obj[hmc.PBLE].cnt, res.sdNeeded, d.eagerSDs())
				}
			}
		}
	}
}

// TestDriverModelShrinks checks the model's reduction branches against a
// device with a tiny SD budget, so that the model above is exercised on a
// multi-iteration path too (and the leftover-SD PBLE top-up).
func TestDriverModelShrinks(t *testing.T) {
	_, h := newHMC(t)
	q := make([]byte, 176)
	h.EncodeQuery(q)
	binary.LittleEndian.PutUint64(q[0:], uint64(20)<<32) // MAX_PE_SDS 20
	d, err := parseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.cfgFPM(262144, 127)
	if err != nil {
		t.Fatal(err)
	}
	if res.loops <= 1 || res.sdNeeded > 20 {
		t.Errorf("loops %d sd_needed %d, want several loops and ≤ 20", res.loops, res.sdNeeded)
	}
	if err := h.Commit(d.commitBuf(208)); err != nil {
		t.Errorf("Commit of the shrunk counts: %v", err)
	}
	t.Logf("MAX_PE_SDS 20: %d loops, qp %d mr %d pble %d, sd_needed %d",
		res.loops, d.obj[hmc.QP].cnt, d.obj[hmc.MR].cnt, d.obj[hmc.PBLE].cnt, res.sdNeeded)
}

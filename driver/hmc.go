package driver

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// sdTable is the HMC segment-descriptor table (hmc_info->sd_table): one
// entry per 2 MB of FPM space. Every SD this driver programs is DIRECT
// (hw.c:irdma_hmc_setup sets rf->sd_type = IRDMA_SD_TYPE_DIRECT): one 2 MB
// physically contiguous host page whose bus address goes in the SD. Our
// IOVAs are contiguous within a region, so a run of consecutive SDs is
// backed by one 2 MB-aligned region and each SD points at its 2 MB slice
// (fewer memfds than one region per SD; the device sees exactly the same
// per-SD addresses).
type sdTable struct {
	d       *Device
	mu      sync.Mutex
	entries []sdState
	runs    []dmaMem
}

type sdState struct {
	valid bool
	pa    uint64
}

func newSDTable(d *Device, n uint32) *sdTable {
	return &sdTable{d: d, entries: make([]sdState, n)}
}

// sdRange is irdma_find_sd_index_limit: the SDs [first, limit) that back
// cnt objects of size bytes from FPM address base.
func sdRange(base uint64, cnt uint32, size uint64) (first, limit uint32) {
	if cnt == 0 {
		return 0, 0
	}
	end := base + uint64(cnt)*size
	return uint32(base / hmcDirectBPSize), uint32((end-1)/hmcDirectBPSize + 1)
}

// hostAddr maps an FPM address to the bus address of its backing.
func (t *sdTable) hostAddr(fpm uint64) (hostmem.IOVA, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := fpm / hmcDirectBPSize
	if i >= uint64(len(t.entries)) || !t.entries[i].valid {
		return 0, false
	}
	return hostmem.IOVA(t.entries[i].pa + fpm%hmcDirectBPSize), true
}

// backRange gives every not-yet-valid SD in [first, limit) a DIRECT 2 MB
// page (irdma_add_sd_table_entry) and returns the indices it added.
func (t *sdTable) backRange(first, limit uint32) ([]uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if limit > uint32(len(t.entries)) {
		return nil, fmt.Errorf("%w: SD %d beyond table of %d", syscall.EINVAL, limit-1, len(t.entries))
	}
	var added []uint32
	for i := first; i < limit; {
		if t.entries[i].valid {
			i++
			continue
		}
		j := i
		for j < limit && !t.entries[j].valid {
			j++
		}
		m, err := t.d.allocDMA(int(j-i)*hmcDirectBPSize, hmcDirectBPSize, fmt.Sprintf("hmc-sd-%d", i))
		if err != nil {
			return added, err
		}
		t.runs = append(t.runs, m)
		for k := i; k < j; k++ {
			t.entries[k] = sdState{valid: true, pa: m.pa + uint64(k-i)*hmcDirectBPSize}
			added = append(added, k)
		}
		i = j
	}
	return added, nil
}

// program is irdma_hmc_sd_grp: UPDATE_PE_SDS commands of at most
// IRDMA_MAX_SD_ENTRIES entries, setting (set) or clearing the given SDs.
// Before the CCQ exists (and after it is destroyed) each command is
// register-polled (irdma_update_sds_noccq); otherwise it completes on the
// CCQ (irdma_cqp_sds_cmd).
func (t *sdTable) program(idxs []uint32, set bool) error {
	d := t.d
	for len(idxs) > 0 {
		n := min(len(idxs), maxSDEntries)
		ents := make([]sdEntry, n)
		t.mu.Lock()
		for i, idx := range idxs[:n] {
			if set {
				ents[i] = setSDEntry(t.entries[idx].pa, idx, true)
			} else {
				ents[i] = clrSDEntry(idx, true)
			}
		}
		t.mu.Unlock()
		if _, err := d.cqp.exec(func(wqeIdx uint32) (cqpWQE, error) {
			ovfPA := d.cqp.sdbuf.pa + uint64(wqeIdx)*cqpSDBufPerWQE
			w, ovf, err := buildUpdatePESDs(ents, d.cfg.HMCFnID, ovfPA)
			if err != nil {
				return w, err
			}
			for i, e := range ovf {
				a := hostmem.IOVA(ovfPA) + hostmem.IOVA(16*i)
				d.store64(a, e.Cmd)
				d.store64(a+8, e.Data)
			}
			return w, nil
		}); err != nil {
			return err
		}
		idxs = idxs[n:]
	}
	return nil
}

// clearAll clears every valid SD in the device (irdma_del_hmc_objects)
// and releases the backing.
func (t *sdTable) clearAll() error {
	t.mu.Lock()
	var idxs []uint32
	for i, e := range t.entries {
		if e.valid {
			idxs = append(idxs, uint32(i))
		}
	}
	t.mu.Unlock()
	err := t.program(idxs, false)
	t.mu.Lock()
	for i := range t.entries {
		t.entries[i] = sdState{}
	}
	runs := t.runs
	t.runs = nil
	t.mu.Unlock()
	for i := range runs {
		t.d.freeDMA(&runs[i])
	}
	return err
}

// hmcObjTypes is hw.c:iw_hmc_obj_types: the objects irdma_create_hmc_objs
// backs at init (PBLE is backed on demand by the PBLE pool).
var hmcObjTypes = []int{
	hmcQP, hmcCQ, hmcHTE, hmcARP, hmcAPBVT, hmcMR, hmcXF, hmcXFFL, hmcQ1, hmcQ1FL,
	hmcTimer, hmcFSIMC, hmcFSIAV, hmcRRF, hmcRRFFL, hmcHDR, hmcMD, hmcOOISC, hmcOOISCFFL,
}

// hmcSetup is irdma_hmc_setup: irdma_cfg_fpm_val (QUERY_FPM_VAL, count
// selection, COMMIT_FPM_VAL, bases) then irdma_create_hmc_objs (SD
// backing for every object, UPDATE_PE_SDS, SHMC_PAGES_ALLOCATED). All
// register-polled: the CCQ does not exist yet.
func (d *Device) hmcSetup() error {
	// irdma_sc_init_iw_hmc: QUERY_FPM_VAL into the query buffer.
	if err := d.mem.Write(d.fpmQuery.at(0), make([]byte, fpmQueryBufSize)); err != nil {
		return err
	}
	if err := d.cqp.execPoll(func(uint32) (cqpWQE, error) {
		return buildQueryFPM(d.cfg.HMCFnID, d.fpmQuery.pa), nil
	}); err != nil {
		return fmt.Errorf("QUERY_FPM_VAL: %w", err)
	}
	qbuf := make([]byte, fpmQueryBufSize)
	if err := d.mem.Read(d.fpmQuery.at(0), qbuf); err != nil {
		return err
	}
	if err := parseFPMQuery(qbuf, &d.hmc); err != nil {
		return err
	}
	if _, err := cfgFPMCounts(&d.hmc, d.cfg.QPLimit, d.prof); err != nil {
		return err
	}
	// irdma_sc_cfg_iw_fpm: COMMIT_FPM_VAL with the counts.
	cbuf := make([]byte, fpmCommitBufSize)
	buildFPMCommit(&d.hmc, cbuf)
	if err := d.mem.Write(d.fpmCmt.at(0), cbuf); err != nil {
		return err
	}
	if err := d.cqp.execPoll(func(uint32) (cqpWQE, error) {
		return buildCommitFPM(d.cfg.HMCFnID, d.fpmCmt.pa, fpmCommitBufSize), nil
	}); err != nil {
		return fmt.Errorf("COMMIT_FPM_VAL: %w", err)
	}
	if err := d.mem.Read(d.fpmCmt.at(0), cbuf); err != nil {
		return err
	}
	if err := parseFPMCommit(cbuf, &d.hmc, d.prof.Fields); err != nil {
		return err
	}
	// The SD table: sd_cnt (+ first_sd_index) entries, and enough to
	// reach the end of every object (the PBLE pool grows into its range).
	n := d.hmc.SDCnt + d.hmc.Misc.FirstSDIndex + 1
	for t := range hmcMax {
		if _, lim := sdRange(d.hmc.Obj[t].Base, d.hmc.Obj[t].Cnt, d.hmc.Obj[t].Size); lim > n {
			n = lim
		}
	}
	d.sds = newSDTable(d, n)
	// irdma_create_hmc_objs: irdma_sc_create_hmc_obj per type.
	for _, t := range hmcObjTypes {
		o := d.hmc.Obj[t]
		if o.Cnt == 0 {
			continue
		}
		first, lim := sdRange(o.Base, o.Cnt, o.Size)
		if lim > d.hmc.SDCnt+d.hmc.Misc.FirstSDIndex {
			return fmt.Errorf("%w: HMC object %s ends in SD %d, sd_cnt %d", syscall.EINVAL, hmcNames[t], lim-1, d.hmc.SDCnt)
		}
		added, err := d.sds.backRange(first, lim)
		if err != nil {
			return err
		}
		if err := d.sds.program(added, true); err != nil {
			return fmt.Errorf("UPDATE_PE_SDS for %s: %w", hmcNames[t], err)
		}
	}
	if err := d.cqp.execPoll(func(uint32) (cqpWQE, error) {
		return buildSHMCPagesAllocated(d.cfg.HMCFnID), nil
	}); err != nil {
		return fmt.Errorf("SHMC_PAGES_ALLOCATED: %w", err)
	}
	return nil
}

// HMCObject describes one committed HMC object type (for diagnostics and
// the daemon's devinfo).
type HMCObject struct {
	Name  string
	Base  uint64
	Count uint32
	Max   uint32
	Size  uint64
}

// HMCLayout returns the committed HMC object table and the SD count.
func (d *Device) HMCLayout() ([]HMCObject, uint32) {
	out := make([]HMCObject, 0, hmcMax)
	for t := range hmcMax {
		o := d.hmc.Obj[t]
		out = append(out, HMCObject{Name: hmcNames[t], Base: o.Base, Count: o.Cnt, Max: o.MaxCnt, Size: o.Size})
	}
	return out, d.hmc.SDCnt
}

package driver

import (
	"math/rand/v2"
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// IB access flags (ib_access_flags).
const (
	AccessLocalWrite   uint32 = 1 << 0
	AccessRemoteWrite  uint32 = 1 << 1
	AccessRemoteRead   uint32 = 1 << 2
	AccessRemoteAtomic uint32 = 1 << 3
	AccessMWBind       uint32 = 1 << 4
	AccessZeroBased    uint32 = 1 << 5
)

// mrAccess is verbs.c:irdma_get_mr_access: the hardware rights (LOCALREAD
// always; LOCALWRITE 0x02, REMOTEWRITE 0x0a, REMOTEREAD 0x05, BIND_WINDOW
// 0x10, ZERO_BASED 0x20).
func mrAccess(access uint32) uint8 {
	r := accessLocalRead
	if access&AccessLocalWrite != 0 {
		r |= accessLocalWrite
	}
	if access&AccessRemoteWrite != 0 {
		r |= accessRemoteWrite
	}
	if access&AccessRemoteRead != 0 {
		r |= accessRemoteRead
	}
	if access&AccessMWBind != 0 {
		r |= accessBindWindow
	}
	if access&AccessZeroBased != 0 {
		r |= accessZeroBased
	}
	return r
}

// MR is a memory region, or the queue-memory registration of a user QP or
// CQ (irdma_mr with its irdma_pbl).
type MR struct {
	d        *Device
	pd       *PD
	typ      MemRegType
	stag     uint32
	length   uint64
	iova     uint64
	userBase uint64
	pageSize uint64
	pageCnt  uint32
	access   uint32
	pgaddrs  []uint64 // irdma pgaddrmem / the page list

	pblAllocated bool
	palloc       *pbleAlloc
	// unreg: a ReregUserMR undid the hardware registration and could not
	// redo it (irdma's is_hwreg clear): DeregMR has no STag to DEALLOC.
	unreg bool

	// queue memory (reg_type QP / CQ): irdma_qp_mr / irdma_cq_mr
	qAddr    uint64 // CQ ring PA (contiguous) or SQ PA
	rqAddr   uint64
	shadow   uint64
	sqPBLIdx uint32
	rqPBLIdx uint32
	onList   bool
	uctx     *UContext

	// fast-register MRs: irdma_set_page / irdma_map_mr_sg state
	fastReg  bool
	maxPages uint32
	npages   uint32
	fmu      sync.Mutex

	dead bool
}

// LKey is the MR's local key (the STag).
func (m *MR) LKey() uint32 { return m.stag }

// RKey is the MR's remote key (the STag).
func (m *MR) RKey() uint32 { return m.stag }

// PageSize is the page size the registration uses.
func (m *MR) PageSize() uint64 { return m.pageSize }

// Length is the registered length.
func (m *MR) Length() uint64 { return m.length }

// createSTag is verbs.c:irdma_create_stag: a random consumer key (low
// byte), random driver-key bits above the MR index (~mr_stagmask), and an
// MR index from the bitmap starting the search at a random index. 0 means
// no index was free.
func (d *Device) createSTag() uint32 {
	r := rand.Uint32()
	consumerKey := uint8(r)
	driverKey := r &^ d.mrStagMask
	next := (r & d.mrStagMask) >> 8
	idx, err := d.mrIDs.alloc(int64(next))
	if err != nil {
		return 0
	}
	stag := idx<<8 | driverKey
	stag += uint32(consumerKey)
	return stag
}

// freeSTag is verbs.c:irdma_free_stag.
func (d *Device) freeSTag(stag uint32) {
	d.mrIDs.free((stag & d.mrStagMask) >> 8)
}

// MemReg is irdma_mem_reg_req: what a user registration is for.
type MemReg struct {
	Type    MemRegType
	SQPages uint32
	RQPages uint32
	CQPages uint32
}

// bestPageSize is ib_umem_find_best_pgsz over a list of 4 KB page bus
// addresses: the largest page size in pgszCap for which the region's
// first byte and virt agree modulo the page size and every
// discontinuity between consecutive 4 KB pages falls on a page boundary
// of that size. 0 when none (not even 4 KB) fits.
func bestPageSize(pages []uint64, start, virt uint64, pgszCap uint64) uint64 {
	if len(pages) == 0 {
		return 0
	}
	first := pages[0] + start%4096
	for _, pg := range []uint64{1 << 30, 2 << 20, 4 << 10} {
		if pgszCap&pg == 0 || (first^virt)&(pg-1) != 0 {
			continue
		}
		ok := true
		for i := 1; i < len(pages); i++ {
			if pages[i] != pages[i-1]+4096 && (pages[i]%pg != 0 || (pages[i-1]+4096)%pg != 0) {
				ok = false
				break
			}
		}
		if ok {
			return pg
		}
	}
	return 0
}

// dmaBlocks is ib_umem_num_dma_blocks + rdma_umem_for_each_dma_block: the
// bus addresses of the pgsz blocks covering [virt, virt+length), each
// aligned down to pgsz.
func dmaBlocks(pages []uint64, start, virt, length, pgsz uint64) []uint64 {
	base := virt &^ (pgsz - 1)
	end := (virt + length + pgsz - 1) &^ (pgsz - 1)
	if length == 0 {
		end = base + pgsz
	}
	n := (end - base) / pgsz
	out := make([]uint64, 0, n)
	off0 := start % 4096
	for k := uint64(0); k < n; k++ {
		var o uint64 // byte offset into the region of this block's first byte
		if bs := base + k*pgsz; bs > virt {
			o = bs - virt
		}
		pi := (off0 + o) / 4096
		if pi >= uint64(len(pages)) {
			break
		}
		dma := pages[pi] + (off0+o)%4096
		out = append(out, dma&^(pgsz-1))
	}
	return out
}

// checkMemContiguous is verbs.c:irdma_check_mem_contiguous.
func checkMemContiguous(arr []uint64, pgsz uint64) bool {
	for i := range arr {
		if arr[0]+pgsz*uint64(i) != arr[i] {
			return false
		}
	}
	return true
}

// RegUserMR is verbs.c:irdma_reg_user_mr. pages are the bus addresses of
// the 4 KB pages backing [start, start+length) (the daemon maps a client's
// memory and hands their IOVAs, standing in for ib_umem_get). reg selects
// what the registration is for: MEM registers an MR (page size the
// largest of page_size_cap that fits, level 0/1/2 PBLEs, contiguous
// shortcut, REG_MR); QP and CQ only prepare the queue memory of a later
// CreateQP/CreateCQ of uc (no CQP command). Errors: -EINVAL (length over
// max_mr_size, too few pages for the queues), -EOPNOTSUPP (no page size
// fits), -ENOMEM.
func (d *Device) RegUserMR(pd *PD, uc *UContext, start, length, virt uint64, access uint32, pages []uint64, reg MemReg) (*MR, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() {
		return nil, syscall.EINVAL
	}
	if length > d.prof.Limits.MaxMRSize {
		return nil, syscall.EINVAL
	}
	need := (start%4096 + length + 4095) / 4096
	if length == 0 || uint64(len(pages)) < need {
		return nil, syscall.EINVAL
	}
	pages = pages[:need]
	m := &MR{d: d, pd: pd, typ: reg.Type, length: length, iova: virt, userBase: virt, access: access, pageSize: 4096, uctx: uc}
	if reg.Type == MemRegMem {
		m.pageSize = bestPageSize(pages, start, virt, d.prof.Limits.PageSizeCap)
		if m.pageSize == 0 {
			return nil, syscall.EOPNOTSUPP
		}
	}
	m.pgaddrs = dmaBlocks(pages, start, virt, length, m.pageSize)
	m.pageCnt = uint32(len(m.pgaddrs))
	switch reg.Type {
	case MemRegQP:
		if uc == nil {
			return nil, syscall.EINVAL
		}
		if uint64(reg.SQPages)+uint64(reg.RQPages)+1 > uint64(m.pageCnt) {
			return nil, syscall.EINVAL
		}
		if err := d.handleQMem(m, reg, reg.SQPages+reg.RQPages > 2); err != nil {
			return nil, err
		}
		uc.addPBL(m, MemRegQP)
	case MemRegCQ:
		if uc == nil {
			return nil, syscall.EINVAL
		}
		// IRDMA_FEATURE_CQ_RESIZE: no shadow page after the ring.
		if reg.CQPages > m.pageCnt {
			return nil, syscall.EINVAL
		}
		if err := d.handleQMem(m, reg, reg.CQPages > 1); err != nil {
			return nil, err
		}
		uc.addPBL(m, MemRegCQ)
	case MemRegSRQ:
		// verbs.c:irdma_reg_user_mr_type_srq: the ring pages (rq_pages)
		// then the shadow page; GEN_3 only.
		if uc == nil || d.srqIDs == nil {
			return nil, syscall.EINVAL
		}
		if uint64(reg.RQPages)+1 > uint64(m.pageCnt) {
			return nil, syscall.EINVAL
		}
		if err := d.handleQMem(m, reg, m.pageCnt != 1); err != nil {
			return nil, err
		}
		uc.addPBL(m, MemRegSRQ)
	case MemRegMem:
		if err := d.regUserMRTypeMem(m, access); err != nil {
			return nil, err
		}
	default:
		return nil, syscall.EINVAL
	}
	pd.users.Add(1)
	return m, nil
}

// handleQMem is verbs.c:irdma_handle_q_mem: level-1 PBLEs only; QP: SQ
// pages, RQ pages, then the shadow page; CQ: the ring pages (the shadow
// area is a separate registration with CQ_RESIZE). If the queues turn
// out physically contiguous the PBLEs are freed and PAs used instead.
func (d *Device) handleQMem(m *MR, reg MemReg, usePBLEs bool) error {
	if err := d.setupPBLEs(m, usePBLEs, true); err != nil {
		return err
	}
	arr := m.pgaddrs
	contiguous := true
	switch m.typ {
	case MemRegQP:
		total := reg.SQPages + reg.RQPages
		m.shadow = arr[total]
		if usePBLEs {
			contiguous = checkMemContiguous(arr[:reg.SQPages], m.pageSize) &&
				checkMemContiguous(arr[reg.SQPages:total], m.pageSize)
		}
		if !contiguous {
			m.sqPBLIdx = m.palloc.l1.idx
			m.rqPBLIdx = m.palloc.l1.idx + reg.SQPages
		} else {
			m.qAddr = arr[0]
			m.rqAddr = arr[reg.SQPages]
		}
	case MemRegSRQ:
		m.shadow = arr[reg.RQPages]
		if usePBLEs {
			contiguous = checkMemContiguous(arr[:reg.RQPages], m.pageSize)
		}
		if contiguous {
			m.qAddr = arr[0]
		} else {
			m.sqPBLIdx = m.palloc.l1.idx
		}
	case MemRegCQ:
		if usePBLEs {
			contiguous = checkMemContiguous(arr[:reg.CQPages], m.pageSize)
		}
		if contiguous {
			m.qAddr = arr[0]
		}
	}
	if usePBLEs && contiguous {
		d.pble.free(m.palloc)
		m.palloc, m.pblAllocated = nil, false
	}
	return nil
}

// setupPBLEs is verbs.c:irdma_setup_pbles: with PBLEs, allocate page_cnt
// of them (level 1 or 2) and copy the page addresses in.
func (d *Device) setupPBLEs(m *MR, usePBLEs, lvl1Only bool) error {
	if !usePBLEs {
		return nil
	}
	a, err := d.pble.get(m.pageCnt, lvl1Only)
	if err != nil {
		return err
	}
	m.palloc, m.pblAllocated = a, true
	d.pble.fill(a, m.pgaddrs)
	return nil
}

// checkMRContiguous is verbs.c:irdma_check_mr_contiguous.
func checkMRContiguous(m *MR) bool {
	a := m.palloc
	if a.level == pbleLevel1 {
		return checkMemContiguous(m.pgaddrs, m.pageSize)
	}
	start := m.pgaddrs[0]
	for i := range a.leaves {
		lo := i * pblePerPage
		hi := min(lo+pblePerPage, len(m.pgaddrs))
		if start+uint64(i)*m.pageSize*pblePerPage != m.pgaddrs[lo] {
			return false
		}
		if !checkMemContiguous(m.pgaddrs[lo:hi], m.pageSize) {
			return false
		}
	}
	return true
}

// regUserMRTypeMem is verbs.c:irdma_reg_user_mr_type_mem.
func (d *Device) regUserMRTypeMem(m *MR, access uint32) error {
	use := m.pageCnt != 1
	if err := d.setupPBLEs(m, use, false); err != nil {
		return err
	}
	if use && checkMRContiguous(m) {
		d.pble.free(m.palloc)
		m.palloc, m.pblAllocated = nil, false
	}
	stag := d.createSTag()
	if stag == 0 {
		d.freePBL(m)
		return syscall.ENOMEM
	}
	m.stag = stag
	if err := d.hwRegMR(m, access); err != nil {
		d.freeSTag(stag)
		d.freePBL(m)
		return err
	}
	return nil
}

func (d *Device) freePBL(m *MR) {
	if m.pblAllocated {
		d.pble.free(m.palloc)
		m.palloc, m.pblAllocated = nil, false
	}
}

// hwRegMR is verbs.c:irdma_hwreg_mr: REG_MR with the MR's VA (or
// zero-based), key, length, rights, PD and either a level-1 PBL
// (chunk_size 1), a level-2 root (chunk_size 3) or the first page's PA.
func (d *Device) hwRegMR(m *MR, access uint32) error {
	rights := mrAccess(access)
	s := stagInfo{
		VA: m.userBase, STagIdx: m.stag >> 8, STagKey: uint8(m.stag), TotalLen: m.length,
		AccessRights: rights, PDID: m.pd.id, ZeroBased: rights&accessZeroBased != 0,
		PageSize: m.pageSize,
		// Only with IRDMA_FEATURE_ATOMIC_OPS (irdma_hwreg_mr).
		RemoteAtomicsEn: access&AccessRemoteAtomic != 0 && d.ukAttrs.FeatureFlags&profile.FeatureAtomicOps != 0,
	}
	if m.length == 0 && !m.pd.unsafeGlobalRKey {
		// irdma_sc_mr_reg_non_shared: !total_len && !all_memory.
		return syscall.EINVAL
	}
	if m.pblAllocated {
		s.FirstPBLIdx = m.palloc.firstIdx()
		if m.palloc.level == pbleLevel1 {
			s.ChunkSize = 1
		} else {
			s.ChunkSize = 3
		}
	} else if len(m.pgaddrs) > 0 {
		s.RegAddrPA = m.pgaddrs[0]
	}
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildRegMR(d.prof.Fields, s, d.hmc.Obj[hmcPBLE].Cnt)
	})
	return err
}

// RegPhysMR is verbs.c:irdma_reg_phys_mr: one 4 KB-page registration of
// [addr, addr+size) at iova, level 0.
func (d *Device) RegPhysMR(pd *PD, addr, size uint64, access uint32, iova uint64) (*MR, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() {
		return nil, syscall.EINVAL
	}
	m := &MR{d: d, pd: pd, typ: MemRegMem, userBase: iova, iova: iova, pageCnt: 1, pgaddrs: []uint64{addr},
		length: size, pageSize: 4096, access: access}
	stag := d.createSTag()
	if stag == 0 {
		return nil, syscall.ENOMEM
	}
	m.stag = stag
	if err := d.hwRegMR(m, access); err != nil {
		d.freeSTag(stag)
		return nil, err
	}
	pd.users.Add(1)
	return m, nil
}

// GetDMAMR is verbs.c:irdma_get_dma_mr: irdma_reg_phys_mr(pd, 0, 0, acc,
// 0), an all-memory MR, which REG_MR accepts only for a PD with
// IB_PD_UNSAFE_GLOBAL_RKEY (-EINVAL otherwise).
func (d *Device) GetDMAMR(pd *PD, access uint32) (*MR, error) {
	return d.RegPhysMR(pd, 0, 0, access, 0)
}

// AllocMR is verbs.c:irdma_alloc_mr: a fast-register MR of maxNumSG pages:
// level-1 PBLEs, then ALLOC_STAG (length maxNumSG × 4 KB, remote access,
// no rights until the FAST_REGISTER WQE supplies them).
func (d *Device) AllocMR(pd *PD, maxNumSG uint32) (*MR, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() {
		return nil, syscall.EINVAL
	}
	if maxNumSG == 0 || maxNumSG > d.prof.Limits.MaxFastRegPageListLen {
		return nil, syscall.EINVAL
	}
	stag := d.createSTag()
	if stag == 0 {
		return nil, syscall.ENOMEM
	}
	m := &MR{d: d, pd: pd, typ: MemRegMem, stag: stag, fastReg: true, maxPages: maxNumSG, pageCnt: maxNumSG,
		length: uint64(maxNumSG) * 4096, pageSize: 4096}
	a, err := d.pble.get(maxNumSG, true)
	if err != nil {
		d.freeSTag(stag)
		return nil, err
	}
	m.palloc = a
	s := stagInfo{STagIdx: stag >> 8, PDID: pd.id, TotalLen: m.length, PageSize: 4096, RemoteAccess: true}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildAllocSTag(d.prof.Fields, s), nil }); err != nil {
		d.pble.free(a)
		d.freeSTag(stag)
		return nil, err
	}
	m.pblAllocated = true
	pd.users.Add(1)
	return m, nil
}

// MapMRSG is verbs.c:irdma_map_mr_sg over ib_sg_to_pages: the MR's page
// list is rewritten from the given page addresses (already split into
// pageSize pages) through irdma_set_page; it returns how many were
// mapped, -ENOMEM past max_num_sg for the first page.
func (d *Device) MapMRSG(m *MR, pageSize uint64, iova, length uint64, pages []uint64) (int, error) {
	if m == nil || !m.fastReg {
		return 0, syscall.EINVAL
	}
	if _, ok := hwPageSize(pageSize); !ok {
		return 0, syscall.EINVAL
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	m.npages = 0
	m.pageSize = pageSize
	m.iova = iova
	m.length = length
	for i, pg := range pages {
		if m.npages == m.maxPages { // irdma_set_page
			if i == 0 {
				return 0, syscall.ENOMEM
			}
			return i, nil
		}
		d.pble.setPage(m.palloc, m.npages, pg)
		m.npages++
	}
	return len(pages), nil
}

// FastRegWR returns the uk.RegMRWR fields an IB_WR_REG_MR work request for
// this MR carries (irdma_post_send reads them from the MR).
func (m *MR) FastRegWR(key uint32, access uint32) uk.RegMRWR {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	var pbl uint64
	if m.palloc != nil && m.palloc.level == pbleLevel1 {
		pbl = m.d.pble.read(m.palloc.l1.idx)
	}
	idx := uint32(0)
	if m.palloc != nil {
		idx = m.palloc.firstIdx()
	}
	return uk.RegMRWR{Key: key, Access: access, PageSize: m.pageSize, IOVA: m.iova, Length: m.length,
		PBLAddr: pbl, FirstPMPBLIndex: idx, NPages: m.npages}
}

// DeregMR is verbs.c:irdma_dereg_mr. A queue-memory registration leaves
// its context's list and frees its PBLEs; an MR is DEALLOC_STAG'd (MR = 1)
// first: if that fails the MR stays and the error is returned.
func (d *Device) DeregMR(m *MR) error {
	if m == nil || m.d != d || m.dead {
		return syscall.EINVAL
	}
	if m.typ != MemRegMem {
		if m.uctx != nil {
			m.uctx.delMemlist(m)
		}
	} else if d.alive() == nil {
		if !m.unreg {
			s := stagInfo{PDID: m.pd.id, STagIdx: m.stag >> 8, MR: true}
			if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDeallocSTag(d.prof.Fields, s), nil }); err != nil {
				return err
			}
		}
		d.freeSTag(m.stag)
	}
	d.freePBL(m)
	m.dead = true
	m.pd.users.Add(-1)
	return nil
}

// MW is a memory window.
type MW struct {
	d    *Device
	pd   *PD
	stag uint32
	typ  uint8
	dead bool
}

// RKey is the window's STag.
func (w *MW) RKey() uint32 { return w.stag }

// AllocMW is verbs.c:irdma_alloc_mw + irdma_hw_alloc_mw: an STag and
// ALLOC_STAG in its MW form (MWTYPE set for type 1).
func (d *Device) AllocMW(pd *PD, mwType uint8) (*MW, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() || (mwType != 1 && mwType != 2) {
		return nil, syscall.EINVAL
	}
	stag := d.createSTag()
	if stag == 0 {
		return nil, syscall.ENOMEM
	}
	s := stagInfo{STagIdx: stag >> 8, PDID: pd.id, MWWide: mwType == 1, PageSize: 4096, RemoteAccess: true}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildAllocMW(d.prof.Fields, s), nil }); err != nil {
		d.freeSTag(stag)
		return nil, err
	}
	pd.users.Add(1)
	return &MW{d: d, pd: pd, stag: stag, typ: mwType}, nil
}

// DeallocMW is verbs.c:irdma_dealloc_mw: DEALLOC_STAG (MR = 0); the STag
// is freed whatever the completion says.
func (d *Device) DeallocMW(w *MW) error {
	if w == nil || w.d != d || w.dead {
		return syscall.EINVAL
	}
	if d.alive() == nil {
		s := stagInfo{PDID: w.pd.id, STagIdx: w.stag >> 8, MR: false}
		_, _ = d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDeallocSTag(d.prof.Fields, s), nil })
	}
	d.freeSTag(w.stag)
	w.dead = true
	w.pd.users.Add(-1)
	return nil
}

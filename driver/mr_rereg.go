package driver

import "syscall"

// Rereg flags (ib_verbs.h IB_MR_REREG_*).
const (
	ReregTrans  = 1 << 0
	ReregPD     = 1 << 1
	ReregAccess = 1 << 2
)

// ReregTranslation is the new [start, start+length) at virt of a
// ReregUserMR with ReregTrans, with the bus addresses of its 4 KB pages.
type ReregTranslation struct {
	Start, Length, Virt uint64
	Pages               []uint64
}

// ReregUserMR is verbs.c:irdma_rereg_user_mr: the MR keeps its STag; its
// hardware registration is undone (irdma_hwdereg_mr: DEALLOC_STAG) and
// redone (irdma_hwreg_mr: REG_MR) with the new access rights, PD and/or
// translation (irdma_rereg_mr_trans: new pages, page size and PBLEs).
// Flags other than the three are -EOPNOTSUPP; only MRs (reg_type MEM) are
// reregistered. When the new registration fails the MR is left without
// one, as on Linux (the program can only deregister it).
func (d *Device) ReregUserMR(m *MR, flags int, pd *PD, access uint32, tr *ReregTranslation) error {
	if flags&^(ReregTrans|ReregPD|ReregAccess) != 0 {
		return syscall.EOPNOTSUPP
	}
	if err := d.alive(); err != nil {
		return err
	}
	if m == nil || m.d != d || m.dead || m.typ != MemRegMem || m.fastReg {
		return syscall.EINVAL
	}
	if flags&ReregPD != 0 && (pd == nil || pd.d != d || pd.dead.Load()) {
		return syscall.EINVAL
	}
	if flags&ReregTrans != 0 {
		if tr == nil || tr.Length == 0 || tr.Length > d.prof.Limits.MaxMRSize {
			return syscall.EINVAL
		}
		if need := (tr.Start%4096 + tr.Length + 4095) / 4096; uint64(len(tr.Pages)) < need {
			return syscall.EINVAL
		}
	}
	// irdma_hwdereg_mr.
	if !m.unreg {
		s := stagInfo{PDID: m.pd.id, STagIdx: m.stag >> 8, MR: true}
		if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDeallocSTag(d.prof.Fields, s), nil }); err != nil {
			return err
		}
		m.unreg = true
	}
	if flags&ReregAccess != 0 {
		m.access = access
	}
	if flags&ReregPD != 0 && pd != m.pd {
		pd.users.Add(1)
		m.pd.users.Add(-1)
		m.pd = pd
	}
	if flags&ReregTrans != 0 {
		// irdma_rereg_mr_trans: the old pages go, the new ones are
		// registered as irdma_reg_user_mr_type_mem does, keeping the STag.
		d.freePBL(m)
		pages := tr.Pages[:(tr.Start%4096+tr.Length+4095)/4096]
		ps := bestPageSize(pages, tr.Start, tr.Virt, d.prof.Limits.PageSizeCap)
		if ps == 0 {
			return syscall.EOPNOTSUPP
		}
		m.length, m.iova, m.userBase, m.pageSize = tr.Length, tr.Virt, tr.Virt, ps
		m.pgaddrs = dmaBlocks(pages, tr.Start, tr.Virt, tr.Length, ps)
		m.pageCnt = uint32(len(m.pgaddrs))
		use := m.pageCnt != 1
		if err := d.setupPBLEs(m, use, false); err != nil {
			return err
		}
		if use && checkMRContiguous(m) {
			d.pble.free(m.palloc)
			m.palloc, m.pblAllocated = nil, false
		}
	}
	if err := d.hwRegMR(m, m.access); err != nil {
		return err
	}
	m.unreg = false
	return nil
}

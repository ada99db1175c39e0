package uverbs

import (
	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// canAlloc is the part of uobj_alloc that can fail before the driver
// runs: no context (-EINVAL, alloc_uobj), or this context holds as many
// handles as the daemon allows.
func (s *Session) canAlloc() error {
	if s.uctx == nil {
		return eINVAL
	}
	if s.h.len() >= s.p.cfg.Limits.MaxObjects {
		return eNOMEM
	}
	return nil
}

// readPD is uobj_get_obj_read for a PD: any failure is -EINVAL for the
// command.
func (s *Session) readPD(handle uint32) (*pdObj, error) {
	v, err := s.h.lookup(handle, kindPD)
	if err != nil {
		return nil, eINVAL
	}
	return v.(*pdObj), nil
}

func (s *Session) readCQ(handle uint32) (*cqObj, error) {
	v, err := s.h.lookup(handle, kindCQ)
	if err != nil {
		return nil, eINVAL
	}
	return v.(*cqObj), nil
}

func (s *Session) readQP(handle uint32) (*qpObj, error) {
	v, err := s.h.lookup(handle, kindQP)
	if err != nil {
		return nil, eINVAL
	}
	return v.(*qpObj), nil
}

// allocPD is ib_uverbs_alloc_pd with irdma_alloc_pd: the response
// {pd_handle} and irdma_alloc_pd_resp {pd_id}.
func (s *Session) allocPD(a *bundle) error {
	if _, err := a.request(szAllocPD); err != nil {
		return err
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	if a.udOutLen < szPDResp { // IRDMA_ALLOC_PD_MIN_RESP_LEN
		return eINVAL
	}
	pd, err := s.p.d.AllocPD(true, 0)
	if err != nil {
		return err
	}
	h := s.h.alloc(object{kindPD, &pdObj{pd: pd}})
	resp := make([]byte, szAllocPDResp)
	put32(resp, 0, h)
	a.respond(resp)
	u := make([]byte, szPDResp)
	put32(u, 0, pd.ID())
	a.udataOut(u)
	return nil
}

// deallocPD is ib_uverbs_dealloc_pd: uobj_perform_destroy; -EBUSY while
// objects use the PD (ib_destroy_usecnt).
func (s *Session) deallocPD(a *bundle) error {
	req, err := a.request(szDeallocPD)
	if err != nil {
		return err
	}
	h := get32(req, 0)
	v, err := s.h.lookup(h, kindPD)
	if err != nil {
		return err
	}
	if err := s.p.d.DeallocPD(v.(*pdObj).pd); err != nil {
		return err
	}
	s.h.remove(h)
	return nil
}

// checkMRAccess is ib_check_mr_access: remote write or atomic needs
// local write; unknown bits are -EINVAL; on-demand paging and the flush
// rights are not offered (-EOPNOTSUPP).
func checkMRAccess(flags uint32) error {
	if flags&(accessRemoteAtomic|accessRemoteWrite) != 0 && flags&accessLocalWrite == 0 {
		return eINVAL
	}
	if flags&^accessSupported != 0 {
		return eINVAL
	}
	if flags&(accessOnDemand|accessFlushGlobal|accessFlushPersist) != 0 {
		return eOPNOTSUPP
	}
	return nil
}

// regMR is ib_uverbs_reg_mr with irdma_reg_user_mr. The registration's
// pages are resolved as ib_umem_get would pin them: queue memory
// (reg_type QP, CQ) from the MEM ranges only, a buffer (reg_type MEM) from
// a MEM range if it lies in one, else through /proc/self/mem. The page
// counts of irdma_mem_reg_req are read for QP, CQ and SRQ registrations only:
// libirdma leaves them uninitialised for reg_type MEM.
func (s *Session) regMR(a *bundle) error {
	req, err := a.request(szRegMR)
	if err != nil {
		return err
	}
	start, length, hcaVA := get64(req, 8), get64(req, 16), get64(req, 24)
	pdh, access := get32(req, 32), get32(req, 36)
	if start%pageSize != hcaVA%pageSize {
		return eINVAL
	}
	if err := checkMRAccess(access); err != nil {
		return err
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	pd, err := s.readPD(pdh)
	if err != nil {
		return err
	}
	// irdma_reg_user_mr
	if length > s.p.regAtt.MaxMRSize {
		return eINVAL
	}
	if len(a.udIn) < szMemRegReq {
		return eINVAL
	}
	ureq := a.udata(szMemRegReq)
	regType := get16(ureq, 0)
	queue := regType == memRegQP || regType == memRegCQ || regType == memRegSRQ
	pages, io, err := s.userPages(start, length, queue)
	if err != nil {
		return err
	}
	reg := driver.MemReg{Type: driver.MemRegType(regType)}
	switch regType {
	case memRegQP:
		reg.SQPages, reg.RQPages = uint32(get16(ureq, 6)), uint32(get16(ureq, 4))
	case memRegCQ:
		reg.CQPages = uint32(get16(ureq, 2))
	case memRegSRQ:
		if !s.p.srq {
			// Kernels before GEN_3 support, which an E810 runs, know
			// no reg_type SRQ (irdma_reg_user_mr's default case).
			s.unmapIO(io)
			return eINVAL
		}
		// irdma_reg_user_mr_type_srq: the ring's pages, then the
		// shadow area's.
		reg.RQPages = uint32(get16(ureq, 4))
	case memRegMem:
	default:
		s.unmapIO(io)
		return eINVAL
	}
	mr, err := s.p.d.RegUserMR(pd.pd, s.uctx, start, length, hcaVA, access, pages, reg)
	if err != nil {
		s.unmapIO(io)
		return err
	}
	h := s.h.alloc(object{kindMR, &mrObj{mr: mr, pd: pd, io: io, regType: regType, resID: s.p.nextMRResID.Add(1) - 1}})
	resp := make([]byte, szRegMRResp)
	put32(resp, 0, h)
	put32(resp, 4, mr.LKey())
	put32(resp, 8, mr.RKey())
	a.respond(resp)
	s.log.Debug("uverbs: REG_MR", zap.Uint64("start", start), zap.Uint64("len", length),
		zap.Uint16("reg_type", regType), zap.Bool("procmem", io != nil), zap.Uint32("lkey", mr.LKey()))
	return nil
}

// deregMR is ib_uverbs_dereg_mr (irdma_dereg_mr): a queue registration
// leaves the context's list, an MR is DEALLOC_STAG'd; the /proc/self/mem
// mapping made for it goes with it.
func (s *Session) deregMR(a *bundle) error {
	req, err := a.request(szDeregMR)
	if err != nil {
		return err
	}
	h := get32(req, 0)
	v, err := s.h.lookup(h, kindMR)
	if err != nil {
		return err
	}
	mo := v.(*mrObj)
	if err := s.p.d.DeregMR(mo.mr); err != nil {
		return err
	}
	s.unmapIO(mo.io)
	s.h.remove(h)
	return nil
}

// allocMW is ib_uverbs_alloc_mw with irdma_alloc_mw.
func (s *Session) allocMW(a *bundle) error {
	req, err := a.request(szAllocMW)
	if err != nil {
		return err
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	pd, err := s.readPD(get32(req, 8))
	if err != nil {
		return err
	}
	typ := get8(req, 12)
	if typ != ibMWType1 && typ != ibMWType2 {
		return eINVAL
	}
	mw, err := s.p.d.AllocMW(pd.pd, typ)
	if err != nil {
		return err
	}
	h := s.h.alloc(object{kindMW, &mwObj{mw: mw, pd: pd}})
	resp := make([]byte, szAllocMWResp)
	put32(resp, 0, h)
	put32(resp, 4, mw.RKey())
	a.respond(resp)
	return nil
}

// deallocMW is ib_uverbs_dealloc_mw.
func (s *Session) deallocMW(a *bundle) error {
	req, err := a.request(szDeallocMW)
	if err != nil {
		return err
	}
	h := get32(req, 0)
	v, err := s.h.lookup(h, kindMW)
	if err != nil {
		return err
	}
	if err := s.p.d.DeallocMW(v.(*mwObj).mw); err != nil {
		return err
	}
	s.h.remove(h)
	return nil
}

// reregMR is ib_uverbs_rereg_mr with irdma_rereg_user_mr: flags none or
// outside TRANS|PD|ACCESS are -EINVAL (IB_MR_REREG_SUPPORTED), a new
// translation must keep the page offset of its address, new access flags
// pass ib_check_mr_access, a new PD must be one of the file's. The MR
// keeps its handle and keys; a new translation gets a fresh mapping of the
// program's memory, the old one going once the device took the new.
func (s *Session) reregMR(a *bundle) error {
	req, err := a.request(szReregMR)
	if err != nil {
		return err
	}
	h, flags := get32(req, 8), get32(req, 12)
	start, length, hcaVA := get64(req, 16), get64(req, 24), get64(req, 32)
	pdh, access := get32(req, 40), get32(req, 44)
	if flags == 0 || flags&^(driver.ReregTrans|driver.ReregPD|driver.ReregAccess) != 0 {
		return eINVAL
	}
	if flags&driver.ReregTrans != 0 && start%pageSize != hcaVA%pageSize {
		return eINVAL
	}
	v, err := s.h.lookup(h, kindMR)
	if err != nil {
		return eINVAL
	}
	mo := v.(*mrObj)
	if flags&driver.ReregAccess != 0 {
		if err := checkMRAccess(access); err != nil {
			return err
		}
	}
	npd := mo.pd
	if flags&driver.ReregPD != 0 {
		if npd, err = s.readPD(pdh); err != nil {
			return err
		}
	}
	if mo.regType != memRegMem {
		return eINVAL
	}
	var tr *driver.ReregTranslation
	var io *hostmem.Region
	if flags&driver.ReregTrans != 0 {
		if length > s.p.regAtt.MaxMRSize {
			return eINVAL
		}
		pages, r, err := s.userPages(start, length, false)
		if err != nil {
			return err
		}
		tr, io = &driver.ReregTranslation{Start: start, Length: length, Virt: hcaVA, Pages: pages}, r
	}
	if err := s.p.d.ReregUserMR(mo.mr, int(flags), npd.pd, access, tr); err != nil {
		s.unmapIO(io)
		return err
	}
	if tr != nil {
		s.unmapIO(mo.io)
		mo.io = io
	}
	mo.pd = npd
	resp := make([]byte, szReregMRResp)
	put32(resp, 0, mo.mr.LKey())
	put32(resp, 4, mo.mr.RKey())
	a.respond(resp)
	s.log.Debug("uverbs: REREG_MR", zap.Uint32("flags", flags), zap.Uint64("start", start), zap.Uint64("len", length),
		zap.Uint32("lkey", mo.mr.LKey()))
	return nil
}

package uverbs

import (
	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/driver"
)

// Shared receive queues: the uverbs SRQ commands over irdma's SRQ verbs,
// which only a GEN_3 device has (the kernel registers create_srq and its
// siblings in irdma_gen3_dev_ops alone, so on GEN_2 every SRQ command is
// the uapi's notsupp method: Session.parse). libibverbs 65 tries the
// ioctl method UVERBS_METHOD_SRQ_CREATE first and, the preload answering
// ENOTTY, falls back to the write command CREATE_SRQ (cmd_srq.c:
// ibv_icmd_create_srq, uverbs ABI 6); libirdma's irdma_ucreate_srq adds
// irdma_create_srq_req and reads irdma_create_srq_resp.

// srqCreate are the fields of ib_uverbs_create_xsrq (CREATE_SRQ fills the
// basic ones: uverbs_cmd.c:ib_uverbs_create_srq).
type srqCreate struct {
	userHandle           uint64
	srqType, pd          uint32
	maxWR, maxSGE, limit uint32
	maxTags, xrcd, cq    uint32
}

// createSRQ is ib_uverbs_create_srq: a basic SRQ.
func (s *Session) createSRQ(a *bundle) error {
	req, err := a.request(szCreateSRQ)
	if err != nil {
		return err
	}
	return s.doCreateSRQ(a, srqCreate{userHandle: get64(req, 8), srqType: ibSRQTBasic, pd: get32(req, 16),
		maxWR: get32(req, 20), maxSGE: get32(req, 24), limit: get32(req, 28)})
}

// createXSRQ is ib_uverbs_create_xsrq: the type is the program's.
func (s *Session) createXSRQ(a *bundle) error {
	req, err := a.request(szCreateXSRQ)
	if err != nil {
		return err
	}
	return s.doCreateSRQ(a, srqCreate{userHandle: get64(req, 8), srqType: get32(req, 16), pd: get32(req, 20),
		maxWR: get32(req, 24), maxSGE: get32(req, 28), limit: get32(req, 32), maxTags: get32(req, 36),
		xrcd: get32(req, 40), cq: get32(req, 44)})
}

// doCreateSRQ is uverbs_cmd.c:__uverbs_create_xsrq with
// verbs.c:irdma_create_srq for a user SRQ: the ring and its shadow area
// are the registration (reg_type SRQ) named by
// irdma_create_srq_req.user_srq_buf. The response is {srq_handle,
// max_wr as irdma rounds it, max_sge, srqn 0} and irdma_create_srq_resp
// {srq_id, srq_size}.
func (s *Session) doCreateSRQ(a *bundle, c srqCreate) error {
	if err := s.canAlloc(); err != nil {
		return err
	}
	switch c.srqType {
	case ibSRQTXRC:
		return eINVAL // the XRC domain: none can exist (no alloc_xrcd)
	case ibSRQTTM:
		// ib_srq_has_cq: the CQ must be the context's.
		if _, err := s.readCQ(c.cq); err != nil {
			return err
		}
	}
	pd, err := s.readPD(c.pd)
	if err != nil {
		return err
	}
	// irdma_create_srq: IB_SRQT_BASIC only; the limits are the
	// driver's (-EINVAL), and so is the udata's length
	// (irdma_setup_umode_srq: at least up to user_shadow_area).
	if c.srqType != ibSRQTBasic {
		return eOPNOTSUPP
	}
	if len(a.udIn) < szSRQReq {
		return eINVAL
	}
	ureq := a.udata(szSRQReq)
	so := &srqObj{userHandle: c.userHandle, pd: pd}
	srq, sr, err := s.p.d.CreateSRQ(pd.pd, driver.SRQInitAttr{
		Attr: driver.SRQAttr{MaxWR: c.maxWR, MaxSGE: c.maxSGE, SRQLimit: c.limit},
		User: &driver.UserSRQ{Ctx: s.uctx, UserSRQBuf: get64(ureq, 0), UserShadowArea: get64(ureq, 8)},
		// ib_uverbs_srq_event_handler
		EventHandler: func(_ *driver.SRQ, ev driver.AsyncEvent) {
			if !so.dead.Load() {
				s.asyncEvent(&so.async, so.userHandle, uint32(ev.Type))
			}
		},
	})
	if err != nil {
		if err == ePROTO { // irdma_setup_umode_srq: no SRQ registration at user_srq_buf
			s.log.Debug("uverbs: CREATE_SRQ names no SRQ registration", zap.Uint64("user_srq_buf", get64(ureq, 0)))
		}
		return err
	}
	at, err := s.p.d.QuerySRQ(srq)
	if err != nil {
		_ = s.p.d.DestroySRQ(srq)
		return err
	}
	so.srq = srq
	so.handle = s.h.alloc(object{kindSRQ, so})

	resp := make([]byte, szCreateSRQResp)
	put32(resp, 0, so.handle)
	put32(resp, 4, at.MaxWR) // irdma_create_srq: attr->max_wr = (depth − IRDMA_RQ_RSVD) >> shift
	put32(resp, 8, c.maxSGE) // attr.max_sge as given
	// srqn: XRC SRQs only.
	a.respond(resp)
	ur := make([]byte, szSRQResp)
	put32(ur, 0, sr.SRQID)
	put32(ur, 4, sr.SRQSize)
	a.udataOut(ur)
	s.log.Debug("uverbs: CREATE_SRQ", zap.Uint32("srq", sr.SRQID), zap.Uint32("size", sr.SRQSize),
		zap.Uint32("max_wr", at.MaxWR))
	return nil
}

// readSRQ is uobj_get_obj_read for an SRQ: any failure is -EINVAL.
func (s *Session) readSRQ(handle uint32) (*srqObj, error) {
	v, err := s.h.lookup(handle, kindSRQ)
	if err != nil {
		return nil, eINVAL
	}
	return v.(*srqObj), nil
}

// modifySRQ is ib_uverbs_modify_srq over irdma_modify_srq: the core
// passes the mask through; irdma refuses IB_SRQ_MAX_WR (-EINVAL) and arms
// the limit event for IB_SRQ_LIMIT.
func (s *Session) modifySRQ(a *bundle) error {
	req, err := a.request(szModifySRQ)
	if err != nil {
		return err
	}
	so, err := s.readSRQ(get32(req, 0))
	if err != nil {
		return err
	}
	return s.p.d.ModifySRQ(so.srq, driver.SRQAttr{MaxWR: get32(req, 8), SRQLimit: get32(req, 12)},
		driver.SRQAttrMask(get32(req, 4)))
}

// querySRQ is ib_uverbs_query_srq over irdma_query_srq.
func (s *Session) querySRQ(a *bundle) error {
	req, err := a.request(szQuerySRQ)
	if err != nil {
		return err
	}
	so, err := s.readSRQ(get32(req, 8))
	if err != nil {
		return err
	}
	at, err := s.p.d.QuerySRQ(so.srq)
	if err != nil {
		return err
	}
	resp := make([]byte, szQuerySRQResp)
	put32(resp, 0, at.MaxWR)
	put32(resp, 4, at.MaxSGE)
	put32(resp, 8, at.SRQLimit)
	a.respond(resp)
	return nil
}

// destroySRQ is ib_uverbs_destroy_srq (uverbs_free_srq,
// ib_destroy_srq_user): -EBUSY while QPs use it; the SRQ's unread async
// events are dropped and events_reported counts those the program read.
func (s *Session) destroySRQ(a *bundle) error {
	req, err := a.request(szDestroySRQ)
	if err != nil {
		return err
	}
	h := get32(req, 8)
	v, err := s.h.lookup(h, kindSRQ)
	if err != nil {
		return err
	}
	so := v.(*srqObj)
	if err := s.p.d.DestroySRQ(so.srq); err != nil {
		return err
	}
	so.dead.Store(true)
	s.h.remove(h)
	var n uint32
	if ef := s.async.Load(); ef != nil {
		n = ef.purge(&so.async)
	}
	resp := make([]byte, szDestroySRQResp)
	put32(resp, 0, n)
	a.respond(resp)
	return nil
}

// postSRQRecv is ib_uverbs_post_srq_recv up to the driver: the same
// unmarshalling as POST_RECV, then the SRQ. A user SRQ's ring is the
// program's (irdma_post_srq_recv would write a ring it never mapped), so
// a well-formed command is -EOPNOTSUPP, as POST_RECV is.
func (s *Session) postSRQRecv(a *bundle) error {
	return s.unmarshallRecv(a, func(h uint32) error {
		_, err := s.readSRQ(h)
		return err
	})
}

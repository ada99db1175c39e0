package uverbs

import (
	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// qpCreate are the fields of ib_uverbs_ex_create_qp (the legacy command
// fills the common ones, ib_uverbs_create_qp → create_qp).
type qpCreate struct {
	userHandle                               uint64
	pd, sendCQ, recvCQ, srq                  uint32
	cap                                      driver.QPCap
	sigAll                                   bool
	qpType                                   uint8
	isSRQ                                    bool
	compMask, createFlags, rwqIndTbl, srcQPN uint32
}

func parseQPCreate(b []byte, off int) qpCreate {
	// ib_uverbs_create_qp from user_handle on (off = 8), or
	// ib_uverbs_ex_create_qp (off = 0): the same layout.
	return qpCreate{
		userHandle: get64(b, off), pd: get32(b, off+8), sendCQ: get32(b, off+12), recvCQ: get32(b, off+16),
		srq: get32(b, off+20),
		cap: driver.QPCap{MaxSendWR: get32(b, off+24), MaxRecvWR: get32(b, off+28), MaxSendSGE: get32(b, off+32),
			MaxRecvSGE: get32(b, off+36), MaxInlineData: get32(b, off+40)},
		sigAll: get8(b, off+44) != 0, qpType: get8(b, off+45), isSRQ: get8(b, off+46) != 0,
	}
}

func (s *Session) createQP(a *bundle) error {
	req, err := a.request(szCreateQP)
	if err != nil {
		return err
	}
	return s.doCreateQP(a, parseQPCreate(req, 8), false)
}

// exCreateQP is ib_uverbs_ex_create_qp: only the indirection-table bit
// of comp_mask is known, reserved must be 0.
func (s *Session) exCreateQP(a *bundle) error {
	req, err := a.request(szExCreateQP)
	if err != nil {
		return err
	}
	c := parseQPCreate(req, 0)
	c.compMask, c.createFlags, c.rwqIndTbl, c.srcQPN = get32(req, 48), get32(req, 52), get32(req, 56), get32(req, 60)
	if c.compMask&^createQPMaskIndTable != 0 {
		return eINVAL
	}
	if get8(req, 47) != 0 {
		return eINVAL
	}
	return s.doCreateQP(a, c, true)
}

// capNetRaw stands for capable(CAP_NET_RAW) of the calling process: the
// daemon knows only its credentials, so root has it.
func (s *Session) capNetRaw() bool { return s.peer.Cred != nil && s.peer.Cred.Uid == 0 }

// doCreateQP is uverbs_cmd.c:create_qp with irdma_create_qp for a user
// QP: the SQ, RQ and shadow area are the registration (reg_type QP)
// named by irdma_create_qp_req.user_wqe_bufs; user_compl_ctx is what the
// device returns in the QP's CQEs.
func (s *Session) doCreateQP(a *bundle, c qpCreate, ex bool) error {
	switch c.qpType {
	case ibQPTRawPacket:
		if !s.capNetRaw() {
			return ePERM
		}
	case ibQPTRC, ibQPTUC, ibQPTUD, ibQPTXRCIni, ibQPTXRCTgt, ibQPTDriver:
	default:
		return eINVAL
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	if c.compMask&createQPMaskIndTable != 0 {
		return eINVAL // no receive WQ indirection tables exist
	}
	if c.qpType == ibQPTXRCTgt {
		return eINVAL // no XRC domains exist
	}
	var rcq *cqObj
	var srq *srqObj
	if c.qpType == ibQPTXRCIni {
		c.cap.MaxRecvWR, c.cap.MaxRecvSGE = 0, 0
	} else {
		if c.isSRQ {
			// Only basic SRQs can exist (irdma_create_srq).
			var err error
			if srq, err = s.readSRQ(c.srq); err != nil {
				return err
			}
		}
		if c.recvCQ != c.sendCQ {
			var err error
			if rcq, err = s.readCQ(c.recvCQ); err != nil {
				return err
			}
		}
	}
	scq, _ := s.readCQ(c.sendCQ)
	if rcq == nil {
		rcq = scq
	}
	pd, _ := s.readPD(c.pd)
	if pd == nil || scq == nil {
		return eINVAL
	}
	if c.createFlags&^qpCreateAllowed != 0 {
		return eINVAL
	}
	if c.createFlags&qpCreateSrcQPN != 0 && !s.capNetRaw() {
		return ePERM
	}
	// irdma_create_qp: a QP on an SRQ gets the RQ of the smallest ring
	// (max_recv_wr 4 of max_hw_wq_frags SGEs, the program's counts
	// overwritten; libirdma makes its ring with 1 of them, which rounds to
	// the same minimum), then irdma_validate_qp_attrs, then the udata
	// lengths.
	u := s.p.d.UKAttrs()
	if srq != nil {
		c.cap.MaxRecvSGE, c.cap.MaxRecvWR = u.MaxHWWQFrags, srqQPRecvWR
	}
	if c.createFlags != 0 {
		return eOPNOTSUPP
	}
	if c.cap.MaxInlineData > u.MaxHWInline || c.cap.MaxSendSGE > u.MaxHWWQFrags || c.cap.MaxRecvSGE > u.MaxHWWQFrags {
		return eINVAL
	}
	if c.qpType != ibQPTRC && c.qpType != ibQPTUD {
		return eOPNOTSUPP
	}
	if len(a.udIn) < szQPReq || a.udOutLen < szQPRespMin {
		return eINVAL
	}
	ureq := a.udata(szQPReq)
	drvCap, actualSQ, actualRQ, reported, err := s.userQPSizes(c.cap)
	if err != nil {
		return err
	}
	qo := &qpObj{userHandle: c.userHandle, qpType: c.qpType, pd: pd, scq: scq, rcq: rcq, srq: srq, cap: reported}
	var dsrq *driver.SRQ
	if srq != nil {
		dsrq = srq.srq
	}
	qp, qr, err := s.p.d.CreateQP(pd.pd, driver.QPInitAttr{
		Type: driver.QPType(c.qpType), SendCQ: scq.cq, RecvCQ: rcq.cq, SRQ: dsrq, Cap: drvCap, SignalAll: c.sigAll,
		User: &driver.UserQP{Ctx: s.uctx, UserWQEBufs: get64(ureq, 0), UserComplCtx: get64(ureq, 8)},
		// ib_uverbs_qp_event_handler
		EventHandler: func(_ *driver.QP, ev driver.AsyncEvent) {
			if !qo.dead.Load() {
				s.asyncEvent(&qo.async, qo.userHandle, uint32(ev.Type))
			}
		},
	})
	if err != nil {
		if err == eNODATA {
			s.log.Debug("uverbs: CREATE_QP names no QP registration", zap.Uint64("user_wqe_bufs", get64(ureq, 0)))
		}
		return err
	}
	qo.qp = qp
	qo.handle = s.h.alloc(object{kindQP, qo})
	s.setQPID(qp, true)
	s.kickIfPolled()

	resp := make([]byte, szExCreateQPResp)
	put32(resp, 0, qo.handle)
	put32(resp, 4, qp.ID())
	// attr.cap after create: irdma leaves a user QP's as requested, but
	// for the receive side of a QP on an SRQ.
	put32(resp, 8, c.cap.MaxSendWR)
	put32(resp, 12, c.cap.MaxRecvWR)
	put32(resp, 16, c.cap.MaxSendSGE)
	put32(resp, 20, c.cap.MaxRecvSGE)
	put32(resp, 24, c.cap.MaxInlineData)
	if ex {
		put32(resp, 36, a.responseLength(szExCreateQPResp))
		a.respond(resp)
	} else {
		a.respond(resp[:szCreateQPResp])
	}
	ur := make([]byte, szQPResp)
	put32(ur, 0, qr.QPID)
	put32(ur, 4, actualSQ)
	put32(ur, 8, actualRQ)
	if a.udOutLen < szQPResp {
		// GEN_1 libi40iw has the short response.
		put16(ur, 16, invalidPushIdxGen1)
		put8(ur, 18, 1) // lsmm
	}
	put32(ur, 20, qr.QPCaps)
	a.udataOut(ur)
	s.log.Debug("uverbs: CREATE_QP", zap.Uint32("qpn", qp.ID()), zap.Uint32("sq", actualSQ), zap.Uint32("rq", actualRQ),
		zap.Bool("raw_attrs", s.rawAttrs))
	return nil
}

// userQPSizes is irdma_setup_umode_qp's sizing. With
// IRDMA_ALLOC_UCTX_USE_RAW_ATTR the kernel computes the depths from the
// work-request counts as for a kernel QP (irdma_uk_calc_depth_shift_sq/
// _rq) and reports (depth − reserve) >> shift. Without it (the older ABI
// libirdma 44 speaks) max_send_wr and max_recv_wr already are the ring
// sizes in WQEs: the SQ is max_send_wr << sq_shift quanta, the RQ
// max_recv_wr << rq_shift, and the counts are reported back unchanged.
//
// driver.CreateQP sizes every QP the raw way, so in the older ABI the
// counts it is given are chosen to land on the same ring: for a ring of D
// quanta (a power of two, as libirdma always makes it), D − 258 (SQ) or
// D − 1 (RQ) WQEs round up to exactly D. A ring no count can give (not a
// power of two, or below the reserve) is refused with -EINVAL.
func (s *Session) userQPSizes(c driver.QPCap) (drv driver.QPCap, actualSQ, actualRQ uint32, reported driver.QPCap, err error) {
	lim := s.p.lim
	reported = c
	kc := uk.QPCap{MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE,
		MaxRecvSGE: c.MaxRecvSGE, MaxInlineData: c.MaxInlineData}
	if s.rawAttrs {
		sz, e := uk.KernelQPSizes(lim, kc)
		if e != nil {
			return drv, 0, 0, reported, eINVAL
		}
		reported.MaxSendWR, reported.MaxRecvWR = sz.MaxSendWR, sz.MaxRecvWR
		return c, sz.SQDepth >> sz.SQShift, sz.RQDepth >> sz.RQShift, reported, nil
	}
	sqShift := uk.WQEShift(c.MaxSendSGE+1, c.MaxInlineData) // GEN_2: one more fragment for the immediate
	rqShift := uk.WQEShift(c.MaxRecvSGE, 0)
	sqDepth := uint64(c.MaxSendWR) << sqShift
	rqDepth := uint64(c.MaxRecvWR) << rqShift
	if sqDepth < uk.SQReserve+1 || rqDepth < uk.RQReserve+1 || sqDepth > uint64(lim.MaxWQQuanta) ||
		rqDepth > uint64(lim.MaxRQQuanta) {
		s.log.Warn("uverbs: CREATE_QP ring sizes outside the hardware's range",
			zap.Uint32("max_send_wr", c.MaxSendWR), zap.Uint32("max_recv_wr", c.MaxRecvWR))
		return drv, 0, 0, reported, eINVAL
	}
	kc.MaxSendWR = uint32((sqDepth - uk.SQReserve) >> sqShift)
	kc.MaxRecvWR = uint32((rqDepth - uk.RQReserve) >> rqShift)
	sz, e := uk.KernelQPSizes(lim, kc)
	if e != nil || uint64(sz.SQDepth) != sqDepth || uint64(sz.RQDepth) != rqDepth || sz.SQShift != sqShift ||
		sz.RQShift != rqShift {
		s.log.Warn("uverbs: CREATE_QP ring sizes the hardware cannot be programmed with (power of two quanta expected)",
			zap.Uint64("sq_quanta", sqDepth), zap.Uint64("rq_quanta", rqDepth))
		return drv, 0, 0, reported, eINVAL
	}
	drv = c
	drv.MaxSendWR, drv.MaxRecvWR = kc.MaxSendWR, kc.MaxRecvWR
	return drv, c.MaxSendWR, c.MaxRecvWR, reported, nil
}

// queryQP is ib_uverbs_query_qp over irdma_query_qp, which fills what it
// holds and leaves the rest zero — the address vectors, and
// init_attr->sq_sig_type, which reads as IB_SIGNAL_ALL_WR (0): the kernel
// reports sq_sig_all = 1 for every irdma QP.
func (s *Session) queryQP(a *bundle) error {
	req, err := a.request(szQueryQP)
	if err != nil {
		return err
	}
	qo, err := s.readQP(get32(req, 8))
	if err != nil {
		return err
	}
	at, _ := s.p.d.QueryQP(qo.qp)
	resp := make([]byte, szQueryQPResp)
	put32(resp, 64, qo.cap.MaxSendWR)
	put32(resp, 68, qo.cap.MaxRecvWR)
	put32(resp, 72, qo.cap.MaxSendSGE)
	put32(resp, 76, qo.cap.MaxRecvSGE)
	put32(resp, 80, qo.cap.MaxInlineData)
	put32(resp, 84, at.QKey)
	put32(resp, 88, at.RQPSN)
	put32(resp, 92, at.SQPSN)
	put32(resp, 96, at.DestQPNum)
	put32(resp, 100, at.QPAccessFlags)
	put16(resp, 104, at.PKeyIndex)
	put8(resp, 108, uint8(at.QPState))
	put8(resp, 109, uint8(at.CurQPState))
	put8(resp, 110, uint8(at.PathMTU))
	put8(resp, 113, at.MaxRdAtomic)
	put8(resp, 114, at.MaxDestRdAtomic)
	put8(resp, 115, at.MinRNRTimer)
	put8(resp, 116, at.PortNum)
	put8(resp, 118, at.RetryCnt)
	put8(resp, 119, at.RNRRetry)
	put8(resp, 122, 1) // sq_sig_all
	a.respond(resp)
	return nil
}

// modifyQP is ib_uverbs_modify_qp: the legacy command, no provider data,
// no response; attributes up to IB_QP_DEST_QPN.
func (s *Session) modifyQP(a *bundle) error {
	base, err := a.request(szModifyQP)
	if err != nil {
		return err
	}
	if get32(base, 68)&^legacyQPAttrMaskLimit != 0 {
		return eOPNOTSUPP
	}
	return s.doModifyQP(a, base, false)
}

// exModifyQP is ib_uverbs_ex_modify_qp: irdma_modify_qp_req (re-flush of
// a QP in error) in, irdma_modify_qp_resp (push page) out.
func (s *Session) exModifyQP(a *bundle) error {
	cmd, err := a.request(szExModifyQP)
	if err != nil {
		return err
	}
	if get32(cmd, 68)&^exQPAttrMaskLimit != 0 {
		return eOPNOTSUPP
	}
	resp := make([]byte, szExModifyQPResp)
	put32(resp, 4, a.responseLength(szExModifyQPResp))
	if err := s.doModifyQP(a, cmd[:szModifyQP], true); err != nil {
		return err
	}
	a.respond(resp)
	return nil
}

// Attribute mask bits (ib_qp_attr_mask) the core looks at.
const (
	qpState    = 1 << 0
	qpCurState = 1 << 1
	qpPort     = 1 << 5
	qpQKey     = 1 << 6
	qpAV       = 1 << 7
	qpAltPath  = 1 << 14
)

// qpDest is struct ib_uverbs_qp_dest.
type qpDest struct {
	dgid                                       [16]byte
	flowLabel                                  uint32
	dlid                                       uint16
	sgidIndex, hopLimit, trafficClass, sl      uint8
	srcPathBits, staticRate, isGlobal, portNum uint8
}

func parseQPDest(b []byte) qpDest {
	var d qpDest
	copy(d.dgid[:], b)
	d.flowLabel, d.dlid = get32(b, 16), get16(b, 20)
	d.sgidIndex, d.hopLimit, d.trafficClass, d.sl = get8(b, 24), get8(b, 25), get8(b, 26), get8(b, 27)
	d.srcPathBits, d.staticRate, d.isGlobal, d.portNum = get8(b, 28), get8(b, 29), get8(b, 30), get8(b, 31)
	return d
}

// doModifyQP is uverbs_cmd.c:modify_qp, then ib_modify_qp_with_udata
// (_ib_modify_qp: the SGID, the destination MAC of a connected QP, the
// 24-bit PSNs) and irdma_modify_qp_roce.
func (s *Session) doModifyQP(a *bundle, b []byte, ex bool) error {
	qo, err := s.readQP(get32(b, 64))
	if err != nil {
		return err
	}
	mask := get32(b, 68)
	dest, alt := parseQPDest(b[0:32]), parseQPDest(b[32:64])
	state, cur := get8(b, 96), get8(b, 97)
	portNum, altPort := get8(b, 104), get8(b, 108)
	valid := func(p uint8) bool { return p == 1 } // rdma_is_port_valid: one port
	if mask&qpPort != 0 && !valid(portNum) {
		return eINVAL
	}
	if mask&qpAV != 0 {
		if !valid(dest.portNum) {
			return eINVAL
		}
		if mask&qpState != 0 && state == uint8(driver.QPSRTR) {
			// INIT→RTR: the AV's port must be the one set at RST→INIT.
			if dest.portNum != qo.port {
				return eINVAL
			}
		} else {
			if mask&(qpAV|qpPort) == qpAV|qpPort && portNum != dest.portNum {
				return eINVAL
			}
			if mask&(qpAV|qpPort) == qpAV {
				mask |= qpPort
				portNum = dest.portNum
			}
		}
	}
	if mask&qpAltPath != 0 && (!valid(altPort) || !valid(alt.portNum) || altPort != alt.portNum) {
		return eINVAL
	}
	if (mask&qpCurState != 0 && cur > ibQPSErr) || (mask&qpState != 0 && state > ibQPSErr) {
		return eINVAL
	}
	if mask&qpQKey != 0 && get32(b, 72)&ibQPSetQKey != 0 && !s.capNetRaw() {
		return ePERM
	}
	at := driver.QPAttr{
		QPState: driver.QPState(state), CurQPState: driver.QPState(cur), PathMTU: driver.MTU(get8(b, 98)),
		QKey: get32(b, 72), RQPSN: get32(b, 76), SQPSN: get32(b, 80), DestQPNum: get32(b, 84),
		QPAccessFlags: get32(b, 88), PKeyIndex: get16(b, 92), EnSQDAsyncNotify: get8(b, 100) != 0,
		MaxRdAtomic: get8(b, 101), MaxDestRdAtomic: get8(b, 102), MinRNRTimer: get8(b, 103), PortNum: portNum,
		Timeout: get8(b, 105), RetryCnt: get8(b, 106), RNRRetry: get8(b, 107),
	}
	// IB_QP_RATE_LIMIT (rate_limit of the extended command) is outside
	// irdma's standard bits: the driver refuses it (-EOPNOTSUPP).
	if mask&qpAV != 0 {
		// copy_ah_attr_from_uverbs, rdma_fill_sgid_attr
		if dest.isGlobal == 0 {
			return eINVAL // RoCE needs the GRH (rdma_check_ah_attr)
		}
		sg, err := s.sgid(dest.sgidIndex)
		if err != nil {
			return err
		}
		at.AH = driver.AHAttr{DGID: driver.GID(dest.dgid), FlowLabel: dest.flowLabel, SGIDIndex: dest.sgidIndex,
			HopLimit: dest.hopLimit, TrafficClass: dest.trafficClass, SL: dest.sl, GRH: true, PortNum: dest.portNum}
		if qo.qpType == ibQPTRC {
			// is_qp_type_connected: ib_resolve_eth_dmac
			mac, hop, setHop, err := s.resolveDMAC(sg, dest.dgid)
			if err != nil {
				return err
			}
			at.AH.DMAC = mac
			if setHop {
				at.AH.HopLimit = hop
			}
		}
	}
	if mask&qpAltPath != 0 {
		return eINVAL // no alternate paths on RoCE
	}
	at.RQPSN &= 0xffffff
	at.SQPSN &= 0xffffff
	// irdma_modify_qp_roce: udata inlen/outlen can be 0 (legacy modify).
	var user driver.ModifyQPUser
	if ex {
		if (len(a.udIn) > 0 && len(a.udIn) < szModQPReqMin) || (a.udOutLen > 0 && a.udOutLen < szModQPRespMin) {
			return eINVAL
		}
		if len(a.udIn) > 0 {
			ureq := a.udata(szModQPReqMin)
			user.SQFlush, user.RQFlush = ureq[0] != 0, ureq[1] != 0
		}
	}
	r, err := s.p.d.ModifyQPFromUser(qo.qp, &at, driver.QPAttrMask(mask), user)
	if err != nil {
		return err
	}
	if mask&qpPort != 0 {
		qo.port = portNum
	}
	if ex && mask&qpState != 0 && a.udOutLen > 0 {
		ur := make([]byte, szModQPResp)
		if r.PushValid {
			// The device does not model push pages; the QP keeps
			// using the doorbell (libirdma falls back without one).
			s.log.Warn("uverbs: push page allocated but not offered (push pages are not modelled)",
				zap.Uint32("qpn", qo.qp.ID()))
		}
		a.udataOut(ur)
	}
	return nil
}

// destroyQP is ib_uverbs_destroy_qp (uverbs_free_qp): -EBUSY while the
// program keeps multicast attachments; the QP's unread async events are
// dropped and events_reported counts those it read.
func (s *Session) destroyQP(a *bundle) error {
	req, err := a.request(szDestroyQP)
	if err != nil {
		return err
	}
	h := get32(req, 8)
	v, err := s.h.lookup(h, kindQP)
	if err != nil {
		return err
	}
	qo := v.(*qpObj)
	if len(qo.mcast) > 0 {
		return eBUSY
	}
	if err := s.p.d.DestroyQP(qo.qp); err != nil {
		return err
	}
	qo.dead.Store(true)
	s.setQPID(qo.qp, false)
	s.h.remove(h)
	var n uint32
	if ef := s.async.Load(); ef != nil {
		n = ef.purge(&qo.async)
	}
	resp := make([]byte, szDestroyQPResp)
	put32(resp, 0, n)
	a.respond(resp)
	return nil
}

// reqIter is uverbs_req_iter: the flexible arrays after a command.
type reqIter struct{ rest []byte }

func (it *reqIter) next(n uint64) error {
	if n > uint64(len(it.rest)) {
		return eNOSPC
	}
	it.rest = it.rest[n:]
	return nil
}

func (it *reqIter) finish() error {
	if !cleared(it.rest) {
		return eOPNOTSUPP
	}
	return nil
}

// mulSat is size_mul: saturating at the maximum.
func mulSat(a, b uint64) uint64 {
	if a != 0 && b > ^uint64(0)/a {
		return ^uint64(0)
	}
	return a * b
}

// postSend is ib_uverbs_post_send up to the driver. A user QP's SQ is
// the program's ring: there is no kernel-mode post to it (irdma's
// post_send would write a ring it never mapped), so a well-formed command
// is -EOPNOTSUPP.
func (s *Session) postSend(a *bundle) error {
	it := reqIter{rest: a.in}
	if len(a.in) < szPostSend {
		return eNOSPC
	}
	req := a.in[:szPostSend]
	it.rest = a.in[szPostSend:]
	wrCount, sgeCount, wqeSize := uint64(get32(req, 12)), uint64(get32(req, 16)), uint64(get32(req, 20))
	if err := it.next(mulSat(wqeSize, wrCount)); err != nil {
		return err
	}
	if err := it.next(mulSat(sgeCount, szSGE)); err != nil {
		return err
	}
	if err := it.finish(); err != nil {
		return err
	}
	if wqeSize < szSendWR {
		return eINVAL
	}
	if _, err := s.readQP(get32(req, 8)); err != nil {
		return err
	}
	return eOPNOTSUPP
}

// postRecv is ib_uverbs_post_recv (ib_uverbs_unmarshall_recv) up to the
// driver; see postSend.
func (s *Session) postRecv(a *bundle) error {
	return s.unmarshallRecv(a, func(h uint32) error {
		_, err := s.readQP(h)
		return err
	})
}

// unmarshallRecv is ib_uverbs_unmarshall_recv for POST_RECV and
// POST_SRQ_RECV (the same request layout), then the lookup of the queue
// the command names; a well-formed command is -EOPNOTSUPP (postSend).
func (s *Session) unmarshallRecv(a *bundle, lookup func(handle uint32) error) error {
	if len(a.in) < szPostRecv {
		return eNOSPC
	}
	req := a.in[:szPostRecv]
	it := reqIter{rest: a.in[szPostRecv:]}
	wrCount, sgeCount, wqeSize := uint64(get32(req, 12)), uint64(get32(req, 16)), uint64(get32(req, 20))
	if wqeSize < szRecvWR {
		return eINVAL
	}
	if err := it.next(mulSat(wqeSize, wrCount)); err != nil {
		return err
	}
	if err := it.next(mulSat(sgeCount, szSGE)); err != nil {
		return err
	}
	if err := it.finish(); err != nil {
		return err
	}
	if err := lookup(get32(req, 8)); err != nil {
		return err
	}
	return eOPNOTSUPP
}

// openQP is ib_uverbs_open_qp: it opens a QP of an XRC domain, and none
// can exist here (no ops.alloc_xrcd): -EINVAL once the context exists.
func (s *Session) openQP(a *bundle) error {
	if _, err := a.request(szOpenQP); err != nil {
		return err
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	return eINVAL
}

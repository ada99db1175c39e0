package driver

import (
	"errors"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// stateTrans is one cell of core/verbs.c's qp_state_table: whether the
// transition exists, and per QP type (RC, UD, GSI) the required and
// optional attribute masks.
type stateTrans struct {
	valid bool
	req   [3]QPAttrMask
	opt   [3]QPAttrMask
}

func qpTypeCol(t QPType) int {
	switch t {
	case QPTypeRC:
		return 0
	case QPTypeUD:
		return 1
	}
	return 2 // GSI
}

// qpStateTable is the RC, UD and GSI columns of ib core's qp_state_table
// (drivers/infiniband/core/verbs.c), indexed [cur][next].
var qpStateTable = func() (t [QPSErr + 1][QPSErr + 1]stateTrans) {
	v := func() stateTrans { return stateTrans{valid: true} }
	const (
		pkey = QPAttrPKeyIndex
		port = QPAttrPort
		qkey = QPAttrQKey
		acc  = QPAttrAccessFlags
		cur  = QPAttrCurState
	)
	for _, s := range []QPState{QPSInit, QPSRTR, QPSRTS, QPSSQD, QPSSQE, QPSErr} {
		t[s][QPSReset] = v()
		t[s][QPSErr] = v()
	}
	t[QPSReset][QPSReset] = v()
	t[QPSReset][QPSInit] = stateTrans{valid: true, req: [3]QPAttrMask{pkey | port | acc, pkey | port | qkey, pkey | qkey}}
	t[QPSInit][QPSInit] = stateTrans{valid: true, opt: [3]QPAttrMask{pkey | port | acc, pkey | port | qkey, pkey | qkey}}
	t[QPSInit][QPSRTR] = stateTrans{valid: true,
		req: [3]QPAttrMask{QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer, 0, 0},
		opt: [3]QPAttrMask{QPAttrAltPath | acc | pkey, pkey | qkey, pkey | qkey}}
	t[QPSRTR][QPSRTS] = stateTrans{valid: true,
		req: [3]QPAttrMask{QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic, QPAttrSQPSN, QPAttrSQPSN},
		opt: [3]QPAttrMask{cur | QPAttrAltPath | acc | QPAttrMinRNRTimer | QPAttrPathMigState, cur | qkey, cur | qkey}}
	t[QPSRTS][QPSRTS] = stateTrans{valid: true,
		opt: [3]QPAttrMask{cur | acc | QPAttrAltPath | QPAttrPathMigState | QPAttrMinRNRTimer, cur | qkey, cur | qkey}}
	t[QPSRTS][QPSSQD] = stateTrans{valid: true,
		opt: [3]QPAttrMask{QPAttrEnSQDAsyncNotify, QPAttrEnSQDAsyncNotify, QPAttrEnSQDAsyncNotify}}
	t[QPSSQD][QPSRTS] = stateTrans{valid: true,
		opt: [3]QPAttrMask{cur | QPAttrAltPath | acc | QPAttrMinRNRTimer | QPAttrPathMigState, cur | qkey, cur | qkey}}
	t[QPSSQD][QPSSQD] = stateTrans{valid: true,
		opt: [3]QPAttrMask{port | QPAttrAV | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic |
			QPAttrMaxDestRdAtomic | QPAttrAltPath | acc | pkey | QPAttrMinRNRTimer | QPAttrPathMigState, pkey | qkey, pkey | qkey}}
	t[QPSSQE][QPSRTS] = stateTrans{valid: true, opt: [3]QPAttrMask{0, cur | qkey, cur | qkey}}
	return t
}()

// ModifyQPIsOK is ib_modify_qp_is_ok for RC, UD and GSI QPs: the
// transition must exist, every required attribute be in mask and nothing
// outside required | optional | IB_QP_STATE; IB_QP_CUR_STATE only from
// RTR, RTS, SQD or SQE.
func ModifyQPIsOK(cur, next QPState, t QPType, mask QPAttrMask) bool {
	if cur > QPSErr || next > QPSErr {
		return false
	}
	if mask&QPAttrCurState != 0 && cur != QPSRTR && cur != QPSRTS && cur != QPSSQD && cur != QPSSQE {
		return false
	}
	tr := qpStateTable[cur][next]
	if !tr.valid {
		return false
	}
	col := qpTypeCol(t)
	req, opt := tr.req[col], tr.opt[col]
	if mask&req != req {
		return false
	}
	return mask&^(req|opt|QPAttrState) == 0
}

// ModifyQPUser carries irdma_modify_qp_req (re-flush requests of a user
// QP already in error) and marks the call as coming from user space.
type ModifyQPUser struct {
	SQFlush bool
	RQFlush bool
}

// ModifyQPResp is irdma_modify_qp_resp: the push page, if one was
// allocated, as BAR0 offsets the daemon maps.
type ModifyQPResp struct {
	PushValid     bool
	PushWQEBarOff uint64
	PushDBBarOff  uint64
	PushOffset    uint32
}

// modInfo is irdma_modify_qp_info.
type modInfo struct {
	curr, next uint8
	ordValid   bool
	arpValid   bool
	cqNumValid bool
}

// ModifyQP is verbs.c:irdma_modify_qp_roce for a kernel caller.
func (d *Device) ModifyQP(q *QP, attr *QPAttr, mask QPAttrMask) error {
	_, err := d.modifyQP(q, attr, mask, nil)
	return err
}

// ModifyQPFromUser is irdma_modify_qp_roce with udata: re-flush requests
// of a QP already in error, and the push page response.
func (d *Device) ModifyQPFromUser(q *QP, attr *QPAttr, mask QPAttrMask, u ModifyQPUser) (ModifyQPResp, error) {
	return d.modifyQP(q, attr, mask, &u)
}

// validateModify performs every check irdma_modify_qp_roce makes before
// it changes anything, plus ib_modify_qp_is_ok, so that a refused modify
// has no side effect (in irdma the AV's ARP and work-scheduler commands
// run before ib_modify_qp_is_ok; we check first, the outcome is the same).
func (d *Device) validateModify(q *QP, attr *QPAttr, mask QPAttrMask) error {
	if mask&^QPAttrStandardBits != 0 {
		return syscall.EOPNOTSUPP
	}
	if mask&QPAttrPKeyIndex != 0 && attr.PKeyIndex >= uint16(d.prof.Limits.MaxPKeys) { // irdma_query_pkey
		return syscall.EINVAL
	}
	if mask&QPAttrPathMTU != 0 && mtuEnumToInt(attr.PathMTU) == 0 {
		return syscall.EINVAL
	}
	if mask&QPAttrMaxQPRdAtomic != 0 && uint32(attr.MaxRdAtomic) > d.prof.Limits.MaxORD {
		return syscall.EINVAL
	}
	if mask&QPAttrMaxDestRdAtomic != 0 && uint32(attr.MaxDestRdAtomic) > d.prof.Limits.MaxIRD {
		return syscall.EINVAL
	}
	if mask&QPAttrAV != 0 {
		if _, err := d.sgidAttr(attr.AH.SGIDIndex); err != nil {
			return err
		}
	}
	if mask&QPAttrState != 0 {
		q.mu.Lock()
		ok := ModifyQPIsOK(q.ibState, attr.QPState, q.typ, mask)
		q.mu.Unlock()
		if !ok {
			return syscall.EINVAL
		}
	}
	return nil
}

func (d *Device) modifyQP(q *QP, attr *QPAttr, mask QPAttrMask, u *ModifyQPUser) (ModifyQPResp, error) {
	var resp ModifyQPResp
	if err := d.alive(); err != nil {
		return resp, err
	}
	if q == nil || q.d != d || attr == nil {
		return resp, syscall.EINVAL
	}
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	// Modifies come from the QP's owner and from elsewhere: the AE work
	// (cmDisconn) and the provider's shutdown flush of every context's
	// QPs. A QP being destroyed is not touched again: its host context
	// and id are about to be freed, and the id may already name another
	// program's QP (irdma's destroy waits for the QP's references,
	// irdma_qp_rem_ref and the free_qp completion, for the same reason).
	q.mu.Lock()
	gone := q.dead || q.destroyPending
	q.mu.Unlock()
	if gone {
		return resp, syscall.EINVAL
	}
	return d.modifyQPLocked(q, attr, mask, u)
}

// modifyQPLocked is irdma_modify_qp_roce proper, with q.modifyMu held.
func (d *Device) modifyQPLocked(q *QP, attr *QPAttr, mask QPAttrMask, u *ModifyQPUser) (ModifyQPResp, error) {
	var resp ModifyQPResp
	if err := d.validateModify(q, attr, mask); err != nil {
		return resp, err
	}
	q.mu.Lock()
	c := &q.ctx
	if mask&QPAttrDestQPN != 0 {
		c.DestQP = attr.DestQPNum
	}
	if mask&QPAttrPKeyIndex != 0 {
		c.PKey = defaultPKey
	}
	if mask&QPAttrQKey != 0 {
		c.QKey = attr.QKey
	}
	if mask&QPAttrPathMTU != 0 {
		c.SndMSS = mtuEnumToInt(attr.PathMTU)
	}
	if mask&QPAttrSQPSN != 0 {
		c.PSNNxt, c.LSN, c.PSNUna, c.PSNMax = attr.SQPSN, 0xffff, attr.SQPSN, attr.SQPSN
	}
	if mask&QPAttrRQPSN != 0 {
		c.EPSN = attr.RQPSN
	}
	if mask&QPAttrRNRRetry != 0 {
		c.RNRNakThresh = attr.RNRRetry
	}
	if mask&QPAttrMinRNRTimer != 0 && d.prof.Gen >= profile.Gen3 {
		c.MinRNRTimer = attr.MinRNRTimer // irdma_modify_qp_roce, GEN_3 on
	}
	if mask&QPAttrRetryCnt != 0 {
		c.RexmitThresh = attr.RetryCnt
	}
	c.PDID = q.pd.id
	q.mu.Unlock()
	if mask&QPAttrAV != 0 {
		if err := d.applyAV(q, &attr.AH); err != nil {
			return resp, err
		}
	}
	info := modInfo{}
	q.mu.Lock()
	if mask&QPAttrMaxQPRdAtomic != 0 {
		if attr.MaxRdAtomic != 0 {
			c.ORDSize = attr.MaxRdAtomic
		}
		info.ordValid = true
	}
	if mask&QPAttrMaxDestRdAtomic != 0 && attr.MaxDestRdAtomic != 0 {
		c.IRDSize = uint32(attr.MaxDestRdAtomic)
	}
	if mask&QPAttrAccessFlags != 0 {
		// irdma only ever sets these (never clears them).
		if attr.QPAccessFlags&(AccessLocalWrite|AccessRemoteWrite) != 0 {
			c.WrRdRespEn = true
		}
		if attr.QPAccessFlags&AccessRemoteRead != 0 {
			c.RdEn = true
		}
		// irdma_modify_qp_roce: remote_atomics_en, which only
		// irdma_sc_qp_setctx_roce_gen_3 writes to the context. GEN_2
		// stays as the pre-GEN_3 driver of the reference (no field, and
		// irdma_query_qp does not report the right).
		if attr.QPAccessFlags&AccessRemoteAtomic != 0 && d.prof.Gen >= profile.Gen3 {
			c.RemoteAtomicsEn = true
		}
	}
	issue := false
	allocPush := false
	if mask&QPAttrState != 0 {
		info.curr = q.hwState
		switch attr.QPState {
		case QPSInit:
			if q.hwState > qpHWStateIdle {
				q.mu.Unlock()
				return resp, syscall.EINVAL
			}
			if q.hwState == qpHWStateInvalid {
				info.next, issue = qpHWStateIdle, true
			}
		case QPSRTR:
			if q.hwState > qpHWStateIdle {
				q.mu.Unlock()
				return resp, syscall.EINVAL
			}
			info.arpValid, info.cqNumValid = true, true
			info.next, issue = qpHWStateRTR, true
		case QPSRTS:
			if q.ibState < QPSRTR || q.ibState == QPSErr {
				q.mu.Unlock()
				return resp, syscall.EINVAL
			}
			info.arpValid, info.cqNumValid, info.ordValid = true, true, true
			info.next, issue = qpHWStateRTS, true
			allocPush = d.cfg.PushMode && u != nil && c.PushIdx == invalidPushIdx
		case QPSSQD:
			if q.hwState == qpHWStateClosing {
				q.mu.Unlock()
				return resp, nil
			}
			if q.hwState != qpHWStateRTS {
				q.mu.Unlock()
				return resp, syscall.EINVAL
			}
			info.next, issue = qpHWStateClosing, true
		case QPSSQE, QPSErr, QPSReset:
			if q.hwState == qpHWStateError {
				q.mu.Unlock()
				if u != nil && (u.SQFlush || u.RQFlush) {
					_ = d.flushWQEs(q, u.SQFlush, u.RQFlush, true)
				}
				return resp, nil
			}
			info.next, issue = qpHWStateError, true
		default:
			q.mu.Unlock()
			return resp, syscall.EINVAL
		}
		q.ibState = attr.QPState
	}
	q.mu.Unlock()
	if allocPush {
		d.allocPushPage(q)
	}
	q.mu.Lock()
	c.SendCQ, c.RecvCQ = q.sendCQ.id, q.recvCQ.id
	q.writeCtx()
	if mask&QPAttrState == 0 || !issue {
		if mask&QPAttrState != 0 {
			q.ibState = attr.QPState
		}
		q.mu.Unlock()
		return resp, nil
	}
	// rem_endpoint_idx is updated after the context write: the context
	// carries the previous value (verbs.c:irdma_modify_qp_roce;
	// docs/hw-controlpath.md "What the driver leaves open").
	c.RemEndpointIdx = uint32(c.ARPIdx)
	if info.next == qpHWStateClosing {
		q.suspendPending = true
		q.suspendDone = make(chan struct{})
	}
	q.mu.Unlock()
	if err := d.hwModifyQP(q, info); err != nil {
		return resp, syscall.EINVAL
	}
	if info.next == qpHWStateClosing {
		if err := d.waitForSuspend(q); err != nil {
			return resp, err
		}
	}
	q.mu.Lock()
	if q.hwState == info.curr {
		q.hwState = info.next
		q.ibState = attr.QPState
	}
	needFlush := q.ibState > QPSRTS && !q.flushIssued
	q.mu.Unlock()
	if needFlush {
		_ = d.flushWQEs(q, true, true, false)
		q.mu.Lock()
		q.flushIssued = true
		q.mu.Unlock()
	}
	q.mu.Lock()
	if u != nil && c.PushIdx != invalidPushIdx {
		resp.PushValid = true
		resp.PushWQEBarOff = uint64(regs.PushOffset) + uint64(c.PushIdx)*regs.HWPageSize
		resp.PushDBBarOff = resp.PushWQEBarOff + regs.HWPageSize
	}
	q.mu.Unlock()
	return resp, nil
}

// hwModifyQP is utils.c:irdma_hw_modify_qp: MODIFY_QP with the new state
// and validity flags; the host context was rewritten just before.
func (d *Device) hwModifyQP(q *QP, info modInfo) error {
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildModifyQP(qpWQEInfo{
			QPID: q.id, QPType: q.hwType, CtxPA: q.ctxPA, ShadowPA: q.shadowPA, NextState: info.next,
			ORDValid: info.ordValid, CQNumValid: info.cqNumValid, ARPIdxValid: info.arpValid,
			VirtualMap: q.virtual,
		}), nil
	})
	return err
}

// waitForSuspend is verbs.c:irdma_wait_for_suspend: the move to SQD
// completes when the QP_SUSPEND_COMPLETE AE arrives; -EBUSY after
// IRDMA_EVENT_TIMEOUT_MS.
func (d *Device) waitForSuspend(q *QP) error {
	q.mu.Lock()
	ch := q.suspendDone
	q.mu.Unlock()
	if ch == nil {
		return nil
	}
	deadline := d.clock.Now() + suspendTimeout
	t := time.NewTimer(pollIntervalMax)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-t.C:
		}
		if d.clock.Now() >= deadline {
			q.mu.Lock()
			q.suspendPending = false
			q.mu.Unlock()
			return syscall.EBUSY
		}
		t.Reset(pollIntervalMax)
	}
}

// flushWQEs is hw.c:irdma_flush_wqes + ctrl.c:irdma_sc_qp_flush_wqes:
// FLUSH_WQES with user flush codes (major 1, minor FLUSH_GENERAL_ERR, or
// the QP's AE-derived code for the queue that caused it); a queue already
// flushed is not flushed again unless reflush (-EALREADY when nothing is
// left to flush). "Nothing pending" (0xFFFF, 0x8006) is not an error.
func (d *Device) flushWQEs(q *QP, sq, rq, reflush bool) error {
	info := flushInfo{QPID: q.id, UserFlCode: true, SQMajor: flushMajorErr, SQMinor: flushGeneralErr,
		RQMajor: flushMajorErr, RQMinor: flushGeneralErr}
	q.mu.Lock()
	if reflush {
		if sq {
			q.flushSQ = false
		}
		if rq {
			q.flushRQ = false
		}
	} else if q.flushCode != 0 {
		if sq && q.sqFlushCode {
			info.SQMinor = q.flushCode
		}
		if rq && q.rqFlushCode {
			info.RQMinor = q.flushCode
		}
	}
	info.SQ = sq && !q.flushSQ
	info.RQ = rq && !q.flushRQ
	q.flushSQ = q.flushSQ || info.SQ
	q.flushRQ = q.flushRQ || info.RQ
	q.flushIssued = true
	q.mu.Unlock()
	if !info.SQ && !info.RQ {
		return syscall.EALREADY
	}
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildFlushWQEs(info), nil })
	var ce *CQPError
	if errors.As(err, &ce) && ce.Major == 0xffff && ce.Minor == 0x8006 {
		return nil
	}
	return err
}

// allocPushPage is verbs.c:irdma_alloc_push_page: MANAGE_PUSH_PAGES for the
// QP's QS handle; the page is used only if OP_RETVAL is below
// max_hw_device_pages (docs/hw-controlpath.md "Push pages": 1024 or 256
// depending on the kernel).
func (d *Device) allocPushPage(q *QP) {
	q.mu.Lock()
	qs := q.ctx.QSHandle
	q.mu.Unlock()
	compl, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildManagePushPage(qs, 0, false), nil })
	if err != nil || compl.OpRetVal >= d.prof.Limits.PushPages {
		return
	}
	q.mu.Lock()
	q.ctx.PushIdx = compl.OpRetVal
	q.mu.Unlock()
}

// handleAE dispatches one asynchronous event as hw.c:irdma_process_aeq
// does for RoCE.
func (d *Device) handleAE(info *aeInfo) {
	if info.AECode == aeSRQLimit {
		// hw.c:irdma_process_aeq: the SRQ from the AE's context, then
		// irdma_srq_event.
		d.srqEvent(info.ComplCtx, info.AECode)
		return
	}
	var q *QP
	if info.QP {
		d.tblMu.RLock()
		q = d.qpTable[info.QPCQID]
		d.tblMu.RUnlock()
		if q == nil {
			return // already freed
		}
		q.mu.Lock()
		if q.dead {
			// DestroyQP is freeing it: its host context must not be
			// written (irdma holds a QP reference across the AE,
			// irdma_qp_add_ref under rf->qptable_lock).
			q.mu.Unlock()
			return
		}
		q.hwIWState = info.IWState
		if info.AECode != aeQPSuspendComplete {
			q.lastAE = info.AECode
		}
		q.ctx.ErrRQIdxValid = true
		q.mu.Unlock()
	} else if info.AECode != aeCQOperationError {
		return
	}
	switch info.AECode {
	case aeQPSuspendComplete:
		q.mu.Lock()
		if q.suspendPending {
			q.suspendPending = false
			close(q.suspendDone)
		}
		q.mu.Unlock()
		return
	case aeCQOperationError:
		d.tblMu.RLock()
		cq := d.cqTable[info.QPCQID]
		d.tblMu.RUnlock()
		if cq == nil {
			if cq = d.cqByCtx(info.ComplCtx >> 1); cq == nil {
				return
			}
		}
		cq.asyncEvents.Add(1)
		if h := cq.eventHandler; h != nil {
			h(cq, AsyncEvent{Type: EventCQErr, AECode: info.AECode})
		}
		return
	case aeResetNotSent, aeLLPDoubtReachability, aeResourceExhaustion:
		return
	case aeSRQCatastrophic:
		// hw.c:irdma_process_aeq does nothing for it (GEN_3).
		return
	case aePrivOperationDenied, aeSTagZeroInvalid, aeIBRReqAndQ1Full, 0x0304, aeDDPUBEInvalidMO, 0x0307, 0x0308,
		0x0311, 0x0312, 0x0313, 0x0314, aeInvalidARPEntry, 0x0402, aeStaleARPEntry, aeLLPReceivedMPACRCError,
		aeLLPSegmentTooSmall, 0x0508, aeLLPTooManyRetries, aeLCEQPCatastrophic, aeLCEFunctionCatastrophic,
		aeLCECQCatastrophic, aeUDAXmitDgramTooLong:
		q.mu.Lock()
		q.ctx.ErrRQIdxValid = false
		q.mu.Unlock()
	}
	// The "abnormal" AEs: record the failing RQ WQE, the flush codes, and
	// move the QP to error (irdma_set_flush_fields, irdma_cm_disconn).
	q.mu.Lock()
	if !info.SQ && q.ctx.ErrRQIdxValid {
		q.ctx.ErrRQIdx = info.WQEIdx
		q.writeCtx()
	}
	q.sqFlushCode, q.rqFlushCode = info.SQ, info.RQ
	q.flushCode, q.eventType = aeToQPErr(info.AECode)
	q.mu.Unlock()
	if d.beginWork() {
		go d.cmDisconn(q, info.AECode)
	}
}

// beginWork accounts for one piece of cleanup work about to start, and
// reports false once Close waits for the work (waitWork): the device is
// going away, its QPs are destroyed, and the work would find nothing to
// do. An AE can arrive while Close waits — the interrupts stop only in
// teardown, after it — and a sync.WaitGroup must not be added to from
// zero while it is waited on (seen as a data race in TestSRQ under load).
func (d *Device) beginWork() bool {
	d.workMu.Lock()
	defer d.workMu.Unlock()
	if d.workShut {
		return false
	}
	d.workWG.Add(1)
	return true
}

// waitWork starts no more cleanup work and waits for what runs.
func (d *Device) waitWork() {
	d.workMu.Lock()
	d.workShut = true
	d.workMu.Unlock()
	d.workWG.Wait()
}

// cmDisconn is cm.c:irdma_cm_disconn_true for RoCE: unless a flush was
// already issued or the QP is being destroyed, modify it to error (which
// flushes with the recorded codes) and raise the QP's async event.
func (d *Device) cmDisconn(q *QP, ae uint16) {
	defer d.workWG.Done()
	q.mu.Lock()
	skip := q.flushIssued || q.destroyPending || q.dead
	ev := q.eventType
	q.mu.Unlock()
	if skip {
		return
	}
	_ = d.ModifyQP(q, &QPAttr{QPState: QPSErr}, QPAttrState)
	if h := q.eventHandler; h != nil {
		h(q, AsyncEvent{Type: ev, AECode: ae})
	}
}

// aeToQPErr is irdma_ae_to_qp_err_code (user.h; docs/hw-datapath.md "AE to
// flush code"): the flush code and the IB QP event an AE leads to.
func aeToQPErr(ae uint16) (uint16, AsyncEventType) {
	switch ae {
	case aeAMPBoundsViolation, aeAMPInvalidSTag, aeAMPRightsViolation, aeAMPUnallocatedSTag, aeAMPBadPD,
		aeAMPBadQP, aeAMPBadSTagKey, aeAMPBadSTagIndex, aeAMPToWrap, aePrivOperationDenied:
		return flushProtErr, EventQPAccessErr
	case aeUDAXmitBadPD, aeWQEUnexpectedOpcode:
		return flushLocQPOpErr, EventQPFatal
	case aeUDAXmitDgramTooShort, aeUDAXmitDgramTooLong, aeUDAL4LenInvalid, aeDDPUBEInvalidMO, 0x0303:
		return flushLocLenErr, EventQPFatal
	case aeAMPInvNoRemoteRights, aeIBRemoteAccessError:
		return flushRemAccessErr, EventQPAccessErr
	case aeAMPMWBindInvalidRights, aeAMPMWBindBindDisabled, aeAMPMWBindInvalidBounds, 0x0114:
		return flushMWBindErr, EventQPAccessErr
	case aeLLPTooManyRetries:
		return flushRetryExcErr, EventQPFatal
	case aeIBInvalidRequest:
		return flushRemInvReqErr, EventQPReqErr
	case aeLLPSegmentTooSmall, aeLLPReceivedMPACRCError, aeROCERspLengthError, aeIBRemoteOpError:
		return flushRemOpErr, EventQPFatal
	case aeLLPTooManyRNRs:
		return flushRNRRetryExcEr, EventQPFatal
	case aeLCEQPCatastrophic, 0x0703, 0x0704, 0x0705:
		return flushFatalErr, EventQPFatal
	}
	return flushGeneralErr, EventQPFatal
}

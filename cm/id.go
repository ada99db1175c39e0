package cm

import (
	"errors"
	"time"

	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// id is the kernel's cm_id_private. Every field is guarded by the
// Manager's lock.
type id struct {
	m       *mgr
	self    *ID
	handler Handler
	ctx     any

	st        State
	destroyed bool
	local     uint32
	remote    uint32
	sid, mask uint64 // listen: masked service ID and mask; others: the service ID
	tid       uint64

	av         Addr // where this ID's MADs go
	path       Path
	remoteGUID uint64
	localQPN   uint32
	remoteQPN  uint32
	qpType     QPType
	sqPSN      uint32
	rqPSN      uint32
	respRes    uint8
	initDepth  uint8
	retryCount uint8
	rnrRetry   uint8
	// localACKTimeout is cm.c's av.timeout: the QP's ACK timeout exponent
	// and the base of timewait.
	localACKTimeout uint8
	targetACKDelay  uint8
	timeout         time.Duration // response timeout of this ID's requests
	maxRetries      int

	// What a duplicate is answered with (cm.c keeps private_data).
	serviceTimeout uint8
	mraSent        bool
	mraPD          []byte
	pd             []byte // last RTU/DREP private data

	// The outstanding message and its response timer.
	msg        []byte
	msgTimeout time.Duration
	msgRetries int
	msgTimer   timing.Timer
	msgGen     uint64

	tw *timewait
}

func (c *id) lock()   { c.m.mu.Lock() }
func (c *id) unlock() { c.m.mu.Unlock() }

func (c *id) stopMsgLocked() {
	if c.msgTimer != nil {
		c.msgTimer.Stop()
	}
	c.msg, c.msgTimer = nil, nil
	c.msgGen++
}

func (c *id) context() any {
	c.lock()
	defer c.unlock()
	return c.ctx
}

func (c *id) setContext(v any) {
	c.lock()
	c.ctx = v
	c.unlock()
}

func (c *id) state() State {
	c.lock()
	defer c.unlock()
	return c.st
}

func (c *id) localCommID() uint32 {
	c.lock()
	defer c.unlock()
	return c.local
}

func (c *id) remoteCommID() uint32 {
	c.lock()
	defer c.unlock()
	return c.remote
}

func (c *id) serviceID() uint64 {
	c.lock()
	defer c.unlock()
	return c.sid
}

// begin locks and checks the ID is usable.
func (c *id) begin() error {
	c.lock()
	if c.destroyed {
		c.unlock()
		return ErrDestroyed
	}
	if c.m.closed {
		c.unlock()
		return ErrClosed
	}
	return nil
}

// beginIn is begin for a call allowed only in the given states: on an
// error nothing is held.
func (c *id) beginIn(states ...State) error {
	if err := c.begin(); err != nil {
		return err
	}
	for _, st := range states {
		if c.st == st {
			return nil
		}
	}
	c.unlock()
	return ErrInvalidState
}

// newReply is a CM MAD of attr in the ID's transaction carrying both comm
// IDs, as every message after the REQ does (REJ sets its own local one).
func (c *id) newReply(attr mad.AttrID) []byte {
	b := newMAD(attr, c.tid)
	ids := mad.CommIDs(b)
	ids.SetLocalCommID(c.local)
	ids.SetRemoteCommID(c.remote)
	return b
}

func (c *id) listen(sid, mask uint64) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.unlock()
	if c.st != StateIdle {
		return ErrInvalidState
	}
	if mask == 0 {
		mask = ^uint64(0)
	}
	sid &= mask
	// cm.c:cm_insert_listen: two listens overlap when each one's mask
	// applied to the other's service ID gives the same value.
	for _, l := range c.m.listens {
		if l.mask&sid == mask&l.sid {
			return ErrBusy
		}
	}
	c.sid, c.mask = sid, mask
	c.st = StateListen
	c.m.listens = append(c.m.listens, c.self)
	return nil
}

func tooLong(b []byte, n int) bool { return len(b) > n }

// addrOf is where the MADs of a path go: the peer's QP1.
func addrOf(p *Path) Addr {
	return Addr{SGIDIndex: p.SGIDIndex, SGID: p.SGID, DGID: p.DGID, FlowLabel: p.FlowLabel,
		TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, DMAC: p.DMAC, RemoteQPN: 1}
}

func (c *id) sendREQ(p *REQParam) error {
	if p == nil {
		return errors.New("cm: nil REQParam")
	}
	if tooLong(p.PrivateData, REQPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if p.QPType != QPTypeRC && p.QPType != QPTypeUC {
		return errors.New("cm: REQ QP type must be RC or UC")
	}
	if p.Path.MTU < MTU256 || p.Path.MTU > MTU4096 {
		return errors.New("cm: REQ path MTU must be 1 (256) … 5 (4096)")
	}
	if err := c.begin(); err != nil {
		return err
	}
	m := c.m
	if c.st != StateIdle {
		c.unlock()
		return ErrInvalidState
	}
	path := p.Path
	if path.PKey == 0 {
		path.PKey = 0xffff
	}
	remoteTO := p.RemoteCMResponseTimeout
	if remoteTO == 0 {
		remoteTO = DefaultCMResponseTimeout
	}
	localTO := p.LocalCMResponseTimeout
	if localTO == 0 {
		localTO = DefaultCMResponseTimeout
	}
	retries := p.MaxCMRetries
	if retries == 0 {
		retries = DefaultMaxCMRetries
	}
	retries = min(retries, MaxCMRetriesLimit)
	ackTO := p.LocalACKTimeout
	if ackTO == 0 {
		ackTO = ackTimeout(m.cfg.CAACKDelay, path.PacketLifeTime)
	}
	c.path = path
	c.av = addrOf(&path)
	c.sid, c.mask = p.ServiceID, ^uint64(0)
	c.localQPN, c.qpType = p.QPN&0xffffff, p.QPType
	c.rqPSN = p.StartingPSN & 0xffffff
	c.respRes, c.initDepth = p.ResponderResources, p.InitiatorDepth
	c.retryCount, c.rnrRetry = p.RetryCount&7, p.RNRRetryCount&7
	// cm.c:cm_init_av_by_path: av.timeout = packet lifetime + 1.
	c.localACKTimeout = min(path.PacketLifeTime+1, 31)
	c.timeout = 2*convertToDuration(path.PacketLifeTime) + convertToDuration(remoteTO)
	c.maxRetries = int(retries)
	c.tid = tidHigh | uint64(c.local)
	m.twLocked(c.self)

	// cm.c:cm_format_req.
	b := newMAD(mad.AttrREQ, c.tid)
	r := mad.REQ(b)
	r.SetLocalCommID(c.local)
	r.SetServiceID(p.ServiceID)
	r.SetLocalCAGUID(m.cfg.CAGUID)
	r.SetLocalQPN(c.localQPN)
	r.SetInitiatorDepth(p.InitiatorDepth)
	r.SetRemoteCMResponseTimeout(remoteTO)
	r.SetTransportServiceType(uint8(p.QPType))
	r.SetFlowControl(p.FlowControl)
	r.SetStartingPSN(c.rqPSN)
	r.SetLocalCMResponseTimeout(localTO)
	r.SetPKey(path.PKey)
	r.SetPathMTU(uint8(path.MTU))
	r.SetMaxCMRetries(retries)
	r.SetResponderResources(p.ResponderResources)
	r.SetRetryCount(c.retryCount)
	r.SetRNRRetryCount(c.rnrRetry)
	r.SetSRQ(p.SRQ)
	pp := r.Primary()
	pp.SetLocalGID(path.SGID)
	pp.SetRemoteGID(path.DGID)
	if path.HopLimit > 1 {
		// Routed (every RoCEv2 path with the default hop limit): LIDs are
		// unknown, cm.c sends the permissive LID.
		pp.SetLocalLID(0xffff)
		pp.SetRemoteLID(0xffff)
	}
	pp.SetFlowLabel(path.FlowLabel)
	pp.SetPacketRate(path.Rate)
	pp.SetTrafficClass(path.TrafficClass)
	pp.SetHopLimit(path.HopLimit)
	pp.SetSL(path.SL)
	pp.SetSubnetLocal(path.HopLimit <= 1)
	pp.SetLocalACKTimeout(ackTO)
	copy(r.PrivateData(), p.PrivateData)

	c.st = StateREQSent
	m.sendLocked(c.av, b)
	m.armMsgLocked(c.self, b, c.timeout, c.maxRetries)
	m.unlockAndDrain()
	return nil
}

func (c *id) sendREP(p *REPParam) error {
	if p == nil {
		return errors.New("cm: nil REPParam")
	}
	if tooLong(p.PrivateData, REPPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.beginIn(StateREQRcvd, StateMRAREQSent); err != nil {
		return err
	}
	m := c.m
	c.localQPN = p.QPN & 0xffffff
	c.rqPSN = p.StartingPSN & 0xffffff
	c.initDepth, c.respRes = p.InitiatorDepth, p.ResponderResources

	// cm.c:cm_format_rep.
	b := c.newReply(mad.AttrREP)
	r := mad.REP(b)
	r.SetStartingPSN(c.rqPSN)
	r.SetResponderResources(p.ResponderResources)
	r.SetInitiatorDepth(p.InitiatorDepth)
	r.SetTargetACKDelay(m.cfg.CAACKDelay)
	r.SetFailoverAccepted(p.FailoverAccepted)
	r.SetFlowControl(p.FlowControl)
	r.SetRNRRetryCount(p.RNRRetryCount)
	r.SetSRQ(p.SRQ)
	r.SetLocalCAGUID(m.cfg.CAGUID)
	r.SetLocalQPN(c.localQPN)
	copy(r.PrivateData(), p.PrivateData)

	c.st = StateREPSent
	m.sendLocked(c.av, b)
	m.armMsgLocked(c.self, b, c.timeout, c.maxRetries)
	m.unlockAndDrain()
	return nil
}

// formatRTU is cm.c:cm_format_rtu.
func (c *id) formatRTU(pd []byte) []byte {
	b := c.newReply(mad.AttrRTU)
	r := mad.RTU(b)
	copy(r.PrivateData(), pd)
	return b
}

func (c *id) sendRTU(pd []byte) error {
	if tooLong(pd, RTUPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.beginIn(StateREPRcvd, StateMRAREPSent); err != nil {
		return err
	}
	m := c.m
	c.pd = append([]byte(nil), pd...)
	c.st = StateEstablished
	m.sendLocked(c.av, c.formatRTU(pd))
	m.unlockAndDrain()
	return nil
}

// formatREJ is cm.c:cm_format_rej for the ID's state before the REJ.
func (c *id) formatREJ(reason RejReason, ari, pd []byte) []byte {
	b := newMAD(mad.AttrREJ, c.tid)
	r := mad.REJ(b)
	r.CommIDs().SetRemoteCommID(c.remote)
	switch c.st {
	case StateREQRcvd:
		r.CommIDs().SetLocalCommID(0)
		r.SetMessageRejected(mad.MsgREQ)
	case StateMRAREQSent:
		r.CommIDs().SetLocalCommID(c.local)
		r.SetMessageRejected(mad.MsgREQ)
	case StateREPRcvd, StateMRAREPSent:
		r.CommIDs().SetLocalCommID(c.local)
		r.SetMessageRejected(mad.MsgREP)
	default:
		r.CommIDs().SetLocalCommID(c.local)
		r.SetMessageRejected(mad.MsgOther)
	}
	r.SetReason(uint16(reason))
	if len(ari) > 0 {
		r.SetRejectedInfoLength(uint8(len(ari)))
		copy(r.ARI(), ari)
	}
	copy(r.PrivateData(), pd)
	return b
}

// rejectLocked sends a REJ and moves the ID as ib_send_cm_rej does.
func (c *id) rejectLocked(reason RejReason, ari, pd []byte) {
	m := c.m
	m.st.REJSent++
	m.sendLocked(c.av, c.formatREJ(reason, ari, pd))
	switch c.st {
	case StateREPSent, StateMRAREPRcvd:
		m.enterTimewaitLocked(c.self)
	default:
		m.resetToIdleLocked(c.self)
	}
}

func (c *id) sendREJ(reason RejReason, ari, pd []byte) error {
	if tooLong(pd, REJPrivateDataSize) || tooLong(ari, REJARILength) {
		return ErrPrivateDataTooLong
	}
	if err := c.beginIn(StateREQSent, StateMRAREQRcvd, StateREQRcvd, StateMRAREQSent, StateREPRcvd, StateMRAREPSent,
		StateREPSent, StateMRAREPRcvd); err != nil {
		return err
	}
	c.rejectLocked(reason, ari, pd)
	c.m.unlockAndDrain()
	return nil
}

// formatMRA is cm.c:cm_format_mra.
func (c *id) formatMRA(which mad.MsgResponse) []byte {
	b := c.newReply(mad.AttrMRA)
	r := mad.MRA(b)
	r.SetMessageMRAed(which)
	r.SetServiceTimeout(c.serviceTimeout)
	copy(r.PrivateData(), c.mraPD)
	return b
}

func (c *id) sendMRA(serviceTimeout uint8, pd []byte) error {
	if tooLong(pd, MRAPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.begin(); err != nil {
		return err
	}
	m := c.m
	var which mad.MsgResponse
	switch c.st {
	case StateREQRcvd:
		c.st, which = StateMRAREQSent, mad.MsgREQ
	case StateREPRcvd:
		c.st, which = StateMRAREPSent, mad.MsgREP
	default:
		c.unlock()
		return ErrInvalidState
	}
	c.serviceTimeout = serviceTimeout & 0x1f
	c.mraPD = append([]byte(nil), pd...)
	if serviceTimeout&MRAFlagDelay == 0 {
		c.mraSent = true
		m.sendLocked(c.av, c.formatMRA(which))
	}
	m.unlockAndDrain()
	return nil
}

// formatDREQ is cm.c:cm_format_dreq (a new transaction).
func (c *id) formatDREQ(pd []byte) []byte {
	c.tid = tidHigh | uint64(c.local)
	b := c.newReply(mad.AttrDREQ)
	r := mad.DREQ(b)
	r.SetRemoteQPN(c.remoteQPN)
	copy(r.PrivateData(), pd)
	return b
}

// dreqLocked is cm.c:cm_send_dreq_locked.
func (c *id) dreqLocked(pd []byte) {
	m := c.m
	b := c.formatDREQ(pd)
	c.st = StateDREQSent
	m.sendLocked(c.av, b)
	m.armMsgLocked(c.self, b, c.timeout, c.maxRetries)
}

func (c *id) sendDREQ(pd []byte) error {
	if tooLong(pd, DREQPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.beginIn(StateEstablished); err != nil {
		return err
	}
	c.dreqLocked(pd)
	c.m.unlockAndDrain()
	return nil
}

// formatDREP is cm.c:cm_format_drep.
func (c *id) formatDREP(pd []byte) []byte {
	b := c.newReply(mad.AttrDREP)
	r := mad.DREP(b)
	copy(r.PrivateData(), pd)
	return b
}

func (c *id) sendDREP(pd []byte) error {
	if tooLong(pd, DREPPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.beginIn(StateDREQRcvd); err != nil {
		return err
	}
	m := c.m
	c.pd = append([]byte(nil), pd...)
	m.sendLocked(c.av, c.formatDREP(pd))
	m.enterTimewaitLocked(c.self)
	m.unlockAndDrain()
	return nil
}

func (c *id) sendSIDRREQ(p *SIDRREQParam) error {
	if p == nil {
		return errors.New("cm: nil SIDRREQParam")
	}
	if tooLong(p.PrivateData, SIDRREQPrivateDataSize) {
		return ErrPrivateDataTooLong
	}
	if err := c.begin(); err != nil {
		return err
	}
	m := c.m
	if c.st != StateIdle {
		c.unlock()
		return ErrInvalidState
	}
	path := p.Path
	if path.PKey == 0 {
		path.PKey = 0xffff
	}
	c.path, c.av = path, addrOf(&path)
	c.sid, c.mask = p.ServiceID, ^uint64(0)
	c.timeout = p.Timeout
	if c.timeout <= 0 {
		c.timeout = convertToDuration(DefaultCMResponseTimeout)
	}
	retries := p.MaxCMRetries
	if retries == 0 {
		retries = DefaultMaxCMRetries
	}
	c.maxRetries = int(min(retries, MaxCMRetriesLimit))
	c.tid = tidHigh | uint64(c.local)
	// cm.c:cm_format_sidr_req.
	b := newMAD(mad.AttrSIDRREQ, c.tid)
	r := mad.SIDRREQ(b)
	r.SetRequestID(c.local)
	r.SetPKey(path.PKey)
	r.SetServiceID(p.ServiceID)
	copy(r.PrivateData(), p.PrivateData)
	c.st = StateSIDRREQSent
	m.sendLocked(c.av, b)
	m.armMsgLocked(c.self, b, c.timeout, c.maxRetries)
	m.unlockAndDrain()
	return nil
}

// formatSIDRREP is cm.c:cm_format_sidr_rep.
func (c *id) formatSIDRREP(p *SIDRREPParam) []byte {
	b := newMAD(mad.AttrSIDRREP, c.tid)
	r := mad.SIDRREP(b)
	r.SetRequestID(c.remote)
	r.SetStatus(uint8(p.Status))
	r.SetQPN(p.QPN & 0xffffff)
	r.SetServiceID(c.sid)
	r.SetQKey(p.QKey)
	if len(p.Info) > 0 {
		r.SetInfoLength(uint8(len(p.Info)))
		copy(r.Info(), p.Info)
	}
	copy(r.PrivateData(), p.PrivateData)
	return b
}

// sidrDoneLocked ends serving a SIDR_REQ (cm.c: the remote SIDR entry
// is erased once the SIDR_REP is sent).
func (c *id) sidrDoneLocked() {
	delete(c.m.sidr, sidrKey{c.av.DGID, c.remote})
	c.st = StateIdle
}

func (c *id) sendSIDRREP(p *SIDRREPParam) error {
	if p == nil {
		return errors.New("cm: nil SIDRREPParam")
	}
	if tooLong(p.PrivateData, SIDRREPPrivateDataSize) || tooLong(p.Info, SIDRREPInfoLength) {
		return ErrPrivateDataTooLong
	}
	if err := c.begin(); err != nil {
		return err
	}
	m := c.m
	if c.st != StateSIDRREQRcvd {
		c.unlock()
		return ErrInvalidState
	}
	m.sendLocked(c.av, c.formatSIDRREP(p))
	c.sidrDoneLocked()
	m.unlockAndDrain()
	return nil
}

func (c *id) established() error {
	if err := c.begin(); err != nil {
		return err
	}
	m := c.m
	switch c.st {
	case StateREPSent, StateMRAREPRcvd:
	case StateEstablished:
		c.unlock()
		return nil
	default:
		c.unlock()
		return ErrInvalidState
	}
	c.stopMsgLocked()
	c.st = StateEstablished
	m.eventLocked(c.self, &Event{Type: EventUserEstablished})
	m.unlockAndDrain()
	return nil
}

// initQPAttr is cm.c:cm_init_qp_init_attr / _rtr_attr / _rts_attr.
func (c *id) initQPAttr(s QPState) (QPAttr, error) {
	var a QPAttr
	if err := c.begin(); err != nil {
		return a, err
	}
	defer c.unlock()
	connecting := func(withSent bool) bool {
		switch c.st {
		case StateREQRcvd, StateMRAREQSent, StateREPRcvd, StateMRAREPSent, StateREPSent, StateMRAREPRcvd,
			StateEstablished:
			return true
		case StateREQSent, StateMRAREQRcvd:
			return withSent
		}
		return false
	}
	switch s {
	case QPStateInit:
		if !connecting(true) {
			return a, ErrInvalidState
		}
		a.Mask = QPAttrState | QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrPort
		a.AccessFlags = accessRemoteWrite
		if c.respRes > 0 {
			a.AccessFlags |= accessRemoteRead | accessRemoteAtomic
		}
		a.PKeyIndex = c.av.PKeyIndex
		a.Port = c.m.cfg.Port
	case QPStateRTR:
		if !connecting(false) {
			return a, ErrInvalidState
		}
		a.Mask = QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		a.Path = c.path
		a.PathMTU = c.path.MTU
		a.DestQPN = c.remoteQPN
		a.RQPSN = c.rqPSN
		if c.qpType == QPTypeRC {
			a.Mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
			a.MaxDestRdAtomic = c.respRes
			a.MinRNRTimer = 0
		}
	case QPStateRTS:
		if !connecting(false) {
			return a, ErrInvalidState
		}
		a.Mask = QPAttrState | QPAttrSQPSN
		a.SQPSN = c.sqPSN
		if c.qpType == QPTypeRC {
			a.Mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
			a.Timeout = c.localACKTimeout
			a.RetryCount = c.retryCount
			a.RNRRetry = c.rnrRetry
			a.MaxRdAtomic = c.initDepth
		}
	default:
		return a, ErrInvalidState
	}
	return a, nil
}

// IB access flags (enum ib_access_flags).
const (
	accessRemoteWrite  = 1 << 1
	accessRemoteRead   = 1 << 2
	accessRemoteAtomic = 1 << 3
)

func (c *id) destroy() { c.destroyWith(nil) }

// destroyWith is cm.c:cm_destroy_id: what the state owes the peer is
// sent, the ID leaves every table; a timewait in progress continues
// without it.
func (c *id) destroyWith(cause error) {
	c.lock()
	if c.destroyed {
		c.unlock()
		return
	}
	m := c.m
	switch c.st {
	case StateListen:
		for i, l := range m.listens {
			if l == c.self {
				m.listens = append(m.listens[:i], m.listens[i+1:]...)
				break
			}
		}
		c.st = StateIdle
	case StateSIDRREQSent:
		c.stopMsgLocked()
		c.st = StateIdle
	case StateSIDRREQRcvd:
		m.sendLocked(c.av, c.formatSIDRREP(&SIDRREPParam{Status: SIDRReject}))
		c.sidrDoneLocked()
	case StateREQSent, StateMRAREQRcvd:
		// The peer may hold an ID for our REQ: REJ timeout, with our CA
		// GUID as the ARI (how the peer finds it, cm_acquire_rejected_id).
		c.stopMsgLocked()
		var ari [8]byte
		putGUID(ari[:], m.cfg.CAGUID)
		c.rejectLocked(RejTimeout, ari[:], nil)
	case StateREQRcvd:
		reason := RejConsumerDefined
		if errors.Is(cause, ErrNoResources) {
			reason = RejNoResources
		}
		c.rejectLocked(reason, nil, nil)
	case StateMRAREQSent, StateREPRcvd, StateMRAREPSent, StateREPSent, StateMRAREPRcvd:
		c.stopMsgLocked()
		c.rejectLocked(RejConsumerDefined, nil, nil)
	case StateEstablished:
		// One DREQ, not retried: the ID is going (cm.c falls through to
		// the DREQ_SENT case, which cancels the MAD's retries).
		m.sendLocked(c.av, c.formatDREQ(nil))
		m.enterTimewaitLocked(c.self)
	case StateDREQSent:
		m.enterTimewaitLocked(c.self)
	case StateDREQRcvd:
		m.sendLocked(c.av, c.formatDREP(nil))
		m.enterTimewaitLocked(c.self)
	}
	c.stopMsgLocked()
	c.destroyed = true
	delete(m.ids, c.local)
	m.st.IDs--
	if tw := c.tw; tw != nil {
		tw.id = nil
		if !tw.waiting {
			m.removeRemoteLocked(tw)
			delete(m.tws, tw.local)
		}
		c.tw = nil
	}
	m.unlockAndDrain()
}

// ErrNoResources, returned by a REQ handler, destroys the new ID with
// REJ "no resources" instead of "consumer defined" (cm.c: -ENOMEM).
var ErrNoResources = errors.New("cm: no resources")

func putGUID(b []byte, g uint64) {
	for i := range 8 {
		b[i] = byte(g >> (56 - 8*i))
	}
}

func getGUID(b []byte) uint64 {
	var g uint64
	for i := range 8 {
		g = g<<8 | uint64(b[i])
	}
	return g
}

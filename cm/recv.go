package cm

import (
	"errors"

	"github.com/irdma-emu/irdma-emu/cm/mad"
)

// deliver is the receive half: cm.c:cm_recv_handler's dispatch by
// attribute, after the MAD layer's checks (mad.c drops MADs of a class or
// class version without an agent; we count them).
func (m *mgr) deliver(from Addr, b []byte) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.st.MADsReceived++
	attr, err := mad.Check(b)
	switch {
	case errors.Is(err, mad.ErrTruncated):
		m.st.DropTruncated++
	case errors.Is(err, mad.ErrUnknownAttr), errors.Is(err, mad.ErrUnsupportedAttr):
		m.st.DropBadAttribute++
	case err != nil:
		m.st.DropBadHeader++
	}
	if err != nil {
		m.mu.Unlock()
		return
	}
	// The views keep pointing into this copy (private data in events).
	b = append([]byte(nil), b[:mad.Size]...)
	switch attr {
	case mad.AttrREQ:
		m.recvREQ(from, b)
	case mad.AttrMRA:
		m.recvMRA(b)
	case mad.AttrREJ:
		m.recvREJ(b)
	case mad.AttrREP:
		m.recvREP(from, b)
	case mad.AttrRTU:
		m.recvRTU(b)
	case mad.AttrDREQ:
		m.recvDREQ(from, b)
	case mad.AttrDREP:
		m.recvDREP(b)
	case mad.AttrSIDRREQ:
		m.recvSIDRREQ(from, b)
	case mad.AttrSIDRREP:
		m.recvSIDRREP(b)
	}
	m.unlockAndDrain()
}

// lookupLocked is cm.c:cm_acquire_id: the live ID with this local comm
// ID whose remote comm ID is remote.
func (m *mgr) lookupLocked(local, remote uint32) *ID {
	c := m.ids[local]
	if c == nil || c.remote != remote {
		return nil
	}
	return c
}

// unknownLocked counts a message no live ID owns: an answer to an ID
// destroyed while its timewait still runs (a DREP after the consumer
// destroyed its ID in DREQ_SENT, say: the kernel ignores it too) is
// counted apart from a comm ID nothing ever had.
func (m *mgr) unknownLocked(local, remote uint32) {
	if tw := m.tws[local]; tw != nil && tw.id == nil && tw.remote == remote {
		m.st.AfterDestroy++
		return
	}
	m.st.DropUnknownCommID++
}

// issueREJLocked is cm.c:cm_issue_rej: a REJ answering a MAD no ID owns,
// its comm IDs swapped from the received one's.
func (m *mgr) issueREJLocked(to Addr, rcv []byte, reason RejReason, which mad.MsgResponse, ari []byte) {
	b := newMAD(mad.AttrREJ, mad.Header(rcv).TID())
	r := mad.REJ(b)
	in := mad.CommIDs(rcv)
	r.CommIDs().SetRemoteCommID(in.LocalCommID())
	r.CommIDs().SetLocalCommID(in.RemoteCommID())
	r.SetMessageRejected(which)
	r.SetReason(uint16(reason))
	if len(ari) > 0 {
		r.SetRejectedInfoLength(uint8(len(ari)))
		copy(r.ARI(), ari)
	}
	m.st.REJSent++
	m.sendLocked(to, b)
}

// reqPath is the path a received REQ describes, from our side
// (cm.c:cm_format_paths_from_req, plus the GSI packet's source MAC and
// hop limit as cm_req_handler takes them for RoCE).
func reqPath(r mad.REQ, from Addr) Path {
	pp := r.Primary()
	p := Path{
		SGID: pp.RemoteGID(), DGID: pp.LocalGID(), SGIDIndex: from.SGIDIndex,
		FlowLabel: pp.FlowLabel(), TrafficClass: pp.TrafficClass(), HopLimit: from.HopLimit,
		PKey: r.PKey(), MTU: MTU(r.PathMTU()), SL: pp.SL(), DMAC: from.DMAC, Rate: pp.PacketRate(),
	}
	if p.HopLimit == 0 {
		p.HopLimit = pp.HopLimit()
	}
	if t := pp.LocalACKTimeout(); t > 0 {
		p.PacketLifeTime = t - 1
	}
	return p
}

func (m *mgr) recvREQ(from Addr, b []byte) {
	r := mad.REQ(b)
	guid := r.LocalCAGUID()
	// cm.c:cm_match_req: a duplicate first, then a stale connection.
	if tw := m.byRemote[remoteKey{guid, r.LocalCommID()}]; tw != nil {
		m.st.DropDuplicate++
		// cm.c:cm_dup_req_handler.
		if c := tw.id; c != nil && c.st == StateMRAREQSent {
			c.mraSent = true
			m.sendLocked(c.av, c.formatMRA(mad.MsgREQ))
		}
		return
	}
	if tw := m.byQPN[remoteKey{guid, r.LocalQPN()}]; tw != nil {
		// The peer reuses a QPN we still have connected: the old
		// connection is stale (the peer lost it). REJ the REQ and
		// disconnect the old one.
		m.st.StaleRejected++
		m.issueREJLocked(from, b, RejStaleConn, mad.MsgREQ, nil)
		if c := tw.id; c != nil && c.st == StateEstablished {
			c.dreqLocked(nil)
		}
		return
	}
	if t := r.TransportServiceType(); (t != uint8(QPTypeRC) && t != uint8(QPTypeUC)) || r.ExtTransportType() != 0 {
		m.issueREJLocked(from, b, RejInvalidTransportType, mad.MsgREQ, nil)
		return
	}
	l := m.findListenLocked(r.ServiceID())
	if l == nil {
		m.issueREJLocked(from, b, RejInvalidServiceID, mad.MsgREQ, nil)
		return
	}
	if m.cfg.LookupGID != nil {
		if _, ok := m.cfg.LookupGID(r.Primary().RemoteGID()); !ok {
			ari := from.SGID
			m.issueREJLocked(from, b, RejInvalidGID, mad.MsgREQ, ari[:])
			return
		}
	}
	if len(m.ids) >= m.cfg.MaxIDs {
		m.st.DropNoResources++
		m.issueREJLocked(from, b, RejNoResources, mad.MsgREQ, nil)
		return
	}
	// cm.c:cm_req_handler.
	c := m.newIDLocked(l.handler, l.ctx)
	c.remote = r.LocalCommID()
	c.remoteGUID = guid
	c.sid, c.mask = r.ServiceID(), ^uint64(0)
	c.tid = mad.Header(b).TID()
	c.timeout = convertToDuration(r.LocalCMResponseTimeout())
	c.maxRetries = int(r.MaxCMRetries())
	c.remoteQPN = r.LocalQPN()
	c.initDepth = r.ResponderResources()
	c.respRes = r.InitiatorDepth()
	c.sqPSN = r.StartingPSN()
	c.retryCount = r.RetryCount()
	c.rnrRetry = r.RNRRetryCount()
	c.qpType = QPType(r.TransportServiceType())
	c.path = reqPath(r, from)
	c.localACKTimeout = min(c.path.PacketLifeTime+1, 31)
	c.av = from
	c.av.FlowLabel, c.av.TrafficClass = c.path.FlowLabel, c.path.TrafficClass
	c.av.RemoteQPN = 1
	m.insertRemoteLocked(c) // both keys were checked free above
	c.st = StateREQRcvd
	ev := &Event{Type: EventREQReceived, Listen: l, PrivateData: r.PrivateData(), REQ: &REQEvent{
		ServiceID: c.sid, Path: c.path, RemoteCAGUID: guid, RemoteQKey: r.LocalQKey(), RemoteQPN: c.remoteQPN,
		QPType: c.qpType, StartingPSN: c.sqPSN, ResponderResources: c.respRes, InitiatorDepth: c.initDepth,
		LocalCMResponseTimeout: r.RemoteCMResponseTimeout(), FlowControl: r.FlowControl(),
		RemoteCMResponseTimeout: r.LocalCMResponseTimeout(), LocalACKTimeout: r.Primary().LocalACKTimeout(),
		RetryCount: c.retryCount, RNRRetryCount: c.rnrRetry, MaxCMRetries: r.MaxCMRetries(), SRQ: r.SRQ(),
	}}
	m.eventLocked(c, ev)
}

func (m *mgr) recvMRA(b []byte) {
	r := mad.MRA(b)
	ids := r.CommIDs()
	// cm.c:cm_acquire_mraed_id: an MRA of our REQ comes before we know
	// the peer's comm ID.
	var c *ID
	if r.MessageMRAed() == mad.MsgREQ {
		c = m.lookupLocked(ids.RemoteCommID(), 0)
	} else {
		c = m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
	}
	if c == nil {
		m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
		return
	}
	timeout := convertToDuration(r.ServiceTimeout()) + convertToDuration(c.localACKTimeout)
	switch {
	case c.st == StateREQSent && r.MessageMRAed() == mad.MsgREQ:
		c.st = StateMRAREQRcvd
	case c.st == StateREPSent && r.MessageMRAed() == mad.MsgREP:
		c.st = StateMRAREPRcvd
	case c.st == StateMRAREQRcvd || c.st == StateMRAREPRcvd:
		m.st.DropDuplicate++
		return
	default:
		m.st.DropUnexpected++
		return
	}
	m.rearmMsgLocked(c, timeout)
	m.eventLocked(c, &Event{Type: EventMRAReceived, PrivateData: r.PrivateData(),
		MRA: &MRAEvent{ServiceTimeout: r.ServiceTimeout()}})
}

func (m *mgr) recvREJ(b []byte) {
	r := mad.REJ(b)
	ids := r.CommIDs()
	reason := RejReason(r.Reason())
	// cm.c:cm_acquire_rejected_id.
	var c *ID
	switch {
	case reason == RejTimeout:
		// The sender timed out waiting for us: its CA GUID in the ARI,
		// its comm ID names our ID's remote end.
		if tw := m.byRemote[remoteKey{getGUID(r.ARI()), ids.LocalCommID()}]; tw != nil && tw.id != nil {
			c = tw.id
		}
	case r.MessageRejected() == mad.MsgREQ:
		c = m.lookupLocked(ids.RemoteCommID(), 0)
	default:
		c = m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
	}
	if c == nil {
		m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
		return
	}
	// cm.c:cm_rej_handler.
	switch c.st {
	case StateREQSent, StateMRAREQRcvd, StateREPSent, StateMRAREPRcvd, StateREQRcvd, StateMRAREQSent:
		if reason == RejStaleConn {
			m.enterTimewaitLocked(c)
		} else {
			m.resetToIdleLocked(c)
		}
	case StateREPRcvd, StateMRAREPSent, StateEstablished, StateDREQSent:
		m.enterTimewaitLocked(c)
	default:
		m.st.DropUnexpected++
		return
	}
	m.st.REJReceived++
	m.eventLocked(c, &Event{Type: EventREJReceived, PrivateData: r.PrivateData(),
		REJ: &REJEvent{Reason: reason, ARI: r.ARI(), ARILength: r.RejectedInfoLength()}})
}

func (m *mgr) recvREP(from Addr, b []byte) {
	r := mad.REP(b)
	ids := r.CommIDs()
	c := m.lookupLocked(ids.RemoteCommID(), 0)
	if c == nil {
		// cm.c:cm_dup_rep_handler: a REP we already answered.
		d := m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
		if d == nil {
			m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
			return
		}
		m.st.DropDuplicate++
		switch d.st {
		case StateEstablished:
			m.sendLocked(d.av, d.formatRTU(d.pd))
		case StateMRAREPSent:
			d.mraSent = true
			m.sendLocked(d.av, d.formatMRA(mad.MsgREP))
		}
		return
	}
	if c.st != StateREQSent && c.st != StateMRAREQRcvd {
		m.st.DropUnexpected++
		return
	}
	c.remote = ids.LocalCommID()
	c.remoteGUID = r.LocalCAGUID()
	c.remoteQPN = r.LocalQPN()
	if dup, stale := m.insertRemoteLocked(c); dup != nil || stale != nil {
		// cm.c:cm_rep_handler: the peer's comm ID or QPN belongs to
		// another live connection.
		c.remote, c.remoteQPN = 0, 0
		m.st.StaleRejected++
		m.issueREJLocked(from, b, RejStaleConn, mad.MsgREP, nil)
		if stale != nil && stale.id != nil && stale.id.st == StateEstablished {
			stale.id.dreqLocked(nil)
		}
		return
	}
	c.stopMsgLocked()
	c.st = StateREPRcvd
	c.sqPSN = r.StartingPSN()
	c.initDepth = r.ResponderResources()
	c.respRes = r.InitiatorDepth()
	c.targetACKDelay = r.TargetACKDelay()
	c.rnrRetry = r.RNRRetryCount()
	c.localACKTimeout = ackTimeout(c.targetACKDelay, c.localACKTimeout-min(c.localACKTimeout, 1))
	m.eventLocked(c, &Event{Type: EventREPReceived, PrivateData: r.PrivateData(), REP: &REPEvent{
		RemoteCAGUID: c.remoteGUID, RemoteQKey: r.LocalQKey(), RemoteQPN: c.remoteQPN, StartingPSN: c.sqPSN,
		ResponderResources: c.respRes, InitiatorDepth: c.initDepth, TargetACKDelay: c.targetACKDelay,
		FailoverAccepted: r.FailoverAccepted(), FlowControl: r.FlowControl(), RNRRetryCount: c.rnrRetry, SRQ: r.SRQ(),
	}})
}

func (m *mgr) recvRTU(b []byte) {
	r := mad.RTU(b)
	ids := r.CommIDs()
	c := m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
	if c == nil {
		m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
		return
	}
	if c.st != StateREPSent && c.st != StateMRAREPRcvd {
		m.st.DropDuplicate++
		return
	}
	c.stopMsgLocked()
	c.st = StateEstablished
	m.eventLocked(c, &Event{Type: EventRTUReceived, PrivateData: r.PrivateData()})
}

func (m *mgr) recvDREQ(from Addr, b []byte) {
	r := mad.DREQ(b)
	ids := r.CommIDs()
	c := m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
	if c == nil {
		// cm.c:cm_issue_drep: let the peer finish its disconnect.
		m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
		d := newMAD(mad.AttrDREP, mad.Header(b).TID())
		dr := mad.DREP(d)
		dr.CommIDs().SetLocalCommID(ids.RemoteCommID())
		dr.CommIDs().SetRemoteCommID(ids.LocalCommID())
		m.sendLocked(from, d)
		return
	}
	if c.localQPN != r.RemoteQPN() {
		m.st.DropUnexpected++
		return
	}
	switch c.st {
	case StateREPSent, StateDREQSent, StateMRAREPRcvd:
		c.stopMsgLocked()
	case StateEstablished:
	case StateTimewait:
		m.st.DropDuplicate++
		c.tid = mad.Header(b).TID()
		m.sendLocked(c.av, c.formatDREP(c.pd))
		return
	case StateDREQRcvd:
		m.st.DropDuplicate++
		return
	default:
		m.st.DropUnexpected++
		return
	}
	c.st = StateDREQRcvd
	c.tid = mad.Header(b).TID()
	m.eventLocked(c, &Event{Type: EventDREQReceived, PrivateData: r.PrivateData()})
}

func (m *mgr) recvDREP(b []byte) {
	r := mad.DREP(b)
	ids := r.CommIDs()
	c := m.lookupLocked(ids.RemoteCommID(), ids.LocalCommID())
	if c == nil {
		m.unknownLocked(ids.RemoteCommID(), ids.LocalCommID())
		return
	}
	if c.st != StateDREQSent && c.st != StateDREQRcvd {
		m.st.DropUnexpected++
		return
	}
	m.enterTimewaitLocked(c)
	m.eventLocked(c, &Event{Type: EventDREPReceived, PrivateData: r.PrivateData()})
}

func (m *mgr) recvSIDRREQ(from Addr, b []byte) {
	r := mad.SIDRREQ(b)
	key := sidrKey{from.DGID, r.RequestID()}
	if m.sidr[key] != nil {
		m.st.DropDuplicate++
		return
	}
	reply := func(status SIDRStatus) {
		d := newMAD(mad.AttrSIDRREP, mad.Header(b).TID())
		dr := mad.SIDRREP(d)
		dr.SetRequestID(r.RequestID())
		dr.SetStatus(uint8(status))
		dr.SetServiceID(r.ServiceID())
		m.sendLocked(from, d)
	}
	l := m.findListenLocked(r.ServiceID())
	if l == nil {
		reply(SIDRUnsupported)
		return
	}
	if len(m.ids) >= m.cfg.MaxIDs {
		m.st.DropNoResources++
		reply(SIDRNoQP)
		return
	}
	// cm.c:cm_sidr_req_handler.
	c := m.newIDLocked(l.handler, l.ctx)
	c.remote = r.RequestID()
	c.sid, c.mask = r.ServiceID(), ^uint64(0)
	c.tid = mad.Header(b).TID()
	c.av = from
	c.av.RemoteQPN = 1
	c.path = Path{SGID: from.SGID, DGID: from.DGID, SGIDIndex: from.SGIDIndex, FlowLabel: from.FlowLabel,
		TrafficClass: from.TrafficClass, HopLimit: from.HopLimit, PKey: r.PKey(), DMAC: from.DMAC}
	c.st = StateSIDRREQRcvd
	m.sidr[key] = c
	m.eventLocked(c, &Event{Type: EventSIDRREQReceived, Listen: l, PrivateData: r.PrivateData(),
		SIDRREQ: &SIDRREQEvent{ServiceID: c.sid, PKey: r.PKey(), Path: c.path}})
}

func (m *mgr) recvSIDRREP(b []byte) {
	r := mad.SIDRREP(b)
	c := m.ids[r.RequestID()]
	if c == nil {
		m.st.DropUnknownCommID++
		return
	}
	if c.st != StateSIDRREQSent {
		m.st.DropUnexpected++
		return
	}
	c.stopMsgLocked()
	c.st = StateIdle
	m.eventLocked(c, &Event{Type: EventSIDRREPReceived, PrivateData: r.PrivateData(), SIDRREP: &SIDRREPEvent{
		Status: SIDRStatus(r.Status()), QKey: r.QKey(), QPN: r.QPN(), Info: r.Info()[:min(int(r.InfoLength()), len(r.Info()))],
	}})
}

package rdmacm

import (
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/cm"
)

// maxBacklog is ucma.c's max_backlog (net.rdma_ucm.max_backlog default).
const maxBacklog = 1024

// Private data limits of the user's part (rdma_connect, rdma_accept: the
// CM field less the cma_hdr where one is sent; cma.c cma_connect_ib /
// cma_resolve_ib_udp).
const (
	maxREQUserData     = cm.REQPrivateDataSize - cmaHdrSize
	maxSIDRREQUserData = cm.SIDRREQPrivateDataSize - cmaHdrSize
)

// CONNECT --------------------------------------------------------------

func (p *Provider) cmdConnect(ch *Channel, handle uint32, cp []byte) result {
	if cp[cpValid] == 0 {
		return result{err: syscall.EINVAL}
	}
	if p.cfg.CM == nil {
		return result{err: syscall.ENODEV}
	}
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	if id.state != stateRouteResolved {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	n := int(cp[cpPrivateDataLen])
	ud := id.qpType == qptUD
	if (!ud && n > maxREQUserData) || (ud && n > maxSIDRREQUserData) {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	// A connection attempt that was rejected or timed out left its CM
	// id behind (in timewait or idle): a new attempt gets a new one.
	old := id.cmid
	id.cmid = nil
	pd := make([]byte, cmaHdrSize+n)
	putCmaHdr(pd, id.src, id.dst)
	copy(pd[cmaHdrSize:], cp[cpPrivateData:cpPrivateData+n])
	id.state = stateConnect
	id.respRes, id.initDepth = cp[cpRespRes], cp[cpInitDepth]
	id.retryCount, id.rnrRetry = cp[cpRetryCount]&7, cp[cpRNRRetryCount]&7
	path, sid := id.path, serviceID(id.ps, id.dst.port)
	req := &cm.REQParam{Path: path, ServiceID: sid, QPN: le.Uint32(cp[cpQPN:]) & 0xffffff, QPType: cm.QPTypeRC,
		StartingPSN: id.seqNum, PrivateData: pd, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		RemoteCMResponseTimeout: cm.DefaultCMResponseTimeout, LocalCMResponseTimeout: cm.DefaultCMResponseTimeout,
		FlowControl: cp[cpFlowControl] != 0, LocalACKTimeout: id.ackTimeout, RetryCount: id.retryCount,
		RNRRetryCount: id.rnrRetry, MaxCMRetries: cm.DefaultMaxCMRetries, SRQ: cp[cpSRQ] != 0}
	p.mu.Unlock()
	if old != nil {
		old.Destroy()
	}

	c, err := p.cfg.CM.CreateID(p.onCM, id)
	if err == nil {
		p.mu.Lock()
		if id.state != stateConnect {
			err = syscall.EINVAL // destroyed meanwhile
		} else {
			id.cmid = c
		}
		p.mu.Unlock()
		if err == nil {
			if ud {
				err = c.SendSIDRREQ(&cm.SIDRREQParam{Path: path, ServiceID: sid, PrivateData: pd,
					Timeout: 0, MaxCMRetries: cm.DefaultMaxCMRetries})
			} else {
				err = c.SendREQ(req)
			}
		}
	}
	if err != nil {
		p.mu.Lock()
		if id.cmid == c {
			id.cmid = nil
		}
		if id.state == stateConnect {
			id.state = stateRouteResolved
		}
		p.mu.Unlock()
		if c != nil {
			c.Destroy()
		}
		return result{err: errno(err)}
	}
	return result{}
}

// LISTEN ---------------------------------------------------------------

func (p *Provider) cmdListen(ch *Channel, handle uint32, backlog int32) result {
	if backlog <= 0 || backlog >= maxBacklog {
		backlog = maxBacklog
	}
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	if id.state == stateListen {
		id.backlog = int(backlog) // rdma_listen again: a new backlog
		p.mu.Unlock()
		return result{}
	}
	if id.state == stateIdle {
		// rdma_listen on an unbound id binds it to the IPv4 wildcard.
		if err := p.bindLocked(id, sockAddr{addr: anyV4}); err != nil {
			p.mu.Unlock()
			return result{err: err}
		}
		id.state = stateAddrBound
	}
	if id.state != stateAddrBound {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	// cma_bind_listen: no other listener may cover the same address.
	for _, o := range p.binds[bindKey{id.ps, id.src.port}] {
		if o != id && o.state == stateListen && overlaps(id.src, o.src, id.afOnly || o.afOnly) {
			p.mu.Unlock()
			return result{err: syscall.EADDRINUSE}
		}
	}
	id.state = stateListen
	id.backlog = int(backlog)
	sid := serviceID(id.ps, id.src.port)
	need := p.cfg.CM != nil && p.listens[sid] == nil
	p.mu.Unlock()
	if need {
		if err := p.listenService(sid); err != nil {
			p.mu.Lock()
			if id.state == stateListen {
				id.state = stateAddrBound
			}
			p.mu.Unlock()
			return result{err: err}
		}
	}
	return result{}
}

// listenService makes the cm listen for a service ID, once per service
// however many listeners share the port.
func (p *Provider) listenService(sid uint64) error {
	c, err := p.cfg.CM.CreateID(p.onCM, sid)
	if err != nil {
		return errno(err)
	}
	if err := c.Listen(sid, 0); err != nil {
		c.Destroy()
		return errno(err)
	}
	p.mu.Lock()
	if p.listens[sid] != nil || p.removing {
		p.mu.Unlock()
		c.Destroy()
		return nil
	}
	p.listens[sid] = c
	p.mu.Unlock()
	return nil
}

// dropUnusedListens stops cm listens no listener needs any more.
func (p *Provider) dropUnusedListens() {
	p.mu.Lock()
	var drop []*cm.ID
	for sid, c := range p.listens {
		used := false
		for _, o := range p.binds[bindKey{uint16(sid >> 16), uint16(sid)}] {
			used = used || o.state == stateListen
		}
		if !used {
			drop = append(drop, c)
			delete(p.listens, sid)
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Destroy()
	}
}

// ACCEPT ---------------------------------------------------------------

func (p *Provider) cmdAccept(ch *Channel, handle uint32, uid uint64, cp []byte) result {
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	c := id.cmid
	if id.state != stateConnect || c == nil {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	if !id.passive {
		// The active side after CONNECT_RESPONSE: librdmacm moved its QP
		// to RTS; the RTU completes the handshake (cma_rep_recv).
		got := id.gotREP
		p.mu.Unlock()
		if !got {
			return result{err: syscall.EINVAL}
		}
		return result{err: errno(c.SendRTU(nil))}
	}
	if cp[cpValid] == 0 {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	n := int(cp[cpPrivateDataLen])
	pd := append([]byte(nil), cp[cpPrivateData:cpPrivateData+n]...)
	qpn := le.Uint32(cp[cpQPN:]) & 0xffffff
	ud := id.qpType == qptUD
	if !ud {
		id.respRes, id.initDepth = cp[cpRespRes], cp[cpInitDepth]
	}
	p.mu.Unlock()
	if ud {
		err = c.SendSIDRREP(&cm.SIDRREPParam{QPN: qpn, QKey: UDPQKey, Status: cm.SIDRSuccess, PrivateData: pd})
	} else {
		err = c.SendREP(&cm.REPParam{QPN: qpn, StartingPSN: id.seqNum, PrivateData: pd,
			ResponderResources: cp[cpRespRes], InitiatorDepth: cp[cpInitDepth],
			FlowControl: cp[cpFlowControl] != 0, RNRRetryCount: cp[cpRNRRetryCount] & 7, SRQ: cp[cpSRQ] != 0})
	}
	if err != nil {
		return result{err: errno(err)}
	}
	p.mu.Lock()
	id.uid = uid // ucma_accept: the context now belongs to the program
	p.mu.Unlock()
	return result{}
}

// REJECT ---------------------------------------------------------------

func (p *Provider) cmdReject(ch *Channel, handle uint32, reason uint8, pd []byte) result {
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	c := id.cmid
	if c == nil || !id.passive {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	ud := id.qpType == qptUD
	p.mu.Unlock()
	if ud {
		if len(pd) > cm.SIDRREPPrivateDataSize {
			return result{err: syscall.EINVAL}
		}
		return result{err: errno(c.SendSIDRREP(&cm.SIDRREPParam{Status: cm.SIDRReject, PrivateData: pd}))}
	}
	if len(pd) > cm.REJPrivateDataSize {
		return result{err: syscall.EINVAL}
	}
	r := cm.RejConsumerDefined
	if reason != 0 {
		r = cm.RejReason(reason) // rdma_reject_ece: IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED
	}
	return result{err: errno(c.SendREJ(r, nil, pd))}
}

// DISCONNECT -----------------------------------------------------------

func (p *Provider) cmdDisconnect(ch *Channel, handle uint32) result {
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	c := id.cmid
	if c == nil || (id.state != stateConnect && id.state != stateDisconnect) {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	ud := id.qpType == qptUD
	p.mu.Unlock()
	if ud {
		return result{}
	}
	// rdma_disconnect: DREQ, or DREP when the peer's DREQ came first;
	// neither succeeding is not an error.
	if c.SendDREQ(nil) != nil {
		_ = c.SendDREP(nil)
	}
	return result{}
}

// NOTIFY ---------------------------------------------------------------

// ibEventCommEst is IB_EVENT_COMM_EST.
const ibEventCommEst = 4

func (p *Provider) cmdNotify(ch *Channel, handle, ev uint32) result {
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	c := id.cmid
	p.mu.Unlock()
	if c == nil {
		return result{err: syscall.EINVAL}
	}
	if ev == ibEventCommEst {
		return result{err: errno(c.Established())}
	}
	return result{}
}

// SET_OPTION -----------------------------------------------------------

// maxOptLen bounds optlen: the options are a few bytes; memdup_user of a
// huge length fails with ENOMEM in the kernel.
const maxOptLen = 1 << 16

func (p *Provider) cmdSetOption(ch *Channel, optval uint64, handle, level, name, optlen uint32) result {
	p.mu.Lock()
	_, err := p.lookup(ch, handle)
	p.mu.Unlock()
	if err != nil {
		return result{err: err}
	}
	if optlen > maxOptLen {
		return result{err: syscall.ENOMEM}
	}
	v, err := ch.readUser(optval, int(optlen))
	if err != nil {
		return result{err: err}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	switch level {
	case optLevelID:
		switch name {
		case optIDTOS:
			if optlen != 1 {
				return result{err: syscall.EINVAL}
			}
			id.tos, id.tosSet = v[0], true
			return result{}
		case optIDReuseAddr, optIDAFOnly:
			if optlen != 4 {
				return result{err: syscall.EINVAL}
			}
			// rdma_set_reuseaddr / rdma_set_afonly: only before bind.
			if id.state != stateIdle && !(name == optIDReuseAddr && id.state == stateAddrBound) {
				return result{err: syscall.EINVAL}
			}
			on := le.Uint32(v) != 0
			if name == optIDReuseAddr {
				id.reuseAddr = on
			} else {
				id.afOnly = on
			}
			return result{}
		case optIDAckTimeout:
			if optlen != 1 {
				return result{err: syscall.EINVAL}
			}
			id.ackTimeout = v[0] & 0x1f
			return result{}
		}
	case optLevelIB:
		// RDMA_OPTION_IB_PATH sets an SA path record: RoCE resolves its
		// route itself (docs/cm.md).
		return result{err: syscall.ENOSYS}
	}
	return result{err: syscall.ENOSYS}
}

// MIGRATE_ID -----------------------------------------------------------

// Substitutes the preload writes for the fd of MIGRATE_ID when the
// program's descriptor is not an rdma_cm channel (docs/cm.md).
const (
	migrateBadFD   = 0xffffffff // not an open descriptor: ENOENT (fdget fails)
	migrateNotUcma = 0xfffffffe // open, but not an rdma_cm file: EINVAL
)

func (p *Provider) cmdMigrate(ch *Channel, respAddr uint64, handle, token uint32) result {
	switch token {
	case migrateBadFD:
		return result{err: syscall.ENOENT}
	case migrateNotUcma:
		return result{err: syscall.EINVAL}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	from := p.channels[token]
	if from == nil || from.pid != ch.pid {
		return result{err: syscall.ENOENT}
	}
	id, err := p.lookup(from, handle)
	if err != nil {
		return result{err: err}
	}
	if from != ch {
		// ucma_migrate_id: the id and its queued events move, in order.
		delete(from.ids, id.handle)
		ch.ids[id.handle] = id
		id.ch = ch
		kept := from.events[:0]
		for _, ev := range from.events {
			if ev.id == id {
				ch.queue(ev)
			} else {
				kept = append(kept, ev)
			}
		}
		from.events = kept
		from.unsignal()
	}
	resp := make([]byte, sizeMigrateResp)
	le.PutUint32(resp, uint32(id.events))
	return result{respAddr: respAddr, resp: resp}
}

// GET_EVENT ------------------------------------------------------------

func (p *Provider) cmdGetEvent(ch *Channel, respAddr uint64, out int) result {
	if out < sizeEventResp {
		return result{err: syscall.ENOSPC}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(ch.events) == 0 {
		return result{err: syscall.EAGAIN}
	}
	ev := ch.events[0]
	r := make([]byte, sizeEventResp)
	le.PutUint32(r[evEvent:], ev.typ)
	le.PutUint32(r[evStatus:], uint32(ev.status))
	copy(r[evParam:], ev.param[:])
	switch {
	case ev.mc != nil:
		le.PutUint64(r[evUID:], ev.mc.uid)
		le.PutUint32(r[evID:], ev.mc.handle)
	default:
		le.PutUint64(r[evUID:], ev.id.uid)
		le.PutUint32(r[evID:], ev.id.handle)
	}
	if ev.newID != nil {
		// ucma_get_event: the request's id gets its handle now, on this
		// channel, and the listener its backlog slot back.
		n := ev.newID
		p.allocHandle(n)
		n.ch = ch
		ch.ids[n.handle] = n
		le.PutUint32(r[evID:], n.handle)
		ev.id.backlog++
	}
	commit := func() {
		ch.events = ch.events[1:]
		ev.id.events++
		if ev.mc != nil {
			ev.mc.events++
		}
		ch.unsignal()
	}
	if ch.mem == nil {
		commit()
		return result{respAddr: respAddr, resp: r}
	}
	// Written under the lock so that a failed copy leaves the event
	// queued, as ucma_get_event does.
	if _, err := ch.mem.WriteAt(r, int64(respAddr)); err != nil {
		if ev.newID != nil {
			delete(p.ids, ev.newID.handle)
			delete(ch.ids, ev.newID.handle)
			ev.newID.hasHandle, ev.newID.ch = false, nil
			ev.id.backlog--
		}
		return result{err: syscall.EFAULT}
	}
	commit()
	return result{}
}

// INIT_QP_ATTR ---------------------------------------------------------

// QP attribute mask bits (enum ib_qp_attr_mask).
const (
	maskState       = 1 << 0
	maskAccessFlags = 1 << 3
	maskPKeyIndex   = 1 << 4
	maskPort        = 1 << 5
	maskQKey        = 1 << 6
	maskAV          = 1 << 7
	maskPathMTU     = 1 << 8
	maskTimeout     = 1 << 9
	maskRetryCnt    = 1 << 10
	maskRNRRetry    = 1 << 11
	maskRQPSN       = 1 << 12
	maskMaxRdAtomic = 1 << 13
	maskMinRNRTimer = 1 << 15
	maskSQPSN       = 1 << 16
	maskMaxDestRd   = 1 << 17
	maskDestQPN     = 1 << 20
)

// Access flags (enum ib_access_flags).
const (
	accessRemoteWrite  = 1 << 1
	accessRemoteRead   = 1 << 2
	accessRemoteAtomic = 1 << 3
)

// QP states (enum ib_qp_state).
const (
	qpsInit = 1
	qpsRTR  = 2
	qpsRTS  = 3
)

func (p *Provider) cmdInitQPAttr(ch *Channel, respAddr uint64, handle, qpState uint32, out int) result {
	if out < sizeQPAttr {
		return result{err: syscall.ENOSPC}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	if !id.device {
		return result{err: syscall.EINVAL} // no device yet (cm_id->device NULL)
	}
	r := make([]byte, sizeQPAttr)
	var mask uint32
	le.PutUint32(r[qaState:], qpState)
	connected := id.cmid != nil && id.qpType != qptUD
	switch {
	case !connected || qpState == qpsInit:
		// cma_ib_init_qp_attr (no CM id yet, or UD), and
		// cm_init_qp_init_attr for INIT.
		mask = maskState | maskPKeyIndex | maskPort
		r[qaPortNum] = 1
		if id.qpType == qptUD {
			le.PutUint32(r[qaQKey:], UDPQKey)
			mask |= maskQKey
		} else {
			var access uint32
			if connected {
				access = accessRemoteWrite
				if id.respRes != 0 {
					access |= accessRemoteRead | accessRemoteAtomic
				}
			}
			le.PutUint32(r[qaAccessFlags:], access)
			mask |= maskAccessFlags
		}
	case qpState == qpsRTR:
		if !id.hasRoute || (!id.passive && !id.gotREP) {
			return result{err: syscall.EINVAL}
		}
		mask = maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRd | maskMinRNRTimer
		le.PutUint32(r[qaPathMTU:], uint32(id.path.MTU))
		le.PutUint32(r[qaDestQPN:], id.peerQPN)
		// cm.c: the starting PSN a side puts in its REQ or REP is the one its
		// own receive queue expects (ib_send_cm_req and ib_send_cm_rep set
		// rq_psn from it; cm_req_handler and cm_rep_handler set sq_psn from the
		// peer's).
		le.PutUint32(r[qaRQPSN:], id.seqNum)
		r[qaMaxDestRdAtom] = id.respRes
		putAHAttr(r[qaAHAttr:], id.path)
	case qpState == qpsRTS:
		mask = maskState | maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxRdAtomic
		le.PutUint32(r[qaSQPSN:], id.peerPSN)
		r[qaTimeout] = ackTimeout(id)
		r[qaRetryCnt] = id.retryCount
		r[qaRNRRetry] = id.rnrRetry
		r[qaMaxRdAtomic] = id.initDepth
	default:
		return result{err: syscall.EINVAL}
	}
	le.PutUint32(r[qaMask:], mask)
	return result{respAddr: respAddr, resp: r}
}

// ackTimeout is the local ACK timeout exponent: RDMA_OPTION_ID_ACK_TIMEOUT
// if set, else the path's packet lifetime + 1 (cm_init_av_by_path).
func ackTimeout(id *cmID) uint8 {
	if id.ackTimeout != 0 {
		return id.ackTimeout
	}
	return min(id.path.PacketLifeTime+1, 31)
}

// putAHAttr writes struct ib_uverbs_ah_attr for a RoCE path: always
// global, the peer's GID, our GID index, port 1.
func putAHAttr(b []byte, pa cm.Path) {
	copy(b[ahDGID:], pa.DGID[:])
	le.PutUint32(b[ahFlowLabel:], pa.FlowLabel)
	b[ahSGIDIndex] = pa.SGIDIndex
	b[ahHopLimit] = pa.HopLimit
	b[ahTrafficClass] = pa.TrafficClass
	b[ahSL] = pa.SL
	b[ahIsGlobal] = 1
	b[ahPortNum] = 1
}

// JOIN_IP_MCAST, JOIN_MCAST, LEAVE_MCAST -------------------------------

func (p *Provider) cmdJoin(ch *Channel, respAddr, uid uint64, handle uint32, sa []byte, flags uint16, out int) result {
	if out < sizeCreateIDResp {
		return result{err: syscall.ENOSPC}
	}
	a, err := parseSockaddr(sa)
	if err != nil {
		return result{err: syscall.EINVAL}
	}
	if !a.ip().IsMulticast() {
		return result{err: syscall.EINVAL}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	if id.state != stateAddrBound && id.state != stateAddrResolved {
		return result{err: syscall.EINVAL}
	}
	if !id.device {
		return result{err: syscall.ENODEV}
	}
	for {
		p.nextMC++
		if p.nextMC >= 1<<31 {
			p.nextMC = 1
		}
		if p.mcs[p.nextMC] == nil {
			break
		}
	}
	mc := &mcast{id: id, handle: p.nextMC, uid: uid, addr: a, flags: flags}
	p.mcs[mc.handle] = mc
	id.mcs[mc.handle] = mc
	// cma_iboe_join_multicast: no SA on RoCE, the join completes at once;
	// the program attaches its UD QP (ibv_attach_mcast, the device's
	// multicast path) when the event arrives.
	ev := &event{id: id, mc: mc, typ: EventMulticastJoin}
	mgid := a.gid()
	sgid := id.src.gid()
	idx, _ := p.gidIndex(sgid)
	pa := cm.Path{DGID: mgid, SGIDIndex: uint8(idx), HopLimit: defaultHopLimit, TrafficClass: id.tos}
	le.PutUint32(ev.param[udQPN:], 0xffffff)
	le.PutUint32(ev.param[udQKey:], UDPQKey)
	putAHAttr(ev.param[udAHAttr:], pa)
	ch.queue(ev)
	resp := make([]byte, sizeCreateIDResp)
	le.PutUint32(resp, mc.handle)
	return result{respAddr: respAddr, resp: resp, undo: func() {
		p.mu.Lock()
		delete(p.mcs, mc.handle)
		delete(id.mcs, mc.handle)
		if id.ch != nil {
			id.ch.removeEvents(id, mc)
		}
		p.mu.Unlock()
	}}
}

func (p *Provider) cmdLeave(ch *Channel, respAddr uint64, handle uint32, out int) result {
	if out < sizeDestroyIDResp {
		return result{err: syscall.ENOSPC}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	mc := p.mcs[handle]
	if mc == nil {
		return result{err: syscall.ENOENT}
	}
	if mc.id.ch != ch {
		return result{err: syscall.EINVAL}
	}
	delete(p.mcs, handle)
	delete(mc.id.mcs, handle)
	ch.removeEvents(mc.id, mc)
	resp := make([]byte, sizeDestroyIDResp)
	le.PutUint32(resp, uint32(mc.events))
	return result{respAddr: respAddr, resp: resp}
}

// CM events ------------------------------------------------------------

// onCM is the cm handler of every CM id this Provider creates (the
// kernel's cma_ib_handler, cma_ib_req_handler, cma_sidr_rep_handler).
// A non-nil return makes the cm destroy the id (a REJ for a request).
func (p *Provider) onCM(c *cm.ID, ev *cm.Event) error {
	if ev.Listen != nil {
		return p.onRequest(c, ev)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, _ := c.Context().(*cmID)
	if id == nil || id.cmid != c || id.state == stateDestroying || id.state == stateDeviceRemoval {
		return nil
	}
	out := &event{id: id}
	switch ev.Type {
	case cm.EventREPReceived:
		if id.state != stateConnect || id.passive {
			return nil
		}
		r := ev.REP
		id.gotREP = true
		id.peerQPN, id.peerPSN = r.RemoteQPN, r.StartingPSN
		// The cm has already swapped the REP's two numbers
		// (cm_format_rep_event): ResponderResources is the peer's
		// initiator depth, what our QP answers as responder.
		id.respRes, id.initDepth = r.ResponderResources, r.InitiatorDepth
		id.rnrRetry = r.RNRRetryCount & 7
		out.typ = EventConnectResponse
		putConnParam(out.param[:], ev.PrivateData, r.RemoteQPN, r.ResponderResources, r.InitiatorDepth,
			r.FlowControl, 0, r.RNRRetryCount, r.SRQ)
	case cm.EventRTUReceived, cm.EventUserEstablished:
		if id.state != stateConnect {
			return nil
		}
		out.typ = EventEstablished
	case cm.EventREJReceived:
		if id.state != stateConnect {
			return nil
		}
		// The id stays in CONNECT (cma_ib_handler): the program
		// destroys it; a second CONNECT is EINVAL.
		out.typ, out.status = EventRejected, int32(ev.REJ.Reason)
		putConnParam(out.param[:], ev.PrivateData, 0, 0, 0, false, 0, 0, false)
	case cm.EventREQError, cm.EventREPError:
		if id.state != stateConnect {
			return nil
		}
		out.typ, out.status = EventUnreachable, -int32(syscall.ETIMEDOUT)
	case cm.EventMRAReceived:
		return nil
	case cm.EventDREQReceived:
		if id.state != stateConnect {
			return nil
		}
		id.state = stateDisconnect
		out.typ = EventDisconnected
	case cm.EventDREPReceived, cm.EventDREQError:
		if id.state != stateConnect {
			return nil
		}
		id.state = stateDisconnect
		out.typ = EventDisconnected
	case cm.EventTimewaitExit:
		out.typ = EventTimewaitExit
	case cm.EventSIDRREPReceived:
		if id.state != stateConnect {
			return nil
		}
		r := ev.SIDRREP
		if r.Status != cm.SIDRSuccess {
			out.typ, out.status = EventUnreachable, -int32(syscall.ECONNREFUSED)
			break
		}
		out.typ = EventEstablished
		le.PutUint32(out.param[udQPN:], r.QPN)
		le.PutUint32(out.param[udQKey:], r.QKey)
		putAHAttr(out.param[udAHAttr:], id.path)
		putUDData(out.param[:], ev.PrivateData)
	case cm.EventSIDRREQError:
		if id.state != stateConnect {
			return nil
		}
		out.typ, out.status = EventUnreachable, -int32(syscall.ETIMEDOUT)
	default:
		return nil
	}
	// ucma_event_handler: events of a request's id before ACCEPT gave it
	// a context are dropped (the program has not seen the id yet).
	if id.ch == nil || (id.passive && id.uid == 0) {
		return nil
	}
	id.ch.queue(out)
	return nil
}

// onRequest handles a REQ or SIDR_REQ that matched one of our cm listens:
// find the listener by port space, port and address (cma_find_listener),
// make the new id and queue CONNECT_REQUEST on the listener's channel.
func (p *Provider) onRequest(c *cm.ID, ev *cm.Event) error {
	var sid uint64
	var path cm.Path
	sidr := ev.Type == cm.EventSIDRREQReceived
	switch {
	case ev.Type == cm.EventREQReceived && ev.REQ != nil:
		sid, path = ev.REQ.ServiceID, ev.REQ.Path
	case sidr && ev.SIDRREQ != nil:
		sid, path = ev.SIDRREQ.ServiceID, ev.SIDRREQ.Path
	default:
		return nil
	}
	ps, port := uint16(sid>>16), uint16(sid)
	src, dst, ok := parseCmaHdr(ev.PrivateData, port)

	if !ok {
		return syscall.EINVAL
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var l *cmID
	for _, o := range p.binds[bindKey{ps, port}] {
		if o.state != stateListen || o.ch == nil {
			continue
		}
		if !o.src.isAny() && o.src.ip() == dst.ip() {
			l = o
			break
		}
		if o.src.isAny() && covers(o.src, dst, o.afOnly) && l == nil {
			l = o
		}
	}
	if l == nil || l.backlog <= 0 {
		return syscall.ECONNREFUSED
	}
	n := &cmID{ps: ps, qpType: l.qpType, state: stateConnect, src: dst, dst: src, device: true,
		path: path, hasRoute: true, seqNum: randPSN(), cmid: c, passive: true, listener: l,
		tos: l.tos, mcs: map[uint32]*mcast{}}
	n.path.SGID, n.path.DGID = dst.gid(), src.gid()
	if idx, ok := p.gidIndex(n.path.SGID); ok {
		n.path.SGIDIndex = uint8(idx)
	}
	if n.path.PacketLifeTime == 0 {
		n.path.PacketLifeTime = iboePacketLifeTime
	}
	c.SetContext(n)
	out := &event{id: l, newID: n, typ: EventConnectRequest}
	if sidr {
		putAHAttr(out.param[udAHAttr:], n.path)
		putUDData(out.param[:], ev.PrivateData[cmaHdrSize:])
	} else {
		r := ev.REQ
		n.peerQPN, n.peerPSN = r.RemoteQPN, r.StartingPSN
		// The cm has swapped the REQ's two numbers (cm_format_req_event):
		// ResponderResources is the requester's initiator depth, what
		// we may grant as responder; cma_set_req_event_data passes them
		// on as they are.
		n.respRes, n.initDepth = r.ResponderResources, r.InitiatorDepth
		n.retryCount, n.rnrRetry = r.RetryCount&7, r.RNRRetryCount&7
		n.ackTimeout = r.LocalACKTimeout
		putConnParam(out.param[:], ev.PrivateData[cmaHdrSize:], r.RemoteQPN, r.ResponderResources, r.InitiatorDepth,
			r.FlowControl, r.RetryCount, r.RNRRetryCount, r.SRQ)
	}
	l.backlog--
	l.ch.queue(out)
	p.log.Debug("connect request", zap.Uint64("service", sid), zap.Stringer("from", src.addr), zap.Time("at", time.Now()))
	return nil
}

// putConnParam writes struct rdma_ucm_conn_param for an event.
func putConnParam(b []byte, pd []byte, qpn uint32, respRes, initDepth uint8, fc bool, retry, rnr uint8, srq bool) {
	n := copy(b[cpPrivateData:cpPrivateData+PrivateDataMax], pd)
	b[cpPrivateDataLen] = uint8(n)
	le.PutUint32(b[cpQPN:], qpn)
	b[cpRespRes], b[cpInitDepth] = respRes, initDepth
	if fc {
		b[cpFlowControl] = 1
	}
	b[cpRetryCount], b[cpRNRRetryCount] = retry&7, rnr&7
	if srq {
		b[cpSRQ] = 1
	}
}

// putUDData writes the private data of struct rdma_ucm_ud_param.
func putUDData(b []byte, pd []byte) {
	n := copy(b[udPrivateData:udPrivateData+PrivateDataMax], pd)
	b[udPrivateDataLen] = uint8(n)
}

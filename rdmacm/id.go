package rdmacm

import (
	"errors"
	"math/rand/v2"
	"net"
	"syscall"

	"github.com/irdma-emu/irdma-emu/cm"
)

// cmState is enum rdma_cm_state (cma_priv.h).
type cmState uint8

const (
	stateIdle cmState = iota
	stateAddrQuery
	stateAddrResolved
	stateRouteQuery
	stateRouteResolved
	stateConnect
	stateDisconnect
	stateAddrBound
	stateListen
	stateDeviceRemoval
	stateDestroying
)

// cmID is one rdma_cm_id with its ucma context (struct ucma_context plus
// struct rdma_id_private).
type cmID struct {
	ch        *Channel // owner; nil while a CONNECT_REQUEST is not yet delivered
	handle    uint32
	hasHandle bool
	uid       uint64
	ps        uint16
	qpType    uint8
	state     cmState

	src, dst sockAddr
	bound    bool // holds a port binding in p.binds
	device   bool // bound to our device (a specific address, or resolved)

	tos        uint8
	tosSet     bool
	reuseAddr  bool
	afOnly     bool
	ackTimeout uint8 // RDMA_OPTION_ID_ACK_TIMEOUT; 0: from the path

	// route
	path     cm.Path
	hasRoute bool
	dmac     [6]byte

	backlog int
	events  int // events_reported

	seqNum uint32 // the starting PSN we send in REQ/REP: what our receive queue expects (cm.c)
	cmid   *cm.ID
	// What the connection exchange told us (REQ on the passive side, REP
	// on the active side) and what we sent.
	passive    bool
	peerQPN    uint32
	peerPSN    uint32 // the peer's REQ/REP starting PSN: where our send queue starts
	peerQKey   uint32
	respRes    uint8 // our max_dest_rd_atomic
	initDepth  uint8 // our max_rd_atomic
	retryCount uint8
	rnrRetry   uint8
	gotREP     bool
	listener   *cmID
	mcs        map[uint32]*mcast
}

// mcast is one multicast join of an id (struct ucma_multicast).
type mcast struct {
	id     *cmID
	handle uint32
	uid    uint64
	addr   sockAddr
	flags  uint16
	events int
}

// dispatch runs one command; the caller holds nothing.
func (ch *Channel) dispatch(cmd uint32, body []byte, out int) result {
	pad := func(n int) []byte {
		if len(body) >= n {
			return body[:n]
		}
		b := make([]byte, n)
		copy(b, body)
		return b
	}
	p := ch.p
	switch cmd {
	case CmdCreateID:
		return p.createID(ch, pad(sizeCreateID), out)
	case CmdDestroyID:
		return p.cmdDestroyID(ch, pad(sizeDestroyID), out)
	case CmdBindIP:
		b := pad(sizeBindIP)
		return p.cmdBind(ch, le.Uint32(b[36:]), b[8:36])
	case CmdBind:
		b := pad(sizeBind)
		size := int(le.Uint16(b[4:]))
		if le.Uint16(b[6:]) != 0 || size == 0 || size != addrSize(le.Uint16(b[8:])) {
			return result{err: syscall.EINVAL}
		}
		return p.cmdBind(ch, le.Uint32(b), b[8:8+size])
	case CmdResolveIP:
		b := pad(sizeResolveIP)
		return p.cmdResolveAddr(ch, le.Uint32(b[56:]), b[0:28], b[28:56], le.Uint32(b[60:]))
	case CmdResolveAddr:
		b := pad(sizeResolveAddr)
		ssize, dsize := int(le.Uint16(b[8:])), int(le.Uint16(b[10:]))
		if le.Uint32(b[12:]) != 0 || (ssize != 0 && ssize != addrSize(le.Uint16(b[16:]))) ||
			dsize == 0 || dsize != addrSize(le.Uint16(b[144:])) {
			return result{err: syscall.EINVAL}
		}
		return p.cmdResolveAddr(ch, le.Uint32(b), b[16:16+ssize], b[144:144+dsize], le.Uint32(b[4:]))
	case CmdResolveRoute:
		b := pad(sizeResolveRoute)
		return p.cmdResolveRoute(ch, le.Uint32(b))
	case CmdQueryRoute:
		b := pad(sizeQuery)
		return p.cmdQueryRoute(ch, le.Uint64(b), le.Uint32(b[8:]), out)
	case CmdQuery:
		b := pad(sizeQuery)
		return p.cmdQuery(ch, le.Uint64(b), le.Uint32(b[8:]), le.Uint32(b[12:]), out)
	case CmdConnect:
		b := pad(sizeConnect)
		return p.cmdConnect(ch, le.Uint32(b[272:]), b[0:sizeConnParam])
	case CmdListen:
		b := pad(sizeListen)
		return p.cmdListen(ch, le.Uint32(b), int32(le.Uint32(b[4:])))
	case CmdAccept:
		b := pad(sizeAccept)
		return p.cmdAccept(ch, le.Uint32(b[280:]), le.Uint64(b), b[8:8+sizeConnParam])
	case CmdReject:
		b := pad(sizeReject)
		n := int(b[4])
		if n > PrivateDataMax {
			n = PrivateDataMax
		}
		return p.cmdReject(ch, le.Uint32(b), b[5], b[8:8+n])
	case CmdDisconnect:
		b := pad(sizeDisconnect)
		return p.cmdDisconnect(ch, le.Uint32(b))
	case CmdInitQPAttr:
		b := pad(sizeInitQPAttr)
		return p.cmdInitQPAttr(ch, le.Uint64(b), le.Uint32(b[8:]), le.Uint32(b[12:]), out)
	case CmdGetEvent:
		b := pad(sizeGetEvent)
		return p.cmdGetEvent(ch, le.Uint64(b), out)
	case CmdSetOption:
		b := pad(sizeSetOption)
		return p.cmdSetOption(ch, le.Uint64(b), le.Uint32(b[8:]), le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[20:]))
	case CmdNotify:
		b := pad(sizeNotify)
		return p.cmdNotify(ch, le.Uint32(b), le.Uint32(b[4:]))
	case CmdJoinIPMcast:
		b := pad(sizeJoinIPMcast)
		fam := le.Uint16(b[16:])
		return p.cmdJoin(ch, le.Uint64(b), le.Uint64(b[8:]), le.Uint32(b[44:]), b[16:16+max(addrSize(fam), 2)], joinFullMember, out)
	case CmdJoinMcast:
		b := pad(sizeJoinMcast)
		size := int(le.Uint16(b[20:]))
		if size == 0 || size != addrSize(le.Uint16(b[24:])) {
			return result{err: syscall.EINVAL}
		}
		flags := le.Uint16(b[22:])
		if flags != joinFullMember && flags != joinSendOnlyFullMember {
			return result{err: syscall.EINVAL}
		}
		return p.cmdJoin(ch, le.Uint64(b), le.Uint64(b[8:]), le.Uint32(b[16:]), b[24:24+size], flags, out)
	case CmdLeaveMcast:
		b := pad(sizeDestroyID)
		return p.cmdLeave(ch, le.Uint64(b), le.Uint32(b[8:]), out)
	case CmdMigrateID:
		b := pad(sizeMigrateID)
		return p.cmdMigrate(ch, le.Uint64(b), le.Uint32(b[8:]), le.Uint32(b[12:]))
	case CmdWriteCMEvent:
		b := pad(sizeWriteCMEvent)
		return p.cmdWriteCMEvent(ch, le.Uint32(b), le.Uint32(b[8:]), int32(le.Uint32(b[12:])), le.Uint64(b[16:]))
	}
	return result{err: syscall.EINVAL}
}

// lookup is ucma_get_ctx: ENOENT for no such id, EINVAL for another
// channel's; p.mu held.
func (p *Provider) lookup(ch *Channel, handle uint32) (*cmID, error) {
	id := p.ids[handle]
	if id == nil || id.state == stateDestroying {
		return nil, syscall.ENOENT
	}
	if id.ch != ch {
		return nil, syscall.EINVAL
	}
	return id, nil
}

// CREATE_ID --------------------------------------------------------------

func (p *Provider) createID(ch *Channel, b []byte, out int) result {
	if out < sizeCreateIDResp {
		return result{err: syscall.ENOSPC}
	}
	uid, respAddr, ps, qpt := le.Uint64(b), le.Uint64(b[8:]), le.Uint16(b[16:]), b[18]
	// ucma_get_qp_type.
	switch ps {
	case PSTCP:
		qpt = qptRC
	case PSUDP, PSIPoIB:
		qpt = qptUD
	case PSIB:
		// AF_IB ids: created (the kernel allows it) but never bound,
		// so librdmacm's af_ib probe fails and it stays on the IP
		// commands (docs/cm.md "AF_IB").
	default:
		return result{err: syscall.EINVAL}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removing {
		return result{err: syscall.ENODEV}
	}
	id := &cmID{ch: ch, uid: uid, ps: ps, qpType: qpt, state: stateIdle, seqNum: randPSN(), mcs: map[uint32]*mcast{}}
	p.allocHandle(id)
	ch.ids[id.handle] = id
	resp := make([]byte, sizeCreateIDResp)
	le.PutUint32(resp, id.handle)
	return result{respAddr: respAddr, resp: resp, undo: func() {
		p.mu.Lock()
		delete(p.ids, id.handle)
		delete(ch.ids, id.handle)
		p.mu.Unlock()
	}}
}

// DESTROY_ID -------------------------------------------------------------

func (p *Provider) cmdDestroyID(ch *Channel, b []byte, out int) result {
	if out < sizeDestroyIDResp {
		return result{err: syscall.ENOSPC}
	}
	respAddr, handle := le.Uint64(b), le.Uint32(b[8:])
	p.mu.Lock()
	id := p.ids[handle]
	if id == nil {
		p.mu.Unlock()
		return result{err: syscall.ENOENT}
	}
	if id.ch != ch {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	n := id.events
	destroy := p.destroyLocked(id)
	p.mu.Unlock()
	for _, c := range destroy {
		c.Destroy()
	}
	p.dropUnusedListens()
	resp := make([]byte, sizeDestroyIDResp)
	le.PutUint32(resp, uint32(n))
	return result{respAddr: respAddr, resp: resp}
}

// destroyLocked removes id and what hangs on it (its queued events, the
// connection requests queued for it as a listener, its multicast joins,
// its port binding); it returns the CM ids to destroy once p.mu is
// released. p.mu held.
func (p *Provider) destroyLocked(id *cmID) []*cm.ID {
	out := p.releaseLocked(id)
	if id.ch != nil {
		for _, o := range id.ch.removeEvents(id, nil) {
			out = append(out, p.releaseLocked(o)...)
		}
		delete(id.ch.ids, id.handle)
	}
	if id.hasHandle {
		delete(p.ids, id.handle)
	}
	return out
}

// releaseLocked frees an id's resources but not its handle; p.mu held.
func (p *Provider) releaseLocked(id *cmID) []*cm.ID {
	id.state = stateDestroying
	var out []*cm.ID
	if id.cmid != nil {
		out = append(out, id.cmid)
		id.cmid = nil
	}
	for h, mc := range id.mcs {
		delete(p.mcs, h)
		delete(id.mcs, h)
		_ = mc
	}
	p.unbindLocked(id)
	return out
}

// BIND_IP, BIND ---------------------------------------------------------

func (p *Provider) cmdBind(ch *Channel, handle uint32, sa []byte) result {
	a, err := parseSockaddr(sa)
	if err != nil {
		return result{err: err}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	if id.state != stateIdle {
		return result{err: syscall.EINVAL}
	}
	if err := p.bindLocked(id, a); err != nil {
		return result{err: err}
	}
	id.state = stateAddrBound
	return result{}
}

// bindLocked is rdma_bind_addr: the address must be ours (or the
// wildcard), the port free in the id's port space (0: an ephemeral one,
// cma_alloc_any_port); p.mu held.
func (p *Provider) bindLocked(id *cmID, a sockAddr) error {
	if !a.isAny() {
		if !p.ownsAddr(a.ip()) {
			if hostHas(a.ip()) {
				return syscall.ENODEV // an address of a netdev that is not this device's
			}
			return syscall.EADDRNOTAVAIL
		}
	}
	if a.port == 0 {
		for range 64 {
			port := uint16(32768 + rand.IntN(60999-32768+1))
			if p.portFree(id, a, port) {
				a.port = port
				break
			}
		}
		if a.port == 0 {
			return syscall.EADDRNOTAVAIL
		}
	} else if !p.portFree(id, a, a.port) {
		return syscall.EADDRINUSE
	}
	id.src = a
	id.device = !a.isAny()
	k := bindKey{id.ps, a.port}
	p.binds[k] = append(p.binds[k], id)
	id.bound = true
	return nil
}

// portFree is cma_check_port: another id on the port conflicts when the
// addresses overlap (equal, or either is the wildcard of a family that
// covers the other) unless both set REUSEADDR and neither listens.
func (p *Provider) portFree(id *cmID, a sockAddr, port uint16) bool {
	for _, o := range p.binds[bindKey{id.ps, port}] {
		if o == id {
			continue
		}
		if id.reuseAddr && o.reuseAddr && o.state != stateListen {
			continue
		}
		if overlaps(a, o.src, id.afOnly || o.afOnly) {
			return false
		}
	}
	return true
}

// overlaps reports whether two bound addresses cover a common address.
func overlaps(a, b sockAddr, afOnly bool) bool {
	switch {
	case a.isAny() && b.isAny():
		return a.v6 == b.v6 || !afOnly
	case a.isAny():
		return covers(a, b, afOnly)
	case b.isAny():
		return covers(b, a, afOnly)
	}
	return a.ip() == b.ip()
}

// covers: the wildcard w covers the specific address s.
func covers(w, s sockAddr, afOnly bool) bool {
	if w.v6 {
		return s.v6 || !afOnly
	}
	return s.ip().Is4()
}

func (p *Provider) unbindLocked(id *cmID) {
	if !id.bound {
		return
	}
	k := bindKey{id.ps, id.src.port}
	l := p.binds[k]
	for i, o := range l {
		if o == id {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(p.binds, k)
	} else {
		p.binds[k] = l
	}
	id.bound = false
}

// hostHas reports whether some interface of the host has ip.
func hostHas(ip interface{ String() string }) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip.String() {
			return true
		}
	}
	return false
}

// errno maps a cm package error to the kernel's errno.
func errno(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cm.ErrInvalidState), errors.Is(err, cm.ErrPrivateDataTooLong):
		return syscall.EINVAL
	case errors.Is(err, cm.ErrBusy):
		return syscall.EADDRINUSE
	case errors.Is(err, cm.ErrDestroyed), errors.Is(err, cm.ErrClosed):
		return syscall.ENODEV
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

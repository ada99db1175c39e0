package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/cm"
)

// Route defaults on RoCE (cma.c cma_resolve_iboe_route): no subnet
// administrator; the path is built from the addresses, the GID table and
// the netdev.
const (
	// iboePacketLifeTime is CMA_IBOE_PACKET_LIFETIME, the IBTA time
	// exponent cma.c puts in a RoCE path record.
	iboePacketLifeTime = 16
	// defaultHopLimit is the hop limit of an IPv4 route (IPDEFTTL); the
	// port model does not read the route's own.
	defaultHopLimit = 64
	// defaultResolveTimeout bounds a neighbour lookup when the program
	// gives 0 ms.
	defaultResolveTimeout = 2 * time.Second
)

// RESOLVE_IP, RESOLVE_ADDR ------------------------------------------------

func (p *Provider) cmdResolveAddr(ch *Channel, handle uint32, srcB, dstB []byte, timeoutMS uint32) result {
	dst, err := parseSockaddr(dstB)
	if err != nil {
		return result{err: err}
	}
	var src sockAddr
	haveSrc := len(srcB) >= 2 && le.Uint16(srcB) != 0
	if haveSrc {
		if src, err = parseSockaddr(srcB); err != nil {
			return result{err: err}
		}
	}
	p.mu.Lock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		p.mu.Unlock()
		return result{err: err}
	}
	// rdma_resolve_addr: an unbound id is bound first (to src, or to the
	// wildcard of dst's family), then ADDR_BOUND → ADDR_QUERY.
	if id.state == stateIdle {
		if !haveSrc {
			src = sockAddr{v6: dst.v6}
			if dst.v6 {
				src.addr = netip.IPv6Unspecified()
			} else {
				src.addr = netip.IPv4Unspecified()
			}
		}
		if err := p.bindLocked(id, src); err != nil {
			p.mu.Unlock()
			return result{err: err}
		}
		id.state = stateAddrBound
	}
	if id.state != stateAddrBound {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	if dst.isAny() {
		p.mu.Unlock()
		return result{err: syscall.EINVAL}
	}
	id.state = stateAddrQuery
	id.dst = dst
	srcNow := id.src
	p.mu.Unlock()

	timeout := time.Duration(timeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultResolveTimeout
	}
	go p.resolveAddr(id, srcNow, dst, timeout)
	return result{}
}

// resolveAddr is addr_resolve's work: our source address for dst, then
// the next hop's MAC from the neighbour table (or our own for a
// destination on this device). The outcome is ADDR_RESOLVED or
// ADDR_ERROR with the kernel's negative errno.
func (p *Provider) resolveAddr(id *cmID, src, dst sockAddr, timeout time.Duration) {
	status := 0
	var mac [6]byte
	srcIP := src.ip()
	if src.isAny() {
		ip, ok := p.pickSource(dst.ip())
		if !ok {
			status = -int(syscall.ENETUNREACH)
		}
		srcIP = ip
	}
	if status == 0 {
		switch {
		case dst.ip().IsMulticast():
			mac = multicastMAC(dst.ip())
		default:
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			m, err := p.cfg.Resolve(ctx, dst.ip())
			cancel()
			switch {
			case err == nil:
				mac = m
			case ctx.Err() != nil:
				status = -int(syscall.ETIMEDOUT)
			default:
				var e syscall.Errno
				if errors.As(err, &e) {
					status = -int(e)
				} else {
					status = -int(syscall.EHOSTUNREACH)
				}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id.state != stateAddrQuery || id.ch == nil {
		return // destroyed meanwhile
	}
	ev := &event{id: id, typ: EventAddrResolved}
	if status != 0 {
		id.state = stateAddrBound
		ev.typ, ev.status = EventAddrError, int32(status)
	} else {
		id.state = stateAddrResolved
		id.src.addr = srcIP
		id.src.v6 = src.v6
		if !src.v6 && srcIP.Is6() && !srcIP.Is4In6() {
			id.src.v6 = true
		}
		id.device = true
		id.dmac = mac
	}
	id.ch.queue(ev)
}

// multicastMAC is the Ethernet address of an IP multicast group (RFC 1112
// §6.4, RFC 2464 §7), what ip_eth_mc_map / ipv6_eth_mc_map give.
func multicastMAC(ip netip.Addr) [6]byte {
	if ip.Is4() {
		a := ip.As4()
		return [6]byte{0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]}
	}
	a := ip.As16()
	return [6]byte{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// RESOLVE_ROUTE --------------------------------------------------------

func (p *Provider) cmdResolveRoute(ch *Channel, handle uint32) result {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	if id.state != stateAddrResolved {
		return result{err: syscall.EINVAL}
	}
	id.state = stateRouteQuery
	ev := &event{id: id, typ: EventRouteResolved}
	if err := p.buildRoute(id); err != nil {
		id.state = stateAddrResolved
		ev.typ, ev.status = EventRouteError, -int32(err.(syscall.Errno))
	} else {
		id.state = stateRouteResolved
	}
	id.ch.queue(ev)
	return result{}
}

// buildRoute is cma_resolve_iboe_route: SGID from the source address and
// its GID table index, DGID from the destination, P_Key 0xFFFF, the hop
// limit, the traffic class of RDMA_OPTION_ID_TOS, the path MTU of the
// netdev, the packet lifetime constant; p.mu held.
func (p *Provider) buildRoute(id *cmID) error {
	info := p.cfg.Port()
	sgid := id.src.gid()
	idx, ok := p.gidIndex(sgid)
	if !ok {
		return syscall.ENODEV
	}
	mtu := cm.MTU(info.ActiveMTU.Enum())
	if mtu == 0 {
		mtu = cm.MTU1024
	}
	id.path = cm.Path{SGID: sgid, DGID: id.dst.gid(), SGIDIndex: uint8(idx), TrafficClass: id.tos,
		HopLimit: defaultHopLimit, PKey: 0xffff, MTU: mtu, PacketLifeTime: iboePacketLifeTime, DMAC: id.dmac}
	if id.dst.ip().IsLinkLocalUnicast() {
		id.path.HopLimit = 1
	}
	id.hasRoute = true
	return nil
}

// QUERY_ROUTE ----------------------------------------------------------

func (p *Provider) cmdQueryRoute(ch *Channel, respAddr uint64, handle uint32, out int) result {
	if out < sizeQueryRouteResp {
		return result{err: syscall.ENOSPC}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	r := make([]byte, sizeQueryRouteResp)
	p.putAddrs(id, r[136:], r[164:])
	if id.device {
		be.PutUint64(r, p.cfg.NodeGUID)
		r[196] = 1 // port_num
		pr := r[8:72]
		if id.hasRoute {
			putPathRec(pr, id.path)
			le.PutUint32(r[192:], 1)
		} else {
			// ucma_copy_iboe_route with no path: the GIDs of the
			// addresses and the default P_Key.
			g := id.dst.gid()
			copy(pr[prDGID:], g[:])
			g = id.src.gid()
			copy(pr[prSGID:], g[:])
			be.PutUint16(pr[prPKey:], 0xffff)
		}
	}
	// ibdev_index: "not known", so librdmacm matches the verbs device by
	// node GUID alone (cma.c match()), whatever index libibverbs has.
	le.PutUint32(r[200:], 0xffffffff)
	return result{respAddr: respAddr, resp: r}
}

// putAddrs writes the id's source and destination as sockaddrs; an id
// without a destination reports the family of its source with zeros.
func (p *Provider) putAddrs(id *cmID, src, dst []byte) (int, int) {
	s := id.src
	if !s.addr.IsValid() {
		s = sockAddr{addr: netip.IPv4Unspecified()}
	}
	d := id.dst
	if !d.addr.IsValid() {
		d = sockAddr{v6: s.v6}
		if s.v6 {
			d.addr = netip.IPv6Unspecified()
		} else {
			d.addr = netip.IPv4Unspecified()
		}
	}
	return s.put(src), d.put(dst)
}

// putPathRec writes struct ib_user_path_rec (ib_copy_path_rec_to_user).
func putPathRec(b []byte, pa cm.Path) {
	copy(b[prDGID:], pa.DGID[:])
	copy(b[prSGID:], pa.SGID[:])
	be.PutUint32(b[prFlowLabel:], pa.FlowLabel)
	le.PutUint32(b[prReversible:], 1)
	le.PutUint32(b[prMTU:], uint32(pa.MTU))
	be.PutUint16(b[prPKey:], pa.PKey)
	b[prHopLimit] = pa.HopLimit
	b[prTrafficClass] = pa.TrafficClass
	b[prNumbPath] = 1
	b[prMTUSelector] = 2 // exactly
	b[prRateSelector] = 2
	b[prRate] = 16 // IB_RATE_100_GBPS
	b[prPLTSelector] = 2
	b[prPacketLife] = pa.PacketLifeTime
}

// QUERY (ADDR, GID, PATH) ----------------------------------------------

func (p *Provider) cmdQuery(ch *Channel, respAddr uint64, handle, option uint32, out int) result {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	switch option {
	case queryAddr, queryGID:
		if out < sizeQueryAddrResp {
			return result{err: syscall.ENOSPC}
		}
		r := make([]byte, sizeQueryAddrResp)
		if id.device {
			be.PutUint64(r, p.cfg.NodeGUID)
			r[8] = 1
			be.PutUint16(r[10:], 0xffff)
		}
		if option == queryAddr {
			s, d := p.putAddrs(id, r[16:], r[144:])
			le.PutUint16(r[12:], uint16(s))
			le.PutUint16(r[14:], uint16(d))
		} else {
			// sockaddr_ib: family, pkey, flowinfo, GID, service ID.
			for i, a := range []sockAddr{id.src, id.dst} {
				sib := r[16+128*i:]
				le.PutUint16(sib, afIB)
				be.PutUint16(sib[2:], 0xffff)
				g := a.gid()
				copy(sib[8:24], g[:])
				be.PutUint64(sib[24:], serviceID(id.ps, a.port))
				be.PutUint64(sib[32:], ^uint64(0))
			}
			le.PutUint16(r[12:], 48)
			le.PutUint16(r[14:], 48)
		}
		le.PutUint32(r[272:], 0xffffffff)
		return result{respAddr: respAddr, resp: r}
	case queryPath:
		if out < sizeQueryPathResp {
			return result{err: syscall.ENOSPC}
		}
		// The path in IBA SA wire format is not produced (docs/cm.md):
		// librdmacm asks for it only with AF_IB, which we refuse.
		return result{respAddr: respAddr, resp: make([]byte, sizeQueryPathResp)}
	}
	return result{err: syscall.ENOSYS}
}

// serviceID is cma_get_service_id: the port space in bits 16–31 and the
// port in bits 0–15 (RDMA_IB_IP_PS_TCP = 0x0000000001060000).
func serviceID(ps, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

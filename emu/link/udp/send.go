package udp

import (
	"encoding/binary"
	"errors"
	"net"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// txOOBSize holds the control messages a datagram carries: IP_TOS and
// IP_TTL, or IPV6_TCLASS and IPV6_HOPLIMIT (CMSG_SPACE(sizeof(int)) each),
// and UDP_SEGMENT on the first datagram of a GSO send (gso.go).
const txOOBSize = 48 + gsoCmsgSpace

// txSlot is the per-message state of one UDP datagram to send, kept
// across calls so that building a message allocates nothing.
type txSlot struct {
	bufs [1][]byte
	oob  [txOOBSize]byte
	ip   [16]byte
	addr net.UDPAddr
}

// txGroup collects the datagrams one socket sends in one call.
type txGroup struct {
	sock  *udpSock
	msgs  []ipv4.Message // one per datagram, in order (either family: mmsghdrs makes the sockaddr)
	slots []*txSlot

	// What is sent (planSends): out[k] carries segs[k] datagrams from
	// msgs[first[k]], as one GSO send when segs[k] > 1, whose buffers
	// are in iov.
	out   []ipv4.Message
	segs  []int
	first []int
	iov   [][]byte
	// shapes caches ICRC ID deltas for renumber.
	shapes    [4]wire.ICRCIDDeltas
	nextShape int

	// The sendmmsg(2) form of what is sent (mmsghdrs), and the call.
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // an IPv4 sockaddr fits too
	mm    *mmsg
}

// sendCtx is the state of one Send: the messages being built, per socket,
// and the packets to release once they are written. Contexts are pooled,
// so concurrent Sends do not share one and the steady state allocates
// nothing.
type sendCtx struct {
	groups []*txGroup // in use, in first-use order
	spare  []*txGroup
	pkts   []*link.Packet

	// Packet sending.
	pm     *mmsg
	phdrs  []unix.Mmsghdr
	piovs  []unix.Iovec
	pnames []unix.RawSockaddrLinklayer
}

func (l *Link) getCtx() *sendCtx {
	if c, ok := l.ctxs.Get().(*sendCtx); ok {
		return c
	}
	return &sendCtx{}
}

func (l *Link) putCtx(c *sendCtx) { l.ctxs.Put(c) }

// group returns the group of sock, starting one if needed.
func (c *sendCtx) group(sock *udpSock) *txGroup {
	for _, g := range c.groups {
		if g.sock == sock {
			return g
		}
	}
	var g *txGroup
	if n := len(c.spare); n > 0 {
		g = c.spare[n-1]
		c.spare[n-1] = nil
		c.spare = c.spare[:n-1]
	} else {
		g = &txGroup{}
	}
	g.sock = sock
	c.groups = append(c.groups, g)
	return g
}

// Send implements link.Link. It takes every packet; each is written with
// sendmmsg (one call per socket per batch of up to 1024) and released when
// the call returns. Nothing on this path returns an error except a closed
// link: send errors are loss, counted by reason.
func (l *Link) Send(pkts []*link.Packet) error {
	l.sendMu.RLock()
	defer l.sendMu.RUnlock()
	if l.closed.Load() {
		for _, p := range pkts {
			p.Release()
		}
		return net.ErrClosed
	}
	ctx := l.getCtx()
	now := l.clock.Now()
	for _, p := range pkts {
		if p != nil {
			l.stage(ctx, p, now)
		}
	}
	l.flush(ctx)
	l.putCtx(ctx)
	return nil
}

// txDrop counts p as dropped on send and releases it.
func (l *Link) txDrop(r Reason, p *link.Packet) {
	l.c.txDrops[r].Add(1)
	p.Release()
}

// ipLen returns the length of the IP packet inside an Ethernet frame of
// at least wire.EthernetSize bytes, skipping one 802.1Q tag.
func ipLen(frame []byte) int {
	n := len(frame) - wire.EthernetSize
	if binary.BigEndian.Uint16(frame[12:]) == wire.EtherTypeVLAN {
		n -= wire.VLANSize
	}
	return n
}

// route finds, for udp sending, the parts of frame and the socket bound to
// its source address.
func (l *Link) route(frame []byte) (located, *udpSock, Reason, bool) {
	loc, ok := locate(frame)
	if !ok {
		return located{}, nil, ReasonMalformed, false
	}
	sock := l.table.Load().lookup(loc.srcAddr(frame))
	if sock == nil {
		return located{}, nil, ReasonNoSocket, false
	}
	return loc, sock, 0, true
}

// stage checks one frame, runs the fault injector over it and adds what
// goes out now to ctx.
func (l *Link) stage(ctx *sendCtx, p *link.Packet, now time.Duration) {
	frame := p.Data
	switch {
	case !l.up.Load():
		l.txDrop(Reason(link.DropLinkDown), p)
		return
	case len(frame) < wire.EthernetSize:
		l.txDrop(Reason(link.DropRunt), p)
		return
	case ipLen(frame) > l.mtu:
		l.txDrop(Reason(link.DropTooBig), p)
		return
	}
	var loc located
	var sock *udpSock
	if l.ptx == nil {
		var r Reason
		var ok bool
		if loc, sock, r, ok = l.route(frame); !ok {
			l.txDrop(r, p)
			return
		}
		// Before any corruption, so that a corrupted frame stays bad.
		resealed, ok := loc.kernelHeaders(frame, sock.addr, sock.port)
		if !ok {
			l.txDrop(ReasonMalformed, p)
			return
		}
		if resealed {
			l.c.resealed.Add(1)
		}
	}
	l.c.txFrames.Add(1)
	l.c.txBytes.Add(uint64(len(frame)))
	if l.inj == nil {
		ctx.add(l, p, &loc, sock)
		return
	}

	v := l.inj.Decide(frame)
	if v.Drop {
		p.Release()
		return
	}
	var dup *link.Packet
	if v.Duplicate {
		// Copy before corrupting: the duplicate is the frame as sent.
		if dup = l.pool.Get(); dup == nil {
			l.c.txDrops[link.DropNoBuffer].Add(1)
		} else {
			dup.Data = dup.Buf()[:copy(dup.Buf(), frame)]
		}
	}
	if _, corrupt := v.Corrupts(); corrupt {
		v.ApplyCorruption(frame)
		if l.ptx == nil {
			// A corrupted IP or UDP header (corrupt_scope=frame) may
			// send the datagram elsewhere, or nowhere.
			var r Reason
			var ok bool
			if loc, sock, r, ok = l.route(frame); !ok {
				l.txDrop(r, p)
				p = nil
			}
		}
	}
	switch {
	case p == nil:
	case v.Reorder && l.hold != nil:
		if !l.hold.add(p, &v, now) {
			l.txDrop(Reason(link.DropClosed), p)
		}
	default:
		ctx.add(l, p, &loc, sock)
		if l.hold != nil {
			l.hold.overtake(l, ctx)
		}
	}
	if dup != nil {
		l.stageAgain(ctx, dup)
	}
}

// stageAgain adds a frame that has been through stage already (a held
// frame, a duplicate) to ctx, without faults.
func (l *Link) stageAgain(ctx *sendCtx, p *link.Packet) {
	if !l.up.Load() {
		l.txDrop(Reason(link.DropLinkDown), p)
		return
	}
	var loc located
	var sock *udpSock
	if l.ptx == nil {
		var r Reason
		var ok bool
		if loc, sock, r, ok = l.route(p.Data); !ok {
			l.txDrop(r, p)
			return
		}
	}
	ctx.add(l, p, &loc, sock)
}

// add appends one frame to ctx: as a datagram of its socket, or, in packet
// sending, as the frame itself.
func (c *sendCtx) add(l *Link, p *link.Packet, loc *located, sock *udpSock) {
	c.pkts = append(c.pkts, p)
	frame := p.Data
	if sock == nil {
		c.piovs = append(c.piovs, unix.Iovec{Base: &frame[0]})
		c.piovs[len(c.piovs)-1].SetLen(len(frame))
		c.pnames = append(c.pnames, unix.RawSockaddrLinklayer{
			Family:   unix.AF_PACKET,
			Protocol: htons(binary.BigEndian.Uint16(frame[12:])),
			Ifindex:  int32(l.ifindex),
		})
		c.phdrs = append(c.phdrs, unix.Mmsghdr{})
		return
	}
	g := c.group(sock)
	i := len(g.msgs)
	if i == len(g.slots) {
		g.slots = append(g.slots, &txSlot{})
	}
	s := g.slots[i]
	s.bufs[0] = frame[loc.payload : loc.payload+loc.payloadLen()]
	dst := loc.dstAddr(frame)
	if loc.v6 {
		a := dst.As16()
		copy(s.ip[:], a[:])
		s.addr.IP = s.ip[:16]
		s.addr.Zone = ""
		if dst.IsLinkLocalUnicast() {
			s.addr.Zone = l.zone
		}
	} else {
		a := dst.As4()
		copy(s.ip[:4], a[:])
		s.addr.IP = s.ip[:4]
		s.addr.Zone = ""
	}
	s.addr.Port = wire.RoCEv2Port
	n := putTxCmsgs(s.oob[:], loc.v6, loc.trafficClass(frame), loc.hopLimit(frame))
	g.msgs = append(g.msgs, ipv4.Message{Buffers: s.bufs[:], OOB: s.oob[:n], Addr: &s.addr})
}

// putTxCmsgs writes the per-datagram TOS/traffic class and TTL/hop limit
// as control messages (Linux ip_cmsg_send IP_TOS/IP_TTL, and
// ip6_datagram_send_ctl IPV6_TCLASS/IPV6_HOPLIMIT; TestPerPacketTOSTTL
// checks they reach the wire). A hop limit of 0 is left out, so the
// socket's default (64) applies: IP_TTL rejects 0 with EINVAL.
func putTxCmsgs(b []byte, v6 bool, tclass, hop uint8) int {
	lvl, tcT, hopT := int32(unix.IPPROTO_IP), int32(unix.IP_TOS), int32(unix.IP_TTL)
	if v6 {
		lvl, tcT, hopT = unix.IPPROTO_IPV6, unix.IPV6_TCLASS, unix.IPV6_HOPLIMIT
	}
	n := putCmsgInt(b, lvl, tcT, int32(tclass))
	if hop != 0 {
		n += putCmsgInt(b[n:], lvl, hopT, int32(hop))
	}
	return n
}

// putCmsgInt writes one control message carrying an int and returns its
// aligned size.
func putCmsgInt(b []byte, level, typ, v int32) int {
	binary.NativeEndian.PutUint32(putCmsgHeader(b, level, typ, 4), uint32(v))
	return unix.CmsgSpace(4)
}

// putCmsgHeader writes the header of a control message with n bytes of
// data, zeroes its aligned space, and returns the data's place.
func putCmsgHeader(b []byte, level, typ int32, n int) []byte {
	hdr := unix.CmsgLen(0)
	clear(b[:unix.CmsgSpace(n)])
	if unsafe.Sizeof(uintptr(0)) == 8 {
		binary.NativeEndian.PutUint64(b[0:8], uint64(unix.CmsgLen(n)))
	} else {
		binary.NativeEndian.PutUint32(b[0:4], uint32(unix.CmsgLen(n)))
	}
	binary.NativeEndian.PutUint32(b[hdr-8:], uint32(level))
	binary.NativeEndian.PutUint32(b[hdr-4:], uint32(typ))
	return b[hdr : hdr+n]
}

// flush writes everything staged in ctx and releases the packets.
func (l *Link) flush(ctx *sendCtx) {
	for _, g := range ctx.groups {
		l.writeUDP(g)
		for i := range g.msgs {
			g.slots[i].bufs[0] = nil
			g.msgs[i] = ipv4.Message{}
		}
		clear(g.out)
		clear(g.iov)
		g.msgs = g.msgs[:0]
		g.sock = nil
		ctx.spare = append(ctx.spare, g)
	}
	clear(ctx.groups)
	ctx.groups = ctx.groups[:0]
	if len(ctx.phdrs) > 0 {
		l.writePacket(ctx)
		clear(ctx.piovs)
		ctx.piovs, ctx.pnames, ctx.phdrs = ctx.piovs[:0], ctx.pnames[:0], ctx.phdrs[:0]
	}
	for _, p := range ctx.pkts {
		p.Release()
	}
	clear(ctx.pkts)
	ctx.pkts = ctx.pkts[:0]
}

// writeUDP sends a group's datagrams, runs of them as GSO sends where
// they can (planSends).
func (l *Link) writeUDP(g *txGroup) {
	l.planSends(g)
	l.sendMsgs(g, g.out, g.segs)
}

// sendMsgs sends msgs with sendmmsg (mmsg.sendVia, without the socket's
// write lock), looping on partial writes (wireguard-go StdNetBind.send)
// past the message that stopped the call (see sent); msgs[k] carries
// segs[k] datagrams (segs nil: one each). A GSO send the kernel refuses is
// sent again datagram by datagram (gsoFallback). MSG_DONTWAIT: a full
// socket buffer is a full transmit queue and drops, rather than parking a
// device worker that serves other QPs.
func (l *Link) sendMsgs(g *txGroup, msgs []ipv4.Message, segs []int) {
	if g.mm == nil {
		g.mm = newMmsg(nil, false)
	}
	for i := 0; i < len(msgs); {
		end := min(len(msgs), i+maxBatch)
		n, err := g.mm.sendVia(g.sock.raw, g.mmsghdrs(msgs[i:end], g.sock.v4, uint32(l.ifindex)))
		g.clearMmsghdrs()
		if n > 0 {
			if segs != nil {
				l.countGSO(segs, i, n)
			}
			i += l.sent(n, end-i, segs, i)
			continue
		}
		if segs != nil && segs[i] > 1 && gsoRefused(err) {
			l.gsoFallback(g, i, err)
			i++
			continue
		}
		i += l.sendFailed(err, len(msgs)-i, segs, i)
	}
}

// mmsghdrs returns msgs as sendmmsg's message headers, built in g's
// arrays (grown once, then reused): each message's buffers as its iovecs,
// its control messages, and its destination as a sockaddr of the
// socket's family (v4), with the link's ifindex as the scope of a zoned
// (link-local) IPv6 destination.
func (g *txGroup) mmsghdrs(msgs []ipv4.Message, v4 bool, scope uint32) []unix.Mmsghdr {
	niov := 0
	for i := range msgs {
		niov += len(msgs[i].Buffers)
	}
	g.hdrs = grown(g.hdrs, len(msgs))
	g.iovs = grown(g.iovs, niov)
	g.names = grown(g.names, len(msgs))
	k := 0
	for i := range msgs {
		m := &msgs[i]
		h := &g.hdrs[i]
		*h = unix.Mmsghdr{}
		iov := g.iovs[k : k+len(m.Buffers)]
		k += len(m.Buffers)
		for j, b := range m.Buffers {
			iov[j] = unix.Iovec{}
			if len(b) > 0 {
				iov[j].Base = &b[0]
				iov[j].SetLen(len(b))
			}
		}
		if len(iov) > 0 {
			h.Hdr.Iov = &iov[0]
			h.Hdr.SetIovlen(len(iov))
		}
		if len(m.OOB) > 0 {
			h.Hdr.Control = &m.OOB[0]
			h.Hdr.SetControllen(len(m.OOB))
		}
		if a, ok := m.Addr.(*net.UDPAddr); ok {
			h.Hdr.Name = (*byte)(unsafe.Pointer(&g.names[i]))
			h.Hdr.Namelen = putSockaddr(&g.names[i], a, v4, scope)
		}
	}
	return g.hdrs[:len(msgs)]
}

// clearMmsghdrs drops the pointers the last mmsghdrs left into the
// packets' buffers.
func (g *txGroup) clearMmsghdrs() {
	clear(g.hdrs)
	clear(g.iovs)
}

// putSockaddr writes a as a sockaddr_in (v4) or sockaddr_in6 into sa and
// returns its length.
func putSockaddr(sa *unix.RawSockaddrInet6, a *net.UDPAddr, v4 bool, scope uint32) uint32 {
	if v4 {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET}
		copy(s4.Addr[:], a.IP.To4())
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], uint16(a.Port))
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6}
	copy(sa.Addr[:], a.IP.To16())
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(a.Port))
	if a.Zone != "" {
		sa.Scope_id = scope
	}
	return unix.SizeofSockaddrInet6
}

// grown returns s with length n, reallocated only when its capacity is
// short.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/2)
	}
	return s[:n]
}

// frames returns how many datagrams msgs [i, i+n) carry (segs nil: one
// each).
func frames(segs []int, i, n int) uint64 {
	if segs == nil {
		return uint64(n)
	}
	var f int
	for _, s := range segs[i : i+n] {
		f += s
	}
	return uint64(f)
}

// sent counts a sendmmsg call that sent n of want messages, starting at
// message i, and returns how many to move past: a partial call stopped at
// a message that failed (ReasonUnreported), whose datagrams are lost too.
func (l *Link) sent(n, want int, segs []int, i int) int {
	l.c.sendCalls.Add(1)
	if n >= want {
		return n
	}
	l.c.partial.Add(1)
	l.c.txDrops[ReasonUnreported].Add(frames(segs, i+n, 1))
	return n + 1
}

// writePacket sends the frames staged for the AF_PACKET socket.
func (l *Link) writePacket(ctx *sendCtx) {
	if ctx.pm == nil {
		ctx.pm = newMmsg(l.ptx.raw, false)
	}
	// The slices have stopped growing: point the headers at them now.
	for i := range ctx.phdrs {
		h := &ctx.phdrs[i].Hdr
		h.Iov = &ctx.piovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&ctx.pnames[i]))
		h.Namelen = unix.SizeofSockaddrLinklayer
	}
	hdrs := ctx.phdrs
	for i := 0; i < len(hdrs); {
		end := min(len(hdrs), i+maxBatch)
		n, err := ctx.pm.send(hdrs[i:end])
		if n > 0 {
			i += l.sent(n, end-i, nil, i)
			continue
		}
		i += l.sendFailed(err, len(hdrs)-i, nil, i)
	}
	for i := range ctx.phdrs {
		ctx.phdrs[i] = unix.Mmsghdr{}
	}
}

// sendFailed counts a failed send of the first of rest messages, message
// i of segs (nil: one datagram each), and returns how many of them to give
// up: one for errors that concern that message, all for a closed socket or
// a full queue; the count is of their datagrams.
func (l *Link) sendFailed(err error, rest int, segs []int, i int) int {
	var r Reason
	skip := 1
	switch {
	case err == nil:
		// No message sent and no error: never seen; give up on the
		// message so that the loop always advances.
		r = ReasonSendError
	case isClosed(err):
		r, skip = Reason(link.DropClosed), rest
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOBUFS):
		r, skip = Reason(link.DropQueueFull), rest
	case errors.Is(err, unix.EPERM):
		// A netfilter drop in an output chain (measured: docs/interop.md
		// "Measured: the guest's network and what rxe accepts"): loss.
		r = ReasonFiltered
	case errors.Is(err, unix.EMSGSIZE):
		r = Reason(link.DropTooBig)
	case errors.Is(err, unix.ENETDOWN):
		r = Reason(link.DropLinkDown)
	default:
		r = ReasonSendError
	}
	lost := frames(segs, i, skip)
	if n := l.c.txDrops[r].Add(lost); n == lost && r != Reason(link.DropClosed) {
		// The first of its kind is worth a line; the counters tell the
		// rest.
		l.log.Warn("send failed; counted as loss", zap.Stringer("reason", r), zap.Error(err))
	}
	return skip
}

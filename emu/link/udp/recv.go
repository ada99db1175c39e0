package udp

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// rxKind is what a receive ring reads from.
type rxKind uint8

const (
	rxUDP4   rxKind = iota // an IPv4 UDP socket: payloads, headers rebuilt
	rxUDP6                 // an IPv6 UDP socket
	rxPacket               // the AF_PACKET socket: IP packets, Ethernet rebuilt
)

// Sizes of the per-message receive areas.
const (
	// rxOOBSize holds the control messages asked for: IPv4 IP_PKTINFO (32
	// bytes with its header), IP_TTL (24), IP_TOS (24); IPv6
	// IPV6_PKTINFO (40), IPV6_HOPLIMIT (24), IPV6_TCLASS (24);
	// SO_RXQ_OVFL (24); and UDP_GRO (24).
	rxOOBSize = 152
	// rxNameSize holds a sockaddr_in6 (28 bytes) or a sockaddr_ll (20).
	rxNameSize = 32
)

// rxRing keeps a batch of pool packets posted to one socket and reads
// into them with recvmmsg: each datagram lands at a fixed headroom, the
// link writes the headers in front and hands the batch to the Receiver,
// then posts fresh packets in place of those handed on. When the pool is
// empty a datagram lands in a scratch buffer and, unless a buffer has come
// back meanwhile (it is then copied into it), is counted
// (link.DropNoBuffer), as a NIC without free receive descriptors drops.
type rxRing struct {
	l        *Link
	kind     rxKind
	sock     *udpSock // the UDP socket read (rxUDP4, rxUDP6)
	m        *mmsg
	headroom int // where the datagram (UDP) or the IP header (packet) ends up
	iovOff   int // where the posted packet's iovec starts in its buffer

	hdrs    []unix.Mmsghdr
	iovs    []unix.Iovec // iovPer per message: [vnet,] packet, overflow
	iovPer  int
	names   []byte // rxNameSize per message
	oob     []byte // rxOOBSize per message
	vnet    []byte // vnetHdrSize per message (rxPacket)
	over    []byte // overflowSize per message: the rest of a GSO datagram
	posted  []*link.Packet
	scratch *link.Packet
	batch   []*link.Packet
	extra   []*link.Packet // frames cut from one datagram after its first

	stopped atomic.Bool
	done    chan struct{} // closed when run returns
	drops   uint32        // the last SO_RXQ_OVFL count seen
}

func newRxRing(l *Link, kind rxKind, s *udpSock, raw syscall.RawConn) *rxRing {
	n := l.batch
	r := &rxRing{
		l:        l,
		kind:     kind,
		sock:     s,
		m:        newMmsg(raw, l.mode.WaitInPoller),
		headroom: udpHeadroom,
		iovOff:   udpHeadroom,
		iovPer:   2,
		hdrs:     make([]unix.Mmsghdr, n),
		names:    make([]byte, n*rxNameSize),
		oob:      make([]byte, n*rxOOBSize),
		over:     make([]byte, n*overflowSize),
		posted:   make([]*link.Packet, n),
		scratch:  new(link.Packet),
		batch:    make([]*link.Packet, 0, n),
		done:     make(chan struct{}),
	}
	if kind == rxPacket {
		// SOCK_RAW: the link-layer header lands in front of the IP
		// header, which then starts where buildPacket wants it for
		// Ethernet and loopback (packetHeadroom).
		r.headroom, r.iovOff, r.iovPer = packetHeadroom, 0, 3
		r.vnet = make([]byte, n*vnetHdrSize)
	}
	r.iovs = make([]unix.Iovec, n*r.iovPer)
	for i := range n {
		iov := r.iovs[i*r.iovPer:]
		if kind == rxPacket {
			iov[0].Base = &r.vnet[i*vnetHdrSize]
			iov[0].SetLen(vnetHdrSize)
			iov = iov[1:]
		}
		iov[1].Base = &r.over[i*overflowSize]
		iov[1].SetLen(overflowSize)
	}
	return r
}

// packetIov returns the iovec of slot i that points into its posted
// packet.
func (r *rxRing) packetIov(i int) *unix.Iovec {
	if r.kind == rxPacket {
		return &r.iovs[i*r.iovPer+1]
	}
	return &r.iovs[i*r.iovPer]
}

// poolPart is how many bytes of a datagram (after the virtio header) land
// in the posted packet; the rest land in the slot's overflow area.
func (r *rxRing) poolPart() int { return link.BufferSize - r.iovOff }

// stop marks the ring as stopping before its socket is closed, so that
// the error the closed socket returns ends the loop whatever its wording.
func (r *rxRing) stop() {
	if r != nil {
		r.stopped.Store(true)
		r.m.wakeUp() // before the socket closes: Close waits for the wait
	}
}

// refill posts a packet in every empty slot and resets the lengths the
// kernel rewrote. It returns how many slots to read into: when the pool
// runs dry, the slot that found it dry gets the scratch buffer and is the
// last one read this time, so that at most one datagram per read can miss
// a buffer.
func (r *rxRing) refill() int {
	for i := range r.posted {
		p := r.posted[i]
		last := false
		if p == nil || p == r.scratch {
			if q := r.l.pool.Get(); q != nil {
				p = q
			} else {
				p, last = r.scratch, true
			}
			r.posted[i] = p
			buf := p.Buf()
			iov := r.packetIov(i)
			iov.Base = &buf[r.iovOff]
			iov.SetLen(len(buf) - r.iovOff)
		}
		h := &r.hdrs[i].Hdr
		h.Iov = &r.iovs[i*r.iovPer]
		h.SetIovlen(r.iovPer)
		h.Name = &r.names[i*rxNameSize]
		h.Namelen = rxNameSize
		h.Control = &r.oob[i*rxOOBSize]
		h.SetControllen(rxOOBSize)
		h.Flags = 0
		r.hdrs[i].Len = 0
		if last {
			return i + 1
		}
	}
	return len(r.posted)
}

// releasePosted returns the posted packets to the pool when the ring
// stops.
func (r *rxRing) releasePosted() {
	for i, p := range r.posted {
		if p != r.scratch {
			p.Release()
		}
		r.posted[i] = nil
		r.packetIov(i).Base = nil
	}
}

// run is the ring's goroutine: read, rebuild, deliver, until the socket is
// closed. Errors other than closing are counted and retried after a short
// pause, so that a persistent one cannot spin a core.
func (r *rxRing) run() {
	defer r.l.wg.Done()
	defer close(r.done)
	defer r.releasePosted()
	defer r.m.closeWake()
	errs := 0
	for {
		vlen := r.refill()
		n, err := r.m.recv(r.hdrs[:vlen])
		if err != nil {
			if r.stopped.Load() || isClosed(err) {
				return
			}
			errs++
			if errs == 1 || errs%1000 == 0 {
				r.l.log.Warn("recvmmsg failed", zap.Error(err), zap.Int("count", errs))
			}
			time.Sleep(time.Millisecond)
			continue
		}
		r.l.c.recvCalls.Add(1)
		now := r.l.clock.Now()
		batch := r.batch[:0]
		for i := range n {
			p := r.posted[i]
			if p == r.scratch {
				// The pool was dry when this slot was posted; the
				// device may have returned buffers while the read
				// waited.
				q := r.l.pool.Get()
				if q == nil {
					r.l.c.rxDrops[link.DropNoBuffer].Add(1)
					continue
				}
				end := r.iovOff + min(int(r.hdrs[i].Len), r.poolPart())
				copy(q.Buf()[r.iovOff:end], p.Buf()[r.iovOff:end])
				p = q
			}
			ok := r.build(i, p)
			if ok {
				p.Time = now
				batch = r.add(batch, p)
				if p == r.posted[i] {
					r.posted[i] = nil
				}
			} else if p != r.posted[i] {
				p.Release()
			} // else the slot keeps its packet
			for _, q := range r.extra {
				q.Time = now
				batch = r.add(batch, q)
			}
			clear(r.extra)
			r.extra = r.extra[:0]
		}
		if len(batch) > 0 {
			r.l.deliver(batch)
			clear(batch)
		}
	}
}

// add appends p to batch, delivering the batch first when it is full: a
// datagram cut into frames can make more than a batch.
func (r *rxRing) add(batch []*link.Packet, p *link.Packet) []*link.Packet {
	if len(batch) == cap(batch) {
		r.l.deliver(batch)
		clear(batch)
		batch = batch[:0]
	}
	return append(batch, p)
}

// build turns message i into a whole frame in p and sets its ICRC
// status, or counts why not and returns false. A datagram that carries
// several frames (gro.go) leaves the frames after the first in r.extra.
func (r *rxRing) build(i int, p *link.Packet) bool {
	h := &r.hdrs[i]
	n := int(h.Len)
	if h.Hdr.Flags&unix.MSG_TRUNC != 0 {
		r.l.c.rxDrops[ReasonTruncated].Add(1)
		return false
	}
	name := r.names[i*rxNameSize : (i+1)*rxNameSize]
	oob := r.oob[i*rxOOBSize : i*rxOOBSize+min(int(h.Hdr.Controllen), rxOOBSize)]
	var m rxMeta
	if r.sock != nil {
		m.dst = r.sock.addr
	}
	parseCmsgs(oob, r.kind == rxUDP6, &m)
	r.countOverflow(&m)
	if r.kind != rxPacket {
		return r.buildUDPMsg(i, p, n, name, &m)
	}
	if n < vnetHdrSize {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	return r.buildPacketMsg(i, p, n-vnetHdrSize, name)
}

// rxMeta is what the control messages of a datagram say about its IP
// header, and the socket's overflow count.
type rxMeta struct {
	dst      netip.Addr
	tclass   uint8
	hopLimit uint8
	drops    uint32
	hasDrops bool
	gro      int // UDP_GRO: the size of each frame of a coalesced datagram
}

// countOverflow turns the socket's cumulative drop count (SO_RXQ_OVFL,
// a u32 that wraps) into ReasonOverflow drops.
func (r *rxRing) countOverflow(m *rxMeta) {
	if m.hasDrops && m.drops != r.drops {
		r.l.c.rxDrops[ReasonOverflow].Add(uint64(m.drops - r.drops))
		r.drops = m.drops
	}
}

// parseCmsgs reads the control messages of one datagram without
// allocating (x/net's ControlMessage.Parse allocates).
func parseCmsgs(b []byte, v6 bool, m *rxMeta) {
	hdr := unix.CmsgLen(0) // the aligned cmsghdr size
	for len(b) >= hdr {
		l := int(binary.NativeEndian.Uint64(b[0:8]))
		if unsafe.Sizeof(uintptr(0)) == 4 {
			l = int(binary.NativeEndian.Uint32(b[0:4]))
		}
		level := int32(binary.NativeEndian.Uint32(b[hdr-8:]))
		typ := int32(binary.NativeEndian.Uint32(b[hdr-4:]))
		if l < hdr || l > len(b) {
			return
		}
		data := b[hdr:l]
		switch {
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4:
			m.drops, m.hasDrops = binary.NativeEndian.Uint32(data), true
		case level == unix.IPPROTO_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			m.gro = int(binary.NativeEndian.Uint32(data))
		case !v6 && level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: ifindex, spec_dst, addr (the header's
			// destination address).
			m.dst = netip.AddrFrom4([4]byte(data[8:12]))
		case !v6 && level == unix.IPPROTO_IP && typ == unix.IP_TTL && len(data) >= 4:
			m.hopLimit = uint8(binary.NativeEndian.Uint32(data))
		case !v6 && level == unix.IPPROTO_IP && typ == unix.IP_TOS && len(data) >= 1:
			// One byte: ip_cmsg_recv_tos puts the TOS as a u8.
			m.tclass = data[0]
		case v6 && level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			m.dst = netip.AddrFrom16([16]byte(data[0:16]))
		case v6 && level == unix.IPPROTO_IPV6 && typ == unix.IPV6_HOPLIMIT && len(data) >= 4:
			m.hopLimit = uint8(binary.NativeEndian.Uint32(data))
		case v6 && level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && len(data) >= 4:
			m.tclass = uint8(binary.NativeEndian.Uint32(data))
		}
		b = b[min(cmsgAlign(l), len(b)):]
	}
}

func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}

// buildUDP4 writes Ethernet, IPv4 and UDP headers in front of an IPv4
// datagram of n bytes. The socket does not reveal the IP ID, the flags or
// any options: the header is the one our own senders produce (DF, no
// options, ID 0, or id for the frame cut at that place from a GSO send,
// gso.go), and the ICRC computed over it is good if the sender was one of
// them; otherwise the ICRC cannot be checked (rxe uses non-zero IDs), and
// the frame is passed on as unverifiable.
func (r *rxRing) buildUDP4(p *link.Packet, n int, name []byte, m *rxMeta, id uint16) bool {
	if n < wire.MinPacketSize || binary.NativeEndian.Uint16(name[0:2]) != unix.AF_INET {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	src := netip.AddrFrom4([4]byte(name[4:8]))
	sport := binary.BigEndian.Uint16(name[2:4])

	buf := p.Buf()
	start := r.headroom - (wire.EthernetSize + wire.IPv4MinimumSize + wire.UDPSize)
	wire.Ethernet(buf[start:]).Encode(&wire.EthernetFields{Dst: r.l.mac, EtherType: wire.EtherTypeIPv4})
	ipOff := start + wire.EthernetSize
	ip := wire.IPv4(buf[ipOff : ipOff+wire.IPv4MinimumSize])
	ip.Encode(&wire.IPv4Fields{
		TOS:         m.tclass,
		TotalLength: uint16(wire.IPv4MinimumSize + wire.UDPSize + n),
		ID:          id,
		DF:          true,
		TTL:         m.hopLimit,
		Protocol:    wire.IPProtocolUDP,
		Src:         src,
		Dst:         m.dst,
	})
	ip.SetChecksum(ip.CalculateChecksum())
	udp := wire.UDP(buf[ipOff+wire.IPv4MinimumSize : r.headroom])
	udp.Encode(&wire.UDPFields{SrcPort: sport, DstPort: r.sock.port, Length: uint16(wire.UDPSize + n)})
	pkt := buf[r.headroom : r.headroom+n]
	p.Data = buf[start : r.headroom+n]
	stored := binary.LittleEndian.Uint32(pkt[n-wire.ICRCSize:])
	p.ICRC = link.ICRCUnverifiable
	if wire.ICRCIPv4(ip, udp, pkt) == stored {
		p.ICRC = link.ICRCGood
	} else if id != 0 {
		// Frames of one sender that GRO coalesced, each sent alone
		// with ID 0 (gso=off, or a sender with no GSO).
		ip.SetID(0)
		ip.SetChecksum(ip.CalculateChecksum())
		if wire.ICRCIPv4(ip, udp, pkt) == stored {
			p.ICRC = link.ICRCGood
		}
	}
	return true
}

// buildUDP6 is buildUDP4 for IPv6, where every field the ICRC covers is
// known (traffic class, flow label and hop limit are masked), so the ICRC
// is always checked. The flow label is written as 0.
func (r *rxRing) buildUDP6(p *link.Packet, n int, name []byte, m *rxMeta) bool {
	if n < wire.MinPacketSize || binary.NativeEndian.Uint16(name[0:2]) != unix.AF_INET6 {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	src := netip.AddrFrom16([16]byte(name[8:24]))
	sport := binary.BigEndian.Uint16(name[2:4])

	buf := p.Buf()
	start := 0 // the headroom is exactly Ethernet + IPv6 + UDP
	wire.Ethernet(buf[start:]).Encode(&wire.EthernetFields{Dst: r.l.mac, EtherType: wire.EtherTypeIPv6})
	ipOff := start + wire.EthernetSize
	ip := wire.IPv6(buf[ipOff : ipOff+wire.IPv6Size])
	ip.Encode(&wire.IPv6Fields{
		TrafficClass:  m.tclass,
		PayloadLength: uint16(wire.UDPSize + n),
		NextHeader:    wire.IPProtocolUDP,
		HopLimit:      m.hopLimit,
		Src:           src,
		Dst:           m.dst,
	})
	udp := wire.UDP(buf[ipOff+wire.IPv6Size : r.headroom])
	udp.Encode(&wire.UDPFields{SrcPort: sport, DstPort: r.sock.port, Length: uint16(wire.UDPSize + n)})
	pkt := buf[r.headroom : r.headroom+n]
	p.Data = buf[start : r.headroom+n]
	if wire.ICRCIPv6(ip, udp, pkt) == binary.LittleEndian.Uint32(pkt[n-wire.ICRCSize:]) {
		p.ICRC = link.ICRCGood
	} else {
		p.ICRC = link.ICRCBad
	}
	return true
}

// buildPacket writes an Ethernet header in front of an IP packet read from
// the AF_PACKET socket: our MAC as destination, the sender's from the
// sockaddr_ll as source, the EtherType from its protocol. Everything the
// ICRC covers is as it was on the wire, so the ICRC is always checked.
func (r *rxRing) buildPacket(p *link.Packet, n int, name []byte) bool {
	// struct sockaddr_ll: family, protocol (big-endian), ifindex, hatype,
	// pkttype, halen, addr[8].
	if binary.NativeEndian.Uint16(name[0:2]) != unix.AF_PACKET {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	if name[10] == unix.PACKET_OUTGOING {
		// Our own frame leaving (on loopback also seen arriving);
		// PACKET_IGNORE_OUTGOING and the filter keep these out already.
		return false
	}
	buf := p.Buf()
	eth := wire.Ethernet(buf[:wire.EthernetSize])
	var src wire.MAC
	if name[11] == 6 {
		src = wire.MAC(name[12:18])
	}
	eth.Encode(&wire.EthernetFields{Dst: r.l.mac, Src: src, EtherType: binary.BigEndian.Uint16(name[2:4])})
	frame := buf[:r.headroom+n]
	loc, ok := locate(frame)
	if !ok {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	if r.l.table.Load().lookup(loc.dstAddr(frame)) == nil {
		// Not for this port: the filter leaves the address test out
		// when the port has too many addresses.
		return false
	}
	// Drop what follows the IP packet (Ethernet padding of short frames).
	p.Data = frame[:loc.end]
	if loc.icrc(frame) == loc.storedICRC(frame) {
		p.ICRC = link.ICRCGood
	} else {
		p.ICRC = link.ICRCBad
	}
	return true
}

// deliver hands a batch to the Receiver, or drops it (link down, no
// receiver). It runs in the receive goroutines, one at a time.
func (l *Link) deliver(batch []*link.Packet) {
	l.deliverMu.Lock()
	defer l.deliverMu.Unlock()
	reason := -1
	var r link.Receiver
	switch {
	case !l.up.Load():
		reason = int(link.DropLinkDown)
	default:
		if r = l.receiver(); r == nil {
			reason = int(link.DropNoReceiver)
		}
	}
	if reason >= 0 {
		l.c.rxDrops[reason].Add(uint64(len(batch)))
		for _, p := range batch {
			p.Release()
		}
		return
	}
	var bytes uint64
	var st [4]uint64
	for _, p := range batch {
		bytes += uint64(len(p.Data))
		st[p.ICRC&3]++
	}
	l.c.rxFrames.Add(uint64(len(batch)))
	l.c.rxBytes.Add(bytes)
	for s, v := range st {
		if v != 0 {
			l.c.icrc[s].Add(v)
		}
	}
	r.Receive(batch)
}

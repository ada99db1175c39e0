package udp

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Datagrams that carry several frames, on the receive path.
//
// A GSO send (gso.go) of another daemon on this host reaches a receiver
// on loopback or veth uncut: the kernel cuts it at the receiving UDP
// socket only when that socket has not asked for UDP_GRO, and an AF_PACKET
// socket always sees it whole, one IP packet of up to 64 KiB. The link
// takes it whole and cuts it into its frames itself, which costs the
// kernel one skb instead of one per frame:
//
//   - UDP sockets set UDP_GRO; a coalesced datagram comes with a UDP_GRO
//     control message giving the size of each frame but the last
//     (udp_cmsg_recv). On a NIC or veth with GRO, datagrams sent one by
//     one may be coalesced the same way (udp_gro_receive_segment).
//   - The packet socket is SOCK_RAW with PACKET_VNET_HDR (af_packet.c
//     allows it on raw sockets only), so each packet comes after a
//     struct virtio_net_hdr whose gso_type and gso_size say how the
//     kernel would have cut it (virtio_net_hdr_from_skb; UDP_L4 since
//     Linux 6.2).
//
// The first part of a datagram lands in the posted pool packet, the rest
// in the slot's overflow area; the frames after the first are copied into
// packets of their own, each with the IP and UDP headers the kernel would
// have written for it: its length, and for IPv4 the ID of the first frame
// plus its index (af_inet.c inet_gso_segment), which the ICRC covers.

const (
	// vnetHdrSize is sizeof(struct virtio_net_hdr), without the
	// mergeable-buffers count.
	vnetHdrSize = 10
	// overflowSize holds the rest of the largest datagram, 64 KiB of IP
	// packet, past the posted packet.
	overflowSize = 64 << 10

	// virtio_net_hdr gso_type values (include/uapi/linux/virtio_net.h).
	vnetGSONone  = 0
	vnetGSOUDPL4 = 5

	// ARPHRD types whose link-layer header is Ethernet's 14 bytes, and
	// those of IP devices with none (include/uapi/linux/if_arp.h).
	arphrdEther    = 1
	arphrdLoopback = 772
	arphrdNone     = 0xfffe
	arphrdRawIP    = 519
	arphrdTunnel   = 768
	arphrdTunnel6  = 769
	arphrdIPGRE    = 778
	arphrdSit      = 776
)

// copyOut copies datagram bytes [off, off+len(dst)) of slot i, whose
// first part is in p from r.iovOff and the rest in the slot's overflow
// area, into dst.
func (r *rxRing) copyOut(i int, p *link.Packet, dst []byte, off int) {
	first := r.poolPart()
	if off < first {
		n := copy(dst, p.Buf()[r.iovOff+off:])
		dst, off = dst[n:], first
	}
	if len(dst) > 0 {
		over := r.over[i*overflowSize : (i+1)*overflowSize]
		copy(dst, over[off-first:])
	}
}

// cutRest puts the frames after the first of a datagram carrying n bytes
// of payload in frames of size bytes each (the last may be shorter) into
// r.extra: frame k's payload, which starts at datagram offset base+k*size
// of slot i, is copied into a pool packet at its place for the kind of
// ring (after the headers build writes), and build makes the frame of it.
func (r *rxRing) cutRest(i int, p *link.Packet, n, size, base int, build func(q *link.Packet, k, seg int) bool) {
	at := r.headroom
	if r.kind == rxPacket {
		at = base // the IP and UDP headers go in front (build)
	}
	for k, off := 1, size; off < n; k, off = k+1, off+size {
		q := r.l.pool.Get()
		if q == nil {
			r.l.c.rxDrops[link.DropNoBuffer].Add(1)
			continue
		}
		seg := min(size, n-off)
		r.copyOut(i, p, q.Buf()[at:at+seg], base+off)
		if !build(q, k, seg) {
			q.Release()
			continue
		}
		r.extra = append(r.extra, q)
	}
}

// buildUDPMsg builds the frames of a UDP socket's datagram of n bytes:
// one, or, for a coalesced one (m.gro), one per m.gro bytes.
func (r *rxRing) buildUDPMsg(i int, p *link.Packet, n int, name []byte, m *rxMeta) bool {
	size := n
	if m.gro > 0 && m.gro < n {
		size = m.gro
	}
	if size > r.poolPart() {
		// No RoCEv2 packet is longer than a packet buffer.
		r.l.c.rxDrops[ReasonTruncated].Add(1)
		return false
	}
	if size < n {
		r.l.c.groReceives.Add(1)
		r.l.c.groFrames.Add(uint64((n + size - 1) / size))
	}
	r.cutRest(i, p, n, size, 0, func(q *link.Packet, k, seg int) bool {
		if r.kind == rxUDP4 {
			return r.buildUDP4(q, seg, name, m, uint16(k))
		}
		return r.buildUDP6(q, seg, name, m)
	})
	if r.kind == rxUDP4 {
		return r.buildUDP4(p, size, name, m, 0)
	}
	return r.buildUDP6(p, size, name, m)
}

// buildPacketMsg builds the frames of a packet socket's packet: n bytes
// from its link-layer header, after the virtio header of slot i.
func (r *rxRing) buildPacketMsg(i int, p *link.Packet, n int, name []byte) bool {
	// struct sockaddr_ll: family, protocol, ifindex, hatype (at 8),
	// pkttype, halen, addr.
	switch binary.NativeEndian.Uint16(name[8:10]) {
	case arphrdEther, arphrdLoopback:
		n -= wire.EthernetSize
	case arphrdNone, arphrdRawIP, arphrdTunnel, arphrdTunnel6, arphrdIPGRE, arphrdSit:
		// No link-layer header: the IP packet sits where the Ethernet
		// header goes.
		if n > r.poolPart()-packetHeadroom {
			r.l.c.rxDrops[ReasonTruncated].Add(1)
			return false
		}
		buf := p.Buf()
		copy(buf[packetHeadroom:packetHeadroom+n], buf[:n])
	default:
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	if n < 0 {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	vh := r.vnet[i*vnetHdrSize : (i+1)*vnetHdrSize]
	switch vh[1] &^ 0x80 { // without VIRTIO_NET_HDR_GSO_ECN
	case vnetGSONone:
		if packetHeadroom+n > link.BufferSize {
			r.l.c.rxDrops[ReasonTruncated].Add(1)
			return false
		}
		return r.buildPacket(p, n, name)
	case vnetGSOUDPL4:
		return r.cutPacket(i, p, n, name, int(binary.NativeEndian.Uint16(vh[4:6])))
	}
	r.l.c.rxDrops[ReasonMalformed].Add(1)
	return false
}

// cutPacket cuts an IP packet of n bytes that a GSO send left whole into
// frames of size bytes of UDP payload each (the last may be shorter).
func (r *rxRing) cutPacket(i int, p *link.Packet, n int, name []byte, size int) bool {
	buf := p.Buf()
	ip := buf[packetHeadroom:]
	hl, ok := wire.GSOHeaderLen(ip, n)
	if !ok || size < wire.MinPacketSize || packetHeadroom+hl+size > link.BufferSize {
		r.l.c.rxDrops[ReasonMalformed].Add(1)
		return false
	}
	payload := n - hl
	if payload <= size {
		// One frame: nothing to cut.
		wire.SetGSOSegmentHeaders(ip[:hl], payload, 0)
		return r.buildPacket(p, n, name)
	}
	r.l.c.groReceives.Add(1)
	r.l.c.groFrames.Add(uint64((payload + size - 1) / size))
	r.cutRest(i, p, payload, size, packetHeadroom+hl, func(q *link.Packet, k, seg int) bool {
		qip := q.Buf()[packetHeadroom:]
		copy(qip[:hl], ip[:hl])
		wire.SetGSOSegmentHeaders(qip[:hl], seg, uint16(k))
		return r.buildPacket(q, hl+seg, name)
	})
	wire.SetGSOSegmentHeaders(ip[:hl], size, 0)
	return r.buildPacket(p, hl+size, name)
}

// setGRO asks a UDP socket for coalesced datagrams (UDP_GRO, Linux 5.0);
// a kernel without it cuts them instead, which costs only speed.
func setGRO(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
}

package engine

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Loopback: frames the device sends to itself never reach the link
// (docs/dataplane.md, "Loopback").
//
// irdma marks an address handle for hardware loopback when its destination
// is the source GID's own address, a loopback address or a multicast group
// (verbs.c irdma_setup_ah: ah_info->do_lpbk from irdma_ipv4_is_lpb /
// irdma_ipv6_is_lpb, forced for multicast; the DOLOOPBACK bit of
// CREATE_ADDR_HANDLE). Its RoCE QPs carry no such bit: irdma_modify_qp_roce
// sets none and irdma_cqp_create_qp_cmd leaves the CQP's FORCELOOPBACK 0,
// so for an RC QP the device itself must recognise that the destination is
// its own. We therefore decide per frame, for both: a frame whose
// destination IP is one of the port's GIDs (an atomic snapshot, SetGIDs) is
// delivered inside the device; a multicast frame goes to the wire and, if a
// group of this device has that address, to its members as well. irdma's
// "any 127.0.0.0/8 destination" clause is left out on purpose: several
// emulated functions share lo (docs/transport.md, "Several ports on one
// machine"), and a frame to another one's 127.x address must reach it.

// route is what transmit does with one built frame.
type route uint8

const (
	toWire  route = iota // the link
	toSelf               // the device's own receive path only
	toGroup              // the link and, as a copy, the local members of its group
)

// frameDst returns the destination IP address of an Ethernet frame (one
// 802.1Q tag skipped), IPv4 unmapped; false if the frame is not IPv4 or
// IPv6 or too short to say. It reads fixed offsets only: transmit calls it for
// every frame.
func frameDst(b []byte) (netip.Addr, bool) {
	if len(b) < wire.EthernetSize {
		return netip.Addr{}, false
	}
	et := wire.Ethernet(b).EtherType()
	off := wire.EthernetSize
	if et == wire.EtherTypeVLAN {
		if len(b) < off+wire.VLANSize {
			return netip.Addr{}, false
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += wire.VLANSize
	}
	switch et {
	case wire.EtherTypeIPv4:
		if len(b) < off+wire.IPv4MinimumSize {
			return netip.Addr{}, false
		}
		return wire.IPv4(b[off:]).DestinationAddress(), true
	case wire.EtherTypeIPv6:
		if len(b) < off+wire.IPv6Size {
			return netip.Addr{}, false
		}
		return wire.IPv6(b[off:]).DestinationAddress().Unmap(), true
	}
	return netip.Addr{}, false
}

// routeOf decides where a frame goes. own is the GID snapshot of this
// transmit; with no GIDs configured (an engine without a port model) nothing
// is looped back.
func (p *port) routeOf(own []netip.Addr, frame []byte) route {
	if len(own) == 0 {
		return toWire
	}
	dst, ok := frameDst(frame)
	if !ok {
		return toWire
	}
	if dst.IsMulticast() {
		// irdma_setup_ah sets do_lpbk for every multicast AH: the
		// datagram goes out and to the device's own members of the group
		// (the sending QP too, if it is one: irdma_validate_qp_attrs
		// refuses every create flag, IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK
		// included). With no local group there is nothing to copy.
		words, v4 := ah.AddrToWords(dst)
		if _, _, ok := p.e.dev.AHs().LookupMG(words, v4); ok {
			return toGroup
		}
		return toWire
	}
	for _, a := range own {
		if a == dst {
			return toSelf
		}
	}
	return toWire
}

// ownGIDs returns the port's GID snapshot (nil for none).
func (p *port) ownGIDs() []netip.Addr {
	if g := p.gids.Load(); g != nil {
		return *g
	}
	return nil
}

// loopStats are the loopback counters: frames (and their bytes) the
// device delivered to itself, multicast copies among them, and copies not
// made for want of a packet buffer.
type loopStats struct {
	frames, bytes, mcast, noBuffer, lent atomic.Uint64
}

// LoopbackStats are the frames the device delivered to itself rather than
// to its link.
type LoopbackStats struct {
	// Frames and Bytes count the frames handed to the port's receive path
	// from inside the device (whole frames, Ethernet header to ICRC); the
	// receive path then counts them like frames from the link (Gate,
	// Delivered, Port.RxPackets).
	Frames, Bytes uint64
	// Multicast counts those that were copies of a multicast frame also
	// sent on the link.
	Multicast uint64
	// NoBuffer counts multicast copies not made because the packet pool
	// was empty (the frame still went to the link).
	NoBuffer uint64
	// Lent counts the frames among Frames whose payload the receiving QP
	// read straight from the sender's buffer (emu/qp dma.go, "Lending"):
	// one copy of the payload instead of two.
	Lent uint64
}

func (s *loopStats) snapshot() LoopbackStats {
	return LoopbackStats{Frames: s.frames.Load(), Bytes: s.bytes.Load(), Multicast: s.mcast.Load(),
		NoBuffer: s.noBuffer.Load(), Lent: s.lent.Load()}
}

// loop delivers frames the device sent to itself through the port's
// receive path — the same gate as frames from the link (GID, QPN,
// transport; the QP's worker then checks state, addresses, P_Key, Q_Key;
// not the ICRC, which an in-device frame does not carry: link.ICRCInDevice) —
// from the worker that built them, with the worker's own parse scratch.
// The frames are first shown to the link's Looper, if it has one, so a
// capture records them as sent. It takes ownership of every packet.
func (p *port) loop(s *rxScratch, pkts []*link.Packet, mcast uint64) {
	if len(pkts) == 0 {
		return
	}
	if p.closed.Load() {
		for _, pk := range pkts {
			pk.Release()
		}
		return
	}
	if p.looper != nil {
		p.looper.Looped(pkts)
	}
	now := p.e.clock.Now()
	var bytes, lent uint64
	for _, pk := range pkts {
		bytes += uint64(len(pk.Data))
		if pk.Lent() != nil {
			lent++
		}
	}
	p.lb.frames.Add(uint64(len(pkts)))
	p.lb.bytes.Add(bytes)
	if lent != 0 {
		p.lb.lent.Add(lent)
	}
	if mcast != 0 {
		p.lb.mcast.Add(mcast)
	}
	for _, pk := range pkts {
		// No link carried it: the gate neither has an ICRC to check
		// (transmit computed one only for a capture) nor needs one.
		pk.Time, pk.ICRC, pk.Unsealed = now, link.ICRCInDevice, false
		p.receive(s, pk)
	}
}

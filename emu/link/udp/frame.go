package udp

import (
	"encoding/binary"
	"net/netip"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Header fields emu/wire keeps unexported, at their RFC 791 offsets.
const (
	ipv4IDOffset   = 4
	ipv4FlagOffset = 6
	ipv4FlagDF     = 0x4000
	ipv4FlagMF     = 0x2000
	ipv4FragMask   = 0x1fff
	ipv6PayloadLen = 4
)

// Headroom in front of a received datagram: room for the Ethernet, IPv6
// and UDP headers the link writes there, so that the device always parses
// a whole frame; an IPv4 frame then starts 20 bytes into the buffer.
const (
	udpHeadroom    = wire.EthernetSize + wire.IPv6Size + wire.UDPSize
	packetHeadroom = wire.EthernetSize
)

// located is where the parts of a frame are: the IP header, the UDP header
// and the UDP payload (BTH..ICRC), checked the way Linux's IP and UDP
// receive paths check them, without looking inside the RoCEv2 packet (the
// device's gate does that).
type located struct {
	v6      bool
	ip      int // offset of the IP header
	ipHL    int // its length (IPv4 options included)
	udp     int // offset of the UDP header
	udpLen  int // the UDP length field: header + payload
	payload int // offset of the payload
	end     int // end of the IP packet, from its length field
}

func (f *located) payloadLen() int { return f.udpLen - wire.UDPSize }

// locate finds the IP, UDP and RoCEv2 parts of frame, which starts at its
// Ethernet header (skipping one 802.1Q tag). It reports false for anything
// that is not a whole, unfragmented IPv4 or IPv6 datagram to UDP port 4791
// with at least a BTH and an ICRC as payload, so that the ICRC can be
// located.
func locate(frame []byte) (located, bool) {
	if len(frame) < wire.EthernetSize {
		return located{}, false
	}
	off := wire.EthernetSize
	et := binary.BigEndian.Uint16(frame[12:])
	if et == wire.EtherTypeVLAN {
		if len(frame) < off+wire.VLANSize {
			return located{}, false
		}
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += wire.VLANSize
	}
	return locateIP(frame, off, et)
}

// locateIP is locate for a packet whose IP header starts at off, of the
// given EtherType.
func locateIP(b []byte, off int, etherType uint16) (located, bool) {
	f := located{ip: off}
	ip := b[off:]
	var ipEnd int // end of the IP packet, from its length field
	switch etherType {
	case wire.EtherTypeIPv4:
		if len(ip) < wire.IPv4MinimumSize || ip[0]>>4 != 4 {
			return located{}, false
		}
		f.ipHL = int(ip[0]&0x0f) * 4
		tl := int(binary.BigEndian.Uint16(ip[2:]))
		if f.ipHL < wire.IPv4MinimumSize || tl < f.ipHL || tl > len(ip) {
			return located{}, false
		}
		ff := binary.BigEndian.Uint16(ip[ipv4FlagOffset:])
		if ip[9] != wire.IPProtocolUDP || ff&(ipv4FlagMF|ipv4FragMask) != 0 {
			return located{}, false
		}
		ipEnd = off + tl
	case wire.EtherTypeIPv6:
		if len(ip) < wire.IPv6Size || ip[0]>>4 != 6 || ip[6] != wire.IPProtocolUDP {
			return located{}, false
		}
		f.v6 = true
		f.ipHL = wire.IPv6Size
		ipEnd = off + wire.IPv6Size + int(binary.BigEndian.Uint16(ip[ipv6PayloadLen:]))
		if ipEnd > len(b) {
			return located{}, false
		}
	default:
		return located{}, false
	}
	f.udp = off + f.ipHL
	f.end = ipEnd
	if ipEnd-f.udp < wire.UDPSize {
		return located{}, false
	}
	u := wire.UDP(b[f.udp : f.udp+wire.UDPSize])
	f.udpLen = int(u.Length())
	f.payload = f.udp + wire.UDPSize
	// Linux udp_rcv drops a datagram whose length exceeds the IP payload;
	// a shorter one is trimmed (the bytes after it are not the UDP
	// payload).
	if u.DestinationPort() != wire.RoCEv2Port || f.udpLen < wire.UDPSize+wire.MinPacketSize || f.udp+f.udpLen > ipEnd {
		return located{}, false
	}
	return f, true
}

// srcAddr and dstAddr return the IP addresses of a located frame.
func (f *located) srcAddr(b []byte) netip.Addr {
	if f.v6 {
		return wire.IPv6(b[f.ip:]).SourceAddress()
	}
	return wire.IPv4(b[f.ip:]).SourceAddress()
}

func (f *located) dstAddr(b []byte) netip.Addr {
	if f.v6 {
		return wire.IPv6(b[f.ip:]).DestinationAddress()
	}
	return wire.IPv4(b[f.ip:]).DestinationAddress()
}

// trafficClass and hopLimit return the IPv4 TOS / IPv6 traffic class and
// the TTL / hop limit.
func (f *located) trafficClass(b []byte) uint8 {
	if f.v6 {
		return wire.IPv6(b[f.ip:]).TrafficClass()
	}
	return wire.IPv4(b[f.ip:]).TOS()
}

func (f *located) hopLimit(b []byte) uint8 {
	if f.v6 {
		return wire.IPv6(b[f.ip:]).HopLimit()
	}
	return wire.IPv4(b[f.ip:]).TTL()
}

// icrc computes the ICRC of a located frame from its headers as they are.
func (f *located) icrc(b []byte) uint32 {
	pkt := b[f.payload : f.payload+f.payloadLen()]
	udp := wire.UDP(b[f.udp : f.udp+wire.UDPSize])
	if f.v6 {
		return wire.ICRCIPv6(wire.IPv6(b[f.ip:f.ip+wire.IPv6Size]), udp, pkt)
	}
	return wire.ICRCIPv4(wire.IPv4(b[f.ip:f.ip+f.ipHL]), udp, pkt)
}

// storedICRC returns the ICRC the frame carries: the last four payload
// bytes, least significant byte first (rxe_icrc.c, docs/roce.md "ICRC").
func (f *located) storedICRC(b []byte) uint32 {
	end := f.payload + f.payloadLen()
	return binary.LittleEndian.Uint32(b[end-wire.ICRCSize : end])
}

// kernelHeaders makes the frame's IP and UDP headers what Linux will put
// on the wire when a UDP socket bound to src:port sends its payload, in
// the fields the ICRC covers, and reseals the ICRC if any of them
// changed. It reports whether it resealed, and false in ok if the frame
// cannot be sent that way (IPv4 options: the socket sends none).
//
// What Linux writes: IPv4 ID 0 and DF, because the socket is unconnected
// and has IP_PMTUDISC_DO (ip_select_ident_segs sets the ID to 0 for DF
// packets of sockets without a destination, include/net/ip.h; measured,
// docs/interop.md "Measured: the guest's network and what rxe accepts");
// the total length from the payload; the socket's
// source address and port. TOS/traffic class, TTL/hop limit, the IPv6 flow
// label and the UDP checksum are masked out of the ICRC, and the link
// passes the first two per packet.
func (f *located) kernelHeaders(b []byte, src netip.Addr, port uint16) (resealed, ok bool) {
	udp := wire.UDP(b[f.udp : f.udp+wire.UDPSize])
	change := udp.SourcePort() != port || f.srcAddr(b) != src
	if f.v6 {
		ip := wire.IPv6(b[f.ip : f.ip+wire.IPv6Size])
		change = change || int(ip.PayloadLength()) != f.udpLen
		if !change {
			return false, true
		}
		ip.SetPayloadLength(uint16(f.udpLen))
		a := src.As16()
		copy(ip[8:24], a[:])
	} else {
		if f.ipHL != wire.IPv4MinimumSize {
			return false, false
		}
		ip := wire.IPv4(b[f.ip : f.ip+wire.IPv4MinimumSize])
		change = change || ip.ID() != 0 ||
			binary.BigEndian.Uint16(ip[ipv4FlagOffset:]) != ipv4FlagDF ||
			int(ip.TotalLength()) != wire.IPv4MinimumSize+f.udpLen
		if !change {
			return false, true
		}
		ip.SetID(0)
		binary.BigEndian.PutUint16(ip[ipv4FlagOffset:], ipv4FlagDF)
		ip.SetTotalLength(uint16(wire.IPv4MinimumSize + f.udpLen))
		a := src.As4()
		copy(ip[12:16], a[:])
		ip.SetChecksum(ip.CalculateChecksum())
	}
	udp.SetSourcePort(port)
	// The frame's UDP checksum, if any, is stale now; the kernel computes
	// its own (IPv6) or sends 0 (IPv4, like rxe), and the ICRC masks it.
	udp.SetChecksum(0)
	end := f.payload + f.payloadLen()
	wire.PutICRC(b[f.payload:end], f.icrc(b))
	return true, true
}

package wire

// The packets of a UDP segmentation offload send.
//
// A GSO send is one IP packet whose UDP payload is a run of datagrams of
// one size but for a shorter last one; the kernel cuts it where a device
// needs it, at a receiving UDP socket without UDP_GRO, or not at all (lo
// and veth carry it whole to a packet socket or a capture). Each datagram
// it cuts gets the send's headers with its own lengths and, for IPv4, the
// send's ID plus its index (af_inet.c inet_gso_segment; __udp_gso_segment
// for the UDP length). emu/link/udp cuts such packets on receive and
// `irdma-emu decode` in captures, both with these two functions.

// GSOHeaderLen returns the length of the IP and UDP headers at the start
// of ip, the first bytes of an IP packet of n bytes carrying UDP: IPv4
// with its options, or IPv6 with UDP as the next header (RoCEv2 uses no
// extension headers). ip must hold the headers; the rest of the packet
// may be elsewhere.
func GSOHeaderLen(ip []byte, n int) (int, bool) {
	if n < 1 || len(ip) < 1 {
		return 0, false
	}
	var hl int
	switch ip[0] >> 4 {
	case 4:
		hl = int(ip[0]&0x0f)*4 + UDPSize
		if hl < IPv4MinimumSize+UDPSize || n < hl || len(ip) < hl || ip[ipv4Protocol] != IPProtocolUDP {
			return 0, false
		}
	case 6:
		hl = IPv6Size + UDPSize
		if n < hl || len(ip) < hl || ip[ipv6NextHeader] != IPProtocolUDP {
			return 0, false
		}
	default:
		return 0, false
	}
	return hl, true
}

// SetGSOSegmentHeaders gives hdr, the IP and UDP headers (GSOHeaderLen
// bytes) of a GSO send copied for its datagram k, what the kernel's cut
// writes there: the lengths for n bytes of UDP payload and, for IPv4, the
// send's ID plus k and a new header checksum. The UDP checksum, which
// covered the whole send and which the ICRC masks, becomes 0 (IPv4: none;
// IPv6: what rxe sends).
func SetGSOSegmentHeaders(hdr []byte, n int, k uint16) {
	udp := UDP(hdr[len(hdr)-UDPSize:])
	udp.SetLength(uint16(UDPSize + n))
	udp.SetChecksum(0)
	if hdr[0]>>4 == 6 {
		IPv6(hdr).SetPayloadLength(uint16(UDPSize + n))
		return
	}
	ip := IPv4(hdr[:len(hdr)-UDPSize])
	ip.SetTotalLength(uint16(len(hdr) + n))
	ip.SetID(ip.ID() + k)
	ip.SetChecksum(ip.CalculateChecksum())
}

package wire

import "net/netip"

// Frame is a RoCEv2 packet with the framing below it, split into views by
// ParseFrame, ParseIP or EncodeFrame. Exactly one of IPv4 and IPv6 is set.
// The views alias the input.
type Frame struct {
	// Ethernet is the Ethernet header; nil when the frame was parsed from
	// an IP packet (ParseIP).
	Ethernet Ethernet
	// VLAN is the 802.1Q tag after the source MAC; nil when untagged.
	VLAN VLAN
	// IPv4 is the IPv4 header, options included; nil for IPv6.
	IPv4 IPv4
	// IPv6 is the fixed IPv6 header; nil for IPv4.
	IPv6 IPv6
	UDP  UDP
	// Packet is the RoCEv2 transport packet, the UDP payload.
	Packet Packet
}

// Src returns the IP source address and UDP source port.
func (f *Frame) Src() netip.AddrPort {
	if f.IPv4 != nil {
		return netip.AddrPortFrom(f.IPv4.SourceAddress(), f.UDP.SourcePort())
	}
	return netip.AddrPortFrom(f.IPv6.SourceAddress(), f.UDP.SourcePort())
}

// Dst returns the IP destination address and UDP destination port.
func (f *Frame) Dst() netip.AddrPort {
	if f.IPv4 != nil {
		return netip.AddrPortFrom(f.IPv4.DestinationAddress(), f.UDP.DestinationPort())
	}
	return netip.AddrPortFrom(f.IPv6.DestinationAddress(), f.UDP.DestinationPort())
}

// ParseFrame parses an Ethernet frame (without FCS; bytes after the IP
// packet, such as minimum-size padding, are ignored) down to its RoCEv2
// packet: Ethernet, an optional 802.1Q tag, IPv4 or IPv6, UDP to port 4791,
// then Parse. A frame that carries something else yields ErrNotRoCEv2, even
// when cut short, as long as its IP protocol and UDP port are visible. The
// ICRC is not checked; call VerifyICRC. Nothing is allocated on success.
//
// On failure f holds the views parsed so far (Ethernet, IP, UDP), so a
// tool can still say where a broken packet came from.
func ParseFrame(b []byte, f *Frame) error {
	*f = Frame{}
	if len(b) < EthernetSize {
		return lengthError(ErrTruncated, "Ethernet", EthernetSize, len(b))
	}
	eth := Ethernet(b[:EthernetSize])
	et := eth.EtherType()
	off := EthernetSize
	var vlan VLAN
	if et == EtherTypeVLAN {
		if len(b) < EthernetSize+VLANSize {
			return lengthError(ErrTruncated, "802.1Q tag", EthernetSize+VLANSize, len(b))
		}
		vlan = VLAN(b[EthernetSize : EthernetSize+VLANSize])
		et = vlan.EtherType()
		off += VLANSize
	}
	f.Ethernet = eth
	f.VLAN = vlan
	return parseIP(b[off:], et, f)
}

// ParseIP is ParseFrame for a packet that starts at its IP header (raw IP
// captures, Linux cooked captures, packets from an IP-level socket); the
// version nibble selects IPv4 or IPv6.
func ParseIP(b []byte, f *Frame) error {
	*f = Frame{}
	if len(b) < 1 {
		return lengthError(ErrTruncated, "IP", IPv4MinimumSize, 0)
	}
	switch b[0] >> 4 {
	case ipv4Version:
		return parseIP(b, EtherTypeIPv4, f)
	case ipv6Version:
		return parseIP(b, EtherTypeIPv6, f)
	}
	return &ParseError{Reason: ErrBadIPHeader, Part: "IP version", Value: int(b[0] >> 4)}
}

// parseIP identifies RoCEv2 before it checks lengths, so that a frame cut
// short by a capture's snap length is still told apart from other traffic:
// protocol and destination port first, then IP total length, UDP length.
func parseIP(b []byte, etherType uint16, f *Frame) error {
	var l4 []byte
	var ipLen, ipHave int
	var ipPart string
	fragment := false
	switch etherType {
	case EtherTypeIPv4:
		if len(b) < IPv4MinimumSize {
			return lengthError(ErrTruncated, "IPv4", IPv4MinimumSize, len(b))
		}
		ip := IPv4(b)
		hl, tl := ip.HeaderLength(), int(ip.TotalLength())
		if ip.Version() != ipv4Version || hl < IPv4MinimumSize || tl < hl {
			return &ParseError{Reason: ErrBadIPHeader, Part: "IPv4 version/IHL/total length"}
		}
		if ip.Protocol() != IPProtocolUDP || ip.FragmentOffset() != 0 {
			// A later fragment has no UDP header to identify it.
			return ErrNotRoCEv2
		}
		if hl > len(b) {
			return lengthError(ErrTruncated, "IPv4 options", hl, len(b))
		}
		fragment = ip.MF()
		f.IPv4 = IPv4(b[:hl:hl])
		l4 = b[hl:min(tl, len(b))]
		ipLen, ipHave, ipPart = tl, len(b), "IPv4 total length"
	case EtherTypeIPv6:
		if len(b) < IPv6Size {
			return lengthError(ErrTruncated, "IPv6", IPv6Size, len(b))
		}
		ip := IPv6(b[:IPv6Size:IPv6Size])
		if ip.Version() != ipv6Version {
			return &ParseError{Reason: ErrBadIPHeader, Part: "IPv6 version", Value: int(ip.Version())}
		}
		if ip.NextHeader() != IPProtocolUDP {
			// Extension headers included: RoCEv2 puts UDP right after
			// the fixed header (rxe_net.c prepare_ipv6_hdr).
			return ErrNotRoCEv2
		}
		tl := IPv6Size + int(ip.PayloadLength())
		f.IPv6 = ip
		l4 = b[IPv6Size:min(tl, len(b))]
		ipLen, ipHave, ipPart = tl, len(b), "IPv6 payload length"
	default:
		return ErrNotRoCEv2
	}
	if len(l4) < UDPSize {
		return lengthError(ErrTruncated, "UDP", UDPSize, len(l4))
	}
	udp := UDP(l4[:UDPSize:UDPSize])
	if udp.DestinationPort() != RoCEv2Port {
		return ErrNotRoCEv2
	}
	f.UDP = udp
	if ipLen > ipHave {
		return lengthError(ErrTruncated, ipPart, ipLen, ipHave)
	}
	if fragment {
		return &ParseError{Reason: ErrIPFragment, Part: "IPv4 MF"}
	}
	ul := int(udp.Length())
	if ul < UDPSize || ul > len(l4) {
		// Linux udp_rcv drops a datagram whose length field exceeds the
		// IP payload and trims one that is shorter; the same here.
		return lengthError(ErrBadUDPHeader, "UDP length", ul, len(l4))
	}
	return Parse(l4[UDPSize:ul:ul], &f.Packet)
}

// ComputeICRC returns the ICRC the frame's RoCEv2 packet should carry.
func (f *Frame) ComputeICRC() uint32 {
	if f.IPv4 != nil {
		return ICRCIPv4(f.IPv4, f.UDP, f.Packet.Raw)
	}
	return ICRCIPv6(f.IPv6, f.UDP, f.Packet.Raw)
}

// VerifyICRC returns nil if the packet's ICRC is correct and
// ErrICRCMismatch otherwise. It does not allocate.
func (f *Frame) VerifyICRC() error {
	if f.Packet.Raw == nil || f.ComputeICRC() != f.Packet.ICRC() {
		return ErrICRCMismatch
	}
	return nil
}

// Seal writes the ICRC and then, if the frame carries a UDP checksum (a
// non-zero value: RFC 768 uses 0 for "none"), recomputes it, since it
// covers the ICRC. Call it after the payload is in place, and again after
// changing any covered byte (for example to inject a fault and repair the
// checksums). The IPv4 header checksum is written by EncodeFrame.
func (f *Frame) Seal() {
	PutICRC(f.Packet.Raw, f.ComputeICRC())
	if f.UDP.Checksum() != 0 {
		f.UDP.SetChecksum(0)
		var src, dst netip.Addr
		if f.IPv4 != nil {
			src, dst = f.IPv4.SourceAddress(), f.IPv4.DestinationAddress()
		} else {
			src, dst = f.IPv6.SourceAddress(), f.IPv6.DestinationAddress()
		}
		f.UDP.SetChecksum(f.UDP.CalculateChecksum(src, dst, f.Packet.Raw))
	}
}

// FrameFields describes the framing of a RoCEv2 packet to build, in the
// vocabulary of an address vector (ibv_ah_attr.grh).
type FrameFields struct {
	Dst, Src MAC
	// VLAN, when non-nil, adds an 802.1Q tag; its EtherType is ignored.
	VLAN *VLANFields
	// SrcIP and DstIP are the IP addresses (the GIDs). If both are IPv4 or
	// IPv4-mapped, the frame is IPv4 (like rxe, which derives the family
	// from the GID); otherwise both must be IPv6.
	SrcIP, DstIP netip.Addr
	// TrafficClass is the IPv4 TOS or the IPv6 traffic class.
	TrafficClass uint8
	// HopLimit is the IPv4 TTL or the IPv6 hop limit.
	HopLimit uint8
	// FlowLabel is the IPv6 flow label (20 bits); unused for IPv4.
	FlowLabel uint32
	// IPID is the IPv4 identification; unused for IPv6. IPv4 frames are
	// always sent with DF set (rxe_net.c prepare_ipv4_hdr).
	IPID uint16
	// SrcPort is the UDP source port; the destination is RoCEv2Port.
	SrcPort uint16
	// UDPChecksum asks for a UDP checksum instead of 0, which rxe sends
	// over IPv4 and IPv6 alike (rxe_net.c prepare_udp_hdr) and accepts.
	// RFC 8200 §8.1 allows a zero IPv6 UDP checksum only for tunnels
	// (RFC 6935), so Wireshark flags it; set this for IPv6 peers that
	// insist.
	UDPChecksum bool
}

// family reports whether ff describes an IPv4 frame, and whether its
// addresses are usable at all.
func (ff *FrameFields) family() (v4, ok bool) {
	s, d := ff.SrcIP.Unmap(), ff.DstIP.Unmap()
	switch {
	case s.Is4() && d.Is4():
		return true, true
	case s.Is6() && d.Is6():
		return false, true
	}
	return false, false
}

// FrameLen returns the length of the frame EncodeFrame builds, or 0 for an
// invalid opcode or address pair.
func FrameLen(ff *FrameFields, op Opcode, payloadLen int) int {
	pl := PacketLen(op, payloadLen)
	v4, ok := ff.family()
	if pl == 0 || !ok {
		return 0
	}
	n := EthernetSize + UDPSize + pl
	if ff.VLAN != nil {
		n += VLANSize
	}
	if v4 {
		return n + IPv4MinimumSize
	}
	return n + IPv6Size
}

// EncodeFrame writes a whole RoCEv2 frame into b: Ethernet, optional
// 802.1Q tag, IPv4 (DF, header checksum) or IPv6, UDP to 4791, and the
// transport headers of pf with room for payloadLen payload bytes. It fills
// f with views; the caller puts the payload into f.Packet.Payload and
// calls f.Seal. It returns the frame length. Nothing is allocated.
func EncodeFrame(b []byte, ff *FrameFields, pf *PacketFields, payloadLen int, f *Frame) (int, error) {
	*f = Frame{}
	v4, ok := ff.family()
	if !ok {
		return 0, &ParseError{Reason: ErrBadField, Part: "IP addresses"}
	}
	op := pf.BTH.Opcode
	pl := PacketLen(op, payloadLen)
	if pl == 0 {
		return 0, &ParseError{Reason: ErrInvalidOpcode, Part: "opcode", Value: int(op)}
	}
	n := FrameLen(ff, op, payloadLen)
	if len(b) < n {
		return 0, lengthError(ErrBufferTooSmall, "frame", n, len(b))
	}
	off := encodeFraming(b, ff, v4, pl, f)
	if _, err := EncodePacket(b[off:n], pf, payloadLen, &f.Packet); err != nil {
		return 0, err
	}
	return n, nil
}

// encodeFraming writes the framing of ff below a RoCEv2 packet of pl bytes
// into b — Ethernet, the 802.1Q tag if any, IPv4 (DF, header checksum) or
// IPv6, UDP to 4791 — sets f's views of it and returns its length. b has
// room; v4 is ff.family's answer.
func encodeFraming(b []byte, ff *FrameFields, v4 bool, pl int, f *Frame) int {
	off := EthernetSize
	eth := Ethernet(b[:EthernetSize])
	ethType := uint16(EtherTypeIPv6)
	if v4 {
		ethType = EtherTypeIPv4
	}
	if ff.VLAN != nil {
		eth.Encode(&EthernetFields{Dst: ff.Dst, Src: ff.Src, EtherType: EtherTypeVLAN})
		vf := *ff.VLAN
		vf.EtherType = ethType
		f.VLAN = VLAN(b[off : off+VLANSize])
		f.VLAN.Encode(&vf)
		off += VLANSize
	} else {
		eth.Encode(&EthernetFields{Dst: ff.Dst, Src: ff.Src, EtherType: ethType})
	}
	f.Ethernet = eth

	udpLen := UDPSize + pl
	if v4 {
		ip := IPv4(b[off : off+IPv4MinimumSize])
		ip.Encode(&IPv4Fields{
			TOS:         ff.TrafficClass,
			TotalLength: uint16(IPv4MinimumSize + udpLen),
			ID:          ff.IPID,
			DF:          true,
			TTL:         ff.HopLimit,
			Protocol:    IPProtocolUDP,
			Src:         ff.SrcIP.Unmap(),
			Dst:         ff.DstIP.Unmap(),
		})
		ip.SetChecksum(ip.CalculateChecksum())
		f.IPv4 = ip
		off += IPv4MinimumSize
	} else {
		ip := IPv6(b[off : off+IPv6Size])
		ip.Encode(&IPv6Fields{
			TrafficClass:  ff.TrafficClass,
			FlowLabel:     ff.FlowLabel,
			PayloadLength: uint16(udpLen),
			NextHeader:    IPProtocolUDP,
			HopLimit:      ff.HopLimit,
			Src:           ff.SrcIP,
			Dst:           ff.DstIP,
		})
		f.IPv6 = ip
		off += IPv6Size
	}
	udp := UDP(b[off : off+UDPSize])
	var csum uint16
	if ff.UDPChecksum {
		// Any non-zero value tells Seal to compute the checksum.
		csum = 0xffff
	}
	udp.Encode(&UDPFields{SrcPort: ff.SrcPort, DstPort: RoCEv2Port, Length: uint16(udpLen), Checksum: csum})
	f.UDP = udp
	return off + UDPSize
}

// BuildFrame is EncodeFrame with the payload copied in and the frame
// sealed: the one-call builder for tests, tools and small packets.
func BuildFrame(b []byte, ff *FrameFields, pf *PacketFields, payload []byte) (int, error) {
	var f Frame
	n, err := EncodeFrame(b, ff, pf, len(payload), &f)
	if err != nil {
		return 0, err
	}
	copy(f.Packet.Payload, payload)
	f.Seal()
	return n, nil
}

package wire

// Framing is the framing below the RoCEv2 packets of one stream, encoded
// once: Ethernet, the 802.1Q tag if any, IPv4 or IPv6 and UDP for one
// FrameFields. Encode copies it in front of each packet and fills in what
// changes from packet to packet — the IP and UDP lengths and the IPv4
// header checksum, which it updates from a sum kept without the length
// (RFC 1624: the one's-complement sum is associative). A QP's frames to
// its connected peer share their framing: encoding it anew for every
// packet was 8.5 % of one daemon's CPU at 64 KiB WRITEs
// (docs/performance.md "Three per-packet costs").
//
// The zero Framing matches nothing; Set prepares it. It is not safe for
// concurrent use.
type Framing struct {
	ff      FrameFields // with VLAN nil: the tag is in vlan
	vlan    VLANFields
	hasVLAN bool
	set     bool

	v4  bool
	n   int    // bytes of hdr in use
	ip  int    // offset of the IP header in hdr
	sum uint32 // IPv4: the header's sum without total length and checksum
	hdr [EthernetSize + VLANSize + IPv6Size + UDPSize]byte
}

// Matches reports whether fr was set from framing equal to ff.
func (fr *Framing) Matches(ff *FrameFields) bool {
	if !fr.set {
		return false
	}
	a := *ff
	a.VLAN = nil
	if a != fr.ff {
		return false
	}
	if ff.VLAN == nil {
		return !fr.hasVLAN
	}
	return fr.hasVLAN && *ff.VLAN == fr.vlan
}

// Set encodes the framing of ff. It fails, and leaves fr matching nothing,
// when ff's addresses are neither both IPv4 (or IPv4-mapped) nor both
// IPv6, as EncodeFrame does.
func (fr *Framing) Set(ff *FrameFields) error {
	fr.set = false
	v4, ok := ff.family()
	if !ok {
		return &ParseError{Reason: ErrBadField, Part: "IP addresses"}
	}
	fr.ff = *ff
	fr.ff.VLAN = nil
	fr.hasVLAN = ff.VLAN != nil
	fr.vlan = VLANFields{}
	if fr.hasVLAN {
		fr.vlan = *ff.VLAN
	}
	fr.v4 = v4
	var views Frame
	fr.n = encodeFraming(fr.hdr[:], ff, v4, 0, &views)
	fr.ip = EthernetSize
	if fr.hasVLAN {
		fr.ip += VLANSize
	}
	if v4 {
		ip := IPv4(fr.hdr[fr.ip : fr.ip+IPv4MinimumSize])
		fr.sum = checksumAdd(0, ip[:ipv4TotalLen])
		fr.sum = checksumAdd(fr.sum, ip[ipv4TotalLen+2:ipv4Checksum])
		fr.sum = checksumAdd(fr.sum, ip[ipv4Checksum+2:])
	}
	fr.set = true
	return nil
}

// Encode is EncodeFrame for the framing fr was set to: it writes the
// framing and the transport headers of pf with room for payloadLen payload
// bytes into b, fills f with views and returns the frame length — the same
// bytes EncodeFrame writes. Nothing is allocated.
func (fr *Framing) Encode(b []byte, pf *PacketFields, payloadLen int, f *Frame) (int, error) {
	*f = Frame{}
	if !fr.set {
		return 0, &ParseError{Reason: ErrBadField, Part: "framing"}
	}
	op := pf.BTH.Opcode
	pl := PacketLen(op, payloadLen)
	if pl == 0 {
		return 0, &ParseError{Reason: ErrInvalidOpcode, Part: "opcode", Value: int(op)}
	}
	n := fr.n + pl
	if len(b) < n {
		return 0, lengthError(ErrBufferTooSmall, "frame", n, len(b))
	}
	copy(b, fr.hdr[:fr.n])
	f.Ethernet = Ethernet(b[:EthernetSize])
	if fr.hasVLAN {
		f.VLAN = VLAN(b[EthernetSize : EthernetSize+VLANSize])
	}
	udpLen := UDPSize + pl
	udpOff := fr.n - UDPSize
	if fr.v4 {
		ip := IPv4(b[fr.ip : fr.ip+IPv4MinimumSize])
		tl := uint16(IPv4MinimumSize + udpLen)
		ip.SetTotalLength(tl)
		ip.SetChecksum(^checksumFold(fr.sum + uint32(tl)))
		f.IPv4 = ip
	} else {
		ip := IPv6(b[fr.ip : fr.ip+IPv6Size])
		ip.SetPayloadLength(uint16(udpLen))
		f.IPv6 = ip
	}
	f.UDP = UDP(b[udpOff:fr.n])
	f.UDP.SetLength(uint16(udpLen))
	if _, err := EncodePacket(b[fr.n:n], pf, payloadLen, &f.Packet); err != nil {
		return 0, err
	}
	return n, nil
}

package wire

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 is a view of the fixed 40-byte IPv6 header (RFC 8200 §3):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Source Address (128 bits)                      |
//	|                Destination Address (128 bits)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// For the ICRC, traffic class, flow label and hop limit are variant and
// count as all ones (Annex A17.4.1; rxe_icrc.c rxe_icrc_hdr). RoCEv2 puts
// UDP directly after this header: extension headers are not supported.
type IPv6 []byte

const (
	ipv6VerTCFlow  = 0
	ipv6PayloadLen = 4
	ipv6NextHeader = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24

	ipv6Version       = 6
	ipv6FlowLabelMask = 0x000fffff
	ipv6TCShift       = 20
)

// IPv6Size is the size of the fixed IPv6 header.
const IPv6Size = 40

// IPv6HopLimitOffset is the offset of the hop limit, which the ICRC masks.
const IPv6HopLimitOffset = ipv6HopLimit

// IPv6Fields holds the fields of an IPv6 header.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32 // 20 bits
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      netip.Addr
}

func (b IPv6) word0() uint32 { return binary.BigEndian.Uint32(b[ipv6VerTCFlow:]) }

// Version returns the IP version nibble.
func (b IPv6) Version() uint8 { return b[ipv6VerTCFlow] >> 4 }

// TrafficClass returns the traffic class.
func (b IPv6) TrafficClass() uint8 { return uint8(b.word0() >> ipv6TCShift) }

// SetTrafficClass sets the traffic class.
func (b IPv6) SetTrafficClass(tc uint8) {
	w := b.word0()&^(0xff<<ipv6TCShift) | uint32(tc)<<ipv6TCShift
	binary.BigEndian.PutUint32(b[ipv6VerTCFlow:], w)
}

// FlowLabel returns the flow label.
func (b IPv6) FlowLabel() uint32 { return b.word0() & ipv6FlowLabelMask }

// SetFlowLabel sets the flow label; only the low 20 bits are used.
func (b IPv6) SetFlowLabel(fl uint32) {
	w := b.word0()&^ipv6FlowLabelMask | fl&ipv6FlowLabelMask
	binary.BigEndian.PutUint32(b[ipv6VerTCFlow:], w)
}

// PayloadLength returns the length of what follows the fixed header.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayloadLen:]) }

// SetPayloadLength sets the payload length.
func (b IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(b[ipv6PayloadLen:], n) }

// NextHeader returns the protocol of what follows.
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// SetHopLimit sets the hop limit.
func (b IPv6) SetHopLimit(v uint8) { b[ipv6HopLimit] = v }

// SourceAddress returns the source address.
func (b IPv6) SourceAddress() netip.Addr {
	return netip.AddrFrom16([16]byte(b[ipv6Src : ipv6Src+16]))
}

// DestinationAddress returns the destination address.
func (b IPv6) DestinationAddress() netip.Addr {
	return netip.AddrFrom16([16]byte(b[ipv6Dst : ipv6Dst+16]))
}

// IsValid reports whether b holds a version-6 header whose payload fits in
// pktSize, the bytes available from the start of the header.
func (b IPv6) IsValid(pktSize int) bool {
	if len(b) < IPv6Size || pktSize < IPv6Size {
		return false
	}
	return b.Version() == ipv6Version && IPv6Size+int(b.PayloadLength()) <= pktSize
}

// Encode writes the header from f. Addresses are written in their 16-byte
// form (an IPv4 address as IPv4-mapped).
func (b IPv6) Encode(f *IPv6Fields) {
	_ = b[IPv6Size-1]
	w := uint32(ipv6Version)<<28 | uint32(f.TrafficClass)<<ipv6TCShift | f.FlowLabel&ipv6FlowLabelMask
	binary.BigEndian.PutUint32(b[ipv6VerTCFlow:], w)
	binary.BigEndian.PutUint16(b[ipv6PayloadLen:], f.PayloadLength)
	b[ipv6NextHeader] = f.NextHeader
	b[ipv6HopLimit] = f.HopLimit
	var a [16]byte
	if f.Src.IsValid() {
		a = f.Src.As16()
	}
	copy(b[ipv6Src:ipv6Src+16], a[:])
	a = [16]byte{}
	if f.Dst.IsValid() {
		a = f.Dst.As16()
	}
	copy(b[ipv6Dst:ipv6Dst+16], a[:])
}

// Fields decodes the header.
func (b IPv6) Fields() IPv6Fields {
	_ = b[IPv6Size-1]
	return IPv6Fields{
		TrafficClass:  b.TrafficClass(),
		FlowLabel:     b.FlowLabel(),
		PayloadLength: b.PayloadLength(),
		NextHeader:    b.NextHeader(),
		HopLimit:      b.HopLimit(),
		Src:           b.SourceAddress(),
		Dst:           b.DestinationAddress(),
	}
}

package wire

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 is a view of an IPv4 header (RFC 791 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// For the ICRC, TOS, TTL and the header checksum are variant and count as
// all ones (Annex A17.4.1; rxe_icrc.c rxe_icrc_hdr).
type IPv4 []byte

const (
	ipv4VerIHL   = 0
	ipv4TOS      = 1
	ipv4TotalLen = 2
	ipv4ID       = 4
	ipv4FlagFrag = 6
	ipv4TTL      = 8
	ipv4Protocol = 9
	ipv4Checksum = 10
	ipv4Src      = 12
	ipv4Dst      = 16

	ipv4FlagDF       = 0x4000
	ipv4FlagMF       = 0x2000
	ipv4FragOffMask  = 0x1fff
	ipv4Version      = 4
	ipv4IHLNoOptions = 5
)

// IPv4 sizes.
const (
	IPv4MinimumSize       = 20
	IPv4MaximumHeaderSize = 60
)

// Offsets of the IPv4 fields the ICRC masks, exported for tests and tools.
const (
	IPv4TOSOffset      = ipv4TOS
	IPv4TTLOffset      = ipv4TTL
	IPv4ChecksumOffset = ipv4Checksum
)

// IPProtocolUDP is the IP protocol number of UDP.
const IPProtocolUDP = 17

// IPv4Fields holds the fields of an option-less IPv4 header; Encode always
// writes IHL 5.
type IPv4Fields struct {
	TOS         uint8
	TotalLength uint16
	ID          uint16
	DF, MF      bool
	FragOffset  uint16 // in 8-byte units, 13 bits
	TTL         uint8
	Protocol    uint8
	Checksum    uint16 // written as given; see SetChecksum / CalculateChecksum
	Src, Dst    netip.Addr
}

// Version returns the IP version nibble.
func (b IPv4) Version() uint8 { return b[ipv4VerIHL] >> 4 }

// HeaderLength returns the header length in bytes (IHL × 4).
func (b IPv4) HeaderLength() int { return int(b[ipv4VerIHL]&0x0f) * 4 }

// TOS returns the type-of-service byte (DSCP and ECN).
func (b IPv4) TOS() uint8 { return b[ipv4TOS] }

// SetTOS sets the type-of-service byte.
func (b IPv4) SetTOS(v uint8) { b[ipv4TOS] = v }

// TotalLength returns the total length of the IP packet.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLen:]) }

// SetTotalLength sets the total length.
func (b IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(b[ipv4TotalLen:], n) }

// ID returns the identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[ipv4ID:]) }

// SetID sets the identification field.
func (b IPv4) SetID(v uint16) { binary.BigEndian.PutUint16(b[ipv4ID:], v) }

// DF returns the don't-fragment flag.
func (b IPv4) DF() bool { return binary.BigEndian.Uint16(b[ipv4FlagFrag:])&ipv4FlagDF != 0 }

// MF returns the more-fragments flag.
func (b IPv4) MF() bool { return binary.BigEndian.Uint16(b[ipv4FlagFrag:])&ipv4FlagMF != 0 }

// FragmentOffset returns the fragment offset in 8-byte units.
func (b IPv4) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(b[ipv4FlagFrag:]) & ipv4FragOffMask
}

// TTL returns the time to live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// SetTTL sets the time to live.
func (b IPv4) SetTTL(v uint8) { b[ipv4TTL] = v }

// Protocol returns the payload protocol.
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// Checksum returns the header checksum.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// SetChecksum sets the header checksum.
func (b IPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], v) }

// SourceAddress returns the source address.
func (b IPv4) SourceAddress() netip.Addr { return netip.AddrFrom4([4]byte(b[ipv4Src : ipv4Src+4])) }

// DestinationAddress returns the destination address.
func (b IPv4) DestinationAddress() netip.Addr {
	return netip.AddrFrom4([4]byte(b[ipv4Dst : ipv4Dst+4]))
}

// CalculateChecksum returns the header checksum the header should carry
// (RFC 791: the complement of the ones' complement sum of the header with
// the checksum field taken as zero).
func (b IPv4) CalculateChecksum() uint16 {
	hl := b.HeaderLength()
	sum := checksumAdd(0, b[:ipv4Checksum])
	sum = checksumAdd(sum, b[ipv4Checksum+2:hl])
	return ^checksumFold(sum)
}

// IsChecksumValid reports whether the header checksum is correct.
func (b IPv4) IsChecksumValid() bool { return b.CalculateChecksum() == b.Checksum() }

// IsValid reports whether b holds a whole IPv4 header of version 4 whose
// header length and total length are consistent with each other and with
// pktSize, the bytes available from the start of the header. It is the gate
// before any accessor (gVisor header.IPv4.IsValid).
func (b IPv4) IsValid(pktSize int) bool {
	if len(b) < IPv4MinimumSize || pktSize < IPv4MinimumSize {
		return false
	}
	hl := b.HeaderLength()
	tl := int(b.TotalLength())
	return b.Version() == ipv4Version && hl >= IPv4MinimumSize && hl <= len(b) && hl <= tl && tl <= pktSize
}

// Encode writes an option-less header (IHL 5) from f. Src and Dst must be
// IPv4 (or IPv4-mapped IPv6) addresses; anything else is written as zeros.
func (b IPv4) Encode(f *IPv4Fields) {
	_ = b[IPv4MinimumSize-1]
	b[ipv4VerIHL] = ipv4Version<<4 | ipv4IHLNoOptions
	b[ipv4TOS] = f.TOS
	binary.BigEndian.PutUint16(b[ipv4TotalLen:], f.TotalLength)
	binary.BigEndian.PutUint16(b[ipv4ID:], f.ID)
	ff := f.FragOffset & ipv4FragOffMask
	if f.DF {
		ff |= ipv4FlagDF
	}
	if f.MF {
		ff |= ipv4FlagMF
	}
	binary.BigEndian.PutUint16(b[ipv4FlagFrag:], ff)
	b[ipv4TTL] = f.TTL
	b[ipv4Protocol] = f.Protocol
	binary.BigEndian.PutUint16(b[ipv4Checksum:], f.Checksum)
	src, dst := f.Src.Unmap(), f.Dst.Unmap()
	var a4 [4]byte
	if src.Is4() {
		a4 = src.As4()
	}
	copy(b[ipv4Src:ipv4Src+4], a4[:])
	a4 = [4]byte{}
	if dst.Is4() {
		a4 = dst.As4()
	}
	copy(b[ipv4Dst:ipv4Dst+4], a4[:])
}

// Fields decodes the fixed part of the header (options are not returned).
func (b IPv4) Fields() IPv4Fields {
	_ = b[IPv4MinimumSize-1]
	return IPv4Fields{
		TOS:         b.TOS(),
		TotalLength: b.TotalLength(),
		ID:          b.ID(),
		DF:          b.DF(),
		MF:          b.MF(),
		FragOffset:  b.FragmentOffset(),
		TTL:         b.TTL(),
		Protocol:    b.Protocol(),
		Checksum:    b.Checksum(),
		Src:         b.SourceAddress(),
		Dst:         b.DestinationAddress(),
	}
}

package wire

import (
	"encoding/binary"
	"net/netip"
)

// UDP is a view of a UDP header (RFC 768): source port, destination port,
// length, checksum. RoCEv2 sends to port 4791 from a source port chosen per
// QP (rxe_qp.c: 0xC000 + a 14-bit hash of the QPN) and with checksum 0
// (rxe_net.c); for the ICRC the checksum counts as all ones.
type UDP []byte

const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
)

// UDPSize is the size of the UDP header.
const UDPSize = 8

// UDPChecksumOffset is the offset of the UDP checksum, which the ICRC masks.
const UDPChecksumOffset = udpChecksum

// RoCEv2Port is the UDP destination port of RoCEv2 (Annex A17.4.2,
// ROCE_V2_UDP_DPORT).
const RoCEv2Port = 4791

// UDPFields holds the fields of a UDP header.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// SourcePort returns the source port.
func (b UDP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// SetSourcePort sets the source port.
func (b UDP) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(b[udpSrcPort:], p) }

// DestinationPort returns the destination port.
func (b UDP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// SetDestinationPort sets the destination port.
func (b UDP) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(b[udpDstPort:], p) }

// Length returns the length of header and payload.
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[udpLength:]) }

// SetLength sets the length.
func (b UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(b[udpLength:], n) }

// Checksum returns the checksum (0: none).
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// SetChecksum sets the checksum.
func (b UDP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], v) }

// Encode writes the header from f.
func (b UDP) Encode(f *UDPFields) {
	_ = b[UDPSize-1]
	b.SetSourcePort(f.SrcPort)
	b.SetDestinationPort(f.DstPort)
	b.SetLength(f.Length)
	b.SetChecksum(f.Checksum)
}

// Fields decodes the header.
func (b UDP) Fields() UDPFields {
	_ = b[UDPSize-1]
	return UDPFields{SrcPort: b.SourcePort(), DstPort: b.DestinationPort(), Length: b.Length(), Checksum: b.Checksum()}
}

// CalculateChecksum returns the checksum a datagram with this header and
// payload (the bytes after the header, Length()−8 of them) should carry
// between src and dst (RFC 768; RFC 8200 §8.1 for IPv6), with 0 sent as
// 0xFFFF. The header's own checksum field is taken as zero. 4-byte
// addresses select the IPv4 pseudo-header, 16-byte ones (IPv4-mapped
// included) the IPv6 one, so pass the addresses as the IP header holds them.
func (b UDP) CalculateChecksum(src, dst netip.Addr, payload []byte) uint16 {
	var sum uint32
	length := uint32(UDPSize + len(payload))
	if src.Is4() && dst.Is4() {
		a, c := src.As4(), dst.As4()
		sum = checksumAdd(sum, a[:])
		sum = checksumAdd(sum, c[:])
		sum += IPProtocolUDP + length
	} else {
		a, c := src.As16(), dst.As16()
		sum = checksumAdd(sum, a[:])
		sum = checksumAdd(sum, c[:])
		sum += length>>16 + length&0xffff + IPProtocolUDP
	}
	sum = checksumAdd(sum, b[:udpChecksum])
	sum = checksumAdd(sum, payload)
	c := ^checksumFold(sum)
	if c == 0 {
		c = 0xffff
	}
	return c
}

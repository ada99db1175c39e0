package wire

import "encoding/binary"

// Ethernet is a view of an Ethernet II header: destination MAC, source MAC,
// EtherType. The FCS is not part of captured or socket frames and is not
// modelled.
type Ethernet []byte

const (
	ethDst  = 0
	ethSrc  = 6
	ethType = 12
)

// EthernetSize is the size of an untagged Ethernet header.
const EthernetSize = 14

// EtherTypes used by RoCEv2 framing.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q customer tag
)

// MAC is an Ethernet address.
type MAC [6]byte

// EthernetFields holds the fields of an Ethernet header.
type EthernetFields struct {
	Dst, Src  MAC
	EtherType uint16
}

// Dst returns the destination address.
func (b Ethernet) Dst() MAC { return MAC(b[ethDst : ethDst+6]) }

// SetDst sets the destination address.
func (b Ethernet) SetDst(m MAC) { copy(b[ethDst:ethDst+6], m[:]) }

// Src returns the source address.
func (b Ethernet) Src() MAC { return MAC(b[ethSrc : ethSrc+6]) }

// SetSrc sets the source address.
func (b Ethernet) SetSrc(m MAC) { copy(b[ethSrc:ethSrc+6], m[:]) }

// EtherType returns the EtherType (0x8100 when a VLAN tag follows).
func (b Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(b[ethType:]) }

// SetEtherType sets the EtherType.
func (b Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(b[ethType:], t) }

// Encode writes the Ethernet header from f.
func (b Ethernet) Encode(f *EthernetFields) {
	_ = b[EthernetSize-1]
	b.SetDst(f.Dst)
	b.SetSrc(f.Src)
	b.SetEtherType(f.EtherType)
}

// Fields decodes the Ethernet header.
func (b Ethernet) Fields() EthernetFields {
	_ = b[EthernetSize-1]
	return EthernetFields{Dst: b.Dst(), Src: b.Src(), EtherType: b.EtherType()}
}

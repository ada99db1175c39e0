package wire

import "encoding/binary"

// VLAN is a view of the 4 bytes an IEEE 802.1Q tag adds after the source
// MAC, starting at its TCI: priority (3 bits), drop eligible (1), VLAN ID
// (12), then the EtherType of what follows. RoCEv2 deployments tag traffic
// to carry the PFC priority.
type VLAN []byte

const (
	vlanTCI       = 0
	vlanEtherType = 2
	vlanPCPShift  = 13
	vlanDEI       = 0x1000
	vlanIDMask    = 0x0fff
)

// VLANSize is the size of the tag after the TPID (which sits in the
// Ethernet header's EtherType position).
const VLANSize = 4

// VLANFields holds the fields of an 802.1Q tag.
type VLANFields struct {
	Priority  uint8  // PCP, 3 bits
	DropElig  bool   // DEI
	ID        uint16 // VID, 12 bits
	EtherType uint16 // of the payload
}

// TCI returns the tag control information.
func (b VLAN) TCI() uint16 { return binary.BigEndian.Uint16(b[vlanTCI:]) }

// Priority returns the priority code point.
func (b VLAN) Priority() uint8 { return uint8(b.TCI() >> vlanPCPShift) }

// DropEligible returns the DEI bit.
func (b VLAN) DropEligible() bool { return b.TCI()&vlanDEI != 0 }

// ID returns the VLAN identifier.
func (b VLAN) ID() uint16 { return b.TCI() & vlanIDMask }

// EtherType returns the EtherType of the tagged payload.
func (b VLAN) EtherType() uint16 { return binary.BigEndian.Uint16(b[vlanEtherType:]) }

// SetEtherType sets the EtherType of the tagged payload.
func (b VLAN) SetEtherType(t uint16) { binary.BigEndian.PutUint16(b[vlanEtherType:], t) }

// Encode writes the tag from f.
func (b VLAN) Encode(f *VLANFields) {
	tci := uint16(f.Priority&7)<<vlanPCPShift | f.ID&vlanIDMask
	if f.DropElig {
		tci |= vlanDEI
	}
	binary.BigEndian.PutUint16(b[vlanTCI:], tci)
	b.SetEtherType(f.EtherType)
}

// Fields decodes the tag.
func (b VLAN) Fields() VLANFields {
	_ = b[VLANSize-1]
	return VLANFields{Priority: b.Priority(), DropElig: b.DropEligible(), ID: b.ID(), EtherType: b.EtherType()}
}

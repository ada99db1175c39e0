package wire

import "encoding/binary"

// FETH is a view of the 4-byte Flush Extended Transport Header of the IBTA
// Memory Placement Extensions (rxe_hdr.h struct rxe_feth), carried before the
// RETH by RC FLUSH: selectivity level in bits 5:4, placement type in bits
// 3:0, the upper 26 bits reserved.
type FETH []byte

const (
	fethPLTMask  = 0x0000000f
	fethSELMask  = 0x00000030
	fethSELShift = 4
	fethResvMask = 0xffffffc0
)

// FETHSize is the size of the FETH.
const FETHSize = 4

// FETHFields holds the fields of a FETH.
type FETHFields struct {
	SelectivityLevel uint8  // 2 bits
	PlacementType    uint8  // 4 bits
	Reserved         uint32 // the upper 26 bits, shifted down
}

func (b FETH) word() uint32 { return binary.BigEndian.Uint32(b[:FETHSize]) }

// PlacementType returns the placement type (bits 3:0).
func (b FETH) PlacementType() uint8 { return uint8(b.word() & fethPLTMask) }

// SelectivityLevel returns the selectivity level (bits 5:4).
func (b FETH) SelectivityLevel() uint8 {
	return uint8(b.word() & fethSELMask >> fethSELShift)
}

// SetPlacementType sets the placement type; only the low 4 bits are used.
func (b FETH) SetPlacementType(v uint8) {
	binary.BigEndian.PutUint32(b[:FETHSize], b.word()&^fethPLTMask|uint32(v)&fethPLTMask)
}

// SetSelectivityLevel sets the selectivity level; only the low 2 bits are used.
func (b FETH) SetSelectivityLevel(v uint8) {
	binary.BigEndian.PutUint32(b[:FETHSize], b.word()&^fethSELMask|uint32(v)<<fethSELShift&fethSELMask)
}

// Encode writes every byte of the FETH from f.
func (b FETH) Encode(f *FETHFields) {
	w := uint32(f.PlacementType)&fethPLTMask |
		uint32(f.SelectivityLevel)<<fethSELShift&fethSELMask |
		f.Reserved<<6&fethResvMask
	binary.BigEndian.PutUint32(b[:FETHSize], w)
}

// Fields decodes the FETH.
func (b FETH) Fields() FETHFields {
	w := b.word()
	return FETHFields{
		SelectivityLevel: uint8(w & fethSELMask >> fethSELShift),
		PlacementType:    uint8(w & fethPLTMask),
		Reserved:         w & fethResvMask >> 6,
	}
}

package wire

import "encoding/binary"

// RDETH is a view of the 4-byte Reliable Datagram Extended Transport Header
// (IBTA Vol 1 §9.3.1): 8 reserved bits and a 24-bit EE context. RoCEv2
// devices (rxe, irdma) carry no RD traffic; the view exists so the header
// table is complete and RD packets can be recognised and rejected by name.
type RDETH []byte

const rdethEEC = 0 // 24 bits in the low bytes of the word

// RDETHSize is the size of the RDETH.
const RDETHSize = 4

// RDETHFields holds the fields of an RDETH.
type RDETHFields struct {
	Resv8     uint8
	EEContext uint32 // 24 bits
}

// EEContext returns the end-to-end context.
func (b RDETH) EEContext() uint32 { return getUint24(b[rdethEEC+1:]) }

// SetEEContext sets the end-to-end context; only the low 24 bits are used.
func (b RDETH) SetEEContext(v uint32) { putUint24(b[rdethEEC+1:], v) }

// Resv8 returns the reserved byte.
func (b RDETH) Resv8() uint8 { return b[0] }

// SetResv8 sets the reserved byte.
func (b RDETH) SetResv8(v uint8) { b[0] = v }

// Encode writes every byte of the RDETH from f.
func (b RDETH) Encode(f *RDETHFields) {
	binary.BigEndian.PutUint32(b[:RDETHSize], uint32(f.Resv8)<<24|f.EEContext&0xffffff)
}

// Fields decodes the RDETH.
func (b RDETH) Fields() RDETHFields {
	_ = b[RDETHSize-1]
	return RDETHFields{Resv8: b.Resv8(), EEContext: b.EEContext()}
}

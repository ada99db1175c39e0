package wire

import "encoding/binary"

// DETH is a view of the 8-byte Datagram Extended Transport Header (IBTA
// Vol 1 §9.3.2, rxe_hdr.h struct rxe_deth), carried by UD packets:
//
//	+---------------------------------------------------------------+
//	|                            Q_Key                              |
//	+---------------+-----------------------------------------------+
//	|    Reserved   |                 Source QP                     |
//	+---------------+-----------------------------------------------+
type DETH []byte

const (
	dethQKey  = 0
	dethSrcQP = 4 // 24 bits in the low bytes of the word
)

// DETHSize is the size of the DETH.
const DETHSize = 8

// GSIQKey is the Q_Key of QP1 (IBTA §9.6.1.1.1, rxe GSI_QKEY).
const GSIQKey = 0x80010000

// DETHFields holds the fields of a DETH.
type DETHFields struct {
	QKey  uint32
	Resv8 uint8
	SrcQP uint32 // 24 bits
}

// QKey returns the queue key.
func (b DETH) QKey() uint32 { return binary.BigEndian.Uint32(b[dethQKey:]) }

// SetQKey sets the queue key.
func (b DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(b[dethQKey:], k) }

// Resv8 returns the reserved byte.
func (b DETH) Resv8() uint8 { return b[dethSrcQP] }

// SetResv8 sets the reserved byte.
func (b DETH) SetResv8(v uint8) { b[dethSrcQP] = v }

// SrcQP returns the source QP number.
func (b DETH) SrcQP() uint32 { return getUint24(b[dethSrcQP+1:]) }

// SetSrcQP sets the source QP number; only the low 24 bits are used.
func (b DETH) SetSrcQP(qpn uint32) { putUint24(b[dethSrcQP+1:], qpn) }

// Encode writes every byte of the DETH from f.
func (b DETH) Encode(f *DETHFields) {
	_ = b[DETHSize-1]
	binary.BigEndian.PutUint32(b[dethQKey:], f.QKey)
	binary.BigEndian.PutUint32(b[dethSrcQP:], uint32(f.Resv8)<<24|f.SrcQP&QPNMask)
}

// Fields decodes the DETH.
func (b DETH) Fields() DETHFields {
	_ = b[DETHSize-1]
	return DETHFields{QKey: b.QKey(), Resv8: b.Resv8(), SrcQP: b.SrcQP()}
}

package wire

import "encoding/binary"

// IETH is a view of the 4-byte Invalidate Extended Transport Header (IBTA
// Vol 1 §9.3.8): the R_Key the responder invalidates on SEND with Invalidate.
type IETH []byte

const iethRKey = 0

// IETHSize is the size of the IETH.
const IETHSize = 4

// IETHFields holds the field of an IETH.
type IETHFields struct {
	RKey uint32
}

// RKey returns the R_Key to invalidate.
func (b IETH) RKey() uint32 { return binary.BigEndian.Uint32(b[iethRKey:]) }

// SetRKey sets the R_Key to invalidate.
func (b IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[iethRKey:], k) }

// Encode writes the IETH from f.
func (b IETH) Encode(f *IETHFields) { b.SetRKey(f.RKey) }

// Fields decodes the IETH.
func (b IETH) Fields() IETHFields { return IETHFields{RKey: b.RKey()} }

package wire

import "encoding/binary"

// AtomicETH is a view of the 28-byte Atomic Extended Transport Header (IBTA
// Vol 1 §9.3.4, rxe_hdr.h struct rxe_atmeth), carried by RC Compare Swap and
// Fetch Add: virtual address (64), R_Key (32), swap-or-add data (64),
// compare data (64). The VA must be 8-byte aligned (checked by responders,
// not by the wire gate).
type AtomicETH []byte

const (
	atomicVA      = 0
	atomicRKey    = 8
	atomicSwapAdd = 12
	atomicCompare = 20
)

// AtomicETHSize is the size of the AtomicETH.
const AtomicETHSize = 28

// AtomicETHFields holds the fields of an AtomicETH.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64 // swap data for Compare Swap, add data for Fetch Add
	Compare uint64
}

// VA returns the virtual address.
func (b AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(b[atomicVA:]) }

// SetVA sets the virtual address.
func (b AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64(b[atomicVA:], va) }

// RKey returns the remote key.
func (b AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(b[atomicRKey:]) }

// SetRKey sets the remote key.
func (b AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[atomicRKey:], k) }

// SwapAdd returns the swap (Compare Swap) or add (Fetch Add) operand.
func (b AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(b[atomicSwapAdd:]) }

// SetSwapAdd sets the swap or add operand.
func (b AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(b[atomicSwapAdd:], v) }

// Compare returns the compare operand.
func (b AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(b[atomicCompare:]) }

// SetCompare sets the compare operand.
func (b AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(b[atomicCompare:], v) }

// Encode writes every byte of the AtomicETH from f.
func (b AtomicETH) Encode(f *AtomicETHFields) {
	_ = b[AtomicETHSize-1]
	b.SetVA(f.VA)
	b.SetRKey(f.RKey)
	b.SetSwapAdd(f.SwapAdd)
	b.SetCompare(f.Compare)
}

// Fields decodes the AtomicETH.
func (b AtomicETH) Fields() AtomicETHFields {
	_ = b[AtomicETHSize-1]
	return AtomicETHFields{VA: b.VA(), RKey: b.RKey(), SwapAdd: b.SwapAdd(), Compare: b.Compare()}
}

package wire

import "encoding/binary"

// RETH is a view of the 16-byte RDMA Extended Transport Header (IBTA Vol 1
// §9.3.3, rxe_hdr.h struct rxe_reth): virtual address (64), R_Key (32), DMA
// length (32). It is carried by RDMA WRITE First/Only, RDMA READ Request,
// FLUSH and ATOMIC WRITE; its DMA length is the whole message's.
type RETH []byte

const (
	rethVA     = 0
	rethRKey   = 8
	rethDMALen = 12
)

// RETHSize is the size of the RETH.
const RETHSize = 16

// RETHFields holds the fields of a RETH.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// VA returns the virtual address.
func (b RETH) VA() uint64 { return binary.BigEndian.Uint64(b[rethVA:]) }

// SetVA sets the virtual address.
func (b RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(b[rethVA:], va) }

// RKey returns the remote key.
func (b RETH) RKey() uint32 { return binary.BigEndian.Uint32(b[rethRKey:]) }

// SetRKey sets the remote key.
func (b RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[rethRKey:], k) }

// DMALen returns the DMA length of the whole message.
func (b RETH) DMALen() uint32 { return binary.BigEndian.Uint32(b[rethDMALen:]) }

// SetDMALen sets the DMA length.
func (b RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(b[rethDMALen:], n) }

// Encode writes every byte of the RETH from f.
func (b RETH) Encode(f *RETHFields) {
	_ = b[RETHSize-1]
	b.SetVA(f.VA)
	b.SetRKey(f.RKey)
	b.SetDMALen(f.DMALen)
}

// Fields decodes the RETH.
func (b RETH) Fields() RETHFields {
	_ = b[RETHSize-1]
	return RETHFields{VA: b.VA(), RKey: b.RKey(), DMALen: b.DMALen()}
}

package wire

import "encoding/binary"

// AtomicAckETH is a view of the 8-byte Atomic Acknowledge Extended Transport
// Header (IBTA Vol 1 §9.3.6, rxe_hdr.h struct rxe_atmack): the original
// 64-bit value at the remote address before the atomic operation.
type AtomicAckETH []byte

const atomicAckOrig = 0

// AtomicAckETHSize is the size of the AtomicAckETH.
const AtomicAckETHSize = 8

// AtomicAckETHFields holds the fields of an AtomicAckETH.
type AtomicAckETHFields struct {
	OrigRemoteData uint64
}

// OrigRemoteData returns the original remote data.
func (b AtomicAckETH) OrigRemoteData() uint64 {
	return binary.BigEndian.Uint64(b[atomicAckOrig:])
}

// SetOrigRemoteData sets the original remote data.
func (b AtomicAckETH) SetOrigRemoteData(v uint64) {
	binary.BigEndian.PutUint64(b[atomicAckOrig:], v)
}

// Encode writes every byte of the AtomicAckETH from f.
func (b AtomicAckETH) Encode(f *AtomicAckETHFields) { b.SetOrigRemoteData(f.OrigRemoteData) }

// Fields decodes the AtomicAckETH.
func (b AtomicAckETH) Fields() AtomicAckETHFields {
	return AtomicAckETHFields{OrigRemoteData: b.OrigRemoteData()}
}

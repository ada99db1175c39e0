package wire

import "encoding/binary"

// AETH is a view of the 4-byte ACK Extended Transport Header (IBTA Vol 1
// §9.3.5, rxe_hdr.h struct rxe_aeth): an 8-bit syndrome and the 24-bit
// message sequence number. It is carried by Acknowledge, Atomic Acknowledge
// and RDMA READ Response First/Last/Only.
type AETH []byte

const (
	aethSyndrome = 0
	aethMSN      = 0 // 24 bits in the low bytes of the word
)

// AETHSize is the size of the AETH.
const AETHSize = 4

// MSNMask covers the 24 bits of a message sequence number.
const MSNMask = 1<<24 - 1

// AETHFields holds the fields of an AETH.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32 // 24 bits
}

// Syndrome returns the syndrome byte; see Syndrome for its decoding.
func (b AETH) Syndrome() Syndrome { return Syndrome(b[aethSyndrome]) }

// SetSyndrome sets the syndrome byte.
func (b AETH) SetSyndrome(s Syndrome) { b[aethSyndrome] = byte(s) }

// MSN returns the message sequence number.
func (b AETH) MSN() uint32 { return getUint24(b[aethMSN+1:]) }

// SetMSN sets the message sequence number; only the low 24 bits are used.
func (b AETH) SetMSN(msn uint32) { putUint24(b[aethMSN+1:], msn) }

// Encode writes every byte of the AETH from f.
func (b AETH) Encode(f *AETHFields) {
	binary.BigEndian.PutUint32(b[:AETHSize], uint32(f.Syndrome)<<24|f.MSN&MSNMask)
}

// Fields decodes the AETH.
func (b AETH) Fields() AETHFields {
	_ = b[AETHSize-1]
	return AETHFields{Syndrome: b.Syndrome(), MSN: b.MSN()}
}

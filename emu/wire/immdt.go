package wire

import "encoding/binary"

// ImmDt is a view of the 4-byte Immediate Data extended header (IBTA Vol 1
// §9.3.7). The value is opaque: verbs hand it over as a big-endian __be32
// (ibv_send_wr.imm_data) and it is delivered unchanged, so Imm returns the
// four wire bytes read big-endian.
type ImmDt []byte

const immdtData = 0

// ImmDtSize is the size of the ImmDt header.
const ImmDtSize = 4

// ImmDtFields holds the field of an ImmDt header.
type ImmDtFields struct {
	Imm uint32
}

// Imm returns the immediate data.
func (b ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(b[immdtData:]) }

// SetImm sets the immediate data.
func (b ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(b[immdtData:], v) }

// Encode writes the ImmDt header from f.
func (b ImmDt) Encode(f *ImmDtFields) { b.SetImm(f.Imm) }

// Fields decodes the ImmDt header.
func (b ImmDt) Fields() ImmDtFields { return ImmDtFields{Imm: b.Imm()} }

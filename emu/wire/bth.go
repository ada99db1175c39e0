package wire

import "encoding/binary"

// BTH is a view of the 12-byte Base Transport Header (IBTA Vol 1 §9.2,
// rxe_hdr.h struct rxe_bth):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad|  TVer |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  Resv6a   |                  DestQP                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |                    PSN                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S = solicited event, M = MigReq, F/B = FECN/BECN (RoCEv2 Annex A17.9),
// A = AckReq. Byte 4 (F, B, Resv6a) is variant: the ICRC covers it as 0xFF.
type BTH []byte

const (
	bthOpcode   = 0
	bthFlags    = 1 // SE, M, PadCnt, TVer
	bthPKey     = 2
	bthECN      = 4 // FECN, BECN, Resv6a
	bthDestQP   = 4 // 24 bits in the low bytes of the word at 4
	bthAckReq   = 8
	bthPSN      = 8 // 24 bits in the low bytes of the word at 8
	bthSE       = 0x80
	bthMigReq   = 0x40
	bthPadShift = 4
	bthPadMask  = 0x30
	bthTVerMask = 0x0f
	bthFECN     = 0x80
	bthBECN     = 0x40
	bthResv6a   = 0x3f
	bthAckBit   = 0x80
	bthResv7    = 0x7f
)

// BTHSize is the size of the BTH.
const BTHSize = 12

// BTHECNOffset is the offset of the BTH byte that holds FECN, BECN and
// Resv6a; the ICRC masks it to 0xFF (rxe_icrc.c rxe_icrc_hdr).
const BTHECNOffset = bthECN

// QPNMask covers the 24 bits of a queue pair number.
const QPNMask = 1<<24 - 1

// Well-known QPNs (IBTA §9.2.1, rxe_recv.c).
const (
	QPNGSI       = 1        // the general services interface QP (QP1)
	QPNMulticast = 0xffffff // the permissive/multicast destination QP
)

// DefaultPKey is the full-membership default partition key rxe and irdma send.
const DefaultPKey = 0xffff

// BTHFields holds every field of a BTH, reserved bits included so that a
// decoded header re-encodes to the same bytes.
type BTHFields struct {
	Opcode   Opcode
	SE       bool  // solicited event
	MigReq   bool  // M
	PadCount uint8 // 0..3
	TVer     uint8 // transport header version, 0
	PKey     uint16
	FECN     bool
	BECN     bool
	Resv6a   uint8  // 6 reserved bits, sent as 0
	DestQP   uint32 // 24 bits
	AckReq   bool
	Resv7    uint8 // 7 reserved bits, sent as 0
	PSN      PSN
}

// Opcode returns the OpCode field.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SetOpcode sets the OpCode field.
func (b BTH) SetOpcode(op Opcode) { b[bthOpcode] = byte(op) }

// SE returns the solicited-event bit.
func (b BTH) SE() bool { return b[bthFlags]&bthSE != 0 }

// SetSE sets the solicited-event bit.
func (b BTH) SetSE(v bool) { setBit(&b[bthFlags], bthSE, v) }

// MigReq returns the M bit.
func (b BTH) MigReq() bool { return b[bthFlags]&bthMigReq != 0 }

// SetMigReq sets the M bit.
func (b BTH) SetMigReq(v bool) { setBit(&b[bthFlags], bthMigReq, v) }

// PadCount returns PadCnt, the number of pad bytes after the payload.
func (b BTH) PadCount() uint8 { return (b[bthFlags] & bthPadMask) >> bthPadShift }

// SetPadCount sets PadCnt; only the low 2 bits of n are used.
func (b BTH) SetPadCount(n uint8) {
	b[bthFlags] = b[bthFlags]&^bthPadMask | (n<<bthPadShift)&bthPadMask
}

// TVer returns the transport header version.
func (b BTH) TVer() uint8 { return b[bthFlags] & bthTVerMask }

// SetTVer sets the transport header version; only the low 4 bits are used.
func (b BTH) SetTVer(v uint8) { b[bthFlags] = b[bthFlags]&^bthTVerMask | v&bthTVerMask }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[bthPKey:]) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[bthPKey:], k) }

// FECN returns the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[bthECN]&bthFECN != 0 }

// SetFECN sets the FECN bit.
func (b BTH) SetFECN(v bool) { setBit(&b[bthECN], bthFECN, v) }

// BECN returns the backward explicit congestion notification bit.
func (b BTH) BECN() bool { return b[bthECN]&bthBECN != 0 }

// SetBECN sets the BECN bit.
func (b BTH) SetBECN(v bool) { setBit(&b[bthECN], bthBECN, v) }

// Resv6a returns the 6 reserved bits of byte 4.
func (b BTH) Resv6a() uint8 { return b[bthECN] & bthResv6a }

// SetResv6a sets the 6 reserved bits of byte 4.
func (b BTH) SetResv6a(v uint8) { b[bthECN] = b[bthECN]&^bthResv6a | v&bthResv6a }

// DestQP returns the destination QP number.
func (b BTH) DestQP() uint32 { return getUint24(b[bthDestQP+1:]) }

// SetDestQP sets the destination QP number; only the low 24 bits are used.
func (b BTH) SetDestQP(qpn uint32) { putUint24(b[bthDestQP+1:], qpn) }

// AckReq returns the acknowledge-request bit.
func (b BTH) AckReq() bool { return b[bthAckReq]&bthAckBit != 0 }

// SetAckReq sets the acknowledge-request bit.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAckReq], bthAckBit, v) }

// Resv7 returns the 7 reserved bits of byte 8.
func (b BTH) Resv7() uint8 { return b[bthAckReq] & bthResv7 }

// SetResv7 sets the 7 reserved bits of byte 8.
func (b BTH) SetResv7(v uint8) { b[bthAckReq] = b[bthAckReq]&^bthResv7 | v&bthResv7 }

// PSN returns the packet sequence number.
func (b BTH) PSN() PSN { return PSN(getUint24(b[bthPSN+1:])) }

// SetPSN sets the packet sequence number; only the low 24 bits are used.
func (b BTH) SetPSN(p PSN) { putUint24(b[bthPSN+1:], uint32(p)) }

// Encode writes every byte of the BTH from f.
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHSize-1]
	b[bthOpcode] = byte(f.Opcode)
	var flags byte
	if f.SE {
		flags |= bthSE
	}
	if f.MigReq {
		flags |= bthMigReq
	}
	flags |= (f.PadCount << bthPadShift) & bthPadMask
	flags |= f.TVer & bthTVerMask
	b[bthFlags] = flags
	binary.BigEndian.PutUint16(b[bthPKey:], f.PKey)
	binary.BigEndian.PutUint32(b[bthDestQP:], f.DestQP&QPNMask)
	var ecn byte
	if f.FECN {
		ecn |= bthFECN
	}
	if f.BECN {
		ecn |= bthBECN
	}
	b[bthECN] = ecn | f.Resv6a&bthResv6a
	binary.BigEndian.PutUint32(b[bthPSN:], uint32(f.PSN&PSNMask))
	var ack byte
	if f.AckReq {
		ack |= bthAckBit
	}
	b[bthAckReq] = ack | f.Resv7&bthResv7
}

// Fields decodes every field of the BTH.
func (b BTH) Fields() BTHFields {
	_ = b[BTHSize-1]
	return BTHFields{
		Opcode:   b.Opcode(),
		SE:       b.SE(),
		MigReq:   b.MigReq(),
		PadCount: b.PadCount(),
		TVer:     b.TVer(),
		PKey:     b.PKey(),
		FECN:     b.FECN(),
		BECN:     b.BECN(),
		Resv6a:   b.Resv6a(),
		DestQP:   b.DestQP(),
		AckReq:   b.AckReq(),
		Resv7:    b.Resv7(),
		PSN:      b.PSN(),
	}
}

func setBit(p *byte, mask byte, v bool) {
	if v {
		*p |= mask
	} else {
		*p &^= mask
	}
}

// getUint24 reads a big-endian 24-bit value from b[0:3].
func getUint24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

// putUint24 writes the low 24 bits of v big-endian into b[0:3].
func putUint24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

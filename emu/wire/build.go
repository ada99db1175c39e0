package wire

// PacketFields describes a RoCEv2 transport packet to build: the BTH and
// every extension header. EncodePacket writes only the headers the opcode
// carries (IBTA Table 38 / rxe_opcode.c) and ignores the others, so one
// PacketFields can be reused across the packets of a message.
type PacketFields struct {
	// BTH; PadCount is ignored and derived from the payload length.
	BTH BTHFields

	RDETH        RDETHFields
	DETH         DETHFields
	FETH         FETHFields
	RETH         RETHFields
	AtomicETH    AtomicETHFields
	AETH         AETHFields
	AtomicAckETH AtomicAckETHFields
	ImmDt        ImmDtFields
	IETH         IETHFields
}

// PacketLen returns the UDP payload length of a packet with opcode op and
// payloadLen payload bytes: headers, payload, pad and ICRC (rxe_hdr.h:
// paylen = header_size + payload + pad + RXE_ICRC_SIZE). It returns 0 for
// an invalid opcode.
func PacketLen(op Opcode, payloadLen int) int {
	e := &opcodeTable[op]
	if e.name == "" {
		return 0
	}
	return int(e.hdrLen) + payloadLen + PadLen(payloadLen) + ICRCSize
}

// EncodePacket writes the headers of a packet described by f with room for
// payloadLen payload bytes at the start of b, zeroes the pad and the ICRC,
// and fills p with views of the result. The caller copies the payload into
// p.Payload (or has it DMA'd there) and then computes the ICRC, which needs
// the IP and UDP headers (see EncodeFrame and Frame.Seal). It returns the
// packet length.
//
// The payload length must obey the opcode's rule as far as Parse can check
// it (ErrBadLength), so that everything built here passes the gate; the
// path-MTU rule is the caller's (Opcode.CheckPayloadLen). Nothing is
// allocated on success.
func EncodePacket(b []byte, f *PacketFields, payloadLen int, p *Packet) (int, error) {
	op := f.BTH.Opcode
	e := &opcodeTable[op]
	if e.name == "" {
		return 0, &ParseError{Reason: ErrInvalidOpcode, Part: "opcode", Value: int(op)}
	}
	if !e.checkStructural(payloadLen) {
		return 0, opcodeError(ErrBadLength, op, "payload", payloadNeed(e.payload, payloadLen), payloadLen)
	}
	pad := PadLen(payloadLen)
	n := int(e.hdrLen) + payloadLen + pad + ICRCSize
	if len(b) < n {
		return 0, opcodeError(ErrBufferTooSmall, op, "packet", n, len(b))
	}
	b = b[:n]
	*p = Packet{}
	p.split(b, e, payloadLen, pad)

	bf := f.BTH
	bf.PadCount = uint8(pad)
	p.BTH.Encode(&bf)
	if p.RDETH != nil {
		p.RDETH.Encode(&f.RDETH)
	}
	if p.DETH != nil {
		p.DETH.Encode(&f.DETH)
	}
	if p.FETH != nil {
		p.FETH.Encode(&f.FETH)
	}
	if p.RETH != nil {
		p.RETH.Encode(&f.RETH)
	}
	if p.AtomicETH != nil {
		p.AtomicETH.Encode(&f.AtomicETH)
	}
	if p.AETH != nil {
		p.AETH.Encode(&f.AETH)
	}
	if p.AtomicAckETH != nil {
		p.AtomicAckETH.Encode(&f.AtomicAckETH)
	}
	if p.ImmDt != nil {
		p.ImmDt.Encode(&f.ImmDt)
	}
	if p.IETH != nil {
		p.IETH.Encode(&f.IETH)
	}
	clear(p.Pad)
	clear(p.ICRCBytes)
	return n, nil
}

// Fields decodes the BTH and every extension header p carries; headers p
// does not carry are left zero. EncodePacket(b, &fields, len(p.Payload), …)
// reproduces p's headers byte for byte.
func (p *Packet) Fields() PacketFields {
	var f PacketFields
	if p.BTH == nil {
		return f
	}
	f.BTH = p.BTH.Fields()
	if p.RDETH != nil {
		f.RDETH = p.RDETH.Fields()
	}
	if p.DETH != nil {
		f.DETH = p.DETH.Fields()
	}
	if p.FETH != nil {
		f.FETH = p.FETH.Fields()
	}
	if p.RETH != nil {
		f.RETH = p.RETH.Fields()
	}
	if p.AtomicETH != nil {
		f.AtomicETH = p.AtomicETH.Fields()
	}
	if p.AETH != nil {
		f.AETH = p.AETH.Fields()
	}
	if p.AtomicAckETH != nil {
		f.AtomicAckETH = p.AtomicAckETH.Fields()
	}
	if p.ImmDt != nil {
		f.ImmDt = p.ImmDt.Fields()
	}
	if p.IETH != nil {
		f.IETH = p.IETH.Fields()
	}
	return f
}

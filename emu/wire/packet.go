package wire

import "encoding/binary"

// ICRCSize is the size of the invariant CRC that ends every RoCEv2 packet.
const ICRCSize = 4

// MinPacketSize is the smallest valid UDP payload: a BTH and an ICRC.
const MinPacketSize = BTHSize + ICRCSize

// MaxPacketSize is the largest valid UDP payload: the longest header chain
// (BTH+RETH+ImmDt), MaxPMTU of payload and the ICRC.
const MaxPacketSize = BTHSize + RETHSize + ImmDtSize + MaxPMTU + ICRCSize

// Packet is a RoCEv2 transport packet (a UDP payload: BTH, extension
// headers, payload, pad, ICRC) split into views by Parse or EncodePacket.
// The views alias the input; extension header views the opcode does not
// carry are nil.
type Packet struct {
	BTH BTH

	RDETH        RDETH
	DETH         DETH
	FETH         FETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH

	// Payload is the data after the headers, without pad. For a CNP it is
	// the 16 reserved bytes.
	Payload []byte
	// Pad is the PadCnt bytes after the payload (zero on transmit; not
	// checked on receive, like rxe).
	Pad []byte
	// ICRCBytes is the 4-byte ICRC as on the wire (least significant byte
	// first); see ICRC.
	ICRCBytes []byte
	// Raw is the whole packet, BTH through ICRC.
	Raw []byte
}

// Opcode returns the BTH opcode.
func (p *Packet) Opcode() Opcode { return p.BTH.Opcode() }

// HeaderLen returns the size of the BTH and extension headers.
func (p *Packet) HeaderLen() int { return p.Opcode().HeaderLen() }

// ICRC returns the ICRC the packet carries. Like the Ethernet FCS it is
// sent least significant byte first (IBTA §7.8.1), so it is read
// little-endian.
func (p *Packet) ICRC() uint32 { return binary.LittleEndian.Uint32(p.ICRCBytes) }

// Parse is the validation gate for a RoCEv2 transport packet: b is a UDP
// payload from the BTH to the ICRC. It checks, in rxe's order (rxe_recv.c
// hdr_check, rxe_hdr.h):
//
//   - the BTH and ICRC fit (ErrTruncated);
//   - TVer is 0 (ErrBadTVer);
//   - the opcode is valid for its transport (ErrInvalidOpcode);
//   - the opcode's extension headers fit (ErrTruncated);
//   - payload+pad is a whole number of 4-byte words and PadCnt fits in it
//     (ErrBadLength, ErrBadPad);
//   - the payload length obeys the opcode's rule as far as it can be known
//     without the path MTU (ErrBadLength).
//
// On success p holds views into b; Parse does not allocate. On failure p's
// contents are unspecified and the error is a *ParseError. The ICRC is not
// checked here: it covers the IP and UDP headers, see Frame.VerifyICRC.
func Parse(b []byte, p *Packet) error {
	*p = Packet{}
	if len(b) < MinPacketSize {
		return lengthError(ErrTruncated, "BTH", MinPacketSize, len(b))
	}
	bth := BTH(b[:BTHSize])
	if v := bth.TVer(); v != 0 {
		return &ParseError{Reason: ErrBadTVer, Part: "BTH TVer", Value: int(v)}
	}
	op := bth.Opcode()
	e := &opcodeTable[op]
	if e.name == "" {
		return &ParseError{Reason: ErrInvalidOpcode, Part: "opcode " + op.Transport().String(), Value: int(op)}
	}
	hdrLen := int(e.hdrLen)
	if len(b) < hdrLen+ICRCSize {
		// Name the first header that does not fit.
		part := "ICRC"
		for h := e.headers; h != 0; h &= h - 1 {
			x := h & -h
			if e.headers.Offset(x)+int(headerSize[bitIndex(x)]) > len(b)-ICRCSize {
				part = x.name()
				break
			}
		}
		return opcodeError(ErrTruncated, op, part, hdrLen+ICRCSize, len(b))
	}
	rest := len(b) - hdrLen - ICRCSize // payload + pad
	if rest&3 != 0 {
		return opcodeError(ErrBadLength, op, "payload+pad not a multiple of 4", rest+PadLen(rest), rest)
	}
	pad := int(bth.PadCount())
	if pad > rest || (pad != 0 && (e.payload == PayloadPMTU || e.payload == PayloadAtomicWrite || e.payload == PayloadCNP)) {
		return &ParseError{Reason: ErrBadPad, Part: "PadCnt", Opcode: op, HasOpcode: true, Value: pad}
	}
	n := rest - pad
	if !e.checkStructural(n) {
		return opcodeError(ErrBadLength, op, "payload", payloadNeed(e.payload, n), n)
	}

	p.split(b, e, n, pad)
	return nil
}

// split fills p's views for a packet b whose opcode entry is e, with n
// payload bytes and pad pad bytes; the lengths have been checked.
func (p *Packet) split(b []byte, e *opcodeInfo, n, pad int) {
	p.BTH = BTH(b[:BTHSize])
	if h := e.headers; h != 0 {
		off := BTHSize
		if h&HdrRDETH != 0 {
			p.RDETH = RDETH(b[off : off+RDETHSize])
			off += RDETHSize
		}
		if h&HdrDETH != 0 {
			p.DETH = DETH(b[off : off+DETHSize])
			off += DETHSize
		}
		if h&HdrFETH != 0 {
			p.FETH = FETH(b[off : off+FETHSize])
			off += FETHSize
		}
		if h&HdrRETH != 0 {
			p.RETH = RETH(b[off : off+RETHSize])
			off += RETHSize
		}
		if h&HdrAtomicETH != 0 {
			p.AtomicETH = AtomicETH(b[off : off+AtomicETHSize])
			off += AtomicETHSize
		}
		if h&HdrAETH != 0 {
			p.AETH = AETH(b[off : off+AETHSize])
			off += AETHSize
		}
		if h&HdrAtomicAckETH != 0 {
			p.AtomicAckETH = AtomicAckETH(b[off : off+AtomicAckETHSize])
			off += AtomicAckETHSize
		}
		if h&HdrImmDt != 0 {
			p.ImmDt = ImmDt(b[off : off+ImmDtSize])
			off += ImmDtSize
		}
		if h&HdrIETH != 0 {
			p.IETH = IETH(b[off : off+IETHSize])
		}
	}
	hdrLen := int(e.hdrLen)
	end := hdrLen + n
	p.Payload = b[hdrLen:end:end]
	p.Pad = b[end : end+pad : end+pad]
	p.ICRCBytes = b[end+pad : end+pad+ICRCSize]
	p.Raw = b[:end+pad+ICRCSize]
}

// payloadNeed gives a representative "needed" length for an ErrBadLength
// message.
func payloadNeed(r PayloadRule, have int) int {
	switch r {
	case PayloadNone:
		return 0
	case PayloadPMTU:
		for m := MinPMTU; m <= MaxPMTU; m <<= 1 {
			if have <= m {
				return m
			}
		}
		return MaxPMTU
	case PayloadLast:
		if have < 1 {
			return 1
		}
		return MaxPMTU
	case PayloadAtomicWrite:
		return AtomicWritePayloadSize
	case PayloadCNP:
		return CNPReservedSize
	}
	return MaxPMTU
}

// bitIndex returns the bit number of the single header x.
func bitIndex(x Headers) int {
	for i := 0; i < numHeaderKinds; i++ {
		if x == 1<<i {
			return i
		}
	}
	return 0
}

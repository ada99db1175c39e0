package wire

import "fmt"

// Opcode is the BTH OpCode (IBTA Vol 1 §9.2.1, Table 38; include/rdma/
// ib_pack.h): bits 7:5 select the transport, bits 4:0 the operation.
type Opcode uint8

// The opcodes RoCEv2 devices carry. Values are transport base (RC 0x00, UC
// 0x20, UD 0x60) plus operation, as in ib_pack.h.
const (
	RCSendFirst              Opcode = 0x00
	RCSendMiddle             Opcode = 0x01
	RCSendLast               Opcode = 0x02
	RCSendLastWithImm        Opcode = 0x03
	RCSendOnly               Opcode = 0x04
	RCSendOnlyWithImm        Opcode = 0x05
	RCRDMAWriteFirst         Opcode = 0x06
	RCRDMAWriteMiddle        Opcode = 0x07
	RCRDMAWriteLast          Opcode = 0x08
	RCRDMAWriteLastWithImm   Opcode = 0x09
	RCRDMAWriteOnly          Opcode = 0x0a
	RCRDMAWriteOnlyWithImm   Opcode = 0x0b
	RCRDMAReadRequest        Opcode = 0x0c
	RCRDMAReadResponseFirst  Opcode = 0x0d
	RCRDMAReadResponseMiddle Opcode = 0x0e
	RCRDMAReadResponseLast   Opcode = 0x0f
	RCRDMAReadResponseOnly   Opcode = 0x10
	RCAcknowledge            Opcode = 0x11
	RCAtomicAcknowledge      Opcode = 0x12
	RCCompareSwap            Opcode = 0x13
	RCFetchAdd               Opcode = 0x14
	// 0x15 is RESYNC, defined for RD only; reserved in RC.
	RCSendLastWithInvalidate Opcode = 0x16
	RCSendOnlyWithInvalidate Opcode = 0x17
	// 0x18..0x1b are reserved.
	RCFlush       Opcode = 0x1c // IBTA Memory Placement Extensions (rxe: IB_OPCODE_RC_FLUSH)
	RCAtomicWrite Opcode = 0x1d // IBTA Memory Placement Extensions (rxe: IB_OPCODE_RC_ATOMIC_WRITE)

	UCSendFirst            Opcode = 0x20
	UCSendMiddle           Opcode = 0x21
	UCSendLast             Opcode = 0x22
	UCSendLastWithImm      Opcode = 0x23
	UCSendOnly             Opcode = 0x24
	UCSendOnlyWithImm      Opcode = 0x25
	UCRDMAWriteFirst       Opcode = 0x26
	UCRDMAWriteMiddle      Opcode = 0x27
	UCRDMAWriteLast        Opcode = 0x28
	UCRDMAWriteLastWithImm Opcode = 0x29
	UCRDMAWriteOnly        Opcode = 0x2a
	UCRDMAWriteOnlyWithImm Opcode = 0x2b

	UDSendOnly        Opcode = 0x64
	UDSendOnlyWithImm Opcode = 0x65

	// CNP is the RoCEv2 congestion notification packet (Annex A17.9.3):
	// BTH with BECN set, 16 reserved bytes, ICRC.
	CNP Opcode = 0x81
)

// Transport is the transport service of an opcode, BTH OpCode bits 7:5.
type Transport uint8

// The transports (IBTA Table 38). RoCEv2 devices carry RC, UC, UD and CNP;
// RD and XRC opcodes are rejected by the gate.
const (
	TransportRC     Transport = 0
	TransportUC     Transport = 1
	TransportRD     Transport = 2
	TransportUD     Transport = 3
	TransportCNP    Transport = 4
	TransportXRC    Transport = 5
	TransportVendor Transport = 7
)

var transportText = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "reserved", "vendor"}

// String returns the short IBTA name of the transport.
func (t Transport) String() string { return transportText[t&7] }

// Position is where a packet sits in its message.
type Position uint8

// The positions. Single-packet operations (READ request, ACK, atomics, CNP)
// are PositionOnly.
const (
	PositionFirst Position = iota + 1
	PositionMiddle
	PositionLast
	PositionOnly
)

var positionText = [...]string{"invalid", "first", "middle", "last", "only"}

// String returns the position's name.
func (p Position) String() string {
	if int(p) < len(positionText) {
		return positionText[p]
	}
	return "invalid"
}

// Operation is what an opcode does, independent of transport and position.
type Operation uint8

// The operations.
const (
	OpSend Operation = iota + 1
	OpRDMAWrite
	OpRDMAReadRequest
	OpRDMAReadResponse
	OpAcknowledge
	OpAtomicAcknowledge
	OpCompareSwap
	OpFetchAdd
	OpFlush
	OpAtomicWrite
	OpCNP
)

var operationText = [...]string{
	"invalid", "SEND", "RDMA WRITE", "RDMA READ request", "RDMA READ response",
	"Acknowledge", "Atomic Acknowledge", "Compare Swap", "Fetch Add", "FLUSH",
	"ATOMIC WRITE", "CNP",
}

// String returns the operation's IBTA name.
func (o Operation) String() string {
	if int(o) < len(operationText) {
		return operationText[o]
	}
	return "invalid"
}

// PayloadRule is an opcode's rule for the payload length (IBTA §9.7.3.1 /
// C9-20..C9-23, enforced by rxe_resp.c check_length and the write length
// checks): packets other than the last of a message carry exactly the
// path MTU.
type PayloadRule uint8

// The payload rules.
const (
	PayloadNone        PayloadRule = iota + 1 // no payload, no pad
	PayloadPMTU                               // first, middle: exactly PMTU, so pad 0
	PayloadLast                               // last: 1..PMTU
	PayloadOnly                               // only: 0..PMTU
	PayloadAtomicWrite                        // ATOMIC WRITE: exactly 8 bytes
	PayloadCNP                                // CNP: 16 reserved bytes
)

var payloadRuleText = [...]string{
	"invalid", "none", "exactly PMTU", "1..PMTU", "0..PMTU", "8 bytes", "16 reserved bytes",
}

// String describes the rule, e.g. "1..PMTU".
func (r PayloadRule) String() string {
	if int(r) < len(payloadRuleText) {
		return payloadRuleText[r]
	}
	return "invalid"
}

// Path MTU bounds (IBTA §7.7.3: 256, 512, 1024, 2048 or 4096 bytes).
const (
	MinPMTU = 256
	MaxPMTU = 4096
)

// Fixed payload sizes.
const (
	AtomicWritePayloadSize = 8
	CNPReservedSize        = 16
)

// IsPMTU reports whether n is one of the five IB path MTUs.
func IsPMTU(n int) bool {
	return n >= MinPMTU && n <= MaxPMTU && n&(n-1) == 0
}

// PadLen returns the pad for a payload of n bytes: (−n) & 3 (IBTA §9.2.4).
func PadLen(n int) int { return -n & 3 }

type opcodeInfo struct {
	name    string // Wireshark's spelling; "" marks an invalid opcode
	op      Operation
	pos     Position
	headers Headers
	payload PayloadRule
	hdrLen  uint8 // BTH + extension headers, filled in by init
}

// opcodeTable is IBTA Table 38 restricted to RC, UC, UD and CNP, with the
// header sets of rxe_opcode.c. Names are Wireshark's OpCodeMap
// (packet-infiniband.c) with trailing blanks dropped; Wireshark has no name
// for FLUSH, ATOMIC WRITE or 0x81 CNP, so those follow the same pattern.
var opcodeTable = [256]opcodeInfo{
	RCSendFirst:              {"RC Send First", OpSend, PositionFirst, 0, PayloadPMTU, 0},
	RCSendMiddle:             {"RC Send Middle", OpSend, PositionMiddle, 0, PayloadPMTU, 0},
	RCSendLast:               {"RC Send Last", OpSend, PositionLast, 0, PayloadLast, 0},
	RCSendLastWithImm:        {"RC Send Last Immediate", OpSend, PositionLast, HdrImmDt, PayloadLast, 0},
	RCSendOnly:               {"RC Send Only", OpSend, PositionOnly, 0, PayloadOnly, 0},
	RCSendOnlyWithImm:        {"RC Send Only Immediate", OpSend, PositionOnly, HdrImmDt, PayloadOnly, 0},
	RCRDMAWriteFirst:         {"RC RDMA Write First", OpRDMAWrite, PositionFirst, HdrRETH, PayloadPMTU, 0},
	RCRDMAWriteMiddle:        {"RC RDMA Write Middle", OpRDMAWrite, PositionMiddle, 0, PayloadPMTU, 0},
	RCRDMAWriteLast:          {"RC RDMA Write Last", OpRDMAWrite, PositionLast, 0, PayloadLast, 0},
	RCRDMAWriteLastWithImm:   {"RC RDMA Write Last Immediate", OpRDMAWrite, PositionLast, HdrImmDt, PayloadLast, 0},
	RCRDMAWriteOnly:          {"RC RDMA Write Only", OpRDMAWrite, PositionOnly, HdrRETH, PayloadOnly, 0},
	RCRDMAWriteOnlyWithImm:   {"RC RDMA Write Only Immediate", OpRDMAWrite, PositionOnly, HdrRETH | HdrImmDt, PayloadOnly, 0},
	RCRDMAReadRequest:        {"RC RDMA Read Request", OpRDMAReadRequest, PositionOnly, HdrRETH, PayloadNone, 0},
	RCRDMAReadResponseFirst:  {"RC RDMA Read Response First", OpRDMAReadResponse, PositionFirst, HdrAETH, PayloadPMTU, 0},
	RCRDMAReadResponseMiddle: {"RC RDMA Read Response Middle", OpRDMAReadResponse, PositionMiddle, 0, PayloadPMTU, 0},
	RCRDMAReadResponseLast:   {"RC RDMA Read Response Last", OpRDMAReadResponse, PositionLast, HdrAETH, PayloadLast, 0},
	RCRDMAReadResponseOnly:   {"RC RDMA Read Response Only", OpRDMAReadResponse, PositionOnly, HdrAETH, PayloadOnly, 0},
	RCAcknowledge:            {"RC Acknowledge", OpAcknowledge, PositionOnly, HdrAETH, PayloadNone, 0},
	RCAtomicAcknowledge:      {"RC Atomic Acknowledge", OpAtomicAcknowledge, PositionOnly, HdrAETH | HdrAtomicAckETH, PayloadNone, 0},
	RCCompareSwap:            {"RC Compare Swap", OpCompareSwap, PositionOnly, HdrAtomicETH, PayloadNone, 0},
	RCFetchAdd:               {"RC Fetch Add", OpFetchAdd, PositionOnly, HdrAtomicETH, PayloadNone, 0},
	RCSendLastWithInvalidate: {"RC Send Last Invalidate", OpSend, PositionLast, HdrIETH, PayloadLast, 0},
	RCSendOnlyWithInvalidate: {"RC Send Only Invalidate", OpSend, PositionOnly, HdrIETH, PayloadOnly, 0},
	RCFlush:                  {"RC Flush", OpFlush, PositionOnly, HdrFETH | HdrRETH, PayloadNone, 0},
	RCAtomicWrite:            {"RC Atomic Write", OpAtomicWrite, PositionOnly, HdrRETH, PayloadAtomicWrite, 0},

	UCSendFirst:            {"UC Send First", OpSend, PositionFirst, 0, PayloadPMTU, 0},
	UCSendMiddle:           {"UC Send Middle", OpSend, PositionMiddle, 0, PayloadPMTU, 0},
	UCSendLast:             {"UC Send Last", OpSend, PositionLast, 0, PayloadLast, 0},
	UCSendLastWithImm:      {"UC Send Last Immediate", OpSend, PositionLast, HdrImmDt, PayloadLast, 0},
	UCSendOnly:             {"UC Send Only", OpSend, PositionOnly, 0, PayloadOnly, 0},
	UCSendOnlyWithImm:      {"UC Send Only Immediate", OpSend, PositionOnly, HdrImmDt, PayloadOnly, 0},
	UCRDMAWriteFirst:       {"UC RDMA Write First", OpRDMAWrite, PositionFirst, HdrRETH, PayloadPMTU, 0},
	UCRDMAWriteMiddle:      {"UC RDMA Write Middle", OpRDMAWrite, PositionMiddle, 0, PayloadPMTU, 0},
	UCRDMAWriteLast:        {"UC RDMA Write Last", OpRDMAWrite, PositionLast, 0, PayloadLast, 0},
	UCRDMAWriteLastWithImm: {"UC RDMA Write Last Immediate", OpRDMAWrite, PositionLast, HdrImmDt, PayloadLast, 0},
	UCRDMAWriteOnly:        {"UC RDMA Write Only", OpRDMAWrite, PositionOnly, HdrRETH, PayloadOnly, 0},
	UCRDMAWriteOnlyWithImm: {"UC RDMA Write Only Immediate", OpRDMAWrite, PositionOnly, HdrRETH | HdrImmDt, PayloadOnly, 0},

	UDSendOnly:        {"UD Send Only", OpSend, PositionOnly, HdrDETH, PayloadOnly, 0},
	UDSendOnlyWithImm: {"UD Send Only Immediate", OpSend, PositionOnly, HdrDETH | HdrImmDt, PayloadOnly, 0},

	CNP: {"CNP", OpCNP, PositionOnly, 0, PayloadCNP, 0},
}

func init() {
	for i := range opcodeTable {
		e := &opcodeTable[i]
		if e.name != "" {
			e.hdrLen = uint8(BTHSize + e.headers.Len())
		}
	}
}

// Opcodes returns every valid opcode in ascending order.
func Opcodes() []Opcode {
	var ops []Opcode
	for i := range opcodeTable {
		if opcodeTable[i].name != "" {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}

// IsValid reports whether o is an opcode RoCEv2 devices carry: defined for
// its transport, and the transport one of RC, UC, UD, CNP.
func (o Opcode) IsValid() bool { return opcodeTable[o].name != "" }

// String returns Wireshark's name for the opcode, e.g. "RC Send Only",
// or "Unknown OpCode (0x15)" like Wireshark for invalid ones.
func (o Opcode) String() string {
	if n := opcodeTable[o].name; n != "" {
		return n
	}
	return fmt.Sprintf("Unknown OpCode (%#02x)", uint8(o))
}

// Transport returns the transport of o (bits 7:5).
func (o Opcode) Transport() Transport { return Transport(o >> 5) }

// Operation returns what o does; 0 for invalid opcodes.
func (o Opcode) Operation() Operation { return opcodeTable[o].op }

// Position returns where o sits in its message; 0 for invalid opcodes.
func (o Opcode) Position() Position { return opcodeTable[o].pos }

// Headers returns the extension headers o carries after the BTH.
func (o Opcode) Headers() Headers { return opcodeTable[o].headers }

// HeaderLen returns the size of the BTH plus o's extension headers, or 0
// for an invalid opcode.
func (o Opcode) HeaderLen() int { return int(opcodeTable[o].hdrLen) }

// PayloadRule returns o's payload-length rule; 0 for invalid opcodes.
func (o Opcode) PayloadRule() PayloadRule { return opcodeTable[o].payload }

// HasRDETH reports whether o carries an RDETH.
func (o Opcode) HasRDETH() bool { return o.Headers()&HdrRDETH != 0 }

// HasDETH reports whether o carries a DETH.
func (o Opcode) HasDETH() bool { return o.Headers()&HdrDETH != 0 }

// HasFETH reports whether o carries a FETH.
func (o Opcode) HasFETH() bool { return o.Headers()&HdrFETH != 0 }

// HasRETH reports whether o carries a RETH.
func (o Opcode) HasRETH() bool { return o.Headers()&HdrRETH != 0 }

// HasAtomicETH reports whether o carries an AtomicETH.
func (o Opcode) HasAtomicETH() bool { return o.Headers()&HdrAtomicETH != 0 }

// HasAETH reports whether o carries an AETH.
func (o Opcode) HasAETH() bool { return o.Headers()&HdrAETH != 0 }

// HasAtomicAckETH reports whether o carries an AtomicAckETH.
func (o Opcode) HasAtomicAckETH() bool { return o.Headers()&HdrAtomicAckETH != 0 }

// HasImmDt reports whether o carries immediate data.
func (o Opcode) HasImmDt() bool { return o.Headers()&HdrImmDt != 0 }

// HasIETH reports whether o carries an IETH (SEND with Invalidate).
func (o Opcode) HasIETH() bool { return o.Headers()&HdrIETH != 0 }

// HasPayload reports whether o may carry payload bytes.
func (o Opcode) HasPayload() bool {
	r := o.PayloadRule()
	return r != 0 && r != PayloadNone
}

// IsFirst reports whether o is the first packet of a multi-packet message.
func (o Opcode) IsFirst() bool { return o.Position() == PositionFirst }

// IsMiddle reports whether o is a middle packet.
func (o Opcode) IsMiddle() bool { return o.Position() == PositionMiddle }

// IsLast reports whether o is the last packet of a multi-packet message.
func (o Opcode) IsLast() bool { return o.Position() == PositionLast }

// IsOnly reports whether o is a whole message in one packet.
func (o Opcode) IsOnly() bool { return o.Position() == PositionOnly }

// IsStart reports whether o starts a message (first or only; rxe
// RXE_START_MASK).
func (o Opcode) IsStart() bool { p := o.Position(); return p == PositionFirst || p == PositionOnly }

// IsEnd reports whether o ends a message (last or only; rxe RXE_END_MASK).
func (o Opcode) IsEnd() bool { p := o.Position(); return p == PositionLast || p == PositionOnly }

// IsRequest reports whether o travels requester → responder (rxe
// RXE_REQ_MASK): sends, writes, read requests, atomics, flush.
func (o Opcode) IsRequest() bool {
	switch o.Operation() {
	case OpSend, OpRDMAWrite, OpRDMAReadRequest, OpCompareSwap, OpFetchAdd, OpFlush, OpAtomicWrite:
		return true
	}
	return false
}

// IsResponse reports whether o travels responder → requester: read
// responses, acknowledges and atomic acknowledges.
func (o Opcode) IsResponse() bool {
	switch o.Operation() {
	case OpRDMAReadResponse, OpAcknowledge, OpAtomicAcknowledge:
		return true
	}
	return false
}

// IsSend reports whether o is part of a SEND.
func (o Opcode) IsSend() bool { return o.Operation() == OpSend }

// IsWrite reports whether o is part of an RDMA WRITE.
func (o Opcode) IsWrite() bool { return o.Operation() == OpRDMAWrite }

// IsAtomic reports whether o is Compare Swap or Fetch Add.
func (o Opcode) IsAtomic() bool {
	op := o.Operation()
	return op == OpCompareSwap || op == OpFetchAdd
}

// ConsumesRecvWQE reports whether o consumes a receive WQE at the responder
// (rxe RXE_RWR_MASK): the first or only packet of a SEND, and the packet of
// a WRITE with immediate that carries the immediate.
func (o Opcode) ConsumesRecvWQE() bool {
	switch o.Operation() {
	case OpSend:
		return o.IsStart()
	case OpRDMAWrite:
		return o.HasImmDt()
	}
	return false
}

// checkStructural applies the payload rule without knowing the path MTU:
// first/middle must carry one of the five path MTUs, nothing may exceed
// MaxPMTU. It is what the gate can check on its own.
func (e *opcodeInfo) checkStructural(n int) bool {
	switch e.payload {
	case PayloadNone:
		return n == 0
	case PayloadPMTU:
		return IsPMTU(n)
	case PayloadLast:
		return n >= 1 && n <= MaxPMTU
	case PayloadOnly:
		return n >= 0 && n <= MaxPMTU
	case PayloadAtomicWrite:
		return n == AtomicWritePayloadSize
	case PayloadCNP:
		return n == CNPReservedSize
	}
	return false
}

// CheckPayloadLen checks a payload of n bytes against o's rule at path MTU
// pmtu (for UD, the port MTU): first and middle packets carry exactly pmtu
// bytes, last packets 1..pmtu, only packets 0..pmtu (IBTA C9-20..C9-23;
// rxe_resp.c check_length). It returns nil or an ErrBadLength error.
func (o Opcode) CheckPayloadLen(n, pmtu int) error {
	e := &opcodeTable[o]
	if e.name == "" {
		return &ParseError{Reason: ErrInvalidOpcode, Part: "opcode", Value: int(o)}
	}
	ok := false
	switch e.payload {
	case PayloadPMTU:
		ok = n == pmtu
	case PayloadLast:
		ok = n >= 1 && n <= pmtu
	case PayloadOnly:
		ok = n >= 0 && n <= pmtu
	default:
		ok = e.checkStructural(n)
	}
	if !ok {
		return opcodeError(ErrBadLength, o, "payload", pmtu, n)
	}
	return nil
}

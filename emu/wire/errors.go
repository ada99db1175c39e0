package wire

import (
	"errors"
	"fmt"
)

// Reason says why a packet was rejected or could not be built. Reasons are
// errors themselves, so errors.Is(err, ErrTruncated) works on any error this
// package returns, and a Reason fits in an interface without allocating, so
// a data path can count drops with drops[ReasonOf(err)]++.
type Reason uint8

// The reasons, in the order the gate checks them.
const (
	// ErrTruncated: a header, the payload/pad region or the ICRC extends
	// past the end of the input (rxe_recv.c hdr_check: "packet too short").
	ErrTruncated Reason = iota + 1
	// ErrNotRoCEv2: the frame is well formed but carries something else
	// (another EtherType, another IP protocol, another UDP port). Tools skip
	// such frames; they are not RoCEv2 errors.
	ErrNotRoCEv2
	// ErrBadIPHeader: IPv4/IPv6 version, header length or total length are
	// inconsistent with each other or with the frame.
	ErrBadIPHeader
	// ErrIPFragment: the IPv4 packet is a fragment. RoCEv2 is sent with DF
	// set (rxe_net.c prepare_ipv4_hdr) and has no reassembly.
	ErrIPFragment
	// ErrBadUDPHeader: the UDP length disagrees with the IP length.
	ErrBadUDPHeader
	// ErrBadTVer: BTH TVer is not 0 (IBTA §9.2.3, rxe hdr_check).
	ErrBadTVer
	// ErrInvalidOpcode: the opcode is reserved in its transport, or belongs
	// to a transport RoCEv2 devices do not carry (RD, XRC, vendor).
	ErrInvalidOpcode
	// ErrBadPad: PadCnt is larger than the payload region, or non-zero for
	// an opcode whose payload is always a whole number of words.
	ErrBadPad
	// ErrBadLength: the payload length breaks the opcode's rule (no payload
	// allowed, first/middle not a path MTU, last empty, over 4096 bytes, or
	// payload+pad not a multiple of 4).
	ErrBadLength
	// ErrICRCMismatch: the ICRC does not match the packet (IBTA §7.8.1;
	// rxe_icrc_check drops such packets).
	ErrICRCMismatch
	// ErrBufferTooSmall: a builder's buffer cannot hold the packet.
	ErrBufferTooSmall
	// ErrBadField: a builder was given a value that does not fit the wire
	// (mismatched address families, a payload the opcode cannot carry).
	ErrBadField

	numReasons
)

// NumReasons is one more than the largest Reason, for arrays indexed by
// Reason (index 0 is "no error").
const NumReasons = int(numReasons)

var reasonText = [numReasons]string{
	0:                 "no error",
	ErrTruncated:      "truncated",
	ErrNotRoCEv2:      "not RoCEv2",
	ErrBadIPHeader:    "bad IP header",
	ErrIPFragment:     "IP fragment",
	ErrBadUDPHeader:   "bad UDP header",
	ErrBadTVer:        "bad BTH TVer",
	ErrInvalidOpcode:  "invalid opcode",
	ErrBadPad:         "bad pad count",
	ErrBadLength:      "bad payload length",
	ErrICRCMismatch:   "ICRC mismatch",
	ErrBufferTooSmall: "buffer too small",
	ErrBadField:       "bad field",
}

// String returns a short description of the reason.
func (r Reason) String() string {
	if r < numReasons {
		return reasonText[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Error implements error.
func (r Reason) Error() string { return "wire: " + r.String() }

// ParseError is the detailed form of a Reason: which part of the packet was
// at fault and, for length problems, how many bytes were needed and present.
// It is allocated only when a packet is rejected.
type ParseError struct {
	Reason Reason
	// Part names the header or region concerned: "BTH", "RETH", "payload",
	// "ICRC", "IPv4", "UDP", ...
	Part string
	// Opcode is the BTH opcode, when the BTH was readable.
	Opcode    Opcode
	HasOpcode bool
	// Need and Have are byte counts for length problems (both zero
	// otherwise); Value is the offending field value for field problems.
	Need, Have int
	Value      int
}

// Error implements error.
func (e *ParseError) Error() string {
	s := "wire: " + e.Reason.String()
	if e.Part != "" {
		s += ": " + e.Part
	}
	switch e.Reason {
	case ErrTruncated, ErrBadLength, ErrBadUDPHeader, ErrBadIPHeader, ErrBufferTooSmall:
		if e.Need != 0 || e.Have != 0 {
			s += fmt.Sprintf(" (need %d bytes, have %d)", e.Need, e.Have)
		}
	case ErrBadTVer, ErrBadPad:
		s += fmt.Sprintf(" %d", e.Value)
	case ErrInvalidOpcode:
		s += fmt.Sprintf(" %#02x", e.Value)
	}
	if e.HasOpcode && e.Reason != ErrInvalidOpcode {
		s += " in " + e.Opcode.String()
	}
	return s
}

// Unwrap returns the Reason, so errors.Is matches it.
func (e *ParseError) Unwrap() error { return e.Reason }

// ReasonOf returns the Reason behind err, 0 for nil, or ErrBadField for an
// error that did not come from this package.
func ReasonOf(err error) Reason {
	if err == nil {
		return 0
	}
	if r, ok := err.(Reason); ok {
		return r
	}
	if pe, ok := err.(*ParseError); ok {
		return pe.Reason
	}
	var r Reason
	if errors.As(err, &r) {
		return r
	}
	return ErrBadField
}

func lengthError(r Reason, part string, need, have int) error {
	return &ParseError{Reason: r, Part: part, Need: need, Have: have}
}

func opcodeError(r Reason, op Opcode, part string, need, have int) error {
	return &ParseError{Reason: r, Part: part, Opcode: op, HasOpcode: true, Need: need, Have: have}
}

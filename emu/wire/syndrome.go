package wire

import (
	"fmt"
	"time"
)

// Syndrome is the AETH syndrome byte (IBTA Vol 1 §9.7.5.2.1, Table 43):
// bits 7:5 say what the packet is, bits 4:0 carry a value whose meaning
// depends on bits 7:5.
//
//	7 6 5 | 4 3 2 1 0
//	0 0 0 | credit count      ACK
//	0 0 1 | RNR timer code    RNR NAK
//	0 1 0 | (reserved)
//	0 1 1 | NAK code          NAK
//	1 x x | (reserved)
//
// Bit 7 is reserved and must be 0 (the upper half of the byte space is
// reserved in Table 43).
type Syndrome uint8

const (
	syndromeTypeShift = 5
	syndromeValueMask = 0x1f
)

// SyndromeType is the kind of acknowledgement a syndrome encodes.
type SyndromeType uint8

// The syndrome types (bits 7:5 of the syndrome).
const (
	SyndromeACK       SyndromeType = 0 // positive acknowledgement
	SyndromeRNRNAK    SyndromeType = 1 // receiver not ready
	SyndromeReserved  SyndromeType = 2 // reserved; rxe_comp.c treats it as an error
	SyndromeNAK       SyndromeType = 3 // negative acknowledgement with a NAK code
	SyndromeReserved4 SyndromeType = 4 // 4..7: bit 7 set, reserved
)

// String returns the IBTA name of the syndrome type.
func (t SyndromeType) String() string {
	switch t {
	case SyndromeACK:
		return "ACK"
	case SyndromeRNRNAK:
		return "RNR NAK"
	case SyndromeNAK:
		return "NAK"
	default:
		return "reserved"
	}
}

// Type returns bits 7:5 of the syndrome. Values 4..7 (bit 7 set) are all
// reserved.
func (s Syndrome) Type() SyndromeType { return SyndromeType(s >> syndromeTypeShift) }

// Value returns bits 4:0: the credit count code, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & syndromeValueMask }

// IsACK reports whether s is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s.Type() == SyndromeACK }

// IsRNRNAK reports whether s is a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s.Type() == SyndromeRNRNAK }

// IsNAK reports whether s is a NAK with a NAK code (not an RNR NAK).
func (s Syndrome) IsNAK() bool { return s.Type() == SyndromeNAK }

// CreditCode returns the end-to-end credit count code of an ACK; see
// CreditCode.Credits.
func (s Syndrome) CreditCode() CreditCode { return CreditCode(s.Value()) }

// RNRTimer returns the RNR timer code of an RNR NAK.
func (s Syndrome) RNRTimer() RNRTimer { return RNRTimer(s.Value()) }

// NAKCode returns the NAK code of a NAK.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s.Value()) }

// ACKSyndrome returns the syndrome of an ACK with credit count code c.
func ACKSyndrome(c CreditCode) Syndrome {
	return Syndrome(SyndromeACK)<<syndromeTypeShift | Syndrome(c&syndromeValueMask)
}

// RNRNAKSyndrome returns the syndrome of an RNR NAK with timer code t
// (rxe_resp.c sends AETH_RNR_NAK | min_rnr_timer).
func RNRNAKSyndrome(t RNRTimer) Syndrome {
	return Syndrome(SyndromeRNRNAK)<<syndromeTypeShift | Syndrome(t&syndromeValueMask)
}

// NAKSyndrome returns the syndrome of a NAK with code c.
func NAKSyndrome(c NAKCode) Syndrome {
	return Syndrome(SyndromeNAK)<<syndromeTypeShift | Syndrome(c&syndromeValueMask)
}

// String decodes the syndrome, e.g. "ACK credits=invalid", "RNR NAK
// timer=12 (640µs)", "NAK PSN sequence error".
func (s Syndrome) String() string {
	switch s.Type() {
	case SyndromeACK:
		return "ACK credits=" + s.CreditCode().String()
	case SyndromeRNRNAK:
		t := s.RNRTimer()
		return fmt.Sprintf("RNR NAK timer=%d (%v)", uint8(t), t.Duration())
	case SyndromeNAK:
		return "NAK " + s.NAKCode().String()
	default:
		return fmt.Sprintf("reserved syndrome %#02x", uint8(s))
	}
}

// CreditCode is the 5-bit end-to-end flow-control credit count of an ACK
// (IBTA Vol 1 §9.7.7.2.5, Table 44): a logarithmic encoding of the number
// of receive WQEs the responder has available.
type CreditCode uint8

// CreditsInvalid is the credit code meaning "no credit information"
// (unlimited); rxe always sends it (AETH_ACK_UNLIMITED).
const CreditsInvalid CreditCode = 0x1f

// creditTable is IBTA Table 44 (also rdmavt's credit_table).
var creditTable = [31]uint16{
	0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
	12288, 16384, 24576, 32768,
}

// Credits returns the number of credits c encodes, and false for the
// invalid code 0x1F (and for values above 5 bits).
func (c CreditCode) Credits() (n int, ok bool) {
	if int(c) >= len(creditTable) {
		return 0, false
	}
	return int(creditTable[c]), true
}

// String returns the credit count, or "invalid" for code 0x1F.
func (c CreditCode) String() string {
	n, ok := c.Credits()
	if !ok {
		return "invalid"
	}
	return fmt.Sprint(n)
}

// RNRTimer is the 5-bit RNR NAK timer code (IBTA Vol 1 §9.7.5.2.8, Table
// 45): how long the requester waits before retrying after an RNR NAK.
type RNRTimer uint8

// rnrTable is IBTA Table 45 in microseconds. rxe_comp.c's rnrnak_usec
// table has 61410 for code 25, a typo; the specification value is used.
var rnrTable = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// Duration returns the delay the timer code stands for. Only the low 5
// bits of t are used.
func (t RNRTimer) Duration() time.Duration {
	return time.Duration(rnrTable[t&syndromeValueMask]) * time.Microsecond
}

// NAKCode is the 5-bit code of a NAK (IBTA Vol 1 §9.7.5.2.1, Table 43).
type NAKCode uint8

// The NAK codes; 5..31 are reserved.
const (
	NAKPSNSequenceError       NAKCode = 0 // rxe: AETH_NAK_PSN_SEQ_ERROR, syndrome 0x60
	NAKInvalidRequest         NAKCode = 1 // syndrome 0x61
	NAKRemoteAccessError      NAKCode = 2 // syndrome 0x62
	NAKRemoteOperationalError NAKCode = 3 // syndrome 0x63
	NAKInvalidRDRequest       NAKCode = 4 // syndrome 0x64, RD only

	numNAKCodes = 5
)

var nakText = [numNAKCodes]string{
	"PSN sequence error",
	"invalid request",
	"remote access error",
	"remote operational error",
	"invalid RD request",
}

// String returns the IBTA name of the NAK code.
func (c NAKCode) String() string {
	if c < numNAKCodes {
		return nakText[c]
	}
	return fmt.Sprintf("reserved code %d", uint8(c))
}

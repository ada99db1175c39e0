package qp

import "fmt"

// ViolationCode names one way a WQE breaks the GEN_2 layout. The numeric
// values are stable: they appear in `irdma-emu wqe decode --json` output
// and in the engine's counters, so new codes are only ever appended.
//
// Each code documents the reaction we intend the engine to give it. Which
// condition raises which asynchronous event is defined by the hardware, and
// the irdma sources only name the AE codes (docs/hw-datapath.md "AE to flush
// code"); the choices below are our reading of those names (inference), kept
// in one table (Reaction) so the engine maps them in one place. A fatal
// reaction means: raise the AE on the QP's AEQ with the SQ (or RQ) as source,
// move the QP to ERROR and flush its WQEs; irdma_ae_to_qp_err_code turns the
// AE into the flush minor code of the resulting CQEs (0x020a →
// FLUSH_LOC_QP_OP_ERR, 0x020b/0x020c → FLUSH_GENERAL_ERR).
type ViolationCode uint8

const (
	// ViolHeaderNotValid: the header's VALID bit is not the expected
	// polarity. Reported only when decoding with IgnoreValid (tools); the
	// engine instead gets ErrNotValid and treats the slot as not yet
	// posted. Reaction: none (not an error; stop scanning).
	ViolHeaderNotValid ViolationCode = 1
	// ViolUnknownOpcode: OPCODE is reserved or software-only (0x02, 0x07,
	// 0x0e, 0x10, 0x12–0x2f, 0x31–0x3f). Reaction: AE 0x020a
	// WQE_UNEXPECTED_OPCODE, fatal.
	ViolUnknownOpcode ViolationCode = 2
	// ViolIWARPOnly: an iWARP-only opcode (GEN_RTS_AE 0x30) or LSMM flag
	// (STREAMMODE, WAITFORRCVPDU) on our RoCE-only model. Reaction: AE
	// 0x020a WQE_UNEXPECTED_OPCODE, fatal.
	ViolIWARPOnly ViolationCode = 3
	// ViolTooManyFrags: ADDFRAGCNT (or the SGEs it implies) exceeds
	// max_hw_wq_frags (max_hw_read_sges for READ), 13 on GEN_2, allowing
	// for the immediate slot and the pad slot. Reaction: AE 0x020c
	// WQE_INVALID_FRAG_DATA, fatal.
	ViolTooManyFrags ViolationCode = 4
	// ViolPadRule: ADDFRAGCNT is odd on a fragment-sized WQE. GEN_2 counts
	// the pad slot written after an even fragment count (irdma_uk_send:
	// "if not an odd number set valid bit in next fragment"), so its
	// ADDFRAGCNT is always even. Reaction: AE 0x020c WQE_INVALID_FRAG_DATA,
	// fatal.
	ViolPadRule ViolationCode = 5
	// ViolAddFragCnt: ADDFRAGCNT differs from the fixed value of the
	// opcode's layout (0 for inline, LOCAL_INV, BIND_MW, FAST_REG, NOP; 1
	// for atomics). Reaction: AE 0x020b WQE_INVALID_PARAMETER, fatal.
	ViolAddFragCnt ViolationCode = 6
	// ViolFragValid: a fragment slot's VALID bit (qword 2k+1 bit 63), or
	// an atomic WQE's second-quantum valid qword, is not the polarity.
	// Since the header is written last, a posted WQE never shows this.
	// Reaction: AE 0x020c WQE_INVALID_FRAG_DATA, fatal.
	ViolFragValid ViolationCode = 7
	// ViolInlineTooLong: INLINEDATALEN exceeds max_hw_inline (101 on
	// GEN_2). Reaction: AE 0x020b WQE_INVALID_PARAMETER, fatal.
	ViolInlineTooLong ViolationCode = 8
	// ViolInlineValid: the inline valid byte at offset 31 of an inline
	// WQE's quantum k ≥ 1 is not polarity<<7 (irdma_copy_inline_data).
	// Reaction: AE 0x020c WQE_INVALID_FRAG_DATA, fatal.
	ViolInlineValid ViolationCode = 9
	// ViolInlineNotAllowed: INLINEDATAFLAG on an opcode without an inline
	// form (READ, atomics, LOCAL_INV, BIND_MW, FAST_REG, NOP). Reaction:
	// AE 0x020b WQE_INVALID_PARAMETER, fatal.
	ViolInlineNotAllowed ViolationCode = 10
	// ViolImmNotAllowed: IMMDATAFLAG on an opcode that cannot carry an
	// immediate (only SEND, SEND_SOL, WRITE, WRITE_SOL can). Not checked
	// on FAST_REG, where bit 47 is HPAGESIZE. Reaction: AE 0x020b
	// WQE_INVALID_PARAMETER, fatal.
	ViolImmNotAllowed ViolationCode = 11
	// ViolCrossesChunk: the WQE's quanta cross a max_hw_sq_chunk (8-quanta)
	// boundary; irdma_qp_get_next_send_wqe pads with NOPs so this never
	// happens. Reaction: AE 0x020b WQE_INVALID_PARAMETER, fatal.
	ViolCrossesChunk ViolationCode = 12
	// ViolReservedField: a field holds a reserved encoding (FAST_REG
	// HPAGESIZE 3). Reaction: AE 0x020b WQE_INVALID_PARAMETER, fatal.
	ViolReservedField ViolationCode = 13
	// ViolRQFragsExceedWQE: an RQ WQE's ADDFRAGCNT implies more slots than
	// its fixed size (32 << rq_shift bytes) holds. Reaction: AE 0x020c
	// WQE_INVALID_FRAG_DATA with the RQ as source, fatal.
	ViolRQFragsExceedWQE ViolationCode = 14
)

// Asynchronous event codes the WQE violations map to (irdma user.h
// IRDMA_AE_*, docs/hw-controlpath.md "AE codes").
const (
	AEWQEUnexpectedOpcode uint16 = 0x020a
	AEWQEInvalidParameter uint16 = 0x020b
	AEWQEInvalidFragData  uint16 = 0x020c
)

// Reaction is the intended device reaction to a violation.
type Reaction struct {
	AE    uint16 // asynchronous event code; 0 = none
	Fatal bool   // QP to ERROR, WQEs flushed
}

var violationInfo = [...]struct {
	name     string
	reaction Reaction
}{
	ViolHeaderNotValid:   {"header-not-valid", Reaction{}},
	ViolUnknownOpcode:    {"unknown-opcode", Reaction{AEWQEUnexpectedOpcode, true}},
	ViolIWARPOnly:        {"iwarp-only", Reaction{AEWQEUnexpectedOpcode, true}},
	ViolTooManyFrags:     {"too-many-fragments", Reaction{AEWQEInvalidFragData, true}},
	ViolPadRule:          {"pad-rule", Reaction{AEWQEInvalidFragData, true}},
	ViolAddFragCnt:       {"addfragcnt", Reaction{AEWQEInvalidParameter, true}},
	ViolFragValid:        {"fragment-valid-bit", Reaction{AEWQEInvalidFragData, true}},
	ViolInlineTooLong:    {"inline-too-long", Reaction{AEWQEInvalidParameter, true}},
	ViolInlineValid:      {"inline-valid-byte", Reaction{AEWQEInvalidFragData, true}},
	ViolInlineNotAllowed: {"inline-not-allowed", Reaction{AEWQEInvalidParameter, true}},
	ViolImmNotAllowed:    {"imm-not-allowed", Reaction{AEWQEInvalidParameter, true}},
	ViolCrossesChunk:     {"crosses-chunk", Reaction{AEWQEInvalidParameter, true}},
	ViolReservedField:    {"reserved-field", Reaction{AEWQEInvalidParameter, true}},
	ViolRQFragsExceedWQE: {"rq-frags-exceed-wqe", Reaction{AEWQEInvalidFragData, true}},
}

// String is the code's stable short name.
func (c ViolationCode) String() string {
	if int(c) < len(violationInfo) && violationInfo[c].name != "" {
		return violationInfo[c].name
	}
	return fmt.Sprintf("violation(%d)", uint8(c))
}

// Reaction is the intended device reaction (see the constants' comments).
func (c ViolationCode) Reaction() Reaction {
	if int(c) < len(violationInfo) {
		return violationInfo[c].reaction
	}
	return Reaction{}
}

// Violation is one layout violation found in a WQE.
type Violation struct {
	Code ViolationCode
	// Where is the fragment slot, quantum or -1 (whole WQE), as the code
	// says: slot for ViolFragValid, quantum for ViolInlineValid.
	Where int
	Got   uint64 // the offending value
	Want  uint64 // the expected value or the limit
}

// String describes the violation for tools.
func (v Violation) String() string {
	switch v.Code {
	case ViolHeaderNotValid:
		return fmt.Sprintf("%s: header VALID is %d, expected polarity %d", v.Code, v.Got, v.Want)
	case ViolUnknownOpcode:
		return fmt.Sprintf("%s: opcode %#02x is reserved on a GEN_2 RoCE SQ", v.Code, v.Got)
	case ViolIWARPOnly:
		return fmt.Sprintf("%s: header %#016x uses an iWARP-only opcode or LSMM flag", v.Code, v.Got)
	case ViolTooManyFrags:
		return fmt.Sprintf("%s: %d fragments, limit %d", v.Code, v.Got, v.Want)
	case ViolPadRule:
		return fmt.Sprintf("%s: ADDFRAGCNT %d is odd; GEN_2 counts the pad slot, so it must be even", v.Code, v.Got)
	case ViolAddFragCnt:
		return fmt.Sprintf("%s: ADDFRAGCNT %d, this layout has %d", v.Code, v.Got, v.Want)
	case ViolFragValid:
		return fmt.Sprintf("%s: slot %d VALID is %d, expected %d", v.Code, v.Where, v.Got, v.Want)
	case ViolInlineTooLong:
		return fmt.Sprintf("%s: INLINEDATALEN %d, limit %d", v.Code, v.Got, v.Want)
	case ViolInlineValid:
		return fmt.Sprintf("%s: quantum %d inline valid byte is %#02x, expected %#02x", v.Code, v.Where, v.Got, v.Want)
	case ViolInlineNotAllowed:
		return fmt.Sprintf("%s: INLINEDATAFLAG on opcode %s", v.Code, Opcode(v.Got))
	case ViolImmNotAllowed:
		return fmt.Sprintf("%s: IMMDATAFLAG on opcode %s", v.Code, Opcode(v.Got))
	case ViolCrossesChunk:
		return fmt.Sprintf("%s: %d quanta at index %d cross an %d-quanta chunk boundary", v.Code, v.Got, v.Where, v.Want)
	case ViolReservedField:
		return fmt.Sprintf("%s: reserved value %d", v.Code, v.Got)
	case ViolRQFragsExceedWQE:
		return fmt.Sprintf("%s: ADDFRAGCNT needs %d quanta, the RQ WQE has %d", v.Code, v.Got, v.Want)
	}
	return fmt.Sprintf("%s: got %d want %d at %d", v.Code, v.Got, v.Want, v.Where)
}

// maxViolations bounds the violations kept per WQE; more are counted in
// Dropped. Eight is more than any one WQE can show without also showing
// the first few, which is all an engine needs.
const maxViolations = 8

// violations is the fixed-size list a decoded WQE carries.
type violations struct {
	list    [maxViolations]Violation
	n       uint8
	Dropped int // violations beyond maxViolations
}

func (vs *violations) add(code ViolationCode, where int, got, want uint64) {
	if int(vs.n) == len(vs.list) {
		vs.Dropped++
		return
	}
	vs.list[vs.n] = Violation{Code: code, Where: where, Got: got, Want: want}
	vs.n++
}

// Violations are the violations found, in the order checked.
func (vs *violations) Violations() []Violation { return vs.list[:vs.n] }

// OK reports a WQE without violations.
func (vs *violations) OK() bool { return vs.n == 0 && vs.Dropped == 0 }

// Has reports whether a violation with the code was found.
func (vs *violations) Has(code ViolationCode) bool {
	for _, v := range vs.list[:vs.n] {
		if v.Code == code {
			return true
		}
	}
	return false
}

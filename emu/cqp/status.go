package cqp

import (
	"errors"
	"fmt"
)

// Status is the completion code of one CQP WQE: the CCQE's major/minor
// codes (qword3 [31:16] / [15:0]) and, for a failed WQE, CQPERRCODES.
// docs/cqp-errors.md lists every code the device returns.
type Status struct {
	Major, Minor uint16
}

// OK reports a successful completion (major 0).
func (s Status) OK() bool { return s.Major == 0 }

func (s Status) String() string {
	if n, ok := minorNames[s.Minor]; ok && s.Major == MajorGeneric {
		return fmt.Sprintf("%#04x/%#04x %s", s.Major, s.Minor, n)
	}
	return fmt.Sprintf("%#04x/%#04x", s.Major, s.Minor)
}

// Major codes.
const (
	// MajorGeneric is the major code of every error the device returns
	// (0xFFFF, "generic error"; the driver fails the operation with -EIO,
	// irdma_sc_poll_for_cqp_op_done).
	MajorGeneric uint16 = 0xffff
	// MajorObjCache / MajorCntxtCache are driver-known majors
	// (IRDMA_CQP_COMPL_OBJCACHE_ERROR/CNTXTCACHE_ERROR, defs.h) the model
	// never raises: it has no object or context cache that can fail.
	MajorObjCache   uint16 = 0xf000
	MajorCntxtCache uint16 = 0xf001
)

// Minor codes the driver knows (docs/hw-controlpath.md "CQP error codes";
// main.h; utils.c:irdma_noncrit_err_list).
const (
	// MinorSQFlushed / MinorRQFlushed: FLUSH_WQES success minors
	// (IRDMA_CQP_COMPL_SQ_WQE_FLUSHED / _RQ_WQE_FLUSHED).
	MinorRQFlushed uint16 = 0x0002
	MinorSQFlushed uint16 = 0x0003
	// MinorSQRQFlushed is our success minor when both queues were
	// flushed: the driver takes 0, 2 and 3 to mean that one of the
	// requested queues was not flushed (hw.c:irdma_hw_flush_wqes_callback),
	// so "both" must be another value. Emulator-defined.
	MinorSQRQFlushed uint16 = 0x0001
	// MinorInvalidState: (0xFFFF, 0x8002) Invalid State — a QP state
	// transition the device refuses.
	MinorInvalidState uint16 = 0x8002
	// MinorFlushNoWQE: (0xFFFF, 0x8006) Flush No WQE Pending.
	MinorFlushNoWQE uint16 = 0x8006
)

// Emulator-defined minor codes (major MajorGeneric). Stable: tests and
// docs/cqp-errors.md pin them.
const (
	MinorUnsupportedOp   uint16 = 0x9001 // opcode unknown, unassigned or not on this generation
	MinorHMCNotCommitted uint16 = 0x9002 // the op needs COMMIT_FPM_VAL first
	MinorIndexRange      uint16 = 0x9003 // object index ≥ the committed count (or the id space)
	MinorObjectExists    uint16 = 0x9004 // create over a live object
	MinorObjectNotFound  uint16 = 0x9005 // modify/destroy/use of an object that does not exist
	MinorObjectInUse     uint16 = 0x9006 // destroy of an object still referenced (CQ bound to a QP)
	MinorPAFault         uint16 = 0x9007 // a host-memory access of the op faulted (context, buffer, ring)
	MinorBadContext      uint16 = 0x9008 // a context or WQE field has a value the device refuses
	MinorBadSize         uint16 = 0x9009 // a queue size out of range (CQ too small, CEQ/AEQ count, ring)
	MinorPBLERange       uint16 = 0x900a // PBLE index (plus length) beyond the committed PBLE count
	MinorSTagValid       uint16 = 0x900b // ALLOC_STAG/REG_MR of an STag index already valid
	MinorSTagInvalid     uint16 = 0x900c // DEALLOC_STAG of an STag index that is not valid, or PD mismatch
	MinorBufferTooSmall  uint16 = 0x900d // BUF_LEN / BUFSIZE smaller than the data
	MinorBadAlignment    uint16 = 0x900e // a ring or buffer address not aligned as required
	MinorProtocol        uint16 = 0x900f // iWARP-only op on a CQP created for RoCE only
	MinorNoResource      uint16 = 0x9010 // stats instances, QS handles, PM functions exhausted
	MinorBadQPType       uint16 = 0x9011 // QPTYPE not RoCE RC/UD, or not the QP's type
	MinorMRError         uint16 = 0x9012 // the MR table refused the op for another reason
	MinorAHError         uint16 = 0x9013 // the AH/ARP/multicast tables refused the op
	MinorHMCError        uint16 = 0x9014 // the HMC refused the op (bad commit buffer, bad SD entry)
)

var minorNames = map[uint16]string{
	MinorInvalidState: "invalid state", MinorFlushNoWQE: "flush: no WQE pending",
	MinorUnsupportedOp: "unsupported opcode", MinorHMCNotCommitted: "HMC not committed",
	MinorIndexRange: "index out of range", MinorObjectExists: "object exists",
	MinorObjectNotFound: "object not found", MinorObjectInUse: "object in use",
	MinorPAFault: "host memory fault", MinorBadContext: "bad context field",
	MinorBadSize: "bad size", MinorPBLERange: "PBLE out of range", MinorSTagValid: "STag already valid",
	MinorSTagInvalid: "STag not valid", MinorBufferTooSmall: "buffer too small",
	MinorBadAlignment: "bad alignment", MinorProtocol: "protocol not enabled",
	MinorNoResource: "no resource", MinorBadQPType: "bad QP type", MinorMRError: "MR table error",
	MinorAHError: "AH table error", MinorHMCError: "HMC error",
}

// Fail returns the status of a failed WQE with an emulator or driver minor.
func Fail(minor uint16) Status { return Status{Major: MajorGeneric, Minor: minor} }

// StatusError is implemented by errors of the domain tables (HMC, MR, AH)
// that know the CQP code they map to.
type StatusError interface {
	error
	CQPStatus() Status
}

// Error is a failed CQP operation: its status and why.
type Error struct {
	Status Status
	Reason string
	Err    error
}

func (e *Error) Error() string {
	s := "cqp: " + e.Status.String() + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// CQPStatus implements StatusError.
func (e *Error) CQPStatus() Status { return e.Status }

func fail(minor uint16, reason string, err error) *Error {
	return &Error{Status: Fail(minor), Reason: reason, Err: err}
}

// statusOf maps an error from a domain table to a status: its own when it
// carries one, else fallback.
func statusOf(err error, fallback uint16) Status {
	var se StatusError
	if errors.As(err, &se) {
		return se.CQPStatus()
	}
	return Fail(fallback)
}

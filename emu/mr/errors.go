package mr

import (
	"errors"
	"fmt"
)

// AE is an asynchronous event code (user.h / defs.h "Async Events codes";
// docs/hw-controlpath.md "AE codes", docs/hw-datapath.md "AE to flush code").
// Errors of the data-path operations carry the code the hardware raises, from
// which the engine derives the CQE status and the AEQE; the driver maps it to
// a flush code (hw.c:irdma_set_flush_fields).
type AE uint16

// Memory-access AE codes.
const (
	AEUnallocatedSTag                AE = 0x0102 // IRDMA_AE_AMP_UNALLOCATED_STAG
	AEInvalidSTag                    AE = 0x0103 // IRDMA_AE_AMP_INVALID_STAG
	AEBadQP                          AE = 0x0104 // IRDMA_AE_AMP_BAD_QP
	AEBadPD                          AE = 0x0105 // IRDMA_AE_AMP_BAD_PD
	AEBadSTagKey                     AE = 0x0106 // IRDMA_AE_AMP_BAD_STAG_KEY
	AEBadSTagIndex                   AE = 0x0107 // IRDMA_AE_AMP_BAD_STAG_INDEX
	AEBoundsViolation                AE = 0x0108 // IRDMA_AE_AMP_BOUNDS_VIOLATION
	AERightsViolation                AE = 0x0109 // IRDMA_AE_AMP_RIGHTS_VIOLATION
	AEToWrap                         AE = 0x010a // IRDMA_AE_AMP_TO_WRAP
	AEFastRegValidSTag               AE = 0x010c // IRDMA_AE_AMP_FASTREG_VALID_STAG
	AEFastRegMWSTag                  AE = 0x010d // IRDMA_AE_AMP_FASTREG_MW_STAG
	AEFastRegInvalidRights           AE = 0x010e // IRDMA_AE_AMP_FASTREG_INVALID_RIGHTS
	AEFastRegInvalidLength           AE = 0x0110 // IRDMA_AE_AMP_FASTREG_INVALID_LENGTH
	AEInvalidateShared               AE = 0x0111 // IRDMA_AE_AMP_INVALIDATE_SHARED
	AEInvalidateNoRemoteAccessRights AE = 0x0112 // IRDMA_AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS
	AEInvalidateMRWithBoundWindows   AE = 0x0113 // IRDMA_AE_AMP_INVALIDATE_MR_WITH_BOUND_WINDOWS
	AEMWBindValidSTag                AE = 0x0114 // IRDMA_AE_AMP_MWBIND_VALID_STAG
	AEMWBindOfMRSTag                 AE = 0x0115 // IRDMA_AE_AMP_MWBIND_OF_MR_STAG
	AEMWBindToZeroBasedSTag          AE = 0x0116 // IRDMA_AE_AMP_MWBIND_TO_ZERO_BASED_STAG
	AEMWBindToMWSTag                 AE = 0x0117 // IRDMA_AE_AMP_MWBIND_TO_MW_STAG
	AEMWBindInvalidRights            AE = 0x0118 // IRDMA_AE_AMP_MWBIND_INVALID_RIGHTS
	AEMWBindInvalidBounds            AE = 0x0119 // IRDMA_AE_AMP_MWBIND_INVALID_BOUNDS
	AEMWBindToInvalidParent          AE = 0x011a // IRDMA_AE_AMP_MWBIND_TO_INVALID_PARENT
	AEMWBindBindDisabled             AE = 0x011b // IRDMA_AE_AMP_MWBIND_BIND_DISABLED
	AEPrivOperationDenied            AE = 0x011c // IRDMA_AE_PRIV_OPERATION_DENIED
	AEInvalidateType1MW              AE = 0x011d // IRDMA_AE_AMP_INVALIDATE_TYPE1_MW
	AEMWBindZeroBasedType1MW         AE = 0x011e // IRDMA_AE_AMP_MWBIND_ZERO_BASED_TYPE1_MW
	AEFastRegInvalidPBLHPSCfg        AE = 0x011f // IRDMA_AE_AMP_FASTREG_INVALID_PBL_HPS_CFG
	AEMWBindWrongType                AE = 0x0120 // IRDMA_AE_AMP_MWBIND_WRONG_TYPE
	AEFastRegPBLEMismatch            AE = 0x0121 // IRDMA_AE_AMP_FASTREG_PBLE_MISMATCH
	AESTagZeroInvalid                AE = 0x0206 // IRDMA_AE_STAG_ZERO_INVALID
	// AELCEQPCatastrophic is what we raise when the device's own HMC
	// access fails (a PBLE or MR record that is not backed): an internal
	// error of the QP, not a protection error.
	AELCEQPCatastrophic AE = 0x0700 // IRDMA_AE_LCE_QP_CATASTROPHIC
)

var aeNames = map[AE]string{
	AEUnallocatedSTag: "AMP_UNALLOCATED_STAG", AEInvalidSTag: "AMP_INVALID_STAG",
	AEBadQP: "AMP_BAD_QP", AEBadPD: "AMP_BAD_PD", AEBadSTagKey: "AMP_BAD_STAG_KEY",
	AEBadSTagIndex: "AMP_BAD_STAG_INDEX", AEBoundsViolation: "AMP_BOUNDS_VIOLATION",
	AERightsViolation: "AMP_RIGHTS_VIOLATION", AEToWrap: "AMP_TO_WRAP",
	AEFastRegValidSTag: "AMP_FASTREG_VALID_STAG", AEFastRegMWSTag: "AMP_FASTREG_MW_STAG",
	AEFastRegInvalidRights: "AMP_FASTREG_INVALID_RIGHTS", AEFastRegInvalidLength: "AMP_FASTREG_INVALID_LENGTH",
	AEInvalidateShared: "AMP_INVALIDATE_SHARED", AEInvalidateNoRemoteAccessRights: "AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS",
	AEInvalidateMRWithBoundWindows: "AMP_INVALIDATE_MR_WITH_BOUND_WINDOWS", AEMWBindValidSTag: "AMP_MWBIND_VALID_STAG",
	AEMWBindOfMRSTag: "AMP_MWBIND_OF_MR_STAG", AEMWBindToZeroBasedSTag: "AMP_MWBIND_TO_ZERO_BASED_STAG",
	AEMWBindToMWSTag: "AMP_MWBIND_TO_MW_STAG", AEMWBindInvalidRights: "AMP_MWBIND_INVALID_RIGHTS",
	AEMWBindInvalidBounds: "AMP_MWBIND_INVALID_BOUNDS", AEMWBindToInvalidParent: "AMP_MWBIND_TO_INVALID_PARENT",
	AEMWBindBindDisabled: "AMP_MWBIND_BIND_DISABLED", AEPrivOperationDenied: "PRIV_OPERATION_DENIED",
	AEInvalidateType1MW: "AMP_INVALIDATE_TYPE1_MW", AEMWBindZeroBasedType1MW: "AMP_MWBIND_ZERO_BASED_TYPE1_MW",
	AEFastRegInvalidPBLHPSCfg: "AMP_FASTREG_INVALID_PBL_HPS_CFG", AEMWBindWrongType: "AMP_MWBIND_WRONG_TYPE",
	AEFastRegPBLEMismatch: "AMP_FASTREG_PBLE_MISMATCH", AESTagZeroInvalid: "STAG_ZERO_INVALID",
	AELCEQPCatastrophic: "LCE_QP_CATASTROPHIC",
}

func (a AE) String() string {
	if s, ok := aeNames[a]; ok {
		return fmt.Sprintf("%s(%#04x)", s, uint16(a))
	}
	return fmt.Sprintf("AE(%#04x)", uint16(a))
}

// Reason says why an operation failed; the CQP maps the reasons of
// AllocSTag, RegisterNonShared and Dealloc to completion codes.
type Reason uint8

// Failure reasons.
const (
	ReasonNotCommitted   Reason = iota + 1 // the HMC has no committed MR table
	ReasonZeroSTag                         // STag 0
	ReasonIndexRange                       // STag index 0 (reserved) or ≥ the MR count
	ReasonAllocated                        // the index is already allocated
	ReasonNotAllocated                     // the index is not allocated
	ReasonIndexMismatch                    // the driver-key bits of the 24-bit index differ
	ReasonKeyMismatch                      // the 8-bit consumer key differs
	ReasonInvalidState                     // the STag is allocated but not valid
	ReasonPDMismatch                       // the PD differs
	ReasonBadPD                            // the PD id is beyond MaxPDs
	ReasonQPMismatch                       // a type-2 window used on another QP
	ReasonWrongType                        // MR where an MW is required, or the reverse
	ReasonBadPageSize                      // HPAGESIZE 3
	ReasonBadPBLLevel                      // LPBLSIZE 2
	ReasonPBLERange                        // PBLEs beyond the committed PBLE count
	ReasonBadLength                        // length above the maximum or the fast-register capacity
	ReasonWrap                             // address + length wraps
	ReasonBadRights                        // inconsistent rights (remote write without local write)
	ReasonBadFBO                           // first-byte offset not below the page size
	ReasonBoundWindows                     // an MR with memory windows bound to it
	ReasonBounds                           // access outside the region or window
	ReasonRights                           // access without the right
	ReasonNoRemoteRights                   // remote invalidate of an STag without remote rights
	ReasonBindDisabled                     // parent MR without BIND right
	ReasonZeroBased                        // zero-based where not allowed
	ReasonHMC                              // the HMC object or a PBLE is not reachable
)

var reasonNames = [...]string{"", "FPM not committed", "STag zero", "STag index out of range",
	"STag already allocated", "STag not allocated", "STag index driver bits differ",
	"STag key differs", "STag not valid", "PD mismatch", "PD id out of range",
	"QP mismatch", "wrong STag type", "bad page size", "bad PBL level",
	"PBLE out of range", "bad length", "address wrap", "inconsistent rights",
	"bad first-byte offset", "memory windows bound", "bounds violation",
	"rights violation", "no remote access rights", "bind disabled",
	"zero-based not allowed", "HMC access failed"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// ErrMR is matched (errors.Is) by every *Error.
var ErrMR = errors.New("mr: operation failed")

// Error describes a failed operation. Errors of Translate are shared
// values (no allocation on the data path) and carry no STag.
type Error struct {
	Op     string // "AllocSTag", "RegisterNonShared", "Dealloc", "FastRegister", "Invalidate", "BindMW", "Translate"
	Reason Reason
	AE     AE     // the hardware's AE for data-path operations; 0 for CQP operations
	STag   uint32 // the STag (or index << 8) concerned, when known
	Err    error  // underlying error (an hmc or hostmem error)
}

func (e *Error) Error() string {
	s := fmt.Sprintf("mr: %s: %s", e.Op, e.Reason)
	if e.STag != 0 {
		s += fmt.Sprintf(" (STag %#x)", e.STag)
	}
	if e.AE != 0 {
		s += fmt.Sprintf(" [%v]", e.AE)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrMR.
func (e *Error) Is(target error) bool { return target == ErrMR }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// AEOf returns the AE carried by err, if it is an *Error with one.
func AEOf(err error) (AE, bool) {
	var e *Error
	if errors.As(err, &e) && e.AE != 0 {
		return e.AE, true
	}
	return 0, false
}

// ReasonOf returns the Reason of err, if it is an *Error.
func ReasonOf(err error) (Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return 0, false
}

// Shared Translate errors: the data path returns these without allocating.
var (
	errTZero      = &Error{Op: "Translate", Reason: ReasonZeroSTag, AE: AESTagZeroInvalid}
	errTIndex     = &Error{Op: "Translate", Reason: ReasonIndexRange, AE: AEBadSTagIndex}
	errTUnalloc   = &Error{Op: "Translate", Reason: ReasonNotAllocated, AE: AEUnallocatedSTag}
	errTIdxBits   = &Error{Op: "Translate", Reason: ReasonIndexMismatch, AE: AEBadSTagKey}
	errTInvalid   = &Error{Op: "Translate", Reason: ReasonInvalidState, AE: AEInvalidSTag}
	errTKey       = &Error{Op: "Translate", Reason: ReasonKeyMismatch, AE: AEBadSTagKey}
	errTPD        = &Error{Op: "Translate", Reason: ReasonPDMismatch, AE: AEBadPD}
	errTQP        = &Error{Op: "Translate", Reason: ReasonQPMismatch, AE: AEBadQP}
	errTLocalMW   = &Error{Op: "Translate", Reason: ReasonWrongType, AE: AEInvalidSTag}
	errTRights    = &Error{Op: "Translate", Reason: ReasonRights, AE: AERightsViolation}
	errTWrap      = &Error{Op: "Translate", Reason: ReasonWrap, AE: AEToWrap}
	errTBounds    = &Error{Op: "Translate", Reason: ReasonBounds, AE: AEBoundsViolation}
	errTParent    = &Error{Op: "Translate", Reason: ReasonInvalidState, AE: AEInvalidSTag}
	errTPBLE      = &Error{Op: "Translate", Reason: ReasonHMC, AE: AELCEQPCatastrophic}
	errTPBLERange = &Error{Op: "Translate", Reason: ReasonPBLERange, AE: AELCEQPCatastrophic}
	errTAddrWraps = &Error{Op: "Translate", Reason: ReasonWrap, AE: AELCEQPCatastrophic}
	errTNoTable   = &Error{Op: "Translate", Reason: ReasonNotCommitted, AE: AEBadSTagIndex}
)

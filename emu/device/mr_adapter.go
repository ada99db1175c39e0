package device

import (
	"errors"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
)

// mrAdapter presents emu/mr's STag table to the CQP: the CQP decodes the
// WQE, the table validates and records.
type mrAdapter struct{ t *mr.Table }

var _ cqp.MRTable = mrAdapter{}

// stagAccess is the record's rights: ARIGHTS, and the remote-atomic right
// from REMOTE_ATOMIC_EN (GEN_3), which is not an ARIGHTS bit.
func stagAccess(rights uint8, remoteAtomic bool) mr.Access {
	a := mr.Access(rights)
	if remoteAtomic {
		a |= mr.AccessRemoteAtomic
	}
	return a
}

func (a mrAdapter) AllocSTag(x cqp.STagAlloc) error {
	return mrStatus(a.t.AllocSTag(mr.AllocArgs{
		STagIndex: x.Index, PD: x.PD, MR: x.MR, Length: x.Len, Access: stagAccess(x.Rights, x.RemoteAtomic),
		RemoteAccess: x.RemoteAcc, PageSize: mr.PageSize(x.HPageSize), LPBLSize: x.LPBLSize,
		FirstPBLE: x.FirstPBLE, MWType1: x.MWType1, MW1BindDontValidateKey: x.MW1NoKey,
	}))
}

func (a mrAdapter) RegisterNonShared(x cqp.MRReg) error {
	return mrStatus(a.t.RegisterNonShared(mr.RegArgs{
		STagIndex: x.Index, Key: x.Key, PD: x.PD, VA: x.VA, VABased: x.VABased, Length: x.Len,
		Access: stagAccess(x.Rights, x.RemoteAtomic), RemoteAccess: x.RemoteAcc, PageSize: mr.PageSize(x.HPageSize),
		LPBLSize: x.LPBLSize, RegAddr: hostmem.IOVA(x.RegAddrPA), FirstPBLE: x.FirstPBLE,
	}))
}

func (a mrAdapter) Dealloc(idx, pd uint32, isMR bool) error {
	return mrStatus(a.t.Dealloc(idx, pd, isMR))
}

// mrError gives an emu/mr error its CQP completion code (docs/cqp-errors.md).
type mrError struct {
	err error
	st  cqp.Status
}

func (e *mrError) Error() string         { return e.err.Error() }
func (e *mrError) Unwrap() error         { return e.err }
func (e *mrError) CQPStatus() cqp.Status { return e.st }

func mrStatus(err error) error {
	if err == nil {
		return nil
	}
	minor := cqp.MinorMRError
	var me *mr.Error
	if errors.As(err, &me) {
		switch me.Reason {
		case mr.ReasonNotCommitted:
			minor = cqp.MinorHMCNotCommitted
		case mr.ReasonZeroSTag, mr.ReasonIndexRange:
			minor = cqp.MinorIndexRange
		case mr.ReasonAllocated:
			minor = cqp.MinorSTagValid
		case mr.ReasonNotAllocated, mr.ReasonIndexMismatch, mr.ReasonKeyMismatch, mr.ReasonInvalidState,
			mr.ReasonPDMismatch, mr.ReasonWrongType:
			minor = cqp.MinorSTagInvalid
		case mr.ReasonBadPD, mr.ReasonBadPageSize, mr.ReasonBadPBLLevel, mr.ReasonBadRights,
			mr.ReasonBadFBO, mr.ReasonBadLength, mr.ReasonWrap, mr.ReasonZeroBased:
			minor = cqp.MinorBadContext
		case mr.ReasonPBLERange:
			minor = cqp.MinorPBLERange
		case mr.ReasonBoundWindows:
			minor = cqp.MinorObjectInUse
		case mr.ReasonHMC:
			minor = cqp.MinorPAFault
		}
	}
	return &mrError{err: err, st: cqp.Fail(minor)}
}

package device

import (
	"errors"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// hmcAdapter presents emu/hmc to the CQP. Object types share the driver's
// numbering (hmc.h), so they convert by value.
type hmcAdapter struct{ h *hmc.HMC }

var _ cqp.HMC = hmcAdapter{}

func (a hmcAdapter) EncodeQuery(buf []byte) int { return a.h.EncodeQuery(buf) }
func (a hmcAdapter) Committed() bool            { return a.h.Committed() }
func (a hmcAdapter) InvalidatePD(v uint32)      { a.h.InvalidatePD(v) }
func (a hmcAdapter) MaxCEQs() uint32            { return a.h.MaxCEQs() }
func (a hmcAdapter) Count(t cqp.ObjType) uint32 { return a.h.Count(hmc.ObjType(t)) }
func (a hmcAdapter) Size(t cqp.ObjType) uint32  { return a.h.Size(hmc.ObjType(t)) }

func (a hmcAdapter) Commit(buf []byte) error { return hmcStatus(a.h.Commit(buf)) }

func (a hmcAdapter) SetSD(cmd, data uint64) error {
	return hmcStatus(a.h.SetSD(hmc.DecodeSDEntry(cmd, data)))
}

func (a hmcAdapter) ObjectIOVA(t cqp.ObjType, idx uint32) (hostmem.IOVA, error) {
	v, err := a.h.ObjectIOVA(hmc.ObjType(t), idx)
	return v, hmcStatus(err)
}

// hmcError gives an emu/hmc error its CQP completion code
// (docs/cqp-errors.md).
type hmcError struct {
	err error
	st  cqp.Status
}

func (e *hmcError) Error() string         { return e.err.Error() }
func (e *hmcError) Unwrap() error         { return e.err }
func (e *hmcError) CQPStatus() cqp.Status { return e.st }

func hmcStatus(err error) error {
	if err == nil {
		return nil
	}
	minor := cqp.MinorHMCError
	switch {
	case errors.Is(err, hmc.ErrNotCommitted):
		minor = cqp.MinorHMCNotCommitted
	case errors.Is(err, hmc.ErrIndex), errors.Is(err, hmc.ErrSDIndex), errors.Is(err, hmc.ErrBadType):
		minor = cqp.MinorIndexRange
	case errors.Is(err, hmc.ErrBufSize):
		minor = cqp.MinorBufferTooSmall
	case errors.Is(err, hmc.ErrSDBacking), errors.Is(err, hmc.ErrFault),
		errors.Is(err, hmc.ErrSDInvalid), errors.Is(err, hmc.ErrPDInvalid), errors.Is(err, hmc.ErrSpansPages):
		minor = cqp.MinorPAFault
	case errors.Is(err, hmc.ErrSDEntry), errors.Is(err, hmc.ErrCountOverMax), errors.Is(err, hmc.ErrLayout):
		minor = cqp.MinorHMCError
	}
	return &hmcError{err: err, st: cqp.Fail(minor)}
}

package hmc

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is. Every error the package returns
// is an *Error wrapping one of them.
var (
	// ErrNotCommitted: no COMMIT_FPM_VAL has succeeded yet.
	ErrNotCommitted = errors.New("hmc: FPM not committed")
	// ErrBadType: an object type outside 0..NumObjTypes-1.
	ErrBadType = errors.New("hmc: unknown object type")
	// ErrIndex: an object index at or beyond the committed count.
	ErrIndex = errors.New("hmc: object index beyond committed count")
	// ErrSDInvalid: the segment descriptor backing the object is not valid.
	ErrSDInvalid = errors.New("hmc: segment descriptor not valid")
	// ErrPDInvalid: the page descriptor backing the object is not valid
	// (valid bit clear, or beyond the SD's backing-page count).
	ErrPDInvalid = errors.New("hmc: page descriptor not valid")
	// ErrFault: reading a PD entry from host memory faulted; the
	// hostmem.FaultError is wrapped as well.
	ErrFault = errors.New("hmc: backing access faulted")
	// ErrSpansPages: an object larger than 4 KB in a paged SD (only the
	// 8 KB APBVT entry can be).
	ErrSpansPages = errors.New("hmc: object spans two paged backing pages")

	// ErrBufSize: a COMMIT_FPM_VAL buffer shorter than 176 bytes.
	ErrBufSize = errors.New("hmc: FPM buffer too short")
	// ErrCountOverMax: a committed count above the queried maximum.
	ErrCountOverMax = errors.New("hmc: committed count above maximum")
	// ErrLayout: the committed counts do not fit the SD table.
	ErrLayout = errors.New("hmc: FPM layout does not fit")

	// ErrSDIndex: an UPDATE_PE_SDS entry for an SD beyond the committed
	// SD count.
	ErrSDIndex = errors.New("hmc: SD index out of range")
	// ErrSDEntry: an UPDATE_PE_SDS entry with a bad field (no PMSDWR,
	// zero or unaligned address, bad backing-page count).
	ErrSDEntry = errors.New("hmc: bad SD entry")
	// ErrSDBacking: the backing page (2 MB direct, 4 KB PD page) an SD
	// entry points at is not mapped host memory.
	ErrSDBacking = errors.New("hmc: SD backing not mapped")
)

// Error describes a failed HMC operation. Fields that do not apply are 0.
type Error struct {
	Op    string  // "ObjectIOVA", "Commit", "SetSD"
	Err   error   // one of the sentinels above
	Type  ObjType // object type (ObjectIOVA, Commit)
	Index uint32  // object index (ObjectIOVA)
	SD    uint32  // SD index
	PD    uint32  // PD index within the SD
	Count uint32  // committed count (ErrIndex, ErrCountOverMax)
	Max   uint32  // queried maximum (ErrCountOverMax)
	Cause error   // underlying error (a hostmem fault)
}

func (e *Error) Error() string {
	s := fmt.Sprintf("hmc: %s", e.Op)
	switch e.Err {
	case ErrIndex:
		s += fmt.Sprintf(" %v[%d]: index beyond committed count %d", e.Type, e.Index, e.Count)
	case ErrCountOverMax:
		s += fmt.Sprintf(" %v: count %d above maximum %d", e.Type, e.Count, e.Max)
	case ErrSDInvalid, ErrSDIndex, ErrSDEntry, ErrSDBacking:
		s += fmt.Sprintf(" SD %d: %s", e.SD, trim(e.Err))
	case ErrPDInvalid, ErrFault, ErrSpansPages:
		s += fmt.Sprintf(" %v[%d] SD %d PD %d: %s", e.Type, e.Index, e.SD, e.PD, trim(e.Err))
	default:
		if e.Err != nil {
			s += ": " + trim(e.Err)
		}
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func trim(err error) string {
	s := err.Error()
	if len(s) > 5 && s[:5] == "hmc: " {
		return s[5:]
	}
	return s
}

// Unwrap returns the sentinel and the cause, so errors.Is matches either.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

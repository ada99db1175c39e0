package hostmem

import (
	"errors"
	"fmt"
)

// ErrFault is matched (errors.Is) by every *FaultError: an access the bus
// could not complete. The device turns it into the asynchronous event its
// context calls for (a CQE error, an AEQE); it is never a Go panic.
var ErrFault = errors.New("hostmem: bus fault")

// Errors of the control operations (Alloc, Map, MapIO, Unmap).
var (
	// ErrClosed is returned by every control operation after Close.
	ErrClosed = errors.New("hostmem: memory closed")
	// ErrNoSpace means the IOVA space is exhausted.
	ErrNoSpace = errors.New("hostmem: IOVA space exhausted")
	// ErrNotMapped is returned by Unmap for a region that is not (or no
	// longer) mapped in this Memory.
	ErrNotMapped = errors.New("hostmem: region not mapped")
	// ErrInvalid reports a bad argument (size, alignment, offset, backing).
	ErrInvalid = errors.New("hostmem: invalid argument")
)

// Op is the kind of access that faulted.
type Op uint8

// Access kinds. The device maps reads and writes to different asynchronous
// events (e.g. a local protection error on a payload read versus a write),
// so the distinction is kept.
const (
	OpRead  Op = iota + 1 // Read
	OpWrite               // Write
	OpLoad                // Load32, Load64
	OpStore               // Store32, Store64
	OpRMW                 // CompareAndSwap64, Add64
	OpSlice               // Slice
)

var opNames = [...]string{"", "read", "write", "load", "store", "atomic", "slice"}

func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Reason says why an access faulted.
type Reason uint8

// Fault reasons.
const (
	// ReasonUnmapped: no region covers the first byte (a gap, an address
	// below the IOVA base, a region already unmapped, or the Memory closed).
	ReasonUnmapped Reason = iota + 1
	// ReasonBounds: the access starts in a region but runs past its end, or
	// its length is negative.
	ReasonBounds
	// ReasonUnaligned: an atomic access not aligned to its size.
	ReasonUnaligned
	// ReasonNoMapping: Slice on a region with no mapping (MapIO).
	ReasonNoMapping
	// ReasonReadOnly: a write to a MapIO region without a WriterAt, or a
	// read from one without a ReaderAt.
	ReasonReadOnly
	// ReasonIO: the ReaderAt/WriterAt behind a MapIO region failed or came
	// up short (the program unmapped its buffer, or exited); Err says how.
	ReasonIO
	// ReasonBus: the mapping raised SIGBUS/SIGSEGV (e.g. the backing file
	// was truncated); Err holds the runtime error.
	ReasonBus
)

var reasonNames = [...]string{"", "unmapped address", "beyond end of region",
	"unaligned atomic", "region has no mapping", "access not permitted by backing",
	"backing I/O failed", "bus error in mapping"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// FaultError describes a failed bus access. It satisfies
// errors.Is(err, ErrFault); Unwrap returns the backing error for ReasonIO and
// ReasonBus.
type FaultError struct {
	IOVA   IOVA   // first byte of the access
	Len    uint64 // length of the access (negative lengths are reported as 0)
	Op     Op
	Reason Reason
	Region string // name of the region the access started in, if any
	Err    error  // underlying error for ReasonIO / ReasonBus
}

func (e *FaultError) Error() string {
	s := fmt.Sprintf("hostmem: %s fault at iova %#x len %d: %s", e.Op, uint64(e.IOVA), e.Len, e.Reason)
	if e.Region != "" {
		s += fmt.Sprintf(" (region %q)", e.Region)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrFault.
func (e *FaultError) Is(target error) bool { return target == ErrFault }

// Unwrap returns the underlying error, if any.
func (e *FaultError) Unwrap() error { return e.Err }

func fault(iova IOVA, n int, op Op, reason Reason, r *Region, err error) error {
	var l uint64
	if n > 0 {
		l = uint64(n)
	}
	fe := &FaultError{IOVA: iova, Len: l, Op: op, Reason: reason, Err: err}
	if r != nil {
		fe.Region = r.name
	}
	return fe
}

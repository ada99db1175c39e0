package cq

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Entry sizes (docs/hw-controlpath.md "Event queues").
const (
	CEQESize = 8  // IRDMA_CEQE_SIZE
	AEQESize = 16 // IRDMA_AEQE_SIZE
)

// AE codes the device model raises (docs/hw-controlpath.md "AE codes", user.h).
// The data plane adds the memory and transport codes as it needs them.
const (
	AECQOperationError   uint16 = 0x0203 // IRDMA_AE_CQ_OPERATION_ERROR
	AEQPSuspendComplete  uint16 = 0x0900 // IRDMA_AE_QP_SUSPEND_COMPLETE
	AELCEQPCatastrophic  uint16 = 0x0700 // IRDMA_AE_LCE_QP_CATASTROPHIC
	AELCECQCatastrophic  uint16 = 0x0702 // IRDMA_AE_LCE_CQ_CATASTROPHIC
	AEWQEUnexpectedOp    uint16 = 0x020a // IRDMA_AE_WQE_UNEXPECTED_OPCODE
	AELLPTooManyRetries  uint16 = 0x050a // IRDMA_AE_LLP_TOO_MANY_RETRIES
	AEResourceExhaustion uint16 = 0x0520 // IRDMA_AE_RESOURCE_EXHAUSTION
)

// AE sources, AEQE qword1 [53:50] (defs.h IRDMA_AE_SOURCE_*).
const (
	AESourceRsvd  uint8 = 0x0
	AESourceRQ    uint8 = 0x1
	AESourceCQ    uint8 = 0x2
	AESourceSQ    uint8 = 0x5
	AESourceInRR  uint8 = 0x9
	AESourceOutRR uint8 = 0xd
)

// AEQE qword1 fields, GEN_1/2 (docs/hw-controlpath.md "AEQE"; defs.h
// IRDMA_AEQE_*).
const (
	aeqeIDLowMask    = 0x3ffff // [17:0] QPCQID low
	aeqeWQEIdxShift  = 18      // [32:18]
	aeqeWQEIdxMask   = 0x7fff
	aeqeOverflowBit  = 33
	aeqeCodeShift    = 34 // [45:34]
	aeqeCodeMask     = 0xfff
	aeqeIDHighBit    = 46 // QPCQID bit 18
	aeqeSourceShift  = 50 // [53:50]
	aeqeSourceMask   = 0xf
	aeqeStateShift   = 54 // [56:54] IWSTATE
	aeqeStateMask    = 0x7
	aeqeTCPShift     = 57 // [60:57]
	aeqeTCPMask      = 0xf
	aeqeQ2Shift      = 61 // [62:61]
	aeqeQ2Mask       = 0x3
	ceqeCtxMask      = ^validMask // CEQE [62:0] IRDMA_CEQE_CQCTX
	eventValidBitPos = 63
)

// AEQE is one asynchronous event (GEN_2 layout).
type AEQE struct {
	Ctx      uint64 // qword0: QP context (+168) or the raw CREATE_CQ qword1
	ID       uint32 // QP or CQ id, 19 bits
	WQEIdx   uint16 // WQE descriptor index, 15 bits
	Overflow bool   // the AEQ overflowed before this entry
	Code     uint16 // AE code, 12 bits
	Source   uint8  // AE source, 4 bits
	State    uint8  // QP (iWARP) state, 3 bits
	TCPState uint8
	Q2Data   uint8
}

// Encode returns qword0 and qword1 without the valid bit.
func (a *AEQE) Encode() (q0, q1 uint64) {
	q1 = uint64(a.ID&aeqeIDLowMask) | uint64(a.ID>>18&1)<<aeqeIDHighBit |
		uint64(a.WQEIdx&aeqeWQEIdxMask)<<aeqeWQEIdxShift | b64(a.Overflow, aeqeOverflowBit) |
		uint64(a.Code&aeqeCodeMask)<<aeqeCodeShift | uint64(a.Source&aeqeSourceMask)<<aeqeSourceShift |
		uint64(a.State&aeqeStateMask)<<aeqeStateShift | uint64(a.TCPState&aeqeTCPMask)<<aeqeTCPShift |
		uint64(a.Q2Data&aeqeQ2Mask)<<aeqeQ2Shift
	return a.Ctx, q1
}

// DecodeAEQE is the inverse of Encode (valid bit ignored).
func DecodeAEQE(q0, q1 uint64) AEQE {
	return AEQE{
		Ctx:      q0,
		ID:       uint32(q1&aeqeIDLowMask) | uint32(q1>>aeqeIDHighBit&1)<<18,
		WQEIdx:   uint16(q1 >> aeqeWQEIdxShift & aeqeWQEIdxMask),
		Overflow: q1>>aeqeOverflowBit&1 == 1,
		Code:     uint16(q1 >> aeqeCodeShift & aeqeCodeMask),
		Source:   uint8(q1 >> aeqeSourceShift & aeqeSourceMask),
		State:    uint8(q1 >> aeqeStateShift & aeqeStateMask),
		TCPState: uint8(q1 >> aeqeTCPShift & aeqeTCPMask),
		Q2Data:   uint8(q1 >> aeqeQ2Shift & aeqeQ2Mask),
	}
}

// Notifier is told when an event queue received an entry; the device turns
// it into an MSI-X notification when the queue's interrupt cause is enabled.
// Calls must not block.
type Notifier interface {
	CEQEvent(ceq uint32)
	AEQEvent()
}

// Errors of the event queues.
var (
	// ErrNoCEQ: the CQ's CEQ does not exist (the CCQ is created before
	// CEQ 0, docs/hw-controlpath.md "CCQ"); no CEQE is written.
	ErrNoCEQ = errors.New("cq: CEQ does not exist")
	// ErrNoAEQ: no AEQ exists; the AE is dropped and counted.
	ErrNoAEQ = errors.New("cq: AEQ does not exist")
	// ErrAEQFull: the AEQ has no free entry; the AE is dropped and counted.
	ErrAEQFull = errors.New("cq: AEQ full")
)

// EventStats counts event-queue activity.
type EventStats struct {
	CEQEs       uint64 // CEQEs written
	AEQEs       uint64 // AEQEs written
	AEsDropped  uint64 // AEs lost: no AEQ, AEQ full, or a bus fault
	CEQEsLost   uint64 // notifications lost: CEQ missing or a bus fault
	AEQOverflow uint64 // AEQEs written with the overflow bit
}

// CEQ is a completion event queue: 8-byte entries, VALID b63 at the
// queue's polarity (starting at 1), CQ context in [62:0]
// (docs/hw-controlpath.md "CEQE").
type CEQ struct {
	ID  uint32
	mu  sync.Mutex
	mem *hostmem.Memory
	r   RingMem
	// tail is the next entry to write; pol the valid bit for it.
	tail uint32 // guarded by mu
	pol  uint64 // guarded by mu
}

// AEQ is the function's asynchronous event queue: 16-byte entries at the
// queue's polarity (starting at 1). Software returns entries by writing the
// number it consumed to AEQALLOC; the device never writes more entries than
// are free.
type AEQ struct {
	mu   sync.Mutex
	mem  *hostmem.Memory
	r    RingMem
	tail uint32 // guarded by mu
	pol  uint64 // guarded by mu
	// used counts entries written and not yet returned through AEQALLOC.
	used uint32 // guarded by mu
	// overflowed: an AE was dropped; the next entry written carries the
	// overflow bit.
	overflowed bool // guarded by mu
}

// Events holds the CEQs and the AEQ of one function.
type Events struct {
	mem    *hostmem.Memory
	meter  *timing.Meter
	notify Notifier

	ceqs []atomic.Pointer[CEQ] // indexed by CEQ id; fixed length
	aeq  atomic.Pointer[AEQ]
	// stamp, when set, is the clock every CQE carries (timestamp.go).
	stamp atomic.Pointer[stamp]

	ceqes, aeqes, aesDropped, ceqesLost, aeqOverflow atomic.Uint64
}

// NewEvents returns the event queues of a function with room for maxCEQs
// CEQ ids. meter and notify may be nil.
func NewEvents(mem *hostmem.Memory, meter *timing.Meter, notify Notifier, maxCEQs uint32) *Events {
	return &Events{mem: mem, meter: meter, notify: notify, ceqs: make([]atomic.Pointer[CEQ], maxCEQs)}
}

// MaxCEQs is the number of CEQ ids.
func (ev *Events) MaxCEQs() uint32 { return uint32(len(ev.ceqs)) }

// Stats returns the event counters.
func (ev *Events) Stats() EventStats {
	return EventStats{
		CEQEs: ev.ceqes.Load(), AEQEs: ev.aeqes.Load(), AEsDropped: ev.aesDropped.Load(),
		CEQEsLost: ev.ceqesLost.Load(), AEQOverflow: ev.aeqOverflow.Load(),
	}
}

// CEQ returns the CEQ with id, or nil.
func (ev *Events) CEQ(id uint32) *CEQ {
	if id >= uint32(len(ev.ceqs)) {
		return nil
	}
	return ev.ceqs[id].Load()
}

// Errors of CEQ/AEQ creation.
var (
	ErrExists   = errors.New("cq: object already exists")
	ErrNotFound = errors.New("cq: object does not exist")
	ErrRange    = errors.New("cq: id out of range")
)

// CreateCEQ installs CEQ id over ring r (Entry is set to CEQESize).
func (ev *Events) CreateCEQ(id uint32, r RingMem) error {
	if id >= uint32(len(ev.ceqs)) {
		return ErrRange
	}
	r.Entry = CEQESize
	if err := r.Check(ev.mem); err != nil {
		return err
	}
	q := &CEQ{ID: id, mem: ev.mem, r: r, pol: validMask}
	if !ev.ceqs[id].CompareAndSwap(nil, q) {
		return ErrExists
	}
	return nil
}

// DestroyCEQ removes CEQ id.
func (ev *Events) DestroyCEQ(id uint32) error {
	if id >= uint32(len(ev.ceqs)) {
		return ErrRange
	}
	if ev.ceqs[id].Swap(nil) == nil {
		return ErrNotFound
	}
	return nil
}

// postCEQE writes ctx to CEQ id and notifies. It is called with the CQ's
// lock held (CQ → CEQ lock order).
func (ev *Events) postCEQE(id uint32, ctx uint64) error {
	q := ev.CEQ(id)
	if q == nil {
		ev.ceqesLost.Add(1)
		return ErrNoCEQ
	}
	q.mu.Lock()
	err := q.mem.Store64(q.r.Addr(q.tail, 0), q.pol|ctx&ceqeCtxMask)
	if err == nil {
		q.tail++
		if q.tail == q.r.Size {
			q.tail = 0
			q.pol ^= validMask
		}
	}
	q.mu.Unlock()
	if err != nil {
		ev.ceqesLost.Add(1)
		return err
	}
	ev.ceqes.Add(1)
	if ev.meter != nil {
		ev.meter.Charge(timing.Event, CEQESize)
	}
	if ev.notify != nil {
		ev.notify.CEQEvent(id)
	}
	return nil
}

// CreateAEQ installs the AEQ over ring r (Entry is set to AEQESize).
func (ev *Events) CreateAEQ(r RingMem) error {
	r.Entry = AEQESize
	if err := r.Check(ev.mem); err != nil {
		return err
	}
	q := &AEQ{mem: ev.mem, r: r, pol: validMask}
	if !ev.aeq.CompareAndSwap(nil, q) {
		return ErrExists
	}
	return nil
}

// DestroyAEQ removes the AEQ.
func (ev *Events) DestroyAEQ() error {
	if ev.aeq.Swap(nil) == nil {
		return ErrNotFound
	}
	return nil
}

// HasAEQ reports whether an AEQ exists.
func (ev *Events) HasAEQ() bool { return ev.aeq.Load() != nil }

// AEQAlloc returns n consumed entries to the AEQ (a PFPE_AEQALLOC write,
// irdma_sc_repost_aeq_entries). Each write carries its own count.
func (ev *Events) AEQAlloc(n uint32) {
	q := ev.aeq.Load()
	if q == nil {
		return
	}
	q.mu.Lock()
	q.used -= min(n, q.used)
	q.mu.Unlock()
}

// PostAE writes one AEQE. When the AEQ is missing or full the AE is
// dropped (and counted); the next AEQE written carries the overflow bit,
// which makes the driver reset the function (hw.c:irdma_process_aeq).
func (ev *Events) PostAE(a AEQE) error {
	q := ev.aeq.Load()
	if q == nil {
		ev.aesDropped.Add(1)
		return ErrNoAEQ
	}
	q.mu.Lock()
	if q.used >= q.r.Size {
		q.overflowed = true
		q.mu.Unlock()
		ev.aesDropped.Add(1)
		return ErrAEQFull
	}
	ov := q.overflowed
	a.Overflow = a.Overflow || ov
	q0, q1 := a.Encode()
	err := q.mem.Store64(q.r.Addr(q.tail, 0), q0)
	if err == nil {
		err = q.mem.Store64(q.r.Addr(q.tail, 8), q1|q.pol)
	}
	if err == nil {
		q.used++
		q.overflowed = false
		q.tail++
		if q.tail == q.r.Size {
			q.tail = 0
			q.pol ^= validMask
		}
	}
	q.mu.Unlock()
	if err != nil {
		ev.aesDropped.Add(1)
		return err
	}
	ev.aeqes.Add(1)
	if a.Overflow {
		ev.aeqOverflow.Add(1)
	}
	if ev.meter != nil {
		ev.meter.Charge(timing.Event, AEQESize)
	}
	if ev.notify != nil {
		ev.notify.AEQEvent()
	}
	return nil
}

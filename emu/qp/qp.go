package qp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Type is the QP type of the CQP QP WQEs' QPTYPE field (defs.h
// IRDMA_QP_TYPE_*; docs/hw-controlpath.md "QP types and states").
type Type uint8

const (
	TypeIWARP  Type = 1
	TypeUDA    Type = 2
	TypeRoCERC Type = 3
	TypeRoCEUD Type = 4
)

func (t Type) String() string {
	switch t {
	case TypeIWARP:
		return "IWARP"
	case TypeUDA:
		return "UDA"
	case TypeRoCERC:
		return "RC"
	case TypeRoCEUD:
		return "UD"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// State is the hardware QP state, NEXTIWSTATE of CREATE/MODIFY_QP (defs.h
// IRDMA_QP_STATE_*).
type State uint8

const (
	StateInvalid   State = 0
	StateIdle      State = 1 // INIT
	StateRTS       State = 2
	StateClosing   State = 3 // SQD on RoCE
	StateRTR       State = 4
	StateTerminate State = 5 // iWARP only
	StateError     State = 6
)

var stateNames = [...]string{"INVALID", "IDLE", "RTS", "CLOSING", "RTR", "TERMINATE", "ERROR"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// CanTransition reports whether the device accepts a MODIFY_QP from state
// from to NEXTIWSTATE to on a RoCE QP. The table follows the transitions
// irdma issues (verbs.c:irdma_modify_qp_roce, docs/hw-controlpath.md
// "MODIFY_QP transitions"): IDLE again after CREATE (INIT), RTR from IDLE,
// RTS from RTR (and RTS or SQD again: a re-modify, resume from SQD), SQD from
// RTS, ERROR from any state. TERMINATE is iWARP's and INVALID is never a
// target.
func CanTransition(from, to State) bool {
	switch to {
	case StateIdle:
		return from == StateInvalid || from == StateIdle
	case StateRTR:
		return from == StateIdle || from == StateRTR
	case StateRTS:
		return from == StateRTR || from == StateRTS || from == StateClosing
	case StateClosing:
		return from == StateRTS || from == StateClosing
	case StateError:
		return true
	}
	return false
}

// WQ is one work queue (SQ or RQ) as the device sees it: where its quanta
// are, how many, and the device's consumer index and polarity.
type WQ struct {
	// Mem locates the quanta (Entry = QuantumSize, Size = quanta).
	Mem cq.RingMem
	// WQEQuanta is the stride of an RQ WQE (1 << RQWQESIZE); 0 on the SQ,
	// whose WQEs are 1..8 quanta each.
	WQEQuanta uint32
	// Virtual: the context address was a level-1 PBLE index (VQ).
	Virtual bool
	// cons is the device's consumer index in quanta, pol the valid bit
	// expected there (starts at 1, flips on wrap).
	cons uint32
	pol  uint8
}

// Cons returns the consumer index (quanta) and the expected valid bit.
func (w *WQ) Cons() (uint32, uint8) { return w.cons, w.pol }

// Quanta is the ring size in quanta.
func (w *WQ) Quanta() uint32 { return w.Mem.Size }

func (w *WQ) advance(n uint32) {
	w.cons += n
	for w.cons >= w.Mem.Size && w.Mem.Size != 0 {
		w.cons -= w.Mem.Size
		w.pol ^= 1
	}
}

// Attrs is the decoded context cache: the fields of Context the device
// acts on, taken at CREATE_QP and every MODIFY_QP.
type Attrs struct {
	PD            uint32
	SendCQ        uint32
	RecvCQ        uint32
	DestQP        uint32
	QKey          uint32
	PSNNext       uint32
	EPSN          uint32
	PSNUna        uint32
	MTU           uint16 // SNDMSS: path MTU in bytes
	ARPIdx        uint16
	VLANTag       uint16
	InsertVLAN    bool
	IPv4          bool
	TTL           uint8
	TOS           uint8
	FlowLabel     uint32
	SrcPort       uint16
	DestPort      uint16
	PKey          uint16
	ORD           uint8
	IRD           uint32
	RetryCnt      uint8
	RNRRetry      uint8
	RemoteRead    bool // RDOK
	RemoteWrite   bool // WRRDRSPOK
	RemoteAtomic  bool // REMOTE_ATOMIC_EN (GEN_3 only; RemoteAtomicEnGen3)
	BindEn        bool
	FastRegEn     bool
	PrivEn        bool
	IsQP1         bool
	StatsIdx      uint8
	UseStats      bool
	QSHandle      uint16
	CompletionCtx uint64
	LocalMAC      [6]byte
	SQQuanta      uint32
	RQQuanta      uint32
	RQWQEShift    uint8
}

// DecodeAttrs fills Attrs from a host context; gen3 reads the GEN_3 fields
// the emulator keeps in the GEN_2 layout (REMOTE_ATOMIC_EN, the narrower
// IRDSIZE).
func DecodeAttrs(c Context, gen3 bool) Attrs {
	a := Attrs{
		PD: c.PD(), SendCQ: c.TxCQNum(), RecvCQ: c.RxCQNum(), DestQP: c.DestQP(), QKey: c.QKey(),
		PSNNext: c.PSNNext(), EPSN: c.EPSN(), PSNUna: c.PSNUna(), MTU: c.SndMSS(), ARPIdx: c.ARPIdx(),
		VLANTag: c.VLANTag(), InsertVLAN: c.InsertVLANTag(), IPv4: c.IPv4(), TTL: c.TTL(), TOS: c.TOS(),
		FlowLabel: c.FlowLabel(), SrcPort: c.SrcPort(), DestPort: c.DestPort(), PKey: c.PKey(),
		ORD: c.ORDSize(), IRD: IRDEntries(c.IRDSizeEnc()), RetryCnt: c.RexmitThresh(), RNRRetry: c.RNRNakThresh(),
		RemoteRead: c.RdOK(), RemoteWrite: c.WrRdRespOK(), BindEn: c.BindEn(), FastRegEn: c.FastRegEn(),
		PrivEn: c.PrivEn(), IsQP1: c.IsQP1(), StatsIdx: c.StatIndex(), UseStats: c.UseStatsInstance(),
		QSHandle: c.QSHandle(), CompletionCtx: c.CompletionCtx(), LocalMAC: c.LocalMAC(),
		SQQuanta: 1 << (uint32(c.SQSize()) + 2), RQQuanta: 1 << (uint32(c.RQSize()) + 2), RQWQEShift: c.RQWQESize(),
	}
	if gen3 {
		a.IRD, a.RemoteAtomic = IRDEntries(c.IRDSizeEncGen3()), c.RemoteAtomicEnGen3()
	}
	return a
}

// Spec is what CREATE_QP establishes, decoded by the CQP.
type Spec struct {
	ID      uint32
	Type    Type
	State   State
	Context []byte       // the 256-byte host context as read
	CtxIOVA hostmem.IOVA // where the driver keeps it (WQE qword2)
	HMCIOVA hostmem.IOVA // the HMC QP object the device stored it in
	Shadow  hostmem.IOVA // WQE qword5: QP shadow area (HW SQ tail at +0)
	SQ, RQ  cq.RingMem
	Virtual bool // VQ
	SendCQ  *cq.CQ
	RecvCQ  *cq.CQ
	// SRQ is the shared receive queue the context's USE_SRQ / SRQ_ID name
	// (GEN_3); nil: the QP's own RQ.
	SRQ *SRQ
	// PadUncounted is the profile's pad rule (GEN_3: not counted in
	// ADDFRAGCNT), for the flush walk's WQE sizes.
	PadUncounted bool
	// Gen3Context: the context carries GEN_3's fields (DecodeAttrs).
	Gen3Context bool
}

// QP is one queue pair. Control-plane fields are guarded by mu (the CQP
// and flush take it); the data plane keeps its requester, responder and
// completer state in Transport and takes its own locks.
type QP struct {
	ID   uint32
	Type Type

	mu      sync.Mutex
	state   atomic.Uint32 // State
	ctx     [ContextSize]byte
	attrs   Attrs        // guarded by mu
	ctxIOVA hostmem.IOVA // guarded by mu
	hmcIOVA hostmem.IOVA
	shadow  hostmem.IOVA
	sq, rq  WQ     // guarded by mu
	sendCQ  *cq.CQ // guarded by mu
	recvCQ  *cq.CQ // guarded by mu
	// flushed records which queues FLUSH_WQES has flushed since the last
	// transition out of ERROR (re-flushes of new WQEs are allowed).
	suspended bool // guarded by mu

	srq          *SRQ // fixed at CREATE_QP
	padUncounted bool
	gen3Context  bool

	// Transport is the QP's data plane, attached by the engine on the QP's
	// first doorbell or packet (nil until then). The control plane only
	// brackets its changes with it (hook.go).
	Transport atomic.Pointer[Transport]

	// gen counts context changes (Gen).
	gen atomic.Uint64
}

// State returns the current state.
func (q *QP) State() State { return State(q.state.Load()) }

// Attrs returns a copy of the decoded context cache.
func (q *QP) Attrs() Attrs {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.attrs
}

// Context returns a copy of the stored host context.
func (q *QP) Context() [ContextSize]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ctx
}

// HMCIOVA is where the device stored the context in HMC backing memory.
func (q *QP) HMCIOVA() hostmem.IOVA { return q.hmcIOVA }

// SRQ is the shared receive queue the QP takes its receives from (nil:
// its own RQ).
func (q *QP) SRQ() *SRQ { return q.srq }

// Shadow is the QP shadow area.
func (q *QP) Shadow() hostmem.IOVA { return q.shadow }

// CQs returns the send and receive CQs.
func (q *QP) CQs() (send, recv *cq.CQ) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sendCQ, q.recvCQ
}

// SQ and RQ return copies of the work-queue descriptors.
func (q *QP) SQ() WQ { q.mu.Lock(); defer q.mu.Unlock(); return q.sq }
func (q *QP) RQ() WQ { q.mu.Lock(); defer q.mu.Unlock(); return q.rq }

// Suspended reports whether SUSPEND_QP (without RESUME_QP) was applied.
func (q *QP) Suspended() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.suspended }

// SetSuspended records SUSPEND_QP / RESUME_QP.
func (q *QP) SetSuspended(v bool) { q.mu.Lock(); q.suspended = v; q.gen.Add(1); q.mu.Unlock() }

// Modify applies a MODIFY_QP: the new context (re-read in full on every
// modify, docs/hw-controlpath.md "QP WQEs"), the CQs when CQNUMVALID, the new
// state. The caller checked the transition and the CQs.
func (q *QP) Modify(ctx []byte, ctxIOVA hostmem.IOVA, next State, sendCQ, recvCQ *cq.CQ) {
	end := q.beginControl()
	defer end(false)
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.gen.Add(1)
	copy(q.ctx[:], ctx)
	c, _ := NewContext(q.ctx[:])
	q.attrs = DecodeAttrs(c, q.gen3Context)
	q.ctxIOVA = ctxIOVA
	if sendCQ != nil && sendCQ != q.sendCQ {
		sendCQ.Bind()
		if q.sendCQ != nil {
			q.sendCQ.Unbind()
		}
		q.sendCQ = sendCQ
	}
	if recvCQ != nil && recvCQ != q.recvCQ {
		recvCQ.Bind()
		if q.recvCQ != nil {
			q.recvCQ.Unbind()
		}
		q.recvCQ = recvCQ
	}
	q.state.Store(uint32(next))
}

// Errors of the QP table.
var (
	ErrExists   = errors.New("qp: QP already exists")
	ErrNotFound = errors.New("qp: QP does not exist")
	ErrRange    = errors.New("qp: QP id out of range")
)

// Table holds the QPs of a function by id; lookups are lock-free.
type Table struct {
	mem    *hostmem.Memory
	mu     sync.Mutex
	tab    atomic.Pointer[[]atomic.Pointer[QP]]
	onLoad atomic.Pointer[func(*QP)]
}

// NewTable returns an empty table with room for capacity ids.
func NewTable(mem *hostmem.Memory, capacity uint32) *Table {
	t := &Table{mem: mem}
	s := make([]atomic.Pointer[QP], capacity)
	t.tab.Store(&s)
	return t
}

// SetCapacity grows the id space (after COMMIT_FPM_VAL).
func (t *Table) SetCapacity(n uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.tab.Load()
	if uint32(len(old)) >= n {
		return
	}
	s := make([]atomic.Pointer[QP], n)
	for i := range old {
		s[i].Store(old[i].Load())
	}
	t.tab.Store(&s)
}

// Get returns QP id, or nil.
func (t *Table) Get(id uint32) *QP {
	s := *t.tab.Load()
	if id >= uint32(len(s)) {
		return nil
	}
	return s[id].Load()
}

// Count returns the number of live QPs.
func (t *Table) Count() int {
	n := 0
	for i := range *t.tab.Load() {
		if (*t.tab.Load())[i].Load() != nil {
			n++
		}
	}
	return n
}

// Create installs a QP from sp, binds its CQs and publishes the HW SQ
// tail (0) in its shadow area.
func (t *Table) Create(sp Spec) (*QP, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.tab.Load()
	if sp.ID >= uint32(len(s)) {
		return nil, ErrRange
	}
	if s[sp.ID].Load() != nil {
		return nil, ErrExists
	}
	q := &QP{ID: sp.ID, Type: sp.Type, ctxIOVA: sp.CtxIOVA, hmcIOVA: sp.HMCIOVA, shadow: sp.Shadow,
		sendCQ: sp.SendCQ, recvCQ: sp.RecvCQ, srq: sp.SRQ, padUncounted: sp.PadUncounted,
		gen3Context: sp.Gen3Context}
	copy(q.ctx[:], sp.Context)
	c, _ := NewContext(q.ctx[:])
	q.attrs = DecodeAttrs(c, q.gen3Context)
	q.sq = WQ{Mem: sp.SQ, Virtual: sp.Virtual, pol: 1}
	q.rq = WQ{Mem: sp.RQ, Virtual: sp.Virtual, pol: 1, WQEQuanta: 1 << q.attrs.RQWQEShift}
	q.state.Store(uint32(sp.State))
	if q.sendCQ != nil {
		q.sendCQ.Bind()
	}
	if q.recvCQ != nil {
		q.recvCQ.Bind()
	}
	q.publishSQTail(t.mem)
	s[sp.ID].Store(q)
	return q, nil
}

// Destroy removes QP id and unbinds its CQs.
func (t *Table) Destroy(id uint32) error {
	if q := t.Get(id); q != nil {
		// Keep the data plane off the QP while it goes (hook.go).
		end := q.beginControl()
		defer end(true)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.tab.Load()
	if id >= uint32(len(s)) {
		return ErrRange
	}
	q := s[id].Swap(nil)
	if q == nil {
		return ErrNotFound
	}
	q.mu.Lock()
	if q.sendCQ != nil {
		q.sendCQ.Unbind()
	}
	if q.recvCQ != nil {
		q.recvCQ.Unbind()
	}
	q.sendCQ, q.recvCQ = nil, nil
	q.mu.Unlock()
	return nil
}

// ShadowSQTailMask is QP shadow qword0 [14:0], IRDMA_QP_DBSA_HW_SQ_TAIL
// (docs/hw-datapath.md "Doorbells", "QP shadow area").
const ShadowSQTailMask = 0x7fff

// publishSQTail writes the SQ consumer index into shadow qword0 [14:0]:
// the kernel's doorbell suppression compares with it (irdma_uk_qp_post_wr).
// Called with q.mu held (or before the QP is published).
func (q *QP) publishSQTail(mem *hostmem.Memory) {
	if q.shadow == 0 {
		return
	}
	_ = mem.Store64(q.shadow, uint64(q.sq.cons&ShadowSQTailMask))
}

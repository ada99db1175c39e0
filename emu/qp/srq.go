package qp

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Shared receive queues (GEN_3; docs/hw-datapath.md "SRQ (GEN_3)").
//
// An SRQ is a ring of RQ-format WQEs of 1 << shift quanta each whose
// qword2 is the wr_id (rdma-core uk.c irdma_uk_srq_post_receive). Software
// writes (index + 1) mod size, in WQEs, into shadow qword0 after each post:
// that producer index is the only doorbell; the device also finds WQEs by
// their valid bit, as on an RQ. Every QP whose context has USE_SRQ takes its
// receives from the SRQ its SRQ_ID names (ctrl.c
// irdma_sc_qp_setctx_roce_gen_3). The SRQ limit: when the limit is armed
// (CREATE/MODIFY_SRQ ARM_LIMIT_EVENT with SRQ_LIMIT ≠ 0) and a receive
// leaves fewer than SRQ_LIMIT WQEs posted, the device raises
// IRDMA_AE_SRQ_LIMIT once and disarms (the IBTA's SRQ limit semantics; the
// kernel's irdma_srq_event clears its srq_limit for the same reason).

// AE codes of SRQs (user.h).
const (
	AESRQLimit            uint16 = 0x0209 // IRDMA_AE_SRQ_LIMIT
	AESRQCatastrophic     uint16 = 0x020f // IRDMA_AE_SRQ_CATASTROPHIC_ERROR
	MajorSRQFlushRsvd     uint16 = 0xfffe // IRDMA_SRQFLUSH_RSVD_MAJOR_ERR: an SRQ error CQE, minor = AE code
	srqWrIDOffset                = 16     // WQE qword2
	srqShadowProducerMask        = 0x3ffff
)

// ErrSRQDestroyed is what a QP bound to a destroyed SRQ meets when it needs
// a receive WQE.
var ErrSRQDestroyed = errors.New("qp: SRQ destroyed")

// SRQSpec is a decoded CREATE_SRQ (ctrl.c:irdma_sc_srq_create).
type SRQSpec struct {
	ID     uint32
	PD     uint32
	Ctx    uint64       // qword1: returned in the SRQ's AEs (the kernel's irdma_sc_srq pointer)
	Ring   cq.RingMem   // Entry = WQE bytes (32 << shift), Size = WQEs
	Shadow hostmem.IOVA // producer index in qword0
	Limit  uint32
	Armed  bool
}

// SRQ is one shared receive queue.
type SRQ struct {
	ID     uint32
	PD     uint32
	Ctx    uint64
	ring   cq.RingMem
	shadow hostmem.IOVA
	stride uint32 // quanta per WQE

	mu    sync.Mutex
	cons  uint32 // next WQE to take
	pol   uint8  // valid bit expected at cons
	limit uint32
	armed bool
	taken uint64

	dead atomic.Bool
}

// SRQState is what tests and statistics read of an SRQ.
type SRQState struct {
	Cons, Limit uint32
	Armed       bool
	Taken       uint64
	WQEs        uint32
}

// State returns a snapshot of the SRQ's consumer and limit.
func (s *SRQ) State() SRQState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQState{Cons: s.cons, Limit: s.limit, Armed: s.armed, Taken: s.taken, WQEs: s.ring.Size}
}

// SetLimit is MODIFY_SRQ: the new limit, armed or not.
func (s *SRQ) SetLimit(limit uint32, armed bool) {
	s.mu.Lock()
	s.limit, s.armed = limit, armed
	s.mu.Unlock()
}

// SRQWQE is one WQE taken from an SRQ.
type SRQWQE struct {
	Idx  uint32 // WQE index × stride: the CQE's WQEIDX in quanta
	WrID uint64 // qword2
}

// Take decodes the WQE at the consumer index into w and moves past it: a
// WQE is claimed by the first QP that needs it (several QPs' responders
// run at once). It reports limitHit when this receive crossed the armed
// limit; the caller raises the AE.
func (s *SRQ) Take(mem *hostmem.Memory, meter *timing.Meter, lim WQELimits, w *RQWQE) (got SRQWQE, ok, limitHit bool, err error) {
	if s.dead.Load() {
		return got, false, false, ErrSRQDestroyed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := mem.Load64(s.ring.Addr(s.cons, headerOffset))
	if err != nil {
		return got, false, false, err
	}
	if Header(h).ValidBit() != s.pol {
		return got, false, false, nil
	}
	var buf [MaxWQEQuanta * QuantumSize]byte
	n := int(min(s.stride, MaxWQEQuanta)) * QuantumSize
	if err := mem.Read(s.ring.Addr(s.cons, 0), buf[:n]); err != nil {
		return got, false, false, err
	}
	meter.Charge(timing.WQEFetch, n)
	if err := DecodeRQ(w, buf[:n], DecodeParams{Polarity: s.pol, Limits: lim, WQEQuanta: int(s.stride)}); err != nil {
		return got, false, false, nil
	}
	got = SRQWQE{Idx: s.cons * s.stride, WrID: leUint64(buf[srqWrIDOffset:])}
	s.cons++
	if s.cons >= s.ring.Size {
		s.cons = 0
		s.pol ^= 1
	}
	s.taken++
	if s.armed && s.limit != 0 {
		if p, perr := mem.Load64(s.shadow); perr == nil {
			prod := uint32(p&srqShadowProducerMask) % s.ring.Size
			if posted := (prod + s.ring.Size - s.cons) % s.ring.Size; posted < s.limit {
				s.armed = false
				limitHit = true
			}
		}
	}
	return got, true, limitHit, nil
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// srqSource is one QP's view of its SRQ (RecvSource): Peek claims the next
// WQE from the SRQ and holds it until the message consumes it, so that two
// QPs never receive into the same WQE; an RNR NAK holds nothing (none was
// posted). A held WQE stays with the QP for its next message if the
// current one is abandoned before it commits.
type srqSource struct {
	s      *SRQ
	ev     *cq.Events
	held   bool
	wqe    RQWQE
	cur    SRQWQE
	last   SRQWQE
	rqSync WQState // the QP's own (unused) RQ, handed back unchanged
}

func newSRQSource(s *SRQ, ev *cq.Events, rq WQ) *srqSource {
	return &srqSource{s: s, ev: ev, rqSync: WQState{Cons: rq.cons, Pol: rq.pol}}
}

func (r *srqSource) Peek(mem *hostmem.Memory, meter *timing.Meter, lim WQELimits, w *RQWQE) (bool, error) {
	if r.held {
		*w = r.wqe
		return true, nil
	}
	got, ok, limitHit, err := r.s.Take(mem, meter, lim, w)
	if err != nil || !ok {
		return false, err
	}
	if limitHit && r.ev != nil {
		// hw.c irdma_process_aeq: IRDMA_AE_SRQ_LIMIT → irdma_srq_event
		// with the SRQ's context from the AEQE.
		_ = r.ev.PostAE(cq.AEQE{Ctx: r.s.Ctx, ID: r.s.ID, Code: AESRQLimit, WQEIdx: uint16(got.Idx)})
	}
	r.held, r.wqe, r.cur = true, *w, got
	return true, nil
}

func (r *srqSource) Consume() uint32 {
	r.held = false
	r.last = r.cur
	return r.cur.Idx
}

func (r *srqSource) State() WQState     { return r.rqSync }
func (r *srqSource) SetState(s WQState) { r.rqSync = s }
func (r *srqSource) SRQ() bool          { return true }

// srqCQE makes c an SRQ completion of the WQE just consumed: the SRQ bit,
// the wr_id in qword1 and the QP's completion context in qword5 (rdma-core
// uk.c irdma_uk_cq_poll_cmpl reads them there for is_srq), which lives in
// the extension: EXTCQE is set.
func (r *srqSource) srqCQE(c *cq.CQE) {
	c.SRQ, c.Ext = true, true
	c.SRQQPCtx, c.QPCtx = c.QPCtx, r.last.WrID
}

// SRQTable holds a function's SRQs by id.
type SRQTable struct {
	mu  sync.RWMutex
	max uint32
	m   map[uint32]*SRQ
}

// NewSRQTable returns a table for ids below max.
func NewSRQTable(max uint32) *SRQTable { return &SRQTable{max: max, m: map[uint32]*SRQ{}} }

// Get returns SRQ id or nil.
func (t *SRQTable) Get(id uint32) *SRQ {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[id]
}

// Len is how many SRQs exist.
func (t *SRQTable) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// Create adds an SRQ (ErrRange beyond the id space, ErrExists if taken).
func (t *SRQTable) Create(sp SRQSpec) (*SRQ, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sp.ID >= t.max {
		return nil, ErrRange
	}
	if t.m[sp.ID] != nil {
		return nil, ErrExists
	}
	// The ring is addressed in WQEs: Entry is the WQE size, Size the
	// number of WQEs.
	stride := max(sp.Ring.Entry/QuantumSize, 1)
	s := &SRQ{ID: sp.ID, PD: sp.PD, Ctx: sp.Ctx, ring: sp.Ring, shadow: sp.Shadow, stride: stride,
		pol: 1, limit: sp.Limit, armed: sp.Armed}
	t.m[sp.ID] = s
	return s, nil
}

// Destroy removes SRQ id; QPs still bound to it meet ErrSRQDestroyed.
func (t *SRQTable) Destroy(id uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[id]
	if s == nil {
		return ErrNotFound
	}
	s.dead.Store(true)
	delete(t.m, id)
	return nil
}

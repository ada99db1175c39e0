package cq

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// CQ shadow area (uk.c irdma_uk_cq_request_notification; docs/hw-datapath.md
// "CQ shadow area and arming").
const (
	ShadowHeadOffset = 0       // qword0: software head
	ShadowArmOffset  = 32      // qword4: arm word
	shadowHeadMask   = 0xfffff // [19:0] IRDMA_CQ_DBSA_CQEIDX
	armNextBit       = 14      // IRDMA_CQ_DBSA_ARM_NEXT: any completion
	armNextSEBit     = 15      // IRDMA_CQ_DBSA_ARM_NEXT_SE: set on every arm
	armSeqShift      = 16      // [17:16] IRDMA_CQ_DBSA_ARM_SEQ_NUM
	armSeqMask       = 0x3
)

// Errors of CQE writing.
var (
	// ErrOverflow: the CQE would overrun the software head; it was not
	// written and AE CQ_OPERATION_ERROR was raised.
	ErrOverflow = errors.New("cq: CQ overflow")
	// ErrDestroyed: the CQ was destroyed.
	ErrDestroyed = errors.New("cq: CQ destroyed")
)

// Config describes a CQ as CREATE_CQ programs it (docs/hw-controlpath.md "CQ
// WQEs", "CQ creation and resize").
type Config struct {
	ID   uint32
	Ring RingMem // Entry 32 (or 64 with AvoidMemCflct), Size = cq_size
	// Shadow is the 64-byte shadow area (head at +0, arm word at +32).
	Shadow hostmem.IOVA
	CEQ    uint32 // CEQ id (when CEQValid)
	// CEQValid: CEQIDVALID; without it the CQ never raises CEQEs.
	CEQValid bool
	// Ctx is CREATE_CQ qword1 verbatim (the driver's cq pointer >> 1):
	// echoed in CEQEs and in CQ AEQEs.
	Ctx uint64
	// CEQEMask is ENCEQEMASK (1 for normal CQs, 0 for the CCQ). Its exact
	// meaning is undocumented (docs/hw-controlpath.md "What the driver leaves
	// open"); both kinds are armed through the shadow area and the model
	// treats them alike.
	CEQEMask bool
	// CheckOverflow is CHKOVERFLOW: compare with the shadow head first.
	CheckOverflow bool
	// AvoidMemCflct is AVOIDMEMCNFLCT: 64-byte CQEs, extension in bytes 32–63.
	AvoidMemCflct       bool
	ShadowReadThreshold uint32
	Virtual             bool   // VIRTMAP (the ring is a level-1 PBLE list)
	FirstPBLE           uint32 // FIRSTPMPBLIDX when Virtual
	TPHEn               bool
	TPHVal              uint8
	VSIIdx              uint16
}

// CQ is one completion queue.
type CQ struct {
	ev  *Events
	mem *hostmem.Memory

	mu  sync.Mutex
	cfg Config // guarded by mu (Resize replaces the ring)
	// tail is the next slot to write, pol the valid bit for it.
	tail uint32 // guarded by mu
	pol  uint64 // guarded by mu
	// armSeq is the arm sequence number last notified (or seen at
	// create), armKnown whether one was read.
	armSeq    uint8 // guarded by mu
	overflow  bool  // guarded by mu: an overflow AE is outstanding
	destroyed bool  // guarded by mu

	// bound counts the QPs whose send or receive CQ this is; a CQ still
	// bound cannot be destroyed.
	bound atomic.Int32

	cqes, overflows, notifies atomic.Uint64
}

// Stats counts a CQ's activity.
type Stats struct {
	CQEs      uint64 // CQEs written (an extended CQE counts once)
	Overflows uint64 // CQEs refused for lack of room
	Notifies  uint64 // CEQEs raised
}

func newCQ(ev *Events, mem *hostmem.Memory, cfg Config) *CQ {
	c := &CQ{ev: ev, mem: mem, cfg: cfg, pol: validMask}
	// Remember the arm sequence number the shadow area holds now, so that
	// a stale value (a reused shadow area) is not taken for a new arm.
	if w, err := mem.Load64(cfg.Shadow + ShadowArmOffset); err == nil {
		c.armSeq = uint8(w >> armSeqShift & armSeqMask)
	}
	return c
}

// ID returns the CQ id.
func (c *CQ) ID() uint32 { return c.cfg.ID }

// Config returns the CQ's current configuration.
func (c *CQ) Config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Stats returns the CQ's counters.
func (c *CQ) Stats() Stats {
	return Stats{CQEs: c.cqes.Load(), Overflows: c.overflows.Load(), Notifies: c.notifies.Load()}
}

// Bind and Unbind count the QPs that complete into this CQ.
func (c *CQ) Bind()        { c.bound.Add(1) }
func (c *CQ) Unbind()      { c.bound.Add(-1) }
func (c *CQ) Bound() int32 { return c.bound.Load() }

// Tail returns the producer index and the polarity of the next CQE.
func (c *CQ) Tail() (idx uint32, valid uint8) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tail, uint8(c.pol >> cqeValidBit)
}

// Resize switches the CQ to a new ring (MODIFY_CQ with CQRESIZE): every
// later CQE goes to the new ring from index 0 with valid 1
// (docs/hw-controlpath.md "CQ creation and resize"; uk.c irdma_uk_cq_resize).
func (c *CQ) Resize(r RingMem, cfg func(*Config)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Ring = r
	if cfg != nil {
		cfg(&c.cfg)
	}
	c.tail = 0
	c.pol = validMask
	c.overflow = false
}

func (c *CQ) entryQwords() uint32 { return c.cfg.Ring.Entry / 8 }

// Post writes e at the CQ's tail (see the package documentation for the
// order of stores), then raises a CEQE if the CQ is armed for it.
func (c *CQ) Post(e *CQE) error {
	base, ext := e.Encode()
	return c.post(base, ext, e.Ext, e.SolEvent, true)
}

// PostRaw writes a CQE given as qwords (qword3 without the valid bit);
// extended when ext is non-nil. The CCQ writer uses it for CCQEs.
func (c *CQ) PostRaw(base [4]uint64, ext *[4]uint64, solicited bool) error {
	if ext != nil {
		base[3] |= 1 << cqeExtBit
		return c.post(base, *ext, true, solicited, false)
	}
	return c.post(base, [4]uint64{}, false, solicited, false)
}

// post writes a CQE; stamped ones carry the device clock when the device
// has one (timestamp.go), read under the CQ's lock so that CQEs of one CQ
// carry non-decreasing times in ring order.
func (c *CQ) post(base, ext [4]uint64, hasExt, solicited, stamped bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return ErrDestroyed
	}
	r := &c.cfg.Ring
	wide := r.Entry >= 64
	slots := uint32(1)
	if hasExt && !wide {
		slots = 2
	}
	if c.cfg.CheckOverflow {
		h, err := c.mem.Load64(c.cfg.Shadow + ShadowHeadOffset)
		if err != nil {
			return err
		}
		head := uint32(h&shadowHeadMask) % r.Size
		used := (c.tail + r.Size - head) % r.Size
		if used+slots > r.Size-1 {
			c.overflows.Add(1)
			if !c.overflow {
				c.overflow = true
				// The raw CREATE_CQ qword1 and the CQ id
				// (docs/hw-controlpath.md "AEQE").
				_ = c.ev.PostAE(AEQE{Ctx: c.cfg.Ctx, ID: c.cfg.ID, Code: AECQOperationError, Source: AESourceCQ})
			}
			return ErrOverflow
		}
	}
	c.overflow = false
	if stamped {
		stampInto(&c.ev.stamp, &base[0])
	}
	// Extension first: its own valid bit must match by the time software
	// sees the base valid bit.
	if hasExt {
		if wide {
			for i := 0; i < 3; i++ {
				if err := c.mem.Store64(r.Addr(c.tail, uint32(32+8*i)), ext[i]); err != nil {
					return err
				}
			}
			if err := c.mem.Store64(r.Addr(c.tail, 56), ext[3]|c.pol); err != nil {
				return err
			}
		} else {
			next, pol := c.tail+1, c.pol
			if next == r.Size {
				next, pol = 0, pol^validMask
			}
			for i := 0; i < 3; i++ {
				if err := c.mem.Store64(r.Addr(next, uint32(8*i)), ext[i]); err != nil {
					return err
				}
			}
			if err := c.mem.Store64(r.Addr(next, 24), ext[3]|pol); err != nil {
				return err
			}
		}
	}
	for i := 0; i < 3; i++ {
		if err := c.mem.Store64(r.Addr(c.tail, uint32(8*i)), base[i]); err != nil {
			return err
		}
	}
	if err := c.mem.Store64(r.Addr(c.tail, 24), base[3]&cqeQword3NoValid|c.pol); err != nil {
		return err
	}
	for range slots {
		c.tail++
		if c.tail == r.Size {
			c.tail = 0
			c.pol ^= validMask
		}
	}
	c.cqes.Add(1)
	if c.ev.meter != nil {
		c.ev.meter.Charge(timing.CQEWrite, int(slots*r.Entry))
	}
	c.checkArmLocked(solicited)
	return nil
}

// checkArmLocked reads the arm word and raises one CEQE per arm.
func (c *CQ) checkArmLocked(solicited bool) {
	if !c.cfg.CEQValid {
		return
	}
	w, err := c.mem.Load64(c.cfg.Shadow + ShadowArmOffset)
	if err != nil {
		return
	}
	seq := uint8(w >> armSeqShift & armSeqMask)
	if seq == c.armSeq {
		return // no new arm since the last notification
	}
	next := w>>armNextBit&1 == 1
	se := w>>armNextSEBit&1 == 1
	if !next && !(se && solicited) {
		return // armed for solicited completions only
	}
	if err := c.ev.postCEQE(c.cfg.CEQ, c.cfg.Ctx); err != nil {
		// No CEQ yet (the CCQ before CEQ 0) or a fault: keep the arm
		// pending so that a later CQE notifies.
		return
	}
	c.armSeq = seq
	c.notifies.Add(1)
}

// Table holds the CQs of a function by id. Lookups are lock-free.
type Table struct {
	mem *hostmem.Memory
	ev  *Events
	mu  sync.Mutex                           // serialises Create, Destroy, SetCapacity
	tab atomic.Pointer[[]atomic.Pointer[CQ]] // indexed by CQ id
}

// NewTable returns an empty table with room for capacity ids.
func NewTable(mem *hostmem.Memory, ev *Events, capacity uint32) *Table {
	t := &Table{mem: mem, ev: ev}
	s := make([]atomic.Pointer[CQ], capacity)
	t.tab.Store(&s)
	return t
}

// Events returns the event queues the CQs notify.
func (t *Table) Events() *Events { return t.ev }

// SetCapacity grows the id space (after COMMIT_FPM_VAL sets the CQ count).
func (t *Table) SetCapacity(n uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.tab.Load()
	if uint32(len(old)) >= n {
		return
	}
	s := make([]atomic.Pointer[CQ], n)
	for i := range old {
		s[i].Store(old[i].Load())
	}
	t.tab.Store(&s)
}

// Capacity returns the size of the id space.
func (t *Table) Capacity() uint32 { return uint32(len(*t.tab.Load())) }

// Get returns CQ id, or nil.
func (t *Table) Get(id uint32) *CQ {
	s := *t.tab.Load()
	if id >= uint32(len(s)) {
		return nil
	}
	return s[id].Load()
}

// Create installs a CQ. The ring and shadow area must be reachable.
func (t *Table) Create(cfg Config) (*CQ, error) {
	if err := cfg.Ring.Check(t.mem); err != nil {
		return nil, err
	}
	if err := checkRange(t.mem, cfg.Shadow, 64); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.tab.Load()
	if cfg.ID >= uint32(len(s)) {
		return nil, ErrRange
	}
	if s[cfg.ID].Load() != nil {
		return nil, ErrExists
	}
	c := newCQ(t.ev, t.mem, cfg)
	s[cfg.ID].Store(c)
	return c, nil
}

// Destroy removes CQ id. Later posts to it fail with ErrDestroyed.
func (t *Table) Destroy(id uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.tab.Load()
	if id >= uint32(len(s)) {
		return ErrRange
	}
	c := s[id].Swap(nil)
	if c == nil {
		return ErrNotFound
	}
	c.mu.Lock()
	c.destroyed = true
	c.mu.Unlock()
	return nil
}

// Update changes configuration fields (MODIFY_CQ without CQRESIZE) and
// keeps the ring and its producer index.
func (c *CQ) Update(f func(*Config)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.cfg)
}

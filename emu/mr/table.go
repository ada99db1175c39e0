package mr

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Table is the device's STag table. Control operations (the CQP's
// ALLOC_STAG, REG_MR, DEALLOC_STAG and the SQ's FAST_REG, LOCAL_INV,
// BIND_MW) are serialised by a mutex; Translate and Get take no lock.
type Table struct {
	mem       *hostmem.Memory
	h         *hmc.HMC
	maxPD     uint32
	maxMRSize uint64

	mu  sync.Mutex // serialises every change
	tab atomic.Pointer[entries]
}

// entries is the table of one HMC commit.
type entries struct {
	gen     uint64
	count   uint32 // committed MR objects
	idxMask uint32 // STag index bits that select the entry
	e       []atomic.Pointer[Record]
}

// NewTable returns the STag table of a device. Its size follows the HMC's
// committed MR count, and is rebuilt (empty) after every new commit.
func NewTable(mem *hostmem.Memory, h *hmc.HMC, p profile.Profile) *Table {
	t := &Table{mem: mem, h: h, maxPD: p.Limits.MaxPDs, maxMRSize: p.Limits.MaxMRSize}
	if t.maxPD == 0 {
		t.maxPD = 1 << 18
	}
	if t.maxMRSize == 0 {
		t.maxMRSize = 1 << 45
	}
	return t
}

// IndexBits returns how many low bits of the 24-bit STag index select the MR
// object for a table of count entries: the driver keeps
// max(ceil(log2(count)), 14) index bits and fills the rest with a random
// driver key (hw.c:irdma_initialize_hw_rsrc mrdrvbits, verbs.c:
// irdma_create_stag; docs/hw-controlpath.md "STags"). The device masks the
// index to those bits and keeps the full 24 bits to match the whole STag
// ("What the driver leaves open").
func IndexBits(count uint32) uint {
	b := uint(14)
	if count > 1 {
		b = max(b, uint(bits.Len32(count-1)))
	}
	return min(b, 24)
}

// load returns the current table, or nil if it is missing or stale. It is
// the data path's view: no lock, no allocation.
func (t *Table) load() *entries {
	en := t.tab.Load()
	if en == nil || en.gen != t.h.Generation() {
		return nil
	}
	return en
}

// table returns the current table, building it after a (re)commit. Call
// with t.mu held.
func (t *Table) table() (*entries, bool) {
	gen := t.h.Generation()
	if en := t.tab.Load(); en != nil && en.gen == gen {
		return en, true
	}
	if !t.h.Committed() {
		return nil, false
	}
	n := t.h.Count(hmc.MR)
	en := &entries{gen: gen, count: n, idxMask: 1<<IndexBits(n) - 1, e: make([]atomic.Pointer[Record], n)}
	t.tab.Store(en)
	return en, true
}

// slot returns the entry index of a 24-bit STag index, or false if the
// index selects entry 0 (reserved: hw.c sets bit 0 of allocated_mrs) or an
// entry beyond the committed count.
func (en *entries) slot(stagIndex uint32) (uint32, bool) {
	i := stagIndex & 0xffffff & en.idxMask
	return i, i != 0 && i < en.count
}

// Get returns the record of 24-bit STag index stagIndex (STag >> 8; the
// driver-key bits must match), whatever its state.
func (t *Table) Get(stagIndex uint32) (Record, bool) {
	en := t.load()
	if en == nil {
		return Record{}, false
	}
	i, ok := en.slot(stagIndex)
	if !ok {
		return Record{}, false
	}
	r := en.e[i].Load()
	if r == nil || r.State == StateFree || r.Index() != stagIndex&0xffffff {
		return Record{}, false
	}
	return *r, true
}

// ReadRecord decodes the record of stagIndex from its HMC MR object, as
// last written by the device (a free entry decodes as zero). It is for
// tools and tests: the data path uses the decoded copy.
func (t *Table) ReadRecord(stagIndex uint32) (Record, error) {
	t.mu.Lock()
	en, ok := t.table()
	t.mu.Unlock()
	if !ok {
		return Record{}, &Error{Op: "ReadRecord", Reason: ReasonNotCommitted, STag: stagIndex << 8}
	}
	i, ok := en.slot(stagIndex)
	if !ok {
		return Record{}, &Error{Op: "ReadRecord", Reason: ReasonIndexRange, STag: stagIndex << 8}
	}
	a, err := t.h.ObjectIOVA(hmc.MR, i)
	if err != nil {
		return Record{}, &Error{Op: "ReadRecord", Reason: ReasonHMC, STag: stagIndex << 8, Err: err}
	}
	var b [RecordSize]byte
	if err := t.mem.Read(a, b[:]); err != nil {
		return Record{}, &Error{Op: "ReadRecord", Reason: ReasonHMC, STag: stagIndex << 8, Err: err}
	}
	return DecodeRecord(b[:]), nil
}

// store writes the records to their HMC objects and, if every write
// succeeds, publishes them. Call with t.mu held. A record with State
// StateFree clears the entry.
func (t *Table) store(en *entries, op string, ae AE, slots []uint32, recs []*Record) error {
	if t.h.Size(hmc.MR) < RecordSize {
		return &Error{Op: op, Reason: ReasonHMC, AE: ae,
			Err: fmt.Errorf("MR object size %d < %d", t.h.Size(hmc.MR), RecordSize)}
	}
	var b [RecordSize]byte
	for k, i := range slots {
		a, err := t.h.ObjectIOVA(hmc.MR, i)
		if err == nil {
			recs[k].Encode(b[:])
			err = t.mem.Write(a, b[:])
		}
		if err != nil {
			return &Error{Op: op, Reason: ReasonHMC, AE: ae, STag: recs[k].STag, Err: err}
		}
	}
	for k, i := range slots {
		if recs[k].State == StateFree {
			en.e[i].Store(nil)
		} else {
			en.e[i].Store(recs[k])
		}
	}
	return nil
}

// AllocArgs are the fields of ALLOC_STAG (docs/hw-controlpath.md "STag WQEs"):
// the MR variant allocates a fast-register MR in the invalid state
// (verbs.c:irdma_alloc_mr), the MW variant a memory window
// (verbs.c:irdma_alloc_mw).
type AllocArgs struct {
	STagIndex uint32 // STAG_IDX, qw2 [31:8]: STag >> 8, driver-key bits included
	PD        uint32 // PDID (and PDID_HI)
	MR        bool   // hdr MR b43: fast-register MR (true) or window (false)

	// MR variant.
	Length uint64 // STAGLEN: what FAST_REG may map later
	Access Access // ARIGHTS (0 from irdma_alloc_mr)
	// RemoteAccess is REMACCENABLED. FAST_REG has no such bit: the remote
	// rights it grants are in force only if this was set (irdma always
	// sets it for fast-register MRs).
	RemoteAccess bool
	PageSize     PageSize // HPAGESIZE
	LPBLSize     uint8    // LPBLSIZE (0 from the driver)
	FirstPBLE    uint32   // FIRSTPMPBLIDX, when LPBLSIZE ≠ 0

	// MW variant.
	MWType1                bool // MWTYPE b42: type 1 (true) or type 2
	MW1BindDontValidateKey bool // MW1_BIND_DONT_VLDT_KEY b58
}

// AllocSTag executes ALLOC_STAG.
func (t *Table) AllocSTag(a AllocArgs) error {
	const op = "AllocSTag"
	t.mu.Lock()
	defer t.mu.Unlock()
	en, i, err := t.freeSlot(op, a.STagIndex)
	if err != nil {
		return err
	}
	if a.PD >= t.maxPD {
		return &Error{Op: op, Reason: ReasonBadPD, STag: a.STagIndex << 8}
	}
	r := &Record{STag: a.STagIndex << 8, State: StateInvalid, PD: a.PD}
	if a.MR {
		lvl, ok := LevelFromLPBLSize(a.LPBLSize)
		switch {
		case !a.PageSize.Valid():
			return &Error{Op: op, Reason: ReasonBadPageSize, STag: r.STag}
		case !ok:
			return &Error{Op: op, Reason: ReasonBadPBLLevel, STag: r.STag}
		case !validRights(a.Access):
			return &Error{Op: op, Reason: ReasonBadRights, STag: r.STag}
		case a.Length > t.maxMRSize:
			return &Error{Op: op, Reason: ReasonBadLength, STag: r.STag}
		case lvl != Level0 && a.FirstPBLE >= t.h.Count(hmc.PBLE):
			return &Error{Op: op, Reason: ReasonPBLERange, STag: r.STag}
		}
		r.Type, r.FastReg, r.VABased = TypeMR, true, true
		r.MaxLength, r.Access, r.RemoteAccess = a.Length, a.Access, a.RemoteAccess
		r.PageSize, r.Level = a.PageSize, lvl
		if lvl != Level0 {
			r.Addr = uint64(a.FirstPBLE)
		}
	} else {
		r.Type = TypeMW2
		if a.MWType1 {
			r.Type = TypeMW1
		}
		r.MW1BindDontValidateKey = a.MW1BindDontValidateKey
	}
	return t.store(en, op, 0, []uint32{i}, []*Record{r})
}

// freeSlot checks that stagIndex names an unallocated entry.
func (t *Table) freeSlot(op string, stagIndex uint32) (*entries, uint32, error) {
	en, ok := t.table()
	if !ok {
		return nil, 0, &Error{Op: op, Reason: ReasonNotCommitted, STag: stagIndex << 8}
	}
	if stagIndex > 0xffffff {
		return nil, 0, &Error{Op: op, Reason: ReasonIndexRange, STag: stagIndex << 8}
	}
	i, ok := en.slot(stagIndex)
	if !ok {
		return nil, 0, &Error{Op: op, Reason: ReasonIndexRange, STag: stagIndex << 8}
	}
	if r := en.e[i].Load(); r != nil {
		return nil, 0, &Error{Op: op, Reason: ReasonAllocated, STag: stagIndex << 8}
	}
	return en, i, nil
}

// RegArgs are the fields of REG_MR (docs/hw-controlpath.md "STag WQEs",
// ctrl.c:irdma_sc_mr_reg_non_shared).
type RegArgs struct {
	STagIndex    uint32       // STAG_IDX qw2 [31:8]
	Key          uint8        // KEY qw2 [7:0]
	PD           uint32       // PDID
	VA           uint64       // qw0: the VA when VABased, else the first-byte offset
	VABased      bool         // VABASEDTO
	Length       uint64       // STAGLEN
	Access       Access       // ARIGHTS (+ AccessRemoteAtomic from REMOTE_ATOMIC_EN)
	RemoteAccess bool         // REMACCENABLED
	PageSize     PageSize     // HPAGESIZE
	LPBLSize     uint8        // LPBLSIZE: 0 none, 1 level 1, 3 level 2
	RegAddr      hostmem.IOVA // qw4: first page when LPBLSIZE is 0
	FirstPBLE    uint32       // qw6 FIRSTPMPBLIDX when LPBLSIZE ≠ 0
}

// pages returns the number of pages [fbo, fbo+length) spans.
func pages(fbo, length uint64, shift uint) uint64 {
	if length == 0 {
		return 0
	}
	end := fbo + length // callers bound both, no overflow
	return (end + 1<<shift - 1) >> shift
}

// pbleNeed returns how many PBLEs from the first index a region of n pages
// uses at level lvl.
func pbleNeed(lvl PBLLevel, n uint64) uint64 {
	switch lvl {
	case Level1:
		return n
	case Level2:
		return (n + pblePerLeaf - 1) / pblePerLeaf
	}
	return 0
}

// RegisterNonShared executes REG_MR: the MR is valid at once.
func (t *Table) RegisterNonShared(a RegArgs) error {
	const op = "RegisterNonShared"
	t.mu.Lock()
	defer t.mu.Unlock()
	en, i, err := t.freeSlot(op, a.STagIndex)
	if err != nil {
		return err
	}
	stag := a.STagIndex<<8 | uint32(a.Key)
	lvl, lvlOK := LevelFromLPBLSize(a.LPBLSize)
	switch {
	case a.PD >= t.maxPD:
		return &Error{Op: op, Reason: ReasonBadPD, STag: stag}
	case !a.PageSize.Valid(): // the driver returns -EINVAL for other sizes
		return &Error{Op: op, Reason: ReasonBadPageSize, STag: stag}
	case !lvlOK:
		return &Error{Op: op, Reason: ReasonBadPBLLevel, STag: stag}
	case !validRights(a.Access):
		return &Error{Op: op, Reason: ReasonBadRights, STag: stag}
	case a.Length > t.maxMRSize:
		return &Error{Op: op, Reason: ReasonBadLength, STag: stag}
	}
	r := &Record{STag: stag, State: StateValid, Type: TypeMR, PD: a.PD, VABased: a.VABased,
		RemoteAccess: a.RemoteAccess, Access: a.Access, Length: a.Length,
		PageSize: a.PageSize, Level: lvl}
	psz := a.PageSize.Bytes()
	if a.VABased {
		if a.VA+a.Length < a.VA {
			return &Error{Op: op, Reason: ReasonWrap, STag: stag}
		}
		r.VA, r.FBO = a.VA, a.VA&(psz-1)
	} else {
		if a.VA >= psz {
			return &Error{Op: op, Reason: ReasonBadFBO, STag: stag}
		}
		r.FBO = a.VA
	}
	if lvl == Level0 {
		r.Addr = uint64(a.RegAddr)
	} else {
		n := pbleNeed(lvl, pages(r.FBO, r.Length, a.PageSize.Shift()))
		cnt := uint64(t.h.Count(hmc.PBLE))
		// The driver checks first_pm_pbl_index < PBLE count; the device
		// also refuses a page list that runs past the PBLE object.
		if uint64(a.FirstPBLE) >= cnt || uint64(a.FirstPBLE)+n > cnt {
			return &Error{Op: op, Reason: ReasonPBLERange, STag: stag}
		}
		r.Addr = uint64(a.FirstPBLE)
	}
	return t.store(en, op, 0, []uint32{i}, []*Record{r})
}

// Dealloc executes DEALLOC_STAG for the 24-bit STag index, the PD and the
// MR bit of the WQE. An MR with windows bound to it is refused; a bound
// window is unbound from its MR.
func (t *Table) Dealloc(stagIndex, pd uint32, isMR bool) error {
	const op = "Dealloc"
	t.mu.Lock()
	defer t.mu.Unlock()
	en, ok := t.table()
	if !ok {
		return &Error{Op: op, Reason: ReasonNotCommitted, STag: stagIndex << 8}
	}
	i, ok := en.slot(stagIndex)
	if !ok || stagIndex > 0xffffff {
		return &Error{Op: op, Reason: ReasonIndexRange, STag: stagIndex << 8}
	}
	r := en.e[i].Load()
	switch {
	case r == nil:
		return &Error{Op: op, Reason: ReasonNotAllocated, STag: stagIndex << 8}
	case r.Index() != stagIndex:
		return &Error{Op: op, Reason: ReasonIndexMismatch, STag: stagIndex << 8}
	case r.PD != pd:
		return &Error{Op: op, Reason: ReasonPDMismatch, STag: r.STag}
	case isMR != (r.Type == TypeMR):
		return &Error{Op: op, Reason: ReasonWrongType, STag: r.STag}
	case r.Type == TypeMR && r.BoundMWs != 0:
		return &Error{Op: op, Reason: ReasonBoundWindows, STag: r.STag}
	}
	slots := []uint32{i}
	recs := []*Record{{}}
	if r.Type != TypeMR && r.State == StateValid {
		if pi, np := t.unbound(en, r); np != nil {
			slots, recs = append(slots, pi), append(recs, np)
		}
	}
	return t.store(en, op, 0, slots, recs)
}

// unbound returns the entry of a window's parent MR and a copy of its
// record with one window fewer, or nil if the parent is gone.
func (t *Table) unbound(en *entries, w *Record) (uint32, *Record) {
	pi, p := t.parent(en, w)
	if p == nil || p.BoundMWs == 0 {
		return 0, nil
	}
	np := *p
	np.BoundMWs--
	return pi, &np
}

// parent returns the entry and record of a window's parent MR, if it is
// still the MR the window was bound to.
func (t *Table) parent(en *entries, w *Record) (uint32, *Record) {
	pi, ok := en.slot(w.Parent >> 8)
	if !ok {
		return 0, nil
	}
	p := en.e[pi].Load()
	if p == nil || p.Index() != w.Parent>>8 || p.Type != TypeMR {
		return 0, nil
	}
	return pi, p
}

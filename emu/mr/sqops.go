package mr

import (
	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// The SQ operations on STags — FAST_REG, LOCAL_INV (and the invalidations of
// SEND_WITH_INV / READ_WITH_INV), BIND_MW — fail with the AE the hardware
// raises. Which condition raises which code is defined by the hardware; the
// mapping below follows the AE names (docs/hw-datapath.md "AE to flush code"
// notes the same reading) and IBA's rules for the operations. The QP-level
// permissions (FASTREGEN, BINDEN, PRIVEN in the QP context) are the caller's:
// it raises AEPrivOperationDenied itself.

// FastRegArgs are the fields of a FAST_REG SQ WQE (docs/hw-datapath.md
// "Memory and NOP WQEs", ctrl.c:irdma_sc_mr_fast_register).
type FastRegArgs struct {
	STagIndex uint32       // STAGINDEX [31:8]
	Key       uint8        // STAGKEY [7:0]: the new consumer key
	PD        uint32       // the posting QP's PD
	VA        uint64       // qword0: the VA when VABased, else the first-byte offset
	VABased   bool         // VABASEDTO
	Length    uint64       // STAGLEN
	Access    Access       // STAGRIGHTS (+ AccessRemoteAtomic from REMOTE_ATOMICS_EN)
	PageSize  PageSize     // HPAGESIZE
	LPBLSize  uint8        // LPBLSIZE: 0 page at PBLAddr, 1 level 1, 3 level 2
	FirstPBLE uint32       // FIRSTPMPBLIDX (HI | LO)
	PBLAddr   hostmem.IOVA // PBLADDR, the page when LPBLSIZE is 0
}

// lookupCtl finds the entry of stag's index for an SQ operation. The
// returned AE-carrying errors use the data path's codes.
func (t *Table) lookupCtl(op string, en *entries, stagIndex uint32) (uint32, *Record, error) {
	i, ok := en.slot(stagIndex)
	if !ok || stagIndex > 0xffffff {
		return 0, nil, &Error{Op: op, Reason: ReasonIndexRange, AE: AEBadSTagIndex, STag: stagIndex << 8}
	}
	r := en.e[i].Load()
	if r == nil {
		return 0, nil, &Error{Op: op, Reason: ReasonNotAllocated, AE: AEUnallocatedSTag, STag: stagIndex << 8}
	}
	if r.Index() != stagIndex {
		return 0, nil, &Error{Op: op, Reason: ReasonIndexMismatch, AE: AEBadSTagKey, STag: stagIndex << 8}
	}
	return i, r, nil
}

// FastRegister executes FAST_REG: the MR must be an allocated, invalid MR
// of the QP's PD; it becomes valid with the WQE's key, address, length,
// rights and page list.
func (t *Table) FastRegister(a FastRegArgs) error {
	const op = "FastRegister"
	t.mu.Lock()
	defer t.mu.Unlock()
	en, ok := t.table()
	if !ok {
		return &Error{Op: op, Reason: ReasonNotCommitted, AE: AEBadSTagIndex, STag: a.STagIndex << 8}
	}
	i, r, err := t.lookupCtl(op, en, a.STagIndex)
	if err != nil {
		return err
	}
	stag := a.STagIndex<<8 | uint32(a.Key)
	lvl, lvlOK := LevelFromLPBLSize(a.LPBLSize)
	fail := func(rs Reason, ae AE) error { return &Error{Op: op, Reason: rs, AE: ae, STag: stag} }
	switch {
	case r.Type != TypeMR:
		return fail(ReasonWrongType, AEFastRegMWSTag)
	case r.State == StateValid:
		return fail(ReasonAllocated, AEFastRegValidSTag)
	case r.PD != a.PD:
		return fail(ReasonPDMismatch, AEBadPD)
	case !a.PageSize.Valid():
		return fail(ReasonBadPageSize, AEFastRegInvalidPBLHPSCfg)
	case !lvlOK:
		return fail(ReasonBadPBLLevel, AEFastRegInvalidPBLHPSCfg)
	case !validRights(a.Access):
		return fail(ReasonBadRights, AEFastRegInvalidRights)
	case a.Length > r.MaxLength || a.Length > t.maxMRSize:
		return fail(ReasonBadLength, AEFastRegInvalidLength)
	case a.VABased && a.VA+a.Length < a.VA:
		return fail(ReasonWrap, AEFastRegInvalidLength)
	}
	psz := a.PageSize.Bytes()
	n := &Record{STag: stag, State: StateValid, Type: TypeMR, PD: r.PD, VABased: a.VABased,
		FastReg: true, RemoteAccess: r.RemoteAccess, Access: a.Access,
		Length: a.Length, MaxLength: r.MaxLength, PageSize: a.PageSize, Level: lvl}
	if a.VABased {
		n.VA, n.FBO = a.VA, a.VA&(psz-1)
	} else {
		if a.VA >= psz {
			return fail(ReasonBadFBO, AEFastRegInvalidLength)
		}
		n.FBO = a.VA
	}
	if lvl == Level0 {
		n.Addr = uint64(a.PBLAddr)
	} else {
		need := pbleNeed(lvl, pages(n.FBO, n.Length, a.PageSize.Shift()))
		cnt := uint64(t.h.Count(hmc.PBLE))
		if uint64(a.FirstPBLE) >= cnt || uint64(a.FirstPBLE)+need > cnt {
			return fail(ReasonPBLERange, AEFastRegPBLEMismatch)
		}
		n.Addr = uint64(a.FirstPBLE)
	}
	return t.store(en, op, AELCEQPCatastrophic, []uint32{i}, []*Record{n})
}

// Invalidate invalidates the MR or type-2 window named by stag for the QP
// qp of PD pd: LOCAL_INV and the local invalidation of READ_WITH_INV
// (remote false), or the responder's invalidation on SEND_WITH_INV (remote
// true). Invalidating an STag that is already invalid succeeds.
func (t *Table) Invalidate(stag, pd, qp uint32, remote bool) error {
	const op = "Invalidate"
	t.mu.Lock()
	defer t.mu.Unlock()
	if stag == 0 {
		return &Error{Op: op, Reason: ReasonZeroSTag, AE: AESTagZeroInvalid}
	}
	en, ok := t.table()
	if !ok {
		return &Error{Op: op, Reason: ReasonNotCommitted, AE: AEBadSTagIndex, STag: stag}
	}
	i, r, err := t.lookupCtl(op, en, stag>>8)
	if err != nil {
		return err
	}
	fail := func(rs Reason, ae AE) error { return &Error{Op: op, Reason: rs, AE: ae, STag: stag} }
	if r.Type == TypeMW1 {
		// Type-1 windows are invalidated only by a zero-length bind.
		return fail(ReasonWrongType, AEInvalidateType1MW)
	}
	if r.State != StateValid {
		return nil
	}
	switch {
	case uint8(r.STag) != uint8(stag):
		return fail(ReasonKeyMismatch, AEBadSTagKey)
	case r.PD != pd:
		return fail(ReasonPDMismatch, AEBadPD)
	case r.Type == TypeMW2 && remote && r.QP != qp:
		return fail(ReasonQPMismatch, AEBadQP)
	case remote && r.access()&AccessRemote == 0:
		return fail(ReasonNoRemoteRights, AEInvalidateNoRemoteAccessRights)
	case r.Type == TypeMR && r.BoundMWs != 0:
		return fail(ReasonBoundWindows, AEInvalidateMRWithBoundWindows)
	}
	n := *r
	n.State = StateInvalid
	slots, recs := []uint32{i}, []*Record{&n}
	if r.Type == TypeMW2 {
		n.QP, n.Parent = 0, 0
		if pi, np := t.unbound(en, r); np != nil {
			slots, recs = append(slots, pi), append(recs, np)
		}
	}
	return t.store(en, op, AELCEQPCatastrophic, slots, recs)
}

// BindArgs are the fields of a BIND_MW SQ WQE (docs/hw-datapath.md "Memory
// and NOP WQEs", uk.c:irdma_uk_mw_bind; libirdma's bytes in emu/qp/testdata).
type BindArgs struct {
	MWSTag  uint32 // MWSTAG qword1 [31:0]: the window's index with its new key
	MRSTag  uint32 // PARENTMRSTAG qword1 [63:32]
	PD      uint32 // the posting QP's PD
	QP      uint32 // the posting QP (a type-2 window is bound to it)
	VA      uint64 // qword0: the window's first byte in the MR's address space
	Length  uint64 // qword2
	Access  Access // STAGRIGHTS: remote read 0x04, remote write 0x08 (+ AccessRemoteAtomic)
	VABased bool   // VABASEDTO
	Type1   bool   // MEMWINDOWTYPE: 1 = type-1 window
}

// BindMW executes BIND_MW. A zero-length bind unbinds the window (IBA's way
// to invalidate a type-1 window), releasing its MR. libirdma posts VA 0 for
// a zero-based window; the window then starts at the MR's address 0, which
// only a zero-based MR has — and binding to one is refused — so only a
// zero-based type-2 window with a real VA in qword0 can succeed.
func (t *Table) BindMW(a BindArgs) error {
	const op = "BindMW"
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.MWSTag == 0 {
		return &Error{Op: op, Reason: ReasonZeroSTag, AE: AESTagZeroInvalid}
	}
	en, ok := t.table()
	if !ok {
		return &Error{Op: op, Reason: ReasonNotCommitted, AE: AEBadSTagIndex, STag: a.MWSTag}
	}
	wi, w, err := t.lookupCtl(op, en, a.MWSTag>>8)
	if err != nil {
		return err
	}
	fail := func(rs Reason, ae AE) error { return &Error{Op: op, Reason: rs, AE: ae, STag: a.MWSTag} }
	switch {
	case w.Type == TypeMR:
		return fail(ReasonWrongType, AEMWBindOfMRSTag)
	case a.Type1 != (w.Type == TypeMW1):
		return fail(ReasonWrongType, AEMWBindWrongType)
	case w.Type == TypeMW2 && w.State == StateValid:
		return fail(ReasonAllocated, AEMWBindValidSTag)
	case w.PD != a.PD:
		return fail(ReasonPDMismatch, AEBadPD)
	case w.Type == TypeMW1 && !a.VABased:
		return fail(ReasonZeroBased, AEMWBindZeroBasedType1MW)
	}
	// The parent MR.
	parentFail := func() error { return fail(ReasonInvalidState, AEMWBindToInvalidParent) }
	pi, ok := en.slot(a.MRSTag >> 8)
	if !ok {
		return parentFail()
	}
	p := en.e[pi].Load()
	switch {
	case p == nil || p.Index() != a.MRSTag>>8:
		return parentFail()
	case p.Type != TypeMR:
		return fail(ReasonWrongType, AEMWBindToMWSTag)
	case p.State != StateValid || uint8(p.STag) != uint8(a.MRSTag):
		return parentFail()
	case p.PD != a.PD:
		return fail(ReasonPDMismatch, AEBadPD)
	case !p.VABased:
		return fail(ReasonZeroBased, AEMWBindToZeroBasedSTag)
	case p.Access&AccessBind == 0:
		return fail(ReasonBindDisabled, AEMWBindBindDisabled)
	case a.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && p.Access&AccessLocalWrite == 0:
		return fail(ReasonBadRights, AEMWBindInvalidRights)
	}
	if a.Length != 0 && (a.VA+a.Length < a.VA || a.VA < p.VA || a.VA+a.Length > p.VA+p.Length) {
		return fail(ReasonBounds, AEMWBindInvalidBounds)
	}

	n := &Record{STag: a.MWSTag, Type: w.Type, PD: w.PD, State: StateInvalid,
		MW1BindDontValidateKey: w.MW1BindDontValidateKey}
	var slots []uint32
	var recs []*Record
	// Release the MR a type-1 window was bound to (a re-bind).
	var oldPI uint32
	var oldP *Record
	if w.State == StateValid {
		oldPI, oldP = t.parent(en, w)
	}
	// newCount adjusts a parent's window count by ±1, once per entry.
	newCount := func(idx uint32, base *Record, delta int) {
		var c *Record
		for k, s := range slots {
			if s == idx {
				c = recs[k]
			}
		}
		if c == nil {
			cp := *base
			c = &cp
			slots, recs = append(slots, idx), append(recs, c)
		}
		switch {
		case delta > 0:
			c.BoundMWs++
		case c.BoundMWs > 0:
			c.BoundMWs--
		}
	}
	if a.Length != 0 {
		n.State = StateValid
		n.VABased = a.VABased
		n.VA, n.Length = a.VA, a.Length
		n.Access = a.Access & AccessRemote
		n.RemoteAccess = true
		n.Parent = p.STag
		if w.Type == TypeMW2 {
			n.QP = a.QP
		}
		newCount(pi, p, +1)
	}
	if oldP != nil {
		newCount(oldPI, oldP, -1)
	}
	slots, recs = append(slots, wi), append(recs, n)
	return t.store(en, op, AELCEQPCatastrophic, slots, recs)
}

// QPWindows returns how many type-2 windows are bound to qp (DESTROY_QP
// refuses a QP with bound windows unless IGNOREMWBOUND is set).
func (t *Table) QPWindows(qp uint32) int {
	en := t.load()
	if en == nil {
		return 0
	}
	n := 0
	for i := range en.e {
		if r := en.e[i].Load(); r != nil && r.Type == TypeMW2 && r.State == StateValid && r.QP == qp {
			n++
		}
	}
	return n
}

// ReleaseQPWindows invalidates every type-2 window bound to qp (a QP
// destroyed with IGNOREMWBOUND) and returns how many it released.
func (t *Table) ReleaseQPWindows(qp uint32) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	en, ok := t.table()
	if !ok {
		return 0, nil
	}
	n := 0
	for i := range en.e {
		r := en.e[i].Load()
		if r == nil || r.Type != TypeMW2 || r.State != StateValid || r.QP != qp {
			continue
		}
		w := *r
		w.State, w.QP, w.Parent = StateInvalid, 0, 0
		slots, recs := []uint32{uint32(i)}, []*Record{&w}
		if pi, np := t.unbound(en, r); np != nil {
			slots, recs = append(slots, pi), append(recs, np)
		}
		if err := t.store(en, "ReleaseQPWindows", 0, slots, recs); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

package mr

import (
	"math"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Translate resolves length bytes at va through the MR or window named by
// stag into bus-address spans, appended to out (pass a slice with spare
// capacity to avoid allocation). It is the data path's check of an L_Key
// (local SGE, remote false) or an R_Key (RETH/AtomicETH, remote true)
// used by QP qp of PD pd, needing the rights in need. In order:
//
//	STag 0                                   → AESTagZeroInvalid
//	index 0 or ≥ the MR count                → AEBadSTagIndex
//	entry not allocated                      → AEUnallocatedSTag
//	driver-key index bits differ             → AEBadSTagKey
//	entry not valid (invalidated, unbound)   → AEInvalidSTag
//	8-bit key differs                        → AEBadSTagKey
//	PD differs                               → AEBadPD
//	window used as an L_Key                  → AEInvalidSTag
//	type-2 window bound to another QP        → AEBadQP
//	a needed right missing                   → AERightsViolation
//	va + length wraps                        → AEToWrap
//	outside the region (VA-based: [VA, VA+len);
//	zero-based: [0, len)) or the window      → AEBoundsViolation
//	a PBLE the walk needs is not reachable   → AELCEQPCatastrophic
//
// A zero-length access is checked for everything but bounds and returns
// no spans (callers that follow IBA's "no R_Key check for zero length"
// skip the call). Consecutive pages that are contiguous on the bus are
// merged into one span. Translate takes no lock and, with capacity in
// out, does not allocate, on success or failure (the errors are shared
// *Error values carrying the AE).
func (t *Table) Translate(stag, pd, qp uint32, va, length uint64, need Access, remote bool, out []Span) ([]Span, error) {
	if stag == 0 {
		return out, errTZero
	}
	en := t.load()
	if en == nil {
		return out, errTNoTable
	}
	i, ok := en.slot(stag >> 8)
	if !ok {
		return out, errTIndex
	}
	r := en.e[i].Load()
	switch {
	case r == nil:
		return out, errTUnalloc
	case r.STag>>8 != stag>>8:
		return out, errTIdxBits
	case r.State != StateValid:
		return out, errTInvalid
	case r.STag != stag:
		return out, errTKey
	case r.PD != pd:
		return out, errTPD
	}
	if r.Type != TypeMR {
		if !remote {
			return out, errTLocalMW
		}
		if r.Type == TypeMW2 && r.QP != qp {
			return out, errTQP
		}
	}
	if need&^r.access() != 0 {
		return out, errTRights
	}
	if length == 0 {
		return out, nil
	}
	end := va + length
	if end < va {
		return out, errTWrap
	}
	off, ok := r.offset(va, end)
	if !ok {
		return out, errTBounds
	}
	if r.Type != TypeMR {
		// A window: continue in the parent MR's address space.
		pva := r.VA + off
		pi, ok := en.slot(r.Parent >> 8)
		if !ok {
			return out, errTParent
		}
		p := en.e[pi].Load()
		if p == nil || p.STag != r.Parent || p.State != StateValid || p.Type != TypeMR {
			return out, errTParent
		}
		if pva+length < pva {
			return out, errTWrap
		}
		if off, ok = p.offset(pva, pva+length); !ok {
			return out, errTBounds
		}
		r = p
	}
	return t.walk(r, off, length, out)
}

// offset returns the offset of [va, end) from the start of r, if r covers
// it.
func (r *Record) offset(va, end uint64) (uint64, bool) {
	if r.VABased {
		if va < r.VA || end > r.VA+r.Length || r.VA+r.Length < r.VA {
			return 0, false
		}
		return va - r.VA, true
	}
	if end > r.Length {
		return 0, false
	}
	return va, true
}

// walk maps [off, off+length) of region r to spans. Level 0 is one
// contiguous span from the first page; levels 1 and 2 read one PBLE (two
// at level 2) per page from the HMC PBLE object.
func (t *Table) walk(r *Record, off, length uint64, out []Span) ([]Span, error) {
	o := r.FBO + off // byte offset from the start of the first page
	if r.Level == Level0 {
		if r.Addr+o < r.Addr || r.Addr+o+length < r.Addr+o {
			return out, errTAddrWraps
		}
		return append(out, Span{IOVA: r.iova(o), Len: length}), nil
	}
	shift := r.PageSize.Shift()
	psz := uint64(1) << shift
	first := len(out)
	for length > 0 {
		in := o & (psz - 1)
		n := min(psz-in, length)
		page, err := t.pageAddr(r, o>>shift)
		if err != nil {
			return out, err
		}
		a := page + in
		if a < page || a+n < a {
			return out, errTAddrWraps
		}
		if k := len(out) - 1; k >= first && uint64(out[k].IOVA)+out[k].Len == a {
			out[k].Len += n
		} else {
			out = append(out, Span{IOVA: hostmem.IOVA(a), Len: n})
		}
		o += n
		length -= n
	}
	return out, nil
}

// pageAddr returns the bus address of page p of region r.
func (t *Table) pageAddr(r *Record, p uint64) (uint64, error) {
	idx := r.Addr + p
	if r.Level == Level2 {
		leaf, err := t.readPBLE(r.Addr + p/pblePerLeaf)
		if err != nil {
			return 0, err
		}
		if leaf > math.MaxUint32 {
			return 0, errTPBLERange
		}
		idx = leaf + p%pblePerLeaf
	}
	return t.readPBLE(idx)
}

// readPBLE loads PBLE i from HMC memory.
func (t *Table) readPBLE(i uint64) (uint64, error) {
	if i > math.MaxUint32 {
		return 0, errTPBLERange
	}
	a, err := t.h.ObjectIOVA(hmc.PBLE, uint32(i))
	if err != nil {
		return 0, errTPBLE
	}
	v, err := t.mem.Load64(a)
	if err != nil {
		return 0, errTPBLE
	}
	return v, nil
}

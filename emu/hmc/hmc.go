package hmc

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Geometry of the FPM space (hmc.h; docs/hw-controlpath.md "SD and PD
// backing").
const (
	// DirectBPSize is the size of one SD: a direct backing page
	// (IRDMA_HMC_DIRECT_BP_SIZE).
	DirectBPSize = 2 << 20
	// PagedBPSize is a paged backing page and a PD page
	// (IRDMA_HMC_PAGED_BP_SIZE).
	PagedBPSize = 4096
	// PDEntriesPerSD is the number of PD entries in a PD page
	// (IRDMA_HMC_PD_CNT_IN_SD, IRDMA_HMC_MAX_BP_COUNT).
	PDEntriesPerSD = 512
	// MaxSDs is the size of the SD index space: PMSDIDX is 12 bits.
	MaxSDs = 4096

	// FPMBufMinSize is the part of the QUERY/COMMIT_FPM_VAL buffer a GEN_2
	// device writes (docs/hw-controlpath.md "FPM WQEs").
	FPMBufMinSize = 176
	// fpmBaseUnit is the granule of committed bases (base/512 in [63:32]).
	fpmBaseUnit = 512
)

// HMC is the device's host memory cache: the FPM object layout fixed by
// COMMIT_FPM_VAL and the SD table programmed by UPDATE_PE_SDS. Its methods
// are safe for concurrent use; ObjectIOVA and the accessors take no lock.
type HMC struct {
	mem *hostmem.Memory
	q   QueryValues

	// cqCntMask is COMMIT_FPM_CQCNT for this generation.
	cqCntMask uint64

	mu  sync.Mutex // serialises Commit and SetSD
	st  atomic.Pointer[layout]
	gen atomic.Uint64

	pdInv atomic.Uint64
}

// layout is one committed FPM configuration. Everything but the SD words is
// immutable after Commit publishes it.
type layout struct {
	gen   uint64
	count [NumObjTypes]uint32
	base  [NumObjTypes]uint64 // FPM byte address
	end   uint64              // first FPM byte after the last object
	sds   []atomic.Uint64     // SD data words (PMSDDATA format), 0 = invalid
}

// New returns the HMC of a device whose memory is mem, reporting the FPM
// values of profile p (GEN2Query).
func New(mem *hostmem.Memory, p profile.Profile) *HMC {
	h := &HMC{mem: mem, q: GEN2Query(p), cqCntMask: p.Fields.CommitFPMCQCnt.Mask()}
	if h.cqCntMask == 0 {
		h.cqCntMask = 1<<20 - 1
	}
	return h
}

// Query returns the values QUERY_FPM_VAL reports.
func (h *HMC) Query() QueryValues { return h.q }

// EncodeQuery fills buf with the QUERY_FPM_VAL buffer (docs/hw-controlpath.md
// "QUERY_FPM_VAL buffer") and returns the number of bytes written:
// FPMBufMinSize, or fewer whole qwords if buf is shorter. A GEN_2 device
// writes only offsets 0..175 ("FPM WQEs"), so bytes beyond 176 are never
// touched.
func (h *HMC) EncodeQuery(buf []byte) int {
	var img [FPMBufMinSize]byte
	q := &h.q
	put := func(off int, v uint64) { binary.LittleEndian.PutUint64(img[off:], v) }
	put(0, uint64(q.FirstPESDIndex)&0x3fff|uint64(q.MaxPESDs&0x1fff)<<32)
	for t := ObjType(0); t < NumObjTypes; t++ {
		off := querySlot[t]
		if off < 0 {
			continue
		}
		o := q.Objects[t]
		v := uint64(o.Max)
		switch t {
		case XFFL:
			v |= uint64(q.XFBlockSize) << 32
		case Q1FL:
			v |= uint64(q.Q1BlockSize) << 32
		case RRFFL:
			v |= uint64(q.RRFBlockSize) << 32
		case OOISCFFL:
			v |= uint64(q.OOISCFBlock) << 32
		case PBLE:
			// max only; the size is fixed at 8 by the driver
		default:
			v |= uint64(log2(o.Size)) << 32
		}
		put(off, v)
	}
	put(120, uint64(q.MaxCEQs&0x3ff)|uint64(q.HTMultiplier&0xf)<<16|
		uint64(q.TimerBucket&0xffff)<<32|uint64(q.MaxIRDEnc&0xf)<<50)
	n := min(len(buf), FPMBufMinSize) &^ 7
	copy(buf[:n], img[:n])
	return n
}

// layoutOrder is the order objects are placed in FPM space. The APBVT entry
// (8 KB) comes first so that its 8 KB alignment costs nothing; PBLEs come
// last so that the object with the highest base also ends highest, which is
// how the driver sizes its SD table (ctrl.c:irdma_sc_parse_fpm_commit_buf).
var layoutOrder = [NumObjTypes]ObjType{
	APBVT, QP, CQ, SRQ, HTE, ARP, MR, XF, XFFL, Q1, Q1FL, TIMER, FSIMC,
	FSIAV, RRF, RRFFL, HDR, MD, OOISC, OOISCFFL, PBLE,
}

// objAlign is the FPM alignment of an object type's base: the object size
// (at least the 512-byte base granule, at most a 2 MB SD), so that objects
// of up to 4 KB never cross a 4 KB backing page and larger ones never cross
// an SD. PBLEs start on a 4 KB boundary, where pble.c starts anyway
// (irdma_hmc_init_pble), so PBLE index 0 is usable.
func (h *HMC) objAlign(t ObjType) uint64 {
	if t == PBLE {
		return PagedBPSize
	}
	a := uint64(h.q.Objects[t].Size)
	return min(max(a, fpmBaseUnit), DirectBPSize)
}

// Commit executes COMMIT_FPM_VAL on the buffer the driver wrote (counts at
// the docs/hw-controlpath.md "COMMIT_FPM_VAL buffer" offsets): it checks
// every count against the queried maximum, places the objects at 512-aligned
// bases in a flat FPM space, and writes base/512 into bits [63:32] and the
// committed count into the low bits of each entry, in place — including the
// APBVT slot at +40 with count 1 (irdma_sc_parse_fpm_commit_buf decodes it).
// buf must hold at least FPMBufMinSize bytes (the driver's BUFSIZE is 176,
// 192 or 208, "FPM WQEs"); bytes beyond 176 are not touched. A successful
// Commit replaces any earlier layout and invalidates every SD.
func (h *HMC) Commit(buf []byte) error {
	if len(buf) < FPMBufMinSize {
		return &Error{Op: "Commit", Err: ErrBufSize, Count: uint32(min(len(buf), 1<<31))}
	}
	var cnt [NumObjTypes]uint32
	for t := ObjType(0); t < NumObjTypes; t++ {
		v := binary.LittleEndian.Uint64(buf[commitSlot[t]:])
		c := uint32(v)
		if t == APBVT {
			c = 1 // written 0, forced to 1 on GEN ≤ 2 (irdma_sc_parse_fpm_commit_buf)
		}
		if m := h.q.Objects[t].Max; c > m {
			return &Error{Op: "Commit", Err: ErrCountOverMax, Type: t, Count: c, Max: m}
		}
		cnt[t] = c
	}
	l := &layout{count: cnt}
	var cursor uint64
	for _, t := range layoutOrder {
		if cnt[t] == 0 {
			continue // a zero-count object keeps base 0
		}
		a := h.objAlign(t)
		cursor = (cursor + a - 1) &^ (a - 1)
		l.base[t] = cursor
		cursor += uint64(cnt[t]) * uint64(h.q.Objects[t].Size)
	}
	l.end = cursor
	nsd := (cursor + DirectBPSize - 1) / DirectBPSize
	if nsd > uint64(h.q.MaxPESDs) || nsd > MaxSDs {
		return &Error{Op: "Commit", Err: ErrLayout, SD: uint32(min(nsd, 1<<32-1))}
	}
	l.sds = make([]atomic.Uint64, nsd)

	for t := ObjType(0); t < NumObjTypes; t++ {
		off := commitSlot[t]
		c := uint64(cnt[t])
		switch t {
		case QP:
			c &= 1<<21 - 1 // COMMIT_FPM_QPCNT [20:0]
		case CQ:
			c &= h.cqCntMask
		}
		binary.LittleEndian.PutUint64(buf[off:], l.base[t]/fpmBaseUnit<<32|c)
	}

	h.mu.Lock()
	l.gen = h.gen.Add(1)
	h.st.Store(l)
	h.mu.Unlock()
	return nil
}

// Committed reports whether a COMMIT_FPM_VAL has succeeded.
func (h *HMC) Committed() bool { return h.st.Load() != nil }

// Generation counts successful commits (0 before the first). Tables sized
// from the committed counts (emu/mr, emu/ah) rebuild when it changes.
func (h *HMC) Generation() uint64 { return h.gen.Load() }

// Count returns the committed count of t (0 before Commit).
func (h *HMC) Count(t ObjType) uint32 {
	l := h.st.Load()
	if l == nil || int(t) >= NumObjTypes {
		return 0
	}
	return l.count[t]
}

// Base returns the FPM byte address of t's first object (0 before Commit
// and for zero-count types).
func (h *HMC) Base(t ObjType) uint64 {
	l := h.st.Load()
	if l == nil || int(t) >= NumObjTypes {
		return 0
	}
	return l.base[t]
}

// Size returns the object size of t in bytes.
func (h *HMC) Size(t ObjType) uint32 {
	if int(t) >= NumObjTypes {
		return 0
	}
	return h.q.Objects[t].Size
}

// Max returns the queried maximum count of t.
func (h *HMC) Max(t ObjType) uint32 {
	if int(t) >= NumObjTypes {
		return 0
	}
	return h.q.Objects[t].Max
}

// MaxCEQs returns MAX_CEQS: CEQ ids must be below it.
func (h *HMC) MaxCEQs() uint32 { return h.q.MaxCEQs }

// SDCount returns the number of SDs the committed layout spans, which is
// the SD table size (0 before Commit). The driver computes the same number
// (ctrl.c:irdma_sc_parse_fpm_commit_buf).
func (h *HMC) SDCount() uint32 {
	l := h.st.Load()
	if l == nil {
		return 0
	}
	return uint32(len(l.sds))
}

// FPMSize returns the end of the committed FPM space in bytes.
func (h *HMC) FPMSize() uint64 {
	l := h.st.Load()
	if l == nil {
		return 0
	}
	return l.end
}

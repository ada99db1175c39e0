package driver

import (
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// idBitmap is one of irdma's resource bitmaps (allocated_qps, _cqs, _mrs,
// _pds, _ahs, _mcgs, _arps) with irdma_alloc_rsrc's rotating "next"
// search: start at next, wrap once, -EOVERFLOW when full
// (utils.c:irdma_alloc_rsrc).
type idBitmap struct {
	mu       sync.Mutex // rf->rsrc_lock (one per bitmap here)
	bits     []uint64
	max      uint32
	next     uint32
	used     uint32
	reserved uint32 // ids reserve took (no object behind them)
}

func newIDBitmap(max uint32) *idBitmap {
	return &idBitmap{bits: make([]uint64, (max+63)/64), max: max}
}

// reserve marks id allocated (the set_bit calls of irdma_initialize_hw_rsrc).
func (b *idBitmap) reserve(id uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id < b.max && b.bits[id/64]&(1<<(id%64)) == 0 {
		b.bits[id/64] |= 1 << (id % 64)
		b.used++
		b.reserved++
	}
}

func (b *idBitmap) test(id uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return id < b.max && b.bits[id/64]&(1<<(id%64)) != 0
}

// alloc is irdma_alloc_rsrc: the first free id at or after *next (or
// after hint when hint ≥ 0, as irdma_create_stag seeds the search with a
// random index), wrapping to 0; EOVERFLOW... irdma returns -EOVERFLOW.
func (b *idBitmap) alloc(hint int64) (uint32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max == 0 {
		return 0, syscall.EOVERFLOW
	}
	start := b.next
	if hint >= 0 {
		start = uint32(uint64(hint) % uint64(b.max))
	}
	for n := uint32(0); n < b.max; n++ {
		id := (start + n) % b.max
		if b.bits[id/64]&(1<<(id%64)) == 0 {
			b.bits[id/64] |= 1 << (id % 64)
			b.used++
			b.next = id + 1
			if b.next >= b.max {
				b.next = 0
			}
			return id, nil
		}
	}
	return 0, syscall.EOVERFLOW
}

// free is irdma_free_rsrc.
func (b *idBitmap) free(id uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id < b.max && b.bits[id/64]&(1<<(id%64)) != 0 {
		b.bits[id/64] &^= 1 << (id % 64)
		b.used--
	}
}

func (b *idBitmap) inUse() uint32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// allocated is the ids alloc handed out and free has not taken back.
func (b *idBitmap) allocated() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.used - b.reserved)
}

// Resources are the objects the device's consumers hold, as the resource
// bitmaps count them (irdma's allocated_pds, _cqs, _qps, _mrs, _ahs,
// _mcgs), without the ids irdma_initialize_hw_rsrc reserves.
type Resources struct {
	PDs, CQs, QPs int
	MRs           int // STag indices: MRs and MWs
	AHs           int
	McastGroups   int
	SRQs          int // GEN_3; 0 on GEN_2, which has none
}

// Resources returns what is allocated now: user contexts' objects and
// kernel-mode consumers' alike.
func (d *Device) Resources() Resources {
	if d.qpIDs == nil { // not brought up
		return Resources{}
	}
	r := Resources{PDs: d.pdIDs.allocated(), CQs: d.cqIDs.allocated(), QPs: d.qpIDs.allocated(),
		MRs: d.mrIDs.allocated(), AHs: d.ahIDs.allocated(), McastGroups: d.mcgIDs.allocated()}
	if d.srqIDs != nil {
		r.SRQs = d.srqIDs.allocated()
	}
	return r
}

// dmaMem is irdma_dma_mem: a host-memory allocation the device reaches by
// bus address.
type dmaMem struct {
	r    *hostmem.Region
	pa   uint64
	size int
}

func (m dmaMem) valid() bool { return m.r != nil }

// at returns the bus address of byte off.
func (m dmaMem) at(off int) hostmem.IOVA { return hostmem.IOVA(m.pa + uint64(off)) }

// allocDMA is dma_alloc_coherent: a zeroed region of size bytes aligned to
// align (0: page).
func (d *Device) allocDMA(size int, align uint64, name string) (dmaMem, error) {
	if size <= 0 {
		return dmaMem{}, syscall.EINVAL
	}
	r, err := d.mem.Alloc(size, align, name)
	if err != nil {
		return dmaMem{}, syscall.ENOMEM
	}
	d.dmaMu.Lock()
	d.dmaRegions[r] = struct{}{}
	d.dmaMu.Unlock()
	return dmaMem{r: r, pa: uint64(r.IOVA()), size: size}, nil
}

// freeDMA is dma_free_coherent.
func (d *Device) freeDMA(m *dmaMem) {
	if m.r == nil {
		return
	}
	d.dmaMu.Lock()
	delete(d.dmaRegions, m.r)
	d.dmaMu.Unlock()
	_ = d.mem.Unmap(m.r)
	*m = dmaMem{}
}

func (d *Device) store64(a hostmem.IOVA, v uint64) {
	if err := d.mem.Store64(a, v); err != nil {
		d.log.Warn("store64", errField(err))
	}
}

func (d *Device) load64(a hostmem.IOVA) uint64 {
	v, err := d.mem.Load64(a)
	if err != nil {
		d.log.Warn("load64", errField(err))
	}
	return v
}

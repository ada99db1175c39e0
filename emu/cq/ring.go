package cq

import (
	"fmt"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// PageSize is the page size of virtually mapped rings: QP, CQ, CEQ and AEQ
// rings use level-1 PBLEs whose entries are 4 KiB page addresses (verbs.c
// irdma_handle_q_mem, hw.c irdma_create_virt_aeq; docs/hw-controlpath.md
// "PBLEs").
const PageSize = 4096

// RingMem locates the entries of a ring in host memory: either one
// contiguous range at Base, or (virtually mapped) a list of 4 KiB pages.
type RingMem struct {
	Base  hostmem.IOVA   // contiguous ring (Pages == nil)
	Pages []hostmem.IOVA // virtually mapped ring: one IOVA per 4 KiB page
	Entry uint32         // bytes per entry
	Size  uint32         // entries
}

// Bytes is the ring's length in bytes.
func (r *RingMem) Bytes() uint64 { return uint64(r.Entry) * uint64(r.Size) }

// Addr returns the IOVA of byte off of entry i (i < Size, off < Entry).
// Entries never straddle a page: entry sizes are powers of two ≤ 4 KiB.
func (r *RingMem) Addr(i uint32, off uint32) hostmem.IOVA {
	b := uint64(i)*uint64(r.Entry) + uint64(off)
	if r.Pages == nil {
		return r.Base + hostmem.IOVA(b)
	}
	p := b / PageSize
	if p >= uint64(len(r.Pages)) {
		// Unreachable for i < Size when the page list was built by
		// PagesFor; return an address that faults cleanly.
		return 0
	}
	return r.Pages[p] + hostmem.IOVA(b%PageSize)
}

// PagesFor returns how many 4 KiB pages a ring of bytes bytes spans.
func PagesFor(bytes uint64) uint64 { return (bytes + PageSize - 1) / PageSize }

// Check verifies that every byte of the ring is reachable on the bus, so
// that a bad ring address is refused at create time instead of faulting on
// every later entry.
func (r *RingMem) Check(mem *hostmem.Memory) error {
	if r.Entry == 0 || r.Size == 0 {
		return fmt.Errorf("cq: empty ring")
	}
	if r.Pages == nil {
		return checkRange(mem, r.Base, r.Bytes())
	}
	for i, p := range r.Pages {
		n := uint64(PageSize)
		if rem := r.Bytes() - uint64(i)*PageSize; rem < n {
			n = rem
		}
		if err := checkRange(mem, p, n); err != nil {
			return err
		}
	}
	return nil
}

// checkRange reports whether [iova, iova+n) lies in one mapped region.
func checkRange(mem *hostmem.Memory, iova hostmem.IOVA, n uint64) error {
	reg, ok := mem.Lookup(iova)
	if !ok {
		return &hostmem.FaultError{IOVA: iova, Len: n, Op: hostmem.OpRead, Reason: hostmem.ReasonUnmapped}
	}
	if end := iova + hostmem.IOVA(n); end < iova || end > reg.End() {
		return &hostmem.FaultError{IOVA: iova, Len: n, Op: hostmem.OpRead, Reason: hostmem.ReasonBounds, Region: reg.Name()}
	}
	return nil
}

// CheckRange verifies that [iova, iova+n) lies in one mapped region.
func CheckRange(mem *hostmem.Memory, iova hostmem.IOVA, n uint64) error {
	return checkRange(mem, iova, n)
}

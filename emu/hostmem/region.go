package hostmem

import (
	"io"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region state word: the low bits count in-flight accesses, two high bits
// record Unmap (dead) and the release of the backing (freed).
const (
	stateDead  uint64 = 1 << 62
	stateFreed uint64 = 1 << 63
	refMask           = stateDead - 1
)

type regionKind uint8

const (
	kindAlloc regionKind = iota + 1 // memfd created by Alloc
	kindMap                         // caller's descriptor mapped by Map
	kindIO                          // io.ReaderAt / io.WriterAt (MapIO)
)

// A Region is one contiguous range of the bus, mapped at IOVA()..IOVA()+Len().
// Its accessors are safe for concurrent use.
type Region struct {
	mem  *Memory
	kind regionKind
	iova IOVA
	size uint64 // Len, bytes
	name string

	// Mapped regions.
	data   []byte // the bytes of the region (len size) inside mapping
	mapLen uintptr
	base   unsafe.Pointer // start of the mmap (page aligned)
	fd     int            // our descriptor (memfd or dup of the caller's), -1 for kindIO
	guard  bool           // backing not sealed against shrinking: catch SIGBUS

	// MapIO regions.
	ra     io.ReaderAt
	wa     io.WriterAt
	ioBase int64      // offset in ra/wa of the region's first byte
	rmw    sync.Mutex // serialises device-side read-modify-writes (kindIO only)

	state  atomic.Uint64 // refs | stateDead | stateFreed
	sliced atomic.Bool   // Bytes or Slice handed out a slice of data
}

// IOVA returns the bus address of the region's first byte.
func (r *Region) IOVA() IOVA { return r.iova }

// Len returns the size of the region in bytes.
func (r *Region) Len() int { return int(r.size) }

// End returns the bus address one past the region's last byte.
func (r *Region) End() IOVA { return r.iova + IOVA(r.size) }

// Name returns the name given at Alloc, Map or MapIO (for diagnostics).
func (r *Region) Name() string { return r.name }

// Mapped reports whether the region is backed by a mapping (Alloc, Map), so
// that Bytes, Slice and true atomics are available.
func (r *Region) Mapped() bool { return r.kind != kindIO }

// Bytes returns the region's memory for direct access by its owner (the
// driver half fills its DMA buffers through it, as the kernel does through
// dma_alloc_coherent's virtual address). It is nil for MapIO regions and
// after Unmap. The slice stays safe to touch until Memory.Close (see the
// package documentation), but after Unmap it no longer reaches the bus.
func (r *Region) Bytes() []byte {
	if r.kind == kindIO || !r.acquire() {
		return nil
	}
	r.sliced.Store(true)
	b := r.data
	r.release()
	return b
}

// FD returns the memfd backing a mapped region, so that it can be passed to
// another process with SCM_RIGHTS; -1 for MapIO regions. The descriptor is
// owned by the Region: do not close it; it is closed when the region's
// backing is released after Unmap (or at Close), and must not be used after
// Unmap.
func (r *Region) FD() int {
	if r.kind == kindIO {
		return -1
	}
	return r.fd
}

// acquire takes a reference for one access. It fails once the region is
// dead; the caller then reports ReasonUnmapped.
func (r *Region) acquire() bool {
	if r.state.Add(1)&stateDead != 0 {
		r.release()
		return false
	}
	return true
}

// release drops a reference; the last reference of a dead region releases
// its backing.
func (r *Region) release() {
	if r.state.Add(^uint64(0)) == stateDead {
		r.free()
	}
}

// kill marks the region dead (Unmap, Close) and releases its backing now if
// no access is in flight, else the last release does.
func (r *Region) kill() {
	if old := r.state.Or(stateDead); old&stateDead == 0 && old&refMask == 0 {
		r.free()
	}
}

// free releases the backing exactly once: the CAS from "dead, no refs" to
// "freed" is won by one caller only.
func (r *Region) free() {
	if !r.state.CompareAndSwap(stateDead, stateDead|stateFreed) {
		return
	}
	if r.kind == kindIO {
		r.ra, r.wa = nil, nil
		return
	}
	if r.sliced.Load() && r.mem.quarantine(r) {
		// Stale slices may still point into the mapping: swap its pages
		// for private anonymous ones in one step (MAP_FIXED replaces the
		// old mapping atomically), so the memfd's pages can go while the
		// addresses stay valid until Close. Should the mmap fail, the
		// shared mapping simply stays until Close: still no fault.
		_, _ = unix.MmapPtr(-1, 0, r.base, r.mapLen, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_FIXED|unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	} else {
		_ = unix.MunmapPtr(r.base, r.mapLen)
	}
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
	}
}

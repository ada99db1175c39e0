package uk

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Ring and shadow memory is a []byte the device reads and writes
// concurrently (another goroutine, or another process through a shared
// memfd mapping). The words that publish something — a WQE header with
// its valid bit, a CQE's qword3, the shadow areas' heads, tails and arm
// words — are stored and loaded as one 64-bit atomic operation, as
// irdma's set_64bit_val/get_64bit_val are single 64-bit accesses after
// dma_wmb()/udma_to_device_barrier(). Go's sync/atomic operations are
// sequentially consistent, so every plain store of a WQE body before the
// header's atomic store is visible to a reader that loads that header
// atomically and sees the new valid bit: the barrier irdma needs comes
// with the atomic.
//
// sync/atomic works on *uint64, so the []byte is reinterpreted through
// unsafe at an offset that must be 8-byte aligned in memory. Ring and
// shadow memory is page-aligned (host-memory regions) and every offset
// used is a multiple of 8, so this always holds in the driver; a
// misaligned slice (only possible from a caller's own make) falls back
// to a plain store, which is still correct for a single goroutine.
// The value is stored little-endian, as the device expects, on either
// host byte order.

var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

func toLE(v uint64) uint64 {
	if hostLittleEndian {
		return v
	}
	return bits.ReverseBytes64(v)
}

// store64 atomically stores v little-endian at b[off:off+8].
func store64(b []byte, off int, v uint64) {
	w := b[off : off+8 : off+8]
	p := unsafe.Pointer(unsafe.SliceData(w))
	if uintptr(p)%8 != 0 {
		binary.LittleEndian.PutUint64(w, v)
		return
	}
	atomic.StoreUint64((*uint64)(p), toLE(v))
}

// load64 atomically loads the little-endian word at b[off:off+8].
func load64(b []byte, off int) uint64 {
	w := b[off : off+8 : off+8]
	p := unsafe.Pointer(unsafe.SliceData(w))
	if uintptr(p)%8 != 0 {
		return binary.LittleEndian.Uint64(w)
	}
	return toLE(atomic.LoadUint64((*uint64)(p)))
}

// put64 is a plain little-endian store, for WQE bodies written before
// their header (set_64bit_val).
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

// get64 is a plain little-endian load, for CQE words read after their
// valid qword (get_64bit_val after udma_from_device_barrier).
func get64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

package hostmem

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

// CacheLine is the granule of the write-ordering rule: the final cache line
// of a Write is stored after everything before it.
const CacheLine = 64

// Read copies len(p) bytes at iova into p.
func (m *Memory) Read(iova IOVA, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	r, off, err := m.begin(iova, len(p), OpRead)
	if err != nil {
		return err
	}
	if r.kind == kindIO {
		err = r.readIO(iova, off, p)
	} else if ferr := r.copyOut(off, p); ferr != nil {
		err = fault(iova, len(p), OpRead, ReasonBus, r, ferr)
	}
	r.release()
	return err
}

// Write copies p to iova. Bytes are stored in ascending address order and
// the final cache line of the destination (the bytes after its last 64-byte
// boundary) is stored last, after a store fence, so a program spinning on
// the last byte of a buffer sees the whole payload once that byte changes.
// For MapIO regions see MapIO for how this maps onto WriteAt calls.
func (m *Memory) Write(iova IOVA, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	r, off, err := m.begin(iova, len(p), OpWrite)
	if err != nil {
		return err
	}
	if r.kind == kindIO {
		err = r.writeIO(iova, off, p)
	} else if ferr := r.copyIn(off, p); ferr != nil {
		err = fault(iova, len(p), OpWrite, ReasonBus, r, ferr)
	}
	r.release()
	return err
}

// Indirect returns the MapIO region iova lies in: every access there is a
// ReaderAt/WriterAt call (a system call on a program's /proc/<pid>/mem)
// rather than a copy, so a caller that will need the bytes after these
// does better to move them in one call (within the region). ok is false
// for mapped memory and for an unmapped address.
func (m *Memory) Indirect(iova IOVA) (r *Region, ok bool) {
	r = m.lookup(iova)
	if r == nil || r.kind != kindIO {
		return nil, false
	}
	return r, true
}

// WriteUnordered is Write without the final-cache-line rule: on a MapIO
// region p goes in one WriteAt (Write makes two when p crosses a line
// boundary, each a system call on a program's /proc/<pid>/mem). It is for
// the bytes of a message that later bytes complete — the packets of a
// WRITE, SEND or READ response before its last — where nothing may
// observe the end of this part as the end of the message; the last
// packet's bytes keep Write's order. On a mapped region it is Write.
func (m *Memory) WriteUnordered(iova IOVA, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	r, off, err := m.begin(iova, len(p), OpWrite)
	if err != nil {
		return err
	}
	if r.kind == kindIO {
		if r.wa == nil {
			err = fault(iova, len(p), OpWrite, ReasonReadOnly, r, nil)
		} else if werr := writeFull(r.wa, p, r.ioBase+int64(off)); werr != nil {
			err = fault(iova, len(p), OpWrite, ReasonIO, r, werr)
		}
	} else if ferr := r.copyIn(off, p); ferr != nil {
		err = fault(iova, len(p), OpWrite, ReasonBus, r, ferr)
	}
	r.release()
	return err
}

// Slice returns the n bytes at iova as a slice of the mapping, without
// copying. The range must lie in one mapped region (Alloc, Map); MapIO
// regions fault with ReasonNoMapping. The slice aliases shared memory that
// the program and the device modify concurrently: use Load64/Store64 for the
// words that carry ordering (valid bits, heads, tails). It stays safe to
// touch until Memory.Close; after Unmap it no longer reaches the bus (see the
// package documentation). n == 0 returns nil, nil.
func (m *Memory) Slice(iova IOVA, n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	r, off, err := m.begin(iova, n, OpSlice)
	if err != nil {
		return nil, err
	}
	defer r.release()
	if r.kind == kindIO {
		return nil, fault(iova, n, OpSlice, ReasonNoMapping, r, nil)
	}
	r.sliced.Store(true)
	end := off + uint64(n)
	return r.data[off:end:end], nil
}

// Load64 atomically loads the little-endian 64-bit word at iova, which must
// be 8-byte aligned. These are the words the device polls: valid bits, CQ
// and QP shadow areas, SRQ producer indices.
func (m *Memory) Load64(iova IOVA) (uint64, error) {
	r, off, err := m.beginAtomic(iova, 8, OpLoad)
	if err != nil {
		return 0, err
	}
	var v uint64
	if r.kind == kindIO {
		var b [8]byte
		err = r.readIO(iova, off, b[:])
		v = binary.LittleEndian.Uint64(b[:])
	} else {
		var ferr error
		if v, ferr = r.load64(off); ferr != nil {
			err = fault(iova, 8, OpLoad, ReasonBus, r, ferr)
		}
	}
	r.release()
	return v, err
}

// Store64 atomically stores v as the little-endian 64-bit word at iova,
// which must be 8-byte aligned. These are the words the device publishes:
// CQE and CCQE headers (valid bit last), QP shadow SQ tail, CQ heads.
func (m *Memory) Store64(iova IOVA, v uint64) error {
	r, off, err := m.beginAtomic(iova, 8, OpStore)
	if err != nil {
		return err
	}
	if r.kind == kindIO {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		err = r.writeIO(iova, off, b[:])
	} else if ferr := r.store64(off, v); ferr != nil {
		err = fault(iova, 8, OpStore, ReasonBus, r, ferr)
	}
	r.release()
	return err
}

// Load32 atomically loads the little-endian 32-bit word at iova (4-byte
// aligned).
func (m *Memory) Load32(iova IOVA) (uint32, error) {
	r, off, err := m.beginAtomic(iova, 4, OpLoad)
	if err != nil {
		return 0, err
	}
	var v uint32
	if r.kind == kindIO {
		var b [4]byte
		err = r.readIO(iova, off, b[:])
		v = binary.LittleEndian.Uint32(b[:])
	} else {
		var ferr error
		if v, ferr = r.load32(off); ferr != nil {
			err = fault(iova, 4, OpLoad, ReasonBus, r, ferr)
		}
	}
	r.release()
	return v, err
}

// Store32 atomically stores the little-endian 32-bit word v at iova (4-byte
// aligned).
func (m *Memory) Store32(iova IOVA, v uint32) error {
	r, off, err := m.beginAtomic(iova, 4, OpStore)
	if err != nil {
		return err
	}
	if r.kind == kindIO {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		err = r.writeIO(iova, off, b[:])
	} else if ferr := r.store32(off, v); ferr != nil {
		err = fault(iova, 4, OpStore, ReasonBus, r, ferr)
	}
	r.release()
	return err
}

// CompareAndSwap64 atomically replaces the 64-bit word at iova (8-byte
// aligned) with new if it equals old, and returns the value it found (the
// RDMA ATOMIC CmpSwap responder returns the original value either way).
func (m *Memory) CompareAndSwap64(iova IOVA, old, new uint64) (uint64, error) {
	r, off, err := m.beginAtomic(iova, 8, OpRMW)
	if err != nil {
		return 0, err
	}
	var v uint64
	if r.kind == kindIO {
		v, err = r.rmwIO(iova, off, func(cur uint64) uint64 {
			if cur == old {
				return new
			}
			return cur
		})
	} else {
		var ferr error
		if v, ferr = r.cas64(off, old, new); ferr != nil {
			err = fault(iova, 8, OpRMW, ReasonBus, r, ferr)
		}
	}
	r.release()
	return v, err
}

// Add64 atomically adds delta to the 64-bit word at iova (8-byte aligned)
// and returns the value before the addition (RDMA ATOMIC FetchAdd).
func (m *Memory) Add64(iova IOVA, delta uint64) (uint64, error) {
	r, off, err := m.beginAtomic(iova, 8, OpRMW)
	if err != nil {
		return 0, err
	}
	var v uint64
	if r.kind == kindIO {
		v, err = r.rmwIO(iova, off, func(cur uint64) uint64 { return cur + delta })
	} else {
		var ferr error
		if v, ferr = r.add64(off, delta); ferr != nil {
			err = fault(iova, 8, OpRMW, ReasonBus, r, ferr)
		}
	}
	r.release()
	return v, err
}

// begin resolves the n-byte access at iova to one region and takes a
// reference on it; the caller must release it.
func (m *Memory) begin(iova IOVA, n int, op Op) (*Region, uint64, error) {
	if n < 0 {
		return nil, 0, fault(iova, n, op, ReasonBounds, nil, nil)
	}
	r := m.lookup(iova)
	if r == nil {
		return nil, 0, fault(iova, n, op, ReasonUnmapped, nil, nil)
	}
	off := uint64(iova - r.iova)
	if uint64(n) > r.size-off {
		return nil, 0, fault(iova, n, op, ReasonBounds, r, nil)
	}
	if !r.acquire() {
		return nil, 0, fault(iova, n, op, ReasonUnmapped, r, nil)
	}
	return r, off, nil
}

func (m *Memory) beginAtomic(iova IOVA, n int, op Op) (*Region, uint64, error) {
	if uint64(iova)&uint64(n-1) != 0 {
		return nil, 0, fault(iova, n, op, ReasonUnaligned, m.lookup(iova), nil)
	}
	return m.begin(iova, n, op)
}

// word64 returns the aligned word at off. Mapped regions start on a page
// boundary of both the bus and the daemon's address space, so an aligned
// IOVA is an aligned pointer.
func (r *Region) word64(off uint64) *uint64 {
	return (*uint64)(unsafe.Pointer(&r.data[off]))
}

func (r *Region) word32(off uint64) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.data[off]))
}

func (r *Region) readIO(iova IOVA, off uint64, p []byte) error {
	if r.ra == nil {
		return fault(iova, len(p), OpRead, ReasonReadOnly, r, nil)
	}
	n, err := r.ra.ReadAt(p, r.ioBase+int64(off))
	if n == len(p) {
		return nil // io.ReaderAt may report io.EOF with a full read
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fault(iova, len(p), OpRead, ReasonIO, r, err)
}

// writeIO writes p at off in ascending order, the final cache line (by the
// program's address, ioBase+off) in a separate, later WriteAt.
func (r *Region) writeIO(iova IOVA, off uint64, p []byte) error {
	if r.wa == nil {
		return fault(iova, len(p), OpWrite, ReasonReadOnly, r, nil)
	}
	at := r.ioBase + int64(off)
	split := lastLineSplit(uint64(at), len(p))
	if split > 0 {
		if err := writeFull(r.wa, p[:split], at); err != nil {
			return fault(iova, len(p), OpWrite, ReasonIO, r, err)
		}
	}
	if err := writeFull(r.wa, p[split:], at+int64(split)); err != nil {
		return fault(iova, len(p), OpWrite, ReasonIO, r, err)
	}
	return nil
}

func writeFull(w io.WriterAt, p []byte, at int64) error {
	n, err := w.WriteAt(p, at)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// rmwIO performs a read-modify-write of the 64-bit word at off of a MapIO
// region under the region's lock and returns the old value.
func (r *Region) rmwIO(iova IOVA, off uint64, f func(uint64) uint64) (uint64, error) {
	if r.ra == nil || r.wa == nil {
		return 0, fault(iova, 8, OpRMW, ReasonReadOnly, r, nil)
	}
	r.rmw.Lock()
	defer r.rmw.Unlock()
	var b [8]byte
	at := r.ioBase + int64(off)
	if n, err := r.ra.ReadAt(b[:], at); n != len(b) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return 0, fault(iova, 8, OpRMW, ReasonIO, r, err)
	}
	old := binary.LittleEndian.Uint64(b[:])
	binary.LittleEndian.PutUint64(b[:], f(old))
	if err := writeFull(r.wa, b[:], at); err != nil {
		return 0, fault(iova, 8, OpRMW, ReasonIO, r, err)
	}
	return old, nil
}

// lastLineSplit returns how many leading bytes of an n-byte write at addr
// come before its final cache line; 0 if the write lies within one line.
func lastLineSplit(addr uint64, n int) int {
	last := (addr + uint64(n) - 1) &^ (CacheLine - 1)
	if last <= addr {
		return 0
	}
	return int(last - addr)
}

// Memory operations on a mapped region. A region whose backing is sealed
// against shrinking (everything from Alloc, and Map of a sealable memfd)
// cannot raise SIGBUS, so it takes the plain path; others go through the
// guarded helpers below.

func (r *Region) copyOut(off uint64, p []byte) error {
	if !r.guard {
		copy(p, r.data[off:])
		return nil
	}
	return copyGuarded(p, r.data[off:])
}

func (r *Region) copyIn(off uint64, p []byte) error {
	dst := r.data[off : off+uint64(len(p))]
	if !r.guard {
		writeOrdered(dst, p)
		return nil
	}
	return writeOrderedGuarded(dst, p)
}

func (r *Region) load64(off uint64) (uint64, error) {
	if !r.guard {
		return atomic.LoadUint64(r.word64(off)), nil
	}
	return load64Guarded(r.word64(off))
}

func (r *Region) store64(off uint64, v uint64) error {
	if !r.guard {
		atomic.StoreUint64(r.word64(off), v)
		return nil
	}
	return store64Guarded(r.word64(off), v)
}

func (r *Region) load32(off uint64) (uint32, error) {
	if !r.guard {
		return atomic.LoadUint32(r.word32(off)), nil
	}
	return load32Guarded(r.word32(off))
}

func (r *Region) store32(off uint64, v uint32) error {
	if !r.guard {
		atomic.StoreUint32(r.word32(off), v)
		return nil
	}
	return store32Guarded(r.word32(off), v)
}

func (r *Region) cas64(off uint64, old, new uint64) (uint64, error) {
	if !r.guard {
		return cas64(r.word64(off), old, new), nil
	}
	return cas64Guarded(r.word64(off), old, new)
}

func (r *Region) add64(off uint64, delta uint64) (uint64, error) {
	if !r.guard {
		return atomic.AddUint64(r.word64(off), delta) - delta, nil
	}
	return add64Guarded(r.word64(off), delta)
}

// writeOrdered copies src to dst in ascending order, the final cache line of
// dst after a store fence.
func writeOrdered(dst, src []byte) {
	if split := lastLineSplit(uint64(uintptr(unsafe.Pointer(&dst[0]))), len(dst)); split > 0 {
		copy(dst[:split], src[:split])
		storeFence()
		copy(dst[split:], src[split:])
	} else {
		copy(dst, src)
	}
}

// cas64 returns the value found at p, having replaced it with new if it was
// old.
func cas64(p *uint64, old, new uint64) uint64 {
	for {
		cur := atomic.LoadUint64(p)
		if cur != old || atomic.CompareAndSwapUint64(p, old, new) {
			return cur
		}
	}
}

// The guarded helpers run one memory operation on a mapping with
// SetPanicOnFault, turning SIGBUS/SIGSEGV into an error (see the package
// documentation). They are small so that the defer stays open-coded.

func copyGuarded(dst, src []byte) (err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	copy(dst, src)
	return nil
}

func writeOrderedGuarded(dst, src []byte) (err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	writeOrdered(dst, src)
	return nil
}

func load64Guarded(p *uint64) (v uint64, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	return atomic.LoadUint64(p), nil
}

func store64Guarded(p *uint64, v uint64) (err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	atomic.StoreUint64(p, v)
	return nil
}

func load32Guarded(p *uint32) (v uint32, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	return atomic.LoadUint32(p), nil
}

func store32Guarded(p *uint32, v uint32) (err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	atomic.StoreUint32(p, v)
	return nil
}

func cas64Guarded(p *uint64, old, new uint64) (v uint64, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	return cas64(p, old, new), nil
}

func add64Guarded(p *uint64, delta uint64) (v uint64, err error) {
	defer catchFault(debug.SetPanicOnFault(true), &err)
	return atomic.AddUint64(p, delta) - delta, nil
}

// busError is the runtime error SetPanicOnFault raises.
type busError interface {
	error
	Addr() uintptr
}

// catchFault restores the goroutine's panic-on-fault setting and converts a
// memory fault into *err. Any other panic is not ours and propagates.
func catchFault(old bool, err *error) {
	debug.SetPanicOnFault(old)
	if v := recover(); v != nil {
		be, ok := v.(busError)
		if !ok {
			panic(v)
		}
		*err = fmt.Errorf("memory fault at host address %#x: %w", be.Addr(), be)
	}
}

// Borrow lends the n bytes at iova as a slice of the mapping, and holds
// the region until the borrower calls Return on it: an Unmap in between
// takes the region off the bus at once but keeps its backing until then.
// It is how a payload moves from one buffer of the device's memory to
// another without a copy in between (emu/qp, docs/dataplane.md
// "Loopback"). Only a mapped region whose backing cannot shrink lends
// (Alloc, Map of a sealed memfd): elsewhere ok is false — for an
// unmapped or out-of-bounds range as well — and the caller copies with
// Read, which reports the fault. n == 0 lends nothing.
func (m *Memory) Borrow(iova IOVA, n int) (b []byte, r *Region, ok bool) {
	if n <= 0 {
		return nil, nil, false
	}
	r, off, err := m.begin(iova, n, OpRead)
	if err != nil {
		return nil, nil, false
	}
	if r.kind == kindIO || r.guard {
		r.release()
		return nil, nil, false
	}
	end := off + uint64(n)
	return r.data[off:end:end], r, true
}

// Return ends a loan of Borrow: the region's backing may go once nothing
// else holds it. Each loan is returned exactly once.
func (r *Region) Return() { r.release() }

package hostmem

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IOVA is a bus address: what the driver programs into contexts, WQEs and
// PBLEs, and the only kind of address the device dereferences.
type IOVA uint64

// Layout of the IOVA space (see the package documentation).
const (
	// PageSize is the granule of IOVA allocation and of mappings.
	PageSize = 4096
	// BaseIOVA is the first IOVA ever handed out; everything below faults.
	BaseIOVA IOVA = 1 << 32
	// GuardSize is the unmapped gap left after every region.
	GuardSize = PageSize
	// MaxAlign is the largest alignment Alloc accepts (the largest page
	// size the GEN_2 device registers, 1 GiB: icrdma_init_hw page_size_cap).
	MaxAlign = 1 << 30
)

// table is an immutable snapshot of the mapped regions, sorted by IOVA and
// non-overlapping. Readers load it with one atomic load and never lock.
// starts holds the regions' first IOVAs, in the same order: the binary
// search of every access reads one array instead of one Region per step.
type table struct {
	regions []*Region
	starts  []IOVA
}

// newTable returns the table of regions, which are sorted by IOVA.
func newTable(regions []*Region) *table {
	starts := make([]IOVA, len(regions))
	for i, r := range regions {
		starts[i] = r.iova
	}
	return &table{regions: regions, starts: starts}
}

// Memory is the bus: the set of regions the device can reach. Its methods
// are safe for concurrent use; the access methods (Read, Write, Load64, …)
// take no lock and do not allocate on success.
type Memory struct {
	tab atomic.Pointer[table]

	mu     sync.Mutex // serialises Alloc, Map, MapIO, Unmap, Close
	next   IOVA       // bump pointer; guarded by mu
	closed bool       // guarded by mu

	qmu     sync.Mutex // guards held and qclosed
	held    []*Region  // sliced regions whose address range waits for Close
	qclosed bool       // Close has swept the quarantine
}

// maxNameLen bounds the memfd name (the kernel allows 249 bytes).
const maxNameLen = 200

// New returns an empty bus.
func New() *Memory {
	m := &Memory{next: BaseIOVA}
	m.tab.Store(&table{})
	return m
}

// Alloc creates a region of size bytes backed by a new memfd (memfd_create +
// mmap MAP_SHARED), zero-filled, at a fresh IOVA aligned to align (0 means
// PageSize; otherwise a power of two ≤ MaxAlign). It is the driver half's
// dma_alloc_coherent. The memfd is sealed against shrinking, so another
// process it is shared with cannot make the mapping fault.
func (m *Memory) Alloc(size int, align uint64, name string) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: Alloc size %d", ErrInvalid, size)
	}
	if align == 0 {
		align = PageSize
	}
	if align&(align-1) != 0 || align > MaxAlign {
		return nil, fmt.Errorf("%w: Alloc alignment %#x", ErrInvalid, align)
	}
	mapLen, ok := pageRound(uint64(size))
	if !ok || mapLen > math.MaxInt64 {
		return nil, fmt.Errorf("%w: Alloc size %d", ErrInvalid, size)
	}
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate(memfdName(name), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("hostmem: memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(mapLen)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hostmem: ftruncate %q to %d: %w", name, mapLen, err)
	}
	// Growing is harmless to us; shrinking would turn our accesses into
	// SIGBUS, so forbid it for every process that gets the descriptor.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hostmem: seal %q: %w", name, err)
	}
	r, err := m.mapFD(fd, 0, uint64(size), mapLen, name, kindAlloc)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := m.insert(r, align); err != nil {
		r.kill()
		return nil, err
	}
	return r, nil
}

// Map maps size bytes of the shareable descriptor fd (a client's memfd),
// starting at offset (a multiple of PageSize), read-write MAP_SHARED at a
// fresh page-aligned IOVA. The Region keeps its own duplicate of fd; the
// caller keeps ownership of fd and may close it at once. fd must be at least
// offset+size bytes long. Map seals the file against shrinking when the
// kernel allows it (a memfd created with MFD_ALLOW_SEALING); for other files
// a later truncation is caught as a ReasonBus fault.
func (m *Memory) Map(fd int, offset int64, size int, name string) (*Region, error) {
	if size <= 0 || offset < 0 || offset%PageSize != 0 || fd < 0 {
		return nil, fmt.Errorf("%w: Map fd %d offset %d size %d", ErrInvalid, fd, offset, size)
	}
	mapLen, ok := pageRound(uint64(size))
	if !ok || mapLen > math.MaxInt64-uint64(offset) {
		return nil, fmt.Errorf("%w: Map offset %d size %d", ErrInvalid, offset, size)
	}
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("hostmem: Map %q: fstat: %w", name, err)
	}
	if st.Size < offset+int64(size) {
		return nil, fmt.Errorf("%w: Map %q: file is %d bytes, need %d", ErrInvalid, name, st.Size, offset+int64(size))
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hostmem: Map %q: dup: %w", name, err)
	}
	// Best effort: fails with EPERM on memfds without MFD_ALLOW_SEALING and
	// EINVAL on other files; accesses to those run under the fault guard.
	_, _ = unix.FcntlInt(uintptr(dup), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
	seals, err := unix.FcntlInt(uintptr(dup), unix.F_GET_SEALS, 0)
	sealed := err == nil && seals&unix.F_SEAL_SHRINK != 0
	r, err := m.mapFD(dup, offset, uint64(size), mapLen, name, kindMap)
	if err != nil {
		unix.Close(dup)
		return nil, err
	}
	r.guard = !sealed
	if err := m.insert(r, PageSize); err != nil {
		r.kill()
		return nil, err
	}
	return r, nil
}

// MapIO maps a region that is reached through r and w instead of a mapping:
// IOVA()+k is offset base+k of r and w. It is meant for a client's
// /proc/<pid>/mem descriptor, base being the virtual address of a buffer the
// program registered with ibv_reg_mr (docs/preload.md "Measured: ways to
// reach a program's memory"). Either r
// or w may be nil (the region is then write-only or read-only; the other
// access faults with ReasonReadOnly). The Memory does not take ownership:
// close the file after Unmap; an *os.File tolerates Close during a
// concurrent ReadAt.
//
// Write ordering. Programs (perftest's *_lat, anything polling a flag at the
// end of a message) spin on the last byte of a buffer without calling any
// verb, so every Write to a MapIO region lands in ascending address order
// with the final cache line last: the bytes up to the last 64-byte boundary
// (of base+offset, the program's address) go in one WriteAt, and the final
// partial or whole line in a second, later WriteAt. A write within one cache
// line is a single WriteAt. Reads are one ReadAt.
//
// Load/Store/CompareAndSwap/Add on a MapIO region are 4- or 8-byte ReadAt /
// WriteAt calls; CompareAndSwap64 and Add64 are atomic only with respect to
// other accesses through this Memory, not to the program's own CPU stores.
func (m *Memory) MapIO(r io.ReaderAt, w io.WriterAt, base int64, size int, name string) (*Region, error) {
	if size <= 0 || base < 0 || (r == nil && w == nil) || uint64(size) > uint64(math.MaxInt64-base) {
		return nil, fmt.Errorf("%w: MapIO base %d size %d", ErrInvalid, base, size)
	}
	if _, ok := pageRound(uint64(size)); !ok {
		return nil, fmt.Errorf("%w: MapIO size %d", ErrInvalid, size)
	}
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	reg := &Region{mem: m, kind: kindIO, size: uint64(size), name: name, fd: -1,
		ra: r, wa: w, ioBase: base}
	if err := m.insert(reg, PageSize); err != nil {
		return nil, err
	}
	return reg, nil
}

// Unmap removes the region from the bus. Accesses that start after Unmap
// fault with ReasonUnmapped, including those of readers that looked the
// region up just before; the backing is released once in-flight accesses
// drain (see the package documentation for slices).
func (m *Memory) Unmap(r *Region) error {
	if r == nil || r.mem != m {
		return ErrNotMapped
	}
	m.mu.Lock()
	t := m.tab.Load()
	old := t.regions
	i := search(t.starts, r.iova)
	if m.closed || i < 0 || old[i] != r {
		m.mu.Unlock()
		return ErrNotMapped
	}
	regions := make([]*Region, 0, len(old)-1)
	regions = append(regions, old[:i]...)
	regions = append(regions, old[i+1:]...)
	m.tab.Store(newTable(regions))
	m.mu.Unlock()
	r.kill()
	return nil
}

// Close unmaps every region and releases everything, including the address
// ranges held for slices of unmapped regions. Slices obtained from Bytes or
// Slice must not be used afterwards. Close is idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	old := m.tab.Load().regions
	m.tab.Store(&table{})
	m.mu.Unlock()
	for _, r := range old {
		r.kill()
	}
	m.qmu.Lock()
	held := m.held
	m.held, m.qclosed = nil, true
	m.qmu.Unlock()
	for _, r := range held {
		_ = unix.MunmapPtr(r.base, r.mapLen)
	}
	return nil
}

// Lookup returns the region that contains iova, if any (for diagnostics and
// for blocks that want to name the region behind an address).
func (m *Memory) Lookup(iova IOVA) (*Region, bool) {
	r := m.lookup(iova)
	return r, r != nil
}

// NumRegions returns the number of mapped regions.
func (m *Memory) NumRegions() int { return len(m.tab.Load().regions) }

func (m *Memory) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// mapFD mmaps fd and builds a (not yet inserted) Region owning fd.
func (m *Memory) mapFD(fd int, offset int64, size, mapLen uint64, name string, kind regionKind) (*Region, error) {
	p, err := unix.MmapPtr(fd, offset, nil, uintptr(mapLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("hostmem: mmap %q (%d bytes): %w", name, mapLen, err)
	}
	return &Region{mem: m, kind: kind, size: size, name: name, fd: fd,
		base: p, mapLen: uintptr(mapLen), data: unsafe.Slice((*byte)(p), size)}, nil
}

// insert assigns the region an IOVA and publishes a new table.
func (m *Memory) insert(r *Region, align uint64) error {
	span, _ := pageRound(r.size) // callers checked
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	start, ok := alignUp(uint64(m.next), align)
	if !ok {
		return ErrNoSpace
	}
	end, c1 := bits.Add64(start, span, 0)
	next, c2 := bits.Add64(end, GuardSize, 0)
	if c1|c2 != 0 {
		return ErrNoSpace
	}
	r.iova = IOVA(start)
	m.next = IOVA(next)
	// Regions are allocated in ascending IOVA order, so appending keeps the
	// table sorted.
	old := m.tab.Load().regions
	regions := make([]*Region, len(old), len(old)+1)
	copy(regions, old)
	m.tab.Store(newTable(append(regions, r)))
	return nil
}

// quarantine records a sliced region whose address range must stay reserved
// until Close. It reports false once Close has run: the caller then
// munmaps, since slices are invalid after Close anyway.
func (m *Memory) quarantine(r *Region) bool {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	if m.qclosed {
		return false
	}
	m.held = append(m.held, r)
	return true
}

// lookup finds the region containing iova without locking or allocating.
func (m *Memory) lookup(iova IOVA) *Region {
	t := m.tab.Load()
	if i := search(t.starts, iova); i >= 0 {
		if r := t.regions[i]; iova-r.iova < IOVA(r.size) {
			return r
		}
	}
	return nil
}

// search returns the index of the last start at or below iova, or -1.
func search(starts []IOVA, iova IOVA) int {
	lo, hi := 0, len(starts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if starts[mid] <= iova {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

func memfdName(name string) string {
	name = strings.ReplaceAll(name, "\x00", "?")
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	return "irdma-emu:" + name
}

func pageRound(n uint64) (uint64, bool) {
	return alignUp(n, PageSize)
}

func alignUp(n, align uint64) (uint64, bool) {
	s, c := bits.Add64(n, align-1, 0)
	return s &^ (align - 1), c == 0
}

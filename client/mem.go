package client

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
)

// Memory the device reaches. Everything the daemon must read or write —
// rings, shadow areas, registered buffers — lives in memfd-backed chunks
// that this process maps MAP_SHARED and hands to the daemon with MEM
// (docs/attach.md): the daemon maps the same pages, so rings are polled and
// payloads land zero-copy, with no /proc/self/mem. This is the preload's
// arena, done from Go: chunks of at least 1 MiB, page-granular first-fit
// allocation inside them, each new chunk announced before the allocation
// that needs it returns, so a REG_MR that follows always names memory the
// daemon knows.

const (
	pageSize     = 4096
	minChunkSize = 1 << 20
)

// chunk is one memfd mapped at addr.
type chunk struct {
	f    *os.File
	mem  []byte
	addr uint64
	free []span // sorted, coalesced free page runs (byte offsets)
}

type span struct{ off, n int }

// arena allocates page-aligned shared memory.
type arena struct {
	mu     sync.Mutex
	conn   *attach.Conn
	chunks []*chunk // sorted by addr
	live   map[uint64]allocation
	closed bool
}

type allocation struct {
	c   *chunk
	off int
	n   int // bytes reserved (whole pages)
}

func newArena(conn *attach.Conn) *arena {
	return &arena{conn: conn, live: map[uint64]allocation{}}
}

func roundPage(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

// alloc returns n bytes (n > 0) of zeroed shared memory starting on a page
// boundary; the slice's capacity is n.
func (a *arena) alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("client: allocation of %d bytes: %w", n, syscall.EINVAL)
	}
	if n > 1<<40 {
		return nil, fmt.Errorf("client: allocation of %d bytes: %w", n, syscall.ENOMEM)
	}
	want := roundPage(n)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, syscall.EBADF
	}
	for _, c := range a.chunks {
		if off, ok := c.take(want); ok {
			return a.record(c, off, want, n), nil
		}
	}
	c, err := a.grow(max(want, minChunkSize))
	if err != nil {
		return nil, err
	}
	off, _ := c.take(want)
	return a.record(c, off, want, n), nil
}

func (a *arena) record(c *chunk, off, want, n int) []byte {
	b := c.mem[off : off+n : off+n]
	a.live[c.addr+uint64(off)] = allocation{c: c, off: off, n: want}
	return b
}

// grow creates, maps and announces a chunk of size bytes.
func (a *arena) grow(size int) (*chunk, error) {
	size = roundPage(size)
	fd, err := unix.MemfdCreate("irdma-emu-client", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "irdma-emu-client")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, os.NewSyscallError("ftruncate", err)
	}
	// The daemon maps these pages; a shrink would pull them from under it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		f.Close()
		return nil, os.NewSyscallError("fcntl F_ADD_SEALS", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, os.NewSyscallError("mmap", err)
	}
	c := &chunk{f: f, mem: mem, addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))), free: []span{{0, size}}}
	if err := a.conn.Mem(attach.MemRequest{Addr: c.addr, Length: uint64(size), FDOffset: 0}, f); err != nil {
		unix.Munmap(mem)
		f.Close()
		return nil, fmt.Errorf("client: MEM: %w", err)
	}
	a.chunks = append(a.chunks, c)
	sort.Slice(a.chunks, func(i, j int) bool { return a.chunks[i].addr < a.chunks[j].addr })
	return c, nil
}

// take reserves want bytes first-fit.
func (c *chunk) take(want int) (int, bool) {
	for i, s := range c.free {
		if s.n < want {
			continue
		}
		off := s.off
		if s.n == want {
			c.free = append(c.free[:i], c.free[i+1:]...)
		} else {
			c.free[i] = span{s.off + want, s.n - want}
		}
		return off, true
	}
	return 0, false
}

// give returns a run, coalescing with its neighbours.
func (c *chunk) give(off, n int) {
	i := sort.Search(len(c.free), func(i int) bool { return c.free[i].off > off })
	c.free = append(c.free, span{})
	copy(c.free[i+1:], c.free[i:])
	c.free[i] = span{off, n}
	if i+1 < len(c.free) && c.free[i].off+c.free[i].n == c.free[i+1].off {
		c.free[i].n += c.free[i+1].n
		c.free = append(c.free[:i+1], c.free[i+2:]...)
	}
	if i > 0 && c.free[i-1].off+c.free[i-1].n == c.free[i].off {
		c.free[i-1].n += c.free[i].n
		c.free = append(c.free[:i], c.free[i+1:]...)
	}
}

// free releases an allocation made by alloc. The pages are zeroed, so a
// later ring allocated there starts with every valid bit clear.
func (a *arena) free(b []byte) error {
	if len(b) == 0 {
		return syscall.EINVAL
	}
	addr := addrOf(b)
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.live[addr]
	if !ok {
		return fmt.Errorf("client: free of %#x: not an allocation: %w", addr, syscall.EINVAL)
	}
	delete(a.live, addr)
	clear(al.c.mem[al.off : al.off+al.n])
	al.c.give(al.off, al.n)
	return nil
}

// slice returns the shared memory [addr, addr+n) if it lies inside one
// chunk, for gathering inline data from an SGE.
func (a *arena) slice(addr uint64, n int) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.find(addr)
	if c == nil || n < 0 || addr+uint64(n) > c.addr+uint64(len(c.mem)) {
		return nil, false
	}
	off := int(addr - c.addr)
	return c.mem[off : off+n : off+n], true
}

// contains reports whether [addr, addr+n) lies inside one chunk: memory
// the daemon can reach.
func (a *arena) contains(addr uint64, n uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.find(addr)
	return c != nil && n <= uint64(len(c.mem)) && addr+n <= c.addr+uint64(len(c.mem))
}

func (a *arena) find(addr uint64) *chunk {
	i := sort.Search(len(a.chunks), func(i int) bool { return a.chunks[i].addr > addr }) - 1
	if i < 0 {
		return nil
	}
	c := a.chunks[i]
	if addr >= c.addr+uint64(len(c.mem)) {
		return nil
	}
	return c
}

// close unmaps every chunk. Slices handed out become invalid: this runs
// after the daemon connection is gone, when nothing may touch them.
func (a *arena) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	for _, c := range a.chunks {
		unix.Munmap(c.mem)
		c.f.Close()
	}
	a.chunks = nil
	a.live = nil
}

// addrOf is the virtual address of b's first byte: what the program's
// pointers hold, and what WQE fragments and REG_MR carry.
func addrOf(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

package uverbs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Client memory. The device reaches a program's memory only at IOVAs of
// the bus (emu/hostmem), never at the program's addresses. Two ways in:
//
//   - MEM ranges: pieces of a memfd the program maps MAP_SHARED (the
//     preload's arena, where libirdma's rings and shadow areas live), handed
//     over with MEM and mapped zero-copy at a fresh IOVA each. Everything
//     the device polls — SQ/RQ rings, QP and CQ shadow areas, CQ rings —
//     must be there.
//   - /proc/self/mem: the descriptor of the HELLO, through which a buffer
//     the program registered with REG_MR (reg_type MEM) is mapped with
//     hostmem.MapIO for the length of the registration.
//
// A page list for the driver (ib_umem_get's DMA addresses) is the IOVA of
// each 4 KiB page of the registered range.

// memRange is one MEM piece: client addresses [addr, end) are the bus
// region r.
type memRange struct {
	addr, end uint64
	r         *hostmem.Region
}

// memMap is a context's MEM ranges, sorted by address, non-overlapping.
type memMap struct {
	ranges []memRange
	bytes  uint64
}

func (m *memMap) find(va uint64) *memRange {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].end > va })
	if i < len(m.ranges) && m.ranges[i].addr <= va {
		return &m.ranges[i]
	}
	return nil
}

func (m *memMap) overlaps(addr, end uint64) bool {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].end > addr })
	return i < len(m.ranges) && m.ranges[i].addr < end
}

func (m *memMap) insert(r memRange) {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].addr > r.addr })
	m.ranges = append(m.ranges, memRange{})
	copy(m.ranges[i+1:], m.ranges[i:])
	m.ranges[i] = r
	m.bytes += r.end - r.addr
}

// iova translates one client address inside a MEM range.
func (m *memMap) iova(va uint64) (hostmem.IOVA, bool) {
	r := m.find(va)
	if r == nil {
		return 0, false
	}
	return r.r.IOVA() + hostmem.IOVA(va-r.addr), true
}

// covered reports whether [addr, end) lies in MEM ranges (adjacent
// pieces may continue each other).
func (m *memMap) covered(addr, end uint64) bool {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].end > addr })
	for ; i < len(m.ranges) && m.ranges[i].addr <= addr; i++ {
		if m.ranges[i].end >= end {
			return true
		}
		addr = m.ranges[i].end
	}
	return false
}

// pages returns the IOVAs of the 4 KiB pages covering [start,
// start+length) if every one lies in a MEM range (pieces may be
// discontiguous on the bus: each page is translated on its own).
func (m *memMap) pages(start, length uint64) ([]uint64, bool) {
	first := start &^ (pageSize - 1)
	end := (start + length + pageSize - 1) &^ (pageSize - 1)
	if end <= first || !m.covered(first, end) {
		return nil, false
	}
	n := (end - first) / pageSize
	out := make([]uint64, 0, n)
	for i := uint64(0); i < n; i++ {
		va := first + i*pageSize
		r := m.find(va)
		if r == nil || va+pageSize > r.end {
			return nil, false
		}
		out = append(out, uint64(r.r.IOVA())+(va-r.addr))
	}
	return out, true
}

// Mem implements attach.Session: map a piece of the program's shared
// memory at a fresh IOVA. The memfd is the Session's: it is closed here,
// the bus mapping keeps its own reference.
func (s *Session) Mem(req attach.MemRequest, memfd *os.File) error {
	defer memfd.Close()
	if s.closed {
		return eIO
	}
	end := req.Addr + req.Length
	switch {
	case req.Length == 0 || end < req.Addr:
		return eINVAL
	case req.Addr%pageSize != 0 || req.Length%pageSize != 0 || req.FDOffset%pageSize != 0:
		return eINVAL
	case req.Length > uint64(maxInt) || req.FDOffset > uint64(maxInt64)-req.Length:
		return eINVAL
	}
	if s.mem.overlaps(req.Addr, end) {
		s.log.Warn("uverbs: MEM range overlaps one already handed over",
			zap.Uint64("addr", req.Addr), zap.Uint64("len", req.Length))
		return eEXIST
	}
	if len(s.mem.ranges) >= s.p.cfg.Limits.MaxMemRanges || s.mem.bytes+req.Length > s.p.cfg.Limits.MaxMemBytes {
		return eNOMEM
	}
	fd, err := rawFD(memfd)
	if err != nil {
		return eINVAL
	}
	r, err := s.p.mem.Map(fd, int64(req.FDOffset), int(req.Length), fmt.Sprintf("mem-%d-%#x", s.id, req.Addr))
	if err != nil {
		s.log.Warn("uverbs: cannot map MEM range", zap.Uint64("addr", req.Addr), zap.Uint64("len", req.Length), zap.Error(err))
		var e syscall.Errno
		switch {
		case errors.As(err, &e):
			return e
		case errors.Is(err, hostmem.ErrInvalid):
			return eINVAL
		}
		return eNOMEM
	}
	s.mem.insert(memRange{addr: req.Addr, end: end, r: r})
	return nil
}

const (
	maxInt   = int(^uint(0) >> 1)
	maxInt64 = 1<<63 - 1
)

// rawFD returns f's descriptor without changing its blocking mode.
func rawFD(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(p uintptr) { fd = int(p) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// userPages resolves a registration's range for the driver, standing in
// for ib_umem_get: its page IOVAs and, for a MapIO mapping made for it,
// the region to unmap when the registration goes. Queue memory (reg_type
// QP, CQ, SRQ) must lie in MEM ranges: the device polls it.
func (s *Session) userPages(start, length uint64, queue bool) ([]uint64, *hostmem.Region, error) {
	// ib_umem_get: a zero length or a range that wraps is -EINVAL.
	end := start + length
	if length == 0 || end < start || end > (1<<64-pageSize) {
		return nil, nil, eINVAL
	}
	// The kernel would pin every page (and fail against RLIMIT_MEMLOCK
	// or memory); the daemon bounds what one registration may hold.
	if length > s.p.cfg.Limits.MaxMRBytes {
		s.log.Warn("uverbs: registration larger than the daemon allows", zap.Uint64("len", length),
			zap.Uint64("max", s.p.cfg.Limits.MaxMRBytes))
		return nil, nil, eNOMEM
	}
	if pages, ok := s.mem.pages(start, length); ok {
		return pages, nil, nil
	}
	if queue {
		s.log.Warn("uverbs: queue memory is not in shared memory: the device cannot poll it "+
			"(the provider's rings must come from the preload's arena, handed over with MEM)",
			zap.Uint64("addr", start), zap.Uint64("len", length))
		return nil, nil, eFAULT
	}
	pm := s.peer.Mem
	if pm == nil {
		s.log.Warn("uverbs: REG_MR outside shared memory and no /proc/self/mem from the program",
			zap.Uint64("addr", start), zap.Uint64("len", length))
		return nil, nil, eFAULT
	}
	base := start &^ (pageSize - 1)
	span := (end + pageSize - 1) &^ (pageSize - 1)
	size := span - base
	if size > uint64(maxInt) || size > maxInt64-base || s.mapIO+size > s.p.cfg.Limits.MaxMapIO {
		return nil, nil, eNOMEM
	}
	// ib_umem_get pins the pages: an unmapped range is -EFAULT. Probe the
	// first and the last byte.
	var b [1]byte
	if _, err := pm.ReadAt(b[:], int64(start)); err != nil {
		return nil, nil, eFAULT
	}
	if _, err := pm.ReadAt(b[:], int64(end-1)); err != nil {
		return nil, nil, eFAULT
	}
	io := progMem{f: pm, calls: &s.p.procMemCalls}
	r, err := s.p.mem.MapIO(io, io, int64(base), int(size), fmt.Sprintf("mr-%d-%#x", s.id, start))
	if err != nil {
		return nil, nil, eNOMEM
	}
	n := size / pageSize
	pages := make([]uint64, n)
	for i := range pages {
		pages[i] = uint64(r.IOVA()) + uint64(i)*pageSize
	}
	s.mapIO += size
	return pages, r, nil
}

// progMem is the program's /proc/self/mem as the MapIO regions of its
// registrations reach it. The kernel pins registered pages (ib_umem_get):
// a NIC's DMA to and from them goes on after the program's address space
// is gone — the program was killed or exited, and its uverbs file is not
// released yet (do_exit drops the mm before it closes the files) — until
// the QP is destroyed and the MR deregistered. /proc/pid/mem then moves
// nothing, with no error (mem_rw finds no mm users), so progMem makes
// writes succeed into nothing and reads give zeros: a peer's WRITE or SEND
// to a program that just died is acknowledged as by the hardware, not
// answered with a remote operational error, and the peer's QP only sees
// silence once the session's cleanup has destroyed the QP (retries
// exceeded). Zeros stand for the stale contents a NIC would read. An
// address the live program has not mapped still fails (EIO).
//
// Every call is a system call (pread/pwrite of the descriptor) and is
// counted in calls (Provider.ProcMemCalls): the figure that says how much
// of a program's traffic missed the shared arena.
type progMem struct {
	f     *os.File
	calls *atomic.Uint64
}

// ReadAt implements io.ReaderAt.
func (m progMem) ReadAt(p []byte, off int64) (int, error) {
	m.calls.Add(1)
	n, err := m.f.ReadAt(p, off)
	if err == io.EOF { // no address space any more
		clear(p[n:])
		return len(p), nil
	}
	return n, err
}

// WriteAt implements io.WriterAt.
func (m progMem) WriteAt(p []byte, off int64) (int, error) {
	m.calls.Add(1)
	n, err := m.f.WriteAt(p, off)
	if errors.Is(err, io.ErrUnexpectedEOF) { // no address space any more
		return len(p), nil
	}
	return n, err
}

// unmapIO releases a MapIO region made by userPages.
func (s *Session) unmapIO(r *hostmem.Region) {
	if r == nil {
		return
	}
	s.mapIO -= uint64(r.Len())
	if err := s.p.mem.Unmap(r); err != nil {
		s.log.Debug("uverbs: unmap", zap.Error(err))
	}
}

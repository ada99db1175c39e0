package hostmem_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

func newMemory(t testing.TB) *hostmem.Memory {
	t.Helper()
	m := hostmem.New()
	t.Cleanup(func() { m.Close() })
	return m
}

func mustAlloc(t testing.TB, m *hostmem.Memory, size int, align uint64, name string) *hostmem.Region {
	t.Helper()
	r, err := m.Alloc(size, align, name)
	if err != nil {
		t.Fatalf("Alloc(%d, %#x, %q): %v", size, align, name, err)
	}
	return r
}

// faultReason returns the Reason of a *FaultError, or 0 for nil; any other
// error fails the test.
func faultReason(t *testing.T, err error) hostmem.Reason {
	t.Helper()
	if err == nil {
		return 0
	}
	var fe *hostmem.FaultError
	if !errors.As(err, &fe) || !errors.Is(err, hostmem.ErrFault) {
		t.Fatalf("error %v (%T) is not a *FaultError matching ErrFault", err, err)
	}
	return fe.Reason
}

func TestAllocLayout(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 100, 0, "a")
	b := mustAlloc(t, m, 8192, 0, "b")
	c := mustAlloc(t, m, 64, 1<<21, "c")
	tests := []struct {
		name      string
		r         *hostmem.Region
		wantIOVA  hostmem.IOVA
		wantLen   int
		alignment uint64
	}{
		// The first region starts at the base, page aligned.
		{"first at base", a, hostmem.BaseIOVA, 100, hostmem.PageSize},
		// a occupies one page, then one guard page.
		{"after guard", b, hostmem.BaseIOVA + 2*hostmem.PageSize, 8192, hostmem.PageSize},
		{"2MiB aligned", c, 0, 64, 1 << 21},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantIOVA != 0 && tc.r.IOVA() != tc.wantIOVA {
				t.Errorf("IOVA = %#x, want %#x", tc.r.IOVA(), tc.wantIOVA)
			}
			if uint64(tc.r.IOVA())%tc.alignment != 0 {
				t.Errorf("IOVA %#x not aligned to %#x", tc.r.IOVA(), tc.alignment)
			}
			if tc.r.Len() != tc.wantLen || tc.r.End() != tc.r.IOVA()+hostmem.IOVA(tc.wantLen) {
				t.Errorf("Len = %d End = %#x, want %d", tc.r.Len(), tc.r.End(), tc.wantLen)
			}
			if got := len(tc.r.Bytes()); got != tc.wantLen {
				t.Errorf("len(Bytes()) = %d, want %d", got, tc.wantLen)
			}
			if tc.r.FD() < 0 || !tc.r.Mapped() {
				t.Errorf("FD = %d Mapped = %v, want a descriptor", tc.r.FD(), tc.r.Mapped())
			}
		})
	}
	if c.IOVA() <= b.End() {
		t.Errorf("c at %#x overlaps or touches b ending at %#x", c.IOVA(), b.End())
	}
	if r, ok := m.Lookup(b.IOVA() + 5000); !ok || r != b {
		t.Errorf("Lookup inside b = %v, %v", r, ok)
	}
	if _, ok := m.Lookup(a.End()); ok {
		t.Errorf("Lookup in guard gap found a region")
	}
}

func TestAllocInvalid(t *testing.T) {
	m := newMemory(t)
	tests := []struct {
		size  int
		align uint64
	}{
		{0, 0}, {-1, 0}, {math.MinInt, 0}, {math.MaxInt, 0},
		{4096, 3}, {4096, 1 << 31}, {4096, 1 << 63},
	}
	for _, tc := range tests {
		if r, err := m.Alloc(tc.size, tc.align, "bad"); err == nil {
			t.Errorf("Alloc(%d, %#x) = %v, want error", tc.size, tc.align, r.IOVA())
		}
	}
	if m.NumRegions() != 0 {
		t.Errorf("failed Allocs left %d regions", m.NumRegions())
	}
}

// TestBounds runs every access kind against addresses in, around and far
// from the mapped regions, including lengths and addresses that overflow.
func TestBounds(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 8192, 0, "a")
	b := mustAlloc(t, m, 100, 0, "b") // mapping is a page, region 100 bytes
	io := newRW(4096)
	c, err := m.MapIO(io, io, 0, 4096, "io")
	if err != nil {
		t.Fatal(err)
	}
	const (
		ok       = 0
		unmapped = hostmem.ReasonUnmapped
		bounds   = hostmem.ReasonBounds
	)
	tests := []struct {
		name string
		iova hostmem.IOVA
		n    int
		want hostmem.Reason
	}{
		{"zero address", 0, 1, unmapped},
		{"zero length at zero", 0, 0, ok},
		{"below base", hostmem.BaseIOVA - 1, 1, unmapped},
		{"straddles base", hostmem.BaseIOVA - 1, 2, unmapped},
		{"whole region", a.IOVA(), 8192, ok},
		{"one past end", a.IOVA(), 8193, bounds},
		{"last byte", a.End() - 1, 1, ok},
		{"last byte plus one", a.End() - 1, 2, bounds},
		{"guard gap", a.End(), 1, unmapped},
		{"past len inside page", b.IOVA() + 100, 1, unmapped},
		{"b tail", b.IOVA() + 96, 4, ok},
		{"b over len", b.IOVA() + 96, 5, bounds},
		{"io region", c.IOVA() + 10, 100, ok},
		{"io over end", c.IOVA() + 4000, 100, bounds},
		{"top of space", math.MaxUint64, 1, unmapped},
		{"wraps", math.MaxUint64 - 3, 8, unmapped},
		{"huge length", a.IOVA(), math.MaxInt, bounds},
		{"huge length mid", a.IOVA() + 4096, math.MaxInt, bounds},
		{"negative length", a.IOVA(), -1, bounds},
		{"min int length", a.IOVA(), math.MinInt, bounds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Slice takes any length; Read/Write only lengths we can allocate.
			_, err := m.Slice(tc.iova, tc.n)
			want := tc.want
			if want == ok && tc.iova >= c.IOVA() && tc.iova < c.End() && tc.n > 0 {
				want = hostmem.ReasonNoMapping
			}
			if got := faultReason(t, err); got != want {
				t.Errorf("Slice(%#x, %d): reason %v, want %v (err %v)", tc.iova, tc.n, got, want, err)
			}
			if tc.n < 0 || tc.n > 1<<20 {
				return
			}
			p := make([]byte, tc.n)
			if got := faultReason(t, m.Read(tc.iova, p)); got != tc.want {
				t.Errorf("Read: reason %v, want %v", got, tc.want)
			}
			if got := faultReason(t, m.Write(tc.iova, p)); got != tc.want {
				t.Errorf("Write: reason %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFaultError(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 4096, 0, "cq ring")
	err := m.Read(a.IOVA()+4090, make([]byte, 8))
	var fe *hostmem.FaultError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want *FaultError", err)
	}
	want := &hostmem.FaultError{IOVA: a.IOVA() + 4090, Len: 8, Op: hostmem.OpRead,
		Reason: hostmem.ReasonBounds, Region: "cq ring"}
	if diff := cmp.Diff(want, fe); diff != "" {
		t.Errorf("FaultError (-want +got):\n%s", diff)
	}
	if !errors.Is(err, hostmem.ErrFault) {
		t.Error("errors.Is(err, ErrFault) = false")
	}
	if s := err.Error(); s != fmt.Sprintf(`hostmem: read fault at iova %#x len 8: beyond end of region (region "cq ring")`, uint64(a.IOVA()+4090)) {
		t.Errorf("Error() = %q", s)
	}
}

func TestAtomicsAlignment(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 4096, 0, "a")
	tests := []struct {
		name   string
		iova   hostmem.IOVA
		want64 hostmem.Reason
		want32 hostmem.Reason
	}{
		{"aligned", a.IOVA() + 8, 0, 0},
		{"4-aligned", a.IOVA() + 4, hostmem.ReasonUnaligned, 0},
		{"odd", a.IOVA() + 1, hostmem.ReasonUnaligned, hostmem.ReasonUnaligned},
		{"last word", a.End() - 8, 0, 0},
		{"unmapped", a.End() + 8, hostmem.ReasonUnmapped, hostmem.ReasonUnmapped},
		{"top", math.MaxUint64 - 7, hostmem.ReasonUnmapped, hostmem.ReasonUnmapped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Load64(tc.iova)
			if got := faultReason(t, err); got != tc.want64 {
				t.Errorf("Load64: %v, want %v", got, tc.want64)
			}
			if got := faultReason(t, m.Store64(tc.iova, 1)); got != tc.want64 {
				t.Errorf("Store64: %v, want %v", got, tc.want64)
			}
			_, err = m.CompareAndSwap64(tc.iova, 0, 1)
			if got := faultReason(t, err); got != tc.want64 {
				t.Errorf("CompareAndSwap64: %v, want %v", got, tc.want64)
			}
			_, err = m.Add64(tc.iova, 1)
			if got := faultReason(t, err); got != tc.want64 {
				t.Errorf("Add64: %v, want %v", got, tc.want64)
			}
			_, err = m.Load32(tc.iova)
			if got := faultReason(t, err); got != tc.want32 {
				t.Errorf("Load32: %v, want %v", got, tc.want32)
			}
			if got := faultReason(t, m.Store32(tc.iova, 1)); got != tc.want32 {
				t.Errorf("Store32: %v, want %v", got, tc.want32)
			}
		})
	}
}

// TestWordsAreLittleEndian pins the byte order of the atomic words to the
// byte view: the device's structures are little-endian qwords.
func TestWordsAreLittleEndian(t *testing.T) {
	m := newMemory(t)
	for _, r := range []*hostmem.Region{mustAlloc(t, m, 4096, 0, "mapped"), mapIO(t, m, newRW(4096), 0, 4096)} {
		t.Run(r.Name(), func(t *testing.T) {
			if err := m.Store64(r.IOVA()+16, 0x8877665544332211); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 8)
			if err := m.Read(r.IOVA()+16, got); err != nil {
				t.Fatal(err)
			}
			if want := []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}; !bytes.Equal(got, want) {
				t.Errorf("bytes = %x, want %x", got, want)
			}
			if v, err := m.Load32(r.IOVA() + 20); err != nil || v != 0x88776655 {
				t.Errorf("Load32 = %#x, %v", v, err)
			}
			if err := m.Store32(r.IOVA()+16, 0xdeadbeef); err != nil {
				t.Fatal(err)
			}
			if v, err := m.Load64(r.IOVA() + 16); err != nil || v != 0x88776655deadbeef {
				t.Errorf("Load64 = %#x, %v", v, err)
			}
			if old, err := m.CompareAndSwap64(r.IOVA()+16, 1, 2); err != nil || old != 0x88776655deadbeef {
				t.Errorf("failing CAS returned %#x, %v", old, err)
			}
			if old, err := m.CompareAndSwap64(r.IOVA()+16, 0x88776655deadbeef, 7); err != nil || old != 0x88776655deadbeef {
				t.Errorf("CAS returned %#x, %v", old, err)
			}
			if old, err := m.Add64(r.IOVA()+16, 3); err != nil || old != 7 {
				t.Errorf("Add64 returned %#x, %v", old, err)
			}
			if v, _ := m.Load64(r.IOVA() + 16); v != 10 {
				t.Errorf("after Add64: %d, want 10", v)
			}
		})
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 3*4096, 0, "a")
	want := make([]byte, 5000)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := m.Write(a.IOVA()+1234, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := m.Read(a.IOVA()+1234, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("Read after Write differs")
	}
	if !bytes.Equal(a.Bytes()[1234:1234+5000], want) {
		t.Error("Bytes() does not show the write")
	}
	s, err := m.Slice(a.IOVA()+1234, 10)
	if err != nil || !bytes.Equal(s, want[:10]) || cap(s) != 10 {
		t.Errorf("Slice = %x (cap %d), %v", s, cap(s), err)
	}
	s[0] = 0xEE // zero copy: visible through Read
	if err := m.Read(a.IOVA()+1234, got[:1]); err != nil || got[0] != 0xEE {
		t.Errorf("write through Slice not visible: %x %v", got[0], err)
	}
}

// rw is an in-memory io.ReaderAt/io.WriterAt that records every WriteAt.
type rw struct {
	mu     sync.Mutex
	buf    []byte
	writes []span
	err    error // returned by every call once set
}

type span struct{ off, n int64 }

func newRW(n int) *rw { return &rw{buf: make([]byte, n)} }

func (f *rw) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	if off >= int64(len(f.buf)) {
		return 0, errors.New("EIO")
	}
	n := copy(p, f.buf[off:])
	if n < len(p) {
		return n, errors.New("EIO")
	}
	return n, nil
}

func (f *rw) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.writes = append(f.writes, span{off, int64(len(p))})
	return copy(f.buf[off:], p), nil
}

func mapIO(t testing.TB, m *hostmem.Memory, f *rw, base int64, size int) *hostmem.Region {
	t.Helper()
	r, err := m.MapIO(f, f, base, size, fmt.Sprintf("io@%#x", base))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMapIOWriteOrder checks the "last cache line last" rule: ascending
// order, and the final line (by the program's address) in its own, final
// WriteAt.
func TestMapIOWriteOrder(t *testing.T) {
	const base = 0x1010 // the program's virtual address of the buffer
	tests := []struct {
		name string
		off  int64 // into the region
		n    int
		want []span // program addresses
	}{
		{"one byte", 0, 1, []span{{0x1010, 1}}},
		{"within a line", 0, 0x30, []span{{0x1010, 0x30}}},
		{"ends on a boundary", 0, 0x70, []span{{0x1010, 0x30}, {0x1040, 0x40}}},
		{"crosses one boundary", 0, 0x31, []span{{0x1010, 0x30}, {0x1040, 1}}},
		{"200 bytes", 0, 200, []span{{0x1010, 0xb0}, {0x10c0, 0x18}}},
		{"line aligned start", 0x30, 0x80, []span{{0x1040, 0x40}, {0x1080, 0x40}}},
		{"4 KiB", 0x30, 4096, []span{{0x1040, 4096 - 64}, {0x2000, 64}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemory(t)
			f := newRW(base + 8192)
			r := mapIO(t, m, f, base, 8192)
			p := bytes.Repeat([]byte{0xAB}, tc.n)
			if err := m.Write(r.IOVA()+hostmem.IOVA(tc.off), p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.writes, cmp.AllowUnexported(span{})); diff != "" {
				t.Errorf("WriteAt calls (-want +got):\n%s", diff)
			}
			if !bytes.Equal(f.buf[base+tc.off:base+tc.off+int64(tc.n)], p) {
				t.Error("payload not written")
			}
		})
	}
}

// TestIndirect: MapIO regions are indirect, mapped memory and holes not.
func TestIndirect(t *testing.T) {
	m := newMemory(t)
	io := mapIO(t, m, newRW(8192), 0, 8192)
	mem, err := m.Alloc(4096, 4096, "plain")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		iova hostmem.IOVA
		want bool
	}{
		{"MapIO first byte", io.IOVA(), true},
		{"MapIO last byte", io.IOVA() + 8191, true},
		{"Alloc", mem.IOVA(), false},
		{"past the MapIO region", io.IOVA() + 8192 + 1<<30, false},
	} {
		r, got := m.Indirect(tc.iova)
		if got != tc.want || got && r != io {
			t.Errorf("%s: Indirect %v %v, want %v", tc.name, r, got, tc.want)
		}
	}
}

// TestMapIOWriteUnordered: WriteUnordered is one WriteAt whatever the
// lines, and writes the same bytes.
func TestMapIOWriteUnordered(t *testing.T) {
	const base = 0x1010
	for _, n := range []int{1, 0x31, 200, 4096} {
		m := newMemory(t)
		f := newRW(base + 8192)
		r := mapIO(t, m, f, base, 8192)
		p := bytes.Repeat([]byte{0xCD}, n)
		if err := m.WriteUnordered(r.IOVA()+0x30, p); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]span{{0x1040, int64(n)}}, f.writes, cmp.AllowUnexported(span{})); diff != "" {
			t.Errorf("%d bytes: WriteAt calls (-want +got):\n%s", n, diff)
		}
		if !bytes.Equal(f.buf[base+0x30:base+0x30+n], p) {
			t.Errorf("%d bytes: payload not written", n)
		}
	}
}

func TestMapIOErrors(t *testing.T) {
	m := newMemory(t)
	f := newRW(4096)
	r := mapIO(t, m, f, 0, 4096)
	ro, err := m.MapIO(f, nil, 0, 4096, "ro")
	if err != nil {
		t.Fatal(err)
	}
	if got := faultReason(t, m.Write(ro.IOVA(), []byte{1})); got != hostmem.ReasonReadOnly {
		t.Errorf("write to read-only MapIO: %v", got)
	}
	if _, err := m.Add64(ro.IOVA(), 1); faultReason(t, err) != hostmem.ReasonReadOnly {
		t.Errorf("Add64 on read-only MapIO: %v", err)
	}
	if ro.Bytes() != nil || ro.FD() != -1 || ro.Mapped() {
		t.Error("MapIO region exposes a mapping")
	}
	eio := errors.New("EIO: program unmapped its buffer")
	f.err = eio
	err = m.Read(r.IOVA(), make([]byte, 4))
	if faultReason(t, err) != hostmem.ReasonIO || !errors.Is(err, eio) {
		t.Errorf("Read with failing ReaderAt: %v", err)
	}
	if err := m.Store64(r.IOVA(), 1); faultReason(t, err) != hostmem.ReasonIO || !errors.Is(err, eio) {
		t.Errorf("Store64 with failing WriterAt: %v", err)
	}
	for _, tc := range []struct {
		base int64
		size int
	}{{-1, 10}, {0, 0}, {0, -5}, {math.MaxInt64 - 10, 11}} {
		if _, err := m.MapIO(f, f, tc.base, tc.size, "bad"); !errors.Is(err, hostmem.ErrInvalid) {
			t.Errorf("MapIO(base %d, size %d) = %v, want ErrInvalid", tc.base, tc.size, err)
		}
	}
	if _, err := m.MapIO(nil, nil, 0, 10, "none"); !errors.Is(err, hostmem.ErrInvalid) {
		t.Errorf("MapIO without backing = %v", err)
	}
}

// TestMapIOProcMem maps a buffer of this process through /proc/self/mem, as
// the daemon does with a client's descriptor (docs/preload.md "Measured:
// ways to reach a program's memory").
func TestMapIOProcMem(t *testing.T) {
	f, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	testenv.Check(t, err, "no writable /proc/self/mem", "procfs")
	defer f.Close()
	buf := make([]byte, 256)
	va := int64(uintptr(unsafe.Pointer(&buf[0])))
	m := newMemory(t)
	r, err := m.MapIO(f, f, va, len(buf), "procmem")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Write(r.IOVA()+100, []byte("written by the device")); err != nil {
		testenv.Check(t, err, "pwrite to /proc/self/mem refused", "procfs with ptrace access to oneself")
	}
	if got := string(buf[100:121]); got != "written by the device" {
		t.Errorf("program sees %q", got)
	}
	copy(buf[8:], "from the program")
	got := make([]byte, 16)
	if err := m.Read(r.IOVA()+8, got); err != nil || string(got) != "from the program" {
		t.Errorf("device reads %q, %v", got, err)
	}
	runtime.KeepAlive(buf)
}

func TestMap(t *testing.T) {
	fd, err := unix.MemfdCreate("test-client-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 3*4096); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(fd, []byte("client"), 4096+10); err != nil {
		t.Fatal(err)
	}
	m := newMemory(t)
	for _, tc := range []struct {
		name   string
		offset int64
		size   int
	}{
		{"unaligned offset", 100, 4096},
		{"beyond file", 4096, 3 * 4096},
		{"negative offset", -4096, 10},
		{"zero size", 0, 0},
	} {
		if _, err := m.Map(fd, tc.offset, tc.size, tc.name); !errors.Is(err, hostmem.ErrInvalid) {
			t.Errorf("%s: Map = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := m.Map(-1, 0, 10, "bad fd"); err == nil {
		t.Error("Map(-1) succeeded")
	}
	r, err := m.Map(fd, 4096, 8192, "ring")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if err := m.Read(r.IOVA()+10, got); err != nil || string(got) != "client" {
		t.Errorf("Read = %q, %v", got, err)
	}
	if err := m.Store64(r.IOVA()+8192-8, 0x0102030405060708); err != nil {
		t.Fatal(err)
	}
	word := make([]byte, 8)
	if _, err := unix.Pread(fd, word, 3*4096-8); err != nil || binary.LittleEndian.Uint64(word) != 0x0102030405060708 {
		t.Errorf("client sees %x, %v", word, err)
	}
	// Map sealed the client's memfd against shrinking.
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		t.Errorf("seals = %#x, %v; want F_SEAL_SHRINK", seals, err)
	}
	if err := unix.Ftruncate(fd, 0); err == nil {
		t.Error("client could truncate a mapped memfd")
	}
}

// TestSharedThroughProcFD maps the region's memfd a second time, as another
// process would after receiving it with SCM_RIGHTS, and sees writes both ways.
func TestSharedThroughProcFD(t *testing.T) {
	m := newMemory(t)
	a := mustAlloc(t, m, 8192, 0, "shared")
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", a.FD()), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(other)
	if err := m.Store64(a.IOVA()+4096, 42); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint64(other[4096:]); v != 42 {
		t.Errorf("second mapping sees %d, want 42", v)
	}
	copy(other[100:], "other side")
	got := make([]byte, 10)
	if err := m.Read(a.IOVA()+100, got); err != nil || string(got) != "other side" {
		t.Errorf("device reads %q, %v", got, err)
	}
}

// TestCrossProcess passes the region's memfd to a child process, which
// checks what the parent wrote and answers in the same memory.
func TestCrossProcess(t *testing.T) {
	if os.Getenv("HOSTMEM_CHILD") == "1" {
		t.Skip("helper")
	}
	m := newMemory(t)
	a := mustAlloc(t, m, 4096, 0, "xproc")
	if err := m.Write(a.IOVA(), []byte("parent")); err != nil {
		t.Fatal(err)
	}
	dup, err := unix.Dup(a.FD())
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "memfd")
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessChild$", "-test.v")
	cmd.Env = append(os.Environ(), "HOSTMEM_CHILD=1")
	cmd.ExtraFiles = []*os.File{f} // fd 3 in the child
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if v, err := m.Load64(a.IOVA() + 64); err != nil || v != 0xC41D {
		t.Errorf("child's word = %#x, %v\n%s", v, err, out)
	}
}

func TestCrossProcessChild(t *testing.T) {
	if os.Getenv("HOSTMEM_CHILD") != "1" {
		t.Skip("run by TestCrossProcess")
	}
	b, err := unix.Mmap(3, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "parent" {
		t.Fatalf("child sees %q", b[:6])
	}
	binary.LittleEndian.PutUint64(b[64:], 0xC41D)
	unix.Munmap(b)
}

// TestAtomicsConcurrent hammers one word from several goroutines, and runs a
// producer/consumer pair that publishes payloads behind a valid word, as
// the device publishes CQEs.
func TestAtomicsConcurrent(t *testing.T) {
	m := newMemory(t)
	for _, r := range []*hostmem.Region{mustAlloc(t, m, 4096, 0, "mapped"), mapIO(t, m, newRW(4096), 0, 4096)} {
		t.Run(r.Name(), func(t *testing.T) {
			const workers, iters = 4, 2000
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range iters {
						if _, err := m.Add64(r.IOVA()+8, 1); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if v, err := m.Load64(r.IOVA() + 8); err != nil || v != workers*iters {
				t.Errorf("counter = %d, %v; want %d", v, err, workers*iters)
			}
		})
	}

	r := mustAlloc(t, m, 4096, 0, "publish")
	const rounds = 2000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // producer: payload first, then the valid word
		defer wg.Done()
		p := make([]byte, 56)
		for i := uint64(1); i <= rounds; i++ {
			for v := load(t, m, r.IOVA()); v != i-1; v = load(t, m, r.IOVA()) {
				if v == math.MaxUint64 {
					return
				}
				runtime.Gosched()
			}
			for j := range p {
				p[j] = byte(i)
			}
			if err := m.Write(r.IOVA()+8, p); err != nil {
				t.Error(err)
				return
			}
			if err := m.Store64(r.IOVA()+64, i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // consumer: valid word first, then the payload
		defer wg.Done()
		p := make([]byte, 56)
		for i := uint64(1); i <= rounds; i++ {
			for v := load(t, m, r.IOVA()+64); v != i; v = load(t, m, r.IOVA()+64) {
				if v == math.MaxUint64 {
					return
				}
				runtime.Gosched()
			}
			if err := m.Read(r.IOVA()+8, p); err != nil {
				t.Error(err)
				return
			}
			if p[0] != byte(i) || p[55] != byte(i) {
				t.Errorf("round %d: payload %d..%d", i, p[0], p[55])
				return
			}
			if err := m.Store64(r.IOVA(), i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
}

func load(t *testing.T, m *hostmem.Memory, iova hostmem.IOVA) uint64 {
	v, err := m.Load64(iova)
	if err != nil {
		t.Error(err)
		return math.MaxUint64
	}
	return v
}

// TestUnmapWhileAccessing unmaps and remaps regions while other goroutines
// access them: every access either succeeds or faults cleanly, and writes
// through slices of unmapped regions never crash.
func TestUnmapWhileAccessing(t *testing.T) {
	m := newMemory(t)
	// Readers pick among the last few regions, so they often hold one that
	// has just been unmapped, as a reader holding an old table would.
	const keep = 4
	var hist [keep]atomic.Pointer[hostmem.Region]
	for i := range hist {
		hist[i].Store(mustAlloc(t, m, 8192, 0, "victim"))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var faults, oks atomic.Int64
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 4096)
			for k := 0; !stop.Load(); k++ {
				r := hist[k%keep].Load()
				var err error
				switch g {
				case 0:
					err = m.Read(r.IOVA()+100, p)
				case 1:
					err = m.Write(r.IOVA()+2000, p)
				case 2:
					err = m.Store64(r.IOVA()+8, 1)
					if s, serr := m.Slice(r.IOVA(), 8192); serr == nil {
						// Keep using the slice past Unmap: must not fault.
						for i := 0; i < len(s); i += 512 {
							s[i]++
						}
					}
				}
				if err != nil {
					var fe *hostmem.FaultError
					if !errors.As(err, &fe) || fe.Reason != hostmem.ReasonUnmapped {
						t.Errorf("unexpected error %v", err)
						return
					}
					faults.Add(1)
				} else {
					oks.Add(1)
				}
				if k%64 == 0 {
					runtime.Gosched() // let the unmapper run on 2 cores
				}
			}
		}()
	}
	for i := range 300 {
		old := hist[i%keep].Load()
		if err := m.Unmap(old); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched() // readers now hold a dead region
		hist[i%keep].Store(mustAlloc(t, m, 8192, 0, fmt.Sprintf("victim%d", i)))
		if err := m.Unmap(old); !errors.Is(err, hostmem.ErrNotMapped) {
			t.Fatalf("second Unmap = %v", err)
		}
		if err := m.Read(old.IOVA(), make([]byte, 1)); faultReason(t, err) != hostmem.ReasonUnmapped {
			t.Fatalf("Read after Unmap: %v", err)
		}
		if old.Bytes() != nil {
			t.Fatal("Bytes after Unmap is not nil")
		}
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d accesses ok, %d clean faults", oks.Load(), faults.Load())
	if m.NumRegions() != keep {
		t.Errorf("NumRegions = %d, want %d", m.NumRegions(), keep)
	}
}

func TestClose(t *testing.T) {
	m := hostmem.New()
	a := mustAlloc(t, m, 4096, 0, "a")
	_ = a.Bytes()
	b := mustAlloc(t, m, 4096, 0, "b")
	if err := m.Unmap(a); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := m.Read(b.IOVA(), make([]byte, 1)); faultReason(t, err) != hostmem.ReasonUnmapped {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := m.Alloc(4096, 0, "late"); !errors.Is(err, hostmem.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if _, err := m.MapIO(newRW(10), nil, 0, 10, "late"); !errors.Is(err, hostmem.ErrClosed) {
		t.Errorf("MapIO after Close: %v", err)
	}
	if err := m.Unmap(b); !errors.Is(err, hostmem.ErrNotMapped) {
		t.Errorf("Unmap after Close: %v", err)
	}
	if m.NumRegions() != 0 {
		t.Errorf("NumRegions after Close = %d", m.NumRegions())
	}
}

func TestNoAllocs(t *testing.T) {
	m := newMemory(t)
	var regions []*hostmem.Region
	for i := range 64 {
		regions = append(regions, mustAlloc(t, m, 8192, 0, fmt.Sprint(i)))
	}
	r := regions[37]
	p := make([]byte, 4096)
	tests := []struct {
		name string
		f    func()
	}{
		{"Read", func() { _ = m.Read(r.IOVA()+64, p) }},
		{"Write", func() { _ = m.Write(r.IOVA()+64, p) }},
		{"Load64", func() { _, _ = m.Load64(r.IOVA() + 64) }},
		{"Store64", func() { _ = m.Store64(r.IOVA()+64, 1) }},
		{"Add64", func() { _, _ = m.Add64(r.IOVA()+64, 1) }},
		{"Slice", func() { _, _ = m.Slice(r.IOVA()+64, 64) }},
	}
	for _, tc := range tests {
		if n := testing.AllocsPerRun(100, tc.f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tc.name, n)
		}
	}
}

func benchmarkRead(b *testing.B, n int) {
	m := newMemory(b)
	var regions []*hostmem.Region
	for i := range 64 {
		regions = append(regions, mustAlloc(b, m, 64<<10, 0, fmt.Sprint(i)))
	}
	p := make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := regions[i&63]
		i++
		if err := m.Read(r.IOVA()+4096, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead64(b *testing.B) { benchmarkRead(b, 64) }
func BenchmarkRead4K(b *testing.B) { benchmarkRead(b, 4096) }

func BenchmarkLoad64(b *testing.B) {
	m := newMemory(b)
	r := mustAlloc(b, m, 4096, 0, "w")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Load64(r.IOVA() + 8); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadParallel64(b *testing.B) {
	m := newMemory(b)
	r := mustAlloc(b, m, 64<<10, 0, "shared")
	b.SetBytes(64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := make([]byte, 64)
		for pb.Next() {
			if err := m.Read(r.IOVA()+128, p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

package hostmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
	"golang.org/x/sys/unix"
)

// mappingAt returns the /proc/self/maps line covering addr, or "".
func mappingAt(t *testing.T, addr uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	testenv.Check(t, err, "no /proc/self/maps", "procfs")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return sc.Text()
		}
	}
	return ""
}

// TestUnmapReleases checks the memory-safety story against the kernel's view:
// an unsliced region is really munmapped; a sliced one keeps its addresses
// (now private anonymous memory, the memfd gone) until Close.
func TestUnmapReleases(t *testing.T) {
	m := New()
	defer m.Close()

	plain, err := m.Alloc(8192, 0, "plain-region")
	if err != nil {
		t.Fatal(err)
	}
	addr := uintptr(plain.base)
	if l := mappingAt(t, addr); !strings.Contains(l, "memfd:irdma-emu:plain-region") {
		t.Fatalf("before Unmap: mapping %q", l)
	}
	fd := plain.fd
	if err := m.Unmap(plain); err != nil {
		t.Fatal(err)
	}
	if l := mappingAt(t, addr); strings.Contains(l, "plain-region") {
		t.Errorf("after Unmap the memfd is still mapped: %q", l)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err == nil {
		// The number may have been reused by a concurrent test; only a
		// memfd with our name would be a leak.
		if link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); strings.Contains(link, "plain-region") {
			t.Errorf("memfd %d still open after Unmap", fd)
		}
	}

	sliced, err := m.Alloc(8192, 0, "sliced-region")
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Slice(sliced.IOVA(), 8192)
	if err != nil {
		t.Fatal(err)
	}
	s[0] = 1
	addr = uintptr(sliced.base)
	if err := m.Unmap(sliced); err != nil {
		t.Fatal(err)
	}
	l := mappingAt(t, addr)
	if l == "" || strings.Contains(l, "sliced-region") {
		t.Errorf("sliced region after Unmap: mapping %q, want anonymous", l)
	}
	s[8191] = 2 // stale slice: harmless, never faults
	if s[0] != 0 {
		t.Errorf("stale slice still sees the shared page (%d)", s[0])
	}
	m.Close()
	if l := mappingAt(t, addr); l != "" {
		t.Errorf("after Close: %q still mapped", l)
	}
}

// TestBusErrorIsFault maps a memfd that cannot be sealed, truncates it behind
// the mapping's back (as a hostile client could) and checks that accesses
// fault with ReasonBus instead of killing the process with SIGBUS.
func TestBusErrorIsFault(t *testing.T) {
	fd, err := unix.MemfdCreate("unsealable", unix.MFD_CLOEXEC) // no MFD_ALLOW_SEALING
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 8192); err != nil {
		t.Fatal(err)
	}
	m := New()
	defer m.Close()
	r, err := m.Map(fd, 0, 8192, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if !r.guard {
		t.Fatal("unsealable mapping is not guarded")
	}
	if sealed, err := m.Alloc(4096, 0, "sealed"); err != nil || sealed.guard {
		t.Fatalf("Alloc region guard = %v, %v; want unguarded (sealed)", sealed.guard, err)
	}
	if err := m.Store64(r.IOVA()+4096, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatalf("truncate: %v (was the memfd sealed after all?)", err)
	}
	tests := []struct {
		name string
		f    func() error
	}{
		{"Read", func() error { return m.Read(r.IOVA()+4096, make([]byte, 16)) }},
		{"Write", func() error { return m.Write(r.IOVA()+4000, make([]byte, 200)) }},
		{"Load64", func() error { _, err := m.Load64(r.IOVA() + 4096); return err }},
		{"Store64", func() error { return m.Store64(r.IOVA()+4096, 2) }},
		{"Load32", func() error { _, err := m.Load32(r.IOVA() + 4096); return err }},
		{"Store32", func() error { return m.Store32(r.IOVA()+4096, 2) }},
		{"CompareAndSwap64", func() error { _, err := m.CompareAndSwap64(r.IOVA()+4096, 0, 1); return err }},
		{"Add64", func() error { _, err := m.Add64(r.IOVA()+4096, 1); return err }},
	}
	for _, tc := range tests {
		err := tc.f()
		var fe *FaultError
		if !errors.As(err, &fe) || fe.Reason != ReasonBus || !errors.Is(err, ErrFault) {
			t.Errorf("%s on truncated mapping: %v, want ReasonBus", tc.name, err)
		}
	}
	// The goroutine's own panic-on-fault setting is restored.
	if old := setPanicOnFaultForTest(false); old {
		t.Error("SetPanicOnFault left enabled")
	}
}

func TestLastLineSplit(t *testing.T) {
	tests := []struct {
		addr uint64
		n    int
		want int
	}{
		{0, 1, 0},
		{0, 64, 0},
		{0, 65, 64},
		{0x3f, 1, 0},
		{0x3f, 2, 1},
		{0x10, 0x30, 0},
		{0x10, 0x31, 0x30},
		{0x1010, 200, 0xb0},
		{0x40, 4096, 4096 - 64},
	}
	for _, tc := range tests {
		if got := lastLineSplit(tc.addr, tc.n); got != tc.want {
			t.Errorf("lastLineSplit(%#x, %d) = %d, want %d", tc.addr, tc.n, got, tc.want)
		}
	}
}

func setPanicOnFaultForTest(v bool) bool { return debug.SetPanicOnFault(v) }

// TestBorrow: a mapped, sealed region lends a slice of itself that aliases
// the bus and keeps the backing through an Unmap until Return; a MapIO
// region, a guarded one (its memfd could shrink), an empty, unmapped or
// out-of-bounds range lend nothing.
func TestBorrow(t *testing.T) {
	m := New()
	defer m.Close()
	r, err := m.Alloc(8192, 0, "lender")
	if err != nil {
		t.Fatal(err)
	}
	copy(r.data[100:], "lent bytes")
	b, l, ok := m.Borrow(r.IOVA()+100, 10)
	if !ok || l != r || string(b) != "lent bytes" || cap(b) != 10 {
		t.Fatalf("Borrow = %q (cap %d), %p, %v; want the 10 bytes of %p", b, cap(b), l, ok, r)
	}
	if err := m.Write(r.IOVA()+100, []byte("LENT")); err != nil || string(b[:4]) != "LENT" {
		t.Fatalf("the loan does not alias the bus: %q, %v", b, err)
	}
	if err := m.Unmap(r); err != nil {
		t.Fatal(err)
	}
	if err := m.Read(r.IOVA()+100, make([]byte, 4)); err == nil {
		t.Fatal("Read after Unmap succeeded")
	}
	if st := r.state.Load(); st&stateFreed != 0 || string(b) != "LENT bytes" {
		t.Fatalf("backing freed under a loan (state %#x, bytes %q)", st, b)
	}
	l.Return()
	if st := r.state.Load(); st&stateFreed == 0 {
		t.Fatalf("backing kept after the loan's return (state %#x)", st)
	}

	fd, err := unix.MemfdCreate("unsealable", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	guarded, err := m.Map(fd, 0, 4096, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	io, err := m.MapIO(bytes.NewReader(make([]byte, 4096)), nil, 0, 4096, "io")
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Alloc(4096, 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		iova IOVA
		n    int
	}{
		{"guarded", guarded.IOVA(), 16},
		{"MapIO", io.IOVA(), 16},
		{"empty", a.IOVA(), 0},
		{"past the end", a.End() - 8, 16},
		{"unmapped", r.IOVA(), 16},
		{"below the bus", 0, 16},
	} {
		if b, l, ok := m.Borrow(tc.iova, tc.n); ok || b != nil || l != nil {
			t.Errorf("%s: Borrow = %d bytes, %v, %v; want nothing", tc.name, len(b), l, ok)
		}
	}
	for _, x := range []*Region{guarded, io, a} {
		if st := x.state.Load(); st&refMask != 0 {
			t.Errorf("%s: %d references left by refused loans", x.Name(), st&refMask)
		}
	}
}

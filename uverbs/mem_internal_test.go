package uverbs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// TestProgMemAfterExit: a buffer a program registered outside shared
// memory (a MapIO region over its /proc/pid/mem) takes the device's writes
// and reads while the program lives; once it is killed — before its
// session is cleaned up — writes still succeed and reads give zeros, as
// DMA to pinned pages does, instead of faulting (which the data plane
// answers with a remote operational error NAK). An address the live
// program never mapped faults.
func TestProgMemAfterExit(t *testing.T) {
	child := exec.Command("sleep", "60")
	testenv.Check(t, child.Start(), "cannot start sleep to play the program", "Debian package coreutils")
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	pid := child.Process.Pid
	stack := stackPage(t, pid)
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	testenv.Check(t, err, "cannot open the child's memory (ptrace restrictions?)", "kernel.yama.ptrace_scope 0 or 1, or root")
	defer f.Close()
	mem := hostmem.New()
	defer mem.Close()
	var calls atomic.Uint64
	pm := progMem{f: f, calls: &calls}
	r, err := mem.MapIO(pm, pm, stack, hostmem.PageSize, "stack")
	if err != nil {
		t.Fatal(err)
	}
	// The top of the stack page: 64 bytes the child's `sleep` never
	// looks at again once it sleeps (its environment strings).
	at := r.IOVA() + hostmem.IOVA(hostmem.PageSize-64)
	orig := make([]byte, 16)
	if err := mem.Read(at, orig); err != nil {
		t.Fatalf("read from the live program: %v", err)
	}
	if err := mem.Write(at, orig); err != nil {
		t.Fatalf("write to the live program: %v", err)
	}
	hole, err := mem.MapIO(pm, pm, 0x1000, hostmem.PageSize, "unmapped")
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Read(hole.IOVA(), orig[:8]); !errors.Is(err, hostmem.ErrFault) {
		t.Fatalf("read of an address the live program never mapped: %v, want a fault", err)
	}

	_ = child.Process.Kill()
	_ = child.Wait()
	if n, err := f.ReadAt(orig[:8], stack); n != 0 {
		t.Fatalf("/proc/pid/mem of a dead program read %d bytes (%v): the test's premise is wrong", n, err)
	}
	if err := mem.Write(at, []byte("written after the program died")); err != nil {
		t.Errorf("write after the program died: %v, want success (pinned pages)", err)
	}
	got := bytes.Repeat([]byte{0xee}, 16)
	if err := mem.Read(at, got); err != nil || !bytes.Equal(got, make([]byte, 16)) {
		t.Errorf("read after the program died: %x %v, want zeros", got, err)
	}
	if _, err := mem.Add64(at, 1); err != nil {
		t.Errorf("atomic after the program died: %v", err)
	}
}

// stackPage is the address of the last page of pid's stack.
func stackPage(t *testing.T, pid int) int64 {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(l, "[stack]") {
			_, end, _ := strings.Cut(strings.Fields(l)[0], "-")
			e, err := strconv.ParseUint(end, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(e) - hostmem.PageSize
		}
	}
	t.Fatalf("no stack in /proc/%d/maps", pid)
	return 0
}

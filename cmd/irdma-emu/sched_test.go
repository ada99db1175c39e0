package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// schedChild makes the test binary the child of TestApplySched: it sets
// the attributes given as "nice,slice", then makes new threads (locked
// goroutines blocked in a system call each need one) and prints every
// thread's nice value and slice, one "tid nice runtime" line each.
const schedChild = "IRDMA_EMU_TEST_SCHED"

func init() {
	v := os.Getenv(schedChild)
	if v == "" {
		return
	}
	nice, _ := strconv.Atoi(strings.Split(v, ",")[0])
	slice, _ := time.ParseDuration(strings.Split(v, ",")[1])
	if err := applySched(nice, slice); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		os.Exit(4)
	}
	ready := make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			ready <- struct{}{}
			var b [1]byte
			_, _ = unix.Read(p[0], b[:]) // blocks the thread until exit
		}()
	}
	for range 4 {
		<-ready
	}
	time.Sleep(50 * time.Millisecond) // the blocked threads are in read(2)
	tids, err := threads()
	if err != nil {
		os.Exit(5)
	}
	for _, tid := range tids {
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue
		}
		fmt.Println(tid, a.Nice, a.Runtime)
	}
	os.Exit(0)
}

// TestApplySched: every thread of the process gets the nice value and the
// slice — the threads the runtime creates afterwards too (inherited from
// their creator: sched_fork). The child is this binary (schedChild).
func TestApplySched(t *testing.T) {
	for _, tc := range []struct {
		nice  int
		slice time.Duration
	}{
		// Raising the nice value needs no privilege, so these run as
		// any user; each case is a fresh child.
		{5, 100 * time.Microsecond},
		{10, 3 * time.Millisecond},
		{0, 0},
	} {
		t.Run(fmt.Sprintf("nice %d slice %v", tc.nice, tc.slice), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%v", schedChild, tc.nice, tc.slice))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 5 {
				t.Fatalf("%d threads listed, want the runtime's and 4 more:\n%s", len(lines), out)
			}
			// The kernel reports the default slice (base_slice) as
			// runtime when none was asked for; only a custom one is
			// compared.
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) != 3 {
					t.Fatalf("line %q", l)
				}
				if f[1] != strconv.Itoa(tc.nice) {
					t.Errorf("thread %s: nice %s, want %d", f[0], f[1], tc.nice)
				}
				if tc.slice != 0 && f[2] != strconv.FormatInt(tc.slice.Nanoseconds(), 10) {
					t.Errorf("thread %s: slice %s ns, want %d", f[0], f[2], tc.slice.Nanoseconds())
				}
			}
		})
	}
}

// TestCheckSched: --nice and --slice out of range are usage errors.
func TestCheckSched(t *testing.T) {
	for _, tc := range []struct {
		nice  int
		slice time.Duration
		ok    bool
	}{
		{defaultNice, defaultSlice, true},
		{0, 0, true},
		{-20, maxSlice, true},
		{19, minSlice, true},
		{-21, 0, false},
		{20, 0, false},
		{0, 99 * time.Microsecond, false},
		{0, 101 * time.Millisecond, false},
		{0, -time.Millisecond, false},
	} {
		if err := checkSched(tc.nice, tc.slice); (err == nil) != tc.ok {
			t.Errorf("checkSched(%d, %v) = %v, want ok %v", tc.nice, tc.slice, err, tc.ok)
		}
	}
}

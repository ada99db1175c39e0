package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon's CPU scheduling (docs/daemon.md "Scheduling"). The daemon
// is the NIC: on hardware the engines run beside the host's CPUs, here
// they share them with programs that spin on their completion queues, and
// every hop of a message waits for the kernel to give a daemon thread a
// CPU that a spinning program holds (docs/performance.md "Where a
// one-way hop's time goes"). Two attributes of the kernel's fair class
// shorten that wait without a real-time class, whose idle Go threads
// would spin at a priority nothing preempts:
//
//   - a weight above the programs' (nice below 0, which needs
//     CAP_SYS_NICE), so the daemon's short bursts win the CPU when it
//     is contended;
//   - a short requested slice (sched_attr.sched_runtime for SCHED_OTHER,
//     Linux 6.12's EEVDF custom slice: kernel/sched/syscalls.c
//     __setscheduler_params clamps it to 0.1–100 ms), which gives a woken
//     thread an earlier virtual deadline, so it preempts a spinner sooner.
//
// Both are per thread; a thread the Go runtime creates later inherits
// them from the thread that creates it (sched_fork copies the task's
// attributes unless SCHED_RESET_ON_FORK is set), so setting every thread
// the process has once covers the threads to come.

// Defaults of `irdma-emu run --nice` and `--slice`.
const (
	defaultNice  = -10
	defaultSlice = 100 * time.Microsecond
)

// The bounds of --slice: the range the kernel clamps sched_runtime to.
const (
	minSlice = 100 * time.Microsecond
	maxSlice = 100 * time.Millisecond
)

// checkSched validates --nice and --slice.
func checkSched(nice int, slice time.Duration) error {
	if nice < -20 || nice > 19 {
		return fmt.Errorf("--nice %d out of range -20..19", nice)
	}
	if slice != 0 && (slice < minSlice || slice > maxSlice) {
		return fmt.Errorf("--slice %v out of range: 0 (the kernel's default) or %v..%v", slice, minSlice, maxSlice)
	}
	return nil
}

// applySched gives every thread of the process the nice value and the
// requested slice (0: the kernel's default slice). It fails with EPERM
// (errors.Is(err, unix.EPERM)) when the nice value is below the current
// one and the process may not lower it.
func applySched(nice int, slice time.Duration) error {
	attr := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: int32(nice), Runtime: uint64(slice)}
	// Twice: a thread cloned during the first pass from one not yet set
	// is set by the second.
	for range 2 {
		tids, err := threads()
		if err != nil {
			return err
		}
		for _, tid := range tids {
			a := attr
			if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setattr(thread %d, nice %d, slice %v): %w", tid, nice, slice, err)
			}
		}
	}
	return nil
}

// currentNice is the calling thread's nice value.
func currentNice() int {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0
	}
	return int(a.Nice)
}

// threads lists the process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

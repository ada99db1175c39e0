package main

import (
	"errors"
	"time"

	"github.com/irdma-emu/irdma-emu/client"
	"golang.org/x/sys/unix"
)

// The CQ polling the commands that drive traffic themselves (perf,
// pingpong) share: they busy-poll, as perftest and ibv_rc_pingpong do.

// waitCQ polls cq into wc until it returns at least one completion and
// returns how many. Between empty polls it pauses (pollPause). A non-zero
// deadline is checked every 4096 empty polls; past it waitCQ fails with
// "timed out waiting for " + what.
func waitCQ(cq *client.CQ, wc []client.WorkCompletion, deadline time.Time, what string) (int, error) {
	for spins := 0; ; spins++ {
		n, err := cq.Poll(wc)
		if err != nil || n > 0 {
			return n, err
		}
		pollPause(spins)
		if !deadline.IsZero() && spins&0xfff == 0xfff && time.Now().After(deadline) {
			return 0, errors.New("timed out waiting for " + what)
		}
	}
}

// pollPause is what a busy-polling loop does between empty polls: it
// spins a little, then yields the CPU. ibv_rc_pingpong spins outright; here
// the device is a daemon on the same machine, whose workers a pure spin
// starves when cores are few (on two cores, polling both ends of a
// ping-pong took 4 ms per iteration instead of well under one).
func pollPause(spins int) {
	if spins >= 64 {
		yieldCPU()
	}
}

// yieldCPU gives the CPU to another runnable thread (sched_yield): the
// daemon's workers, when they share the CPU with a poller.
func yieldCPU() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

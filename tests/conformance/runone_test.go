package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runOne runs argv (one test of the suite, through `irdma-emu exec`) in a
// process group of its own, killed as a whole at the limit and again as
// soon as the test's process ends: the suite's multi-process tests (the
// RDMA CM tests' passive and active sides, the shared-DM test) fork, and a
// child left behind would hold the daemon's QPs and CM IDs and a port the
// next test binds. The output goes to a file, not a pipe, so that a child
// holding it cannot keep Wait waiting.
func runOne(argv, env []string, limit time.Duration) (out []byte, took time.Duration, err error, timedOut bool) {
	f, err := os.CreateTemp("", "irdma-emu-conformance-*.log")
	if err != nil {
		return nil, 0, err, false
	}
	defer os.Remove(f.Name())
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	err = cmd.Run()
	took = time.Since(start)
	if cmd.Process != nil {
		_ = killGroup(cmd) // children the test left behind
	}
	timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	out, rerr := os.ReadFile(f.Name())
	if err == nil && rerr != nil {
		err = rerr
	}
	return out, took, err, timedOut
}

// runSuiteTest runs one test of the suite alone through `irdma-emu exec`
// (env names the daemon and the build's libraries), within limit, and
// classifies its outcome.
func runSuiteTest(bin string, env []string, runner, dev, id string, limit time.Duration) (verdict, reason string, secs float64, out []byte) {
	out, took, err, timedOut := runOne([]string{bin, "exec", "--", runner, "--dev", dev, "-v", id}, env, limit)
	verdict, reason = classify(string(out), err, timedOut)
	return verdict, reason, took.Seconds(), out
}

// killGroup sends SIGKILL to the process group cmd leads (its pgid is its
// pid: Setpgid). ESRCH, a group already gone, is no error.
func killGroup(cmd *exec.Cmd) error {
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// TestRunOne: a test that outlives its limit is killed with its children;
// a test that leaves a child behind returns when it ends, and the child is
// killed. The children are real processes (sh, sleep), found by pid.
func TestRunOne(t *testing.T) {
	for _, c := range []struct {
		name     string
		script   string // $1 is where the child's pid goes
		limit    time.Duration
		timedOut bool
		out      string
	}{
		{"ends", "echo hi", time.Minute, false, "hi\n"},
		{"child-left-behind", "sleep 600 & echo $! >$1; echo parent done", time.Minute, false, "parent done\n"},
		{"outlives-limit", "sleep 600 & echo $! >$1; echo waiting; sleep 600", time.Second, true, "waiting\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			out, took, err, timedOut := runOne([]string{"sh", "-c", c.script, "sh", pidFile}, nil, c.limit)
			if timedOut != c.timedOut || string(out) != c.out {
				t.Fatalf("timed out %v, output %q (err %v, %v); want %v, %q", timedOut, out, err, took, c.timedOut, c.out)
			}
			if c.timedOut == (err == nil) {
				t.Errorf("err = %v with timed out %v", err, timedOut)
			}
			b, err := os.ReadFile(pidFile)
			if errors.Is(err, os.ErrNotExist) {
				return // no child
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			// SIGKILL was sent before runOne returned; the child is gone
			// (or a zombie, if nothing reaps orphans here) once the kernel
			// has delivered it.
			for i := 0; !gone(pid); i++ {
				if i == 1000 {
					t.Fatalf("child %d still running after runOne returned", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// gone: pid does not exist or is a zombie.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

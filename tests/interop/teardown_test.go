package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// TestTeardown is scenario 3: whatever ends a test midway, the harness
// leaves no QEMU, tcpdump, host-side program, namespace or tap behind.
// The two cases run in parallel, which also shows that two harness
// instances with the same addresses do not collide.
func TestTeardown(t *testing.T) {
	img := guest.ImageT(t)
	t.Run("cancelled during boot", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		v, err := guest.Start(ctx, guest.Config{Image: img, Dir: t.ArtifactDir(), Capture: true, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		w := snapshot(t, v)
		// Cancel once the firmware has handed over to the kernel, before
		// rxe0 exists: the point where a failing test would abandon it.
		waitCtx, waitCancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer waitCancel()
		if _, err := v.WaitMarker(waitCtx, "init start"); err != nil {
			t.Fatal(err)
		}
		cancel(errors.New("simulated failure midway"))
		waitTornDown(t, v, w)
	})
	t.Run("deadline during a guest command", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		v, err := guest.Start(ctx, guest.Config{Image: img, Dir: t.ArtifactDir(), Capture: true, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		w := snapshot(t, v)
		readyCtx, readyCancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer readyCancel()
		if _, err := v.WaitReady(readyCtx); err != nil {
			t.Fatal(err)
		}
		// A host-side peer and a guest command, both still running when the
		// test's context ends.
		peer, err := v.Netns().Start(context.Background(), t.Logf, "sleep", "600")
		if err != nil {
			t.Fatal(err)
		}
		w.pids["host sleep"] = peer.Cmd.Process.Pid
		gp, err := v.Start("sleep 600")
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { cancel(context.DeadlineExceeded) })
		if _, err := gp.Wait(context.Background()); err == nil {
			t.Errorf("guest command returned normally although its guest was torn down")
		}
		waitTornDown(t, v, w)
		// The torn-down VM refuses work instead of hanging.
		runCtx, runCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer runCancel()
		if _, err := v.Run(runCtx, "true"); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run after teardown: %v, want an immediate error", err)
		}
	})
}

// watched is what must be gone after teardown.
type watched struct {
	pids  map[string]int
	netns string
	ino   uint64
	tap   string
}

func snapshot(t *testing.T, v *guest.VM) *watched {
	t.Helper()
	w := &watched{
		pids:  map[string]int{"qemu": v.QEMUPid(), "tcpdump": v.Capture().Pid()},
		netns: v.Netns().Name,
		ino:   v.Netns().Inode(),
		tap:   v.Tap(),
	}
	if w.ino == 0 {
		t.Fatal("namespace inode unknown")
	}
	if _, err := os.Stat(filepath.Join("/run/netns", w.netns)); err != nil {
		t.Fatalf("namespace %s missing while the guest runs: %v", w.netns, err)
	}
	if users := guest.NamespaceInUse(w.ino); len(users) == 0 {
		t.Fatalf("nothing refers to namespace %s while the guest runs", w.netns)
	}
	return w
}

func waitTornDown(t *testing.T, v *guest.VM, w *watched) {
	t.Helper()
	select {
	case <-v.Done():
	case <-time.After(time.Minute):
		t.Fatal("teardown did not finish within a minute of the context's end")
	}
	// Processes are reaped and file descriptors closed synchronously by
	// the teardown; allow the kernel a moment to release the namespace.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := leftovers(w)
		if len(left) == 0 {
			t.Logf("torn down: %v, namespace %s (inode %d) and tap %s gone", w.pids, w.netns, w.ino, w.tap)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after teardown:\n  %s", strings.Join(left, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func leftovers(w *watched) []string {
	var left []string
	for name, pid := range w.pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			left = append(left, fmt.Sprintf("%s (pid %d) still exists: %v", name, pid, err))
		}
	}
	if _, err := os.Stat(filepath.Join("/run/netns", w.netns)); !errors.Is(err, os.ErrNotExist) {
		left = append(left, fmt.Sprintf("/run/netns/%s still exists", w.netns))
	}
	if users := guest.NamespaceInUse(w.ino); len(users) > 0 {
		left = append(left, fmt.Sprintf("namespace inode %d still referenced by %v", w.ino, users))
	}
	if _, err := netlink.LinkByName(w.tap); err == nil {
		left = append(left, fmt.Sprintf("tap %s exists in the root namespace", w.tap))
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), w.netns+"\x00") {
			left = append(left, fmt.Sprintf("pid %s still runs in %s: %q", p.Name(), w.netns, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return left
}

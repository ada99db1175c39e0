package guest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// hostTools are the host programs the harness runs, with the Debian
// package that ships each (tests/run.sh installs them).
var hostTools = []struct{ name, pkg string }{
	{"qemu-system-x86_64", "qemu-system-x86"},
	{"ip", "iproute2"},
	{"apt-get", "apt"},
	{"apt-cache", "apt"},
	{"dpkg-deb", "dpkg"},
	{"depmod", "kmod"},
	{"xz", "xz-utils"},
	{"tcpdump", "tcpdump"},
	{"tshark", "tshark"},
}

// Missing returns why guests cannot run on this machine, or nil.
func Missing() []string {
	var why []string
	if os.Geteuid() != 0 {
		why = append(why, "not root (namespaces, taps and apt-get download need root)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		why = append(why, "/dev/net/tun is missing (no tap devices)")
	}
	for _, t := range hostTools {
		if _, err := lookPathSbin(t.name); err != nil {
			why = append(why, fmt.Sprintf("%s is missing (Debian package %s)", t.name, t.pkg))
		}
	}
	return why
}

// RequireGuest stops the test when guests cannot run here: not root, no
// /dev/net/tun, or a missing host tool — a skip outside CI, a failure
// under CI (internal/testenv), since CI is meant to run these tests. With
// -short the guest tests skip by choice.
func RequireGuest(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("interop guest tests skipped with -short")
	}
	if why := Missing(); len(why) > 0 {
		MissingLoudly(t, "interop guest tests cannot run: "+strings.Join(why, "; "))
	}
}

// MissingLoudly is testenv.Missing with msg also printed in a banner on
// standard error, where a skip outside CI is seen.
func MissingLoudly(t testing.TB, msg string) {
	t.Helper()
	fmt.Fprintf(os.Stderr, "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"+
		"!!! %s\n!!! (CI=%q; tests/run.sh installs the packages)\n"+
		"!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n", msg, os.Getenv("CI"))
	testenv.Missing(t, msg, "tests/run.sh installs the packages")
}

var (
	imageOnce sync.Once
	imageVal  *Image
	imageErr  error
)

// ImageT returns the guest image, built (or found in the cache) once per
// test process, and logs how long that took.
func ImageT(t testing.TB) *Image {
	t.Helper()
	RequireGuest(t)
	imageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		start := time.Now()
		imageVal, imageErr = BuildImage(ctx, BuildOptions{Logf: t.Logf})
		if imageErr == nil {
			how := fmt.Sprintf("built (%d packages downloaded)", imageVal.Downloaded)
			if imageVal.Cached {
				how = "warm cache"
			}
			t.Logf("DURATION image %s: %v", how, time.Since(start).Round(time.Millisecond))
		}
	})
	if imageErr != nil {
		t.Fatalf("building the guest image: %v", imageErr)
	}
	return imageVal
}

// StartT boots a guest for a test: the image from ImageT unless given,
// the run directory under t.ArtifactDir() (kept with go test -artifacts),
// progress in the test log, and teardown at cleanup. On failure the
// console is printed in the test log.
func StartT(t testing.TB, cfg Config) *VM {
	t.Helper()
	if cfg.Image == nil {
		cfg.Image = ImageT(t)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.ArtifactDir()
	}
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	// A bound on the guest's whole life, so that a hung test cannot keep
	// a QEMU running until go test's own timeout kills the process.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	v, err := Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("starting the guest: %v", err)
	}
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Errorf("guest teardown: %v", err)
		}
		cancel()
		if t.Failed() {
			t.Logf("guest console (%s/console.log):\n%s", cfg.Dir, v.Console())
		}
	})
	return v
}

// WaitReadyT waits for rxe0 and the agent, failing the test on error, and
// logs the boot time.
func (v *VM) WaitReadyT(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d, err := v.WaitReady(ctx)
	if err != nil {
		t.Fatalf("guest not ready: %v", err)
	}
	t.Logf("DURATION boot to PORT_ACTIVE: %v", d.Round(time.Millisecond))
	return d
}

// RunT runs a script in the guest and fails the test if it cannot be run
// (not if it exits non-zero: check Result.RC).
func (v *VM) RunT(t testing.TB, timeout time.Duration, script string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := v.Run(ctx, script)
	if err != nil {
		t.Fatalf("guest: %q: %v (output so far: %q)", script, err, r.Output)
	}
	return r
}

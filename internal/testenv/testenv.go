// Package testenv decides what a test does when something it needs from the
// machine is missing: a program (tshark, perftest, gcc), a library (the
// libirdma provider), a kernel facility (/proc/self/mem, /dev/net/tun) or
// root.
//
// Outside CI such a test skips, with the reason and the Debian package that
// brings the dependency. Where the dependency must be there — CI=true, or
// tests/run.sh installed the packages (it sets IRDMA_EMU_DEPS_INSTALLED=1)
// — the test fails instead: a green run must mean that every test it names
// was run, not that a missing package hid it.
//
// Every message starts with [Marker], so tests/run.sh can list the skips of
// this kind and refuse them under CI even if a test skipped by hand.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Marker starts every message of this package: tests/run.sh looks for it.
const Marker = "MISSING DEPENDENCY:"

// EnvInstalled is set to 1 by tests/run.sh once it has installed the
// packages the tests need.
const EnvInstalled = "IRDMA_EMU_DEPS_INSTALLED"

// Required reports whether a missing dependency fails the test rather than
// skipping it: under CI, or after tests/run.sh installed the dependencies.
func Required() bool {
	if v := os.Getenv("CI"); v != "" && v != "false" && v != "0" {
		return true
	}
	return os.Getenv(EnvInstalled) == "1"
}

// TB is the part of testing.TB this package uses, so that its own test can
// watch what it does.
type TB interface {
	Helper()
	Name() string
	Fatal(args ...any)
	Skip(args ...any)
}

var _ TB = testing.TB(nil)

// Missing stops tb because what is missing: a failure where dependencies
// are required, a skip otherwise. how says how to get it (a Debian
// package, a setting).
func Missing(tb TB, what, how string) {
	tb.Helper()
	msg := fmt.Sprintf("%s %s: %s", Marker, tb.Name(), what)
	if how != "" {
		msg += " (" + how + ")"
	}
	if Required() {
		tb.Fatal(msg + "; required here (CI=" + os.Getenv("CI") + ", " + EnvInstalled + "=" + os.Getenv(EnvInstalled) + ")")
		return
	}
	tb.Skip(msg)
}

// Program returns the path of program prog, which Debian package pkg
// ships, or stops tb.
func Program(tb TB, prog, pkg string) string {
	tb.Helper()
	p, err := lookPath(prog)
	if err != nil {
		Missing(tb, prog+" is not installed", "Debian package "+pkg+"; tests/run.sh installs it")
		return ""
	}
	return p
}

// lookPath is exec.LookPath with the sbin directories a non-root PATH may
// lack (ip, tcpdump, nft, depmod live there).
func lookPath(prog string) (string, error) {
	p, err := exec.LookPath(prog)
	if err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		c := filepath.Join(d, prog)
		if fi, e := os.Stat(c); e == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", err
}

// Programs is Program for several programs of one package.
func Programs(tb TB, pkg string, progs ...string) {
	tb.Helper()
	var missing []string
	for _, p := range progs {
		if _, err := lookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		Missing(tb, strings.Join(missing, ", ")+" not installed", "Debian package "+pkg+"; tests/run.sh installs it")
	}
}

// Glob returns the files matching pattern, or stops tb: what names the
// dependency, how says how to get it.
func Glob(tb TB, pattern, what, how string) []string {
	tb.Helper()
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		Missing(tb, what+" ("+pattern+" matches nothing)", how)
	}
	return m
}

// Libirdma returns the path of rdma-core's irdma provider, or stops tb.
func Libirdma(tb TB) string {
	tb.Helper()
	m := Glob(tb, "/usr/lib/*/libibverbs/libirdma-rdmav*.so", "the libirdma provider is not installed", "Debian package ibverbs-providers; tests/run.sh installs it")
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// Check stops tb when err is not nil: what names the dependency err shows
// to be missing (a kernel facility, a permission).
func Check(tb TB, err error, what, how string) {
	tb.Helper()
	if err != nil {
		Missing(tb, fmt.Sprintf("%s: %v", what, err), how)
	}
}

// Root stops tb unless it runs as root (network namespaces, veth, taps,
// AF_PACKET, nftables need it).
func Root(tb TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Missing(tb, "needs root (network namespaces, veth, AF_PACKET, nftables)", "run tests/run.sh as root or with sudo")
	}
}

// debianPackage names the Debian package that ships each program the tests
// run (tests/run.sh installs them).
var debianPackage = map[string]string{
	"gcc": "gcc", "cc": "gcc", "nm": "binutils",
	"tshark": "tshark", "tcpdump": "tcpdump", "nft": "nftables",
	"ip": "iproute2", "ss": "iproute2",
	"setpriv": "util-linux", "sh": "dash", "sleep": "coreutils", "stdbuf": "coreutils",
	"qemu-system-x86_64": "qemu-system-x86", "depmod": "kmod", "xz": "xz-utils",
	"dpkg-deb": "dpkg", "apt-get": "apt", "apt-cache": "apt",
}

// PackageOf returns the Debian package that ships prog: rdma-core's
// ibv_* programs come with ibverbs-utils, perftest's ib_* with perftest.
func PackageOf(prog string) string {
	switch {
	case debianPackage[prog] != "":
		return debianPackage[prog]
	case strings.HasPrefix(prog, "ibv_"):
		return "ibverbs-utils"
	case strings.HasPrefix(prog, "ib_"):
		return "perftest"
	case strings.HasPrefix(prog, "rdma_") || prog == "rping" || prog == "ucmatose" || prog == "udaddy" ||
		prog == "mckey" || prog == "cmtime" || prog == "rstream" || prog == "riostream":
		return "rdmacm-utils"
	}
	return "unknown"
}

// Tool is Program with the package from PackageOf; it returns the path.
func Tool(tb TB, prog string) string {
	tb.Helper()
	return Program(tb, prog, PackageOf(prog))
}

// Tools is Tool for each of progs.
func Tools(tb TB, progs ...string) {
	tb.Helper()
	for _, p := range progs {
		Tool(tb, p)
	}
}

// Package daemontest starts irdma-emu daemons for tests: in-process
// (Start, over internal/daemon) or as the real binary (Binary, Run), with
// short run directories and cleanup that stops whatever is left when the
// test ends. Tests that run the binary call Main from their TestMain so that
// the one build the package makes is removed at exit.
package daemontest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// RunDir returns a fresh run directory, short enough for socket paths
// (sun_path is 108 bytes; t.TempDir's names are long), removed at the end
// of the test.
func RunDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "ird")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Start starts an in-process daemon named name on addr (an IPv4 or IPv6
// address; "" for the daemon's default) in a fresh run directory; mod may
// change the configuration. The daemon is closed when the test ends.
func Start(tb testing.TB, name, addr string, mod func(*daemon.Config)) *daemon.Daemon {
	tb.Helper()
	cfg := daemon.Config{Name: name, RunDir: RunDir(tb)}
	if addr != "" {
		cfg.Addr = netip.MustParseAddr(addr)
	}
	if mod != nil {
		mod(&cfg)
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		tb.Fatalf("daemon %s on %s: %v", name, addr, err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("daemon %s: close: %v", name, err)
		}
	})
	return d
}

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// Binary builds cmd/irdma-emu once per test process and returns its path.
// The binary is built without the race detector even under -race: an
// instrumented daemon runs several times slower, and on a loaded machine
// that is enough for RC peers (ibv_rc_pingpong's 67 ms timeout, 7 retries)
// to give up. The daemon's code runs under -race in-process
// (internal/daemon's tests); set IRDMA_EMU_RACE_BINARY=1 to build the
// binary with -race as well when the tests run with it.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "irdma-emu-bin")
		if buildErr != nil {
			return
		}
		// Tests may run the binary as another user (an unprivileged
		// daemon): the directory must let them in.
		if buildErr = os.Chmod(buildDir, 0o755); buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "irdma-emu")
		args := []string{"build", "-o", buildPath}
		if raceEnabled && os.Getenv("IRDMA_EMU_RACE_BINARY") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/irdma-emu/irdma-emu/cmd/irdma-emu")
		cmd := exec.Command(goTool(), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildPath
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// Main runs the tests and removes the binary Binary built.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}

// RemoveBinary removes the binary Binary built, for a TestMain that does
// more than Main after the tests.
func RemoveBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Proc is an `irdma-emu run` process.
type Proc struct {
	Cmd     *exec.Cmd
	Name    string // device name
	RunDir  string
	Control string // control socket
	Socket  string // attach socket

	out  syncBuffer // stdout and stderr
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

// syncBuffer is a bytes.Buffer safe for the process's writers and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Options are how Run starts a process.
type Options struct {
	// Name is the device name; "" for the default (irdma0).
	Name string
	// RunDir is the run directory; "" for a fresh one.
	RunDir string
	// Prefix runs the binary under another command (ip netns exec NS).
	Prefix []string
	// NoWait returns as soon as the process started, without waiting for
	// its control socket.
	NoWait bool
	// Env is added to the environment.
	Env []string
}

// Run starts `irdma-emu run ARGS…` and, unless o.NoWait, waits until its
// control socket answers. The process is stopped (SIGTERM, then SIGKILL)
// when the test ends if it is still running.
func Run(tb testing.TB, o Options, args ...string) *Proc {
	tb.Helper()
	bin := Binary(tb)
	if o.RunDir == "" {
		o.RunDir = RunDir(tb)
	}
	p := &Proc{Name: o.Name, RunDir: o.RunDir, done: make(chan struct{})}
	if p.Name == "" {
		p.Name = "irdma0"
	}
	full := []string{"run"}
	if o.Name != "" {
		full = append(full, "--name", o.Name)
	}
	full = append(full, args...)
	argv := append(append(append([]string{}, o.Prefix...), bin), full...)
	p.Cmd = exec.Command(argv[0], argv[1:]...)
	p.Cmd.Env = append(append(os.Environ(), "IRDMA_EMU_RUN_DIR="+o.RunDir), o.Env...)
	p.Cmd.Stdout = &p.out
	p.Cmd.Stderr = &p.out
	p.Control = daemon.ControlPath(o.RunDir, p.Name)
	p.Socket = filepath.Join(o.RunDir, p.Name+".sock")
	if err := p.Cmd.Start(); err != nil {
		tb.Fatalf("start %v: %v", argv, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.Cmd.Process.Kill()
			<-p.done
			tb.Errorf("%s did not stop on SIGTERM; output:\n%s", p.Name, p.Output())
		}
	})
	if !o.NoWait {
		p.WaitReady(tb, 30*time.Second)
	}
	return p
}

// WaitReady waits until the control socket answers ping.
func (p *Proc) WaitReady(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if c, err := daemon.Dial(p.Control); err == nil {
			_, err = c.Ping()
			c.Close()
			if err == nil {
				return
			}
		}
		select {
		case <-p.done:
			tb.Fatalf("%s exited before it was ready (%v); output:\n%s", p.Name, p.err, p.Output())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready after %v; output:\n%s", p.Name, timeout, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client dials the process's control socket; closed when the test ends.
func (p *Proc) Client(tb testing.TB) *daemon.Client {
	tb.Helper()
	c, err := daemon.Dial(p.Control)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits up to timeout for the process to exit and returns its exit
// status (-1 if it was killed by a signal), failing the test on timeout.
func (p *Proc) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		tb.Fatalf("%s still running after %v; output:\n%s", p.Name, timeout, p.Output())
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	tb.Fatalf("%s: %v", p.Name, p.err)
	return -1
}

// Output returns what the process wrote so far (stdout and stderr).
func (p *Proc) Output() string { return p.out.String() }

// Tool runs `irdma-emu ARGS…` (a tool such as stats or devinfo) with the
// process's run directory and returns its output and exit status.
func (p *Proc) Tool(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	return RunTool(tb, p.RunDir, nil, args...)
}

// RunTool runs `irdma-emu ARGS…` with IRDMA_EMU_RUN_DIR=runDir (prefixed
// by prefix, e.g. ip netns exec NS) and returns its output and status.
func RunTool(tb testing.TB, runDir string, prefix []string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	argv := append(append(append([]string{}, prefix...), Binary(tb)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "IRDMA_EMU_RUN_DIR="+runDir)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			tb.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		code = ee.ExitCode()
	}
	return o.String(), e.String(), code
}

// SendRoCE sends n RoCEv2 UD SEND-only packets to dst:4791 from an ordinary
// UDP socket bound to src (port chosen by the kernel), unconnected and with
// DF set, so that the kernel writes IPv4 ID 0 and the ICRC the packets carry
// is right on the wire. Each goes to QP dqpn with PSN i and payload bytes.
// It returns the frames as built (what a capture of them shows, up to the
// IP header fields the kernel fills).
func SendRoCE(tb testing.TB, src, dst netip.Addr, dqpn uint32, n int, payload []byte) [][]byte {
	tb.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		tb.Fatalf("send socket on %v: %v", src, err)
	}
	defer conn.Close()
	raw, err := conn.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		if src.Is4() {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
		}
	}); err != nil || serr != nil {
		tb.Fatalf("IP_MTU_DISCOVER: %v %v", err, serr)
	}
	sport := uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 4791))
	var frames [][]byte
	for i := range n {
		ff := wire.FrameFields{SrcIP: src, DstIP: dst, HopLimit: 64, SrcPort: sport}
		pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.UDSendOnly, PKey: 0xffff, DestQP: dqpn, PSN: wire.PSN(i)},
			DETH: wire.DETHFields{QKey: 0x11111111, SrcQP: 2}}
		buf := make([]byte, link.BufferSize)
		fl, err := wire.BuildFrame(buf, &ff, &pf, payload)
		if err != nil {
			tb.Fatalf("build frame: %v", err)
		}
		frame := buf[:fl]
		off := wire.EthernetSize + wire.UDPSize + 20
		if !src.Is4() {
			off = wire.EthernetSize + wire.UDPSize + 40
		}
		if _, err := conn.WriteToUDP(frame[off:], to); err != nil {
			tb.Fatalf("send to %v: %v", to, err)
		}
		frames = append(frames, frame)
	}
	return frames
}

// Package programs_test is issue 6's bar: unmodified rdma-core programs
// from Debian's packages (ibverbs-utils, perftest) run through
// `irdma-emu exec` against `irdma-emu run` daemons on loopback addresses of
// the test's own (internal/testaddr) — each program on its own daemon, or
// both ends of a pair on one — and the tests assert what they print, their
// exit status, and the daemons' resource counters (control socket stats).
//
// The daemon is the real binary (internal/daemon/daemontest, built without
// the race detector). The figures the programs print (pingpong usec/iter,
// perftest bandwidth and latency) and the suite's duration are logged by
// each test and summed up at the end of the run (go test -v).
package programs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	report.print(time.Since(start))
	daemontest.RemoveBinary()
	os.Exit(code)
}

// report collects the figures worth copying into a closing note.
var report summary

type summary struct {
	mu    sync.Mutex
	lines []string
}

func (s *summary) add(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf(format, a...))
}

func (s *summary) print(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 {
		return
	}
	fmt.Printf("\n== tests/programs figures (unmodified rdma-core programs through irdma-emu exec)\n")
	for _, l := range s.lines {
		fmt.Println("  " + l)
	}
	fmt.Printf("== tests/programs: suite duration %v\n\n", d.Round(100*time.Millisecond))
}

// needPrograms stops the test when a Debian program is missing
// (tests/run.sh installs ibverbs-utils, ibverbs-providers and perftest),
// or gcc for the preload: a skip with its reason outside CI, a failure
// that names the program under CI (internal/testenv). The summary lists it
// too.
func needPrograms(t *testing.T, progs ...string) {
	t.Helper()
	for _, p := range append(progs, "gcc") {
		if _, err := exec.LookPath(p); err != nil {
			report.add("NOT RUN %s: %s is not installed (Debian package %s)", t.Name(), p, testenv.PackageOf(p))
			testenv.Tool(t, p)
		}
	}
	if m, _ := filepath.Glob("/usr/lib/*/libibverbs/libirdma-rdmav*.so"); len(m) == 0 {
		report.add("NOT RUN %s: libirdma is not installed (Debian package ibverbs-providers)", t.Name())
		testenv.Libirdma(t)
	}
}

// node is an `irdma-emu run` daemon (device irdma0) on a loopback address
// of its own, in a run directory of its own.
type node struct {
	*daemontest.Proc
	addr netip.Addr
}

// startNodes starts n daemons on n fresh loopback addresses, with the
// extra flags of `irdma-emu run` given.
func startNodes(t *testing.T, n int, flags ...string) []*node {
	t.Helper()
	var out []*node
	for _, a := range testaddr.Loopback(t, n) {
		p := daemontest.Run(t, daemontest.Options{}, append([]string{"--addr", a.String()}, flags...)...)
		nd := &node{Proc: p, addr: a}
		out = append(out, nd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("daemon on %s (%s) log:\n%s", a, p.RunDir, p.Output())
			}
		})
	}
	return out
}

// gid is the node's IPv4-mapped GID as ibv_devinfo and the pingpongs
// print it (GID index 1).
func (n *node) gid() string { return "::ffff:" + n.addr.String() }

// stats reads the daemon's statistics over its control socket.
func (n *node) stats(t *testing.T) daemon.Stats {
	t.Helper()
	c, err := daemon.Dial(n.Control)
	if err != nil {
		t.Fatalf("control socket of %s: %v\n%s", n.addr, err, n.Output())
	}
	defer c.Close()
	s, err := c.Stats(-1)
	if err != nil {
		t.Fatalf("stats of %s: %v", n.addr, err)
	}
	return s
}

// waitResources waits until the node's resources are back to base.
func (n *node) waitResources(t *testing.T, base daemon.Resources, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := n.stats(t).Resources
		if r == base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon on %s: resources %+v, want the baseline %+v back", n.addr, r, base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// prog is an unmodified program run through `irdma-emu exec`.
type prog struct {
	name   string // for messages: the node and the command line
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error // Wait's result, set before done is closed
	start  time.Time
	took   time.Duration
}

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

// run starts `irdma-emu exec --run-dir <n's> -- args…`; the program is
// killed when the test ends if it still runs.
func (n *node) run(t *testing.T, args ...string) *prog {
	t.Helper()
	argv := append([]string{"exec", "--run-dir", n.RunDir, "--"}, args...)
	p := &prog{name: fmt.Sprintf("[%s] %s", n.addr, strings.Join(args, " ")), done: make(chan struct{})}
	p.cmd = exec.Command(daemontest.Binary(t), argv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.took = time.Since(p.start)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exited reports whether the program has exited.
func (p *prog) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// code is the exit status of an exited program, -1 if a signal ended it.
func (p *prog) code() int {
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// wait waits up to within for the program to exit and returns its exit
// status; on timeout it kills the program and fails the test with what it
// and the others printed.
func (p *prog) wait(t *testing.T, within time.Duration, others ...*prog) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not finish within %v\n%s", p.name, within, dump(append([]*prog{p}, others...)...))
	}
	return p.code()
}

// kill sends SIGKILL and waits for the program to go.
func (p *prog) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// dump is what programs printed, for failure messages.
func dump(ps ...*prog) string {
	var b strings.Builder
	for _, p := range ps {
		status := "running"
		if p.exited() {
			status = fmt.Sprintf("exit status %d after %v", p.code(), p.took.Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "--- %s (%s)\nstdout:\n%s\nstderr:\n%s\n", p.name, status, p.stdout.String(), p.stderr.String())
	}
	return b.String()
}

// freePort is a TCP port nobody listens on, for the programs' exchange
// (-p). The servers listen on every address, so the port must be free
// host-wide. Ports come from 61000–64999: above the kernel's ephemeral
// range (32768–60999: the kernel's and uverbs' tests' :0 ports) and clear
// of tests/daemon's counter (20000–40000), so tests running at once do not
// collide.
func freePort(t *testing.T) string {
	t.Helper()
	for range 4000 {
		p := 61000 + int(nextPort.Add(1)%4000)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return strconv.Itoa(p)
	}
	t.Fatal("no free TCP port in 61000-64999")
	return ""
}

var nextPort atomic.Int64

func init() { nextPort.Store(rand.Int64N(4000)) }

// waitListen waits until a TCP socket listens on port (the server is
// ready for its client: connecting to find out would take the one
// connection it accepts), failing if srv exits first.
func waitListen(t *testing.T, port string, srv *prog) {
	t.Helper()
	pn, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", pn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			if listening(f, want) {
				return
			}
		}
		if srv.exited() {
			t.Fatalf("%s exited before it listened\n%s", srv.name, dump(srv))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on port %s after 30s\n%s", srv.name, port, dump(srv))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listening reports whether /proc/net/tcp{,6} has a LISTEN socket whose
// local address ends in port (":%04X").
func listening(file, port string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 3 && strings.HasSuffix(fl[1], port) && fl[3] == "0A" {
			return true
		}
	}
	return false
}

// pair runs a server on srv and a client on cli (connecting to srv's
// address) with the same arguments, waits for both and returns them; the
// caller checks exit statuses and output.
func pair(t *testing.T, srv, cli *node, within time.Duration, args ...string) (s, c *prog) {
	t.Helper()
	port := freePort(t)
	a := append([]string{args[0], "-p", port}, args[1:]...)
	s = srv.run(t, a...)
	waitListen(t, port, s)
	c = cli.run(t, append(a, srv.addr.String())...)
	c.wait(t, within, s)
	s.wait(t, 30*time.Second, c)
	return s, c
}

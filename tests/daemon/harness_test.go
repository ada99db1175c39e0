// Package daemon_test runs the client package, `irdma-emu pingpong` and
// `irdma-emu perf` against real daemons: in-process (internal/daemon.Start)
// for the client API, and `irdma-emu run` processes for the cross-process
// suites, on loopback addresses of the test's own (internal/testaddr: other
// packages' tests bind RoCEv2 on loopback at the same time) and, as root, in two
// network namespaces joined by a veth. Every packet crosses a real UDP
// socket; nothing is mocked.
package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// node is an in-process daemon.
type node struct {
	d      *daemon.Daemon
	runDir string
	addr   netip.Addr
	prov   statser // its uverbs provider
}

// statser is the uverbs provider behind the daemon's default handler.
type statser interface{ Stats() uverbs.Stats }

// testRunDir is a short run directory (socket paths must fit sun_path).
func testRunDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "iet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startNode starts an in-process daemon named name on addr.
func startNode(t testing.TB, name, addr string, mod func(*daemon.Config)) *node {
	t.Helper()
	dir := testRunDir(t)
	n := &node{runDir: dir, addr: netip.MustParseAddr(addr)}
	cfg := daemon.Config{Name: name, Addr: n.addr, RunDir: dir, Handler: func(d *daemon.Daemon) (attach.Handler, error) {
		h, err := daemon.DefaultHandler(d)
		if err == nil {
			n.prov, _ = h.(statser)
		}
		return h, err
	}}
	if mod != nil {
		mod(&cfg)
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("daemon %s on %s: %v", name, addr, err)
	}
	t.Cleanup(func() { d.Close() })
	n.d = d
	return n
}

// twoNodes starts two in-process daemons, ieta and ietb, on two loopback
// addresses of this test's own.
func twoNodes(t testing.TB, mod func(*daemon.Config)) (*node, *node) {
	t.Helper()
	lo := testaddr.Loopback(t, 2)
	return startNode(t, "ieta", lo[0].String(), mod), startNode(t, "ietb", lo[1].String(), mod)
}

func (n *node) socket() string { return n.d.Paths().Socket }

func (n *node) open(t testing.TB) *client.Context {
	t.Helper()
	c, err := client.Open(n.socket())
	if err != nil {
		t.Fatalf("open %s: %v", n.socket(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// gidIndex finds the GID index of the node's address.
func gidIndex(t testing.TB, c *client.Context, a netip.Addr) int {
	t.Helper()
	i, err := c.FindGID(1, client.GID(a.As16()))
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// stats reads a daemon's statistics over its control socket.
func ctlStats(t testing.TB, ctl string) daemon.Stats {
	t.Helper()
	c, err := daemon.Dial(ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Stats(-1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ---- cross-process helpers ----

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the tools' build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// emuBinary builds cmd/irdma-emu once per test run (with the race
// detector when IRDMA_EMU_TEST_RACE=1).
func emuBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "irdma-emu-bin")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "irdma-emu")
		args := []string{"build", "-o", binPath}
		if os.Getenv("IRDMA_EMU_TEST_RACE") == "1" {
			args = append(args, "-race") // the tools under the race detector
		}
		cmd := exec.Command("go", append(args, "github.com/irdma-emu/irdma-emu/cmd/irdma-emu")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is a running irdma-emu process.
type proc struct {
	cmd    *exec.Cmd
	out    *syncBuf
	done   chan struct{}
	err    error
	killed bool
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the binary with args (prefix runs it through another command,
// e.g. ip netns exec NS).
func start(t testing.TB, env []string, prefix []string, args ...string) *proc {
	t.Helper()
	argv := append(append([]string{}, prefix...), emuBinary(t))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &syncBuf{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit, failing the test after d.
func (p *proc) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("%v did not finish in %v; output:\n%s", p.cmd.Args, d, p.out)
		return nil
	}
}

// kill sends SIGKILL to the process group.
func (p *proc) kill() {
	p.killed = true
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// runDaemon starts `irdma-emu run` and waits for its control socket.
func runDaemon(t testing.TB, runDir, name string, prefix []string, args ...string) *proc {
	t.Helper()
	a := append([]string{"run", "--name", name, "--run-dir", runDir, "--log-level", "warn"}, args...)
	p := start(t, nil, prefix, a...)
	ctl := daemon.ControlPath(runDir, name)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := daemon.Dial(ctl); err == nil {
			_, perr := c.Ping()
			c.Close()
			if perr == nil {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("irdma-emu run %s exited: %v\n%s", name, p.err, p.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("irdma-emu run %s: no control socket after 20s\n%s", name, p.out)
	return nil
}

// ctlStatsJSON reads `stats` as generic JSON (for fields by name).
func ctlStatsRaw(t testing.TB, ctl string) map[string]any {
	t.Helper()
	c, err := net.Dial("unix", ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, `{"cmd":"stats"}`)
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

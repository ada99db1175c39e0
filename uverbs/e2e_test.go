package uverbs_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
	"github.com/irdma-emu/irdma-emu/preload"
	"github.com/irdma-emu/irdma-emu/sysfs"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// daemon is a small in-test daemon: device, driver, uverbs provider,
// attach server and the sysfs tree, on the loopback interface.
type daemon struct {
	dev   *device.Device
	d     *driver.Device
	p     *uverbs.Provider
	dp    *lateDataPlane
	srv   *attach.Server
	sock  string
	sysfs string
	lib   string
}

var loIP = netip.MustParseAddr("127.0.0.1")

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	testenv.Program(t, "gcc", "gcc and libc6-dev: the preload is built with them")
	testenv.Libirdma(t)
	lib, err := preload.Path()
	if err != nil {
		t.Fatalf("the preload does not build although gcc is here: %v", err)
	}
	dir := t.TempDir()
	dev, err := device.New(device.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0xfc, 0x00, 0x00, 0x00, 0x01}
	d, err := driver.Open(dev, driver.Config{
		Netdev:     &driver.StaticNetdev{HWAddr: mac, MTUSize: 1500, IPs: []netip.Addr{loIP}},
		CQPTimeout: 5 * time.Second,
	})
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel))
	dp := &lateDataPlane{}
	p, err := uverbs.NewProvider(d, uverbs.Config{Mem: dev.Mem(), Logger: log, DataPlane: dp})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "irdma0.sock")
	srv, err := attach.ListenConfig{Logger: log}.Listen(sock, p)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "sysfs")
	sd := sysfs.DefaultDevice("irdma0", 0, "lo", mac, []netip.Addr{loIP}, true, profile.GEN2())
	if err := sysfs.Write(root, sd); err != nil {
		t.Fatal(err)
	}
	dm := &daemon{dev: dev, d: d, p: p, dp: dp, srv: srv, sock: sock, sysfs: root, lib: lib}
	t.Cleanup(func() {
		srv.Close()
		if n := p.Sessions(); n != 0 {
			t.Errorf("%d sessions still open after the server closed", n)
		}
		if err := d.Close(); err != nil {
			t.Errorf("driver close: %v", err)
		}
		dev.Close()
	})
	return dm
}

// lateDataPlane is the provider's DataPlane before there is an engine
// (most of these tests run none: notifications then ring nothing) and once
// a test set one.
type lateDataPlane struct {
	dp atomic.Pointer[uverbs.DataPlane]
}

func (l *lateDataPlane) set(dp uverbs.DataPlane) { l.dp.Store(&dp) }

func (l *lateDataPlane) Notify(qpid uint32) {
	if dp := l.dp.Load(); dp != nil {
		(*dp).Notify(qpid)
	}
}

func (l *lateDataPlane) Kick() {
	if dp := l.dp.Load(); dp != nil {
		(*dp).Kick()
	}
}

func (l *lateDataPlane) TakeUpPosted(qpid uint32) {
	if dp := l.dp.Load(); dp != nil {
		(*dp).TakeUpPosted(qpid)
	}
}

func (dm *daemon) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		// Unbuffered output survives the kill at the end.
		args = append([]string{"-o0", name}, args...)
		name = sb
	}
	c := exec.CommandContext(ctx, name, args...)
	c.Env = append(os.Environ(), "LD_PRELOAD="+dm.lib, "SYSFS_PATH="+dm.sysfs, attach.EnvSocket+"="+dm.sock)
	return c
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	return testenv.Tool(t, name)
}

// TestE2EDevinfo runs the real ibv_devinfo -v (real libibverbs and
// libirdma, through the preload) against the daemon.
func TestE2EDevinfo(t *testing.T) {
	tool := needTool(t, "ibv_devinfo")
	dm := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	c := dm.cmd(ctx, tool, "-v")
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	t.Logf("ibv_devinfo -v: %v\n%s\nstderr:\n%s", err, out.String(), errb.String())
	if err != nil {
		t.Fatalf("ibv_devinfo failed: %v", err)
	}
	s := out.String()
	at := dm.d.UKAttrs()
	_ = at
	for _, want := range []string{
		"hca_id:\tirdma0",
		"vendor_id:\t\t\t0x8086",
		"vendor_part_id:\t\t\t5522",
		"state:\t\t\tPORT_ACTIVE (4)",
		"link_layer:\t\tEthernet",
		"RoCE v2",
		"::ffff:127.0.0.1",
		"fe80::fc:ff:fe00:1",
		fmt.Sprintf("max_qp_wr:\t\t\t%d", profile.GEN2().Limits.MaxQPWR),
	} {
		if !strings.Contains(s, want) {
			t.Errorf("ibv_devinfo output lacks %q", want)
		}
	}
}

// freePort returns a TCP port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer is an output buffer the test reads while the program runs.
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

// startClient starts a client program, again while it gives up because
// the server does not listen yet (a server prints its banner before it
// listens): "Couldn't connect" (pingpong), "Unable to open file
// descriptor for socket connection" (perftest).
//
// It first waits (up to 20 s) for the server's TCP port — the argument
// after "-p" — to listen: on a loaded machine a client may take longer
// than the retry window below to fail its connect.
func startClient(t *testing.T, ctx context.Context, dm *daemon, tool string, args []string) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-p" {
			waitListen(args[i+1], 20*time.Second)
		}
	}
	for try := 0; ; try++ {
		out := &syncBuffer{}
		c := dm.cmd(ctx, tool, args...)
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			o := out.String()
			if try < 20 && (strings.Contains(o, "Couldn't connect") || strings.Contains(o, "Unable to open file descriptor")) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			done <- err
			return c, out, done
		case <-time.After(500 * time.Millisecond):
			return c, out, done
		}
	}
}

// TestE2ERCPingpongControl runs a real ibv_rc_pingpong server and client
// against the daemon without a data plane and checks the control path:
// contexts, the completion channel (-e), MRs, CQs, QPs moved to RTR and
// RTS — both sides print the remote address only after pp_connect_ctx
// succeeded. (The data path needs emu/engine: engine_e2e_test.go.)
func TestE2ERCPingpongControl(t *testing.T) {
	tool := needTool(t, "ibv_rc_pingpong")
	dm := startDaemon(t)
	for _, extra := range [][]string{nil, {"-e"}} {
		port := fmt.Sprint(freePort(t))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append([]string{"-d", "irdma0", "-g", "1", "-p", port, "-n", "3"}, extra...)
		var sout syncBuffer
		srv := dm.cmd(ctx, tool, args...)
		srv.Stdout, srv.Stderr = &sout, &sout
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		cli, cout, cdone := startClient(t, ctx, dm, tool, append(args, "127.0.0.1"))
		connected := func() bool {
			return strings.Contains(sout.String(), "remote address:") && strings.Contains(cout.String(), "remote address:")
		}
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !connected(); {
			time.Sleep(20 * time.Millisecond)
		}
		// Without a data plane the first send never completes: stop here.
		cli.Process.Kill()
		srv.Process.Kill()
		<-cdone
		srv.Wait()
		cancel()
		t.Logf("%v server:\n%s\nclient:\n%s", extra, sout.String(), cout.String())
		for name, out := range map[string]string{"server": sout.String(), "client": cout.String()} {
			if !strings.Contains(out, "remote address:") {
				t.Errorf("%v: %s did not connect its QP", extra, name)
			}
			if strings.Contains(out, "Couldn't") || strings.Contains(out, "Failed") {
				t.Errorf("%v: %s reported a failure", extra, name)
			}
		}
	}
	// Killed programs: their contexts are gone and the device is clean.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && dm.p.Sessions() != 0; {
		time.Sleep(10 * time.Millisecond)
	}
	if n := dm.p.Sessions(); n != 0 {
		t.Errorf("%d sessions left after the programs were killed", n)
	}
	if n := dm.dev.QPs().Count(); n != 0 {
		t.Errorf("%d QPs left in the device", n)
	}
}

// TestE2ENotifyFD builds testdata/notifyfd.c against the real libibverbs
// and runs it through the preload: the context opened with ibv_open_device
// gets a notification eventfd (NOTIFY), which survives the program closing
// or dup2'ing over its number and goes with ibv_close_device.
func TestE2ENotifyFD(t *testing.T) {
	dm := startDaemon(t)
	libs, _ := filepath.Glob("/usr/lib/*/libibverbs.so.1")
	if len(libs) == 0 {
		testenv.Libirdma(t) // the same Debian package set: skip or fail with its reason
		t.Fatal("libibverbs.so.1 not found")
	}
	bin := filepath.Join(t.TempDir(), "notifyfd")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", bin, "testdata/notifyfd.c", libs[0]).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dm.cmd(ctx, bin)
	c.Env = append(c.Env, "IRDMA_EMU_DEBUG=1")
	out, err := c.CombinedOutput()
	t.Logf("notifyfd: %v\n%s", err, out)
	if err != nil || !strings.Contains("\n"+string(out), "\nok\n") {
		t.Fatalf("notifyfd failed: %v", err)
	}
	// The daemon learns of the close from the socket's end, after the
	// program may already have exited: wait for the session to go first.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && dm.p.Sessions() != 0; {
		time.Sleep(10 * time.Millisecond)
	}
	if st := dm.p.Stats(); st.Sessions != 0 || st.NotifyContexts != 0 {
		t.Fatalf("stats %+v after the program ended", st)
	}
}

// waitListen waits until a TCP socket listens on port or within passes
// (the server is ready: connecting to find out would take the one
// connection it accepts).
func waitListen(port string, within time.Duration) {
	pn, err := strconv.Atoi(port)
	if err != nil {
		return
	}
	want := fmt.Sprintf(":%04X", pn)
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				fl := strings.Fields(l)
				if len(fl) > 3 && strings.HasSuffix(fl[1], want) && fl[3] == "0A" {
					return
				}
			}
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

// lockedBuf collects a command's output while it runs.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunNoFlags runs `irdma-emu run` with no flags in this process: a
// working device irdma0 on 127.0.0.1 (loopback), which devinfo shows
// ACTIVE with the GID of 127.0.0.1; SIGTERM stops it with status 0 and
// its files are gone.
func TestRunNoFlags(t *testing.T) {
	dir := daemontest.RunDir(t)
	t.Setenv(attach.EnvRunDir, dir)
	t.Setenv(attach.EnvDevice, "")
	var out, errb lockedBuf
	code := make(chan int, 1)
	start := func() {
		go func() { code <- dispatch([]string{"run"}, &out, &errb) }()
	}
	start()
	// 127.0.0.1:4791 may be held for a moment by a test of another
	// package running in parallel; the daemon then exits 1 saying so.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := daemon.DialDevice("", "irdma0")
		if err == nil {
			c.Close()
			break
		}
		select {
		case rc := <-code:
			if rc == exitFail && strings.Contains(errb.String(), "address already in use") && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				errb.reset()
				start()
				continue
			}
			t.Fatalf("run exited %d: %s", rc, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			// Show where the daemon is stuck: its goroutines live in this
			// process.
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Fatalf("run not ready after 60s: %s\ngoroutines:\n%s", errb.String(), stacks.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var dout, derr bytes.Buffer
	if rc := dispatch([]string{"devinfo", "-v"}, &dout, &derr); rc != exitOK {
		t.Fatalf("devinfo: %d %s", rc, derr.String())
	}
	for _, want := range []string{"hca_id:\tirdma0", "state:\t\t\tPORT_ACTIVE (4)", "GID[  1]:\t\t::ffff:127.0.0.1, RoCE v2",
		"netdev:\t\t\t\tlo", "transport_mode:"} {
		if !strings.Contains(dout.String(), want) {
			t.Errorf("devinfo lacks %q:\n%s", want, dout.String())
		}
	}
	for _, f := range []string{"irdma0.sock", "irdma0.ctl", "irdma0/sysfs/class/infiniband/irdma0/ports/1/gids/1"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("while running: %v", err)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case rc := <-code:
		if rc != exitOK {
			t.Fatalf("run after SIGTERM: status %d\n%s", rc, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not stop on SIGTERM:\n%s", errb.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in the run directory: %v", names)
	}
	if !strings.Contains(errb.String(), "shut down cleanly") {
		t.Errorf("log:\n%s", errb.String())
	}
}

// TestRunUsage: malformed flags are usage errors (status 2) with a message
// that names the problem, before anything starts.
func TestRunUsage(t *testing.T) {
	dir := daemontest.RunDir(t)
	t.Setenv(attach.EnvRunDir, dir)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--fault", "loss=2"}, "fault"},
		{[]string{"--fault", "loss=0.1,bogus=1"}, "bogus"},
		{[]string{"--transport", "carrier-pigeon"}, "transport"},
		{[]string{"--addr", "not-an-ip"}, "addr"},
		{[]string{"--name", "a/b"}, "name"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--log-format", "xml"}, "log-format"},
		{[]string{"--workers", "-1"}, "workers"},
		{[]string{"--scan-max-backoff", "-1ms"}, "scan-max-backoff"},
		{[]string{"--scan-max-backoff", "5s"}, "scan-max-backoff"},
		{[]string{"--poll-window", "2h"}, "poll-window"},
		{[]string{"--atomics=maybe"}, "atomics"},
		{[]string{"stray"}, "stray"},
	} {
		var out, errb bytes.Buffer
		if rc := dispatch(append([]string{"run"}, tc.args...), &out, &errb); rc != exitUsage || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("run %v: status %d, stderr %q", tc.args, rc, errb.String())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("usage errors left %v", ents)
	}
	var out, errb bytes.Buffer
	if rc := dispatch([]string{"run", "-h"}, &out, &errb); rc != exitOK || !strings.Contains(errb.String(), "-transport") {
		t.Errorf("run -h: %d %q", rc, errb.String())
	}
}

// TestBinarySIGTERM: the real binary stops on SIGTERM with status 0 and
// removes its files; the tools see it while it runs.
func TestBinarySIGTERM(t *testing.T) {
	p := daemontest.Run(t, daemontest.Options{Name: "sig0"}, "--addr", "127.0.11.2", "--log-format", "json")
	out, errs, rc := p.Tool(t, "stats", "--device", "sig0", "--json")
	var s daemon.Stats
	if rc != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Device != "sig0" || s.Port.State != "PORT_ACTIVE" {
		t.Fatalf("stats --json: %d %q %q", rc, out, errs)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rc := p.Wait(t, 20*time.Second); rc != 0 {
		t.Fatalf("status %d after SIGTERM:\n%s", rc, p.Output())
	}
	for _, f := range []string{"sig0.sock", "sig0.ctl", "sig0"} {
		if _, err := os.Stat(filepath.Join(p.RunDir, f)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", f, err)
		}
	}
	// JSON logs: every line is an object.
	for _, line := range strings.Split(strings.TrimSpace(p.Output()), "\n") {
		if strings.HasPrefix(line, "irdma-emu: sig0 up") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %q", line)
		}
	}
	// The tools now say there is nothing to talk to.
	if _, errs, rc := p.Tool(t, "devinfo", "--device", "sig0"); rc != exitFail || !strings.Contains(errs, "sig0") {
		t.Errorf("devinfo of a stopped daemon: %d %q", rc, errs)
	}
}

// TestBinaryNameInUse: a second daemon with the same name refuses to start
// (status 1) and the first keeps running.
func TestBinaryNameInUse(t *testing.T) {
	p := daemontest.Run(t, daemontest.Options{Name: "same0"}, "--addr", "127.0.11.2")
	q := daemontest.Run(t, daemontest.Options{Name: "same0", RunDir: p.RunDir, NoWait: true}, "--addr", "127.0.11.3")
	if rc := q.Wait(t, 20*time.Second); rc != exitFail || !strings.Contains(q.Output(), "in use") {
		t.Fatalf("second daemon: status %d\n%s", rc, q.Output())
	}
	if _, err := p.Client(t).Ping(); err != nil {
		t.Fatalf("first daemon: %v", err)
	}
}

// TestBinaryControlGarbage: garbage on the real daemon's control socket
// gets an error response and disturbs neither the daemon nor a second
// client.
func TestBinaryControlGarbage(t *testing.T) {
	p := daemontest.Run(t, daemontest.Options{Name: "gar0"}, "--addr", "127.0.11.2")
	good := p.Client(t)
	c, err := net.Dial("unix", p.Control)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	junk := []byte("\x00\xff\xfe{\"cmd\":\n}}}}\nrm -rf /\n{\"cmd\":\"link\",\"op\":\"sideways\"}\n")
	if _, err := c.Write(junk); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got []byte
	for strings.Count(string(got), "\n") < 4 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after garbage: %v (got %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		var r daemon.Response
		if json.Unmarshal([]byte(line), &r) != nil || r.OK || r.Error == "" {
			t.Errorf("response to garbage: %q", line)
		}
	}
	if _, err := good.Stats(-1); err != nil {
		t.Fatalf("second client: %v", err)
	}
	if _, err := good.DevInfo(); err != nil {
		t.Fatalf("second client: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatalf("daemon exited:\n%s", p.Output())
	default:
	}
}

// TestBinaryPcap: --pcap records what the port receives, in a file
// `irdma-emu decode` reads with every ICRC good.
func TestBinaryPcap(t *testing.T) {
	for _, name := range []string{"cap.pcap", "cap.pcapng"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			p := daemontest.Run(t, daemontest.Options{Name: "pcap0"}, "--addr", "127.0.11.2", "--pcap", file)
			daemontest.SendRoCE(t, netip.MustParseAddr("127.0.11.9"), netip.MustParseAddr("127.0.11.2"), 0x321, 4, []byte("capture me"))
			c := p.Client(t)
			deadline := time.Now().Add(10 * time.Second)
			for {
				s, err := c.Stats(-1)
				if err == nil && s.Port.Link.RxFrames == 4 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("frames not received: %+v %v", s.Port.Link, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = p.Signal(syscall.SIGTERM)
			if rc := p.Wait(t, 20*time.Second); rc != 0 {
				t.Fatalf("status %d:\n%s", rc, p.Output())
			}
			out, errs, rc := daemontest.RunTool(t, p.RunDir, nil, "decode", file)
			if rc != 0 {
				t.Fatalf("decode: %d\n%s\n%s", rc, out, errs)
			}
			if n := strings.Count(out, "UD Send Only"); n != 4 {
				t.Errorf("decode shows %d UD sends, want 4:\n%s", n, out)
			}
		})
	}
}

// TestBinaryBadFault: the real binary given a bad --fault spec says what is
// wrong and exits 2 without starting anything.
func TestBinaryBadFault(t *testing.T) {
	for _, spec := range []string{"loss=2", "loss=0.1,loss=0.2", "reorder=0.1,reorder_depth=2,reorder_delay=1ms", "garbage"} {
		p := daemontest.Run(t, daemontest.Options{Name: "bad0", NoWait: true}, "--addr", "127.0.11.2", "--fault", spec)
		if rc := p.Wait(t, 20*time.Second); rc != exitUsage || !strings.Contains(p.Output(), "-fault") {
			t.Errorf("--fault %s: status %d\n%s", spec, rc, p.Output())
		}
		if ents, _ := os.ReadDir(p.RunDir); len(ents) != 0 {
			t.Errorf("--fault %s left %v", spec, ents)
		}
	}
}

// TestBinaryFaultFlag: --fault reaches the link, and devinfo and stats say
// so; the control socket changes it.
func TestBinaryFaultFlag(t *testing.T) {
	p := daemontest.Run(t, daemontest.Options{Name: "flt0"}, "--addr", "127.0.11.2", "--fault", "loss=0.03,reorder=0.05,dup=0.01,seed=7")
	out, _, rc := p.Tool(t, "devinfo", "--device", "flt0")
	if rc != 0 || !regexp.MustCompile(`faults:\s+loss=0.03,.*seed=7`).MatchString(out) {
		t.Fatalf("devinfo: %d\n%s", rc, out)
	}
	if r, err := p.Client(t).SetFaults(""); err != nil || r.Faults != "" {
		t.Fatalf("fault clear: %+v %v", r, err)
	}
	out, _, _ = p.Tool(t, "stats", "--device", "flt0")
	if !strings.Contains(out, "faults (none)") {
		t.Errorf("stats after clear:\n%s", out)
	}
}

// TestToolsUsage: the tools' malformed flags are usage errors; a device
// nobody serves is a runtime failure naming it.
func TestToolsUsage(t *testing.T) {
	dir := daemontest.RunDir(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"stats", "--qp", "-7"}, exitUsage},
		{[]string{"stats", "--watch", "1ns"}, exitUsage},
		{[]string{"stats", "extra"}, exitUsage},
		{[]string{"devinfo", "--bogus"}, exitUsage},
		{[]string{"stats", "--run-dir", dir, "--device", "ghost0"}, exitFail},
		{[]string{"devinfo", "--run-dir", dir, "--device", "ghost0"}, exitFail},
		{[]string{"devinfo", "--run-dir", dir, "--device", "../etc"}, exitFail},
	} {
		var out, errb bytes.Buffer
		if rc := dispatch(tc.args, &out, &errb); rc != tc.code {
			t.Errorf("%v: status %d, want %d (%s)", tc.args, rc, tc.code, errb.String())
		}
	}
}

// TestStatsAndDevinfoTools runs the tools against an in-process daemon:
// text and JSON, one QP that does not exist, and --watch with --count.
func TestStatsAndDevinfoTools(t *testing.T) {
	d := daemontest.Start(t, "tool0", "127.0.11.3", nil)
	dir := d.Paths().RunDir
	run := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		rc := dispatch(append(args, "--run-dir", dir, "--device", "tool0"), &out, &errb)
		return out.String() + errb.String(), rc
	}
	out, rc := run("devinfo")
	if rc != 0 || !strings.Contains(out, "hca_id:\ttool0") || strings.Contains(out, "max_qp:") {
		t.Errorf("devinfo:\n%s", out)
	}
	out, rc = run("devinfo", "-v")
	if rc != 0 || !strings.Contains(out, "GID[  1]:\t\t::ffff:127.0.11.3, RoCE v2") || !strings.Contains(out, "icrc_verification:") {
		t.Errorf("devinfo -v:\n%s", out)
	}
	out, rc = run("devinfo", "--json")
	var di daemon.DevInfo
	if rc != 0 || json.Unmarshal([]byte(out), &di) != nil || di.Ports[0].GIDs[1].GID != "::ffff:127.0.11.3" {
		t.Errorf("devinfo --json:\n%s", out)
	}
	out, rc = run("stats")
	for _, want := range []string{"tool0 port 1: PORT_ACTIVE", "resources: 0 sessions, 0 PDs, 0 CQs, 0 QPs (0 with a transport)",
		"ip4InPkts", "retransmissions", "modelled cycles", "cqp-command", "QPs: none"} {
		if rc != 0 || !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}
	if out, rc = run("stats", "--qp", "5"); rc != exitFail || !strings.Contains(out, "QP 5") {
		t.Errorf("stats --qp 5: %d\n%s", rc, out)
	}
	out, rc = run("stats", "--json", "--watch", "20ms", "--count", "3")
	if rc != 0 || strings.Count(strings.TrimSpace(out), "\n") != 2 {
		t.Errorf("stats --watch --count 3:\n%s", out)
	}
	out, rc = run("stats", "--watch", "20ms", "--count", "2")
	if rc != 0 || !strings.Contains(out, "rates: tx 0 pkt/s") {
		t.Errorf("stats --watch text:\n%s", out)
	}
}

// TestDevinfoMatchesIbvDevinfo: what `irdma-emu devinfo -v` prints is what
// the real ibv_devinfo -v prints through the preload and the uverbs layer,
// line for line (the limits that count objects in use aside).
func TestDevinfoMatchesIbvDevinfo(t *testing.T) {
	needTool(t, "ibv_devinfo", "gcc")
	p := daemontest.Run(t, daemontest.Options{Name: "match0"}, "--addr", "127.0.11.2")
	real, errs, rc := p.Tool(t, "exec", "--device", "match0", "--", "ibv_devinfo", "-v", "-d", "match0")
	if rc != 0 {
		t.Fatalf("ibv_devinfo -v: %d\n%s\n%s", rc, real, errs)
	}
	mine, _, rc := p.Tool(t, "devinfo", "-v", "--device", "match0")
	if rc != 0 {
		t.Fatal(mine)
	}
	mine = mine[:strings.Index(mine, "irdma-emu:\n")]
	// Limits irdma reports net of the objects in use (ibv_devinfo's own
	// context holds some while it queries).
	dynamic := regexp.MustCompile(`^\tmax_(pd|qp|cq|mr|mw|ah):`)
	rl, ml := strings.Split(real, "\n"), strings.Split(mine, "\n")
	if len(rl) != len(ml) {
		t.Fatalf("ibv_devinfo -v has %d lines, devinfo -v %d\n--- ibv_devinfo\n%s\n--- devinfo\n%s", len(rl), len(ml), real, mine)
	}
	for i := range rl {
		if rl[i] != ml[i] && !dynamic.MatchString(rl[i]) {
			t.Errorf("line %d:\nibv_devinfo: %q\ndevinfo:     %q", i+1, rl[i], ml[i])
		}
	}
}

// TestRCPingpongBetweenDaemons: two daemons on 127.0.11.2 and 127.0.11.3,
// unmodified ibv_rc_pingpong on each through `irdma-emu exec`: the
// exchange completes, and stats shows the packets and the modelled cycles.
func TestRCPingpongBetweenDaemons(t *testing.T) {
	needTool(t, "ibv_rc_pingpong", "gcc")
	dir := daemontest.RunDir(t)
	capFile := filepath.Join(t.TempDir(), "ppa.pcapng")
	a := daemontest.Run(t, daemontest.Options{Name: "ppa", RunDir: dir}, "--addr", "127.0.11.2", "--pcap", capFile)
	b := daemontest.Run(t, daemontest.Options{Name: "ppb", RunDir: dir}, "--addr", "127.0.11.3")
	// A TCP port of our own: other suites run ibv_rc_pingpong too.
	port, iters := strconv.Itoa(20000+os.Getpid()%20000), "200"
	srv := exec.Command(daemontest.Binary(t), "exec", "--device", "ppa", "--", "ibv_rc_pingpong", "-d", "ppa", "-g", "1", "-p", port, "-n", iters, "-s", "4096")
	srv.Env = append(os.Environ(), attach.EnvRunDir+"="+dir)
	var so lockedBuf
	srv.Stdout, srv.Stderr = &so, &so
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// Per-QP counters live as long as the QP: sample them during the run.
	var qpSeen [2]sync.Map
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	for i, p := range []*daemontest.Proc{a, b} {
		c := p.Client(t)
		sampling.Add(1)
		go func() {
			defer sampling.Done()
			for {
				if s, err := c.Stats(-1); err == nil {
					for _, q := range s.QPs {
						if q.TxPackets > 0 && q.RxPackets > 0 {
							qpSeen[i].Store(q.QPN, q.Type+" "+q.State)
						}
					}
				}
				select {
				case <-stopSampling:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	t.Cleanup(func() { _ = srv.Process.Kill() })
	var cout string
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The server listens on TCP once its QP exists; retry until then.
		out, errs, rc := daemontest.RunTool(t, dir, nil, "exec", "--device", "ppb", "--", "ibv_rc_pingpong", "-d", "ppb", "-g", "1",
			"-p", port, "-n", iters, "-s", "4096", "127.0.0.1")
		if rc == 0 {
			cout = out + errs
			break
		}
		if time.Now().After(deadline) || !strings.Contains(out+errs, "Couldn't connect") {
			dumpStats(t, a, b)
			t.Fatalf("client: %d\n%s%s\nserver:\n%s", rc, out, errs, so.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-srvDone:
		if err != nil {
			dumpStats(t, a, b)
			t.Fatalf("server: %v\n%s", err, so.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not finish:\n%s", so.String())
	}
	if !strings.Contains(cout, iters+" iters in") || !strings.Contains(so.String(), iters+" iters in") {
		t.Fatalf("pingpong output:\nclient:\n%s\nserver:\n%s", cout, so.String())
	}
	t.Logf("client: %s", strings.TrimSpace(cout))
	close(stopSampling)
	sampling.Wait()
	for i, p := range []*daemontest.Proc{a, b} {
		n := 0
		qpSeen[i].Range(func(k, v any) bool {
			t.Logf("%s: QP %v (%v) had traffic", p.Name, k, v)
			n++
			return true
		})
		if n == 0 {
			t.Errorf("%s: no per-QP counters seen during the run", p.Name)
		}
		s, err := p.Client(t).Stats(-1)
		if err != nil {
			t.Fatal(err)
		}
		// 200 iterations of a 4096-byte SEND each way: at least 400
		// packets out and in, and every stage of the pipeline charged.
		if s.Port.TxPackets < 400 || s.Port.RxPackets < 400 || s.Cycles.TotalCycles == 0 {
			t.Errorf("%s: tx %d rx %d cycles %d", p.Name, s.Port.TxPackets, s.Port.RxPackets, s.Cycles.TotalCycles)
		}
		for _, st := range s.Cycles.Stages {
			if st.Count == 0 || st.Cycles == 0 || st.TimeNs == 0 {
				t.Errorf("%s: stage %s not charged: %+v", p.Name, st.Stage, st)
			}
		}
		// The hardware counters the driver gathers (GATHER_STATS on its
		// statistics instance, irdma hw_stats) saw both directions.
		hw := map[string]uint64{}
		for _, c := range s.Port.HW {
			hw[c.Name] = c.Value
		}
		for _, name := range []string{"ip4InPkts", "ip4OutPkts", "RxUDP", "TxUDP"} {
			if hw[name] < 400 {
				t.Errorf("%s: hardware counter %s = %d, want ≥ 400 (%v)", p.Name, name, hw[name], s.Port.HWError)
			}
		}
		out, _, _ := p.Tool(t, "stats", "--device", p.Name)
		t.Logf("%s stats:\n%s", p.Name, out)
	}
	// The capture holds both directions, every ICRC good: what ppa sent
	// (SENDs and ACKs from 127.0.11.2) and what it received.
	_ = a.Signal(syscall.SIGTERM)
	if rc := a.Wait(t, 20*time.Second); rc != 0 {
		t.Fatalf("ppa: status %d\n%s", rc, a.Output())
	}
	out, errs, rc := daemontest.RunTool(t, dir, nil, "decode", capFile)
	if rc != 0 {
		t.Fatalf("decode: %d\n%s", rc, errs)
	}
	from := len(regexp.MustCompile(`127\.0\.11\.2:\d+ →`).FindAllString(out, -1))
	to := len(regexp.MustCompile(`127\.0\.11\.3:\d+ →`).FindAllString(out, -1))
	if from < 400 || to < 400 || !strings.Contains(out, "RC Send Last") || !strings.Contains(out, "RC Acknowledge") {
		t.Errorf("capture: %d lines from ppa, %d from ppb:\n%.2000s", from, to, out)
	}
}

// dumpStats logs the daemons' statistics and logs, to explain a failure.
func dumpStats(t *testing.T, ps ...*daemontest.Proc) {
	t.Helper()
	for _, p := range ps {
		out, _, _ := p.Tool(t, "stats", "--device", p.Name)
		t.Logf("%s stats:\n%s\n%s log:\n%s", p.Name, out, p.Name, p.Output())
	}
}

package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

func dial(t *testing.T, d *daemon.Daemon) *daemon.Client {
	t.Helper()
	c, err := daemon.Dial(d.Paths().Control)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTwoDaemonsOnLoopback starts two daemons on 127.0.10.2 and 127.0.10.3
// in one run directory: each has its own sockets and sysfs tree, and its
// control socket answers with its own device and GIDs.
func TestTwoDaemonsOnLoopback(t *testing.T) {
	dir := daemontest.RunDir(t)
	a := daemontest.Start(t, "emua", "127.0.10.2", func(c *daemon.Config) { c.RunDir = dir })
	b := daemontest.Start(t, "emub", "127.0.10.3", func(c *daemon.Config) { c.RunDir = dir })
	for _, tc := range []struct {
		d    *daemon.Daemon
		name string
		gid  string
		sys  string // the sysfs form of the GID
	}{
		{a, "emua", "::ffff:127.0.10.2", "0000:0000:0000:0000:0000:ffff:7f00:0a02"},
		{b, "emub", "::ffff:127.0.10.3", "0000:0000:0000:0000:0000:ffff:7f00:0a03"},
	} {
		p := tc.d.Paths()
		if p.Socket != filepath.Join(dir, tc.name+".sock") || p.Control != filepath.Join(dir, tc.name+".ctl") ||
			p.Sysfs != filepath.Join(dir, tc.name, "sysfs") {
			t.Errorf("%s paths %+v", tc.name, p)
		}
		c := dial(t, tc.d)
		di, err := c.DevInfo()
		if err != nil {
			t.Fatal(err)
		}
		if di.Name != tc.name || len(di.Ports) != 1 || di.Ports[0].StateName != "PORT_ACTIVE" {
			t.Errorf("%s devinfo: name %q ports %+v", tc.name, di.Name, di.Ports)
		}
		gids := di.Ports[0].GIDs
		if len(gids) != 2 || gids[1].GID != tc.gid || gids[1].Type != "RoCE v2" || !strings.HasPrefix(gids[0].GID, "fe80::") {
			t.Errorf("%s GIDs %+v, want fe80::… and %s", tc.name, gids, tc.gid)
		}
		if di.Emu.Netdev != "lo" || di.Emu.Transport == "" || len(di.Emu.LinkAddrs) != 1 {
			t.Errorf("%s emulator lines %+v", tc.name, di.Emu)
		}
		s, err := c.Stats(-1)
		if err != nil {
			t.Fatal(err)
		}
		if s.Device != tc.name || s.Port.State != "PORT_ACTIVE" || len(s.Port.HW) == 0 || len(s.Cycles.Stages) == 0 {
			t.Errorf("%s stats: %+v", tc.name, s.Port)
		}
		// libibverbs reads GIDs from the sysfs tree: it must say the same.
		got, err := os.ReadFile(filepath.Join(p.Sysfs, "class/infiniband", tc.name, "ports/1/gids/1"))
		if err != nil || strings.TrimSpace(string(got)) != tc.sys {
			t.Errorf("%s sysfs gid 1: %q %v, want %s", tc.name, got, err, tc.sys)
		}
		if st, err := os.ReadFile(filepath.Join(p.Sysfs, "class/infiniband", tc.name, "ports/1/state")); err != nil ||
			!strings.Contains(string(st), "ACTIVE") {
			t.Errorf("%s sysfs state %q %v", tc.name, st, err)
		}
	}
}

// TestNameInUse: a second daemon with a live daemon's name fails with a
// clear error and leaves the first one's files alone.
func TestNameInUse(t *testing.T) {
	dir := daemontest.RunDir(t)
	a := daemontest.Start(t, "dup0", "127.0.10.2", func(c *daemon.Config) { c.RunDir = dir })
	_, err := daemon.Start(daemon.Config{Name: "dup0", Addr: netip.MustParseAddr("127.0.10.3"), RunDir: dir})
	if !errors.Is(err, daemon.ErrInUse) || !strings.Contains(err.Error(), "dup0") {
		t.Fatalf("second daemon: %v, want ErrInUse naming dup0", err)
	}
	if _, err := dial(t, a).Ping(); err != nil {
		t.Fatalf("first daemon after the refused start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dup0", "sysfs", "class")); err != nil {
		t.Fatalf("first daemon's sysfs tree: %v", err)
	}
	// A stale socket (nobody listening) is no obstacle.
	stale := filepath.Join(dir, "stale0.sock")
	l, err := net.Listen("unixpacket", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	daemontest.Start(t, "stale0", "127.0.10.4", func(c *daemon.Config) { c.RunDir = dir })
}

// TestBadConfig: configurations Start refuses before touching anything.
func TestBadConfig(t *testing.T) {
	dir := daemontest.RunDir(t)
	for _, cfg := range []daemon.Config{
		{Name: "a/b"},
		{Name: ".hidden"},
		{Name: strings.Repeat("x", 64)},
		{Name: "ok0", Addr: netip.MustParseAddr("224.0.0.1")},
		{Name: "ok0", Netdev: "no-such-if0"},
		{Name: "ok0", Addr: netip.MustParseAddr("192.0.2.77")}, // not on this host
	} {
		cfg.RunDir = dir
		if d, err := daemon.Start(cfg); err == nil {
			d.Close()
			t.Errorf("Start(%+v) succeeded", cfg)
		} else {
			t.Logf("%+v: %v", cfg, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed starts left %v", ents)
	}
}

// rawConn is a control connection spoken by hand.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func rawDial(t *testing.T, path string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c, bufio.NewReader(c)}
}

func (r *rawConn) ask(t *testing.T, line string) daemon.Response {
	t.Helper()
	_ = r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	b, err := r.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("answer to %q: %v", line, err)
	}
	var resp daemon.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("answer to %q is not JSON: %q", line, b)
	}
	return resp
}

// TestControlProtocol: every malformed request gets an error response on
// a connection that stays usable; a line too long ends only that
// connection; other clients never notice.
func TestControlProtocol(t *testing.T) {
	d := daemontest.Start(t, "ctl0", "127.0.10.2", nil)
	other := dial(t, d)
	bad := rawDial(t, d.Paths().Control)
	for _, line := range []string{
		"garbage", "\x00\x01\x02\xff", "{", `{"cmd":}`, `{"cmd":"ping","bogus":1}`, `{"cmd":"nope"}`,
		`{"id":7}`, `[1,2,3]`, `{"cmd":"ping"} {"cmd":"ping"}`, "stats x", "stats 1 2", "fault", "fault set loss=2",
		"fault set loss=0.1,loss=0.2", "fault frob", "link sideways", "link", `{"cmd":"stats","qp":-5}`,
		`{"cmd":"stats","qp":99999999999}`, "stats 77", "ping extra",
	} {
		resp := bad.ask(t, line)
		if resp.OK || resp.Error == "" {
			t.Errorf("%q: %+v, want an error", line, resp)
		}
		if _, err := other.Ping(); err != nil {
			t.Fatalf("other client after %q: %v", line, err)
		}
	}
	if r := bad.ask(t, `{"id":"x1","cmd":"ping"}`); !r.OK || string(r.ID) != `"x1"` {
		t.Errorf("ping after garbage: %+v", r)
	}
	if r := bad.ask(t, "devinfo"); !r.OK {
		t.Errorf("word form: %+v", r)
	}
	if r := bad.ask(t, `{"id":3,"cmd":"nope"}`); string(r.ID) != "3" {
		t.Errorf("error response lost the id: %+v", r)
	}
	// A line past the limit: an error, then the connection closes.
	long := rawDial(t, d.Paths().Control)
	_ = long.c.SetDeadline(time.Now().Add(10 * time.Second))
	go long.c.Write(bytes.Repeat([]byte("x"), daemon.MaxControlLine+10))
	b, err := long.r.ReadBytes('\n')
	if err != nil || !strings.Contains(string(b), "longer than") {
		t.Errorf("long line: %q %v", b, err)
	}
	if _, err := long.r.ReadBytes('\n'); err == nil {
		t.Errorf("connection still open after an over-long line")
	}
	// Connections that just go away do no harm either.
	for range 20 {
		c, err := net.Dial("unix", d.Paths().Control)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(`{"cmd":"stats"`))
		c.Close()
	}
	if _, err := other.Stats(-1); err != nil {
		t.Fatalf("other client at the end: %v", err)
	}
}

// TestLinkDownUp: `link down` takes the port down everywhere it shows —
// QUERY_PORT, the sysfs tree, the link — and raises PORT_ERR; `link up`
// gives it back with PORT_ACTIVE.
func TestLinkDownUp(t *testing.T) {
	d := daemontest.Start(t, "lnk0", "127.0.10.2", nil)
	c := dial(t, d)
	events, cancel := d.SubscribeEvents()
	defer cancel()
	state := func() string {
		di, err := c.DevInfo()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(d.Paths().Sysfs, "class/infiniband/lnk0/ports/1/state"))
		return di.Ports[0].StateName + "/" + strings.TrimSpace(string(b))
	}
	wait := func(want string) daemon.PortEvent {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Event != want || ev.Cause != "control" {
				t.Fatalf("event %+v, want %s from control", ev, want)
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", want)
		}
		return daemon.PortEvent{}
	}
	if r, err := c.SetLink(false); err != nil || r.State != "PORT_DOWN" {
		t.Fatalf("link down: %+v %v", r, err)
	}
	wait("PORT_ERR")
	if s := state(); !strings.HasPrefix(s, "PORT_DOWN/1: DOWN") {
		t.Errorf("after link down: %s", s)
	}
	if d.Engine().Stats().PortUp {
		t.Errorf("engine still thinks the port is up")
	}
	if r, err := c.SetLink(true); err != nil || r.State != "PORT_ACTIVE" {
		t.Fatalf("link up: %+v %v", r, err)
	}
	wait("PORT_ACTIVE")
	if s := state(); !strings.HasPrefix(s, "PORT_ACTIVE/4: ACTIVE") {
		t.Errorf("after link up: %s", s)
	}
	// The event stream on the control socket saw both.
	var got []string
	c2 := dial(t, d)
	err := c2.Events(0, 5*time.Second, func(ev daemon.PortEvent) bool {
		got = append(got, ev.Event)
		return len(got) < 2
	})
	if err != nil || strings.Join(got, ",") != "PORT_ERR,PORT_ACTIVE" {
		t.Errorf("event stream: %v %v", got, err)
	}
}

// TestFaultsAtRunTime: `fault set` and `fault clear` change what the link
// injects, and stats and devinfo say so.
func TestFaultsAtRunTime(t *testing.T) {
	d := daemontest.Start(t, "flt0", "127.0.10.2", nil)
	c := dial(t, d)
	if _, err := c.SetFaults("loss=2"); err == nil {
		t.Fatalf("fault set loss=2 accepted")
	}
	want, _ := link.ParseFaults("loss=0.03,reorder=0.05,dup=0.01,seed=7")
	r, err := c.SetFaults("loss=0.03,reorder=0.05,dup=0.01,seed=7")
	if err != nil || r.Faults != want.String() {
		t.Fatalf("fault set: %+v %v", r, err)
	}
	s, err := c.Stats(-1)
	if err != nil || s.Port.Link.Faults.Spec != r.Faults {
		t.Fatalf("stats after fault set: %+v %v", s.Port.Link.Faults, err)
	}
	di, _ := c.DevInfo()
	if di.Emu.Faults != r.Faults {
		t.Errorf("devinfo faults %q", di.Emu.Faults)
	}
	// The port still works: frames still arrive after the change.
	daemontest.SendRoCE(t, netip.MustParseAddr("127.0.10.9"), netip.MustParseAddr("127.0.10.2"), 0x77, 3, []byte("hello"))
	waitFor(t, func() bool { return d.Engine().Stats().Link.RxFrames >= 3 }, "3 frames received after fault set")
	if r, err := c.SetFaults(""); err != nil || r.Faults != "" {
		t.Fatalf("fault clear: %+v %v", r, err)
	}
	if d.Faults().Enabled() {
		t.Errorf("faults still set: %v", d.Faults())
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCaptureAndDrops: packets from the network reach the port: a capture
// records them as received (decodable, ICRC good), and the statistics count
// them, dropped as addressed to a QP that does not exist.
func TestCaptureAndDrops(t *testing.T) {
	var buf bytes.Buffer
	w := &lockedWriter{b: &buf}
	d := daemontest.Start(t, "cap0", "127.0.10.2", func(c *daemon.Config) { c.PcapWriter = w })
	sent := daemontest.SendRoCE(t, netip.MustParseAddr("127.0.10.9"), netip.MustParseAddr("127.0.10.2"), 0x123, 5, []byte("payload"))
	c := dial(t, d)
	waitFor(t, func() bool {
		s, err := c.Stats(-1)
		return err == nil && s.Port.Drops["unknown-qpn"] == 5
	}, "5 unknown-QPN drops")
	s, _ := c.Stats(-1)
	if s.Port.Link.RxFrames != 5 || s.Cycles.Stages[5].Stage != "receive" || s.Cycles.Stages[5].Count != 5 ||
		s.Port.ICRC.LinkVerified+s.Port.ICRC.Verified != 5 {
		t.Errorf("stats after 5 packets: link %+v receive stage %+v icrc %+v", s.Port.Link, s.Cycles.Stages[5], s.Port.ICRC)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(w.bytes()))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		var f wire.Frame
		if err := wire.ParseFrame(data, &f); err != nil {
			t.Fatalf("captured frame %d: %v", n, err)
		}
		if err := f.VerifyICRC(); err != nil {
			t.Errorf("captured frame %d: ICRC: %v", n, err)
		}
		if f.Packet.BTH.DestQP() != 0x123 || int(f.Packet.BTH.PSN()) != n {
			t.Errorf("captured frame %d: %v", n, gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default))
		}
		n++
	}
	if n != len(sent) {
		t.Errorf("%d frames captured, want %d", n, len(sent))
	}
}

// lockedWriter is written only under the capture's lock, and read after
// the daemon has closed.
type lockedWriter struct{ b *bytes.Buffer }

func (w *lockedWriter) Write(p []byte) (int, error) { return w.b.Write(p) }
func (w *lockedWriter) bytes() []byte               { return w.b.Bytes() }

// TestShutdownRemovesFiles: Close removes the sockets and the tree, and the
// name is free again at once.
func TestShutdownRemovesFiles(t *testing.T) {
	dir := daemontest.RunDir(t)
	cfg := daemon.Config{Name: "bye0", Addr: netip.MustParseAddr("127.0.10.2"), RunDir: dir}
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("left behind: %v", names)
	}
	d2, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	d2.Close()
}

// TestDefaultRunDir: without a run directory the daemon uses
// $IRDMA_EMU_RUN_DIR, and the tools find it there.
func TestDefaultRunDir(t *testing.T) {
	dir := daemontest.RunDir(t)
	t.Setenv(attach.EnvRunDir, dir)
	d, err := daemon.Start(daemon.Config{Name: "env0", Addr: netip.MustParseAddr("127.0.10.2")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Paths().Socket != filepath.Join(dir, "env0.sock") {
		t.Errorf("socket %s", d.Paths().Socket)
	}
	c, err := daemon.DialDevice("", "env0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p, err := c.Ping(); err != nil || p.Device != "env0" || p.PID != os.Getpid() {
		t.Errorf("ping %+v %v", p, err)
	}
	if _, err := daemon.DialDevice("", "nobody0"); err == nil || !strings.Contains(err.Error(), "nobody0") {
		t.Errorf("dial of a device nobody serves: %v", err)
	}
}

// rcEnd is a client context with a PD, a registered buffer, a CQ and an RC
// QP in INIT on an in-process daemon.
type rcEnd struct {
	ctx  *client.Context
	buf  []byte
	mr   *client.MR
	cq   *client.CQ
	qp   *client.QP
	gidx int
	gid  client.GID
}

func newRCEnd(t *testing.T, d *daemon.Daemon, addr string) *rcEnd {
	t.Helper()
	e := &rcEnd{}
	var err error
	if e.ctx, err = client.Open(d.Paths().Socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ctx.Close() })
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if e.buf, err = e.ctx.AllocBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = pd.RegMR(e.buf, client.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = e.ctx.CreateCQ(64, nil, 0); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = pd.CreateQP(client.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: client.QPTypeRC,
		Cap: client.QPCapabilities{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	if e.gidx, err = e.ctx.FindGID(1, client.GID(netip.MustParseAddr(addr).As16())); err != nil {
		t.Fatal(err)
	}
	e.gid, _ = e.ctx.QueryGID(1, e.gidx)
	if err := e.qp.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, AccessFlags: client.AccessLocalWrite},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	return e
}

// connect moves e to RTR and RTS towards peer (timeout 14, retries 7, as
// ibv_rc_pingpong asks).
func (e *rcEnd) connect(t *testing.T, peer *rcEnd) {
	t.Helper()
	a := &client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AH: client.AHAttr{IsGlobal: true, DGID: peer.gid, SGIDIndex: uint8(e.gidx), HopLimit: 1, PortNum: 1}}
	if err := e.qp.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
		client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		t.Fatalf("RTR: %v", err)
	}
	a = &client.QPAttr{State: client.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 1, MaxRdAtomic: 1}
	if err := e.qp.Modify(a, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
		client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
		t.Fatalf("RTS: %v", err)
	}
}

// poll waits for n completions on e's CQ.
func (e *rcEnd) poll(t *testing.T, n int, within time.Duration) []client.WorkCompletion {
	t.Helper()
	wcs := make([]client.WorkCompletion, 16)
	var got []client.WorkCompletion
	deadline := time.Now().Add(within)
	for len(got) < n {
		k, err := e.cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, wcs[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v: %+v", len(got), n, within, got)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

// TestShutdownFlushes: a program's QP with receives outstanding when the
// daemon shuts down gets a flush completion for each (WR_FLUSH_ERR), in
// its own CQ ring, and the device-fatal event on its async event file —
// whether the QP reached RTS or only RTR (a server waiting for its first
// message): the shutdown moves every QP to the error state, not only the
// ones irdma_destroy_qp would.
func TestShutdownFlushes(t *testing.T) {
	t.Run("RTS", func(t *testing.T) { shutdownFlushes(t, "fl0", "127.0.10.2", true) })
	t.Run("RTR", func(t *testing.T) { shutdownFlushes(t, "fl1", "127.0.10.40", false) })
}

func shutdownFlushes(t *testing.T, name, addr string, rts bool) {
	d := daemontest.Start(t, name, addr, nil)
	e := newRCEnd(t, d, addr)
	if rts {
		e.connect(t, e) // connected to itself: receives wait for nobody
	} else {
		a := &client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: e.qp.QPN(), RQPSN: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: client.AHAttr{IsGlobal: true, DGID: e.gid, SGIDIndex: uint8(e.gidx), HopLimit: 1, PortNum: 1}}
		if err := e.qp.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
			client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
			t.Fatalf("RTR: %v", err)
		}
	}
	const n = 3
	for i := range n {
		if _, err := e.qp.PostRecv([]client.RecvWR{{WrID: uint64(100 + i), SGList: []client.SGE{e.mr.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got := e.poll(t, n, 5*time.Second)
	for i, wc := range got {
		if wc.WrID != uint64(100+i) || wc.Status != client.WCWRFlushErr {
			t.Errorf("completion %d: %+v, want WR_FLUSH_ERR for wr_id %d", i, wc, 100+i)
		}
	}
	ev, err := e.ctx.GetAsyncEvent(2 * time.Second)
	if err != nil || ev.Type != client.EventType(daemon.EventDeviceFatal) {
		t.Errorf("async event %+v %v, want DEVICE_FATAL", ev, err)
	}
}

// TestFaultsUnderTraffic changes the faults of a port again and again while
// RC traffic flows through it: every message still arrives intact (the
// transport retransmits what the faults and the link reopening lose), and
// the counters show the faults and the retransmissions.
func TestFaultsUnderTraffic(t *testing.T) {
	da := daemontest.Start(t, "fta", "127.0.10.5", nil)
	db := daemontest.Start(t, "ftb", "127.0.10.6", nil)
	a, b := newRCEnd(t, da, "127.0.10.5"), newRCEnd(t, db, "127.0.10.6")
	a.connect(t, b)
	b.connect(t, a)
	ca := dial(t, da)
	specs := []string{"loss=0.05,seed=1", "reorder=0.1,dup=0.05,seed=2", "", "loss=0.1,corrupt=0.02,seed=3", ""}
	const msgs, size = 60, 3000
	for i := range msgs {
		if i%12 == 0 {
			if _, err := ca.SetFaults(specs[(i/12)%len(specs)]); err != nil {
				t.Fatalf("fault set: %v", err)
			}
		}
		for j := range size {
			a.buf[j] = byte(i + j)
		}
		if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: uint64(i), SGList: []client.SGE{b.mr.SGE(0, size)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.qp.PostSend([]client.SendWR{{WrID: uint64(i), Opcode: client.WRSend, Flags: client.SendSignaled,
			SGList: []client.SGE{a.mr.SGE(0, size)}}}); err != nil {
			t.Fatal(err)
		}
		for _, e := range []*rcEnd{a, b} {
			if wc := e.poll(t, 1, 20*time.Second)[0]; wc.Status != client.WCSuccess || wc.WrID != uint64(i) {
				t.Fatalf("message %d: %+v", i, wc)
			}
		}
		if !bytes.Equal(a.buf[:size], b.buf[:size]) {
			t.Fatalf("message %d arrived damaged", i)
		}
	}
	s, err := ca.Stats(-1)
	if err != nil {
		t.Fatal(err)
	}
	l := s.Port.Link
	t.Logf("A: tx %d, retransmissions %d, timeouts %d; link faults %+v, reopens %d, tx drops %v",
		s.Port.TxPackets, s.Port.Retransmissions, s.Port.Timeouts, l.Faults, l.Reopens, l.TxDrops)
	if l.Reopens != 5 || l.Faults.Lost == 0 || s.Port.Retransmissions == 0 || l.Faults.Spec != "" {
		t.Errorf("stats: reopens %d, lost %d, retransmissions %d, spec %q", l.Reopens, l.Faults.Lost, s.Port.Retransmissions, l.Faults.Spec)
	}
}

// TestStatsResources: the control socket's stats count what a program
// holds — its session, PD, CQ, QP, MR, its rings' bus regions, its QP's
// transport once it had traffic — and give the baseline back when the
// program's connection closes.
func TestStatsResources(t *testing.T) {
	addr := testaddr.Loopback(t, 1)[0].String()
	d := daemontest.Start(t, "rs0", addr, nil)
	c := dial(t, d)
	stats := func() daemon.Resources {
		t.Helper()
		s, err := c.Stats(-1)
		if err != nil {
			t.Fatal(err)
		}
		return s.Resources
	}
	base := stats()
	if base.Sessions != 0 || base.PDs != 0 || base.CQs != 0 || base.QPs != 0 || base.MRs != 0 || base.AHs != 0 ||
		base.Transports != 0 || base.BusRegions == 0 {
		t.Fatalf("an idle daemon: %+v", base)
	}
	e := newRCEnd(t, d, addr)
	e.connect(t, e)
	if _, err := e.qp.PostRecv([]client.RecvWR{{WrID: 1, SGList: []client.SGE{e.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.qp.PostSend([]client.SendWR{{WrID: 2, Opcode: client.WRSend, Flags: client.SendSignaled,
		SGList: []client.SGE{e.mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range e.poll(t, 2, 10*time.Second) {
		if wc.Status != client.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
	}
	r := stats()
	if r.Sessions != 1 || r.PDs < 1 || r.CQs != 1 || r.QPs != 1 || r.MRs != 1 || r.Transports != 1 || r.BusRegions <= base.BusRegions {
		t.Errorf("with a program's RC QP: %+v (idle %+v)", r, base)
	}
	if err := e.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return stats() == base }, "the resources to return to "+fmt.Sprintf("%+v", base))
}

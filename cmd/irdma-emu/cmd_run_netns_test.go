package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// portState polls a daemon's devinfo until its port is in state want.
func portState(t *testing.T, c *daemon.Client, want string, within time.Duration) daemon.DevInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		di, err := c.DevInfo()
		if err == nil && di.Ports[0].StateName == want {
			return di
		}
		if time.Now().After(deadline) {
			t.Fatalf("port not %s after %v: %+v %v", want, within, di.Ports, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nextEvent waits for the next port event on an event stream.
func nextEvent(t *testing.T, ch <-chan daemon.PortEvent, want string) daemon.PortEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("event stream ended waiting for %s", want)
		}
		if ev.Event != want || ev.Cause != "netlink" {
			t.Fatalf("event %+v, want %s from netlink", ev, want)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event", want)
	}
	return daemon.PortEvent{}
}

// streamEvents follows a daemon's port events on its control socket.
func streamEvents(t *testing.T, p *daemontest.Proc) <-chan daemon.PortEvent {
	t.Helper()
	c := p.Client(t)
	ch := make(chan daemon.PortEvent, 16)
	go func() {
		defer close(ch)
		_ = c.Events(^uint64(0)>>1, 0, func(ev daemon.PortEvent) bool {
			ch <- ev
			return true
		})
	}()
	// The subscription is in place once a request behind it is answered.
	time.Sleep(100 * time.Millisecond)
	return ch
}

// TestNamespaceVeth runs one daemon in each of two network namespaces
// joined by a veth pair, each on its end (--netdev): both ports come up
// ACTIVE with the veth addresses as GIDs; taking one end down makes both
// ports DOWN (the peer loses its carrier) with PORT_ERR events, and
// bringing it up makes them ACTIVE again; unmodified ibv_rc_pingpong then
// runs between the namespaces.
func TestNamespaceVeth(t *testing.T) {
	nstest.NeedRoot(t)
	na, nb := nstest.New(t), nstest.New(t)
	nstest.Veth(t, na, "iea", nb, "ieb", 1500)
	na.AddAddr(t, "iea", "10.231.7.1/24")
	nb.AddAddr(t, "ieb", "10.231.7.2/24")
	dir := daemontest.RunDir(t)
	in := func(ns *nstest.NS) []string { return []string{"ip", "netns", "exec", ns.Name} }
	pa := daemontest.Run(t, daemontest.Options{Name: "nsa", RunDir: dir, Prefix: in(na)}, "--netdev", "iea")
	pb := daemontest.Run(t, daemontest.Options{Name: "nsb", RunDir: dir, Prefix: in(nb)}, "--netdev", "ieb")
	ca, cb := pa.Client(t), pb.Client(t)
	for _, x := range []struct {
		c   *daemon.Client
		gid string
	}{{ca, "::ffff:10.231.7.1"}, {cb, "::ffff:10.231.7.2"}} {
		di := portState(t, x.c, "PORT_ACTIVE", 10*time.Second)
		gids := di.Ports[0].GIDs
		if len(gids) < 2 || gids[1].GID != x.gid || !strings.HasPrefix(gids[0].GID, "fe80::") {
			t.Errorf("%s GIDs %+v, want fe80::… then %s", di.Name, gids, x.gid)
		}
		if di.Ports[0].ActiveMTU != 3 { // 1500 → IB 1024
			t.Errorf("%s active MTU %d, want 3 (1024)", di.Name, di.Ports[0].ActiveMTU)
		}
	}
	evA, evB := streamEvents(t, pa), streamEvents(t, pb)

	na.SetUp(t, "iea", false)
	nextEvent(t, evA, "PORT_ERR")
	nextEvent(t, evB, "PORT_ERR")
	portState(t, ca, "PORT_DOWN", 5*time.Second)
	portState(t, cb, "PORT_DOWN", 5*time.Second)
	out, _, _ := daemontest.RunTool(t, dir, nil, "devinfo", "--device", "nsa")
	if !strings.Contains(out, "state:\t\t\tPORT_DOWN (1)") {
		t.Errorf("devinfo while down:\n%s", out)
	}

	na.SetUp(t, "iea", true)
	na.WaitRunning(t, "iea")
	nextEvent(t, evA, "PORT_ACTIVE")
	nextEvent(t, evB, "PORT_ACTIVE")
	portState(t, ca, "PORT_ACTIVE", 5*time.Second)
	portState(t, cb, "PORT_ACTIVE", 5*time.Second)

	testenv.Tool(t, "ibv_rc_pingpong")
	port := strconv.Itoa(20000 + (os.Getpid()+7)%20000)
	srv := exec.Command("ip", "netns", "exec", na.Name, daemontest.Binary(t), "exec", "--device", "nsa", "--",
		"ibv_rc_pingpong", "-d", "nsa", "-g", "1", "-p", port, "-n", "100")
	srv.Env = append(os.Environ(), attach.EnvRunDir+"="+dir)
	var so lockedBuf
	srv.Stdout, srv.Stderr = &so, &so
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	t.Cleanup(func() { _ = srv.Process.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, errs, rc := daemontest.RunTool(t, dir, []string{"ip", "netns", "exec", nb.Name}, "exec", "--device", "nsb", "--",
			"ibv_rc_pingpong", "-d", "nsb", "-g", "1", "-p", port, "-n", "100", "10.231.7.1")
		if rc == 0 {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(out+errs, "Couldn't connect") {
			t.Fatalf("client: %d\n%s%s\nserver:\n%s", rc, out, errs, so.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server: %v\n%s", err, so.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not finish:\n%s", so.String())
	}
	s, err := ca.Stats(-1)
	if err != nil || s.Port.TxPackets < 200 || s.Port.RxPackets < 200 {
		t.Errorf("stats after pingpong across the veth: %+v %v", s.Port.Counters, err)
	}
}

// TestRunUnprivileged runs the daemon as nobody, without capabilities: it
// still starts (run directory in /tmp, not /run/irdma-emu), picks UDP
// receiving for want of CAP_NET_RAW, and devinfo (also as nobody, with no
// run directory given) finds it and says so.
func TestRunUnprivileged(t *testing.T) {
	nstest.NeedRoot(t)
	testenv.Tool(t, "setpriv")
	nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"}
	env := []string{"IRDMA_EMU_RUN_DIR=", "XDG_RUNTIME_DIR=", "TMPDIR=/tmp"}
	dir := "/tmp/irdma-emu-65534"
	p := daemontest.Run(t, daemontest.Options{Name: "unpriv0", Prefix: nobody, NoWait: true, Env: env}, "--addr", "127.0.11.8")
	t.Cleanup(func() {
		os.RemoveAll(filepath.Join(dir, "unpriv0"))
		os.Remove(dir) // only if nothing else lives there
	})
	p.Control = filepath.Join(dir, "unpriv0.ctl")
	p.WaitReady(t, 30*time.Second)
	cmd := exec.Command(nobody[0], append(nobody[1:], daemontest.Binary(t), "devinfo", "--device", "unpriv0")...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("devinfo as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"PORT_ACTIVE", "transport_mode:\t\t\tsend=udp,recv=udp", "unverifiable"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("devinfo lacks %q:\n%s", want, out)
		}
	}
	// root may change the device of a daemon it does not own.
	c := p.Client(t)
	if _, err := c.SetLink(false); err != nil {
		t.Errorf("root's link down: %v", err)
	}
	c.SetLink(true)
	_ = p.Signal(syscall.SIGTERM)
	if rc := p.Wait(t, 20*time.Second); rc != 0 {
		t.Fatalf("status %d:\n%s", rc, p.Output())
	}
	if _, err := os.Stat(p.Control); !os.IsNotExist(err) {
		t.Errorf("control socket left: %v", err)
	}
}

package programs_test

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// The RDMA CM through unmodified librdmacm programs (rdmacm-utils):
// rping connects with rdma_resolve_addr … rdma_connect / rdma_accept,
// moves data with SEND and RDMA READ/WRITE and disconnects; every command
// reaches the daemon's rdmacm through the preload's
// /dev/infiniband/rdma_cm (docs/cm.md).

// rpingPort is the RDMA CM port of the tests: each test has daemons of its
// own, and RDMA CM ports belong to a device, so tests do not collide.
const rpingPort = "7174"

var pingData = regexp.MustCompile(`(?m)^ping data: rdma-ping-(\d+): `)

// checkPings asserts that the client printed count verified pings, in
// order (rping -V compares each echoed buffer with what it sent and
// stops on a mismatch).
func checkPings(t *testing.T, p *prog, count int) {
	t.Helper()
	m := pingData.FindAllStringSubmatch(p.stdout.String(), -1)
	if len(m) != count {
		t.Fatalf("%s printed %d pings, want %d\n%s", p.name, len(m), count, dump(p))
	}
	for i, x := range m {
		if x[1] != fmt.Sprint(i) {
			t.Fatalf("%s: ping %d is numbered %s\n%s", p.name, i, x[1], dump(p))
		}
	}
	if strings.Contains(p.stderr.String(), "data mismatch") {
		t.Fatalf("%s: data mismatch\n%s", p.name, dump(p))
	}
}

// rpingPair runs an rping server on srv and a client on cli against
// srv's address and checks both.
func rpingPair(t *testing.T, srv, cli *node, count int) time.Duration {
	t.Helper()
	s := srv.run(t, "rping", "-s", "-a", srv.addr.String(), "-p", rpingPort, "-C", fmt.Sprint(count), "-v")
	waitCMListen(t, srv, s)
	c := cli.run(t, "rping", "-c", "-a", srv.addr.String(), "-p", rpingPort, "-C", fmt.Sprint(count), "-v", "-V")
	if code := c.wait(t, 60*time.Second, s); code != 0 {
		t.Fatalf("rping client exit status %d\n%s", code, dump(c, s))
	}
	if code := s.wait(t, 30*time.Second, c); code != 0 {
		t.Fatalf("rping server exit status %d\n%s", code, dump(s, c))
	}
	checkPings(t, c, count)
	return c.took
}

// waitCMListen waits until the program listens on the node (the
// daemon's RDMA CM has a service listened on: nothing else tells from
// outside that rdma_listen has returned).
func waitCMListen(t *testing.T, n *node, p *prog) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := n.stats(t).Resources; r.CMListens > 0 {
			return
		}
		if p.exited() {
			t.Fatalf("%s exited before it listened\n%s", p.name, dump(p))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no RDMA CM id after 30s\n%s", p.name, dump(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCMBaseline waits until the node's resources are back at base
// (RDMA CM channels and ids included; the device's own QP1 and its address
// handles are not counted, docs/daemon.md "Resources").
func waitCMBaseline(t *testing.T, n *node, base daemon.Resources) {
	t.Helper()
	n.waitResources(t, base, 10*time.Second)
}

func TestRpingTwoDaemons(t *testing.T) {
	needPrograms(t, "rping")
	nodes := startNodes(t, 2)
	base := []daemon.Resources{nodes[0].stats(t).Resources, nodes[1].stats(t).Resources}
	took := rpingPair(t, nodes[0], nodes[1], 200)
	report.add("rping -C 200 -v between two daemons: %v", took.Round(time.Millisecond))
	waitCMBaseline(t, nodes[0], base[0])
	waitCMBaseline(t, nodes[1], base[1])
}

func TestRpingLoopback(t *testing.T) {
	needPrograms(t, "rping")
	n := startNodes(t, 1)[0]
	base := n.stats(t).Resources
	took := rpingPair(t, n, n, 200)
	report.add("rping -C 200 -v, both ends on one daemon: %v", took.Round(time.Millisecond))
	waitCMBaseline(t, n, base)
}

// TestRpingRejected: a client connecting to a port nobody listens on gets
// RDMA_CM_EVENT_REJECTED with reason 8 (invalid service ID, IBTA Vol 1
// Table 112) from the peer's CM, at once — not after retries.
func TestRpingRejected(t *testing.T) {
	needPrograms(t, "rping")
	nodes := startNodes(t, 2)
	c := nodes[1].run(t, "rping", "-c", "-a", nodes[0].addr.String(), "-p", "9", "-C", "1", "-v")
	if code := c.wait(t, 20*time.Second); code == 0 {
		t.Fatalf("rping to a port nobody listens on exited 0\n%s", dump(c))
	}
	if !strings.Contains(c.stderr.String(), "RDMA_CM_EVENT_REJECTED, error 8") {
		t.Fatalf("no REJECTED event with reason 8\n%s", dump(c))
	}
}

// TestRpingKilled: killing either end in mid-run leaves both daemons'
// resources (CM ids, QPs, …) at their baseline, the other end sees the
// connection end (the killed program's channel close sends DREQ), and the
// next pair connects.
func TestRpingKilled(t *testing.T) {
	needPrograms(t, "rping")
	for _, victim := range []string{"client", "server"} {
		t.Run(victim, func(t *testing.T) {
			nodes := startNodes(t, 2)
			base := []daemon.Resources{nodes[0].stats(t).Resources, nodes[1].stats(t).Resources}
			s := nodes[0].run(t, "rping", "-s", "-a", nodes[0].addr.String(), "-p", rpingPort, "-v")
			waitCMListen(t, nodes[0], s)
			c := nodes[1].run(t, "rping", "-c", "-a", nodes[0].addr.String(), "-p", rpingPort, "-v")
			deadline := time.Now().Add(30 * time.Second)
			for len(pingData.FindAllString(c.stdout.String(), -1)) < 20 {
				if c.exited() || time.Now().After(deadline) {
					t.Fatalf("the client is not pinging\n%s", dump(c, s))
				}
				time.Sleep(10 * time.Millisecond)
			}
			if victim == "client" {
				c.kill()
				s.wait(t, 30*time.Second, c) // DISCONNECTED ends the server's loop
			} else {
				s.kill()
				c.wait(t, 30*time.Second, s)
			}
			waitCMBaseline(t, nodes[0], base[0])
			waitCMBaseline(t, nodes[1], base[1])
			rpingPair(t, nodes[0], nodes[1], 10)
		})
	}
}

// cmPair runs a server on srv, waits for its listen, then the client on
// cli; both must exit 0.
func cmPair(t *testing.T, srv, cli *node, within time.Duration, sargs, cargs []string) (s, c *prog) {
	t.Helper()
	waitNoListener(t, srv)
	s = srv.run(t, sargs...)
	waitCMListen(t, srv, s)
	c = cli.run(t, cargs...)
	if code := c.wait(t, within, s); code != 0 {
		t.Fatalf("client exit status %d\n%s", code, dump(c, s))
	}
	if code := s.wait(t, 30*time.Second, c); code != 0 {
		t.Fatalf("server exit status %d\n%s", code, dump(s, c))
	}
	return s, c
}

// TestCMTools runs rdmacm-utils' connection tests between two daemons:
// ucmatose (RC: one connection, then four; the server disconnects first),
// udaddy (UD with SIDR), rdma_server/rdma_client (rdma_create_ep,
// rdma_get_request: synchronous ids and MIGRATE_ID).
func TestCMTools(t *testing.T) {
	needPrograms(t, "ucmatose", "udaddy", "rdma_server", "rdma_client")
	nodes := startNodes(t, 2)
	srv, cli := nodes[0], nodes[1]
	a := srv.addr.String()
	base := []daemon.Resources{srv.stats(t).Resources, cli.stats(t).Resources}
	for _, tc := range []struct {
		name         string
		sargs, cargs []string
		want         string
	}{
		{"ucmatose", []string{"ucmatose", "-b", a}, []string{"ucmatose", "-s", a}, "test complete"},
		{"ucmatose-c4", []string{"ucmatose", "-b", a, "-c", "4"}, []string{"ucmatose", "-s", a, "-c", "4"}, "test complete"},
		{"udaddy", []string{"udaddy", "-b", a}, []string{"udaddy", "-s", a}, "test complete"},
		{"rdma_server", []string{"rdma_server", "-s", a}, []string{"rdma_client", "-s", a}, "rdma_client: end 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := cmPair(t, srv, cli, 60*time.Second, tc.sargs, tc.cargs)
			if !strings.Contains(c.stdout.String(), tc.want) {
				t.Fatalf("client did not print %q\n%s", tc.want, dump(c, s))
			}
			report.add("%s between two daemons: %v", strings.Join(tc.cargs, " "), c.took.Round(time.Millisecond))
			waitCMBaseline(t, srv, base[0])
			waitCMBaseline(t, cli, base[1])
		})
	}
}

// TestPerftestRdmaCM runs perftest with -R (connection through the RDMA
// CM instead of its TCP exchange) between two daemons.
func TestPerftestRdmaCM(t *testing.T) {
	tools := []struct {
		tool string
		lat  bool
	}{{"ib_send_bw", false}, {"ib_write_bw", false}, {"ib_read_lat", true}}
	for _, tc := range tools {
		needPrograms(t, tc.tool)
	}
	nodes := startNodes(t, 2)
	srv, cli := nodes[0], nodes[1]
	for _, tc := range tools {
		t.Run(tc.tool, func(t *testing.T) {
			args := []string{tc.tool, "-R", "-d", "irdma0", "-F", "-n", "200"}
			cargs := append(append([]string(nil), args...), srv.addr.String())
			s, c := perftestCMPair(t, srv, cli, args, cargs)
			rows := parsePerf(c.stdout.String(), tc.lat)
			if len(rows) != 1 || rows[0].iters != 200 {
				t.Fatalf("result rows %+v\n%s", rows, dump(s, c))
			}
			r := rows[0]
			if (tc.lat && r.f[0] <= 0) || (!tc.lat && r.f[1] <= 0) {
				t.Fatalf("figures %v\n%s", r.f, dump(s, c))
			}
			if tc.lat {
				report.add("%s -R -n 200: t_typical %.2f usec", tc.tool, r.f[2])
			} else {
				report.add("%s -R -n 200: %d B average %.2f MB/sec", tc.tool, r.bytes, r.f[1])
			}
		})
	}
}

// perftestRaceTries bounds the attempts of perftestCMPair: the faster the
// client reaches its second connection, the more often it wins the race,
// so one retry is not always enough.
const perftestRaceTries = 4

// perftestCMPair runs a perftest -R server and client, again while a try
// loses perftest's own race (up to perftestRaceTries tries): perftest -R connects twice (its
// communication context, then the test's QP), and the client's second REQ
// can reach the server's CM before the server listens again, which the CM
// rejects with reason 8, invalid service ID, as cm.c does (perftest issue
// #93: "also happens on RoCE"). Any other failure fails the test. Before
// each try the server's daemon has no listener left from the previous
// program, so waitCMListen sees this server's own.
func perftestCMPair(t *testing.T, srv, cli *node, sargs, cargs []string) (s, c *prog) {
	t.Helper()
	for try := 1; ; try++ {
		waitNoListener(t, srv)
		s = srv.run(t, sargs...)
		waitCMListen(t, srv, s)
		c = cli.run(t, cargs...)
		code := c.wait(t, 120*time.Second, s)
		if code != 0 && try < perftestRaceTries && strings.Contains(c.stderr.String(), "RDMA_CM_EVENT_REJECTED; error: 8") {
			t.Logf("PERFTEST RACE (perftest issue #93): the client's second REQ came before the server listened again; running it again (attempt %d of %d)\n%s", try+1, perftestRaceTries, dump(c, s))
			s.kill()
			continue
		}
		if code != 0 {
			t.Fatalf("client exit status %d\n%s", code, dump(c, s))
		}
		if code := s.wait(t, 30*time.Second, c); code != 0 {
			t.Fatalf("server exit status %d\n%s", code, dump(s, c))
		}
		return s, c
	}
}

// waitNoListener waits until the node's daemon has no RDMA CM listener:
// the previous server's ids go when the daemon sees its descriptor close,
// a moment after the program exits.
func waitNoListener(t *testing.T, n *node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.stats(t).Resources.CMListens != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a listener is left on %s after 10s", n.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRpingIPv6: IPv6 ids end to end, both ends on a daemon on ::1
// (rdma_bind_addr/rdma_resolve_addr with sockaddr_in6, cma_hdr IP
// version 6, GID ::1 itself).
func TestRpingIPv6(t *testing.T) {
	needPrograms(t, "rping")
	a := netip.MustParseAddr("::1")
	var p *daemontest.Proc
	// ::1 is one address for every test package; wait for its UDP/4791.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback, Port: 4791})
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("[::1]:4791 stays busy: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p = daemontest.Run(t, daemontest.Options{}, "--addr", a.String())
	n := &node{Proc: p, addr: a}
	took := rpingPair(t, n, n, 50)
	report.add("rping -C 50 -v over IPv6 (::1), one daemon: %v", took.Round(time.Millisecond))
}

// TestMckeyLoopback: a multicast join (RDMA_CM_EVENT_MULTICAST_JOIN) and a
// UD QP attached to the group through the device's multicast path; sender
// and receiver on one daemon (the UDP link carries no IP multicast between
// daemons).
func TestMckeyLoopback(t *testing.T) {
	needPrograms(t, "mckey")
	n := startNodes(t, 1)[0]
	a := n.addr.String()
	r := n.run(t, "mckey", "-m", "239.1.2.3", "-b", a, "-C", "5")
	waitJoined(t, n, r)
	s := n.run(t, "mckey", "-m", "239.1.2.3", "-b", a, "-s", "-C", "5")
	if code := s.wait(t, 30*time.Second, r); code != 0 {
		t.Fatalf("sender exit %d\n%s", code, dump(s, r))
	}
	if code := r.wait(t, 30*time.Second, s); code != 0 || !strings.Contains(r.stdout.String(), "test complete") {
		t.Fatalf("receiver exit %d\n%s", code, dump(r, s))
	}
}

// waitJoined waits until the node has a multicast group attached (the
// receiver's QP joined through ibv_attach_mcast after MULTICAST_JOIN).
func waitJoined(t *testing.T, n *node, p *prog) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n.stats(t).Resources.McastGroups == 0 {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s did not join\n%s", p.name, dump(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeviceRemoval: a daemon shutting down tells a listening program
// RDMA_CM_EVENT_DEVICE_REMOVAL (rping then exits).
func TestDeviceRemoval(t *testing.T) {
	needPrograms(t, "rping")
	n := startNodes(t, 1)[0]
	s := n.run(t, "rping", "-s", "-a", n.addr.String(), "-p", rpingPort, "-v")
	waitCMListen(t, n, s)
	if err := n.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 30*time.Second)
	if !strings.Contains(s.stderr.String()+s.stdout.String(), "device removal") {
		t.Fatalf("no DEVICE_REMOVAL\n%s", dump(s))
	}
	if code := n.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("daemon exit %d\n%s", code, n.Output())
	}
}

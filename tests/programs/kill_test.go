package programs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// waitTraffic waits until the daemon n has sent more than pkts packets
// since before while the programs still run.
func waitTraffic(t *testing.T, n *node, before uint64, pkts uint64, ps ...*prog) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for n.stats(t).Port.TxPackets-before < pkts {
		for _, p := range ps {
			if p.exited() {
				t.Fatalf("%s exited before the transfer was under way\n%s", p.name, dump(ps...))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d packets sent in 60s\n%s", pkts, dump(ps...))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holding checks that a program's objects are counted while it runs: its
// session, a PD, a CQ, a QP, an MR, and its QP's transport.
func holding(t *testing.T, n *node, base daemon.Resources) {
	t.Helper()
	r := n.stats(t).Resources
	if r.Sessions != base.Sessions+1 || r.PDs <= base.PDs || r.CQs <= base.CQs || r.QPs <= base.QPs || r.MRs <= base.MRs ||
		r.Transports <= base.Transports || r.BusRegions <= base.BusRegions {
		t.Fatalf("daemon on %s while a program runs: %+v (baseline %+v)", n.addr, r, base)
	}
}

// healthy checks that the daemons still run, answer on their control
// sockets with the port active, and logged no panic; then that the next
// program pair runs (ibv_rc_pingpong -c) and leaves the baselines.
func healthy(t *testing.T, a, b *node, baseA, baseB daemon.Resources) {
	t.Helper()
	for _, n := range []*node{a, b} {
		select {
		case <-n.Done():
			t.Fatalf("daemon on %s exited\n%s", n.addr, n.Output())
		default:
		}
		if st := n.stats(t).Port.State; st != "PORT_ACTIVE" {
			t.Errorf("daemon on %s: port %s", n.addr, st)
		}
		if strings.Contains(n.Output(), "panic") {
			t.Errorf("daemon on %s logged a panic:\n%s", n.addr, n.Output())
		}
	}
	s, c := pair(t, a, b, 60*time.Second, "ibv_rc_pingpong", "-g", "1", "-n", "200", "-c")
	checkPair(t, a, b, s, c, 4096, 200)
	a.waitResources(t, baseA, 10*time.Second)
	b.waitResources(t, baseB, 10*time.Second)
}

// TestKilledProgram kills programs with SIGKILL in the middle of a
// transfer: the daemons give back everything the programs held (the
// control socket's resources: sessions, PDs, CQs, QPs, MRs, bus regions,
// transports return to the baseline), stay healthy, and run the next
// program.
//
//   - ib_write_bw's client (the writer) is killed: its daemon cleans up at
//     once; the server sees its exchange socket close and exits non-zero.
//   - ib_write_bw's server is killed: the client's writes go to a QP that
//     no longer exists, the retries run out and the client's completion
//     fails with IBV_WC_RETRY_EXC_ERR; it exits non-zero on its own.
//   - ibv_rc_pingpong -n 100000's client is killed: the server, which may
//     be waiting for a message that will never come (as on hardware:
//     ibv_rc_pingpong has no timeout), is killed as well if it does not
//     fail on its own.
func TestKilledProgram(t *testing.T) {
	needPrograms(t, "ib_write_bw", "ibv_rc_pingpong")
	nodes := startNodes(t, 2)
	a, b := nodes[0], nodes[1]
	baseA, baseB := a.stats(t).Resources, b.stats(t).Resources

	t.Run("ib_write_bw-client", func(t *testing.T) {
		port := freePort(t)
		args := []string{"ib_write_bw", "-p", port, "-x", "1", "-F", "-D", "60"}
		s := a.run(t, args...)
		waitListen(t, port, s)
		c := b.run(t, append(args, a.addr.String())...)
		waitTraffic(t, b, b.stats(t).Port.TxPackets, 2000, s, c)
		holding(t, a, baseA)
		holding(t, b, baseB)
		c.kill()
		b.waitResources(t, baseB, 15*time.Second)
		if code := s.wait(t, 30*time.Second, c); code == 0 {
			t.Errorf("the server exited 0 after its client was killed\n%s", dump(s, c))
		}
		a.waitResources(t, baseA, 15*time.Second)
		healthy(t, a, b, baseA, baseB)
	})

	t.Run("ib_write_bw-server", func(t *testing.T) {
		port := freePort(t)
		args := []string{"ib_write_bw", "-p", port, "-x", "1", "-F", "-D", "60"}
		s := a.run(t, args...)
		waitListen(t, port, s)
		c := b.run(t, append(args, a.addr.String())...)
		waitTraffic(t, b, b.stats(t).Port.TxPackets, 2000, s, c)
		s.kill()
		a.waitResources(t, baseA, 15*time.Second)
		code := c.wait(t, 30*time.Second, s)
		// IBV_WC_RETRY_EXC_ERR (12): the server's daemon drops packets
		// for a QP that no longer exists, as a NIC does.
		if code == 0 || !strings.Contains(c.stderr.String(), "Completion with error at client") ||
			!strings.Contains(c.stderr.String(), "Failed status 12:") {
			t.Errorf("the client: exit status %d after its server was killed, want a completion with status 12 (retry exceeded)\n%s", code, dump(s, c))
		}
		b.waitResources(t, baseB, 15*time.Second)
		healthy(t, a, b, baseA, baseB)
	})

	t.Run("ibv_rc_pingpong", func(t *testing.T) {
		port := freePort(t)
		args := []string{"ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "100000"}
		s := a.run(t, args...)
		waitListen(t, port, s)
		c := b.run(t, append(args, a.addr.String())...)
		waitTraffic(t, b, b.stats(t).Port.TxPackets, 500, s, c)
		holding(t, b, baseB)
		c.kill()
		b.waitResources(t, baseB, 15*time.Second)
		select {
		case <-s.done:
			t.Logf("the server exited by itself: status %d\n%s", s.code(), dump(s))
			if s.code() == 0 {
				t.Errorf("the server exited 0 after its client was killed\n%s", dump(s, c))
			}
		case <-time.After(5 * time.Second):
			s.kill()
		}
		a.waitResources(t, baseA, 15*time.Second)
		healthy(t, a, b, baseA, baseB)
	})
}

package daemon_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// TestRunDaemons runs everything as separate processes: two `irdma-emu run`
// daemons on two loopback addresses, pingpong and perf between them, and
// a killed perf client whose QPs leave the daemon's statistics.
func TestRunDaemons(t *testing.T) {
	dir := testRunDir(t)
	lo := testaddr.Loopback(t, 2)
	srvAddr := lo[0].String()
	runDaemon(t, dir, "ierA", nil, "--addr", srvAddr)
	runDaemon(t, dir, "ierB", nil, "--addr", lo[1].String())
	sa, sb := attach.SocketPath(dir, "ierA"), attach.SocketPath(dir, "ierB")
	ctlB := daemon.ControlPath(dir, "ierB")
	// The daemon's own QPs (QP1 of the CM, built by the driver half at
	// start) have transports from the moment they are loaded: what a
	// killed client leaves must go back to this.
	baseActive := ctlStats(t, ctlB).Port.ActiveQPs

	so, co := pingpong(t, sa, sb, srvAddr, "-n", "300")
	t.Logf("pingpong: %.2f / %.2f usec/iter", checkPP(t, "server", so, 4096, 300), checkPP(t, "client", co, 4096, 300))
	for _, verb := range []string{"write", "read", "send"} {
		_, co := perfRun(t, nil, nil, sa, sb, srvAddr, verb, "-n", "200", "--check")
		for _, r := range parseBW(t, co) {
			t.Logf("perf %s: %.2f MB/s; modelled E810 %.2f MB/s (%s)", verb, r.avg, r.modelBW, r.bottleneck)
		}
	}
	_, co = perfRun(t, nil, nil, sa, sb, srvAddr, "send", "--lat", "-n", "200")
	tavg, model := parseLat(t, co)
	t.Logf("perf send --lat: t_avg %.2f usec; modelled E810 %.2f usec", tavg, model)

	// A client killed in the middle of a transfer: its QPs leave the
	// daemon (its control socket's statistics), and the device serves the
	// next client.
	port := nextPort()
	srv := start(t, nil, nil, "perf", "write", "-d", sa, "-p", port, "--timeout", "60s")
	cli := start(t, nil, nil, "perf", "write", "-d", sb, "-p", port, "-n", "100000000", "--timeout", "60s", srvAddr)
	deadline := time.Now().Add(30 * time.Second)
	for len(ctlStats(t, ctlB).QPs) == 0 || ctlStats(t, ctlB).Port.TxPackets < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("no transfer:\n%s\n%s", cli.out, srv.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cli.kill()
	srv.wait(t, 60*time.Second)
	// Both the QP table (the stats' QP list) and the engine's live
	// transports (port.active_qps) go back to what the daemon had before
	// any client.
	deadline = time.Now().Add(15 * time.Second)
	for {
		s := ctlStats(t, ctlB)
		if len(s.QPs) == 0 && s.Port.ActiveQPs == baseActive {
			t.Logf("after the kill: no QPs; port.active_qps %d, as at the start", s.Port.ActiveQPs)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the client was killed the daemon still has QPs: %+v, active %d (at the start %d)", s.QPs, s.Port.ActiveQPs, baseActive)
		}
		time.Sleep(50 * time.Millisecond)
	}
	so, co = pingpong(t, sa, sb, srvAddr, "-n", "100", "-c")
	checkPP(t, "server", so, 4096, 100)
	checkPP(t, "client", co, 4096, 100)
}

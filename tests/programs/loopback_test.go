package programs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// defaultGID is GID 0 of the node's port, as the control socket's devinfo
// prints it (the form the pingpongs print too).
func (n *node) defaultGID(t *testing.T) string {
	t.Helper()
	c, err := daemon.Dial(n.Control)
	if err != nil {
		t.Fatalf("control socket of %s: %v", n.addr, err)
	}
	defer c.Close()
	di, err := c.DevInfo()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range di.Ports[0].GIDs {
		if g.Index == 0 {
			return g.GID
		}
	}
	t.Fatalf("no GID 0 in %+v", di.Ports[0].GIDs)
	return ""
}

// TestPingpongDefaultGID is the two-programs half of issue 11's Done-when
// item 4: ibv_rc_pingpong and ibv_ud_pingpong, server and client both on
// one daemon, through GID index 0 — the fe80:: default GID, which no
// interface of lo holds, so the UDP socket could not carry it (before the
// device kept such frames inside, RC ended in "transport retry counter
// exceeded"). Both complete; each prints the default GID as its own and the
// other's; every packet the daemon sent went to its own receive path and
// none to the UDP link (docs/dataplane.md "Loopback"); the daemon holds
// nothing more afterwards.
func TestPingpongDefaultGID(t *testing.T) {
	needPrograms(t, "ibv_rc_pingpong", "ibv_ud_pingpong")
	nd := startNodes(t, 1)[0]
	gid := nd.defaultGID(t)
	if !strings.HasPrefix(gid, "fe80::") {
		t.Fatalf("GID 0 is %s, want the fe80:: default GID", gid)
	}
	for _, tc := range []struct {
		prog  string
		flags []string
		size  int
	}{
		{"ibv_rc_pingpong", nil, 4096},
		{"ibv_rc_pingpong", []string{"-s", "65536", "-m", "4096"}, 65536},
		{"ibv_ud_pingpong", nil, 1024},
	} {
		args := append([]string{tc.prog, "-g", "0"}, tc.flags...)
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			base := nd.stats(t)
			s, c := pair(t, nd, nd, 90*time.Second, args...)
			srv, cli := checkPairGIDs(t, gid, gid, s, c, tc.size, 1000)
			nd.waitResources(t, base.Resources, 10*time.Second) // the QPs are gone: nothing more is sent
			after := nd.stats(t)
			p, q := after.Port, base.Port
			sent, looped := p.TxPackets-q.TxPackets, p.Loopback.Frames-q.Loopback.Frames
			if sent < 2000 || looped != sent || p.Link.TxFrames != q.Link.TxFrames || p.Link.RxFrames != q.Link.RxFrames {
				t.Errorf("sent %d packets, looped back %d; link frames tx %d→%d, rx %d→%d: want all looped back, none on the link",
					sent, looped, q.Link.TxFrames, p.Link.TxFrames, q.Link.RxFrames, p.Link.RxFrames)
			}
			t.Logf("%s: server %.2f usec/iter, client %.2f usec/iter, %.2f Mbit/s; %d packets looped back; took %v",
				strings.Join(args, " "), srv.usec, cli.usec, cli.mbits, looped, c.took.Round(time.Millisecond))
			report.add("%-15s %-22s %-12s %9.2f usec/iter %8.2f Mbit/s", tc.prog, strings.Join(args[1:], " "), "one-daemon",
				cli.usec, cli.mbits)
		})
	}
}

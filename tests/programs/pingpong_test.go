package programs_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	ppAddr  = regexp.MustCompile(`(?m)^  (local|remote) address:  ?LID 0x[0-9a-f]{4}, QPN 0x([0-9a-f]{6}), PSN 0x[0-9a-f]{6}[,:] GID (\S+)$`)
	ppBytes = regexp.MustCompile(`(?m)^(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec$`)
	ppIters = regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter$`)
)

// ppResult is what a pingpong printed.
type ppResult struct {
	localQPN, remoteQPN string
	localGID, remoteGID string
	bytes, iters        int
	mbits, usec         float64
}

// parsePP parses a pingpong's output, failing the test when a line is
// missing.
func parsePP(t *testing.T, who string, p *prog) ppResult {
	t.Helper()
	out := p.stdout.String()
	var r ppResult
	for _, m := range ppAddr.FindAllStringSubmatch(out, -1) {
		if m[1] == "local" {
			r.localQPN, r.localGID = m[2], m[3]
		} else {
			r.remoteQPN, r.remoteGID = m[2], m[3]
		}
	}
	b, i := ppBytes.FindStringSubmatch(out), ppIters.FindStringSubmatch(out)
	if r.localGID == "" || r.remoteGID == "" || b == nil || i == nil {
		t.Fatalf("%s: output lacks the address or result lines\n%s", who, dump(p))
	}
	r.bytes, _ = strconv.Atoi(b[1])
	r.mbits, _ = strconv.ParseFloat(b[3], 64)
	r.iters, _ = strconv.Atoi(i[1])
	r.usec, _ = strconv.ParseFloat(i[3], 64)
	return r
}

// checkPair checks a completed pingpong pair: both exited 0, each printed
// its own daemon's GID and the other's, the QPNs each learnt from the
// other, iterations and bytes (size × iters × 2), and no complaint.
func checkPair(t *testing.T, srvNode, cliNode *node, s, c *prog, size, iters int) (srv, cli ppResult) {
	t.Helper()
	return checkPairGIDs(t, srvNode.gid(), cliNode.gid(), s, c, size, iters)
}

// checkPairGIDs is checkPair with the GIDs the server and the client must
// print as their own.
func checkPairGIDs(t *testing.T, srvGID, cliGID string, s, c *prog, size, iters int) (srv, cli ppResult) {
	t.Helper()
	if s.code() != 0 || c.code() != 0 {
		t.Fatalf("server exit %d, client exit %d\n%s", s.code(), c.code(), dump(s, c))
	}
	srv, cli = parsePP(t, "server", s), parsePP(t, "client", c)
	for _, x := range []struct {
		who       string
		r         ppResult
		me, other string
	}{{"server", srv, srvGID, cliGID}, {"client", cli, cliGID, srvGID}} {
		if x.r.localGID != x.me || x.r.remoteGID != x.other {
			t.Errorf("%s: GIDs local %s remote %s, want %s and %s", x.who, x.r.localGID, x.r.remoteGID, x.me, x.other)
		}
		if x.r.iters != iters || x.r.bytes != size*iters*2 || x.r.usec <= 0 {
			t.Errorf("%s: %d iters, %d bytes, %.2f usec/iter; want %d iters of %d bytes", x.who, x.r.iters, x.r.bytes, x.r.usec, iters, size)
		}
	}
	if srv.localQPN != cli.remoteQPN || cli.localQPN != srv.remoteQPN {
		t.Errorf("QPNs: server %s→%s, client %s→%s", srv.localQPN, srv.remoteQPN, cli.localQPN, cli.remoteQPN)
	}
	for _, p := range []*prog{s, c} {
		// -c: the server checks the buffer and says "invalid data in
		// page N" on stdout, still exiting 0.
		if strings.Contains(p.stdout.String(), "invalid data") || strings.Contains(p.stderr.String(), "Failed") {
			t.Errorf("%s complained", p.name)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", dump(s, c))
	}
	return srv, cli
}

// configs are the placements of a pingpong pair: each program on its own
// daemon (two loopback addresses), or both on one daemon.
func configs(t *testing.T) []struct {
	name     string
	srv, cli *node
} {
	nodes := startNodes(t, 3)
	return []struct {
		name     string
		srv, cli *node
	}{{"two-daemons", nodes[0], nodes[1]}, {"one-daemon", nodes[2], nodes[2]}}
}

// TestRCPingpong runs ibv_rc_pingpong -g 1 (on RoCE a GID index is
// required; 1 is the IPv4-mapped GID) plain, with completion events (-e),
// with the buffer check (-c), 64 KiB messages, path MTU 4096 and 10 000
// iterations, on two daemons and on one. After each pair the daemons hold
// nothing more than before.
func TestRCPingpong(t *testing.T) {
	needPrograms(t, "ibv_rc_pingpong")
	for _, cf := range configs(t) {
		t.Run(cf.name, func(t *testing.T) {
			for _, v := range []struct {
				name   string
				flags  []string
				size   int
				iters  int
				within time.Duration
			}{
				{"plain", nil, 4096, 1000, 90 * time.Second},
				{"events", []string{"-e"}, 4096, 1000, 90 * time.Second},
				{"check", []string{"-c"}, 4096, 1000, 90 * time.Second},
				{"size-65536", []string{"-s", "65536"}, 65536, 1000, 120 * time.Second},
				{"mtu-4096", []string{"-m", "4096"}, 4096, 1000, 90 * time.Second},
				{"iters-10000", []string{"-n", "10000"}, 4096, 10000, 300 * time.Second},
			} {
				t.Run(v.name, func(t *testing.T) {
					baseS, baseC := cf.srv.stats(t).Resources, cf.cli.stats(t).Resources
					args := append([]string{"ibv_rc_pingpong", "-g", "1"}, v.flags...)
					s, c := pair(t, cf.srv, cf.cli, v.within, args...)
					srv, cli := checkPair(t, cf.srv, cf.cli, s, c, v.size, v.iters)
					t.Logf("%s: server %.2f usec/iter, client %.2f usec/iter, %.2f Mbit/s; took %v",
						strings.Join(args, " "), srv.usec, cli.usec, cli.mbits, c.took.Round(time.Millisecond))
					report.add("ibv_rc_pingpong %-13s %-12s %9.2f usec/iter %8.2f Mbit/s",
						strings.Join(v.flags, " "), cf.name, cli.usec, cli.mbits)
					cf.srv.waitResources(t, baseS, 10*time.Second)
					cf.cli.waitResources(t, baseC, 10*time.Second)
				})
			}
		})
	}
}

// TestUDPingpong runs ibv_ud_pingpong -g 1 on two daemons and on one.
func TestUDPingpong(t *testing.T) {
	needPrograms(t, "ibv_ud_pingpong")
	for _, cf := range configs(t) {
		t.Run(cf.name, func(t *testing.T) {
			baseS, baseC := cf.srv.stats(t).Resources, cf.cli.stats(t).Resources
			s, c := pair(t, cf.srv, cf.cli, 90*time.Second, "ibv_ud_pingpong", "-g", "1")
			srv, cli := checkPair(t, cf.srv, cf.cli, s, c, 1024, 1000)
			t.Logf("ibv_ud_pingpong -g 1: server %.2f usec/iter, client %.2f usec/iter", srv.usec, cli.usec)
			report.add("ibv_ud_pingpong %-13s %-12s %9.2f usec/iter %8.2f Mbit/s", "", cf.name, cli.usec, cli.mbits)
			cf.srv.waitResources(t, baseS, 10*time.Second)
			cf.cli.waitResources(t, baseC, 10*time.Second)
		})
	}
}

// TestSRQPingpong: ibv_srq_pingpong fails as it does on a real E810.
// GEN_2 has no SRQ: libirdma 44 (rdma-core v44.0, providers/irdma/umain.c
// irdma_uctx_ops) has no create_srq, so libibverbs' dummy op
// (libibverbs/dummy_ops.c) fails ibv_create_srq with EOPNOTSUPP without a
// system call — the kernel's own answer, EOPNOTSUPP from the uverbs core
// for a device without create_srq, is never asked (the uverbs provider
// gives it too: docs/uverbs.md). srq_pingpong's pp_init_ctx then prints
// "Couldn't create SRQ", frees what it made and main returns 1, before any
// connection — in the server and the client alike. Nothing is left on the
// daemon.
func TestSRQPingpong(t *testing.T) {
	needPrograms(t, "ibv_srq_pingpong")
	nodes := startNodes(t, 2)
	base := nodes[0].stats(t).Resources
	port := freePort(t)
	for _, args := range [][]string{
		{"ibv_srq_pingpong", "-g", "1", "-p", port},
		{"ibv_srq_pingpong", "-g", "1", "-p", port, nodes[1].addr.String()},
	} {
		p := nodes[0].run(t, args...)
		if code := p.wait(t, 20*time.Second); code != 1 || p.stderr.String() != "Couldn't create SRQ\n" || p.stdout.String() != "" {
			t.Errorf("exit status %d, stdout %q, stderr %q; want 1, nothing, \"Couldn't create SRQ\\n\"\n%s",
				code, p.stdout.String(), p.stderr.String(), dump(p))
		}
	}
	nodes[0].waitResources(t, base, 10*time.Second)
	if rx := nodes[1].stats(t).Port.RxPackets; rx != 0 {
		t.Errorf("the peer daemon received %d packets", rx)
	}
}

// TestSRQPingpongGEN3Libirdma44: Debian's libirdma 44 cannot open a GEN_3
// device at all. A kernel with GEN_3 support refuses a provider that does
// not announce the GEN_3 WQE format (verbs.c irdma_alloc_ucontext:
// IRDMA_SUPPORT_WQE_FORMAT_V2 missing from the request's comp_mask on
// hw_rev ≥ GEN_3: -EOPNOTSUPP), and libirdma 44 (umain.c
// irdma_ualloc_context) knows no comp_mask: it tries userspace_ver 5, then
// 4, both refused, so ibv_open_device fails and srq_pingpong says
// "Couldn't get context for irdma0" and returns 1, as on an E2100.
func TestSRQPingpongGEN3Libirdma44(t *testing.T) {
	needPrograms(t, "ibv_srq_pingpong")
	nodes := startNodes(t, 1, "--profile", "gen3")
	p := nodes[0].run(t, "ibv_srq_pingpong", "-g", "1", "-p", freePort(t))
	if code := p.wait(t, 20*time.Second); code != 1 || p.stderr.String() != "Couldn't get context for irdma0\n" || p.stdout.String() != "" {
		t.Errorf("exit status %d, stdout %q, stderr %q; want 1, nothing, \"Couldn't get context for irdma0\\n\"\n%s",
			code, p.stdout.String(), p.stderr.String(), dump(p))
	}
}

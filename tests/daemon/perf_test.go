package daemon_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// perfRun runs `irdma-emu perf VERB` as server on srvSock and client on
// cliSock, and returns both outputs.
func perfRun(t *testing.T, prefixSrv, prefixCli []string, srvSock, cliSock, srvAddr, verb string, extra ...string) (string, string) {
	t.Helper()
	port := nextPort()
	sa := append([]string{"perf", verb, "-d", srvSock, "-p", port, "--timeout", "120s"}, extra...)
	srv := start(t, nil, prefixSrv, sa...)
	ca := append([]string{"perf", verb, "-d", cliSock, "-p", port, "--timeout", "120s"}, extra...)
	ca = append(ca, srvAddr)
	cli := start(t, nil, prefixCli, ca...)
	if err := cli.wait(t, 150*time.Second); err != nil {
		t.Fatalf("perf %s client: %v\n%s\nserver:\n%s", verb, err, cli.out, srv.out)
	}
	if err := srv.wait(t, 30*time.Second); err != nil {
		t.Fatalf("perf %s server: %v\n%s\nclient:\n%s", verb, err, srv.out, cli.out)
	}
	return srv.out.String(), cli.out.String()
}

var bwRow = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
var latRow = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
var modelRow = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S.*)$`)
var modelLatRow = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+)\s+stage latencies`)

type bwResult struct {
	size              int
	peak, avg, rate   float64
	modelBW, modelMpp float64
	bottleneck        string
}

// parseBW reads the result table and the modelled table of a BW run.
func parseBW(t *testing.T, out string) []bwResult {
	t.Helper()
	i := strings.Index(out, "Modelled E810")
	if i < 0 {
		t.Fatalf("no modelled figures:\n%s", out)
	}
	var rs []bwResult
	for _, m := range bwRow.FindAllStringSubmatch(out[:i], -1) {
		r := bwResult{}
		r.size, _ = strconv.Atoi(m[1])
		r.peak, _ = strconv.ParseFloat(m[3], 64)
		r.avg, _ = strconv.ParseFloat(m[4], 64)
		r.rate, _ = strconv.ParseFloat(m[5], 64)
		rs = append(rs, r)
	}
	ms := modelRow.FindAllStringSubmatch(out[i:], -1)
	if len(ms) != len(rs) || len(rs) == 0 {
		t.Fatalf("%d result rows, %d model rows:\n%s", len(rs), len(ms), out)
	}
	for k, m := range ms {
		rs[k].modelBW, _ = strconv.ParseFloat(m[3], 64)
		rs[k].modelMpp, _ = strconv.ParseFloat(m[4], 64)
		rs[k].bottleneck = strings.TrimSpace(m[5])
		if rs[k].avg <= 0 || rs[k].modelBW <= 0 {
			t.Errorf("row %+v", rs[k])
		}
	}
	return rs
}

func parseLat(t *testing.T, out string) (tavg, model float64) {
	t.Helper()
	m := latRow.FindStringSubmatch(out)
	mm := modelLatRow.FindStringSubmatch(out)
	if m == nil || mm == nil {
		t.Fatalf("no latency row or model row:\n%s", out)
	}
	tavg, _ = strconv.ParseFloat(m[6], 64)
	model, _ = strconv.ParseFloat(mm[3], 64)
	if tavg <= 0 || model <= 0 {
		t.Errorf("latency %v, model %v:\n%s", tavg, model, out)
	}
	return
}

func atomicsOn(c *daemon.Config) { c.Profile = profile.GEN2().WithAtomics(true) }

// TestPerfModes runs every perf mode between two in-process daemons with
// short iteration counts and payload checks.
func TestPerfModes(t *testing.T) {
	a, b := twoNodes(t, atomicsOn)
	for _, tc := range []struct {
		verb  string
		flags []string
		lat   bool
	}{
		{"write", []string{"-n", "200", "--check"}, false},
		{"read", []string{"-n", "200", "--check"}, false},
		{"send", []string{"-n", "200", "--check"}, false},
		{"atomic", []string{"-n", "200", "--check"}, false},
		{"atomic", []string{"-n", "100", "--check", "-A", "CMP_AND_SWAP"}, false},
		{"write", []string{"-n", "100", "-b", "-q", "2", "-s", "8192", "--check"}, false},
		{"send", []string{"-n", "100", "-b", "--check"}, false},
		{"write", []string{"-n", "20", "-a", "--max-size", "65536", "--check"}, false},
		{"write", []string{"--lat", "-n", "100", "--check"}, true},
		{"read", []string{"--lat", "-n", "100"}, true},
		{"send", []string{"--lat", "-n", "100", "-s", "4096", "--check"}, true},
		{"atomic", []string{"--lat", "-n", "100", "--check"}, true},
	} {
		name := tc.verb + strings.Join(tc.flags, "")
		t.Run(name, func(t *testing.T) {
			_, co := perfRun(t, nil, nil, a.socket(), b.socket(), a.addr.String(), tc.verb, tc.flags...)
			if tc.lat {
				tavg, model := parseLat(t, co)
				t.Logf("%s: t_avg %.2f usec, modelled E810 %.2f usec", name, tavg, model)
				return
			}
			for _, r := range parseBW(t, co) {
				t.Logf("%s %d: avg %.2f MB/s (%.4f Mpps), modelled E810 %.2f MB/s (%s)", name, r.size, r.avg, r.rate, r.modelBW, r.bottleneck)
			}
		})
	}
}

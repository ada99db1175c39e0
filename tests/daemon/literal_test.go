package daemon_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
)

// TestRunDaemonsLoopback23 is issue 5's "two daemons on 127.0.0.2 and
// 127.0.0.3", taken literally: two `irdma-emu run` processes on exactly
// those addresses, pingpong and every perf mode between them. It runs in a
// network namespace of its own (lo up, 127.0.0.0/8 on it), so those two
// well-known addresses cannot collide with other packages' tests binding
// UDP 4791 on the host's loopback at the same time (the other loopback
// suites take random addresses from internal/testaddr for that reason).
func TestRunDaemonsLoopback23(t *testing.T) {
	nstest.NeedRoot(t)
	ns := nstest.New(t)
	in := []string{"ip", "netns", "exec", ns.Name}
	dir := testRunDir(t)
	const a2, a3 = "127.0.0.2", "127.0.0.3"
	runDaemon(t, dir, "ie02", in, "--addr", a2, "--atomics")
	runDaemon(t, dir, "ie03", in, "--addr", a3, "--atomics")
	s2, s3 := attach.SocketPath(dir, "ie02"), attach.SocketPath(dir, "ie03")

	so, co := pingpongIn(t, in, s2, s3, a2, "-n", "200")
	t.Logf("pingpong 127.0.0.2 ↔ 127.0.0.3: %.2f / %.2f usec/iter",
		checkPP(t, "server", so, 4096, 200), checkPP(t, "client", co, 4096, 200))
	for _, verb := range []string{"write", "read", "send", "atomic"} {
		_, co := perfRun(t, in, in, s2, s3, a2, verb, "-n", "100", "--check")
		for _, r := range parseBW(t, co) {
			t.Logf("perf %s: %.2f MB/s; modelled E810 %.2f MB/s (%s)", verb, r.avg, r.modelBW, r.bottleneck)
		}
	}
	for _, verb := range []string{"write", "read", "send", "atomic"} {
		_, co := perfRun(t, in, in, s2, s3, a2, verb, "--lat", "-n", "100")
		tavg, model := parseLat(t, co)
		t.Logf("perf %s --lat: t_avg %.2f usec; modelled E810 %.2f usec", verb, tavg, model)
	}
}

package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// realPingpong runs the unmodified rdma-core ibv_rc_pingpong (or
// ibv_ud_pingpong) on node n through `irdma-emu exec` and the preload.
func realPingpong(t *testing.T, n *node, prog string, args ...string) *proc {
	t.Helper()
	a := append([]string{"exec", "--device", n.d.Name(), "--run-dir", n.runDir, "--", prog}, args...)
	return start(t, nil, nil, a...)
}

// needRealPingpong stops the test when prog, the provider or gcc (which
// builds the preload) is missing: a failure under CI (internal/testenv).
func needRealPingpong(t *testing.T, prog string) {
	t.Helper()
	testenv.Tools(t, prog, "gcc")
	testenv.Libirdma(t)
}

// TestPingpongAgainstRealRC runs irdma-emu pingpong against the real
// ibv_rc_pingpong, each side in each role.
func TestPingpongAgainstRealRC(t *testing.T) {
	needRealPingpong(t, "ibv_rc_pingpong")
	a, b := twoNodes(t, nil)
	for _, tc := range []struct {
		name      string
		realSrv   bool
		flags     []string
		size, its int
	}{
		{"real-server", true, []string{"-n", "300"}, 4096, 300},
		{"real-client", false, []string{"-n", "300"}, 4096, 300},
		{"real-server-chk-events", true, []string{"-n", "200", "-c", "-e", "-s", "65536"}, 65536, 200},
		{"real-client-chk-events", false, []string{"-n", "200", "-c", "-e", "-s", "65536"}, 65536, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := nextPort()
			common := append([]string{"-p", port, "-g", "1"}, tc.flags...)
			var srv, cli *proc
			if tc.realSrv {
				srv = realPingpong(t, a, "ibv_rc_pingpong", common...)
			} else {
				srv = start(t, nil, nil, append([]string{"pingpong", "-d", a.socket(), "--timeout", "60s"}, common...)...)
			}
			time.Sleep(500 * time.Millisecond)
			if tc.realSrv {
				cli = start(t, nil, nil, append(append([]string{"pingpong", "-d", b.socket(), "--timeout", "60s"}, common...), a.addr.String())...)
			} else {
				cli = realPingpong(t, b, "ibv_rc_pingpong", append(common, a.addr.String())...)
			}
			if err := cli.wait(t, 90*time.Second); err != nil {
				t.Fatalf("client: %v\n%s\nserver:\n%s", err, cli.out, srv.out)
			}
			if err := srv.wait(t, 30*time.Second); err != nil {
				t.Fatalf("server: %v\n%s\nclient:\n%s", err, srv.out, cli.out)
			}
			for who, out := range map[string]string{"server": srv.out.String(), "client": cli.out.String()} {
				u := checkPP(t, who, out, tc.size, tc.its)
				if strings.Contains(out, "invalid data") {
					t.Errorf("%s: %s", who, out)
				}
				t.Logf("%s %s: %.2f usec/iter", tc.name, who, u)
			}
		})
	}
}

// TestPingpongAgainstRealUD runs irdma-emu pingpong --ud against the real
// ibv_ud_pingpong in both roles.
func TestPingpongAgainstRealUD(t *testing.T) {
	needRealPingpong(t, "ibv_ud_pingpong")
	a, b := twoNodes(t, nil)
	for _, realSrv := range []bool{true, false} {
		name := "real-client"
		if realSrv {
			name = "real-server"
		}
		t.Run(name, func(t *testing.T) {
			port := nextPort()
			common := []string{"-p", port, "-g", "1", "-n", "200", "-s", "1024"}
			ours := func(n *node, host ...string) *proc {
				a := append(append([]string{"pingpong", "--ud", "-d", n.socket(), "--timeout", "60s"}, common...), host...)
				return start(t, nil, nil, a...)
			}
			var srv, cli *proc
			if realSrv {
				srv = realPingpong(t, a, "ibv_ud_pingpong", common...)
				time.Sleep(500 * time.Millisecond)
				cli = ours(b, a.addr.String())
			} else {
				srv = ours(a)
				time.Sleep(500 * time.Millisecond)
				cli = realPingpong(t, b, "ibv_ud_pingpong", append(common, a.addr.String())...)
			}
			if err := cli.wait(t, 90*time.Second); err != nil {
				t.Fatalf("client: %v\n%s\nserver:\n%s", err, cli.out, srv.out)
			}
			if err := srv.wait(t, 30*time.Second); err != nil {
				t.Fatalf("server: %v\n%s\nclient:\n%s", err, srv.out, cli.out)
			}
			for who, out := range map[string]string{"server": srv.out.String(), "client": cli.out.String()} {
				t.Logf("%s %s: %.2f usec/iter", name, who, checkPP(t, who, out, 1024, 200))
			}
		})
	}
}

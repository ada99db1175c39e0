package daemon_test

import (
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

var tcpPort atomic.Int32

func init() { tcpPort.Store(int32(20000 + time.Now().UnixNano()%20000)) }

// nextPort is a TCP port for one exchange (tests may run in parallel).
func nextPort() string { return strconv.Itoa(int(tcpPort.Add(1))) }

var ppIters = regexp.MustCompile(`(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter`)
var ppBytes = regexp.MustCompile(`(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec`)
var ppLocal = regexp.MustCompile(`  local address:  LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID \S+`)
var ppRemote = regexp.MustCompile(`  remote address: LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID \S+`)

// pingpong runs a server on srv and a client on cli (attach sockets) with
// the same extra flags, and returns both outputs.
func pingpong(t *testing.T, srvSock, cliSock, srvAddr string, extra ...string) (string, string) {
	t.Helper()
	return pingpongIn(t, nil, srvSock, cliSock, srvAddr, extra...)
}

// pingpongIn is pingpong with both programs started behind prefix (e.g.
// `ip netns exec NAME`).
func pingpongIn(t *testing.T, prefix []string, srvSock, cliSock, srvAddr string, extra ...string) (string, string) {
	t.Helper()
	port := nextPort()
	sa := append([]string{"pingpong", "-d", srvSock, "-p", port, "--timeout", "60s"}, extra...)
	srv := start(t, nil, prefix, sa...)
	time.Sleep(300 * time.Millisecond) // the server listens after its setup
	ca := append([]string{"pingpong", "-d", cliSock, "-p", port, "--timeout", "60s"}, extra...)
	ca = append(ca, srvAddr)
	var cli *proc
	for try := 0; ; try++ {
		cli = start(t, nil, prefix, ca...)
		err := cli.wait(t, 90*time.Second)
		if err == nil || try == 20 || !regexpConnRefused(cli.out.String()) {
			if err != nil {
				t.Fatalf("client: %v\n%s\nserver:\n%s", err, cli.out, srv.out)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := srv.wait(t, 90*time.Second); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.out)
	}
	return srv.out.String(), cli.out.String()
}

func regexpConnRefused(s string) bool {
	return regexp.MustCompile(`Couldn't connect to`).MatchString(s)
}

// checkPP checks the summary lines and returns usec/iter.
func checkPP(t *testing.T, who, out string, size, iters int) float64 {
	t.Helper()
	if !ppLocal.MatchString(out) || !ppRemote.MatchString(out) {
		t.Errorf("%s: address lines missing:\n%s", who, out)
	}
	mb := ppBytes.FindStringSubmatch(out)
	mi := ppIters.FindStringSubmatch(out)
	if mb == nil || mi == nil {
		t.Fatalf("%s: summary lines missing:\n%s", who, out)
	}
	if mb[1] != fmt.Sprint(2*size*iters) || mi[1] != fmt.Sprint(iters) {
		t.Errorf("%s: summary %q %q for size %d iters %d", who, mb[0], mi[0], size, iters)
	}
	u, _ := strconv.ParseFloat(mi[3], 64)
	return u
}

func TestPingpongLoopback(t *testing.T) {
	a, b := twoNodes(t, nil)
	for _, tc := range []struct {
		name  string
		size  int
		iters int
		flags []string
	}{
		{"default", 4096, 1000, nil},
		{"64k", 65536, 200, []string{"-s", "65536", "-n", "200"}},
		{"events", 4096, 300, []string{"-e", "-n", "300"}},
		{"check", 4096, 300, []string{"-c", "-n", "300"}},
		{"ud", 1024, 300, []string{"--ud", "-s", "1024", "-n", "300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			so, co := pingpong(t, a.socket(), b.socket(), a.addr.String(), tc.flags...)
			us := checkPP(t, "server", so, tc.size, tc.iters)
			uc := checkPP(t, "client", co, tc.size, tc.iters)
			t.Logf("%s: server %.2f usec/iter, client %.2f usec/iter", tc.name, us, uc)
		})
	}
}

package daemon_test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// nsWorld is two network namespaces joined by a veth (rv0 10.77.0.1 in
// ns[0], rv1 10.77.0.2 in ns[1]) with a daemon in each: the device's port,
// its UDP/4791 sockets and its neighbour lookups live in the namespace,
// and the tools run there too (`ip netns exec`), so the RoCEv2 traffic
// and the tools' TCP exchanges cross the veth.
type nsWorld struct {
	ns    [2]*nstest.NS
	nodes [2]*node
	addr  [2]string
}

type nsOpts struct {
	faults link.Faults
	mode   udp.Mode
}

func newNSWorld(t *testing.T, o nsOpts) *nsWorld {
	t.Helper()
	nstest.NeedRoot(t)
	w := &nsWorld{addr: [2]string{"10.77.0.1", "10.77.0.2"}}
	w.ns[0], w.ns[1] = nstest.New(t), nstest.New(t)
	nstest.Veth(t, w.ns[0], "rv0", w.ns[1], "rv1", 1500)
	w.ns[0].AddAddr(t, "rv0", w.addr[0]+"/24")
	w.ns[1].AddAddr(t, "rv1", w.addr[1]+"/24")
	for i := range 2 {
		ns := w.ns[i]
		w.nodes[i] = startNode(t, []string{"iens0", "iens1"}[i], w.addr[i], func(c *daemon.Config) {
			c.NetNS = ns.Path()
			c.Faults = o.faults
			c.Mode = o.mode
			c.Profile = profile.GEN2().WithAtomics(true)
		})
	}
	return w
}

func (w *nsWorld) prefix(i int) []string { return []string{"ip", "netns", "exec", w.ns[i].Name} }

// pingpong runs irdma-emu pingpong: server in ns[0], client in ns[1].
func (w *nsWorld) pingpong(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	port := nextPort()
	srv := start(t, nil, w.prefix(0), append([]string{"pingpong", "-d", w.nodes[0].socket(), "-p", port, "--timeout", "120s"}, extra...)...)
	ca := append([]string{"pingpong", "-d", w.nodes[1].socket(), "-p", port, "--timeout", "120s"}, extra...)
	ca = append(ca, w.addr[0])
	var cli *proc
	for try := 0; ; try++ {
		time.Sleep(300 * time.Millisecond)
		cli = start(t, nil, w.prefix(1), ca...)
		err := cli.wait(t, 150*time.Second)
		if err == nil {
			break
		}
		if try == 20 || !regexpConnRefused(cli.out.String()) {
			t.Fatalf("client: %v\n%s\nserver:\n%s", err, cli.out, srv.out)
		}
	}
	if err := srv.wait(t, 30*time.Second); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.out)
	}
	return srv.out.String(), cli.out.String()
}

// perf runs irdma-emu perf with the server on node srv and the client on
// the other.
func (w *nsWorld) perf(t *testing.T, srv int, verb string, extra ...string) string {
	t.Helper()
	cli := 1 - srv
	_, co := perfRun(t, w.prefix(srv), w.prefix(cli), w.nodes[srv].socket(), w.nodes[cli].socket(), w.addr[srv], verb, extra...)
	return co
}

// TestNamespacePingpongPerf is issue 5's first Done-when item: pingpong and
// every perf mode between two daemons in two namespaces joined by a veth.
func TestNamespacePingpongPerf(t *testing.T) {
	w := newNSWorld(t, nsOpts{})
	for _, tc := range []struct {
		name      string
		size, its int
		flags     []string
	}{
		{"default", 4096, 1000, nil},
		{"64k", 65536, 100, []string{"-s", "65536", "-n", "100"}},
		{"events", 4096, 200, []string{"-e", "-n", "200"}},
		{"check", 4096, 200, []string{"-c", "-n", "200"}},
		{"ud", 1024, 200, []string{"--ud", "-s", "1024", "-n", "200"}},
	} {
		t.Run("pingpong-"+tc.name, func(t *testing.T) {
			so, co := w.pingpong(t, tc.flags...)
			t.Logf("pingpong %s: %.2f / %.2f usec/iter (server/client)", tc.name,
				checkPP(t, "server", so, tc.size, tc.its), checkPP(t, "client", co, tc.size, tc.its))
		})
	}
	for _, tc := range []struct {
		verb  string
		flags []string
		lat   bool
	}{
		{"write", []string{"-n", "200", "--check"}, false},
		{"read", []string{"-n", "200", "--check"}, false},
		{"send", []string{"-n", "200", "--check"}, false},
		{"atomic", []string{"-n", "200", "--check"}, false},
		{"write", []string{"-n", "100", "-b", "-q", "2", "--check"}, false},
		{"write", []string{"--lat", "-n", "200", "--check"}, true},
		{"read", []string{"--lat", "-n", "200"}, true},
		{"send", []string{"--lat", "-n", "200", "--check"}, true},
		{"atomic", []string{"--lat", "-n", "200", "--check"}, true},
	} {
		name := "perf-" + tc.verb + strings.Join(tc.flags, "")
		t.Run(name, func(t *testing.T) {
			co := w.perf(t, 0, tc.verb, tc.flags...)
			if tc.lat {
				tavg, model := parseLat(t, co)
				t.Logf("%s: t_avg %.2f usec; modelled E810 %.2f usec", name, tavg, model)
				return
			}
			for _, r := range parseBW(t, co, tc.flags...) {
				t.Logf("%s %d B: %.2f MB/s avg, %.2f peak, %.4f Mpps; modelled E810 %.2f MB/s (%s)",
					name, r.size, r.avg, r.peak, r.rate, r.modelBW, r.bottleneck)
			}
		})
	}
}

// statsTool runs `irdma-emu stats --json` on node n and returns the port
// counters.
func statsTool(t *testing.T, n *node) daemon.Counters {
	t.Helper()
	out, err := exec.Command(emuBinary(t), "stats", "--json", "--run-dir", n.runDir, "--device", n.d.Name()).Output()
	if err != nil {
		t.Fatalf("irdma-emu stats: %v\n%s", err, out)
	}
	var s daemon.Stats
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("irdma-emu stats --json: %v\n%s", err, out)
	}
	return s.Port.Counters
}

func sumCounters(cs ...daemon.Counters) (retrans, dups, icrcBad, oos uint64) {
	for _, c := range cs {
		retrans += c.Retransmissions
		dups += c.DuplicateRequests
		icrcBad += c.ICRC.Failed
		oos += c.OutOfSequence
	}
	return
}

// lossyPerf runs perf write, read and send of 1 MiB messages with payload
// checks; the data flows into ns[0] (write/send servers there, the read
// client there).
func lossyPerf(t *testing.T, w *nsWorld) {
	t.Helper()
	for _, tc := range []struct {
		verb  string
		srv   int
		flags []string
	}{
		{"write", 0, []string{"-t", "16", "-Q", "4"}},
		{"send", 0, []string{"-t", "16", "-Q", "4"}},
		// One READ at a time, and five of them: a lost or overtaken
		// response makes the requester drop the rest of the READ's
		// responses and wait for its retransmission timer (the daemon's
		// 67 ms RTO), some thirty times per MiB here. The responder
		// restarts the answer in progress at a re-request's PSN
		// (emu/qp responder.go restartRead), but with many READs
		// outstanding it still sends the later READs' answers, which at
		// the emulator's speed can outlast seven timer periods and exhaust
		// the retry count (an E810 drains them in about a millisecond).
		{"read", 1, []string{"-t", "2", "-Q", "1", "-o", "1", "-n", "5"}},
	} {
		args := append([]string{"-s", "1048576", "-n", "10", "--check"}, tc.flags...) // a later -n wins
		co := w.perf(t, tc.srv, tc.verb, args...)
		for _, r := range parseBW(t, co) {
			t.Logf("%s 1 MiB: %.2f MB/s; modelled E810 %.2f MB/s", tc.verb, r.avg, r.modelBW)
		}
	}
}

// TestNamespaceKernelLoss is issue 5's second Done-when item, first half:
// nftables in ns[0] drops 3% of the RoCEv2 frames it receives; perf write,
// read and send of 1 MiB messages still complete byte-exact, and
// `irdma-emu stats` shows the retransmissions.
func TestNamespaceKernelLoss(t *testing.T) {
	testenv.Tool(t, "nft")
	// UDP sockets receive: the input chain sees every frame before the
	// daemon does (an AF_PACKET receiver would see them before netfilter).
	w := newNSWorld(t, nsOpts{mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	rules := `table inet irdmaemu {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport 4791 numgen random mod 33 == 0 counter drop
	}
}`
	cmd := w.ns[0].Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	lossyPerf(t, w)
	c0, c1 := statsTool(t, w.nodes[0]), statsTool(t, w.nodes[1])
	retrans, dups, _, oos := sumCounters(c0, c1)
	dropped := nftDrops(t, w.ns[0])
	t.Logf("nftables dropped %d frames; retransmissions %d, out-of-sequence %d, duplicates %d, timeouts %d/%d, NAKs sent %v/%v",
		dropped, retrans, oos, dups, c0.Timeouts, c1.Timeouts, c0.NAKsSent, c1.NAKsSent)
	if dropped == 0 || retrans == 0 {
		t.Errorf("no loss recovery: %d dropped, %d retransmissions", dropped, retrans)
	}
}

// nftDrops reads the drop rule's packet counter.
func nftDrops(t *testing.T, ns *nstest.NS) uint64 {
	t.Helper()
	out := ns.Run(t, "nft", "list", "table", "inet", "irdmaemu")
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i := range f {
			if f[i] == "packets" && i+1 < len(f) {
				var n uint64
				for _, c := range f[i+1] {
					if c < '0' || c > '9' {
						break
					}
					n = n*10 + uint64(c-'0')
				}
				return n
			}
		}
	}
	t.Fatalf("no counter in\n%s", out)
	return 0
}

// TestNamespaceInjectedFaults is the second half: the daemons' own
// reordering, duplication and corruption (--fault); the transfers complete
// byte-exact and the stats show retransmissions, duplicates and ICRC drops.
func TestNamespaceInjectedFaults(t *testing.T) {
	f, err := link.ParseFaults("reorder=0.02,dup=0.02,corrupt=0.01,seed=5")
	if err != nil {
		t.Fatal(err)
	}
	w := newNSWorld(t, nsOpts{faults: f})
	lossyPerf(t, w)
	c0, c1 := statsTool(t, w.nodes[0]), statsTool(t, w.nodes[1])
	retrans, dups, icrc, oos := sumCounters(c0, c1)
	t.Logf("retransmissions %d, duplicate requests %d, ICRC drops %d, out-of-sequence %d", retrans, dups, icrc, oos)
	if retrans == 0 || dups == 0 || icrc == 0 {
		t.Errorf("want retransmissions, duplicates and ICRC drops: %d, %d, %d", retrans, dups, icrc)
	}
}

// TestNamespaceCapture is the third item: a tcpdump capture on the veth
// during pingpong and perf decodes with every packet's ICRC good in
// `irdma-emu decode`, and tshark decodes every frame as RoCEv2. The
// daemons send one datagram per frame (gso=off): veth carries a GSO send
// uncut, so a capture there shows a run of frames as one datagram
// (docs/transport.md "Segmentation offload").
func TestNamespaceCapture(t *testing.T) {
	w := newNSWorld(t, nsOpts{mode: udp.Mode{NoGSO: true}})
	capture := nstest.StartCapture(t, w.ns[0], "rv0")
	w.pingpong(t, "-n", "100")
	w.pingpong(t, "--ud", "-s", "512", "-n", "50")
	w.perf(t, 0, "write", "-n", "50", "-s", "16384")
	w.perf(t, 0, "read", "-n", "50", "-s", "16384")
	w.perf(t, 0, "atomic", "-n", "50")
	file := capture.Stop(t)
	out, err := exec.Command(emuBinary(t), "decode", "--json", file).Output()
	if err != nil {
		t.Fatalf("irdma-emu decode: %v\n%s", err, tail(string(out)))
	}
	pkts, bad := 0, 0
	ops := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("decode line %q: %v", sc.Text(), err)
		}
		if _, ok := m["summary"]; ok {
			continue
		}
		pkts++
		if ok, _ := m["icrc_ok"].(bool); !ok {
			bad++
		}
		if name, ok := m["opcode_name"].(string); ok {
			ops[name]++
		}
	}
	if pkts < 1000 || bad != 0 {
		t.Errorf("%d packets decoded, %d with a bad ICRC or undecodable", pkts, bad)
	}
	rows := tsharkRows(t, file)
	unknown := 0
	for _, r := range rows {
		if r < 0 {
			unknown++
		}
	}
	if len(rows) != pkts || unknown != 0 {
		t.Errorf("tshark decoded %d frames (%d without a BTH opcode); irdma-emu decode %d", len(rows), unknown, pkts)
	}
	t.Logf("capture: %d RoCEv2 packets, all ICRCs good, tshark decoded %d; opcodes %v", pkts, len(rows), ops)
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// tsharkRows returns the BTH opcode tshark finds in each frame (-1 for
// none), udp.port 4791 decoded as InfiniBand as Wireshark does by default.
func tsharkRows(t *testing.T, file string) []int {
	t.Helper()
	path := testenv.Tool(t, "tshark")
	args := []string{"-r", file, "-n", "-d", "udp.port==4791,infiniband", "-T", "fields", "-e", "infiniband.bth.opcode"}
	out, err := exec.Command(path, append([]string{"--disable-heuristic", "rpcrdma_infiniband"}, args...)...).Output()
	if err != nil {
		if out, err = exec.Command(path, args...).Output(); err != nil {
			t.Fatalf("tshark: %v", err)
		}
	}
	var rows []int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		v := strings.TrimSpace(sc.Text())
		if v == "" {
			rows = append(rows, -1)
			continue
		}
		n := 0
		for _, c := range v {
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
			}
		}
		rows = append(rows, n)
	}
	return rows
}

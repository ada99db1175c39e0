package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure the emulator against plain UDP and memcpy on this machine, in one run (docs/performance.md)",
		run:     runBench,
	})
}

const benchUsage = `usage: irdma-emu bench [--quick] [--json] [--addrs A,B,C] [--skip LIST]

Measures, in one run on this machine, the baselines — plain UDP on
loopback (sendmmsg/recvmmsg batches of 64, one sender and one receiver,
64 B and 4 KiB datagrams; the unbatched round trip of 8 bytes), each on
the idle machine and with two busy-looping processes, and one thread's
memcpy of 1 MiB blocks — then the emulator: unmodified perftest
(ib_write_bw -s 65536, -s 4096, -q 1/4/16; ib_send_bw -s 64;
ib_write_lat -s 8 -I 64) and ibv_rc_pingpong through 'irdma-emu exec',
and the Go client (irdma-emu perf write --lat), between two daemons
(addresses A and B) and on one daemon (address C). It prints each figure
with the baseline it is judged against and their ratio (perftest's MB/sec
is 2^20 bytes; so are the UDP and memcpy MB/s here), the machine's core
count and load. Ratios, not absolute figures, are what compare across
machines; nothing here is a pass/fail test.

The daemons are started for the run (in a temporary run directory) and
stopped after it. Programs missing from PATH are reported and skipped.

Exit status: 0 every measurement ran; 1 some failed (the rest is still
reported); 2 usage.

flags:
`

// benchOptions are the command line.
type benchOptions struct {
	quick bool
	json  bool
	addrs []string // two-daemon pair, then the one-daemon address
	skip  map[string]bool
	// idleQPs is how many connected RC QPs the idle part's program holds
	// (0: 1000, or 200 with --quick).
	idleQPs int
}

// benchParts are the parts --skip names.
var benchParts = []string{"udp", "busy", "memcpy", "perftest", "pingpong", "goclient", "one-daemon", "two-daemons", "idle"}

func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, int, bool) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o benchOptions
	fs.BoolVar(&o.quick, "quick", false, "short runs (fewer iterations, shorter UDP runs): a quick look, noisier figures")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON instead of a table")
	addrs := fs.String("addrs", "127.0.80.2,127.0.80.3,127.0.80.4", "`A,B,C`: the two daemons' addresses, then the one daemon's (loopback addresses need no setup)")
	fs.IntVar(&o.idleQPs, "idle-qps", 0, "connected RC QPs the idle part's program holds, an even number (default 1000, 200 with --quick)")
	skip := fs.String("skip", "", "comma-separated parts to leave out: "+strings.Join(benchParts, ", "))
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, exitOK, false
		}
		return o, exitUsage, false
	}
	if o.idleQPs < 0 || o.idleQPs == 1 || o.idleQPs%2 != 0 {
		fmt.Fprintf(stderr, "irdma-emu bench: --idle-qps: %d is not an even number of QPs\n", o.idleQPs)
		return o, exitUsage, false
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "irdma-emu bench: unexpected argument %q\n", fs.Arg(0))
		return o, exitUsage, false
	}
	for _, a := range strings.Split(*addrs, ",") {
		ip := net.ParseIP(strings.TrimSpace(a))
		if ip == nil || ip.To4() == nil {
			fmt.Fprintf(stderr, "irdma-emu bench: --addrs: %q is not an IPv4 address\n", a)
			return o, exitUsage, false
		}
		o.addrs = append(o.addrs, ip.String())
	}
	if len(o.addrs) != 3 {
		fmt.Fprintf(stderr, "irdma-emu bench: --addrs wants three addresses, got %d\n", len(o.addrs))
		return o, exitUsage, false
	}
	o.skip = map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slicesContains(benchParts, s) {
			fmt.Fprintf(stderr, "irdma-emu bench: --skip: unknown part %q (parts: %s)\n", s, strings.Join(benchParts, ", "))
			return o, exitUsage, false
		}
		o.skip[s] = true
	}
	return o, exitOK, true
}

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// benchFigure is one measured figure; Ratio is Value over the figure named
// Against (same unit), with the Target for it, if any.
type benchFigure struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Against string  `json:"against,omitempty"`
	Base    float64 `json:"baseline,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	Target  string  `json:"target,omitempty"`
}

// benchReport is what a run prints.
type benchReport struct {
	Cores      int           `json:"cores"`
	LoadBefore [3]float64    `json:"load_before"`
	LoadAfter  [3]float64    `json:"load_after"`
	Quick      bool          `json:"quick"`
	Baselines  []benchFigure `json:"baselines"`
	Results    []benchFigure `json:"results"`
	Errors     []string      `json:"errors,omitempty"`
}

func (r *benchReport) base(name string) (benchFigure, bool) {
	for _, b := range r.Baselines {
		if b.Name == name {
			return b, true
		}
	}
	for _, b := range r.Results {
		if b.Name == name {
			return b, true
		}
	}
	return benchFigure{}, false
}

// add records a result judged against baseline against (if measured).
func (r *benchReport) add(name string, v float64, unit, against, target string) {
	f := benchFigure{Name: name, Value: v, Unit: unit, Target: target}
	if b, ok := r.base(against); ok && b.Value > 0 {
		f.Against, f.Base, f.Ratio = against, b.Value, v/b.Value
	}
	r.Results = append(r.Results, f)
}

func (r *benchReport) fail(format string, a ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, a...))
}

// loadAvg reads /proc/loadavg.
func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b))[:3] {
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if os.Getenv(benchSpinEnv) != "" {
		spin()
	}
	if os.Getenv(benchEchoEnv) != "" {
		if err := echoProgram(os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "irdma-emu bench (echo): %v\n", err)
			return exitFail
		}
		return exitOK
	}
	if sock := os.Getenv(benchIdleEnv); sock != "" {
		n, _ := strconv.Atoi(os.Getenv(benchIdleQPsEnv))
		if err := idleProgram(sock, n, os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "irdma-emu bench (idle program): %v\n", err)
			return exitFail
		}
		return exitOK
	}
	o, rc, ok := parseBenchFlags(args, stderr)
	if !ok {
		return rc
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu bench: %v\n", err)
		return exitFail
	}
	rep := &benchReport{Cores: runtime.NumCPU(), LoadBefore: loadAvg(), Quick: o.quick}
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	benchBaselines(rep, o, self, progress)
	if !o.skip["perftest"] || !o.skip["pingpong"] || !o.skip["goclient"] {
		benchEmulator(rep, o, self, progress)
	}
	if !o.skip["idle"] {
		benchIdle(rep, o, self, progress)
	}
	rep.LoadAfter = loadAvg()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	if len(rep.Errors) > 0 {
		return exitFail
	}
	return exitOK
}

// benchBaselines measures UDP (idle, then with two busy loops) and memcpy.
func benchBaselines(rep *benchReport, o benchOptions, self string, progress func(string, ...any)) {
	d, iters := 2*time.Second, 20000
	if o.quick {
		d, iters = 400*time.Millisecond, 3000
	}
	udp := func(load string) {
		progress("UDP, %s", load)
		for _, size := range []int{64, 4096} {
			rate, err := udpStream(size, d)
			if err != nil {
				rep.fail("udp %d B %s: %v", size, load, err)
				continue
			}
			tag := "64"
			if size == 4096 {
				tag = "4k"
				rep.Baselines = append(rep.Baselines, benchFigure{Name: "udp.4k.bw." + load, Value: rate * 4096 / (1 << 20), Unit: "MB/s"})
			}
			rep.Baselines = append(rep.Baselines, benchFigure{Name: "udp." + tag + ".rate." + load, Value: rate, Unit: "msg/s"})
		}
		p50, p99, err := udpRoundTrip(iters)
		if err != nil {
			rep.fail("udp round trip %s: %v", load, err)
			return
		}
		us := func(t time.Duration) float64 { return float64(t) / float64(time.Microsecond) }
		rep.Baselines = append(rep.Baselines,
			benchFigure{Name: "udp.rtt." + load, Value: us(p50), Unit: "us"},
			benchFigure{Name: "udp.rtt.p99." + load, Value: us(p99), Unit: "us"},
			benchFigure{Name: "udp.oneway." + load, Value: us(p50) / 2, Unit: "us"})
	}
	if !o.skip["udp"] {
		udp("idle")
		if !o.skip["busy"] {
			stop, err := spinners(self, 2)
			if err != nil {
				rep.fail("busy loops: %v", err)
			} else {
				udp("busy")
				stop()
			}
		}
	}
	if !o.skip["memcpy"] {
		progress("memcpy")
		rep.Baselines = append(rep.Baselines, benchFigure{Name: "memcpy.1m", Value: memcpyRate(d/2) / (1 << 20), Unit: "MB/s"})
	}
}

// benchDaemon is one `irdma-emu run` the bench started.
type benchDaemon struct {
	name, addr, runDir string
	cmd                *exec.Cmd
	out                bytes.Buffer
	exited             chan struct{}
}

func (d *benchDaemon) socket() string { return filepath.Join(d.runDir, d.name+".sock") }

func startBenchDaemon(self, runDir, name, addr string) (*benchDaemon, error) {
	d := &benchDaemon{name: name, addr: addr, runDir: runDir}
	d.cmd = exec.Command(self, "run", "--name", name, "--addr", addr, "--run-dir", runDir, "--log-level", "warn")
	d.cmd.Stdout, d.cmd.Stderr = &d.out, &d.out
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	d.exited = exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return nil, fmt.Errorf("daemon %s on %s exited:\n%s", name, addr, d.out.String())
		default:
		}
		if c, err := daemon.Dial(filepath.Join(runDir, name+".ctl")); err == nil {
			_, err = c.Ping()
			c.Close()
			if err == nil {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("daemon %s on %s not up after 30s:\n%s", name, addr, d.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *benchDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// benchProg runs argv on d (through exec, or as is for the Go client) and
// returns its output.
type benchProg struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

func startProg(self string, d *benchDaemon, direct bool, argv ...string) (*benchProg, error) {
	p := &benchProg{done: make(chan error, 1)}
	if direct {
		p.cmd = exec.Command(self, argv...)
	} else {
		p.cmd = exec.Command(self, append([]string{"exec", "--run-dir", d.runDir, "--device", d.name, "--"}, argv...)...)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

func (p *benchProg) wait(within time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("still running after %v", within)
	}
}

// freeTCPPort returns a port nothing listens on now.
func freeTCPPort() (string, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// listening reports a TCP socket listening on port (/proc/net/tcp{,6}): a
// connection to find out would be taken for the client by perftest.
func listening(port string) bool {
	pn, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", pn)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			if len(fl) > 3 && strings.HasSuffix(fl[1], want) && fl[3] == "0A" {
				f.Close()
				return true
			}
		}
		f.Close()
	}
	return false
}

// runPair runs a server on srv and its client on cli (connecting to srv's
// address) and returns the client's output.
func runPair(self string, srv, cli *benchDaemon, direct bool, portFlag string, argv ...string) (string, error) {
	port, err := freeTCPPort()
	if err != nil {
		return "", err
	}
	a := append(append([]string{}, argv...), portFlag, port)
	s, err := startProg(self, srv, direct, a...)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !listening(port) {
		select {
		case err := <-s.done:
			return "", fmt.Errorf("server exited before it listened (%v):\n%s", err, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.wait(0)
			return "", fmt.Errorf("server does not listen after 30s:\n%s", s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := startProg(self, cli, direct, append(a, srv.addr)...)
	if err != nil {
		_ = s.wait(0)
		return "", err
	}
	cerr := c.wait(5 * time.Minute)
	serr := s.wait(30 * time.Second)
	if cerr != nil || serr != nil {
		return c.out.String(), fmt.Errorf("client: %v, server: %v\nclient output:\n%s\nserver output:\n%s", cerr, serr, c.out.String(), s.out.String())
	}
	return c.out.String(), nil
}

// Result lines of perftest 4.5 (and of irdma-emu perf, which prints the
// same tables): bandwidth "#bytes #iterations BW peak BW average
// MsgRate[Mpps]", latency "#bytes #iterations t_min t_max t_typical t_avg
// t_stdev 99% 99.9%".
var (
	benchBWRow  = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
	benchLatRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
	benchPPRow  = regexp.MustCompile(`(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter`)
)

// bwResult is a perftest bandwidth row: the average in MB/s (2^20) and the
// message rate in messages per second.
type bwResult struct{ MBps, MsgRate float64 }

func parseBW(out string) (bwResult, error) {
	m := benchBWRow.FindStringSubmatch(out)
	if m == nil {
		return bwResult{}, errors.New("no bandwidth row in the output")
	}
	avg, _ := strconv.ParseFloat(m[4], 64)
	mpps, _ := strconv.ParseFloat(m[5], 64)
	return bwResult{MBps: avg, MsgRate: mpps * 1e6}, nil
}

// latResult is a perftest latency row (µs).
type latResult struct{ Typical, P99 float64 }

func parseLat(out string) (latResult, error) {
	m := benchLatRow.FindStringSubmatch(out)
	if m == nil {
		return latResult{}, errors.New("no latency row in the output")
	}
	typ, _ := strconv.ParseFloat(m[5], 64)
	p99, _ := strconv.ParseFloat(m[8], 64)
	return latResult{Typical: typ, P99: p99}, nil
}

// parsePingpong returns ibv_rc_pingpong's usec/iter.
func parsePingpong(out string) (float64, error) {
	m := benchPPRow.FindStringSubmatch(out)
	if m == nil {
		return 0, errors.New("no usec/iter line in the output")
	}
	return strconv.ParseFloat(m[3], 64)
}

// benchEmulator runs the programs between two daemons, then on one.
func benchEmulator(rep *benchReport, o benchOptions, self string, progress func(string, ...any)) {
	runDir, err := os.MkdirTemp("", "irdma-emu-bench-")
	if err != nil {
		rep.fail("run directory: %v", err)
		return
	}
	defer os.RemoveAll(runDir)
	n := func(full, quick int) string {
		if o.quick {
			return strconv.Itoa(quick)
		}
		return strconv.Itoa(full)
	}
	have := func(prog string) bool {
		if _, err := exec.LookPath(prog); err != nil {
			rep.fail("%s not found in PATH: skipped (Debian: perftest, ibverbs-utils)", prog)
			return false
		}
		return true
	}
	type setup struct {
		tag      string // "2d" or "1d"
		srv, cli *benchDaemon
	}
	var setups []setup
	if !o.skip["two-daemons"] {
		a, err := startBenchDaemon(self, runDir, "bencha", o.addrs[0])
		if err != nil {
			rep.fail("%v", err)
			return
		}
		defer a.stop()
		b, err := startBenchDaemon(self, runDir, "benchb", o.addrs[1])
		if err != nil {
			rep.fail("%v", err)
			return
		}
		defer b.stop()
		setups = append(setups, setup{"2d", a, b})
	}
	if !o.skip["one-daemon"] {
		c, err := startBenchDaemon(self, runDir, "benchc", o.addrs[2])
		if err != nil {
			rep.fail("%v", err)
			return
		}
		defer c.stop()
		setups = append(setups, setup{"1d", c, c})
	}
	for _, s := range setups {
		two := s.tag == "2d"
		bwAgainst := func(udp string) string {
			if two {
				return udp
			}
			return "memcpy.1m"
		}
		target := func(t2, t1 string) string {
			if two {
				return t2
			}
			return t1
		}
		if !o.skip["perftest"] && have("ib_write_bw") && have("ib_send_bw") && have("ib_write_lat") {
			type bwCase struct {
				name, tool, size, iters, qps string
			}
			// One daemon moves 64 KiB messages about eight times as fast
			// and 4 KiB ones three times: as many more, so its runs last
			// as long.
			big, mid := 1, 1
			if !two {
				big, mid = 8, 3
			}
			cases := []bwCase{
				// About 2 s each, as long as the UDP baselines' windows:
				// perftest's average includes the start, which a
				// fraction of a second overweights (one daemon's 64 KiB
				// run lasted 0.3 s and gave 0.18–0.28 × memcpy from
				// bench to bench).
				{"ib_write_bw -s 65536", "ib_write_bw", "65536", n(20000*big, 1000), "1"},
				{"ib_write_bw -s 4096", "ib_write_bw", "4096", n(150000*mid, 10000), "1"},
				{"ib_send_bw -s 64", "ib_send_bw", "64", n(100000, 10000), "1"},
				{"ib_write_bw -s 65536 -q 4", "ib_write_bw", "65536", n(5000*big, 500), "4"},
				{"ib_write_bw -s 65536 -q 16", "ib_write_bw", "65536", n(1250*big, 125), "16"},
			}
			for _, c := range cases {
				progress("%s %s", s.tag, c.name)
				out, err := runPair(self, s.srv, s.cli, false, "-p", c.tool, "-x", "1", "-F", "-s", c.size, "-n", c.iters, "-q", c.qps)
				if err != nil {
					rep.fail("%s %s: %v", s.tag, c.name, err)
					continue
				}
				r, err := parseBW(out)
				if err != nil {
					rep.fail("%s %s: %v\n%s", s.tag, c.name, err, out)
					continue
				}
				name := s.tag + " " + c.name
				switch c.name {
				case "ib_write_bw -s 65536":
					rep.add(name, r.MBps, "MB/s", bwAgainst("udp.4k.bw.idle"), target("≥ 0.5", "≥ 0.25"))
				case "ib_write_bw -s 4096":
					rep.add(name, r.MsgRate, "msg/s", "udp.4k.rate.idle", "")
				case "ib_send_bw -s 64":
					rep.add(name, r.MsgRate, "msg/s", "udp.64.rate.idle", target("≥ 0.3", ""))
				case "ib_write_bw -s 65536 -q 16":
					rep.add(name, r.MBps, "MB/s", s.tag+" ib_write_bw -s 65536", target("≥ 1", ""))
				default: // -q 4
					rep.add(name, r.MBps, "MB/s", s.tag+" ib_write_bw -s 65536", "")
				}
			}
			progress("%s ib_write_lat -s 8 -I 64", s.tag)
			out, err := runPair(self, s.srv, s.cli, false, "-p", "ib_write_lat", "-x", "1", "-F", "-s", "8", "-I", "64", "-n", n(5000, 1000))
			if err == nil {
				var l latResult
				if l, err = parseLat(out); err == nil {
					rep.add(s.tag+" ib_write_lat t_typical", l.Typical, "us", "udp.oneway.busy", target("≤ 3", ""))
					rep.add(s.tag+" ib_write_lat p99", l.P99, "us", "udp.oneway.busy", target("≤ 10", ""))
				}
			}
			if err != nil {
				rep.fail("%s ib_write_lat: %v", s.tag, err)
			}
		}
		if !o.skip["pingpong"] && have("ibv_rc_pingpong") {
			progress("%s ibv_rc_pingpong", s.tag)
			out, err := runPair(self, s.srv, s.cli, false, "-p", "ibv_rc_pingpong", "-g", "1", "-n", n(1000, 300))
			if err == nil {
				var us float64
				if us, err = parsePingpong(out); err == nil {
					rep.add(s.tag+" ibv_rc_pingpong", us, "us/iter", "udp.rtt.busy", target("≤ 3", ""))
				}
			}
			if err != nil {
				rep.fail("%s ibv_rc_pingpong: %v", s.tag, err)
			}
		}
		if !o.skip["goclient"] {
			progress("%s perf write --lat", s.tag)
			out, err := runPairPerf(self, s.srv, s.cli, n(5000, 1000))
			if err == nil {
				var l latResult
				if l, err = parseLat(out); err == nil {
					rep.add(s.tag+" perf write --lat t_typical", l.Typical, "us", "udp.oneway.idle", target("≤ 2", ""))
				}
			}
			if err != nil {
				rep.fail("%s perf write --lat: %v", s.tag, err)
			}
		}
	}
}

// runPairPerf runs the Go client's latency test (irdma-emu perf write
// --lat) between srv and cli.
func runPairPerf(self string, srv, cli *benchDaemon, iters string) (string, error) {
	port, err := freeTCPPort()
	if err != nil {
		return "", err
	}
	args := func(d *benchDaemon) []string {
		return []string{"perf", "write", "--lat", "--no-model", "-s", "8", "-n", iters, "-d", d.socket(), "-p", port}
	}
	s, err := startProg(self, srv, true, args(srv)...)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !listening(port) {
		if time.Now().After(deadline) {
			_ = s.wait(0)
			return "", fmt.Errorf("perf server does not listen:\n%s", s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := startProg(self, cli, true, append(args(cli), srv.addr)...)
	if err != nil {
		_ = s.wait(0)
		return "", err
	}
	cerr := c.wait(5 * time.Minute)
	serr := s.wait(30 * time.Second)
	if cerr != nil || serr != nil {
		return "", fmt.Errorf("client: %v, server: %v\n%s\n%s", cerr, serr, c.out.String(), s.out.String())
	}
	return c.out.String(), nil
}

// print writes the report as two tables: baselines, then results.
func (r *benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "irdma-emu bench: %d cores, load %.2f %.2f %.2f before, %.2f %.2f %.2f after", r.Cores,
		r.LoadBefore[0], r.LoadBefore[1], r.LoadBefore[2], r.LoadAfter[0], r.LoadAfter[1], r.LoadAfter[2])
	if r.Quick {
		fmt.Fprint(w, " (--quick)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nbaseline\tvalue\tunit")
	for _, b := range r.Baselines {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Name, benchNum(b.Value), b.Unit)
	}
	fmt.Fprintln(tw, "\nresult\tvalue\tunit\tagainst\tbaseline\tratio\ttarget")
	for _, f := range r.Results {
		ratio, base := "", ""
		if f.Against != "" {
			ratio, base = fmt.Sprintf("%.3g", f.Ratio), benchNum(f.Base)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, benchNum(f.Value), f.Unit, f.Against, base, ratio, f.Target)
	}
	tw.Flush()
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

// benchNum prints a figure with three significant digits or as an integer.
func benchNum(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

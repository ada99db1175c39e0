package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// Result tables as perftest 4.5 and ibv_rc_pingpong print them (written
// by hand after their printf formats: perftest's print_report_bw /
// print_report_lat, rc_pingpong.c's closing lines).
const (
	perftestBWOut = `---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : irdma0
 Number of qps   : 1		Transport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             241.35             240.12 		   0.003842
---------------------------------------------------------------------------------------
`
	perftestLatOut = `---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 8       1000          69.10          2611.40      583.21             601.15         300.12          2499.00                2611.40  
---------------------------------------------------------------------------------------
`
	pingpongOut = `  local address:  LID 0x0000, QPN 0x000003, PSN 0x9a6a2b, GID ::ffff:127.0.80.3
  remote address: LID 0x0000, QPN 0x000003, PSN 0x11d4e5, GID ::ffff:127.0.80.2
8192000 bytes in 1.40 seconds = 46.81 Mbit/sec
1000 iters in 1.40 seconds = 1400.12 usec/iter
`
)

func TestBenchParseOutputs(t *testing.T) {
	bw, err := parseBW(perftestBWOut)
	if err != nil || bw.MBps != 240.12 || math.Abs(bw.MsgRate-3842) > 1e-6 {
		t.Errorf("parseBW: %+v %v, want 240.12 MB/s and 3842 msg/s", bw, err)
	}
	lat, err := parseLat(perftestLatOut)
	if err != nil || lat.Typical != 583.21 || lat.P99 != 2499 {
		t.Errorf("parseLat: %+v %v, want t_typical 583.21, p99 2499", lat, err)
	}
	us, err := parsePingpong(pingpongOut)
	if err != nil || us != 1400.12 {
		t.Errorf("parsePingpong: %v %v, want 1400.12", us, err)
	}
	// A program that died before its table is an error, not a zero.
	for name, f := range map[string]func(string) error{
		"bw":       func(s string) error { _, err := parseBW(s); return err },
		"lat":      func(s string) error { _, err := parseLat(s); return err },
		"pingpong": func(s string) error { _, err := parsePingpong(s); return err },
	} {
		if f("Couldn't connect to 127.0.80.2:18515\n") == nil {
			t.Errorf("%s: no error for output without a result", name)
		}
	}
	// The bandwidth row is not taken for a latency row or the reverse.
	if _, err := parseLat(perftestBWOut); err == nil {
		t.Error("parseLat accepted a bandwidth table")
	}
}

func TestBenchFlags(t *testing.T) {
	tests := []struct {
		args []string
		rc   int
		want string // in stderr
	}{
		{[]string{"--quick", "--json"}, exitOK, ""},
		{[]string{"--skip", "udp,busy,perftest"}, exitOK, ""},
		{[]string{"--addrs", "127.0.1.2,127.0.1.3,127.0.1.4"}, exitOK, ""},
		{[]string{"--addrs", "127.0.1.2,127.0.1.3"}, exitUsage, "three addresses"},
		{[]string{"--addrs", "127.0.1.2,::1,127.0.1.4"}, exitUsage, "not an IPv4"},
		{[]string{"--skip", "udp,everything"}, exitUsage, "unknown part"},
		{[]string{"--idle-qps", "64"}, exitOK, ""},
		{[]string{"--idle-qps", "7"}, exitUsage, "not an even number"},
		{[]string{"--idle-qps", "-2"}, exitUsage, "not an even number"},
		{[]string{"stray"}, exitUsage, "unexpected argument"},
		{[]string{"--nope"}, exitUsage, "not defined"},
	}
	for _, tc := range tests {
		var errb bytes.Buffer
		o, rc, _ := parseBenchFlags(tc.args, &errb)
		if rc != tc.rc || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: status %d %q, want %d with %q", tc.args, rc, errb.String(), tc.rc, tc.want)
		}
		if rc == exitOK && len(o.addrs) != 3 {
			t.Errorf("%q: addrs %v", tc.args, o.addrs)
		}
	}
}

// TestBenchReportShape: a ratio is the value over the named baseline, a
// result without a measured baseline has none, and the JSON carries the
// machine's figures and both lists.
func TestBenchReportShape(t *testing.T) {
	r := &benchReport{Cores: 2, LoadBefore: [3]float64{0.5, 0.4, 0.3}}
	r.Baselines = append(r.Baselines, benchFigure{Name: "udp.4k.bw.idle", Value: 1000, Unit: "MB/s"})
	r.add("2d ib_write_bw -s 65536", 250, "MB/s", "udp.4k.bw.idle", "≥ 0.5")
	r.add("2d ib_write_bw -s 65536 -q 16", 500, "MB/s", "2d ib_write_bw -s 65536", "≥ 1")
	r.add("2d ib_write_lat t_typical", 40, "us", "udp.oneway.busy", "≤ 3") // not measured
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cores      int           `json:"cores"`
		LoadBefore []float64     `json:"load_before"`
		LoadAfter  []float64     `json:"load_after"`
		Baselines  []benchFigure `json:"baselines"`
		Results    []map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cores != 2 || len(got.LoadBefore) != 3 || len(got.LoadAfter) != 3 || len(got.Baselines) != 1 || len(got.Results) != 3 {
		t.Fatalf("report %s", b)
	}
	want := []struct {
		ratio   float64
		against string
	}{{0.25, "udp.4k.bw.idle"}, {2, "2d ib_write_bw -s 65536"}, {0, ""}}
	for i, w := range want {
		res := got.Results[i]
		ratio, _ := res["ratio"].(float64)
		against, _ := res["against"].(string)
		if ratio != w.ratio || against != w.against {
			t.Errorf("result %d: ratio %v against %q, want %v %q", i, res["ratio"], against, w.ratio, w.against)
		}
	}
}

// TestBenchNothing: with every part skipped the command still reports the
// machine, as JSON, and succeeds.
func TestBenchNothing(t *testing.T) {
	var out, errb bytes.Buffer
	rc := dispatch([]string{"bench", "--json", "--skip", strings.Join(benchParts, ",")}, &out, &errb)
	var r benchReport
	if rc != exitOK || json.Unmarshal(out.Bytes(), &r) != nil || r.Cores < 1 {
		t.Fatalf("bench --skip all: %d %q %q", rc, out.String(), errb.String())
	}
	if len(r.Baselines) != 0 || len(r.Results) != 0 {
		t.Errorf("skipped parts measured: %+v", r)
	}
}

// TestBenchUsage: /proc's figures of this process are read, and its CPU
// time follows getrusage's (an independent account of the same CPU): the
// idle part's CPU and wake-up figures come from this reader.
func TestBenchUsage(t *testing.T) {
	a, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if a.rssKiB <= 0 || a.switches < 0 {
		t.Fatalf("usage %+v", a)
	}
	rusage := func() time.Duration {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Spin until getrusage has seen 200 ms of CPU, however loaded the
	// machine is.
	for r0 := rusage(); rusage()-r0 < 200*time.Millisecond; {
	}
	b, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts whole 10 ms ticks: at least 180 ms of the 200 (other
	// goroutines of the test binary only add to it).
	if d := b.cpu - a.cpu; d < 180*time.Millisecond {
		t.Fatalf("/proc CPU time grew by %v while getrusage counted 200 ms", d)
	}
}

// TestBenchColdEcho: the cold round trip's echo is a process of its own
// (this binary with benchEchoEnv) that sends every datagram back, round
// trip after round trip, and ends when its stdin closes.
func TestBenchColdEcho(t *testing.T) {
	e, err := startColdEcho(daemontest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rtt, err := e.roundTrip()
		if err != nil || rtt <= 0 {
			t.Fatalf("round trip %d: %v, %v", i, rtt, err)
		}
	}
	done := make(chan struct{})
	go func() { e.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the echo process outlived its stdin")
	}
	if !e.cmd.ProcessState.Exited() || e.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("echo process: %v", e.cmd.ProcessState)
	}
}

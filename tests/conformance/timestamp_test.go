package conformance_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

var (
	ppTSLine = regexp.MustCompile(`(?m)^(Max|Min|Average) receive completion clock cycles = ([0-9.]+)$`)
	ppIters  = regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = [0-9.]+ usec/iter$`)
)

// TestPingpongTimestamps65 runs rdma-core 65's unmodified ibv_rc_pingpong
// with -t (completion timestamps: ibv_query_device_ex's
// completion_timestamp_mask must be non-zero, then ibv_create_cq_ex with
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP and ibv_wc_read_completion_ts on
// every receive completion) between two daemons.
//
// On GEN_3 libirdma 65 accepts the flag (IRDMA_GEN3_WC_FLAGS_EX, umain.h)
// and reads the CQE's qword0 [63:32], which the device fills from its
// 1 GHz clock: the program prints the spread of the receive completions in
// clock cycles. Its own wall-clock figure bounds them: the time between the
// first and the last receive completion (average × iterations) cannot
// exceed the time the loop took, and a clock a thousand times too slow
// would put it far below — 100× slack each way, so load cannot fail it.
//
// On GEN_2 the kernel this profile follows reports timestamp_mask 0x1ffff,
// so the program goes on to ibv_create_cq_ex, which libirdma 65 refuses
// for an E810 (IRDMA_STANDARD_WC_FLAGS_EX has no timestamp; EOPNOTSUPP
// before any system call): "Couldn't create CQ", exit 1, as on the
// hardware.
func TestPingpongTimestamps65(t *testing.T) {
	rc := cachedRdmaCore(t)
	const prog = "ibv_rc_pingpong"
	t.Run("gen3", func(t *testing.T) {
		addrs, d := gen3Pair(t)
		srv, cli := srqPair(t, rc, prog, d[0].RunDir, d[1].RunDir, addrs[0], []string{"-g", "1", "-t"})
		for _, x := range []struct {
			who string
			r   srqPP
		}{{"server", srv}, {"client", cli}} {
			if x.r.code != 0 || x.r.stderr != "" {
				t.Fatalf("%s: exit status %d\nstdout:\n%s\nstderr:\n%s", x.who, x.r.code, x.r.stdout, x.r.stderr)
			}
			ts := map[string]float64{}
			for _, m := range ppTSLine.FindAllStringSubmatch(x.r.stdout, -1) {
				v, err := strconv.ParseFloat(m[2], 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", x.who, m[0], err)
				}
				ts[m[1]] = v
			}
			it := ppIters.FindStringSubmatch(x.r.stdout)
			if len(ts) != 3 || it == nil {
				t.Fatalf("%s: no timestamp or iteration lines\n%s", x.who, x.r.stdout)
			}
			iters, _ := strconv.Atoi(it[1])
			secs, _ := strconv.ParseFloat(it[2], 64)
			if !(ts["Min"] <= ts["Average"] && ts["Average"] <= ts["Max"]) || ts["Max"] > 0xffffffff {
				t.Errorf("%s: min %v average %v max %v cycles: out of order or beyond the 32-bit mask", x.who, ts["Min"], ts["Average"], ts["Max"])
			}
			span := ts["Average"] * float64(iters-1) // cycles from the first receive completion to the last
			loop := secs * 1e9                       // the loop's wall time, in 1 GHz cycles
			if span > 100*loop || span < loop/100 {
				t.Errorf("%s: receive completions span %.0f cycles of a 1 GHz clock, the loop took %.0f ns", x.who, span, loop)
			}
			t.Logf("%s: %s; receive completions %v..%v cycles apart, average %v", x.who, it[0], ts["Min"], ts["Max"], ts["Average"])
		}
	})
	t.Run("gen2", func(t *testing.T) {
		addrs := testaddr.Loopback(t, 1)
		d := daemontest.Run(t, daemontest.Options{}, "--addr", addrs[0].String())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := runPingpong(ctx, daemontest.Binary(t), rc, d.RunDir, prog, "-g", "1", "-t", "-p", freeTCPPort(t))
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 1 || r.stdout != "" || r.stderr != "Couldn't create CQ\n" {
			t.Errorf("exit status %d, stdout %q, stderr %q; want 1, nothing, \"Couldn't create CQ\\n\"", r.code, r.stdout, r.stderr)
		}
	})
}

// TestDevinfoGEN3 runs rdma-core 65's ibv_devinfo -v on the GEN_3 profile:
// what irdma_query_device adds for GEN_3 reaches the program through
// EX_QUERY_DEVICE — device_cap_flags 0x01221000 (RC_RNR_NAK_GEN,
// MEM_WINDOW, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B), max_mw equal to
// max_mr, the 32-bit timestamp mask and hca_core_clock 1000000 kHz — and
// GEN_2 keeps its own: no type-2B flag, the 17-bit mask, no core clock.
func TestDevinfoGEN3(t *testing.T) {
	rc := cachedRdmaCore(t)
	for _, tc := range []struct {
		profile string
		want    map[string]string
	}{
		{"gen3", map[string]string{"device_cap_flags": "0x01221000", "completion timestamp_mask": "0x00000000ffffffff",
			"hca_core_clock": "1000000kHZ", "device_cap_flags_ex": "0x1221000"}},
		{"gen2", map[string]string{"device_cap_flags": "0x00221000", "completion timestamp_mask": "0x000000000001ffff",
			"hca_core_clock": "", "device_cap_flags_ex": "0x221000"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			d := daemontest.Run(t, daemontest.Options{}, "--addr", testaddr.Loopback(t, 1)[0].String(), "--profile", tc.profile)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := runPingpong(ctx, daemontest.Binary(t), rc, d.RunDir, "ibv_devinfo", "-v")
			if err != nil || r.code != 0 {
				t.Fatalf("ibv_devinfo -v: %v, exit status %d\n%s%s", err, r.code, r.stdout, r.stderr)
			}
			f := map[string]string{}
			for _, l := range regexp.MustCompile(`(?m)^\t([a-z_ ]+):\s+(\S+)$`).FindAllStringSubmatch(r.stdout, -1) {
				if _, seen := f[l[1]]; !seen {
					f[l[1]] = l[2]
				}
			}
			for k, want := range tc.want {
				if f[k] != want {
					t.Errorf("%s: %q, want %q", k, f[k], want)
				}
			}
			if f["max_mw"] != f["max_mr"] || f["max_mw"] == "" {
				t.Errorf("max_mw %q, max_mr %q: want them equal", f["max_mw"], f["max_mr"])
			}
			has2B := regexp.MustCompile(`(?m)^\t+MEM_WINDOW_TYPE_2B$`).MatchString(r.stdout)
			if has2B != (tc.profile == "gen3") {
				t.Errorf("MEM_WINDOW_TYPE_2B listed: %v", has2B)
			}
			if t.Failed() {
				t.Logf("ibv_devinfo -v:\n%s", r.stdout)
			}
		})
	}
}

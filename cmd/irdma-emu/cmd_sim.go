package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/sim"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

func init() {
	register(&command{
		name:    "sim",
		summary: "perftest-like scenarios on modelled E810s in deterministic virtual time",
		run:     runSim,
	})
}

const simUsage = `usage: irdma-emu sim write|read|send [flags]

Runs a perftest-like measurement (ib_write_bw, ib_read_bw, ib_send_bw, or
with --lat their _lat counterparts) between two emulated devices in one
process, in virtual time: the real requester, responder and completer run
on WQEs the driver half posts, inside a model of the E810's data path as
timed resources (docs/timing.md "The pipeline model"). Figures are in
modelled time, and the same scenario and seed print the same bytes on
every run and machine, except the figures under wall_ keys (the
simulator's own speed).

flags:
`

type simOptions struct {
	sc       sim.Scenario
	all      bool
	size     int
	delay    time.Duration
	trace    string
	json     bool
	traceMax uint64
}

func runSim(args []string, stdout, stderr io.Writer) int {
	var o simOptions
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
	}
	sc := &o.sc
	fs.BoolVar(&sc.Lat, "lat", false, "latency test (ib_*_lat) instead of bandwidth")
	fs.IntVar(&sc.QPs, "qps", 1, "number of QPs (perftest -q)")
	fs.BoolVar(&sc.Bidir, "bidir", false, "bandwidth in both directions at once, QPs QPs each way (perftest -b)")
	fs.IntVar(&o.size, "size", 0, "message `bytes` (default 65536; --lat 2)")
	fs.BoolVar(&o.all, "a", false, "all sizes 2 B .. 8 MiB in powers of two (perftest -a)")
	fs.IntVar(&sc.MTU, "mtu", 4096, "path MTU: 256, 512, 1024, 2048 or 4096")
	fs.IntVar(&sc.Iters, "iters", 0, "iterations per size (default 5000; --lat 1000)")
	fs.IntVar(&sc.TxDepth, "tx-depth", 0, "work requests outstanding per QP (default 128; --lat 1)")
	fs.IntVar(&sc.RxDepth, "rx-depth", 512, "receives posted per QP (send)")
	fs.IntVar(&sc.PostList, "post-list", 1, "work requests per post and doorbell")
	fs.IntVar(&sc.CQMod, "cq-mod", 0, "signal one work request in this many (default 100; --lat 1)")
	fs.IntVar(&sc.Inline, "inline", -1, "inline payloads up to `bytes` (default perftest's: 0, and 101 for write/send --lat)")
	fs.Float64Var(&sc.LinkGbps, "link-gbps", 100, "link rate, Gb/s")
	fs.DurationVar(&o.delay, "delay", 10*time.Nanosecond, "one-way propagation delay of the cable")
	fs.Float64Var(&sc.Loss, "loss", 0, "probability that the link loses a frame, each direction")
	fs.Uint64Var(&sc.Seed, "seed", 1, "seed of the loss draws")
	fs.StringVar(&o.trace, "trace", "", "write a Chrome trace-event JSON `file` (Perfetto's JSON importer opens it)")
	fs.Uint64Var(&o.traceMax, "trace-max", 2_000_000, "stop tracing after this many events")
	fs.BoolVar(&o.json, "json", false, "one JSON object per result line")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return 0
		}
		fs.Usage()
		return 2
	}
	sc.Verb = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "irdma-emu sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	sizeSet := false
	fs.Visit(func(f *flag.Flag) { sizeSet = sizeSet || f.Name == "size" })
	if sizeSet && o.size <= 0 {
		fmt.Fprintf(stderr, "irdma-emu sim: --size %d: want at least 1 byte\n", o.size)
		return 2
	}
	if o.all && sizeSet {
		fmt.Fprintln(stderr, "irdma-emu sim: --size and -a exclude each other")
		return 2
	}
	switch {
	case o.all:
		for s := 2; s <= 8<<20; s *= 2 {
			sc.Sizes = append(sc.Sizes, s)
		}
	case sizeSet:
		sc.Sizes = []int{o.size}
	}
	if sc.Bidir && sc.Lat {
		fmt.Fprintln(stderr, "irdma-emu sim: --bidir is for bandwidth tests")
		return 2
	}
	if o.delay < 0 {
		fmt.Fprintln(stderr, "irdma-emu sim: --delay must not be negative")
		return 2
	}
	sc.Delay = timing.Ps(o.delay) * timing.Nanosecond
	if o.delay == 0 {
		sc.Delay = timing.Picosecond // 0 means the pipeline's default in sim.Scenario
	}
	var tf *os.File
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			fmt.Fprintf(stderr, "irdma-emu sim: %v\n", err)
			return 1
		}
		tf = f
		sc.Trace, sc.TraceMax = f, o.traceMax
	}
	rs, err := sim.Run(*sc)
	if tf != nil {
		if cerr := tf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu sim: %v\n", err)
		return 1
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		for i := range rs {
			if err := enc.Encode(simJSON(&rs[i])); err != nil {
				return 1
			}
		}
		return 0
	}
	printSim(stdout, &o, rs)
	return 0
}

// simRow is one result as JSON: modelled figures, then the wall_ ones.
type simRow struct {
	Verb        string               `json:"verb"`
	Lat         bool                 `json:"lat"`
	Size        int                  `json:"size"`
	QPs         int                  `json:"qps"`
	Iters       int                  `json:"iters"`
	MTU         int                  `json:"mtu"`
	Gbps        float64              `json:"gbps"`
	Mpps        float64              `json:"mpps"`
	LatUs       float64              `json:"lat_us"`
	LatMinUs    float64              `json:"lat_min_us,omitempty"`
	LatMaxUs    float64              `json:"lat_max_us,omitempty"`
	LatAvgUs    float64              `json:"lat_avg_us,omitempty"`
	BreakdownUs map[string]float64   `json:"breakdown_us,omitempty"`
	SimSeconds  float64              `json:"sim_seconds"`
	Retransmits uint64               `json:"retransmits"`
	Lost        uint64               `json:"lost"`
	Timeouts    uint64               `json:"timeouts"`
	Util        []map[string]float64 `json:"util"`
	Events      uint64               `json:"events"`
	WallSeconds float64              `json:"wall_seconds"`
	WallSpeed   float64              `json:"wall_sim_seconds_per_second"`
	WallCPU     float64              `json:"wall_cpu_seconds"`
	WallCPUSpd  float64              `json:"wall_sim_seconds_per_cpu_second"`
}

func simJSON(r *sim.Result) simRow {
	row := simRow{Verb: r.Verb, Lat: r.Lat, Size: r.Size, QPs: r.QPs, Iters: r.Iters, MTU: r.MTU,
		Gbps: round(r.Gbps, 4), Mpps: round(r.Mpps, 6), SimSeconds: float64(r.SimTime) / float64(timing.Second),
		Retransmits: r.Retransmits, Lost: r.Lost, Timeouts: r.Timeouts, Events: r.Events,
		WallSeconds: r.Wall.Seconds(), WallSpeed: r.SimPerWall(), WallCPU: r.CPU.Seconds(), WallCPUSpd: r.SimPerCPU()}
	if r.Lat {
		row.LatUs, row.LatMinUs, row.LatMaxUs, row.LatAvgUs = round(r.LatTypical, 4), round(r.LatMin, 4), round(r.LatMax, 4), round(r.LatAvg, 4)
		row.BreakdownUs = map[string]float64{}
		for _, s := range r.Breakdown {
			row.BreakdownUs[s.Name] = round(float64(s.Ps)/float64(timing.Microsecond), 6)
		}
	}
	for _, u := range r.Util {
		m := map[string]float64{}
		for i, v := range u {
			m[sim.Resource(i).String()] = round(v, 4)
		}
		row.Util = append(row.Util, m)
	}
	return row
}

// round keeps digits decimals, so the JSON shows no float noise.
func round(v float64, digits int) float64 {
	out, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return out
}

var simTitles = map[string]string{"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send"}

func printSim(w io.Writer, o *simOptions, rs []sim.Result) {
	sc := &o.sc
	r0 := rs[0]
	kind := "BW"
	if sc.Lat {
		kind = "Latency"
	}
	fmt.Fprint(w, resultLine)
	title := simTitles[sc.Verb] + " " + kind + " Test (modelled E810, virtual time)"
	fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", max(0, (len(resultLine)-len(title))/2)), title)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", r0.QPs)
	if sc.Bidir {
		fmt.Fprintf(w, " Bidirectional   : ON (the figures sum both directions)\n")
	}
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(w, " TX depth        : %d\n", txDepthOf(sc))
	if !sc.Lat {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", cqModOf(sc))
		fmt.Fprintf(w, " Post list       : %d\n", sc.PostList)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", r0.MTU)
	fmt.Fprintf(w, " Link type       : Ethernet, %g Gb/s, delay %v, loss %g, seed %d\n", sc.LinkGbps, o.delay, sc.Loss, sc.Seed)
	fmt.Fprintf(w, " Max inline data : %d[B]\n", inlineOf(sc))
	fmt.Fprint(w, resultLine)
	if sc.Lat {
		fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]")
		for _, r := range rs {
			fmt.Fprintf(w, " %-7d %-10d     %-7.3f        %-7.3f      %-7.3f          %-7.3f\n", r.Size, r.Iters, r.LatMin, r.LatMax, r.LatTypical, r.LatAvg)
		}
	} else {
		fmt.Fprintln(w, " #bytes     #iterations    BW average[Gb/sec]   MsgRate[Mpps]   retransmits")
		for _, r := range rs {
			fmt.Fprintf(w, " %-10d %-10d       %-9.3f            %-9.6f       %d\n", r.Size, r.Iters, r.Gbps, r.Mpps, r.Retransmits)
		}
	}
	fmt.Fprint(w, resultLine)
	last := rs[len(rs)-1]
	if sc.Lat {
		fmt.Fprintf(w, " Latency of one operation by resource (%d B, t_typical; write and send: half the round trip):\n", last.Size)
		for _, s := range last.Breakdown {
			fmt.Fprintf(w, "   %-14s %8.3f us\n", s.Name, float64(s.Ps)/float64(timing.Microsecond))
		}
	}
	fmt.Fprintf(w, " Resource utilisation (busy / modelled time, %d B):\n", last.Size)
	fmt.Fprintf(w, "   %-14s %9s %9s\n", "resource", "device 0", "device 1")
	for i := 0; i < int(sim.NumResources); i++ {
		fmt.Fprintf(w, "   %-14s %8.1f%% %8.1f%%\n", sim.Resource(i), 100*last.Util[0][i], 100*last.Util[1][i])
	}
	var simT timing.Ps
	var wall, cpu time.Duration
	var ev uint64
	for _, r := range rs {
		simT += r.SimTime
		wall += r.Wall
		cpu += r.CPU
		ev += r.Events
	}
	fmt.Fprintf(w, " Modelled time %.6f s, %d events; lost %d frames, %d retransmits\n",
		float64(simT)/float64(timing.Second), ev, sumLost(rs), sumRetx(rs))
	speed := 0.0
	if wall > 0 {
		speed = float64(simT) / float64(timing.Second) / wall.Seconds()
	}
	cspeed := 0.0
	if cpu > 0 {
		cspeed = float64(simT) / float64(timing.Second) / cpu.Seconds()
	}
	fmt.Fprintf(w, " wall_seconds %.3f  wall_sim_seconds_per_second %.4f  wall_cpu_seconds %.3f  wall_sim_seconds_per_cpu_second %.4f (the simulator's speed)\n",
		wall.Seconds(), speed, cpu.Seconds(), cspeed)
	fmt.Fprint(w, resultLine)
}

func sumLost(rs []sim.Result) (n uint64) {
	for _, r := range rs {
		n += r.Lost
	}
	return n
}

func sumRetx(rs []sim.Result) (n uint64) {
	for _, r := range rs {
		n += r.Retransmits
	}
	return n
}

func txDepthOf(sc *sim.Scenario) int {
	if sc.TxDepth > 0 {
		return sc.TxDepth
	}
	if sc.Lat {
		return 1
	}
	return 128
}

func cqModOf(sc *sim.Scenario) int {
	if sc.CQMod > 0 {
		return min(sc.CQMod, txDepthOf(sc))
	}
	return min(100, txDepthOf(sc))
}

func inlineOf(sc *sim.Scenario) int {
	if sc.Inline >= 0 {
		return sc.Inline
	}
	if sc.Lat && sc.Verb != "read" {
		return 101
	}
	return 0
}

package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Scenario is a perftest-like measurement: the levers of ib_write_bw,
// ib_read_bw, ib_send_bw and their _lat counterparts (perftest 4.5's
// defaults where a field is zero).
type Scenario struct {
	Verb string // "write", "read" or "send"
	Lat  bool   // latency (ping-pong; read: one operation at a time)
	// Bidir (perftest -b, bandwidth only): QPs QPs in each direction, the
	// figures summed over both.
	Bidir    bool
	QPs      int   // -q; default 1
	Sizes    []int // message sizes; default 65536 (lat: 2)
	MTU      int   // path MTU; default 4096
	Iters    int   // -n; default 5000 (lat: 1000)
	TxDepth  int   // -t; default 128 (lat: 1)
	RxDepth  int   // -r; default 512
	PostList int   // -l; default 1
	CQMod    int   // -Q; default 100 (lat: 1)
	// Inline is --inline_size: payloads up to this many bytes go in the
	// WQE. Negative: perftest's default, 0 for bandwidth tests and the
	// device's maximum (101 on GEN_2) for the write and send latency
	// tests.
	Inline   int
	LinkGbps float64   // default the pipeline's (100)
	Delay    timing.Ps // propagation; 0: the pipeline's
	Loss     float64
	Seed     uint64
	Trace    io.Writer
	TraceMax uint64
	Pipeline *timing.Pipeline // nil: timing.E810Pipeline()
}

// Result is one size's figures in modelled time, plus the run's own
// speed.
type Result struct {
	Verb  string
	Lat   bool
	Size  int
	QPs   int
	Iters int
	MTU   int
	// Gbps and Mpps are the bandwidth (payload bits / 10^9 per modelled
	// second) and message rate, over all QPs, first post to last
	// completion.
	Gbps, Mpps float64
	// Latency (Lat): perftest's figures, in modelled microseconds; write
	// and send report half the round trip, read the whole operation.
	LatTypical, LatMin, LatMax, LatAvg float64
	// Breakdown is one operation's latency by resource (Lat), summing to
	// LatTypical (for write and send, half of both legs).
	Breakdown []Span
	// Util is each node's resources' busy time over the measurement.
	Util [][NumResources]float64
	// SimTime is the modelled duration of the measurement.
	SimTime timing.Ps
	// Retransmits counts packets sent again (go-back-N), Lost the frames
	// the links dropped.
	Retransmits, Lost, Timeouts, NAKs uint64
	Events                            uint64
	// Wall is the wall-clock time the measurement took to simulate, CPU
	// the process's CPU time meanwhile (on a loaded machine the speed per
	// CPU second is the steadier figure).
	Wall, CPU time.Duration
}

// Span is a part of a latency.
type Span struct {
	Name string
	Ps   timing.Ps
}

// SimPerCPU is modelled seconds per second of the process's CPU time.
func (r *Result) SimPerCPU() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.SimTime) / float64(timing.Second) / r.CPU.Seconds()
}

// SimPerWall is the simulator's speed: modelled seconds per wall second.
func (r *Result) SimPerWall() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.SimTime) / float64(timing.Second) / r.Wall.Seconds()
}

func (sc *Scenario) fill() error {
	switch sc.Verb {
	case "write", "read", "send":
	default:
		return fmt.Errorf("sim: verb %q (want write, read or send)", sc.Verb)
	}
	if sc.QPs <= 0 {
		sc.QPs = 1
	}
	if len(sc.Sizes) == 0 {
		sc.Sizes = []int{65536}
		if sc.Lat {
			sc.Sizes = []int{2}
		}
	}
	for _, s := range sc.Sizes {
		if s < 1 || s > 1<<30 {
			return fmt.Errorf("sim: size %d out of range", s)
		}
	}
	if sc.MTU == 0 {
		sc.MTU = 4096
	}
	switch sc.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("sim: MTU %d (want 256, 512, 1024, 2048 or 4096)", sc.MTU)
	}
	if sc.Iters <= 0 {
		sc.Iters = 5000
		if sc.Lat {
			sc.Iters = 1000
		}
	}
	if sc.TxDepth <= 0 {
		sc.TxDepth = 128
		if sc.Lat {
			sc.TxDepth = 1
		}
	}
	if sc.RxDepth <= 0 {
		sc.RxDepth = 512
	}
	sc.RxDepth = min(sc.RxDepth, sc.Iters)
	if sc.PostList <= 0 {
		sc.PostList = 1
	}
	sc.PostList = min(sc.PostList, sc.TxDepth)
	if sc.CQMod <= 0 {
		sc.CQMod = 100
		if sc.Lat {
			sc.CQMod = 1
		}
	}
	sc.CQMod = min(sc.CQMod, sc.TxDepth)
	if sc.Inline < 0 {
		sc.Inline = 0
		if sc.Lat && sc.Verb != "read" {
			sc.Inline = maxInline
		}
	}
	if sc.Inline > maxInline {
		return fmt.Errorf("sim: inline %d above the device's %d", sc.Inline, maxInline)
	}
	if sc.Verb == "read" {
		sc.Inline = 0
	}
	if sc.Loss < 0 || sc.Loss >= 1 || math.IsNaN(sc.Loss) {
		return fmt.Errorf("sim: loss %v out of [0, 1)", sc.Loss)
	}
	if sc.LinkGbps < 0 || math.IsNaN(sc.LinkGbps) || sc.LinkGbps > 10000 {
		return fmt.Errorf("sim: link rate %v Gb/s", sc.LinkGbps)
	}
	return nil
}

// maxInline is IRDMA_MAX_INLINE_DATA_SIZE (GEN_2).
const maxInline = 101

// Run runs the scenario: one world (two devices, one cable, QPs QPs),
// every size in turn.
func Run(sc Scenario) ([]Result, error) {
	if err := sc.fill(); err != nil {
		return nil, err
	}
	p := timing.E810Pipeline()
	if sc.Pipeline != nil {
		p = *sc.Pipeline
	}
	if sc.LinkGbps > 0 {
		p.LinkBitsPerSec = uint64(sc.LinkGbps * 1e9)
	}
	maxSize := slices.Max(sc.Sizes)
	delay := sc.Delay
	if delay <= 0 {
		delay = p.Propagation
	}
	w, err := New(WorldConfig{Pipeline: p, Delay: delay, Loss: sc.Loss, Seed: sc.Seed, Trace: sc.Trace, TraceMax: sc.TraceMax})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	sq := sc.TxDepth + sc.PostList + 1
	conns := make([]*Conn, sc.QPs)
	if sc.Bidir && !sc.Lat {
		conns = make([]*Conn, 2*sc.QPs)
	}
	for i := range conns {
		from := i / sc.QPs // the second half runs from device 1 to device 0
		conns[i], err = w.Connect(from, 1-from, ConnSpec{SQ: max(sq, 2), RQ: sc.RxDepth + 1, BufSize: maxSize, PMTU: sc.MTU,
			Inline: sc.Inline})
		if err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, size := range sc.Sizes {
		inline := size <= sc.Inline
		for _, c := range conns {
			for _, e := range c.Side {
				e.Model.Inline = inline
			}
		}
		var r Result
		if sc.Lat {
			r, err = w.runLat(&sc, conns[0], size, inline)
		} else {
			r, err = w.runBW(&sc, conns, size, inline)
		}
		if err != nil {
			w.tr.close()
			return out, err
		}
		r.Verb, r.Lat, r.Size, r.QPs, r.Iters, r.MTU = sc.Verb, sc.Lat, size, sc.QPs, sc.Iters, sc.MTU
		out = append(out, r)
	}
	if err := w.tr.close(); err != nil {
		return out, err
	}
	return out, nil
}

// measure is the bookkeeping around one size's run.
type measure struct {
	w     *Sim
	start timing.Ps
	util  [][NumResources]timing.Ps
	stats [2]struct{ retx, lost, timeouts, naks uint64 }
	ev    uint64
	wall  time.Time
	cpu   time.Duration
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (w *Sim) begin() *measure {
	m := &measure{w: w, start: w.loop.now, ev: w.loop.fired, wall: time.Now(), cpu: cpuTime()}
	for _, n := range w.nodes {
		var u [NumResources]timing.Ps
		for i := range u {
			u[i] = n.NIC.Res[i].Busy
		}
		m.util = append(m.util, u)
	}
	for i, n := range w.nodes[:2] {
		st := n.Eng.Stats().Port
		m.stats[i].retx, m.stats[i].timeouts = st.Retransmits, st.Timeouts
		m.stats[i].naks = st.NAKsRcvd[0]
		m.stats[i].lost = n.NIC.lost
	}
	return m
}

func (m *measure) end(r *Result, end timing.Ps) {
	w := m.w
	r.Wall = time.Since(m.wall)
	r.CPU = cpuTime() - m.cpu
	r.SimTime = end - m.start
	r.Events = w.loop.fired - m.ev
	for i, n := range w.nodes {
		var u [NumResources]float64
		for j := range u {
			if r.SimTime > 0 {
				u[j] = float64(n.NIC.Res[j].Busy-m.util[i][j]) / float64(r.SimTime)
			}
		}
		r.Util = append(r.Util, u)
	}
	for i, n := range w.nodes[:2] {
		st := n.Eng.Stats().Port
		r.Retransmits += st.Retransmits - m.stats[i].retx
		r.Timeouts += st.Timeouts - m.stats[i].timeouts
		r.NAKs += st.NAKsRcvd[0] - m.stats[i].naks
		r.Lost += n.NIC.lost - m.stats[i].lost
	}
}

// errStalled: the loop ran out of events before the program finished.
var errStalled = errors.New("sim: the world went idle before the measurement finished")

// limit bounds a measurement's modelled time.
const limit = 600 * timing.Second

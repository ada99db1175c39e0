package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/driver/uk"
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

func (e *Endpoint) host() *timing.Server { return &e.Node.NIC.Res[ResHost] }

// postSend posts k work requests of one kind and tells the model.
func (e *Endpoint) postSend(sc *Scenario, peer *Endpoint, k int, size int, inline bool, first int, iters int, now timing.Ps) error {
	e.wrs = e.wrs[:0]
	if len(e.sges) < k {
		e.sges = make([]driver.SGE, k)
	}
	for i := 0; i < k; i++ {
		idx := first + i
		e.sges[i] = driver.SGE{Addr: uint64(e.Buf.IOVA()), Length: uint32(size), LKey: e.MR.LKey()}
		wr := driver.SendWR{WrID: uint64(idx), SGList: e.sges[i : i+1]}
		switch sc.Verb {
		case "write":
			wr.Opcode = uk.WRRDMAWrite
		case "read":
			wr.Opcode = uk.WRRDMARead
		case "send":
			wr.Opcode = uk.WRSend
		}
		if sc.Verb != "send" {
			wr.RemoteAddr, wr.RKey = uint64(peer.Buf.IOVA()), peer.MR.RKey()
		}
		if (idx+1)%sc.CQMod == 0 || idx == iters-1 {
			wr.Flags |= uk.SendSignaled
		}
		if inline {
			// The kernel gathers an inline payload from the SGEs' virtual
			// addresses (irdma_post_send); here, from the buffer.
			wr.Flags |= uk.SendInline
			wr.InlineData = e.Buf.Bytes()[:size]
		}
		e.wrs = append(e.wrs, wr)
	}
	start, end := e.host().Serve(now, timing.Ps(k)*e.Node.s.p.HostPost, 0)
	e.Node.s.tr.span(e.Node.Idx, trackHost, "post", start, end, e.QP.ID())
	e.Node.s.dirty = true
	if n, err := e.Node.Drv.PostSend(e.QP, e.wrs); err != nil || n != k {
		return fmt.Errorf("sim: PostSend: %d of %d: %v", n, k, err)
	}
	e.Model.Post(k, end)
	return nil
}

func (e *Endpoint) postRecv(k, size int, now timing.Ps) error {
	e.rwrs = e.rwrs[:0]
	for i := 0; i < k; i++ {
		if len(e.rsges) <= i {
			e.rsges = append(e.rsges, driver.SGE{})
		}
		// The whole buffer: a receive posted for one size may take a SEND
		// of the next (the QPs serve every size of a run).
		e.rsges[i] = driver.SGE{Addr: uint64(e.Buf.IOVA()), Length: uint32(e.Buf.Len()), LKey: e.MR.LKey()}
		e.rwrs = append(e.rwrs, driver.RecvWR{WrID: uint64(i), SGList: e.rsges[i : i+1]})
	}
	e.host().Serve(now, timing.Ps(k)*e.Node.s.p.HostPost, 0)
	e.Node.s.dirty = true
	if n, err := e.Node.Drv.PostRecv(e.QP, e.rwrs); err != nil || n != k {
		return fmt.Errorf("sim: PostRecv: %d of %d: %v", n, k, err)
	}
	e.recvs += k
	return nil
}

// poll takes the CQEs of c the model has made visible.
func (e *Endpoint) poll(c *driver.CQ, w *CQWatch, consumed *int, now timing.Ps) ([]driver.WorkCompletion, timing.Ps, error) {
	k := w.Visible - *consumed
	if k <= 0 {
		return nil, now, nil
	}
	wcs, err := e.Node.Drv.PollCQ(c, k)
	if err != nil {
		return nil, now, err
	}
	*consumed += len(wcs)
	if c == e.RCQ {
		e.recvs -= len(wcs)
	}
	start, end := e.host().Serve(now, e.Node.s.p.HostPoll, 0)
	e.Node.s.tr.span(e.Node.Idx, trackHost, "poll", start, end, e.QP.ID())
	for _, wc := range wcs {
		if wc.Status != uk.WCSuccess {
			return wcs, end, fmt.Errorf("sim: completion error on QP %d: %+v", e.QP.ID(), wc)
		}
	}
	return wcs, end, nil
}

// runBW is ib_{write,read,send}_bw: every QP keeps TxDepth work requests
// posted, signalled every CQMod, until Iters completed.
func (w *Sim) runBW(sc *Scenario, conns []*Conn, size int, inline bool) (Result, error) {
	var r Result
	var failed error
	now := w.loop.Time()
	type qstate struct {
		posted, done, rposted int
		sc, rc                int // CQEs consumed
		end                   timing.Ps
		fin                   bool
	}
	st := make([]qstate, len(conns))
	left := len(conns)
	m := w.begin()
	fill := func(i int, at timing.Ps) {
		c, q := conns[i], &st[i]
		a, b := c.Side[0], c.Side[1]
		for failed == nil && q.posted < sc.Iters && q.posted-q.done+sc.PostList <= sc.TxDepth {
			k := min(sc.PostList, sc.Iters-q.posted)
			if err := a.postSend(sc, b, k, size, inline, q.posted, sc.Iters, at); err != nil {
				failed = err
				return
			}
			q.posted += k
		}
	}
	for i, c := range conns {
		i, a, b := i, c.Side[0], c.Side[1]
		q := &st[i]
		a.SW.OnCQE = func(at timing.Ps) {
			wcs, t, err := a.poll(a.SCQ, a.SW, &q.sc, at)
			if err != nil {
				failed = err
				return
			}
			for _, wc := range wcs {
				q.done = max(q.done, int(wc.WrID)+1)
			}
			if q.done >= sc.Iters && !q.fin {
				q.fin, q.end = true, t
				left--
				return
			}
			fill(i, t)
		}
		b.RW.OnCQE = nil
		if sc.Verb == "send" {
			b.RW.OnCQE = func(at timing.Ps) {
				wcs, t, err := b.poll(b.RCQ, b.RW, &q.rc, at)
				if err != nil {
					failed = err
					return
				}
				if k := min(len(wcs), sc.Iters-q.rposted); k > 0 {
					if err := b.postRecv(k, size, t); err != nil {
						failed = err
					}
					q.rposted += k
				}
			}
			k := min(sc.RxDepth, sc.Iters)
			if err := b.postRecv(k, size, now); err != nil {
				return r, err
			}
			q.rposted = k
		}
	}
	// Receives pre-posted; the clients start together.
	for i := range conns {
		fill(i, now)
	}
	w.settle()
	ok := w.loop.Run(now+limit, func() bool { return left == 0 || failed != nil })
	if failed != nil {
		return r, failed
	}
	if !ok {
		return r, errStalled
	}
	var end timing.Ps
	for _, q := range st {
		end = max(end, q.end)
	}
	for _, c := range conns {
		c.Side[0].SW.OnCQE, c.Side[1].RW.OnCQE = nil, nil
	}
	m.end(&r, end)
	r.SimTime = end - now
	if r.SimTime > 0 {
		bits := float64(len(conns)) * float64(sc.Iters) * float64(size) * 8
		r.Gbps = bits / float64(r.SimTime) * 1e3 // bits per ps → Gb/s
		r.Mpps = float64(len(conns)) * float64(sc.Iters) / float64(r.SimTime) * 1e6
	}
	return r, nil
}

// runLat is ib_{write,send,read}_lat between the first QP pair: one
// operation in flight. write: each side writes to the other when it sees
// the peer's data in its buffer; send: each side sends when its receive
// completes; read: the client reads, waiting for each completion.
func (w *Sim) runLat(sc *Scenario, c *Conn, size int, inline bool) (Result, error) {
	var r Result
	var failed error
	a, b := c.Side[0], c.Side[1]
	now := w.loop.Time()
	m := w.begin()
	lats := make([]timing.Ps, 0, sc.Iters)
	iter, sent := 0, [2]int{}
	var start timing.Ps
	var last [2]legTimes // per direction: the leg of the last iteration
	var consumed [2][2]int
	p := &w.p
	post := func(e, peer *Endpoint, side int, at timing.Ps) {
		if failed != nil {
			return
		}
		if err := e.postSend(sc, peer, 1, size, inline, sent[side], math.MaxInt, at); err != nil {
			failed = err
		}
		sent[side]++
	}
	drain := func(e *Endpoint, side int) func(timing.Ps) {
		return func(at timing.Ps) {
			if _, _, err := e.poll(e.SCQ, e.SW, &consumed[side][0], at); err != nil {
				failed = err
			}
		}
	}
	finish := func(at timing.Ps) {
		lats = append(lats, at-start)
		iter++
		if iter < sc.Iters {
			start = a.host().Free
			start = max(start, at)
			post(a, b, 0, start)
		}
	}
	a.Model.OnData, b.Model.OnData = nil, nil
	a.SW.OnCQE, b.SW.OnCQE, a.RW.OnCQE, b.RW.OnCQE = drain(a, 0), drain(b, 1), nil, nil
	switch sc.Verb {
	case "write":
		b.Model.OnData = func(at timing.Ps) {
			last[0] = b.Model.legTo(at)
			_, t := b.host().Serve(at, p.HostPoll, 0)
			post(b, a, 1, t)
		}
		a.Model.OnData = func(at timing.Ps) {
			last[1] = a.Model.legTo(at)
			_, t := a.host().Serve(at, p.HostPoll, 0)
			finish(t)
		}
	case "send":
		for _, e := range []*Endpoint{a, b} {
			// Top up to RxDepth: receives left from the previous size stay.
			if k := sc.RxDepth - e.recvs; k > 0 {
				if err := e.postRecv(k, size, now); err != nil {
					return r, err
				}
			}
		}
		b.RW.OnCQE = func(at timing.Ps) {
			last[0] = b.Model.legTo(at)
			wcs, t, err := b.poll(b.RCQ, b.RW, &consumed[1][1], at)
			if err != nil {
				failed = err
				return
			}
			if err := b.postRecv(len(wcs), size, t); err != nil {
				failed = err
				return
			}
			post(b, a, 1, b.host().Free)
		}
		a.RW.OnCQE = func(at timing.Ps) {
			last[1] = a.Model.legTo(at)
			wcs, t, err := a.poll(a.RCQ, a.RW, &consumed[0][1], at)
			if err != nil {
				failed = err
				return
			}
			if err := a.postRecv(len(wcs), size, t); err != nil {
				failed = err
				return
			}
			finish(a.host().Free)
		}
	case "read":
		a.SW.OnCQE = func(at timing.Ps) {
			last[0] = b.Model.lastRx.leg(b.Model.lastRx.rxEnd)
			last[1] = a.Model.legTo(at)
			_, t, err := a.poll(a.SCQ, a.SW, &consumed[0][0], at)
			if err != nil {
				failed = err
				return
			}
			finish(t)
		}
	}
	start = now
	post(a, b, 0, now)
	w.settle()
	ok := w.loop.Run(now+limit, func() bool { return iter >= sc.Iters || failed != nil })
	if failed != nil {
		return r, failed
	}
	if !ok {
		return r, errStalled
	}
	end := w.loop.Time()
	// Let the last ACKs and CQEs land so the next size starts clean.
	w.loop.Run(end+100*timing.Microsecond, func() bool { return false })
	a.Model.OnData, b.Model.OnData = nil, nil
	a.SW.OnCQE, b.SW.OnCQE, a.RW.OnCQE, b.RW.OnCQE = nil, nil, nil, nil
	for side, e := range []*Endpoint{a, b} {
		e.poll(e.SCQ, e.SW, &consumed[side][0], w.loop.now)
	}
	m.end(&r, end)
	half := sc.Verb != "read"
	us := func(t timing.Ps) float64 {
		v := float64(t) / float64(timing.Microsecond)
		if half {
			v /= 2
		}
		return v
	}
	sorted := slices.Clone(lats)
	slices.Sort(sorted)
	if n := len(sorted); n > 0 {
		r.LatMin, r.LatMax, r.LatTypical = us(sorted[0]), us(sorted[n-1]), us(sorted[n/2])
		var sum timing.Ps
		for _, l := range sorted {
			sum += l
		}
		r.LatAvg = us(sum / timing.Ps(n))
	}
	r.Breakdown = breakdown(p, last, half, sc.Verb == "read", sc.Verb == "send")
	if r.SimTime > 0 {
		r.Mpps = float64(sc.Iters) / float64(r.SimTime) * 1e6
		r.Gbps = float64(sc.Iters) * float64(size) * 8 / float64(r.SimTime) * 1e3
	}
	return r, nil
}

// legTimes are the times of one leg of an operation: the message's last
// packet through the model, and when its effect became visible.
type legTimes struct {
	built, wqeAt, readAt, peEnd, wireEnd, arrived, rxEnd, visible timing.Ps
	needWQE                                                       bool
}

func (l legTimes) leg(visible timing.Ps) legTimes { l.visible = visible; return l }

func (q *QPModel) legTo(visible timing.Ps) legTimes { return q.lastRx.leg(visible) }

// breakdown splits the last iteration's critical path by resource. The
// program's time (post, poll) is host-cpu; the doorbell is the posted
// MMIO write; wqe-fetch the read of the WQE; then payload read, packet
// engine, wire, propagation, receive parser, and the PCIe writes (plus,
// for SEND, the receive WQE fetch) until the effect is visible.
func breakdown(p *timing.Pipeline, legs [2]legTimes, half, read, send bool) []Span {
	names := []string{"host-cpu", "doorbell", "wqe-fetch", "payload-read", "tx-engine", "wire", "propagation", "rx-parser", "pcie-write"}
	acc := make([]timing.Ps, len(names))
	for i, l := range legs {
		if read && i == 1 {
			// The READ response: built when the request was parsed; the
			// CQE write ends the operation.
			acc[3] += l.readAt - l.built
		} else {
			host := p.HostPost + p.HostPoll
			if send {
				host += p.HostPost // the receive reposted before the SEND
			}
			acc[0] += host
			acc[1] += p.PCIeWrite
			if l.needWQE {
				acc[2] += l.wqeAt - (l.built + host + p.PCIeWrite)
			}
			acc[3] += l.readAt - max(l.wqeAt, l.built)
		}
		acc[4] += l.peEnd - l.readAt
		acc[5] += l.wireEnd - l.peEnd
		acc[6] += l.arrived - l.wireEnd
		acc[7] += l.rxEnd - l.arrived
		acc[8] += l.visible - l.rxEnd
	}
	if read {
		acc[0] = p.HostPost + p.HostPoll
		acc[1] = p.PCIeWrite
	}
	out := make([]Span, len(names))
	for i, n := range names {
		v := acc[i]
		if half {
			v /= 2
		}
		out[i] = Span{n, v}
	}
	return out
}

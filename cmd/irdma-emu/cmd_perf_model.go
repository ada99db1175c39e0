package main

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/sim"
)

// stageDeltas are the cycles one daemon's device charged per pipeline
// stage during a measurement (its control socket's stats, after − before).
type stageDeltas struct {
	Hz     uint64                `json:"hz"`
	Stages map[string]stageDelta `json:"stages"`
}

type stageDelta struct {
	Count  uint64 `json:"count"`
	Bytes  uint64 `json:"bytes"`
	Cycles uint64 `json:"cycles"`
}

// snapshot reads the local daemon's stage counters; nil without a control
// socket.
func (s *perfSession) snapshot() *stageDeltas {
	if s.ctl == nil {
		return nil
	}
	st, err := s.ctl.Stats(-1)
	if err != nil {
		return nil
	}
	d := &stageDeltas{Hz: st.Cycles.ClockHz, Stages: map[string]stageDelta{}}
	for _, g := range st.Cycles.Stages {
		d.Stages[g.Stage] = stageDelta{Count: g.Count, Bytes: g.Bytes, Cycles: g.Cycles}
	}
	return d
}

func diffStages(a, b *stageDeltas) *stageDeltas {
	if a == nil || b == nil {
		return nil
	}
	d := &stageDeltas{Hz: b.Hz, Stages: map[string]stageDelta{}}
	for k, v := range b.Stages {
		w := a.Stages[k]
		if v.Count < w.Count || v.Cycles < w.Cycles {
			return nil // the daemon restarted meanwhile
		}
		d.Stages[k] = stageDelta{Count: v.Count - w.Count, Bytes: v.Bytes - w.Bytes, Cycles: v.Cycles - w.Cycles}
	}
	return d
}

// perfRow is one size's result.
type perfRow struct {
	size   int
	iters  int
	bw     float64 // bytes/s, both directions summed when bidirectional
	peak   float64
	rate   float64 // messages/s
	lat    []time.Duration
	check  string
	model  string // the modelled figures, formatted
	bottle string
}

const resultLine = "---------------------------------------------------------------------------------------\n"

func (s *perfSession) bwUnit() (string, float64) {
	if s.o.gbits {
		return "Gb/sec", 1e9 / 8 // perftest's Gb/s: bits / 10^9
	}
	return "MB/sec", 1 << 20 // perftest's MB is 2^20 bytes
}

// addRow records and prints one size's result. c is the client's result,
// srv the server's, lat the client's latencies (nil on the server); local
// and remote are the two daemons' stage deltas.
func (s *perfSession) addRow(size int, c sideResult, srv *sideResult, lat []time.Duration, local, remote *stageDeltas) {
	o := s.o
	row := perfRow{size: size, iters: o.Iters, lat: lat}
	el := time.Duration(c.ElapsedNs)
	bytes, msgs, peak := float64(c.Bytes), float64(c.Msgs), c.PeakBps
	if srv != nil && o.Bidir {
		bytes += float64(srv.Bytes)
		msgs += float64(srv.Msgs)
		peak += srv.PeakBps
		el = max(el, time.Duration(srv.ElapsedNs))
	}
	if el > 0 {
		row.bw = bytes / el.Seconds()
		row.rate = msgs / el.Seconds()
	}
	row.peak = max(peak, row.bw)
	for _, r := range []*sideResult{&c, srv} {
		if r != nil && r.Check != "" && row.check == "" {
			row.check = r.Check
		}
	}
	row.model, row.bottle = s.model(size, bytes, msgs, local, remote)
	s.rows = append(s.rows, row)
	if o.Lat {
		if len(lat) == 0 {
			fmt.Fprintf(o.stdout, " %-7d %d          (measured by the client)\n", size, o.Iters)
			return
		}
		st := latStats(lat, s.halveLat())
		fmt.Fprintf(o.stdout, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
			size, o.Iters, st.min, st.max, st.typical, st.avg, st.stdev, st.p99, st.p999)
		return
	}
	_, div := s.bwUnit()
	fmt.Fprintf(o.stdout, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n",
		size, o.Iters, row.peak/div, row.bw/div, row.rate/1e6)
}

// halveLat: write and send latency tests report half the round trip, as
// perftest does; read and atomic the whole operation.
func (s *perfSession) halveLat() bool { return s.pingpongLat() }

// model runs the measured scenario through the pipeline model of emu/sim
// (docs/timing.md "The pipeline model"): the same verb, size, QPs, path
// MTU, depths, moderation and inlining, on two modelled E810s in virtual
// time, and returns its figures and the busiest resource. The stage
// deltas of the daemons (local, remote) are not needed: the model runs
// the real data path itself. An atomic is modelled as an 8-byte READ (the
// same round trip: request, responder PCIe read, response); the
// iterations are capped so that a row costs at most 64 MiB of simulated
// payload.
func (s *perfSession) model(size int, bytes, msgs float64, local, remote *stageDeltas) (string, string) {
	o := s.o
	if o.noModel {
		return "", ""
	}
	verb, basis := o.Verb, "irdma-emu sim (virtual time)"
	if verb == "atomic" {
		verb, size, basis = "read", perfAtomicSize, "irdma-emu sim (virtual time; atomic as an 8-byte READ)"
	}
	iters := o.Iters
	if !o.Lat {
		iters = max(16, min(iters, (64<<20)/max(size, 1)))
	}
	sc := sim.Scenario{Verb: verb, Lat: o.Lat, Bidir: o.Bidir, QPs: o.QPs, Sizes: []int{size}, MTU: s.mtu.Bytes(),
		Iters: iters, TxDepth: o.TxDepth, RxDepth: o.RxDepth, CQMod: o.CQMod, Inline: o.Inline}
	if sc.Inline > 0 && size > sc.Inline || verb == "read" {
		sc.Inline = 0
	}
	rs, err := sim.Run(sc)
	if err != nil || len(rs) == 0 {
		return "", ""
	}
	r := rs[0]
	if o.Lat {
		return fmt.Sprintf("%-7.2f", r.LatTypical), basis
	}
	busy, name := 0.0, ""
	for _, u := range r.Util {
		for i, v := range u {
			if v > busy && sim.Resource(i) != sim.ResHost {
				busy, name = v, sim.Resource(i).String()
			}
		}
	}
	if r.Mpps <= 0 {
		return "", ""
	}
	_, div := s.bwUnit()
	bps := r.Gbps * 1e9 / 8
	bottle := fmt.Sprintf("%s (%.0f%% busy)", name, 100*busy)
	if busy < 0.9 {
		// No resource is saturated: the QPs' windows (read slots, depth)
		// bound the rate (Little's law, docs/timing.md "Calibration").
		bottle = fmt.Sprintf("QP windows (busiest: %s %.0f%%)", name, 100*busy)
	}
	return fmt.Sprintf("%-7.2f            %-7.6f", bps/div, r.Mpps), bottle
}

// printModel prints the modelled E810 table.
func (s *perfSession) printModel() {
	o := s.o
	have := false
	for _, r := range s.rows {
		have = have || r.model != ""
	}
	if !have {
		return
	}
	fmt.Fprintln(o.stdout, " Modelled E810 (the scenario run through the pipeline model, irdma-emu sim; docs/timing.md):")
	if o.Lat {
		fmt.Fprintln(o.stdout, " #bytes #iterations    t_model[usec]   basis")
		for _, r := range s.rows {
			fmt.Fprintf(o.stdout, " %-7d %d          %s         %s\n", r.size, r.iters, r.model, r.bottle)
		}
	} else {
		unit, _ := s.bwUnit()
		fmt.Fprintf(o.stdout, " #bytes     #iterations    BW model[%s]   MsgRate model[Mpps]   bottleneck\n", unit)
		for _, r := range s.rows {
			fmt.Fprintf(o.stdout, " %-7d    %-10d       %s      %s\n", r.size, r.iters, r.model, r.bottle)
		}
	}
	fmt.Fprint(o.stdout, resultLine)
}

type latSummary struct{ min, max, typical, avg, stdev, p99, p999 float64 }

// latStats is perftest's print_report_lat: min, max, the median
// (t_typical), mean, standard deviation and the 99 / 99.9 percentiles, in
// microseconds.
func latStats(l []time.Duration, half bool) latSummary {
	v := make([]float64, len(l))
	for i, d := range l {
		v[i] = float64(d) / 1e3
		if half {
			v[i] /= 2
		}
	}
	slices.Sort(v)
	n := len(v)
	var s latSummary
	if n == 0 {
		return s
	}
	s.min, s.max, s.typical = v[0], v[n-1], v[n/2]
	var sum float64
	for _, x := range v {
		sum += x
	}
	s.avg = sum / float64(n)
	var sq float64
	for _, x := range v {
		sq += (x - s.avg) * (x - s.avg)
	}
	s.stdev = math.Sqrt(sq / float64(n))
	pct := func(p float64) float64 { return v[min(n-1, int(math.Ceil(p*float64(n)))-1)] }
	s.p99, s.p999 = pct(0.99), pct(0.999)
	return s
}

var verbTitles = map[string]string{"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send", "atomic": "Atomic"}

// printHeader prints perftest's test description block.
func (s *perfSession) printHeader() {
	o := s.o
	w := o.stdout
	kind := "BW"
	if o.Lat {
		kind = "Latency"
	}
	fmt.Fprint(w, resultLine)
	title := verbTitles[o.Verb] + " " + kind + " Test"
	if o.Bidir {
		title = verbTitles[o.Verb] + " Bidirectional " + kind + " Test"
	}
	fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", max(0, (len(resultLine)-len(title))/2)), title)
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", s.ctx.Device())
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", o.QPs)
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	if o.Verb == "atomic" {
		fmt.Fprintf(w, " Atomic type     : %s\n", o.Atomic)
	}
	if o.Verb == "read" || o.Verb == "atomic" {
		fmt.Fprintf(w, " Outstand reads  : %d\n", o.Outs)
	}
	fmt.Fprintf(w, " TX depth        : %d\n", o.TxDepth)
	if o.Verb == "send" {
		fmt.Fprintf(w, " RX depth        : %d\n", o.RxDepth)
	}
	if !o.Lat {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", o.CQMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", s.mtu.Bytes())
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	fmt.Fprintf(w, " GID index       : %d\n", s.gidx)
	fmt.Fprintf(w, " Max inline data : %d[B]\n", o.Inline)
	fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
	fmt.Fprintf(w, " Data ex. method : Ethernet (irdma-emu perf exchange)\n")
	if o.Check {
		fmt.Fprintf(w, " Data check      : ON\n")
	}
	fmt.Fprint(w, resultLine)
}

// printAddr prints a QP's address lines as perftest does (the GID as
// decimal bytes).
func (s *perfSession) printAddr(which string, q qpInfo) {
	g, _ := netip.ParseAddr(q.GID)
	b := g.As16()
	parts := make([]string, 16)
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02d", c)
	}
	fmt.Fprintf(s.o.stdout, " %s address: LID 0000 QPN %#06x PSN %#06x RKey %#08x VAddr %#016x\n",
		which, q.QPN, q.PSN, q.RKey, q.VA)
	fmt.Fprintf(s.o.stdout, " GID: %s\n", strings.Join(parts, ":"))
}

func (s *perfSession) printTableHead() {
	o := s.o
	fmt.Fprint(o.stdout, resultLine)
	if o.Lat {
		fmt.Fprintln(o.stdout, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
		return
	}
	unit, _ := s.bwUnit()
	fmt.Fprintf(o.stdout, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", unit, unit)
}

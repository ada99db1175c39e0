package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

func init() {
	register(&command{
		name:    "stats",
		summary: "show a running device's counters and modelled cycles (stats [--device NAME] [--json] [--qp N] [--watch 1s])",
		run:     runStats,
	})
}

const statsUsage = `usage: irdma-emu stats [--device NAME] [--json] [--qp N] [--watch INTERVAL [--count N]]

Shows a running device's counters: the port's hardware counters under
irdma's hw_stats names (ip4InPkts, ip4OutOctets, RxUDP, ...), the data
plane's own (packets, bytes, retransmissions, NAKs sent and received by
kind, RNR retries, ICRC outcomes, out-of-sequence and duplicate requests,
drops by reason), the link's (frames, sendmmsg batching, drops, faults
injected), the modelled device cycles per pipeline stage with the time
they stand for at the model's clock, and per-QP counters.
docs/daemon.md says what each counts.

--json prints one JSON object (one per line with --watch). --watch
repeats every INTERVAL, with packet and byte rates, until interrupted
or --count samples have been shown.

Exit status: 0; 1 if the daemon cannot be reached or the QP has no
counters; 2 usage.

flags:
`

func runStats(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf ctlFlags
	cf.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON (one object per sample)")
	qpn := fs.Int64("qp", -1, "show only QP `N`")
	watch := fs.Duration("watch", 0, "repeat every `INTERVAL` (e.g. 1s)")
	count := fs.Int("count", 0, "with --watch, stop after N samples (0: until interrupted)")
	fs.Usage = func() {
		fmt.Fprint(stderr, statsUsage)
		fs.PrintDefaults()
	}
	if code, done := parseToolFlags(fs, args); done {
		return code
	}
	if *qpn < -1 || *qpn > 1<<24-1 {
		fmt.Fprintf(stderr, "irdma-emu stats: --qp %d is not a QP number\n", *qpn)
		return exitUsage
	}
	if *watch < 0 || (*watch > 0 && *watch < 10*time.Millisecond) {
		fmt.Fprintf(stderr, "irdma-emu stats: --watch %v: give at least 10ms\n", *watch)
		return exitUsage
	}
	if *count < 0 {
		fmt.Fprintf(stderr, "irdma-emu stats: --count %d\n", *count)
		return exitUsage
	}
	c, err := cf.dial()
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu stats: %v\n", err)
		return exitFail
	}
	defer c.Close()

	var stop chan os.Signal
	if *watch > 0 {
		stop = make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(stop)
	}
	var prev *daemon.Stats
	for n := 1; ; n++ {
		s, err := c.Stats(*qpn)
		if err != nil {
			fmt.Fprintf(stderr, "irdma-emu stats: %v\n", err)
			return exitFail
		}
		if *jsonOut {
			enc := json.NewEncoder(stdout)
			if *watch == 0 {
				enc.SetIndent("", "  ")
			}
			if err := enc.Encode(s); err != nil {
				return exitFail
			}
		} else {
			if *watch > 0 {
				fmt.Fprintf(stdout, "--- %s\n", s.Time.Format("15:04:05.000"))
			}
			fmt.Fprint(stdout, formatStats(s, prev, *qpn >= 0))
		}
		if *watch == 0 || (*count > 0 && n >= *count) {
			return exitOK
		}
		prev = &s
		select {
		case <-stop:
			return exitOK
		case <-time.After(*watch):
		}
	}
}

// formatStats renders s for people; with prev, rates over the interval.
func formatStats(s daemon.Stats, prev *daemon.Stats, oneQP bool) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	pt := s.Port
	p("%s port 1: %s, transport %s, up %s\n", s.Device, pt.State, pt.Transport,
		(time.Duration(s.Uptime * float64(time.Second))).Round(time.Second))
	if s.Profile != "" {
		p("profile: %s\n", s.Profile)
	}
	if prev != nil {
		dt := s.Time.Sub(prev.Time).Seconds()
		if dt > 0 {
			pp := prev.Port
			p("rates: tx %.0f pkt/s %s/s, rx %.0f pkt/s %s/s\n",
				float64(pt.TxPackets-pp.TxPackets)/dt, bytesHuman(float64(pt.TxBytes-pp.TxBytes)/dt),
				float64(pt.RxPackets-pp.RxPackets)/dt, bytesHuman(float64(pt.RxBytes-pp.RxBytes)/dt))
		}
	}
	if !oneQP {
		r := s.Resources
		sessions := fmt.Sprint(r.Sessions)
		if r.Sessions < 0 {
			sessions = "?"
		}
		p("resources: %s sessions, %d PDs, %d CQs, %d QPs (%d with a transport), %d MRs/MWs, %d AHs, %d multicast groups, %d bus regions\n",
			sessions, r.PDs, r.CQs, r.QPs, r.Transports, r.MRs, r.AHs, r.McastGroups, r.BusRegions)
		if r.CMChannels != 0 || r.CMIDs != 0 || r.CMListens != 0 {
			p("rdma_cm: %d channels, %d ids, %d listens\n", r.CMChannels, r.CMIDs, r.CMListens)
		}
		p("\nhardware counters (irdma hw_stats)\n")
		if pt.HWError != "" {
			p("  unavailable: %s\n", pt.HWError)
		}
		for i := 0; i < len(pt.HW); i += 2 {
			p("  %-20s %14d", pt.HW[i].Name, pt.HW[i].Value)
			if i+1 < len(pt.HW) {
				p("    %-20s %14d", pt.HW[i+1].Name, pt.HW[i+1].Value)
			}
			p("\n")
		}
		p("\ndata plane (port)\n")
		writeCounters(&b, pt.Counters)
		sc := pt.Sched
		state := "polling"
		if sc.Parked {
			state = "parked"
		}
		p("  workers: %s (%d polling); %d wake-ups, %d backoff timers, %d parks, %d unparks, %d doorbells found after a park\n",
			state, sc.Pollers, sc.Wakeups, sc.TimerArms, sc.Parks, sc.Unparks, sc.ParkFound)
		db := pt.Doorbells
		p("  doorbells: %d polled, %d foreign; notifications: %d contexts, %d wake-ups, %d QPs named, %d posts notified, %d suppressed\n",
			db.Polled, db.Foreign, db.NotifyContexts, db.NotifyWakeups, db.NotifyNamed, db.Notified, db.Suppressed)
		p("  program memory outside shared memory: %d /proc/<pid>/mem calls\n", pt.ProcMemCalls)
		l := pt.Link
		p("\nlink (UDP/4791 on %s, %s)\n", strings.Join(l.Addrs, " "), l.Mode)
		p("  %-4s %14s %16s %12s %12s\n", "", "frames", "bytes", "calls", "frames/call")
		p("  %-4s %14d %16d %12d %12s\n", "tx", l.TxFrames, l.TxBytes, l.SendCalls, perCall(l.TxFrames, l.SendCalls))
		p("  %-4s %14d %16d %12d %12s\n", "rx", l.RxFrames, l.RxBytes, l.RecvCalls, perCall(l.RxFrames, l.RecvCalls))
		p("  icrc: good %d, unverifiable %d, bad %d; resealed %d; partial sends %d\n", l.ICRCGood, l.ICRCUnver, l.ICRCBad, l.Resealed, l.Partial)
		p("  segmentation offload: %d sends of %d frames (%s per send), %d refused; %d received whole, cut into %d frames\n",
			l.GSOSends, l.GSOFrames, perCall(l.GSOFrames, l.GSOSends), l.GSORefused, l.GROReceives, l.GROFrames)
		p("  tx drops: %s\n", mapLine(l.TxDrops))
		p("  rx drops: %s\n", mapLine(l.RxDrops))
		spec := l.Faults.Spec
		if spec == "" {
			spec = "none"
		}
		p("  faults (%s): offered %d, lost %d, duplicated %d, corrupted %d, reordered %d\n",
			spec, l.Faults.Offered, l.Faults.Lost, l.Faults.Duplicated, l.Faults.Corrupted, l.Faults.Reordered)
		lb := pt.Loopback
		p("\nloopback (frames to the port's own GIDs, kept inside the device)\n")
		p("  frames %d, bytes %d; multicast copies %d (no buffer %d); payload read from the sender's buffer %d\n",
			lb.Frames, lb.Bytes, lb.Multicast, lb.NoBuffer, lb.Lent)
		cy := s.Cycles
		p("\nmodelled cycles (device clock %s)\n", hzHuman(cy.ClockHz))
		p("  %-18s %12s %16s %16s %14s\n", "stage", "count", "bytes", "cycles", "time")
		for _, st := range cy.Stages {
			p("  %-18s %12d %16d %16d %14s\n", st.Stage, st.Count, st.Bytes, st.Cycles, time.Duration(st.TimeNs))
		}
		p("  %-18s %12s %16s %16d %14s\n", "total", "", "", cy.TotalCycles, time.Duration(cy.TotalTimeNs))
	}
	if len(s.QPs) > 0 {
		p("\nQPs\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  qpn\ttype\tstate\ttx pkts\trx pkts\ttx bytes\trx bytes\tretrans\tnaks tx\tnaks rx\trnr\tdrops\t\n")
		for _, q := range s.QPs {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", q.QPN, q.Type, q.State,
				q.TxPackets, q.RxPackets, q.TxBytes, q.RxBytes, q.Retransmissions,
				sum(q.NAKsSent), sum(q.NAKsReceived), q.RNRRetries, sum(q.Drops))
		}
		tw.Flush()
		if oneQP {
			p("\nQP %d\n", s.QPs[0].QPN)
			writeCounters(&b, s.QPs[0].Counters)
		}
	} else if !oneQP {
		p("\nQPs: none with traffic\n")
	}
	return b.String()
}

// writeCounters renders the data plane's counters.
func writeCounters(b *strings.Builder, c daemon.Counters) {
	fmt.Fprintf(b, "  %-4s %14s %16s\n", "", "packets", "bytes")
	fmt.Fprintf(b, "  %-4s %14d %16d\n", "tx", c.TxPackets, c.TxBytes)
	fmt.Fprintf(b, "  %-4s %14d %16d\n", "rx", c.RxPackets, c.RxBytes)
	fmt.Fprintf(b, "  retransmissions %d, timeouts %d, window cuts %d, RNR retries %d, out-of-sequence %d, duplicate requests %d\n",
		c.Retransmissions, c.Timeouts, c.WindowCuts, c.RNRRetries, c.OutOfSequence, c.DuplicateRequests)
	fmt.Fprintf(b, "  acks sent %d (coalesced %d), read replays %d, atomic replays %d of %d duplicates, tx stalls %d, fatal errors %d\n",
		c.AcksSent, c.AcksCoalesced, c.ReadReplays, c.AtomicReplays, c.AtomicDuplicates, c.TxStalls, c.FatalErrors)
	fmt.Fprintf(b, "  wqes: sq %d, rq %d; cqes %d\n", c.SQWQEs, c.RQWQEs, c.CQEs)
	fmt.Fprintf(b, "  NAKs sent: %s\n", mapLine(c.NAKsSent))
	fmt.Fprintf(b, "  NAKs received: %s\n", mapLine(c.NAKsReceived))
	fmt.Fprintf(b, "  ICRC: verified %d, verified by the link %d, unverifiable %d, failed %d\n",
		c.ICRC.Verified, c.ICRC.LinkVerified, c.ICRC.Unverifiable, c.ICRC.Failed)
	fmt.Fprintf(b, "  drops: %s\n", mapLine(c.Drops))
}

// mapLine lists the non-zero entries of m, "none" if there are none.
func mapLine(m map[string]uint64) string {
	var keys []string
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]uint64) uint64 {
	var t uint64
	for _, v := range m {
		t += v
	}
	return t
}

func perCall(n, calls uint64) string {
	if calls == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(n)/float64(calls))
}

func bytesHuman(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f kB", v/1e3)
	}
	return fmt.Sprintf("%.0f B", v)
}

func hzHuman(hz uint64) string {
	if hz >= 1e9 && hz%1e6 == 0 {
		return fmt.Sprintf("%g GHz", float64(hz)/1e9)
	}
	return fmt.Sprintf("%d Hz", hz)
}

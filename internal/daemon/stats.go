package daemon

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// Stats is what `irdma-emu stats` shows: the port's hardware counters as
// irdma names them, the data plane's own counters, the link's, the modelled
// cycles per stage, and per-QP counters. docs/daemon.md says what each
// field counts. The JSON form is the control socket's `stats` result.
type Stats struct {
	Device  string    `json:"device"`
	Profile string    `json:"profile"` // ProfileName: "E810 (GEN_2)" or "E2100 (GEN_3)"
	Time    time.Time `json:"time"`
	Uptime  float64   `json:"uptime_s"`
	Port    PortStats `json:"port"`
	// Cycles are the modelled device cycles per pipeline stage (the
	// device's Meter), with the time they represent at the model's clock.
	Cycles CycleStats `json:"cycles"`
	// QPs are the QPs with a data-plane transport (all of them, or the
	// one asked for).
	QPs []QPStats `json:"qps"`
	// Resources are what the device holds now.
	Resources Resources `json:"resources"`
	// CM are the communication manager's counters (docs/cm.md).
	CM CMStats `json:"cm"`
}

// Resources count what the device holds now: the attach sessions (the
// programs' open uverbs files), the objects of every consumer as the
// driver's resource bitmaps count them (reserved ids left out), the
// host-memory regions mapped at device IOVAs (the driver's own DMA memory
// included) and the QPs with a data-plane transport. A program that exits
// or is killed gives all of it back (docs/daemon.md).
type Resources struct {
	// Sessions is -1 when the attach handler does not count them.
	Sessions    int `json:"sessions"`
	PDs         int `json:"pds"`
	CQs         int `json:"cqs"`
	QPs         int `json:"qps"`
	MRs         int `json:"mrs"` // MRs and MWs: STag indices
	AHs         int `json:"ahs"`
	McastGroups int `json:"mcast_groups"`
	SRQs        int `json:"srqs"` // GEN_3
	BusRegions  int `json:"bus_regions"`
	Transports  int `json:"transports"` // port.active_qps
	// CMChannels and CMIDs are the RDMA CM's open event channels
	// (/dev/infiniband/rdma_cm files) and their ids (rdmacm).
	CMChannels int `json:"cm_channels"`
	CMIDs      int `json:"cm_ids"`
	CMListens  int `json:"cm_listens"` // service IDs listened on

}

// sessionCounter is implemented by an attach handler that counts its
// sessions (the uverbs provider).
type sessionCounter interface{ Sessions() int }

// PortStats are the counters of port 1.
type PortStats struct {
	State     string `json:"state"`
	Transport string `json:"transport"`
	// HW are the hardware counters irdma's hw_stats exposes (the driver's
	// GATHER_STATS, GEN_2 names), in the driver's order.
	HW []HWCounter `json:"hw_counters"`
	// HWError is set when GATHER_STATS failed (HW is then empty).
	HWError string `json:"hw_counters_error,omitempty"`
	// Counters are the data plane's counters summed over the port gate and
	// every worker.
	Counters
	Link LinkStats `json:"link"`
	// Loopback are the frames the device delivered to itself (an own GID
	// as destination) instead of giving them to the link.
	Loopback         LoopbackStats `json:"loopback"`
	ActiveQPs        int           `json:"active_qps"`
	UnknownDoorbells uint64        `json:"unknown_doorbells"`
	// IntakeTimeouts: commands that went ahead before the worker took up
	// the work posted before them (docs/dataplane.md "Commands after posts").
	IntakeTimeouts uint64 `json:"intake_timeouts"`
	Sched          Sched  `json:"sched"`
	// Doorbells are the user contexts' doorbells and notifications (the
	// uverbs provider's counters; zero with another attach handler).
	Doorbells Doorbells `json:"doorbells"`
	// ProcMemCalls is the system calls on programs' /proc/self/mem for
	// memory registered outside their shared arenas (docs/preload.md
	// "Memory the device reaches"): zero while every buffer is shared.
	ProcMemCalls uint64 `json:"proc_mem_calls"`
}

// Doorbells count how the programs' posts reached the data plane
// (docs/dataplane.md "Idle and wake-up on post").
type Doorbells struct {
	Polled         uint64 `json:"polled"`          // SQ doorbell words found set by a polling worker
	Foreign        uint64 `json:"foreign"`         // doorbell values naming no QP of their context
	NotifyContexts int    `json:"notify_contexts"` // contexts that notify (NOTIFY) now
	NotifyWakeups  uint64 `json:"notify_wakeups"`  // eventfd reads: notifications that woke the daemon
	NotifyNamed    uint64 `json:"notify_named"`    // QPs rung by their bit in a notify page
	Notified       uint64 `json:"notified"`        // posts the programs notified (the engine was parked)
	Suppressed     uint64 `json:"suppressed"`      // posts that needed no notification (the engine polled)
}

// providerStats is implemented by the uverbs provider.
type providerStats interface{ Stats() uverbs.Stats }

// Sched are the data-plane workers' scheduling counters (emu/engine
// SchedStats): an idle daemon's stay still.
type Sched struct {
	Wakeups   uint64 `json:"wakeups"`    // a parked worker woke (kick or backoff timer)
	TimerArms uint64 `json:"timer_arms"` // backoff timers for doorbell pages whose programs cannot notify
	Parks     uint64 `json:"parks"`      // every worker parked: programs must notify
	Unparks   uint64 `json:"unparks"`    // a worker polls again
	ParkFound uint64 `json:"park_found"` // doorbells found by the poll right after a park
	Inline    uint64 `json:"inline"`     // QP runs by the goroutine that brought the work (worker parked)
	// NotifySkipped: QPs of a notifying context not rung (nothing new at the SQ head).
	NotifySkipped uint64 `json:"notify_skipped"`
	// PollSkipped: QPs a doorbell poll named and did not ring (nothing new at the SQ head).
	PollSkipped uint64 `json:"poll_skipped"`
	Pollers     int    `json:"pollers"` // workers not parked now
	Parked      bool   `json:"parked"`
}

// HWCounter is one hardware counter.
type HWCounter struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// Counters are the data plane's counters (emu/qp Counters), per port or
// per QP.
type Counters struct {
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"` // RoCEv2 UDP payload bytes
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`

	Retransmissions uint64 `json:"retransmissions"`
	Timeouts        uint64 `json:"timeouts"`
	RNRRetries      uint64 `json:"rnr_retries"`
	// WindowCuts: requester windows halved by a loss (emu/qp window.go).
	WindowCuts uint64 `json:"window_cuts"`
	// NAKsSent and NAKsReceived are by kind: psn-seq, invalid-request,
	// remote-access, remote-op, rnr.
	NAKsSent          map[string]uint64 `json:"naks_sent"`
	NAKsReceived      map[string]uint64 `json:"naks_received"`
	OutOfSequence     uint64            `json:"out_of_sequence"`
	DuplicateRequests uint64            `json:"duplicate_requests"`
	ReadReplays       uint64            `json:"read_replays"`
	AtomicReplays     uint64            `json:"atomic_replays"`
	AtomicDuplicates  uint64            `json:"atomic_duplicates"`
	AcksSent          uint64            `json:"acks_sent"`
	AcksCoalesced     uint64            `json:"acks_coalesced"`
	SQWQEs            uint64            `json:"sq_wqes"`
	RQWQEs            uint64            `json:"rq_wqes"`
	CQEs              uint64            `json:"cqes"`
	FatalErrors       uint64            `json:"fatal_errors"`
	TxStalls          uint64            `json:"tx_stalls"`
	ICRC              ICRCCounts        `json:"icrc"`
	// Drops are received packets dropped, by reason.
	Drops map[string]uint64 `json:"drops"`
}

// ICRCCounts are the ICRC outcomes of received packets.
type ICRCCounts struct {
	Verified     uint64 `json:"verified"`      // checked by the device, good
	LinkVerified uint64 `json:"link_verified"` // checked by the link, good
	Unverifiable uint64 `json:"unverifiable"`  // IPv4 on a UDP socket, ID not 0: accepted
	Failed       uint64 `json:"failed"`        // mismatch: dropped
	InDevice     uint64 `json:"in_device"`     // delivered inside the device: none computed or checked
}

// LoopbackStats count the frames the device kept for itself
// (docs/dataplane.md "Loopback"): frames and whole-frame bytes handed to its
// own receive path, the multicast copies among them (the frame also went to
// the link), the copies not made for want of a packet buffer, and the
// frames whose payload the receiver read from the sender's buffer.
type LoopbackStats struct {
	Frames    uint64 `json:"frames"`
	Bytes     uint64 `json:"bytes"`
	Multicast uint64 `json:"multicast_copies"`
	NoBuffer  uint64 `json:"no_buffer"`
	Lent      uint64 `json:"lent"`
}

// LinkStats are the UDP link's counters (docs/transport.md, "Counters").
type LinkStats struct {
	Mode      string   `json:"mode"`
	Addrs     []string `json:"addrs"`
	TxFrames  uint64   `json:"tx_frames"`
	TxBytes   uint64   `json:"tx_bytes"` // whole frames
	RxFrames  uint64   `json:"rx_frames"`
	RxBytes   uint64   `json:"rx_bytes"`
	ICRCGood  uint64   `json:"icrc_good"`
	ICRCUnver uint64   `json:"icrc_unverifiable"`
	ICRCBad   uint64   `json:"icrc_bad"`
	Resealed  uint64   `json:"resealed"`
	SendCalls uint64   `json:"sendmmsg_calls"`
	RecvCalls uint64   `json:"recvmmsg_calls"`
	Partial   uint64   `json:"partial_sends"`
	// GSO sends (several equal frames in one datagram the kernel cuts or
	// the peer takes whole) and the frames they carried; GSORefused > 0:
	// the kernel refused one and the link sends frame by frame from that
	// address. GRO: datagrams received whole that the link cut into
	// frames (docs/transport.md "Segmentation offload").
	GSOSends    uint64 `json:"gso_sends"`
	GSOFrames   uint64 `json:"gso_frames"`
	GSORefused  uint64 `json:"gso_refused"`
	GROReceives uint64 `json:"gro_receives"`
	GROFrames   uint64 `json:"gro_frames"`
	// TxDrops and RxDrops are by reason; only non-zero reasons appear.
	TxDrops map[string]uint64 `json:"tx_drops"`
	RxDrops map[string]uint64 `json:"rx_drops"`
	Faults  FaultCounts       `json:"faults"`
	// Reopens counts the times the link was reopened to change faults.
	Reopens uint64 `json:"reopens"`
}

// FaultCounts are the faults injected into sent frames.
type FaultCounts struct {
	Spec       string `json:"spec"` // the faults now configured ("" for none)
	Offered    uint64 `json:"offered"`
	Lost       uint64 `json:"lost"`
	Duplicated uint64 `json:"duplicated"`
	Corrupted  uint64 `json:"corrupted"`
	Reordered  uint64 `json:"reordered"`
}

// CycleStats are the modelled cycles of each pipeline stage.
type CycleStats struct {
	ClockHz     uint64       `json:"clock_hz"`
	Stages      []StageStats `json:"stages"`
	TotalCycles uint64       `json:"total_cycles"`
	TotalTimeNs int64        `json:"total_time_ns"`
}

// StageStats are one stage's operations, bytes and cycles, and the time
// the cycles represent at the model's clock.
type StageStats struct {
	Stage  string `json:"stage"`
	Count  uint64 `json:"count"`
	Bytes  uint64 `json:"bytes"`
	Cycles uint64 `json:"cycles"`
	TimeNs int64  `json:"time_ns"`
}

// QPStats are one QP's counters.
type QPStats struct {
	QPN   uint32 `json:"qpn"`
	Type  string `json:"type"`
	State string `json:"state"`
	Counters
}

// Stats collects the statistics; with qpn ≥ 0 only that QP is listed (an
// error if it has no data-plane transport).
func (d *Daemon) Stats(qpn int64) (Stats, error) {
	now := time.Now()
	s := Stats{Device: d.cfg.Name, Profile: ProfileName(d.dev.Profile()), Time: now, Uptime: now.Sub(d.start).Seconds()}
	es := d.eng.Stats()
	p := &s.Port
	p.State = d.portState().String()
	p.Transport = d.link.Mode().String()
	if hw, err := d.drv.GetHWStats(); err != nil {
		p.HWError = err.Error()
	} else {
		for _, c := range hw {
			p.HW = append(p.HW, HWCounter{Name: c.Name, Value: c.Value})
		}
	}
	p.Counters = counters(es.Port)
	p.ActiveQPs = es.QPs
	p.UnknownDoorbells = es.UnknownDoorbells
	p.IntakeTimeouts = es.IntakeTimeouts
	if ps, ok := d.handler.(providerStats); ok {
		u := ps.Stats()
		p.Doorbells = Doorbells{Polled: u.Doorbells, Foreign: u.ForeignDoorbells, NotifyContexts: u.NotifyContexts,
			NotifyWakeups: u.NotifyWakeups, NotifyNamed: u.NotifyNamed, Notified: u.Notified, Suppressed: u.Suppressed}
		p.ProcMemCalls = u.ProcMemCalls
	}
	sc := es.Sched
	p.Sched = Sched{Wakeups: sc.Wakeups, TimerArms: sc.TimerArms, Parks: sc.Parks, Unparks: sc.Unparks, Inline: sc.Inline, NotifySkipped: sc.NotifySkipped, PollSkipped: sc.PollSkipped,
		ParkFound: sc.ParkFound, Pollers: sc.Pollers, Parked: sc.Parked}
	p.Link = d.linkStats()
	p.Loopback = LoopbackStats{Frames: es.Loopback.Frames, Bytes: es.Loopback.Bytes,
		Multicast: es.Loopback.Multicast, NoBuffer: es.Loopback.NoBuffer, Lent: es.Loopback.Lent}
	s.Cycles = cycles(es.Meter, d.dev.Meter().Model().Hz())
	s.Resources = d.resources(es.QPs)
	d.ownResources(&s.Resources)
	s.CM = d.cmStats()

	if qpn >= 0 {
		q, ok := d.qpStats(uint32(qpn))
		if !ok {
			return Stats{}, fmt.Errorf("QP %d has no data-plane state (no such QP, or it never had work)", qpn)
		}
		s.QPs = []QPStats{q}
		return s, nil
	}
	s.QPs = []QPStats{}
	tab := d.dev.QPs()
	n := tab.Count()
	limit := d.dev.Profile().Limits.MaxQPID
	// The table has no iterator; ids are dense from the bottom (bitmap
	// allocation), so the scan stops once every QP has been seen.
	for id, seen := uint32(0), 0; id < limit && seen < n; id++ {
		if tab.Get(id) == nil {
			continue
		}
		seen++
		// The data plane takes every QP up when its context is loaded
		// (emu/engine Engine.load); the list is of those with traffic.
		if q, ok := d.qpStats(id); ok && q.hadTraffic() {
			s.QPs = append(s.QPs, q)
		}
	}
	return s, nil
}

func (d *Daemon) resources(transports int) Resources {
	r := d.drv.Resources()
	out := Resources{Sessions: -1, PDs: r.PDs, CQs: r.CQs, QPs: r.QPs, MRs: r.MRs, AHs: r.AHs,
		McastGroups: r.McastGroups, SRQs: r.SRQs, BusRegions: d.dev.Mem().NumRegions(), Transports: transports}
	if sc, ok := d.handler.(sessionCounter); ok {
		out.Sessions = sc.Sessions()
	}
	if cma := d.RdmaCM(); cma != nil {
		c := cma.Counts()
		out.CMChannels, out.CMIDs, out.CMListens = c.Channels, c.IDs, c.Listens
	}
	return out
}

func (d *Daemon) qpStats(id uint32) (QPStats, bool) {
	q := d.dev.QPs().Get(id)
	if q == nil {
		return QPStats{}, false
	}
	c, ok := d.eng.QPStats(id)
	if !ok {
		return QPStats{}, false
	}
	return QPStats{QPN: id, Type: q.Type.String(), State: q.State().String(), Counters: counters(c)}, true
}

// hadTraffic reports whether the QP sent or received anything or took a
// WQE.
func (q QPStats) hadTraffic() bool {
	c := &q.Counters
	return c.TxPackets|c.RxPackets|c.SQWQEs|c.RQWQEs|sum(c.Drops) != 0
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func counters(c qp.CounterSnapshot) Counters {
	out := Counters{
		TxPackets: c.TxPackets, TxBytes: c.TxBytes, RxPackets: c.RxPackets, RxBytes: c.RxBytes,
		Retransmissions: c.Retransmits, Timeouts: c.Timeouts, RNRRetries: c.RNRWaits, WindowCuts: c.WindowCuts,
		NAKsSent: map[string]uint64{}, NAKsReceived: map[string]uint64{},
		OutOfSequence: c.OutOfSequence, DuplicateRequests: c.Duplicates,
		ReadReplays: c.ReadReplays, AtomicReplays: c.AtomicReplays, AtomicDuplicates: c.AtomicDuplicates,
		AcksSent: c.AcksSent, AcksCoalesced: c.AcksCoalesced,
		SQWQEs: c.SQWQEs, RQWQEs: c.RQWQEs, CQEs: c.CQEs, FatalErrors: c.FatalErrors, TxStalls: c.TxStalls,
		ICRC: ICRCCounts{Verified: c.ICRCVerified, LinkVerified: c.ICRCLinkGood,
			Unverifiable: c.ICRCUnverifiable, Failed: c.ICRCFailed, InDevice: c.ICRCInDevice},
		Drops: map[string]uint64{},
	}
	for k := range qp.NumNAKKinds {
		out.NAKsSent[k.String()] = c.NAKsSent[k]
		out.NAKsReceived[k.String()] = c.NAKsRcvd[k]
	}
	for r := range qp.NumDropReasons {
		out.Drops[r.String()] = c.Drops[r]
	}
	return out
}

func (d *Daemon) linkStats() LinkStats {
	c := d.link.Counters()
	f := d.link.Faults()
	spec := ""
	if f.Enabled() {
		spec = f.String()
	}
	ls := LinkStats{
		Mode: d.link.Mode().String(), Addrs: addrStrings(d.link.Addrs()),
		TxFrames: c.TxFrames, TxBytes: c.TxBytes, RxFrames: c.RxFrames, RxBytes: c.RxBytes,
		ICRCGood: c.ICRCGood, ICRCUnver: c.ICRCUnverifiable, ICRCBad: c.ICRCBad,
		Resealed: c.Resealed, SendCalls: c.SendCalls, RecvCalls: c.RecvCalls, Partial: c.Partial,
		GSOSends: c.GSOSends, GSOFrames: c.GSOFrames, GSORefused: c.GSORefused,
		GROReceives: c.GROReceives, GROFrames: c.GROFrames,
		TxDrops: map[string]uint64{}, RxDrops: map[string]uint64{},
		Faults: FaultCounts{Spec: spec, Offered: c.Faults.Offered, Lost: c.Faults.Lost,
			Duplicated: c.Faults.Duplicated, Corrupted: c.Faults.Corrupted, Reordered: c.Faults.Reordered},
		Reopens: d.link.reopens.Load(),
	}
	if g := d.link.gapDrops.Load(); g != 0 {
		ls.TxDrops["link-reopen"] = g // sent while faults changed (setFaults)
	}
	for r := range udp.NumReasons {
		if v := c.TxDrops[r]; v != 0 {
			ls.TxDrops[slug(reasonString(r))] = v
		}
		if v := c.RxDrops[r]; v != 0 {
			ls.RxDrops[slug(reasonString(r))] = v
		}
	}
	return ls
}

// reasonString names a UDP link drop reason (the first ones are
// link.DropReason's).
func reasonString(r int) string {
	if r < link.NumDropReasons {
		return link.DropReason(r).String()
	}
	return udp.Reason(r).String()
}

// slug makes a reason's text a JSON key: "filtered (EPERM)" →
// "filtered-eperm".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

func cycles(m timing.Snapshot, hz uint64) CycleStats {
	cs := CycleStats{ClockHz: hz, TotalCycles: uint64(m.Total), TotalTimeNs: int64(m.Total.Duration(hz))}
	for s := range timing.Stage(timing.NumStages) {
		st := m.Stages[s]
		cs.Stages = append(cs.Stages, StageStats{Stage: s.String(), Count: st.Count, Bytes: st.Bytes,
			Cycles: uint64(st.Cycles), TimeNs: int64(st.Cycles.Duration(hz))})
	}
	return cs
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

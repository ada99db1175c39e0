package qp

import (
	"time"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The data plane of a QP (issue 4): requester (requester.go), responder
// (responder.go) and completer (completer.go), held in a Transport
// (transport.go) that a worker of emu/engine runs. This file holds what
// they share: the device-wide DataPlane, the tunables and the per-worker
// Ctx.
//
// The stages of a work request, and the function that is each, are listed
// in pipeline.go (architecture.md, "How a work request travels").
//
// Nothing on these paths takes a mutex except the CQ's (cq.CQ.Post, after
// all packet work) and the AEQ's: a Transport is run by one worker at a
// time, claimed with an atomic (Transport.claim). The QP's own mutex is
// taken only when its context changed (MODIFY_QP, SUSPEND_QP: QP.Gen moved)
// and when the data plane moves it to ERROR.

// Tunables are the transport's choices that the QP context does not carry
// on GEN_2. docs/dataplane.md explains each default.
type Tunables struct {
	// RTO is the retransmission timeout. GEN_2's context has no local ACK
	// timeout (irdma ignores IB_QP_TIMEOUT, docs/hw-controlpath.md "QP host
	// context"); the timer is max(RTO, RTOMIN × RTOMinUnit). Default 67.1 ms:
	// the local ACK timeout 14 (4.096 µs × 2^14) that ibv_rc_pingpong and
	// most verbs programs ask for.
	RTO time.Duration
	// RTOMinUnit is the unit of the context's 7-bit RTOMIN (irdma writes
	// 5). Default 100 µs.
	RTOMinUnit time.Duration
	// AckReqEvery sets AckReq on every Nth packet of a long message
	// besides the last (rxe RXE_MAX_PKT_PER_ACK = 64). Default 64.
	AckReqEvery int
	// MaxUnackedPSNs bounds the requester window: no new packet goes out
	// while the next PSN is a window ahead of the oldest unacknowledged
	// one, and the window, which loss halves (window.go), grows back up to
	// this. Default 128, rxe's RXE_MAX_UNACKED_PSNS. 512 gave two daemons'
	// 64 KiB WRITEs about 13 % more, but rxe in a slow guest then answered
	// AckReqs up to 362 ms late and the requester timed out on packets
	// that had arrived (docs/performance.md "The requester window").
	MaxUnackedPSNs uint32
	// MaxOutstandingWQEs bounds the SQ WQEs fetched and not completed.
	// Default 256.
	MaxOutstandingWQEs int
	// InfiniteRetry7 makes REXMIT_THRESH 7 mean "retry forever", as rxe
	// does; IBTA (C9-141) makes only the RNR retry count 7 infinite. Default
	// false (IBTA).
	InfiniteRetry7 bool
	// MinRNRTimer is the RNR NAK timer code the responder sends; GEN_2 has no
	// MINRNR field (docs/hw-controlpath.md "QP host context"). Default 12
	// (640 µs, ibv_rc_pingpong's min_rnr_timer). As for every other field
	// the zero value selects the default, although IBTA's code 0 is a
	// timer too (the longest, 655.36 ms: Vol 1 §9.7.5.2.8, Table 45): a
	// zero-valued Tunables — the daemon's — once made every RNR NAK ask
	// its requester to wait 655 ms. RNRTimerLongest selects code 0.
	MinRNRTimer wire.RNRTimer
	// AckDelay delays the ACK of an AckReq packet that does not end a
	// message so that later ones coalesce into it; message ends are
	// acknowledged at the end of the batch they arrived in. Default 0.
	AckDelay time.Duration
	// TxBurst is how many packets a requester sends, RespBurst how many
	// READ response packets a responder sends, and RxBurst how many
	// received packets it processes per visit of its worker. Defaults 64.
	TxBurst, RespBurst, RxBurst int
	// InboxSize is the bound of a QP's queue of received packets (a power
	// of two). Default 512.
	InboxSize int
}

// RNRTimerLongest is the Tunables.MinRNRTimer that selects the RNR timer
// code 0 (655.36 ms): its five code bits are 0, and wire.RNRNAKSyndrome
// keeps only those.
const RNRTimerLongest wire.RNRTimer = 32

// DefaultTunables are the defaults docs/dataplane.md documents.
func DefaultTunables() Tunables {
	return Tunables{
		RTO:                4096 * time.Nanosecond << 14,
		RTOMinUnit:         100 * time.Microsecond,
		AckReqEvery:        64,
		MaxUnackedPSNs:     128,
		MaxOutstandingWQEs: 256,
		MinRNRTimer:        12,
		TxBurst:            64,
		RespBurst:          64,
		RxBurst:            64,
		InboxSize:          512,
	}
}

// fill replaces zero fields by defaults.
func (t *Tunables) fill() {
	d := DefaultTunables()
	if t.RTO <= 0 {
		t.RTO = d.RTO
	}
	if t.RTOMinUnit < 0 {
		t.RTOMinUnit = 0
	} else if t.RTOMinUnit == 0 {
		t.RTOMinUnit = d.RTOMinUnit
	}
	if t.AckReqEvery <= 0 {
		t.AckReqEvery = d.AckReqEvery
	}
	if t.MaxUnackedPSNs == 0 || t.MaxUnackedPSNs > wire.MaxPSNWindow/2 {
		t.MaxUnackedPSNs = d.MaxUnackedPSNs
	}
	if t.MaxOutstandingWQEs <= 0 {
		t.MaxOutstandingWQEs = d.MaxOutstandingWQEs
	}
	if t.MinRNRTimer == 0 || t.MinRNRTimer > RNRTimerLongest {
		t.MinRNRTimer = d.MinRNRTimer
	}
	if t.TxBurst <= 0 {
		t.TxBurst = d.TxBurst
	}
	if t.RespBurst <= 0 {
		t.RespBurst = d.RespBurst
	}
	if t.RxBurst <= 0 {
		t.RxBurst = d.RxBurst
	}
	if t.InboxSize <= 0 || t.InboxSize&(t.InboxSize-1) != 0 {
		t.InboxSize = d.InboxSize
	}
}

// DataPlane is what every Transport of a device shares: the device's
// blocks and the tunables. It is read-only once transports run.
type DataPlane struct {
	// QPs is the QP table; a Transport whose QP left it stops.
	QPs     *Table
	Mem     *hostmem.Memory
	MRs     *mr.Table
	AHs     *ah.Tables
	Events  *cq.Events
	Stats   *StatsBlock
	Meter   *timing.Meter
	Clock   timing.Clock
	Profile profile.Profile
	Tun     Tunables
	// PortMTU is the largest IB MTU the port's link carries (the UD
	// message limit); 0: 4096.
	PortMTU int
	// SrcPorts is the port's link when it sends from fixed UDP source
	// ports: frames are built with them, so the link need not reseal
	// their ICRCs (link.SourcePorter). nil: each QP's own port.
	SrcPorts link.SourcePorter

	limits WQELimits
}

// Init fills defaults; call it once before attaching transports.
func (dp *DataPlane) Init() {
	dp.Tun.fill()
	dp.limits = WQELimitsFrom(dp.Profile)
	if dp.PortMTU <= 0 || dp.PortMTU > wire.MaxPMTU {
		dp.PortMTU = wire.MaxPMTU
	}
	if dp.Meter == nil {
		dp.Meter = timing.NewMeter(nil)
	}
	if dp.Clock == nil {
		dp.Clock = timing.NewWall()
	}
}

// meter is the meter a transport run in ctx charges: the context's shard
// of the device's meter, or the device's meter itself.
func (t *Transport) meter(ctx *Ctx) *timing.Meter {
	if ctx.Meter != nil {
		return ctx.Meter
	}
	return t.dp.Meter
}

// charge prices one operation of stage s on n bytes (emu/timing).
func (t *Transport) charge(ctx *Ctx, s timing.Stage, n int) { t.meter(ctx).Charge(s, n) }

// Ctx is the per-worker context a Transport runs in: the port's transmit
// side and scratch space, so that the packet path allocates nothing. The
// engine owns one per worker; a Ctx is never used by two goroutines at
// once.
type Ctx struct {
	// Pool gives the packets frames are built into; Get returning nil is a
	// full transmit ring: the transport stops and retries later.
	Pool *link.Pool
	// Send queues a built packet for the port's link; it takes ownership
	// and never blocks (the worker batches and sends).
	Send func(p *link.Packet)
	// MAC is the port's Ethernet address (the source MAC when the QP
	// context has none).
	MAC wire.MAC
	// Port counts what every transport run in this context does, next to
	// each transport's own counters.
	Port *Counters
	// SealAtWire leaves each frame's ICRC to Send's receiver, which seals
	// the frames that leave the device (link.Packet.Seal) and not those it
	// delivers to itself (emu/engine, docs/dataplane.md "Loopback"); false
	// seals every frame as it is built.
	SealAtWire bool
	// Meter is this context's shard of the device's meter
	// (timing.Meter.Local), so that workers on different cores do not
	// share its counters; nil charges DataPlane.Meter.
	Meter *timing.Meter

	now   time.Duration
	run   uint64          // counts Transport.Runs in this context (readAhead)
	ra    *readAhead      // allocated on first use
	wb    *writeBehindBuf // allocated on first use
	spans []mr.Span
	wqe   [MaxWQEQuanta * QuantumSize]byte
	sq    SQWQE
	rq    RQWQE
	frame wire.Frame
	pf    wire.PacketFields
	ff    wire.FrameFields
	vlan  wire.VLANFields
}

// Now is the time of the current run.
func (c *Ctx) Now() time.Duration { return c.now }

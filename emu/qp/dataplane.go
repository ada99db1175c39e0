package qp

// The data plane of a QP (issue 4): requester (requester*.go), responder
// (responder*.go) and completer (completer.go), held in a Transport
// (transport.go) that a worker of emu/engine runs. This file holds what
// they share: the device-wide DataPlane, the tunables, the per-worker Ctx
// and the counters.
//
// Stages of a work request (architecture.md, "How a work request travels"):
//
//	doorbell hint / scan → Transport.Run → requester.fetch: SQ WQE by valid
//	bit → DecodeSQ → local op | segment by path MTU → build (emu/wire) into a
//	pooled link.Packet → Ctx.Send (batched by the worker) → link
//	link → engine port gate → Transport inbox → Run → responder (requests)
//	or completer (responses) → payload DMA, RQ WQE, ACK/NAK/READ response,
//	CQE (emu/cq), AE
//
// Nothing on these paths takes a mutex except the CQ's (cq.CQ.Post, after
// all packet work) and the AEQ's: a Transport is run by one worker at a
// time, claimed with an atomic (Transport.claim). The QP's own mutex is
// taken only when its context changed (MODIFY_QP, SUSPEND_QP: QP.Gen moved)
// and when the data plane moves it to ERROR.

import (
	"sync/atomic"
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
	// MaxUnackedPSNs is the requester window: no new packet goes out while
	// the next PSN is this far ahead of the oldest unacknowledged one
	// (rxe RXE_MAX_UNACKED_PSNS = 128). Default 128.
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
	// (640 µs, ibv_rc_pingpong's min_rnr_timer).
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
	if t.MinRNRTimer > 31 {
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

func (dp *DataPlane) charge(s timing.Stage, n int) { dp.Meter.Charge(s, n) }

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

	now   time.Duration
	spans []mr.Span
	wqe   [MaxWQEQuanta * QuantumSize]byte
	sq    SQWQE
	rq    RQWQE
	frame wire.Frame
	rx    wire.Frame
	pf    wire.PacketFields
	ff    wire.FrameFields
	vlan  wire.VLANFields
}

// Now is the time of the current run.
func (c *Ctx) Now() time.Duration { return c.now }

// NAKKind indexes the NAK counters.
type NAKKind uint8

// NAK kinds: the four NAK codes of IBTA Table 43 (RD's aside) and RNR.
const (
	NAKSeq NAKKind = iota
	NAKInvReq
	NAKRemAccess
	NAKRemOp
	NAKRNR
	NumNAKKinds
)

var nakKindNames = [NumNAKKinds]string{"psn-seq", "invalid-request", "remote-access", "remote-op", "rnr"}

func (k NAKKind) String() string {
	if k < NumNAKKinds {
		return nakKindNames[k]
	}
	return "nak?"
}

func nakKindOf(s wire.Syndrome) NAKKind {
	if s.IsRNRNAK() {
		return NAKRNR
	}
	switch s.NAKCode() {
	case wire.NAKPSNSequenceError:
		return NAKSeq
	case wire.NAKInvalidRequest:
		return NAKInvReq
	case wire.NAKRemoteAccessError:
		return NAKRemAccess
	}
	return NAKRemOp
}

// DropReason says why a received packet was dropped. Drops are counted,
// never returned (style-anchors G7/W8).
type DropReason uint8

// Drop reasons, port gate first (engine), then per QP.
const (
	DropParse         DropReason = iota // wire.ParseFrame refused the frame
	DropICRC                            // ICRC mismatch (ours or the link's)
	DropNotOurGID                       // destination IP is none of the port's GIDs
	DropQPNZero                         // DestQP 0
	DropUnknownQPN                      // no such QP
	DropTransport                       // opcode transport does not match the QP type
	DropMcastNoGroup                    // multicast with no group for the address
	DropQPState                         // the QP's state does not accept the packet
	DropAddress                         // RC: IPs are not the QP's (rxe check_addr)
	DropPKey                            // P_Key mismatch
	DropQKey                            // UD Q_Key mismatch
	DropInboxFull                       // the QP's inbound queue was full
	DropOutOfSequence                   // request PSN ahead of ePSN (after the one NAK)
	DropDuplicate                       // duplicate request with nothing to replay
	DropStaleResponse                   // response PSN behind or beyond what is outstanding
	DropBadResponse                     // response that matches no outstanding WQE
	DropNoRecvWQE                       // UD: no receive WQE posted
	DropUDTooLong                       // UD: message longer than the receive buffer
	DropResponderBusy                   // response queue full
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"parse", "icrc", "not-our-gid", "qpn-zero", "unknown-qpn", "transport", "mcast-no-group",
	"qp-state", "address", "pkey", "qkey", "inbox-full", "out-of-sequence", "duplicate",
	"stale-response", "bad-response", "no-recv-wqe", "ud-too-long", "responder-busy",
}

func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "drop?"
}

// Counters are the data plane's statistics, per QP (Transport.Counters)
// and per port (summed over the engine's workers). Every field is an atomic
// written by one worker and read by anyone.
type Counters struct {
	TxPackets, TxBytes atomic.Uint64 // packets put on the link, UDP payload bytes
	RxPackets, RxBytes atomic.Uint64 // packets accepted by the gate
	Retransmits        atomic.Uint64 // packets sent again (go-back-N)
	Timeouts           atomic.Uint64 // retransmission timer expiries
	RNRWaits           atomic.Uint64 // RNR timer expiries
	NAKsSent           [NumNAKKinds]atomic.Uint64
	NAKsRcvd           [NumNAKKinds]atomic.Uint64
	OutOfSequence      atomic.Uint64 // requests ahead of ePSN
	Duplicates         atomic.Uint64 // requests behind ePSN
	ReadReplays        atomic.Uint64 // duplicate READs executed again
	AtomicDuplicates   atomic.Uint64 // duplicate atomic requests (behind ePSN), replayed or not
	AtomicReplays      atomic.Uint64 // duplicate atomics answered from the cache
	AcksSent           atomic.Uint64 // ACK packets (not NAKs, not READ responses)
	AcksCoalesced      atomic.Uint64 // AckReqs answered by a later ACK
	SQWQEs, RQWQEs     atomic.Uint64 // WQEs consumed
	CQEs               atomic.Uint64 // CQEs written
	FatalErrors        atomic.Uint64 // QPs moved to ERROR by the data plane
	TxStalls           atomic.Uint64 // no packet buffer: transmission deferred
	ICRCVerified       atomic.Uint64 // ICRC checked by us and good
	ICRCLinkGood       atomic.Uint64 // ICRC checked good by the link
	ICRCUnverifiable   atomic.Uint64 // ICRC the link could not check (accepted)
	ICRCFailed         atomic.Uint64 // ICRC mismatch (dropped, also in Drops)
	Drops              [NumDropReasons]atomic.Uint64
}

// CounterSnapshot is a plain copy of Counters.
type CounterSnapshot struct {
	TxPackets, TxBytes, RxPackets, RxBytes uint64
	Retransmits, Timeouts, RNRWaits        uint64
	NAKsSent, NAKsRcvd                     [NumNAKKinds]uint64
	OutOfSequence, Duplicates              uint64
	ReadReplays, AtomicReplays             uint64
	AtomicDuplicates                       uint64
	AcksSent, AcksCoalesced                uint64
	SQWQEs, RQWQEs, CQEs, FatalErrors      uint64
	TxStalls                               uint64
	ICRCVerified, ICRCLinkGood             uint64
	ICRCUnverifiable, ICRCFailed           uint64
	Drops                                  [NumDropReasons]uint64
}

// Snapshot copies the counters.
func (c *Counters) Snapshot() CounterSnapshot {
	s := CounterSnapshot{
		TxPackets: c.TxPackets.Load(), TxBytes: c.TxBytes.Load(),
		RxPackets: c.RxPackets.Load(), RxBytes: c.RxBytes.Load(),
		Retransmits: c.Retransmits.Load(), Timeouts: c.Timeouts.Load(), RNRWaits: c.RNRWaits.Load(),
		OutOfSequence: c.OutOfSequence.Load(), Duplicates: c.Duplicates.Load(),
		ReadReplays: c.ReadReplays.Load(), AtomicReplays: c.AtomicReplays.Load(), AtomicDuplicates: c.AtomicDuplicates.Load(),
		AcksSent: c.AcksSent.Load(), AcksCoalesced: c.AcksCoalesced.Load(),
		SQWQEs: c.SQWQEs.Load(), RQWQEs: c.RQWQEs.Load(), CQEs: c.CQEs.Load(),
		FatalErrors: c.FatalErrors.Load(), TxStalls: c.TxStalls.Load(),
		ICRCVerified: c.ICRCVerified.Load(), ICRCLinkGood: c.ICRCLinkGood.Load(),
		ICRCUnverifiable: c.ICRCUnverifiable.Load(), ICRCFailed: c.ICRCFailed.Load(),
	}
	for i := range s.NAKsSent {
		s.NAKsSent[i] = c.NAKsSent[i].Load()
		s.NAKsRcvd[i] = c.NAKsRcvd[i].Load()
	}
	for i := range s.Drops {
		s.Drops[i] = c.Drops[i].Load()
	}
	return s
}

// Add accumulates o into s.
func (s *CounterSnapshot) Add(o CounterSnapshot) {
	s.TxPackets += o.TxPackets
	s.TxBytes += o.TxBytes
	s.RxPackets += o.RxPackets
	s.RxBytes += o.RxBytes
	s.Retransmits += o.Retransmits
	s.Timeouts += o.Timeouts
	s.RNRWaits += o.RNRWaits
	s.OutOfSequence += o.OutOfSequence
	s.Duplicates += o.Duplicates
	s.ReadReplays += o.ReadReplays
	s.AtomicReplays += o.AtomicReplays
	s.AtomicDuplicates += o.AtomicDuplicates
	s.AcksSent += o.AcksSent
	s.AcksCoalesced += o.AcksCoalesced
	s.SQWQEs += o.SQWQEs
	s.RQWQEs += o.RQWQEs
	s.CQEs += o.CQEs
	s.FatalErrors += o.FatalErrors
	s.TxStalls += o.TxStalls
	s.ICRCVerified += o.ICRCVerified
	s.ICRCLinkGood += o.ICRCLinkGood
	s.ICRCUnverifiable += o.ICRCUnverifiable
	s.ICRCFailed += o.ICRCFailed
	for i := range s.NAKsSent {
		s.NAKsSent[i] += o.NAKsSent[i]
		s.NAKsRcvd[i] += o.NAKsRcvd[i]
	}
	for i := range s.Drops {
		s.Drops[i] += o.Drops[i]
	}
}

// Dropped sums the drops.
func (s *CounterSnapshot) Dropped() uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d
	}
	return n
}

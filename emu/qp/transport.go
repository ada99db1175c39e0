package qp

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Claim states of a Transport (Transport.claim).
const (
	claimFree    = 0
	claimWorker  = 1 // a worker runs the QP
	claimControl = 2 // the control plane holds it (hook.go)
)

// Event bits a clock callback or a doorbell sets for the worker.
const (
	evRTO uint32 = 1 << iota
	evRNR
	evAck
	evStall
	evDoorbell
)

// Transport is one QP's data plane: its requester, responder and completer
// and what they share. The engine stores it in QP.Engine and runs it on the
// worker the QP hashes to; at most one goroutine runs it at a time, which
// the claim word guarantees without a lock: a worker takes it with a CAS
// from free to worker for one Run, the control plane (MODIFY_QP,
// FLUSH_WQES, DESTROY_QP, hook.go) from free to control for the
// duration of its change, waiting for a Run in progress to end. A worker
// that finds the QP held by the control plane skips it; EndControl wakes it
// again.
//
// Everything below the "worker-owned" line is touched only under the
// claim; the atomics above it are shared.
type Transport struct {
	// C counts what this QP's data plane did.
	C Counters

	q     *QP
	dp    *DataPlane
	sched Scheduler
	claim atomic.Uint32
	ev    atomic.Uint32
	dead  atomic.Bool
	inbox atomic.Pointer[Inbox]
	// lastWork and works are written by whoever runs the QP (its worker,
	// or a goroutine running it to completion) and read by the worker's
	// scan without the claim.
	lastWork atomic.Int64 // time.Duration
	works    atomic.Uint64
	// intake is the channel a TakeUpPosted waits on; the next Run's end
	// closes it (intake.go).
	intake atomic.Pointer[chan struct{}]
	// peek and peekGen are what Posted reads without the claim: where the
	// requester fetches next, as the last Run left it (intake.go
	// publishPeek), and the QP generation that Run saw.
	peek    atomic.Uint64
	peekGen atomic.Uint64

	// worker-owned
	gen       uint64
	attrs     Attrs
	ctx       [ContextSize]byte
	localIP   netip.Addr
	destIP    netip.Addr
	ff        wire.FrameFields // RC framing; Dst is looked up per packet
	framing   wire.Framing     // the last framing encoded (packet.go encode)
	hasVLAN   bool
	vlan      wire.VLANFields
	srcMAC    wire.MAC
	mtu       int
	state     State
	suspended bool // SUSPEND_QP without RESUME_QP: the requester sends nothing
	reqInit   bool
	respInit  bool
	stats     *StatsInstance
	sendCQ    *cq.CQ
	recvCQ    *cq.CQ
	recv      RecvSource
	shadow    hostmem.IOVA
	req       requester
	resp      responder
	stall     dpTimer
	stalled   bool
}

// Scheduler is what runs a Transport: the engine's per-QP record. Wake
// queues the QP on its worker (at most once) and must not block; String
// describes its scheduling state for diagnostics (Engine.Debug).
type Scheduler interface {
	Wake()
	String() string
}

// WakeFunc is a Scheduler that calls itself on Wake (tests, stepped
// drivers that run the Transport by hand).
type WakeFunc func()

// Wake implements Scheduler.
func (f WakeFunc) Wake() { f() }

func (f WakeFunc) String() string { return "wake func" }

// NewTransport returns the data plane of q; s schedules it on its worker
// (the engine's ready queue).
func NewTransport(q *QP, dp *DataPlane, s Scheduler) *Transport {
	t := &Transport{q: q, dp: dp, sched: s}
	sq, rq := q.SQ(), q.RQ()
	t.shadow = q.Shadow()
	t.req.init(sq)
	if s := q.SRQ(); s != nil {
		t.recv = newSRQSource(s, dp.Events, rq)
	} else {
		t.recv = newRQSource(rq)
	}
	t.gen = ^uint64(0) // force the first refresh
	t.req.rto.fire = func() { t.signal(evRTO) }
	t.req.rnr.fire = func() { t.signal(evRNR) }
	t.resp.ackT.fire = func() { t.signal(evAck) }
	t.stall.fire = func() { t.signal(evStall) }
	return t
}

// QP returns the QP.
func (t *Transport) QP() *QP { return t.q }

// Scheduler returns what runs the Transport.
func (t *Transport) Scheduler() Scheduler { return t.sched }

// Wake schedules the Transport on its worker.
func (t *Transport) Wake() { t.sched.Wake() }

// signal records an event and wakes the worker (clock callbacks).
func (t *Transport) signal(ev uint32) {
	if t.dead.Load() {
		return
	}
	t.ev.Or(ev)
	t.sched.Wake()
}

// Doorbell records a doorbell hint (WQEALLOC, a doorbell page) and wakes the
// worker.
func (t *Transport) Doorbell() { t.signal(evDoorbell) }

// Ring records a doorbell hint without waking the worker: the caller runs
// the QP itself, or wakes it when it cannot (the engine's run to
// completion).
func (t *Transport) Ring() { t.ev.Or(evDoorbell) }

// Pending reports work a Run would find that arrived for the QP from
// outside: a queued packet or an event bit. Whoever ran the QP outside its
// worker looks at it after Unclaim, so that a wake-up the worker skipped
// while the claim was held is not lost.
func (t *Transport) Pending() bool {
	if t.ev.Load() != 0 {
		return true
	}
	in := t.inbox.Load()
	return in != nil && in.Len() > 0
}

// Posted reports whether a post notification or a doorbell poll should
// ring the QP: a WQE at the SQ fetch index the last Run published (one
// load of its valid bit), or a QP whose state the data plane has not
// taken up yet (no Run since its creation, a control change or a MODIFY_QP).
// A QP whose SQ has nothing new needs no ring — nor one whose requester
// has not started (not yet in RTS) or waits for its window, nor its RQ,
// which is read on demand. It takes no claim: a worker whose TryClaim met
// a claim taken for this look would skip the QP's run as if the control
// plane held it, and nobody would run it again.
func (t *Transport) Posted() bool {
	if t.dead.Load() {
		return true
	}
	v := t.peek.Load()
	if v == peekUnknown || t.q.Gen() != t.peekGen.Load() {
		return true
	}
	if v&peekFetch == 0 {
		return false
	}
	h, err := t.dp.Mem.Load64(hostmem.IOVA(v &^ peekLowBits))
	// A fault is the worker's to find and report (a ring leads it there).
	return err != nil || Header(h).ValidBit() == uint8(v&peekPol)
}

// Deliver queues a received packet for the QP (the port's receive path),
// parsed into p.Frame by the gate; the QP reads it from there. It returns
// false, leaving the packet with the caller to drop and count,
// when the inbox is full or the QP is gone.
func (t *Transport) Deliver(p *link.Packet) bool {
	if t.dead.Load() {
		return false
	}
	in := t.inbox.Load()
	if in == nil {
		n := NewInbox(t.dp.Tun.InboxSize)
		if t.inbox.CompareAndSwap(nil, n) {
			in = n
		} else {
			in = t.inbox.Load()
		}
	}
	if !in.Push(p) {
		t.C.Drops[DropInboxFull].Add(1)
		return false
	}
	return true
}

// Queued is the number of packets waiting in the inbox.
func (t *Transport) Queued() int {
	if in := t.inbox.Load(); in != nil {
		return in.Len()
	}
	return 0
}

// Dead reports a destroyed QP (or one whose id now names another QP).
func (t *Transport) Dead() bool { return t.dead.Load() }

// TryClaim takes the QP for one Run; false if another goroutine holds it.
func (t *Transport) TryClaim() bool { return t.claim.CompareAndSwap(claimFree, claimWorker) }

// Unclaim releases the claim TryClaim took.
func (t *Transport) Unclaim() { t.claim.Store(claimFree) }

// BeginControl brackets a control-plane change (hook.go): wait for a Run in progress to end,
// keep workers off, and hand the consumer indices to the QP.
func (t *Transport) BeginControl() {
	for !t.claim.CompareAndSwap(claimFree, claimControl) {
		runtime.Gosched()
	}
	// The change may move the fetch index: Posted answers "ring" until
	// the next Run publishes where the requester stands.
	t.peek.Store(peekUnknown)
	// A QP already in ERROR has handed its indices over (EnterError, or
	// the MODIFY_QP that took it there) and does not move them since; a
	// FLUSH_WQES may have moved them further, which must stand.
	if !t.dead.Load() && t.q.State() != StateError {
		t.q.SyncWQ(t.req.handback(), t.recv.State())
	}
}

// EndControl ends the bracket BeginControl opened.
func (t *Transport) EndControl(destroyed bool) {
	if destroyed {
		t.dead.Store(true)
		t.stopTimers()
	} else if t.q.State() != StateError && !t.dead.Load() {
		// A flush (or anything else) that moved the consumer indices
		// resets ours: the WQEs behind them are gone.
		sq, rq := t.q.WQStates()
		if sq != t.req.handback() {
			t.req.reset(sq)
		}
		if rq != t.recv.State() {
			t.recv.SetState(rq)
			t.resp.abortMessage()
		}
	}
	t.claim.Store(claimFree)
	t.sched.Wake()
}

// HasWork reports, without running the QP, whether a Run would find
// something to do: a posted SQ WQE at the fetch index, a queued packet, a
// pending event, or responses to send. The scanner calls it on idle active
// QPs (valid-bit rescan); it takes the claim and gives up if it cannot.
func (t *Transport) HasWork() bool {
	if t.dead.Load() {
		return true // let Run clean up
	}
	if t.ev.Load() != 0 {
		return true
	}
	if in := t.inbox.Load(); in != nil && in.Len() > 0 {
		return true
	}
	if !t.TryClaim() {
		return false
	}
	defer t.Unclaim()
	if t.resp.pending() {
		return true
	}
	return t.req.sqPosted(t.dp.Mem)
}

// Idle reports that the QP has nothing outstanding (no WQE in flight, no
// response pending), so the scanner may forget it. Under the claim.
func (t *Transport) Idle() bool {
	if !t.TryClaim() {
		return false
	}
	defer t.Unclaim()
	return t.req.n == 0 && !t.resp.pending() && t.resp.cur.kind == msgNone
}

// LastWork is the clock time of the last Run that did something.
func (t *Transport) LastWork() time.Duration { return time.Duration(t.lastWork.Load()) }

// Works counts the Runs that did something (under the claim; the worker
// compares it around a Run to tell progress from a spurious wake-up).
func (t *Transport) Works() uint64 { return t.works.Load() }

// refresh re-reads the context cache after CREATE/MODIFY_QP.
func (t *Transport) refresh(g uint64) {
	t.gen = g
	t.attrs = t.q.Attrs()
	t.ctx = t.q.Context()
	c := Context(t.ctx[:])
	t.localIP, t.destIP = c.LocalIP(), c.DestIP()
	t.mtu = int(t.attrs.MTU)
	if !wire.IsPMTU(t.mtu) {
		// SNDMSS holds the path MTU in bytes; round anything else down to
		// an IB MTU (256 at least).
		m := wire.MinPMTU
		for m*2 <= t.mtu && m < wire.MaxPMTU {
			m *= 2
		}
		t.mtu = m
	}
	t.srcMAC = wire.MAC(t.attrs.LocalMAC)
	t.hasVLAN = t.attrs.InsertVLAN
	t.vlan = wire.VLANFields{Priority: uint8(t.attrs.VLANTag >> 13), ID: t.attrs.VLANTag & 0xfff}
	t.ff = wire.FrameFields{
		SrcIP: t.localIP, DstIP: t.destIP, TrafficClass: t.attrs.TOS, HopLimit: t.attrs.TTL,
		FlowLabel: t.attrs.FlowLabel, SrcPort: t.srcPort(t.localIP),
	}
	t.sendCQ, t.recvCQ = t.q.CQs()
	t.suspended = t.q.Suspended()
	t.stats = nil
	if t.attrs.UseStats && t.dp.Stats != nil {
		t.stats = t.dp.Stats.Instance(uint32(t.attrs.StatsIdx))
	}
	if t.resp.res == nil || len(t.resp.res) != int(max(t.attrs.IRD, 1)) {
		t.resp.resize(int(max(t.attrs.IRD, 1)))
	}
}

// transition initialises the PSN state when the QP reaches RTR (the
// responder's ePSN) and RTS (the requester's next PSN): the values the
// driver wrote into EPSN and PSNNXT for those modifies
// (docs/hw-controlpath.md "QP host context").
func (t *Transport) transition(st State) {
	if st == t.state {
		return
	}
	t.state = st
	if (st == StateRTR || st == StateRTS || st == StateClosing) && !t.respInit {
		t.respInit = true
		t.resp.ePSN = wire.PSN(t.attrs.EPSN) & wire.PSNMask
	}
	if (st == StateRTS || st == StateClosing) && !t.reqInit {
		t.reqInit = true
		t.req.start(t)
	}
}

// stopTimers stops every clock timer of the QP.
func (t *Transport) stopTimers() {
	t.req.rto.stop()
	t.req.rnr.stop()
	t.resp.ackT.stop()
	t.stall.stop()
}

// drainInbox drops every queued packet; it reports whether there were any.
func (t *Transport) drainInbox(r DropReason) bool {
	in := t.inbox.Load()
	if in == nil {
		return false
	}
	n := false
	for p := in.Pop(); p != nil; p = in.Pop() {
		t.C.Drops[r].Add(1)
		p.Release()
		n = true
	}
	return n
}

// Close stops the timers and releases queued packets (engine shutdown).
// The caller holds the claim or has stopped every worker.
func (t *Transport) Close() {
	t.dead.Store(true)
	t.stopTimers()
	t.drainInbox(DropQPState)
}

// rto is the retransmission timeout: GEN_2 has no local ACK timeout in
// its context, only RTOMIN (irdma writes 5); the timer is
// max(Tunables.RTO, RTOMIN × Tunables.RTOMinUnit), fixed (no backoff, as
// rxe and IBTA's local ACK timeout). docs/dataplane.md.
func (t *Transport) rto() time.Duration {
	return max(t.dp.Tun.RTO, time.Duration(Context(t.ctx[:]).RTOMin())*t.dp.Tun.RTOMinUnit)
}

// pd is the QP's protection domain.
func (t *Transport) pd() uint32 { return t.attrs.PD }

// isUD reports a UD QP.
func (t *Transport) isUD() bool { return t.q.Type == TypeRoCEUD }

// Debug describes the transport's state for diagnostics. It takes the
// claim (waiting for a run in progress).
func (t *Transport) Debug() string {
	for !t.TryClaim() {
		runtime.Gosched()
	}
	defer t.Unclaim()
	r := &t.req
	s := fmt.Sprintf("qp %d state %v: req next %#x una %#x maxSent %#x n %d send %d/%d inflight %d readsOut %d retry %d rnr %d rnrWait %v retrying %v rto{armed %v dl %v sched %v at %v}",
		t.q.ID, t.q.State(), uint32(r.nextPSN), uint32(r.una), uint32(r.maxSent), r.n, r.send, r.sendPkt, r.inflight, r.readsOut,
		r.retryLeft, r.rnrLeft, r.rnrWait, r.retrying, r.rto.armed, r.rto.deadline, r.rto.scheduled, r.rto.at)
	for k := 0; k < r.n && k < 4; k++ {
		e := r.at(k)
		s += fmt.Sprintf("\n  ent %d: op %v kind %d psn %#x..%#x started %v done %v len %d rcvd %d", k, e.op, e.kind,
			uint32(e.firstPSN), uint32(e.lastPSN), e.started, e.done, e.length, e.readRcvd)
	}
	p := &t.resp
	s += fmt.Sprintf("\n  resp ePSN %#x msn %d nakSent %v cur %d out %d reads %d", uint32(p.ePSN), p.msn, p.nakSent, p.cur.kind, p.outN, p.reads)
	if in := t.inbox.Load(); in != nil {
		s += fmt.Sprintf(" inbox %d", in.Len())
	}
	return s
}

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
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Claim states of a Transport (Transport.claim).
const (
	claimFree    = 0
	claimWorker  = 1 // a worker runs the QP
	claimControl = 2 // the control plane holds it (EngineHook)
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
// FLUSH_WQES, DESTROY_QP through EngineHook) from free to control for the
// duration of its change, waiting for a Run in progress to end. A worker
// that finds the QP held by the control plane skips it; EndControl wakes it
// again.
//
// Everything below the "worker-owned" line is touched only under the
// claim; the atomics above it are shared.
type Transport struct {
	// Owner is the engine's per-QP record (its scheduling state); set once
	// before the Transport is published.
	Owner any
	// C counts what this QP's data plane did.
	C Counters

	q     *QP
	dp    *DataPlane
	wake  func()
	claim atomic.Uint32
	ev    atomic.Uint32
	dead  atomic.Bool
	inbox atomic.Pointer[Inbox]

	// worker-owned
	gen       uint64
	attrs     Attrs
	ctx       [ContextSize]byte
	localIP   netip.Addr
	destIP    netip.Addr
	ff        wire.FrameFields // RC framing; Dst is looked up per packet
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
	lastWork  time.Duration
	works     uint64
}

// NewTransport returns the data plane of q. wake schedules the Transport on
// its worker (the engine's ready queue); it must not block.
func NewTransport(q *QP, dp *DataPlane, wake func()) *Transport {
	t := &Transport{q: q, dp: dp, wake: wake}
	sq, rq := q.SQ(), q.RQ()
	t.shadow = q.Shadow()
	t.req.init(sq)
	t.recv = newRQSource(rq)
	t.gen = ^uint64(0) // force the first refresh
	t.req.rto.fire = func() { t.signal(evRTO) }
	t.req.rnr.fire = func() { t.signal(evRNR) }
	t.resp.ackT.fire = func() { t.signal(evAck) }
	t.stall.fire = func() { t.signal(evStall) }
	return t
}

// QP returns the QP.
func (t *Transport) QP() *QP { return t.q }

// signal records an event and wakes the worker (clock callbacks).
func (t *Transport) signal(ev uint32) {
	if t.dead.Load() {
		return
	}
	t.ev.Or(ev)
	t.wake()
}

// Doorbell records a doorbell hint (WQEALLOC, a doorbell page) and wakes the
// worker.
func (t *Transport) Doorbell() { t.signal(evDoorbell) }

// Deliver queues a received packet for the QP (the port's receive path).
// It returns false, leaving the packet with the caller to drop and count,
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

// BeginControl implements EngineHook: wait for a Run in progress to end,
// keep workers off, and hand the consumer indices to the QP.
func (t *Transport) BeginControl() {
	for !t.claim.CompareAndSwap(claimFree, claimControl) {
		runtime.Gosched()
	}
	// A QP already in ERROR has handed its indices over (EnterError, or
	// the MODIFY_QP that took it there) and does not move them since; a
	// FLUSH_WQES may have moved them further, which must stand.
	if !t.dead.Load() && t.q.State() != StateError {
		t.q.SyncWQ(t.req.handback(), t.recv.State())
	}
}

// EndControl implements EngineHook.
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
	t.wake()
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
func (t *Transport) LastWork() time.Duration { return t.lastWork }

// Works counts the Runs that did something (under the claim; the worker
// compares it around a Run to tell progress from a spurious wake-up).
func (t *Transport) Works() uint64 { return t.works }

// Run processes what the QP has: expired timers, received packets (up to
// RxBurst), responses to send, and the SQ (up to TxBurst packets). The
// caller holds the claim (TryClaim). It reports whether more work remains,
// in which case the worker schedules the QP again after the others.
func (t *Transport) Run(ctx *Ctx) (more bool) {
	ctx.now = t.dp.Clock.Now()
	did := false
	defer func() {
		if did {
			t.lastWork = ctx.now
			t.works++
		}
	}()
	if t.dead.Load() || t.dp.QPs != nil && t.dp.QPs.Get(t.q.ID) != t.q {
		t.dead.Store(true)
		t.stopTimers()
		t.drainInbox(DropUnknownQPN)
		return false
	}
	if g := t.q.Gen(); g != t.gen {
		t.refresh(g)
	}
	st := t.q.State()
	t.transition(st)
	if st == StateError || st == StateInvalid || st == StateTerminate {
		t.stopTimers()
		did = t.drainInbox(DropQPState)
		return false
	}
	// Received packets first, in order, while the responder is not busy
	// sending READ responses (responses go out in PSN order, so later
	// requests wait behind them, as in rxe).
	in := t.inbox.Load()
	if in != nil {
		for i := 0; i < t.dp.Tun.RxBurst && t.q.State() != StateError; i++ {
			if t.resp.blocked() {
				break
			}
			p := in.Pop()
			if p == nil {
				break
			}
			did = true
			t.receive(ctx, p)
		}
	}
	if t.q.State() == StateError {
		t.stopTimers()
		t.drainInbox(DropQPState)
		return false
	}
	// Then the timers, but only once everything that arrived has been
	// seen: an ACK waiting in the inbox while the worker was late must
	// not lose to the retransmission timer it would have stopped.
	if in == nil || in.Len() == 0 || t.resp.blocked() {
		if ev := t.ev.Swap(0); ev != 0 {
			did = true
			t.onEvents(ctx, ev)
		}
		if t.req.rto.due(ctx.now) {
			did = true
			t.req.onRTO(t, ctx)
		}
		if t.req.rnr.due(ctx.now) {
			did = true
			t.req.onRNRTimer(t, ctx)
		}
		if t.q.State() == StateError {
			return false
		}
	}
	if t.resp.flushOut(t, ctx) {
		did = true
	}
	if t.q.State() == StateError {
		return false
	}
	if t.req.run(t, ctx) {
		did = true
	}
	if t.q.State() == StateError {
		return false
	}
	if in != nil && in.Len() > 0 && !t.resp.blocked() || t.ev.Load() != 0 {
		more = true
	}
	if t.stalled {
		// Out of packet buffers: the stall timer brings the QP back.
		t.stalled = false
		return false
	}
	return more || t.resp.sendable(ctx.now) || t.req.more
}

// onEvents handles the event bits.
func (t *Transport) onEvents(ctx *Ctx, ev uint32) {
	clk := t.dp.Clock
	if ev&evRTO != 0 && t.req.rto.fired(clk, ctx.now) {
		t.req.onRTO(t, ctx)
	}
	if ev&evRNR != 0 && t.req.rnr.fired(clk, ctx.now) {
		t.req.onRNRTimer(t, ctx)
	}
	if ev&evAck != 0 {
		t.resp.ackT.fired(clk, ctx.now)
	}
	if ev&evStall != 0 {
		t.stall.fired(clk, ctx.now)
	}
	if ev&evDoorbell != 0 {
		t.dp.charge(timing.Doorbell, 0)
	}
}

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
		FlowLabel: t.attrs.FlowLabel, SrcPort: t.attrs.SrcPort,
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

// ---- packets -------------------------------------------------------------

// newPacket takes a packet buffer; nil when the pool is exhausted (the
// caller stops and the stall timer retries).
func (t *Transport) newPacket(ctx *Ctx) *link.Packet {
	p := ctx.Pool.Get()
	if p == nil {
		t.stalled = true
		t.C.TxStalls.Add(1)
		ctx.Port.TxStalls.Add(1)
		if !t.stall.armed {
			t.stall.arm(t.dp.Clock, ctx.now, 20*time.Microsecond)
		}
	}
	return p
}

// rcFrame prepares ctx.ff for a packet to the connected peer; false (and
// the QP in error) when the destination MAC cannot be resolved.
func (t *Transport) rcFrame(ctx *Ctx) bool {
	mac, ok := t.dp.AHs.ARP(uint32(t.attrs.ARPIdx))
	if !ok {
		t.sqFatal(ctx, nil, AEInvalidARPEntry)
		return false
	}
	ctx.ff = t.ff
	ctx.ff.Dst = mac
	ctx.ff.Src = t.srcMAC
	if ctx.ff.Src == (wire.MAC{}) {
		ctx.ff.Src = ctx.MAC
	}
	if t.hasVLAN {
		ctx.vlan = t.vlan
		ctx.ff.VLAN = &ctx.vlan
	}
	return true
}

// encode builds the frame of ctx.ff and ctx.pf into p with room for n
// payload bytes; the payload goes into ctx.frame.Packet.Payload.
func (t *Transport) encode(ctx *Ctx, p *link.Packet, n int) bool {
	m, err := wire.EncodeFrame(p.Buf(), &ctx.ff, &ctx.pf, n, &ctx.frame)
	if err != nil {
		p.Release()
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	p.Data = p.Buf()[:m]
	return true
}

// transmit seals the frame in ctx.frame and hands p to the worker.
func (t *Transport) transmit(ctx *Ctx, p *link.Packet) {
	f := &ctx.frame
	f.Seal()
	n := len(f.Packet.Raw)
	t.dp.charge(timing.PacketBuild, n)
	t.dp.charge(timing.Serialise, n)
	t.C.TxPackets.Add(1)
	t.C.TxBytes.Add(uint64(n))
	ctx.Port.TxPackets.Add(1)
	ctx.Port.TxBytes.Add(uint64(n))
	ipLen := uint64(len(p.Data) - wire.EthernetSize)
	if f.VLAN != nil {
		ipLen -= wire.VLANSize
	}
	if f.IPv4 != nil {
		t.hw(StatIP4TxPkts, 1)
		t.hw(StatIP4TxOcts, ipLen)
	} else {
		t.hw(StatIP6TxPkts, 1)
		t.hw(StatIP6TxOcts, ipLen)
	}
	t.hw(StatUDPTxPkts, 1)
	ctx.Send(p)
}

// countRxIP adds a received frame to the IP/UDP counters of the QP's
// statistics instance, the block GATHER_STATS reports to the driver (the
// port counted it into the function's block before demultiplexing, when
// the QP was not known yet).
func (t *Transport) countRxIP(f *wire.Frame, p *link.Packet) {
	if t.stats == nil {
		return
	}
	ipLen := uint64(len(p.Data) - wire.EthernetSize)
	if f.VLAN != nil {
		ipLen -= wire.VLANSize
	}
	if f.IPv4 != nil {
		t.stats.Add(StatIP4RxPkts, 1)
		t.stats.Add(StatIP4RxOcts, ipLen)
	} else {
		t.stats.Add(StatIP6RxPkts, 1)
		t.stats.Add(StatIP6RxOcts, ipLen)
	}
	t.stats.Add(StatUDPRxPkts, 1)
}

// hw adds to a hardware counter of the function and of the QP's stats
// instance (GATHER_STATS reports them, irdma hw_stats).
func (t *Transport) hw(s HWStat, n uint64) {
	if t.dp.Stats != nil {
		t.dp.Stats.Function.Add(s, n)
	}
	if t.stats != nil {
		t.stats.Add(s, n)
	}
}

// ---- receive -----------------------------------------------------------

// receive runs the per-QP checks of rxe's hdr_check / check_addr
// (docs/roce.md "rxe receive checks", 8–11) and hands the packet to the
// responder or the completer. The packet is released here.
func (t *Transport) receive(ctx *Ctx, p *link.Packet) {
	defer p.Release()
	f := &ctx.rx
	if err := wire.ParseFrame(p.Data, f); err != nil {
		t.drop(ctx, DropParse)
		return
	}
	op := f.Packet.Opcode()
	st := t.q.State()
	req := op.IsRequest()
	// State: requests need the responder side ready (RTR, RTS, SQD),
	// responses the requester side (RTS, SQD). rxe check_type_state.
	switch {
	case req && st != StateRTR && st != StateRTS && st != StateClosing:
		t.drop(ctx, DropQPState)
		return
	case !req && st != StateRTS && st != StateClosing:
		t.drop(ctx, DropQPState)
		return
	}
	if !t.pkeyOK(f.Packet.BTH.PKey()) {
		t.drop(ctx, DropPKey)
		return
	}
	if !t.isUD() {
		// rxe check_addr: the packet must come from the QP's peer to the
		// QP's own address.
		src, dst := f.Src().Addr().Unmap(), f.Dst().Addr().Unmap()
		if src != t.destIP.Unmap() || dst != t.localIP.Unmap() {
			t.drop(ctx, DropAddress)
			return
		}
	} else if f.Packet.DETH != nil {
		// IBTA C10-116 / rxe check_keys: the Q_Key must be the QP's, or
		// the GSI Q_Key on QP1.
		want := t.attrs.QKey
		if t.attrs.IsQP1 || t.q.ID == 1 {
			want = wire.GSIQKey
		}
		if f.Packet.DETH.QKey() != want {
			t.drop(ctx, DropQKey)
			return
		}
	}
	n := len(f.Packet.Raw)
	t.C.RxPackets.Add(1)
	t.C.RxBytes.Add(uint64(n))
	ctx.Port.RxPackets.Add(1)
	ctx.Port.RxBytes.Add(uint64(n))
	t.countRxIP(f, p)
	if req {
		t.resp.handle(t, ctx, f)
	} else {
		t.req.handleResponse(t, ctx, f)
	}
}

// pkeyOK is the IBTA P_Key match (§10.9.3): the low 15 bits equal and at
// least one of the two a full member. rxe check_keys compares with the
// port's table; a GEN_2 QP carries one P_Key (0xFFFF from irdma).
func (t *Transport) pkeyOK(k uint16) bool {
	mine := t.attrs.PKey
	if mine == 0 {
		mine = wire.DefaultPKey
	}
	return k&0x7fff == mine&0x7fff && (k|mine)&0x8000 != 0
}

func (t *Transport) drop(ctx *Ctx, r DropReason) {
	t.C.Drops[r].Add(1)
	ctx.Port.Drops[r].Add(1)
}

// ---- completions and errors --------------------------------------------

// postCQE writes e to c and counts it. A full CQ is the CQ's affair: it
// raised CQ_OPERATION_ERROR (emu/cq).
func (t *Transport) postCQE(ctx *Ctx, c *cq.CQ, e *cq.CQE) {
	if c == nil {
		return
	}
	if err := c.Post(e); err != nil {
		return
	}
	t.C.CQEs.Add(1)
	ctx.Port.CQEs.Add(1)
}

// baseCQE fills the fields every CQE of this QP carries.
func (t *Transport) baseCQE(e *cq.CQE) {
	e.QPCtx = t.attrs.CompletionCtx
	e.SetQPID(t.q.ID)
}

// enterError raises ae and moves the QP to ERROR, handing the consumer
// indices to the QP so that the driver's FLUSH_WQES finds the WQEs not yet
// completed (docs/hw-datapath.md "Flush generation": the hardware raises the
// AE; irdma's irdma_process_aeq then modifies the QP to ERROR and flushes).
func (t *Transport) enterError(ctx *Ctx, ae uint16, src uint8, wqeIdx uint32) {
	if t.q.State() == StateError {
		return
	}
	t.C.FatalErrors.Add(1)
	ctx.Port.FatalErrors.Add(1)
	t.q.EnterError(t.req.handback(), t.recv.State())
	t.state = StateError
	t.stopTimers()
	t.resp.reset()
	if t.dp.Events != nil {
		_ = t.dp.Events.PostAE(cq.AEQE{
			Ctx: t.attrs.CompletionCtx, ID: t.q.ID, WQEIdx: uint16(wqeIdx), Code: ae,
			Source: src, State: uint8(StateError),
		})
	}
}

// sqFatal fails the SQ: the error CQE of e (when given) with the flush
// code of ae, the AE with the SQ as source, ERROR.
func (t *Transport) sqFatal(ctx *Ctx, e *sqEntry, ae uint16) {
	if t.q.State() == StateError {
		return
	}
	idx := t.req.fetch.Cons
	if e != nil {
		// WQEs completed before it retire first, in order.
		t.req.retire(t, ctx)
		idx = e.idx
		var c cq.CQE
		t.baseCQE(&c)
		c.SQ, c.Error = true, true
		c.Op = uint8(e.op)
		c.WQEIdx = uint16(e.idx)
		c.Major, c.Minor = cq.MajorFlush, FlushCodeForAE(ae)
		t.postCQE(ctx, t.sendCQ, &c)
		t.req.retireErrored(e)
	}
	t.enterError(ctx, ae, cq.AESourceSQ, idx)
}

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

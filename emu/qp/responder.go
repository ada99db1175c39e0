package qp

import (
	"errors"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The responder (IBTA §9.7.4, §9.7.5; rxe_resp.c, docs/roce.md "rxe as
// responder") takes the peer's requests in PSN order. Its spec variables:
//
//	ePSN    the expected PSN (rxe resp.psn)
//	msn     the message sequence number, sent in every AETH (C9-148:
//	        READs count when accepted)
//	nakSent a PSN sequence (or RNR) NAK went out for ePSN: one per gap
//
// Requests ahead of ePSN draw one PSN-sequence-error NAK per gap and are
// dropped; requests behind it are duplicates: SEND/WRITE are acknowledged
// again with ePSN−1 (C9-105), a READ is executed again from memory (a
// sub-range re-request included), an atomic is answered from the saved
// result (the "responder resources", IRD entries; never re-executed).
// Responses leave in PSN order through the output queue: ACKs, NAKs,
// ATOMIC ACKs and READ responses; consecutive ACKs coalesce into the
// latest, and while READ responses are being sent later requests wait.
//
// This file takes requests in; response.go sends what they queued, ud.go
// takes UD datagrams.

type msgKind uint8

const (
	msgNone msgKind = iota
	msgSend
	msgWrite
)

// curMsg is the message in progress.
type curMsg struct {
	kind   msgKind
	off    uint64 // bytes placed
	va     uint64 // WRITE: RETH VA
	rkey   uint32 // WRITE: RETH R_Key
	length uint64 // WRITE: RETH DMA length
}

// resource is a saved READ or atomic (rxe resp_res): what a duplicate is
// answered from.
type resource struct {
	kind   entryKind // kindRead or kindAtomic; kindLocal = free
	first  wire.PSN
	last   wire.PSN
	va     uint64
	rkey   uint32
	length uint64
	orig   uint64
}

type itemKind uint8

const (
	itemAck itemKind = iota
	itemRead
	itemAtomic
)

// respItem is a response waiting to be sent.
type respItem struct {
	kind   itemKind
	syn    wire.Syndrome
	psn    wire.PSN
	va     uint64
	rkey   uint32
	length uint64
	off    uint64
	sent   bool
	orig   uint64
	due    time.Duration
}

type responder struct {
	ePSN    wire.PSN
	msn     uint32
	nakSent bool
	cur     curMsg
	wqe     RQWQE // the receive WQE of the SEND (or WRITE with immediate) in progress
	res     []resource
	resNext int
	out     []respItem
	outHead int
	outN    int
	reads   int // READ items in out
	ackT    dpTimer
}

func (r *responder) resize(ird int) {
	r.res = make([]resource, ird)
	r.resNext = 0
	if r.out == nil {
		r.out = make([]respItem, ird+16)
	} else if len(r.out) < ird+16 {
		o := make([]respItem, ird+16)
		for i := 0; i < r.outN; i++ {
			o[i] = r.out[(r.outHead+i)%len(r.out)]
		}
		r.out, r.outHead = o, 0
	}
}

// reset drops the message in progress and the responses (QP error).
func (r *responder) reset() {
	r.cur = curMsg{}
	r.outHead, r.outN, r.reads = 0, 0, 0
}

// abortMessage forgets the message in progress (its WQE was flushed).
func (r *responder) abortMessage() { r.cur = curMsg{} }

func (r *responder) pending() bool { return r.outN > 0 }

// blocked: READ responses are being sent; later requests wait.
func (r *responder) blocked() bool { return r.reads > 0 }

// sendable: a response can go now (not an ACK held back by AckDelay).
func (r *responder) sendable(now time.Duration) bool {
	return r.outN > 0 && (r.out[r.outHead].kind != itemAck || r.out[r.outHead].due <= now)
}

func (r *responder) push(it respItem) bool {
	if r.out == nil || r.outN == len(r.out) {
		return false
	}
	r.out[(r.outHead+r.outN)%len(r.out)] = it
	r.outN++
	if it.kind == itemRead {
		r.reads++
	}
	return true
}

func (r *responder) full() bool { return r.out == nil || r.outN >= len(r.out)-1 }

// queueAck queues an ACK for psn due at due; it coalesces into a queued
// ACK not yet sent (every ACK acknowledges all PSNs before it).
func (r *responder) queueAck(t *Transport, ctx *Ctx, psn wire.PSN, due time.Duration) {
	if r.outN > 0 {
		tail := &r.out[(r.outHead+r.outN-1)%len(r.out)]
		if tail.kind == itemAck && tail.syn.IsACK() {
			tail.psn = psn
			tail.due = min(tail.due, due)
			t.count(ctx, CntAcksCoalesced, 1)
			return
		}
	}
	r.push(respItem{kind: itemAck, syn: wire.ACKSyndrome(wire.CreditsInvalid), psn: psn, due: due})
}

// queueNAK queues an RNR NAK or a PSN sequence NAK.
func (r *responder) queueNAK(syn wire.Syndrome, psn wire.PSN, now time.Duration) {
	r.push(respItem{kind: itemAck, syn: syn, psn: psn, due: now})
}

// ackIfAsked queues the ACK an AckReq packet asks for: at once at a
// message end, after AckDelay inside a long message.
func (r *responder) ackIfAsked(t *Transport, ctx *Ctx, p *wire.Packet, psn wire.PSN) {
	if !p.BTH.AckReq() {
		return
	}
	due := ctx.now
	if !p.Opcode().IsEnd() {
		due += t.dp.Tun.AckDelay
	}
	r.queueAck(t, ctx, psn, due)
}

// advance moves ePSN past n PSNs.
func (r *responder) advance(n uint32) {
	r.ePSN = r.ePSN.Add(n)
	r.nakSent = false
}

// handle processes one request packet.
func (r *responder) handle(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	op := p.Opcode()
	if t.isUD() {
		r.handleUD(t, ctx, f)
		return
	}
	if op.Transport() != wire.TransportRC {
		t.drop(ctx, DropTransport)
		return
	}
	psn := p.BTH.PSN()
	switch d := psn.Diff(r.ePSN); {
	case d > 0:
		// Ahead: one NAK per gap, carrying the expected PSN (rxe
		// check_psn RESPST_ERR_PSN_OUT_OF_SEQ).
		t.count(ctx, CntOutOfSequence, 1)
		if !r.nakSent {
			r.nakSent = true
			r.queueNAK(wire.NAKSyndrome(wire.NAKPSNSequenceError), r.ePSN, ctx.now)
		}
		t.drop(ctx, DropOutOfSequence)
		return
	case d < 0:
		t.count(ctx, CntDuplicates, 1)
		r.duplicate(t, ctx, f)
		return
	}
	// Sequencing (rxe check_op_seq): inside a message only its middle or
	// last packets; outside one only first or only packets.
	if r.cur.kind != msgNone {
		same := r.cur.kind == msgSend && op.IsSend() || r.cur.kind == msgWrite && op.IsWrite()
		if !same || !(op.IsMiddle() || op.IsLast()) {
			r.invalid(t, ctx, psn)
			return
		}
	} else if op.IsMiddle() || op.IsLast() {
		r.invalid(t, ctx, psn)
		return
	}
	// Lengths against the path MTU (C9-20..C9-23, rxe check_length).
	if op.CheckPayloadLen(len(p.Payload), t.mtu) != nil {
		r.invalid(t, ctx, psn)
		return
	}
	switch op.Operation() {
	case wire.OpSend:
		r.onSend(t, ctx, f)
	case wire.OpRDMAWrite:
		r.onWrite(t, ctx, f)
	case wire.OpRDMAReadRequest:
		r.onRead(t, ctx, p)
	case wire.OpCompareSwap, wire.OpFetchAdd:
		r.onAtomic(t, ctx, p)
	default:
		// FLUSH and ATOMIC WRITE are not GEN_2 operations.
		r.invalid(t, ctx, psn)
	}
}

// invalid NAKs an invalid request (0x61) and fails the QP (rxe Class C/J
// errors: opcode sequence, operation not allowed, length, alignment).
func (r *responder) invalid(t *Transport, ctx *Ctx, psn wire.PSN) {
	r.nakFatal(t, ctx, wire.NAKInvalidRequest, psn, AEInvalidRequest, cq.AESourceRQ, r.cur.kind == msgSend)
}

// nakFatal sends a NAK for psn at once, completes the receive WQE in
// progress with the error (when withWQE), raises ae and moves the QP to
// ERROR.
func (r *responder) nakFatal(t *Transport, ctx *Ctx, code wire.NAKCode, psn wire.PSN, ae uint16, src uint8, withWQE bool) {
	_, _ = t.flushWrites(ctx) // what was accepted before psn is placed, as far as it can be
	r.sendAck(t, ctx, wire.NAKSyndrome(code), psn)
	var idx uint32
	if withWQE {
		idx = r.rqError(t, ctx, ae)
	}
	t.enterError(ctx, ae, src, idx)
}

// takeWQE peeks the next receive WQE for a message that consumes one. It
// reports false when the request was answered otherwise: an RNR NAK (no
// WQE posted, IBTA §9.7.5.2.8) or a fatal error (a malformed WQE).
func (r *responder) takeWQE(t *Transport, ctx *Ctx, psn wire.PSN) bool {
	ok, err := t.recv.Peek(t.dp.Mem, t.meter(ctx), t.dp.limits, &r.wqe)
	if err != nil {
		// A bus fault reading the ring; a QP whose SRQ was destroyed
		// raises the SRQ's catastrophic error instead (user.h
		// IRDMA_AE_SRQ_CATASTROPHIC_ERROR).
		ae := AELCEQPCatastrophic
		if errors.Is(err, ErrSRQDestroyed) {
			ae = AESRQCatastrophic
		}
		r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, ae, cq.AESourceRQ, false)
		return false
	}
	if !ok {
		r.nakSent = true // no sequence NAK for the packets that follow
		r.queueNAK(wire.RNRNAKSyndrome(t.dp.Tun.MinRNRTimer), psn, ctx.now)
		return false
	}
	if !r.wqe.OK() {
		ae := AEWQEInvalidFragData
		for _, v := range r.wqe.Violations() {
			if re := v.Code.Reaction(); re.AE != 0 {
				ae = re.AE
				break
			}
		}
		// rxe: a malformed receive WQE is a remote operational error.
		r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, ae, cq.AESourceRQ, true)
		return false
	}
	t.count(ctx, CntRQWQEs, 1)
	return true
}

// onSend places a SEND packet into the receive WQE.
func (r *responder) onSend(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	op := p.Opcode()
	psn := p.BTH.PSN()
	if op.IsStart() {
		if !r.takeWQE(t, ctx, psn) {
			return
		}
		r.cur = curMsg{kind: msgSend}
	}
	n := uint64(len(p.Payload))
	if r.cur.off+n > r.wqe.TotalLen {
		// Longer than the receive buffer: the requester sees an invalid
		// request, the receive WQE a local length error (irdma AE 0x0303).
		r.nakFatal(t, ctx, wire.NAKInvalidRequest, psn, AEMsgTooLongForBuffer, cq.AESourceRQ, true)
		return
	}
	if ae := t.writePayload(ctx, r.wqe.Fragments(), r.cur.off, p.Payload, op.IsEnd()); ae != 0 {
		r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, ae, cq.AESourceRQ, true)
		return
	}
	r.cur.off += n
	r.advance(1)
	if !op.IsEnd() {
		r.ackIfAsked(t, ctx, p, psn)
		return
	}
	if p.IETH != nil {
		// SEND with invalidate: the R_Key goes invalid before the
		// completion (IBTA §10.6.6.1; rxe invalidate_rkey).
		if err := t.dp.MRs.Invalidate(p.IETH.RKey(), t.pd(), t.q.ID, true); err != nil {
			r.nakFatal(t, ctx, wire.NAKInvalidRequest, psn, aeOf(err), cq.AESourceRQ, true)
			return
		}
		t.hw(StatRDMAVInv, 1)
	}
	t.completeRecv(ctx, p, r.cur.off)
	r.cur = curMsg{}
	r.msn = (r.msn + 1) & wire.MSNMask
	t.hw(StatRDMARxSnds, 1)
	r.ackIfAsked(t, ctx, p, psn)
}

// onWrite places a WRITE packet at the RETH's VA through its R_Key.
func (r *responder) onWrite(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	op := p.Opcode()
	psn := p.BTH.PSN()
	pd, qpn := t.pd(), t.q.ID
	if op.IsStart() {
		if !t.attrs.RemoteWrite {
			r.invalid(t, ctx, psn)
			return
		}
		va, rkey, length := p.RETH.VA(), p.RETH.RKey(), uint64(p.RETH.DMALen())
		if length > maxMsgSize {
			r.invalid(t, ctx, psn)
			return
		}
		// A zero-length WRITE needs no valid R_Key (IBTA C9-88, rxe).
		if length > 0 {
			var err error
			if ctx.spans, err = t.dp.MRs.Translate(rkey, pd, qpn, va, length, mr.AccessRemoteWrite, true, ctx.spans[:0]); err != nil {
				r.nakFatal(t, ctx, wire.NAKRemoteAccessError, psn, aeOf(err), cq.AESourceInRR, false)
				return
			}
		}
		r.cur = curMsg{kind: msgWrite, va: va, rkey: rkey, length: length}
	}
	n := uint64(len(p.Payload))
	rest := r.cur.length - r.cur.off
	// Each packet but the last carries the path MTU, the last the rest
	// (rxe check_length for writes).
	if op.IsEnd() && n != rest || !op.IsEnd() && n >= rest {
		r.invalid(t, ctx, psn)
		return
	}
	if op.HasImmDt() {
		// The immediate consumes a receive WQE; check before placing so
		// that an RNR NAK leaves nothing half done.
		if !r.takeWQE(t, ctx, psn) {
			return
		}
	}
	if n > 0 {
		var err error
		if ctx.spans, err = t.dp.MRs.Translate(r.cur.rkey, pd, qpn, r.cur.va+r.cur.off, n, mr.AccessRemoteWrite, true, ctx.spans[:0]); err != nil {
			r.nakFatal(t, ctx, wire.NAKRemoteAccessError, psn, aeOf(err), cq.AESourceInRR, false)
			return
		}
		if !t.writeSpans(ctx, ctx.spans, p.Payload, op.IsEnd(), psn) {
			r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, AELCEQPCatastrophic, cq.AESourceInRR, false)
			return
		}
	}
	r.cur.off += n
	r.advance(1)
	if !op.IsEnd() {
		r.ackIfAsked(t, ctx, p, psn)
		return
	}
	if op.HasImmDt() {
		t.completeRecv(ctx, p, r.cur.length)
	}
	r.cur = curMsg{}
	r.msn = (r.msn + 1) & wire.MSNMask
	t.hw(StatRDMARxWrs, 1)
	r.ackIfAsked(t, ctx, p, psn)
}

// npkts is the number of PSNs a READ of length bytes consumes.
func npkts(length uint64, mtu int) uint32 {
	if length <= uint64(mtu) {
		return 1
	}
	return uint32((length + uint64(mtu) - 1) / uint64(mtu))
}

// onRead accepts a READ request: checks, saves the resource, queues the
// responses.
func (r *responder) onRead(t *Transport, ctx *Ctx, p *wire.Packet) {
	psn := p.BTH.PSN()
	if !t.attrs.RemoteRead || len(r.res) == 0 {
		r.invalid(t, ctx, psn)
		return
	}
	if r.full() {
		t.drop(ctx, DropResponderBusy) // the requester retries
		return
	}
	va, rkey, length := p.RETH.VA(), p.RETH.RKey(), uint64(p.RETH.DMALen())
	if length > maxMsgSize {
		r.invalid(t, ctx, psn)
		return
	}
	if length > 0 {
		var err error
		if ctx.spans, err = t.dp.MRs.Translate(rkey, t.pd(), t.q.ID, va, length, mr.AccessRemoteRead, true, ctx.spans[:0]); err != nil {
			r.nakFatal(t, ctx, wire.NAKRemoteAccessError, psn, aeOf(err), cq.AESourceInRR, false)
			return
		}
	}
	n := npkts(length, t.mtu)
	r.save(resource{kind: kindRead, first: psn, last: psn.Add(n - 1), va: va, rkey: rkey, length: length})
	r.push(respItem{kind: itemRead, psn: psn, va: va, rkey: rkey, length: length})
	r.msn = (r.msn + 1) & wire.MSNMask
	r.advance(n)
	t.hw(StatRDMARxRds, 1)
}

func (r *responder) save(x resource) {
	r.res[r.resNext] = x
	r.resNext = (r.resNext + 1) % len(r.res)
}

// onAtomic executes FETCH_ADD or COMPARE_SWAP on the 8 bytes at the
// AtomicETH's VA and saves the original value for duplicates.
func (r *responder) onAtomic(t *Transport, ctx *Ctx, p *wire.Packet) {
	psn := p.BTH.PSN()
	if !t.dp.Profile.Atomics || !t.atomicsAllowed() || len(r.res) == 0 {
		r.invalid(t, ctx, psn)
		return
	}
	if r.full() {
		t.drop(ctx, DropResponderBusy)
		return
	}
	a := p.AtomicETH
	va, rkey := a.VA(), a.RKey()
	if va&7 != 0 {
		r.invalid(t, ctx, psn) // rxe: a misaligned atomic is an invalid request
		return
	}
	pd, qpn := t.pd(), t.q.ID
	var err error
	ctx.spans, err = t.dp.MRs.Translate(rkey, pd, qpn, va, 8, mr.AccessRemoteAtomic, true, ctx.spans[:0])
	if ae, _ := mr.AEOf(err); ae == mr.AERightsViolation && t.dp.Profile.Gen < 3 {
		// GEN_2 MRs carry no remote-atomic right (REMOTE_ATOMIC_EN is
		// GEN_3's, docs/hw-controlpath.md "Access rights"): remote write
		// stands for it.
		ctx.spans, err = t.dp.MRs.Translate(rkey, pd, qpn, va, 8, mr.AccessRemoteWrite, true, ctx.spans[:0])
	}
	if err != nil {
		r.nakFatal(t, ctx, wire.NAKRemoteAccessError, psn, aeOf(err), cq.AESourceInRR, false)
		return
	}
	if len(ctx.spans) != 1 {
		r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, AELCEQPCatastrophic, cq.AESourceInRR, false)
		return
	}
	iova := ctx.spans[0].IOVA
	if !t.settleWrites(ctx) { // the atomic sees the WRITEs before it
		return
	}
	var orig uint64
	if p.Opcode() == wire.RCCompareSwap {
		orig, err = t.dp.Mem.CompareAndSwap64(iova, a.Compare(), a.SwapAdd())
	} else {
		orig, err = t.dp.Mem.Add64(iova, a.SwapAdd())
	}
	if err != nil {
		r.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, AELCEQPCatastrophic, cq.AESourceInRR, false)
		return
	}
	t.charge(ctx, timing.PayloadDMAWrite, 8)
	r.save(resource{kind: kindAtomic, first: psn, last: psn, orig: orig})
	r.push(respItem{kind: itemAtomic, psn: psn, orig: orig})
	r.msn = (r.msn + 1) & wire.MSNMask
	r.advance(1)
}

// atomicsAllowed is the QP's remote-atomic right: REMOTE_ATOMIC_EN on
// GEN_3 (verbs.c:irdma_modify_qp_roce sets it from IB_ACCESS_REMOTE_ATOMIC);
// a GEN_2 context has no such bit, so there (atomics offered by a test
// profile only) remote write stands for it, as it does for the MR below.
func (t *Transport) atomicsAllowed() bool {
	if t.dp.Profile.Gen >= 3 {
		return t.attrs.RemoteAtomic
	}
	return t.attrs.RemoteWrite
}

// duplicate answers a request behind ePSN (IBTA §9.7.5.1.1; rxe
// duplicate_request).
func (r *responder) duplicate(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	psn := p.BTH.PSN()
	switch p.Opcode().Operation() {
	case wire.OpSend, wire.OpRDMAWrite:
		if p.BTH.AckReq() {
			// C9-105: acknowledge with the last PSN executed.
			r.queueAck(t, ctx, r.ePSN.Sub(1), ctx.now)
			return
		}
	case wire.OpRDMAReadRequest:
		if x := r.find(kindRead, psn); x != nil && !r.full() {
			va, length := p.RETH.VA(), uint64(p.RETH.DMALen())
			off := uint64(psn.Diff(x.first)) * uint64(t.mtu)
			// A re-request must fall inside the original, at the offset
			// its PSN implies, with the same R_Key (rxe find_resource).
			if p.RETH.RKey() == x.rkey && va == x.va+off && off+length <= x.length {
				if !r.restartRead(x, psn, va, length) {
					r.push(respItem{kind: itemRead, psn: psn, va: va, rkey: x.rkey, length: length})
				}
				t.count(ctx, CntReadReplays, 1)
				return
			}
		}
	case wire.OpCompareSwap, wire.OpFetchAdd:
		t.count(ctx, CntAtomicDuplicates, 1)
		if x := r.find(kindAtomic, psn); x != nil && x.first == psn && !r.full() {
			// Answered from the saved result, never executed again.
			r.push(respItem{kind: itemAtomic, psn: psn, orig: x.orig})
			t.count(ctx, CntAtomicReplays, 1)
			return
		}
	}
	t.drop(ctx, DropDuplicate)
}

// isReadReRequest reports an RDMA READ request behind ePSN: a requester
// that lost part of a READ's answer asking for the rest again. The worker
// takes it while READ responses are going out (Run), so that restartRead
// can cut the answer in progress.
func (r *responder) isReadReRequest(f *wire.Frame) bool {
	p := &f.Packet
	return p.BTH != nil && p.Opcode() == wire.RCRDMAReadRequest && p.RETH != nil && p.BTH.PSN().Diff(r.ePSN) < 0
}

// restartRead answers a re-request of the READ whose answer is going out
// (the head of the queue, of resource x) by restarting that answer at the
// re-request's PSN instead of queueing a second one behind it: the
// requester drops every response after the one it lost (IBTA §9.7.5.1.1:
// responses must arrive in PSN order), so the rest of the first answer is
// of no use to it, and on a slow responder sending it first can outlast
// the requester's retry count (seven timeouts without progress). rxe
// replays a saved READ from the duplicate's PSN in the same way
// (resp.c duplicate_request).
func (r *responder) restartRead(x *resource, psn wire.PSN, va, length uint64) bool {
	if r.outN == 0 {
		return false
	}
	h := &r.out[r.outHead]
	if h.kind != itemRead || h.rkey != x.rkey || !h.psn.InRange(x.first, x.last.Next()) {
		return false
	}
	h.psn, h.va, h.length, h.off, h.sent = psn, va, length, 0, false
	return true
}

// find returns the saved resource of kind k whose PSNs hold psn.
func (r *responder) find(k entryKind, psn wire.PSN) *resource {
	for i := range r.res {
		x := &r.res[i]
		if x.kind == k && psn.InRange(x.first, x.last.Next()) {
			return x
		}
	}
	return nil
}

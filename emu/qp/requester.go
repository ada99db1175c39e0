package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The requester (IBTA §9.7.3, §9.7.6; rxe_req.c, docs/roce.md "rxe as
// requester") owns the SQ: it fetches WQEs by valid bit and polarity,
// executes local operations, segments messages by path MTU into packets with
// consecutive 24-bit PSNs, and keeps the fetched WQEs in order until the
// completer retires them. Its spec variables, named as in IBTA/rxe:
//
//	nextPSN   the PSN of the next new packet (rxe req.psn)
//	una       the oldest unacknowledged PSN (rxe comp.psn)
//	retryLeft the transport retry count left (REXMIT_THRESH)
//	rnrLeft   the RNR retry count left (RNRNAK_THRESH, 7 = infinite)
//
// Retransmission is go-back-N from una, rebuilt from the WQEs and memory
// (nothing sent is kept): SEND/WRITE packets already acknowledged are
// skipped, a partly received READ is asked again for the rest with a new
// request at the first missing PSN (rxe req_retry).

// entryKind is what an SQ WQE does on the wire.
type entryKind uint8

const (
	kindLocal  entryKind = iota // NOP, LOCAL_INV, FAST_REG, BIND_MW: no packet
	kindUD                      // UD SEND: one packet, completes when sent
	kindSendWr                  // RC SEND / WRITE: completes on ACK
	kindRead                    // RC READ: completes on the last response
	kindAtomic                  // RC FETCH_ADD / COMPARE_SWAP: completes on ATOMIC ACK
)

// sqEntry is one fetched, not yet retired SQ WQE: what the completer needs
// and where to re-read the rest (the WQE stays in the ring until software
// sees its completion, so it is decoded again when needed).
type sqEntry struct {
	seq      uint64 // fetch order, keys the decode caches
	idx      uint32 // first quantum
	pol      uint8  // valid bit at idx
	quanta   uint8
	op       Opcode
	kind     entryKind
	signaled bool
	fence    bool // READFENCE or LOCALFENCE: wait for every earlier WQE
	started  bool // PSNs assigned
	done     bool
	firstPSN wire.PSN
	lastPSN  wire.PSN
	npkts    uint32
	length   uint64
	readRcvd uint64 // READ: response bytes placed
	reqOff   uint64 // READ: offset the last request asked from
	sinkSTag uint32 // READ_LOC_INV: the sink STag to invalidate
}

type requester struct {
	sq    WQ
	fetch WQState
	ents  []sqEntry
	head  int
	n     int
	seq   uint64

	// send is the entry (relative to head) the transmitter is at, sendPkt
	// the packet index within it.
	send    int
	sendPkt uint32

	nextPSN  wire.PSN
	una      wire.PSN
	maxSent  wire.PSN // one past the highest PSN ever sent
	inflight int      // RC entries started and not done
	readsOut int      // READ/atomic entries started and not done (ORD)

	retryLeft int
	rnrLeft   int
	rto       dpTimer
	rnr       dpTimer
	rnrWait   bool
	rnrPSN    wire.PSN
	// retrying: a go-back-N triggered by a NAK or an implied NAK is in
	// progress; further ones are ignored until an acknowledgement makes
	// progress (rxe comp.started_retry), so that the duplicates a retry
	// provokes do not start retries of their own.
	retrying bool

	sinceAckReq int
	started     bool
	more        bool

	cur    SQWQE // decode of the entry being sent
	curSeq uint64
	curOK  bool
	rd     SQWQE // decode of the READ/atomic being completed
	rdSeq  uint64
	rdOK   bool
}

func (r *requester) init(sq WQ) {
	r.sq = sq
	r.fetch = WQState{sq.cons, sq.pol}
}

// start sets the PSN state at RTS from PSNNXT and the retry counts from
// REXMIT_THRESH and RNRNAK_THRESH.
func (r *requester) start(t *Transport) {
	r.started = true
	r.nextPSN = wire.PSN(t.attrs.PSNNext) & wire.PSNMask
	r.una, r.maxSent = r.nextPSN, r.nextPSN
	r.resetRetries(t)
}

func (r *requester) resetRetries(t *Transport) {
	r.retryLeft = int(t.attrs.RetryCnt)
	r.rnrLeft = int(t.attrs.RNRRetry)
}

func (r *requester) capacity(t *Transport) int { return t.dp.Tun.MaxOutstandingWQEs }

func (r *requester) at(k int) *sqEntry { return &r.ents[(r.head+k)%len(r.ents)] }

// handback is the SQ consumer state FLUSH_WQES starts from: the oldest WQE
// not retired, or the fetch index.
func (r *requester) handback() WQState {
	if r.n > 0 {
		e := r.at(0)
		return WQState{e.idx, e.pol}
	}
	return r.fetch
}

// reset forgets every entry (the queue was flushed) and fetches from s.
func (r *requester) reset(s WQState) {
	r.head, r.n, r.send, r.sendPkt = 0, 0, 0, 0
	r.inflight, r.readsOut = 0, 0
	r.fetch = s
	r.curOK, r.rdOK = false, false
	r.una = r.nextPSN
	r.rto.disarm()
	r.rnr.disarm()
	r.rnrWait = false
}

// sqPosted reports a posted WQE at the fetch index that the requester
// could take (the scanner's valid-bit check).
func (r *requester) sqPosted(mem *hostmem.Memory) bool {
	// Entries not yet sent wait for the window, ORD or a fence, which an
	// ACK (a packet) or a timer opens: the scan has nothing to add then.
	if !r.started || r.sq.Mem.Size == 0 || r.send < r.n || (r.ents != nil && r.n >= len(r.ents)) {
		return false
	}
	h, err := mem.Load64(r.sq.Mem.Addr(r.fetch.Cons, headerOffset))
	return err == nil && Header(h).ValidBit() == r.fetch.Pol
}

// ---- fetch ---------------------------------------------------------------

// fetchOne reads and validates the WQE at the fetch index and appends it.
// It returns false when there is none (or the QP failed).
func (r *requester) fetchOne(t *Transport, ctx *Ctx) bool {
	if r.ents == nil {
		r.ents = make([]sqEntry, r.capacity(t))
	}
	if r.n >= len(r.ents) || r.sq.Mem.Size == 0 {
		return false
	}
	mem := t.dp.Mem
	idx, pol := r.fetch.Cons, r.fetch.Pol
	h, err := mem.Load64(r.sq.Mem.Addr(idx, headerOffset))
	if err != nil {
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	if Header(h).ValidBit() != pol {
		return false
	}
	// A WQE never crosses a max_hw_sq_chunk boundary (docs/hw-datapath.md
	// "Valid bit and NOP padding"); read up to the end of the chunk, which
	// also never crosses a page.
	chunk := uint32(max(t.dp.limits.ChunkQuanta, 1))
	nq := min(chunk-idx%chunk, r.sq.Mem.Size-idx, MaxWQEQuanta)
	b := ctx.wqe[:nq*QuantumSize]
	if err := mem.Read(r.sq.Mem.Addr(idx, 0), b); err != nil {
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	w := &r.cur
	derr := DecodeSQ(w, b, DecodeParams{Index: idx, Polarity: pol, Limits: t.dp.limits})
	quanta := SQQuanta(Header(h))
	if derr == nil {
		quanta = w.Quanta
	}
	// Step over what the header claims (a WQE crossing the chunk is
	// refused below, and the quanta it covers are its own), never past
	// the ring's end.
	quanta = min(quanta, int(r.sq.Mem.Size-idx))
	t.dp.charge(timing.WQEFetch, min(quanta, int(nq))*QuantumSize)
	r.seq++
	e := r.at(r.n)
	*e = sqEntry{seq: r.seq, idx: idx, pol: pol, quanta: uint8(quanta), op: Header(h).Opcode()}
	r.n++
	r.curSeq, r.curOK = e.seq, derr == nil
	r.advanceFetch(uint32(quanta))
	t.C.SQWQEs.Add(1)
	ctx.Port.SQWQEs.Add(1)
	if derr != nil {
		// Longer than the chunk it starts in: the NOP padding rule is
		// broken (ViolCrossesChunk's reaction).
		t.sqFatal(ctx, e, ViolCrossesChunk.Reaction().AE)
		return false
	}
	e.signaled = w.Signaled
	e.fence = w.ReadFence || w.LocalFence && !t.isUD()
	e.length = w.TotalLen
	if ae := r.validate(t, ctx, w, e); ae != 0 {
		t.sqFatal(ctx, e, ae)
		return false
	}
	return true
}

func (r *requester) advanceFetch(n uint32) {
	r.fetch.Cons += n
	if r.fetch.Cons >= r.sq.Mem.Size {
		r.fetch.Cons -= r.sq.Mem.Size
		r.fetch.Pol ^= 1
	}
}

// maxMsgSize is IBTA's 2^31 message limit (rxe check_length, irdma
// IRDMA_MAX_OUTBOUND_MSG_SIZE).
const maxMsgSize = 1 << 31

// validate classifies the WQE and checks what the hardware checks before
// it sends: the decoder's layout violations (their reactions), the
// opcode against the QP type and the device's features, the QP's
// permissions, and every local SGE against the STag table (PD, rights,
// bounds). It returns the AE of the first failure, 0 if none.
func (r *requester) validate(t *Transport, ctx *Ctx, w *SQWQE, e *sqEntry) uint16 {
	if !w.OK() {
		for _, v := range w.Violations() {
			if re := v.Code.Reaction(); re.AE != 0 {
				return re.AE
			}
		}
		return AEWQEInvalidParameter
	}
	op := w.Opcode
	ud := t.isUD()
	switch {
	case op == OpNOP, op == OpLocalInvalidate:
		e.kind = kindLocal
	case op == OpFastRegister:
		e.kind = kindLocal
		if !t.attrs.FastRegEn {
			return AEPrivOperationDenied
		}
	case op == OpBindMW:
		e.kind = kindLocal
		if ud {
			return AEWQEUnexpectedOpcode
		}
		if !t.attrs.BindEn {
			return AEPrivOperationDenied
		}
	case op.IsSend():
		if ud {
			if op.Invalidates() {
				return AEWQEUnexpectedOpcode
			}
			e.kind = kindUD
		} else {
			e.kind = kindSendWr
		}
	case op.IsWrite():
		if ud {
			return AEWQEUnexpectedOpcode
		}
		e.kind = kindSendWr
	case op.IsRead():
		if ud {
			return AEWQEUnexpectedOpcode
		}
		if t.attrs.ORD == 0 {
			return AERDMAReadWhileORDZero
		}
		e.kind = kindRead
	case op.IsAtomic():
		// Without IRDMA_FEATURE_ATOMIC_OPS the opcode is not one the device
		// executes (docs/hw-datapath.md "Generations", "GEN_2 capabilities").
		if ud || !t.dp.Profile.Atomics {
			return AEWQEUnexpectedOpcode
		}
		if t.attrs.ORD == 0 {
			return AERDMAReadWhileORDZero
		}
		e.kind = kindAtomic
	default:
		return AEWQEUnexpectedOpcode
	}
	if w.TotalLen > maxMsgSize {
		return AEWQEInvalidParameter
	}
	pd, qpn := t.pd(), t.q.ID
	switch e.kind {
	case kindUD, kindSendWr:
		if !w.Inline {
			for _, f := range w.Fragments() {
				if f.Len == 0 {
					continue
				}
				if ae := r.checkLocal(t, ctx, f.STag, pd, qpn, f.Addr, uint64(f.Len), mr.AccessLocalRead); ae != 0 {
					return ae
				}
			}
		}
		if e.kind == kindUD {
			a, _, ae, ok := t.dp.AHs.ResolveAH(w.UD.AHID)
			if !ok {
				return ae
			}
			if a.PD != pd {
				return AEUDAXmitBadPD
			}
		}
	case kindRead:
		for _, f := range w.Fragments() {
			if f.Len == 0 {
				continue
			}
			if ae := r.checkLocal(t, ctx, f.STag, pd, qpn, f.Addr, uint64(f.Len), mr.AccessLocalWrite); ae != 0 {
				return ae
			}
		}
		if frs := w.Fragments(); len(frs) > 0 {
			e.sinkSTag = frs[0].STag
		}
	case kindAtomic:
		if ae := r.checkLocal(t, ctx, w.Atomic.LocalSTag, pd, qpn, w.Atomic.LocalVA, 8, mr.AccessLocalWrite); ae != 0 {
			return ae
		}
	}
	if e.kind != kindLocal && e.kind != kindUD {
		e.npkts = 1
		if e.kind != kindAtomic && e.length > uint64(t.mtu) {
			e.npkts = uint32((e.length + uint64(t.mtu) - 1) / uint64(t.mtu))
		}
	}
	return 0
}

// checkLocal translates an L_Key range and returns the AE on failure.
func (r *requester) checkLocal(t *Transport, ctx *Ctx, stag, pd, qpn uint32, va, n uint64, need mr.Access) uint16 {
	var err error
	ctx.spans, err = t.dp.MRs.Translate(stag, pd, qpn, va, n, need, false, ctx.spans[:0])
	if err != nil {
		if ae, ok := mr.AEOf(err); ok {
			return uint16(ae)
		}
		return AELCEQPCatastrophic
	}
	return 0
}

// decodeCur makes r.cur the decode of e (re-reading it from the ring).
func (r *requester) decodeCur(t *Transport, ctx *Ctx, e *sqEntry) bool {
	if r.curOK && r.curSeq == e.seq {
		return true
	}
	if !r.decodeInto(t, ctx, e, &r.cur) {
		return false
	}
	r.curSeq, r.curOK = e.seq, true
	return true
}

// decodeRd makes r.rd the decode of e, for the completer.
func (r *requester) decodeRd(t *Transport, ctx *Ctx, e *sqEntry) bool {
	if r.rdOK && r.rdSeq == e.seq {
		return true
	}
	if r.curOK && r.curSeq == e.seq {
		r.rd = r.cur
		r.rdSeq, r.rdOK = e.seq, true
		return true
	}
	if !r.decodeInto(t, ctx, e, &r.rd) {
		return false
	}
	r.rdSeq, r.rdOK = e.seq, true
	return true
}

func (r *requester) decodeInto(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	b := ctx.wqe[:int(e.quanta)*QuantumSize]
	if err := t.dp.Mem.Read(r.sq.Mem.Addr(e.idx, 0), b); err != nil ||
		DecodeSQ(w, b, DecodeParams{Index: e.idx, Polarity: e.pol, Limits: t.dp.limits}) != nil || !w.OK() {
		// Software overwrote a WQE the device has not completed.
		t.sqFatal(ctx, e, AELCEQPCatastrophic)
		return false
	}
	t.dp.charge(timing.WQEFetch, len(b))
	return true
}

// ---- transmit ------------------------------------------------------------

// run sends what the window, ORD, fences and the burst allow, fetching
// new WQEs as it goes, then retires completed WQEs. It reports whether it
// did anything; r.more says it stopped for the burst only.
func (r *requester) run(t *Transport, ctx *Ctx) bool {
	r.more = false
	if !r.started {
		return false
	}
	did := r.retire(t, ctx)
	if t.suspended {
		// SUSPEND_QP: nothing goes out until RESUME_QP (ctrl.c
		// irdma_sc_suspend_qp); acknowledgements still complete WQEs.
		return did
	}
	st := t.q.State()
	budget := t.dp.Tun.TxBurst
	for !r.rnrWait {
		if t.q.State() == StateError {
			return true
		}
		if budget <= 0 {
			r.more = true
			break
		}
		if r.send >= r.n {
			// New WQEs only in RTS: SQD finishes what it has (IBTA
			// §10.3.1 "send queue drain").
			if st != StateRTS || !r.fetchOne(t, ctx) {
				break
			}
			did = true
			continue
		}
		e := r.at(r.send)
		if e.done {
			r.send++
			r.sendPkt = 0
			continue
		}
		if e.fence && r.send > 0 {
			break // IB_SEND_FENCE: every earlier WQE completes first (rxe)
		}
		sent, ok := r.sendEntry(t, ctx, e, &budget)
		if sent {
			did = true
		}
		if !ok {
			break
		}
	}
	if t.q.State() == StateError {
		return true
	}
	if r.retire(t, ctx) {
		did = true
	}
	// Publish the hardware SQ tail, then look at the WQE there once more:
	// a kernel poster that read the old tail skipped its doorbell
	// (irdma_uk_qp_post_wr) and relies on us seeing its valid bit.
	PublishSQTail(t.dp.Mem, t.shadow, r.fetch.Cons)
	if !r.more && !r.rnrWait && r.send >= r.n && st == StateRTS && r.n < len(r.ents) && r.sqPosted(t.dp.Mem) {
		r.more = true
	}
	return did
}

// sendEntry advances e: executes a local operation, sends a UD datagram, or
// sends RC packets while the window, ORD and the budget allow. ok false
// means the transmitter must stop (blocked, or the QP failed).
func (r *requester) sendEntry(t *Transport, ctx *Ctx, e *sqEntry, budget *int) (sent, ok bool) {
	if !r.decodeCur(t, ctx, e) {
		return false, false
	}
	w := &r.cur
	switch e.kind {
	case kindLocal:
		if !r.execLocal(t, ctx, e, w) {
			return false, false
		}
		e.done = true
		r.send++
		r.sendPkt = 0
		return true, true
	case kindUD:
		if !r.sendUD(t, ctx, e, w) {
			return false, false
		}
		*budget--
		e.done = true
		r.send++
		r.sendPkt = 0
		return true, true
	}
	if !e.started {
		// A new message follows every PSN sent so far, whatever a go-back-N
		// cut short by an ACK left nextPSN at.
		r.nextPSN = r.maxSent
	}
	win := int32(t.dp.Tun.MaxUnackedPSNs)
	for e.kind == kindSendWr && r.sendPkt < e.npkts || e.kind != kindSendWr && r.sendPkt == 0 {
		if *budget <= 0 {
			r.more = true
			return sent, false
		}
		if r.nextPSN.Diff(r.una) >= win {
			return sent, false // window full (rxe RXE_MAX_UNACKED_PSNS)
		}
		if !e.started && e.kind != kindSendWr && r.readsOut >= int(t.attrs.ORD) {
			return sent, false // ORD outstanding READ/atomics
		}
		if !e.started {
			e.started = true
			e.firstPSN = r.nextPSN
			e.lastPSN = e.firstPSN.Add(e.npkts - 1)
			r.inflight++
			if e.kind != kindSendWr {
				r.readsOut++
			}
		}
		var okp bool
		switch e.kind {
		case kindSendWr:
			okp = r.sendSendWritePacket(t, ctx, e, w)
		case kindRead:
			okp = r.sendReadRequest(t, ctx, e, w)
		case kindAtomic:
			okp = r.sendAtomic(t, ctx, e, w)
		}
		if !okp {
			return sent, false
		}
		sent = true
		*budget--
		if !r.rto.armed {
			r.rto.arm(t.dp.Clock, ctx.now, t.rto())
		}
		if e.kind != kindSendWr {
			break
		}
	}
	r.send++
	r.sendPkt = 0
	return sent, true
}

// countSent records a packet with PSN psn as sent or resent.
func (r *requester) countSent(t *Transport, ctx *Ctx, psn wire.PSN) {
	if psn.LessThan(r.maxSent) {
		t.C.Retransmits.Add(1)
		ctx.Port.Retransmits.Add(1)
	} else {
		r.maxSent = psn.Next()
	}
}

// ackReq decides AckReq: on a message's last packet and on every
// AckReqEvery-th packet (rxe_req.c: RXE_MAX_PKT_PER_ACK).
func (r *requester) ackReq(t *Transport, last bool) bool {
	r.sinceAckReq++
	if last || r.sinceAckReq >= t.dp.Tun.AckReqEvery {
		r.sinceAckReq = 0
		return true
	}
	return false
}

func (t *Transport) pkey() uint16 {
	if t.attrs.PKey == 0 {
		return wire.DefaultPKey
	}
	return t.attrs.PKey
}

// sendSendWritePacket builds packet r.sendPkt of a SEND or WRITE: opcode by
// position (IBTA §9.4.1 C9-20..C9-23: first/middle carry exactly the path
// MTU), RETH on the first (whole length, rxe), ImmDt or IETH on the last,
// SE on the last of a solicited SEND or WRITE with immediate.
func (r *requester) sendSendWritePacket(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	i := r.sendPkt
	mtu := uint64(t.mtu)
	off := uint64(i) * mtu
	n := min(mtu, e.length-min(off, e.length))
	first, last := i == 0, i == e.npkts-1
	op := w.Opcode
	imm := w.ImmFlag
	var bop wire.Opcode
	write := op.IsWrite()
	switch {
	case write && first && last && imm:
		bop = wire.RCRDMAWriteOnlyWithImm
	case write && first && last:
		bop = wire.RCRDMAWriteOnly
	case write && first:
		bop = wire.RCRDMAWriteFirst
	case write && last && imm:
		bop = wire.RCRDMAWriteLastWithImm
	case write && last:
		bop = wire.RCRDMAWriteLast
	case write:
		bop = wire.RCRDMAWriteMiddle
	case first && last && op.Invalidates():
		bop = wire.RCSendOnlyWithInvalidate
	case first && last && imm:
		bop = wire.RCSendOnlyWithImm
	case first && last:
		bop = wire.RCSendOnly
	case first:
		bop = wire.RCSendFirst
	case last && op.Invalidates():
		bop = wire.RCSendLastWithInvalidate
	case last && imm:
		bop = wire.RCSendLastWithImm
	case last:
		bop = wire.RCSendLast
	default:
		bop = wire.RCSendMiddle
	}
	psn := e.firstPSN.Add(i)
	p := t.newPacket(ctx)
	if p == nil {
		return false
	}
	if !t.rcFrame(ctx) {
		p.Release()
		return false
	}
	pf := &ctx.pf
	*pf = wire.PacketFields{}
	pf.BTH = wire.BTHFields{
		Opcode: bop, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn,
		SE:     last && w.Solicited && (op.IsSend() || imm),
		AckReq: r.ackReq(t, last),
	}
	pf.RETH = wire.RETHFields{VA: w.RemoteVA, RKey: w.RemoteSTag, DMALen: uint32(e.length)}
	pf.ImmDt = wire.ImmDtFields{Imm: w.ImmData}
	pf.IETH = wire.IETHFields{RKey: w.InvalidateSTag}
	if !t.encode(ctx, p, int(n)) {
		return false
	}
	if ae := r.gather(t, ctx, w, off, ctx.frame.Packet.Payload); ae != 0 {
		p.Release()
		t.sqFatal(ctx, e, ae)
		return false
	}
	if first && !psn.LessThan(r.maxSent) {
		// Count messages once, on their first transmission.
		if write {
			t.hw(StatRDMATxWrs, 1)
		} else {
			t.hw(StatRDMATxSnds, 1)
		}
	}
	r.countSent(t, ctx, psn)
	t.transmit(ctx, p)
	r.sendPkt++
	r.nextPSN = psn.Next()
	return true
}

// sendReadRequest sends the READ request for what has not arrived yet:
// the first time the whole range, after a retry the rest from the first
// missing PSN (rxe req_retry: "a partially received READ is re-requested").
func (r *requester) sendReadRequest(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	mtu := uint64(t.mtu)
	got := e.readRcvd
	psn := e.firstPSN.Add(uint32(got / mtu))
	p := t.newPacket(ctx)
	if p == nil {
		return false
	}
	if !t.rcFrame(ctx) {
		p.Release()
		return false
	}
	pf := &ctx.pf
	*pf = wire.PacketFields{}
	pf.BTH = wire.BTHFields{Opcode: wire.RCRDMAReadRequest, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: psn,
		AckReq: r.ackReq(t, true)}
	pf.RETH = wire.RETHFields{VA: w.RemoteVA + got, RKey: w.RemoteSTag, DMALen: uint32(e.length - got)}
	if !t.encode(ctx, p, 0) {
		return false
	}
	e.reqOff = got
	if !psn.LessThan(r.maxSent) {
		t.hw(StatRDMATxRds, 1)
	}
	r.countSent(t, ctx, psn)
	if e.lastPSN.Next().Diff(r.maxSent) > 0 {
		r.maxSent = e.lastPSN.Next()
	}
	t.transmit(ctx, p)
	r.sendPkt = 1
	r.nextPSN = e.lastPSN.Next()
	return true
}

// sendAtomic sends a FETCH_ADD or COMPARE_SWAP request (AtomicETH).
func (r *requester) sendAtomic(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	p := t.newPacket(ctx)
	if p == nil {
		return false
	}
	if !t.rcFrame(ctx) {
		p.Release()
		return false
	}
	bop := wire.RCFetchAdd
	if w.Opcode == OpAtomicCompareSwap {
		bop = wire.RCCompareSwap
	}
	pf := &ctx.pf
	*pf = wire.PacketFields{}
	pf.BTH = wire.BTHFields{Opcode: bop, PKey: t.pkey(), DestQP: t.attrs.DestQP, PSN: e.firstPSN,
		AckReq: r.ackReq(t, true)}
	pf.AtomicETH = wire.AtomicETHFields{VA: w.RemoteVA, RKey: w.RemoteSTag, SwapAdd: w.Atomic.SwapAdd,
		Compare: w.Atomic.Compare}
	if !t.encode(ctx, p, 0) {
		return false
	}
	r.countSent(t, ctx, e.firstPSN)
	t.transmit(ctx, p)
	r.sendPkt = 1
	r.nextPSN = e.firstPSN.Next()
	return true
}

// gather copies n = len(dst) message bytes from offset off of w's payload
// (inline bytes, or the SGEs translated through their L_Keys) into dst.
func (r *requester) gather(t *Transport, ctx *Ctx, w *SQWQE, off uint64, dst []byte) uint16 {
	if len(dst) == 0 {
		return 0
	}
	if w.Inline {
		src := w.InlineData()
		if off+uint64(len(dst)) > uint64(len(src)) {
			return AEWQEInvalidParameter
		}
		copy(dst, src[off:])
		return 0
	}
	t.dp.charge(timing.PayloadDMARead, len(dst))
	if ae, left := copySGEs(t, ctx, w.Fragments(), off, dst, false); ae != 0 || left == 0 {
		return ae
	}
	return AEWQEInvalidParameter // the SGEs hold less than the message
}

// scatter writes src at offset off of the SGE list frags (receive buffers,
// READ sinks) through their L_Keys, with local write access.
func scatter(t *Transport, ctx *Ctx, frags []Fragment, off uint64, src []byte) uint16 {
	if len(src) == 0 {
		return 0
	}
	t.dp.charge(timing.PayloadDMAWrite, len(src))
	if ae, left := copySGEs(t, ctx, frags, off, src, true); ae != 0 || left == 0 {
		return ae
	}
	return AEMsgTooLongForBuffer
}

// copySGEs moves buf between memory and offset off of the SGE list frags,
// each SGE translated through its L_Key: from memory into buf (gather,
// local read access) or from buf into memory (scatter, local write
// access). It returns the AE of the first failure, or how many bytes of
// buf the SGEs had no room for.
func copySGEs(t *Transport, ctx *Ctx, frags []Fragment, off uint64, buf []byte, write bool) (ae uint16, left int) {
	need := mr.AccessLocalRead
	if write {
		need = mr.AccessLocalWrite
	}
	pd, qpn := t.pd(), t.q.ID
	pos := uint64(0)
	for _, f := range frags {
		fl := uint64(f.Len)
		if off >= pos+fl {
			pos += fl
			continue
		}
		in := off - pos
		k := min(fl-in, uint64(len(buf)))
		var err error
		ctx.spans, err = t.dp.MRs.Translate(f.STag, pd, qpn, f.Addr+in, k, need, false, ctx.spans[:0])
		if err != nil {
			return aeOf(err), len(buf)
		}
		for _, s := range ctx.spans {
			if write {
				err = t.dp.Mem.Write(s.IOVA, buf[:s.Len])
			} else {
				err = t.dp.Mem.Read(s.IOVA, buf[:s.Len])
			}
			if err != nil {
				return AELCEQPCatastrophic, len(buf)
			}
			buf = buf[s.Len:]
		}
		off += k
		pos += fl
		if len(buf) == 0 {
			return 0, 0
		}
	}
	return 0, len(buf)
}

func aeOf(err error) uint16 {
	if ae, ok := mr.AEOf(err); ok {
		return uint16(ae)
	}
	return AELCEQPCatastrophic
}

// sendUD sends a UD SEND through its address handle (IBTA §9.8.3;
// rxe_req.c init_req_packet): framing from the AH (destination MAC from
// its ARP entry, IPs, traffic class, flow label, hop limit, VLAN), DETH
// with the Q_Key and our QPN. A message longer than the port MTU is not
// sent and completes successfully (IBA C10-93.1.1, as rxe).
func (r *requester) sendUD(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	a, dmac, ae, ok := t.dp.AHs.ResolveAH(w.UD.AHID)
	if !ok {
		t.sqFatal(ctx, e, ae)
		return false
	}
	if a.PD != t.pd() {
		t.sqFatal(ctx, e, AEUDAXmitBadPD)
		return false
	}
	mtu := t.dp.PortMTU
	if t.attrs.MTU != 0 && t.mtu < mtu {
		mtu = t.mtu
	}
	if e.length > uint64(mtu) {
		return true
	}
	p := t.newPacket(ctx)
	if p == nil {
		return false
	}
	ff := &ctx.ff
	*ff = wire.FrameFields{Dst: dmac, Src: wire.MAC(a.SrcMAC), SrcIP: a.Src(), DstIP: a.Dest(),
		TrafficClass: a.TC, HopLimit: a.HopLimit, FlowLabel: a.FlowLabel, SrcPort: t.attrs.SrcPort}
	if ff.Src == (wire.MAC{}) {
		ff.Src = ctx.MAC
	}
	if a.InsertVLAN {
		ctx.vlan = wire.VLANFields{Priority: uint8(a.VLANTag >> 13), ID: a.VLANTag & 0xfff}
		ff.VLAN = &ctx.vlan
	}
	qkey := w.UD.QKey
	switch {
	case t.attrs.IsQP1 || t.q.ID == 1:
		qkey = wire.GSIQKey
	case qkey&0x8000_0000 != 0:
		// IBTA C10-15: a Q_Key with the high-order bit set selects the
		// QP's own Q_Key.
		qkey = t.attrs.QKey
	}
	bop := wire.UDSendOnly
	if w.ImmFlag {
		bop = wire.UDSendOnlyWithImm
	}
	psn := r.nextPSN
	pf := &ctx.pf
	*pf = wire.PacketFields{}
	pf.BTH = wire.BTHFields{Opcode: bop, PKey: t.pkey(), DestQP: w.UD.DestQPN, PSN: psn, SE: w.Solicited}
	pf.DETH = wire.DETHFields{QKey: qkey, SrcQP: t.q.ID}
	pf.ImmDt = wire.ImmDtFields{Imm: w.ImmData}
	m, err := wire.EncodeFrame(p.Buf(), ff, pf, int(e.length), &ctx.frame)
	if err != nil {
		p.Release()
		t.sqFatal(ctx, e, AEInvalidAHEntry)
		return false
	}
	p.Data = p.Buf()[:m]
	if ae := r.gather(t, ctx, w, 0, ctx.frame.Packet.Payload); ae != 0 {
		p.Release()
		t.sqFatal(ctx, e, ae)
		return false
	}
	r.nextPSN = psn.Next()
	t.hw(StatRDMATxSnds, 1)
	t.transmit(ctx, p)
	return true
}

// execLocal runs a local operation: LOCAL_INV, FAST_REG and BIND_MW through
// emu/mr (whose errors carry the AE), NOP nothing.
func (r *requester) execLocal(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	var err error
	switch w.Opcode {
	case OpLocalInvalidate:
		err = t.dp.MRs.Invalidate(w.InvalidateSTag, t.pd(), t.q.ID, false)
		if err == nil {
			t.hw(StatRDMAVInv, 1)
		}
	case OpFastRegister:
		f := &w.FastReg
		err = t.dp.MRs.FastRegister(mr.FastRegArgs{
			STagIndex: f.STagIndex, Key: f.STagKey, PD: t.pd(), VA: f.VA, VABased: f.VABased,
			Length: f.Len, Access: mr.Access(f.Rights), PageSize: mr.PageSize(f.PageSize),
			LPBLSize: f.ChunkSize, FirstPBLE: f.FirstPMPBLIndex, PBLAddr: hostmem.IOVA(f.PBLAddr),
		})
	case OpBindMW:
		b := &w.Bind
		acc := mr.Access(b.Rights)
		if b.RemoteAtomics {
			acc |= mr.AccessRemoteAtomic
		}
		err = t.dp.MRs.BindMW(mr.BindArgs{MWSTag: b.MWSTag, MRSTag: b.ParentSTag, PD: t.pd(), QP: t.q.ID,
			VA: b.VA, Length: b.Len, Access: acc, VABased: b.VABased, Type1: b.Type1})
		if err == nil {
			t.hw(StatRDMAVBnd, 1)
		}
	}
	if err != nil {
		t.sqFatal(ctx, e, aeOf(err))
		return false
	}
	return true
}

// ---- completion ----------------------------------------------------------

// retire writes the CQEs of the completed WQEs at the head, in order: a
// CQE per signaled WQE; unsignaled ones retire silently, and software
// retires them when a later CQE's WQE index passes them
// (irdma_uk_cq_poll_cmpl).
func (r *requester) retire(t *Transport, ctx *Ctx) bool {
	did := false
	for r.n > 0 {
		e := r.at(0)
		if !e.done {
			break
		}
		if e.signaled {
			var c cq.CQE
			t.baseCQE(&c)
			c.SQ = true
			c.Op = uint8(e.op)
			c.WQEIdx = uint16(e.idx)
			c.PayloadLen = uint32(min(e.length, maxMsgSize))
			c.PSN = uint32(e.lastPSN)
			t.postCQE(ctx, t.sendCQ, &c)
		}
		r.pop()
		did = true
	}
	return did
}

func (r *requester) pop() {
	r.head = (r.head + 1) % len(r.ents)
	r.n--
	if r.send > 0 {
		r.send--
	} else {
		r.sendPkt = 0
	}
}

// retireErrored drops e after its error CQE if it is the oldest entry.
func (r *requester) retireErrored(e *sqEntry) {
	if r.n > 0 && r.at(0) == e {
		if e.started && !e.done {
			r.inflight--
		}
		r.pop()
	}
}

// oldestPending returns the oldest RC entry that was sent and is not
// complete.
func (r *requester) oldestPending() *sqEntry {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if !e.started {
			return nil
		}
		return e
	}
	return nil
}

// complete marks e done and moves una past it.
func (r *requester) complete(e *sqEntry) {
	e.done = true
	r.inflight--
	if e.kind == kindRead || e.kind == kindAtomic {
		r.readsOut--
	}
	if next := e.lastPSN.Next(); next.Diff(r.una) > 0 {
		r.una = next
	}
}

// progress follows an acknowledgement that moved una: the retry counts
// start again, and the retransmission timer restarts or stops.
func (r *requester) progress(t *Transport, ctx *Ctx) {
	r.resetRetries(t)
	r.retrying = false
	if r.inflight > 0 {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	} else {
		r.rto.disarm()
	}
}

// rewind is go-back-N: the transmitter restarts at the oldest
// unacknowledged PSN to (rxe req_retry). Entries are re-sent from there;
// those already done (local, UD, acknowledged) are skipped.
func (r *requester) rewind(to wire.PSN) {
	for k := 0; k < r.n; k++ {
		e := r.at(k)
		if e.done || e.kind == kindLocal || e.kind == kindUD {
			continue
		}
		if !e.started {
			// Everything before it is acknowledged.
			r.send, r.sendPkt = k, 0
			r.nextPSN = r.maxSent
			return
		}
		if e.lastPSN.LessThan(to) {
			continue
		}
		r.send = k
		r.sendPkt = 0
		if e.kind == kindSendWr && to.Diff(e.firstPSN) > 0 {
			r.sendPkt = uint32(to.Diff(e.firstPSN))
		}
		r.nextPSN = e.firstPSN.Add(r.sendPkt)
		return
	}
	r.send, r.sendPkt = r.n, 0
	// Everything sent is acknowledged: the next new packet is maxSent.
	r.nextPSN = r.maxSent
}

// retry consumes a transport retry (timeout or PSN sequence NAK) and goes
// back; false when the count was exhausted and the QP failed.
func (r *requester) retry(t *Transport, ctx *Ctx) bool {
	if r.retryLeft <= 0 && !(t.dp.Tun.InfiniteRetry7 && t.attrs.RetryCnt == 7) {
		if e := r.oldestPending(); e != nil {
			t.sqFatal(ctx, e, AELLPTooManyRetries)
		} else {
			t.sqFatal(ctx, nil, AELLPTooManyRetries)
		}
		return false
	}
	if !(t.dp.Tun.InfiniteRetry7 && t.attrs.RetryCnt == 7) {
		r.retryLeft--
	}
	r.rewind(r.una)
	r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	return true
}

// onRTO is the retransmission timer's expiry.
func (r *requester) onRTO(t *Transport, ctx *Ctx) {
	r.rto.disarm()
	if r.inflight == 0 || r.rnrWait {
		return
	}
	if t.suspended {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto()) // no retry while suspended
		return
	}
	t.C.Timeouts.Add(1)
	ctx.Port.Timeouts.Add(1)
	r.retry(t, ctx)
}

// nakRetry is the go-back-N a PSN sequence NAK or an implied NAK asks for:
// one per lack of progress (see retrying).
func (r *requester) nakRetry(t *Transport, ctx *Ctx) {
	if r.retrying {
		return
	}
	if r.retry(t, ctx) {
		r.retrying = true
	}
}

// onRNRTimer ends an RNR wait: retry from the NAKed PSN.
func (r *requester) onRNRTimer(t *Transport, ctx *Ctx) {
	r.rnr.disarm()
	if !r.rnrWait {
		return
	}
	r.rnrWait = false
	t.C.RNRWaits.Add(1)
	ctx.Port.RNRWaits.Add(1)
	r.rewind(r.una)
	if r.inflight > 0 {
		r.rto.arm(t.dp.Clock, ctx.now, t.rto())
	}
}

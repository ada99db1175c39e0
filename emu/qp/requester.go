package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
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
//
// This file holds its state and its loop (run): fetch (fetch.go) and
// validate (validate.go) new WQEs, then per WQE a local operation
// (local.go), a UD datagram (ud.go) or the RC segmentation (segment.go);
// retirement is the completion stage (completion.go), the answers the
// completer (completer.go), the timers retry.go.

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

	// cwnd is the window in force, in PSNs (window.go), ssthresh where
	// its doubling stops; cwndAcc counts the PSNs acknowledged towards its
	// next step up above ssthresh, from lastUna, una at the last progress.
	cwnd, ssthresh uint32
	cwndAcc        uint32
	lastUna        wire.PSN

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
	r.windowOpen(t)
}

func (r *requester) resetRetries(t *Transport) {
	r.retryLeft = int(t.attrs.RetryCnt)
	r.rnrLeft = int(t.attrs.RNRRetry)
}

func (r *requester) capacity(t *Transport) int { return t.dp.Tun.MaxOutstandingWQEs }

func (r *requester) at(k int) *sqEntry { return &r.ents[(r.head+k)%len(r.ents)] }

func (r *requester) pop() {
	r.head = (r.head + 1) % len(r.ents)
	r.n--
	if r.send > 0 {
		r.send--
	} else {
		r.sendPkt = 0
	}
}

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
	return r.fetchable() && r.validAtFetch(mem)
}

// fetchable reports whether a WQE posted at the fetch index would be
// fetched by the next Run. Entries not yet sent wait for the window, ORD
// or a fence, which an ACK (a packet) or a timer opens: a post has nothing
// to add then.
func (r *requester) fetchable() bool {
	return r.started && r.send >= r.n && (r.ents == nil || r.n < len(r.ents))
}

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
			if st != StateRTS || !r.fetchWQE(t, ctx) {
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
// segments an RC message into packets while the window, ORD and the budget
// allow. ok false means the transmitter must stop (blocked, or the QP
// failed).
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
	return r.segment(t, ctx, e, w, budget)
}

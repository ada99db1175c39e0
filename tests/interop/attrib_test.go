package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The capture judges who is to blame for a retry. rxe's counters say that
// rxe saw a duplicate request (duplicate_request) or retried
// (completer_retry_err), not why: in a TCG guest rxe is often slower than
// the 67 ms transport timeout both sides use (timeout 14), and rxe's own
// timer fires spuriously (rxe_comp.c: "some timeouts are spurious since we
// do not reset the timer but kick it down the road or let it expire"). So
// every retransmission in the capture is classified by what its sender
// had seen on the wire when it sent it:
//
//   - needless: the peer had already acknowledged the PSN (its ACK was
//     on the wire more than ackSlack earlier);
//   - premature: neither a NAK nor a whole timeout without progress
//     preceded it;
//   - justified: the peer was silent for a timeout, or NAKed.
//
// irdma-emu is to blame for its own needless or premature retransmissions,
// for requests it sent out of PSN order, for NAKs it sent (nothing is lost
// from the guest to the host), for acknowledging a request later than the
// timeout, and for an rxe retransmission that rxe made because irdma-emu
// did not answer within the timeout.

const (
	// transportTimeout is 4.096 µs × 2^14, the local ACK timeout of every
	// program here (ibv_rc_pingpong, perftest's default, irdma-emu pingpong).
	transportTimeout = 4096 * time.Nanosecond << 14
	// ackSlack is how long a packet may be on the wire (in the capture)
	// before its receiver can have acted on it.
	ackSlack = 5 * time.Millisecond
	// timerMargin: a timer that fires within this fraction of the timeout
	// is taken as a timeout (capture timestamps against the sender's clock).
	timerMargin = 0.9
)

// wirePacket is one RoCEv2 packet of the capture, as irdma-emu decode
// --json prints it.
type wirePacket struct {
	Frame   int     `json:"frame"`
	Time    string  `json:"time"`
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	Opcode  uint8   `json:"opcode"`
	Name    string  `json:"opcode_name"`
	DQPN    uint32  `json:"dqpn"`
	PSN     uint32  `json:"psn"`
	AckReq  bool    `json:"ackreq"`
	DMALen  *uint32 `json:"reth_dma_len"`
	AETH    string  `json:"aeth_type"`
	NAK     string  `json:"aeth_nak"`
	Payload int     `json:"payload_len"`
	ICRCOK  bool    `json:"icrc_ok"`
	Error   string  `json:"error"`
	// CM is set for a CM MAD to or from QP1 (decode_cm.go).
	CM *struct {
		Attr  string `json:"attr"`
		Error string `json:"error"`
	} `json:"cm"`

	t time.Time // on the tap
	// at is when irdma-emu sent or received the packet (its own capture),
	// else t: irdma-emu is judged by what it had seen when it acted, not
	// by when the host let it run.
	at  time.Time
	src netip.Addr
	dst netip.Addr
}

func (p *wirePacket) op() wire.Opcode { return wire.Opcode(p.Opcode) }

// rcFlow is one direction of requests of an RC connection: requests from
// src to QP dqpn, and the responses coming back.
type rcFlow struct {
	src, dst netip.Addr
	dqpn     uint32 // the responder's QP
	rqpn     uint32 // the requester's QP (responses go to it); 0 until seen

	started     bool
	next        wire.PSN // the PSN the next new request takes
	acked       wire.PSN // last PSN acknowledged (valid when anyAck)
	anyAck      bool
	ackedAt     time.Time // when acked last moved
	armedAt     time.Time // the sender's timer reference: last progress or first send after idle
	nakAt       time.Time // last NAK (sequence or RNR) from the responder
	retxNext    wire.PSN  // the PSN that continues the current go-back-N burst
	retxVerdict string
	sentAt      map[wire.PSN]time.Time
	waiting     map[wire.PSN]time.Time // AckReq'd (or READ) request PSNs not yet answered, first sent
	ackLatency  []time.Duration
}

// blameEntry is one thing irdma-emu did wrong, at the time of the
// packet that shows it.
type blameEntry struct {
	t   time.Time
	msg string
}

// outstanding reports requests sent and not yet acknowledged.
func (f *rcFlow) outstanding() bool {
	return f.started && (!f.anyAck || f.acked.Next() != f.next)
}

// retryReport is the outcome of analyzeRetries.
type retryReport struct {
	requests, retransmitted map[string]int // by sender ("irdma-emu", "rxe")
	verdicts                map[string]int // "sender: verdict"
	blame                   []blameEntry   // what irdma-emu is to blame for
	ackLatency              map[string][]time.Duration
	naks                    map[string]int // "sender: kind"
	// maxRxDelay is the longest a packet of rxe's spent between the tap
	// and irdma-emu (the host not running the daemon).
	maxRxDelay time.Duration
	// trailingDupAcks counts irdma-emu's ACKs for requests rxe sent again
	// after which rxe sent nothing more to that QP (for a second): rxe may
	// have completed the request from the first ACK and destroyed its QP
	// meanwhile, and then dropped these uncounted.
	trailingDupAcks int
}

func (r retryReport) String() string {
	var b strings.Builder
	for _, who := range []string{"irdma-emu", "rxe"} {
		lat := r.ackLatency[who]
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		var p50, p99, max time.Duration
		if n := len(lat); n > 0 {
			p50, p99, max = lat[n/2], lat[n*99/100], lat[n-1]
		}
		fmt.Fprintf(&b, "%s: %d requests, %d retransmitted; answered %d AckReq'd requests, latency p50 %v p99 %v max %v\n",
			who, r.requests[who], r.retransmitted[who], len(lat), p50.Round(time.Microsecond), p99.Round(time.Microsecond), max.Round(time.Microsecond))
	}
	var keys []string
	for k := range r.verdicts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  retransmissions %s: %d\n", k, r.verdicts[k])
	}
	keys = keys[:0]
	for k := range r.naks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  NAKs sent by %s: %d\n", k, r.naks[k])
	}
	fmt.Fprintf(&b, "  longest time a packet of rxe's took from the tap into irdma-emu: %v\n", r.maxRxDelay.Round(time.Microsecond))
	fmt.Fprintf(&b, "  irdma-emu's duplicate ACKs with nothing more from rxe after them: %d\n", r.trailingDupAcks)
	return b.String()
}

// analyzeRetries walks the capture in time order. us is irdma-emu's
// address, pmtu the path MTU (to know how many PSNs a READ takes).
func analyzeRetries(pkts []*wirePacket, us netip.Addr, pmtu int) retryReport {
	rep := retryReport{
		requests: map[string]int{}, retransmitted: map[string]int{}, verdicts: map[string]int{},
		ackLatency: map[string][]time.Duration{}, naks: map[string]int{},
	}
	who := func(a netip.Addr) string {
		if a == us {
			return "irdma-emu"
		}
		return "rxe"
	}
	type fk struct {
		src  netip.Addr
		dqpn uint32
	}
	flows := map[fk]*rcFlow{}
	// byRespQP maps the responses' destination (src of requests, its QP)
	// to the request flow; learnt from the first response whose PSN
	// matches a request of a flow between the same two addresses.
	byRespQP := map[fk]*rcFlow{}
	var now time.Time
	blame := func(format string, args ...any) {
		rep.blame = append(rep.blame, blameEntry{t: now, msg: fmt.Sprintf(format, args...)})
	}
	// In the order irdma-emu saw them.
	pkts = append([]*wirePacket(nil), pkts...)
	sort.SliceStable(pkts, func(i, j int) bool { return pkts[i].at.Before(pkts[j].at) })
	// irdma-emu's duplicate ACKs, and when rxe sent to each of irdma-emu's
	// QPs: a duplicate ACK after which rxe sent nothing more to that QP
	// may have found rxe's QP gone (see trailingDupAcks).
	type dupAck struct {
		t     time.Time
		ourQP uint32
	}
	var dupAcks []dupAck
	rxeTo := map[uint32][]time.Time{}
	for _, p := range pkts {
		now = p.t
		if p.src != us {
			rxeTo[p.DQPN] = append(rxeTo[p.DQPN], p.t)
		}
		if p.src != us && !p.at.Equal(p.t) {
			if d := p.at.Sub(p.t); d > rep.maxRxDelay {
				rep.maxRxDelay = d
			}
		}
		op := p.op()
		if op.Transport() != wire.TransportRC {
			continue
		}
		psn := wire.PSN(p.PSN)
		switch {
		case op.IsRequest():
			k := fk{p.src, p.DQPN}
			f := flows[k]
			if f == nil {
				f = &rcFlow{src: p.src, dst: p.dst, dqpn: p.DQPN, retxNext: wire.PSN(0x1000000), sentAt: map[wire.PSN]time.Time{}, waiting: map[wire.PSN]time.Time{}}
				flows[k] = f
			}
			sender := who(p.src)
			rep.requests[sender]++
			span := uint32(1)
			if op == wire.RCRDMAReadRequest && p.DMALen != nil && *p.DMALen > uint32(pmtu) {
				span = (*p.DMALen + uint32(pmtu) - 1) / uint32(pmtu)
			}
			if f.started && (psn.Diff(f.next) > 8192 || psn.Diff(f.next) < -8192) {
				// Far from where the flow was: a new connection that
				// reuses a QP number (irdma-emu's are reused).
				*f = rcFlow{src: p.src, dst: p.dst, dqpn: p.DQPN, retxNext: wire.PSN(0x1000000), sentAt: map[wire.PSN]time.Time{}, waiting: map[wire.PSN]time.Time{}}
				for k, v := range byRespQP {
					if v == f {
						delete(byRespQP, k)
					}
				}
			}
			if !f.started || psn == f.next {
				// A new request; the sender's timer starts with it if
				// nothing was outstanding.
				if !f.outstanding() {
					f.armedAt = p.at
				}
				f.started = true
				f.next = psn.Add(span)
				f.sentAt[psn] = p.at
				f.retxNext = wire.PSN(0x1000000) // no burst
				if p.AckReq || op == wire.RCRDMAReadRequest || op.IsAtomic() {
					f.waiting[psn.Add(span-1)] = p.at
				}
				continue
			}
			if psn.Diff(f.next) > 0 {
				if sender == "irdma-emu" {
					blame("irdma-emu sent PSN %#x to QP %#x out of order (expected %#x), frame %d", p.PSN, p.DQPN, uint32(f.next), p.Frame)
				}
				rep.verdicts[sender+": out of order"]++
				f.next = psn.Add(span)
				continue
			}
			// Behind the next new PSN: a retransmission. The first packet
			// of a go-back-N burst is judged; the rest of the burst shares
			// its verdict (unless already acknowledged).
			rep.retransmitted[sender]++
			verdict := f.retxVerdict
			if psn != f.retxNext {
				switch {
				case !f.nakAt.IsZero() && !f.nakAt.Before(f.armedAt):
					verdict = "justified (NAK)"
				case float64(p.at.Sub(f.armedAt)) >= timerMargin*float64(transportTimeout):
					verdict = "justified (timeout without progress)"
				default:
					verdict = "premature"
				}
				if sender == "rxe" {
					// Did irdma-emu leave an AckReq'd request unanswered
					// for a whole timeout?
					for w, t0 := range f.waiting {
						if psn.LessThanEq(w) && float64(p.at.Sub(t0)) >= timerMargin*float64(transportTimeout) {
							blame("rxe retransmitted PSN %#x to QP %#x: irdma-emu left PSN %#x unanswered for %v, frame %d",
								p.PSN, p.DQPN, uint32(w), p.at.Sub(t0).Round(time.Microsecond), p.Frame)
							break
						}
					}
				}
				f.armedAt = p.at
				f.retxVerdict = verdict
			}
			if f.anyAck && psn.LessThanEq(f.acked) && p.at.Sub(f.ackedAt) > ackSlack {
				verdict = "needless (already acknowledged)"
			}
			rep.verdicts[sender+": "+verdict]++
			if sender == "irdma-emu" && !strings.HasPrefix(verdict, "justified") {
				blame("irdma-emu retransmitted PSN %#x to QP %#x %s: %v after its timer reference, frame %d", p.PSN, p.DQPN, verdict, p.at.Sub(f.armedAt).Round(time.Microsecond), p.Frame)
			}
			f.sentAt[psn] = p.at
			f.retxNext = psn.Add(span)
			if f.next.Diff(psn.Add(span)) < 0 {
				f.next = psn.Add(span)
			}
		case op.IsResponse():
			// A response goes to the requester's QP; find its flow.
			f := byRespQP[fk{p.dst, p.DQPN}]
			if f == nil {
				for _, c := range flows {
					if c.src == p.dst && c.dst == p.src && c.rqpn == 0 && c.started {
						if _, ok := c.sentAt[psn]; ok || c.waiting[psn] != (time.Time{}) || psn.InRange(c.next.Sub(4096), c.next) {
							f = c
							break
						}
					}
				}
				if f == nil {
					continue
				}
				f.rqpn = p.DQPN
				byRespQP[fk{p.dst, p.DQPN}] = f
			}
			responder := who(p.src)
			switch {
			case p.AETH == "nak":
				rep.naks[responder+": "+p.NAK]++
				f.nakAt = p.at
				if responder == "irdma-emu" {
					blame("irdma-emu sent NAK %s PSN %#x to QP %#x, frame %d", p.NAK, p.PSN, p.DQPN, p.Frame)
				}
				// A sequence NAK acknowledges what precedes it.
				psn = psn.Sub(1)
			case p.AETH == "rnr_nak":
				rep.naks[responder+": rnr"]++
				f.nakAt = p.at
				if responder == "irdma-emu" {
					blame("irdma-emu sent an RNR NAK PSN %#x to QP %#x, frame %d", p.PSN, p.DQPN, p.Frame)
				}
				continue
			}
			if responder == "irdma-emu" && op == wire.RCAcknowledge && p.AETH == "ack" && f.anyAck && psn.LessThanEq(f.acked) {
				// A duplicate ACK, for a request rxe sent again.
				dupAcks = append(dupAcks, dupAck{p.t, f.dqpn})
			}
			if !f.anyAck || f.acked.LessThan(psn) {
				f.acked, f.anyAck, f.ackedAt, f.armedAt = psn, true, p.at, p.at
			}
			for w, t0 := range f.waiting {
				if w.LessThanEq(psn) {
					lat := p.at.Sub(t0)
					rep.ackLatency[responder] = append(rep.ackLatency[responder], lat)
					if responder == "irdma-emu" && float64(lat) >= timerMargin*float64(transportTimeout) {
						blame("irdma-emu answered PSN %#x of QP %#x after %v (frame %d)", uint32(w), f.dqpn, lat.Round(time.Microsecond), p.Frame)
					}
					delete(f.waiting, w)
				}
			}
		}
	}
	for _, ts := range rxeTo {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	for _, a := range dupAcks {
		ts := rxeTo[a.ourQP]
		i := sort.Search(len(ts), func(i int) bool { return ts[i].After(a.t) })
		if i == len(ts) || ts[i].Sub(a.t) > time.Second {
			rep.trailingDupAcks++
		}
	}
	return rep
}

// parseDecode reads `irdma-emu decode --json` output: the packets and the
// summary.
func parseDecode(out []byte) ([]*wirePacket, decodeSummary, error) {
	var pkts []*wirePacket
	var sum decodeSummary
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"summary"`)) {
			var s struct {
				Summary decodeSummary `json:"summary"`
			}
			if err := json.Unmarshal(line, &s); err != nil {
				return nil, sum, fmt.Errorf("decode summary %s: %w", line, err)
			}
			sum = s.Summary
			continue
		}
		p := &wirePacket{}
		if err := json.Unmarshal(line, p); err != nil {
			return nil, sum, fmt.Errorf("decode line %s: %w", line, err)
		}
		var err error
		if p.t, err = time.Parse(time.RFC3339Nano, p.Time); err != nil {
			return nil, sum, fmt.Errorf("decode line %s: time: %w", line, err)
		}
		p.src, p.dst = addrOf(p.Src), addrOf(p.Dst)
		p.at = p.t
		pkts = append(pkts, p)
	}
	return pkts, sum, sc.Err()
}

// annotateEmuTimes sets the time irdma-emu sent or received each packet
// of the tap's capture from irdma-emu's own capture (--pcap): the n-th
// packet with the same addresses, QP, PSN and opcode in both.
func annotateEmuTimes(tap, emu []*wirePacket) (matched int) {
	type key struct {
		src, dst  netip.Addr
		dqpn, psn uint32
		op        uint8
	}
	seen := map[key][]time.Time{}
	for _, p := range emu {
		k := key{p.src, p.dst, p.DQPN, p.PSN, p.Opcode}
		seen[k] = append(seen[k], p.t)
	}
	used := map[key]int{}
	for _, p := range tap {
		k := key{p.src, p.dst, p.DQPN, p.PSN, p.Opcode}
		if n := used[k]; n < len(seen[k]) {
			p.at = seen[k][n]
			used[k] = n + 1
			matched++
		}
	}
	return matched
}

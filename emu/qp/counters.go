package qp

import (
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The data plane's statistics: NAK kinds, drop reasons, and the counters
// every event is added to twice, for the QP and for its port
// (Transport.count).

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

// Count names one of the data plane's event counters (Counters.Add).
type Count uint8

// The counters; CounterSnapshot has a field of the same name for each.
const (
	CntTxPackets        Count = iota // packets put on the link
	CntTxBytes                       // their UDP payload bytes
	CntRxPackets                     // packets accepted by the gate and the QP
	CntRxBytes                       // their UDP payload bytes
	CntRetransmits                   // packets sent again (go-back-N)
	CntTimeouts                      // retransmission timer expiries
	CntRNRWaits                      // RNR timer expiries
	CntOutOfSequence                 // requests ahead of ePSN
	CntDuplicates                    // requests behind ePSN
	CntReadReplays                   // duplicate READs executed again
	CntAtomicDuplicates              // duplicate atomic requests (behind ePSN), replayed or not
	CntAtomicReplays                 // duplicate atomics answered from the cache
	CntAcksSent                      // ACK packets (not NAKs, not READ responses)
	CntAcksCoalesced                 // AckReqs answered by a later ACK
	CntSQWQEs                        // SQ WQEs consumed
	CntRQWQEs                        // RQ WQEs consumed
	CntCQEs                          // CQEs written
	CntFatalErrors                   // QPs moved to ERROR by the data plane
	CntTxStalls                      // no packet buffer: transmission deferred
	CntICRCVerified                  // ICRC checked by us and good
	CntICRCLinkGood                  // ICRC checked good by the link
	CntICRCUnverifiable              // ICRC the link could not check (accepted)
	CntICRCFailed                    // ICRC mismatch (dropped, also in Drops)
	CntICRCInDevice                  // frames the device delivered to itself: no ICRC computed or checked
	CntWindowCuts                    // requester windows halved by a loss (window.go)
	NumCounts
)

// Counters are the data plane's statistics, per QP (Transport.C) and per
// port (summed over the engine's workers); the transport adds every event
// to both (Transport.count). Every counter is an atomic written by one
// worker and read by anyone.
type Counters struct {
	n        [NumCounts]atomic.Uint64
	NAKsSent [NumNAKKinds]atomic.Uint64
	NAKsRcvd [NumNAKKinds]atomic.Uint64
	Drops    [NumDropReasons]atomic.Uint64
}

// Add adds n to counter k.
func (c *Counters) Add(k Count, n uint64) { c.n[k].Add(n) }

// Get returns counter k.
func (c *Counters) Get(k Count) uint64 { return c.n[k].Load() }

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
	ICRCInDevice                           uint64
	WindowCuts                             uint64
	Drops                                  [NumDropReasons]uint64
}

// Snapshot copies the counters.
func (c *Counters) Snapshot() CounterSnapshot {
	s := CounterSnapshot{
		TxPackets:        c.Get(CntTxPackets),
		TxBytes:          c.Get(CntTxBytes),
		RxPackets:        c.Get(CntRxPackets),
		RxBytes:          c.Get(CntRxBytes),
		Retransmits:      c.Get(CntRetransmits),
		Timeouts:         c.Get(CntTimeouts),
		RNRWaits:         c.Get(CntRNRWaits),
		OutOfSequence:    c.Get(CntOutOfSequence),
		Duplicates:       c.Get(CntDuplicates),
		ReadReplays:      c.Get(CntReadReplays),
		AtomicDuplicates: c.Get(CntAtomicDuplicates),
		AtomicReplays:    c.Get(CntAtomicReplays),
		AcksSent:         c.Get(CntAcksSent),
		AcksCoalesced:    c.Get(CntAcksCoalesced),
		SQWQEs:           c.Get(CntSQWQEs),
		RQWQEs:           c.Get(CntRQWQEs),
		CQEs:             c.Get(CntCQEs),
		FatalErrors:      c.Get(CntFatalErrors),
		TxStalls:         c.Get(CntTxStalls),
		ICRCVerified:     c.Get(CntICRCVerified),
		ICRCLinkGood:     c.Get(CntICRCLinkGood),
		ICRCUnverifiable: c.Get(CntICRCUnverifiable),
		ICRCFailed:       c.Get(CntICRCFailed),
		ICRCInDevice:     c.Get(CntICRCInDevice),
		WindowCuts:       c.Get(CntWindowCuts),
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
	s.ICRCInDevice += o.ICRCInDevice
	s.WindowCuts += o.WindowCuts
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

// count adds n to counter k of the QP and of the port it runs on.
func (t *Transport) count(ctx *Ctx, k Count, n uint64) {
	t.C.Add(k, n)
	ctx.Port.Add(k, n)
}

// nakSent counts a NAK of kind k sent, for the QP and the port.
func (t *Transport) nakSent(ctx *Ctx, k NAKKind) {
	t.C.NAKsSent[k].Add(1)
	ctx.Port.NAKsSent[k].Add(1)
}

// nakRcvd counts a NAK of kind k received, for the QP and the port.
func (t *Transport) nakRcvd(ctx *Ctx, k NAKKind) {
	t.C.NAKsRcvd[k].Add(1)
	ctx.Port.NAKsRcvd[k].Add(1)
}

// drop counts a received packet dropped for reason r, for the QP and the
// port (the caller releases it).
func (t *Transport) drop(ctx *Ctx, r DropReason) {
	t.C.Drops[r].Add(1)
	ctx.Port.Drops[r].Add(1)
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

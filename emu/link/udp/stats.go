package udp

import (
	"fmt"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

// Reason says why the UDP link dropped a frame or a datagram. The first
// link.NumDropReasons values are link.DropReason's, with the same meaning;
// the rest are what only a socket-backed link meets.
type Reason uint8

// Reasons beyond link.DropReason.
const (
	// ReasonMalformed: on send, a frame the UDP socket cannot carry (not
	// IPv4/IPv6 + UDP to 4791, IPv4 options, a fragment, inconsistent
	// lengths); on receive, a datagram shorter than a BTH and an ICRC or
	// one whose control messages are missing.
	ReasonMalformed = Reason(link.NumDropReasons) + iota
	// ReasonNoSocket: the frame's IP source is none of the link's
	// addresses, so no socket can send it with that source.
	ReasonNoSocket
	// ReasonFiltered: sendmmsg failed with EPERM, which is what an
	// nftables/iptables drop in an output chain returns to the sender
	// (measured: docs/interop.md "Measured: the guest's network and what
	// rxe accepts"). Loss, not a fault of the link.
	ReasonFiltered
	// ReasonSendError: sendmmsg failed with another error (no route,
	// address unavailable, ...). Counted as loss.
	ReasonSendError
	// ReasonTruncated: a datagram longer than a packet buffer holds
	// (MSG_TRUNC): no RoCEv2 packet is that long.
	ReasonTruncated
	// ReasonUnreported: sendmmsg stopped at this datagram, which means it
	// failed, but Linux reports the error of a datagram only when it is
	// the first of the call (net/socket.c __sys_sendmmsg: "We only return
	// an error if no datagrams were able to be sent"). Lost, reason
	// unknown; behind an nftables output drop this is what most EPERMs
	// look like.
	ReasonUnreported
	// ReasonOverflow: datagrams the kernel dropped because the socket's
	// receive buffer was full (the device did not read fast enough),
	// learnt from the SO_RXQ_OVFL counter that comes with each read.
	ReasonOverflow

	numReasons
)

// NumReasons is the number of Reasons, for arrays indexed by them.
const NumReasons = int(numReasons)

var reasonText = [numReasons]string{
	ReasonMalformed:  "malformed",
	ReasonNoSocket:   "no socket for source",
	ReasonFiltered:   "filtered (EPERM)",
	ReasonSendError:  "send error",
	ReasonTruncated:  "truncated",
	ReasonUnreported: "send error (unreported)",
	ReasonOverflow:   "socket buffer overflow",
}

// String returns a short description.
func (r Reason) String() string {
	if int(r) < link.NumDropReasons {
		return link.DropReason(r).String()
	}
	if r < numReasons {
		return reasonText[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Counters are everything a UDP link counts. Stats (the link.Link view)
// is derived from them.
type Counters struct {
	// TxFrames and TxBytes count the frames past the link-down, size and
	// format checks, including those the fault injector then lost or a
	// send error dropped (as link.Stats does); bytes are whole frames.
	TxFrames, TxBytes uint64
	// RxFrames and RxBytes count the frames handed to the Receiver,
	// bytes of the whole (rebuilt) frame.
	RxFrames, RxBytes uint64
	// TxDrops counts, by reason, frames Send took and did not put on the
	// wire; RxDrops datagrams read and not handed to the Receiver.
	TxDrops, RxDrops [NumReasons]uint64
	// ICRCGood, ICRCUnverifiable and ICRCBad count the ICRC statuses of
	// the frames handed to the Receiver (link.ICRCStatus); the link
	// passes bad ones on: the device drops and counts them as rxe does.
	ICRCGood, ICRCUnverifiable, ICRCBad uint64
	// Resealed counts frames whose ICRC the UDP sender recomputed because
	// the kernel writes a covered header field differently from the
	// frame: the UDP source port (always the socket's), a non-zero IPv4
	// ID (the kernel sends 0), missing DF.
	Resealed uint64
	// SendCalls and RecvCalls count sendmmsg and recvmmsg calls that
	// moved at least one message; TxFrames/SendCalls is the batching.
	SendCalls, RecvCalls uint64
	// Partial counts sendmmsg calls that sent fewer messages than given.
	// Each stopped at a datagram that failed without a reported error
	// (ReasonUnreported); the link counts that one lost and goes on with
	// the next, rather than sending it again: a filter that drops at
	// random would otherwise get a second draw, and a 5% drop rule would
	// cost far less than 5% (measured: TestNftablesLoss).
	Partial uint64
	// GSOSends counts UDP segmentation offload sends (gso.go) and
	// GSOFrames the frames they carried; TxFrames/SendCalls counts a GSO
	// send's frames one by one. GSORefused counts sockets that went back
	// to one datagram per frame because the kernel refused a GSO send.
	GSOSends, GSOFrames, GSORefused uint64
	// GROReceives counts datagrams that arrived as one receive carrying
	// several frames (a GSO send not cut up on the way, or coalesced by
	// GRO) and GROFrames the frames the link cut them into.
	GROReceives, GROFrames uint64
	// Faults counts the faults injected into sent frames.
	Faults link.FaultStats
}

// TxDropped and RxDropped return the sums of TxDrops and RxDrops.
func (c Counters) TxDropped() uint64 { return sum(c.TxDrops[:]) }

// RxDropped returns the sum of RxDrops.
func (c Counters) RxDropped() uint64 { return sum(c.RxDrops[:]) }

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}

// Stats returns the link.Link view: link.DropReason drops of both
// directions in one array (a link.Stats counts receive-side drops only
// for DropNoReceiver and DropNoBuffer, but a UDP link also drops received
// datagrams while down or closing); the reasons link.DropReason has no
// name for are left out and are in Counters.
func (c Counters) Stats() link.Stats {
	s := link.Stats{
		TxFrames: c.TxFrames, TxBytes: c.TxBytes,
		RxFrames: c.RxFrames, RxBytes: c.RxBytes,
		Faults: c.Faults,
	}
	for i := range s.Drops {
		s.Drops[i] = c.TxDrops[i] + c.RxDrops[i]
	}
	return s
}

// counters are the live Counters.
type counters struct {
	txFrames, txBytes atomic.Uint64
	rxFrames, rxBytes atomic.Uint64
	txDrops, rxDrops  [NumReasons]atomic.Uint64
	icrc              [4]atomic.Uint64 // by link.ICRCStatus
	resealed          atomic.Uint64
	sendCalls         atomic.Uint64
	recvCalls         atomic.Uint64
	partial           atomic.Uint64
	gsoSends          atomic.Uint64
	gsoFrames         atomic.Uint64
	gsoRefused        atomic.Uint64
	groReceives       atomic.Uint64
	groFrames         atomic.Uint64
}

func (c *counters) snapshot() Counters {
	s := Counters{
		TxFrames: c.txFrames.Load(), TxBytes: c.txBytes.Load(),
		RxFrames: c.rxFrames.Load(), RxBytes: c.rxBytes.Load(),
		ICRCGood:         c.icrc[link.ICRCGood].Load(),
		ICRCUnverifiable: c.icrc[link.ICRCUnverifiable].Load(),
		ICRCBad:          c.icrc[link.ICRCBad].Load(),
		Resealed:         c.resealed.Load(),
		SendCalls:        c.sendCalls.Load(),
		RecvCalls:        c.recvCalls.Load(),
		Partial:          c.partial.Load(),
		GSOSends:         c.gsoSends.Load(),
		GSOFrames:        c.gsoFrames.Load(),
		GSORefused:       c.gsoRefused.Load(),
		GROReceives:      c.groReceives.Load(),
		GROFrames:        c.groFrames.Load(),
	}
	for i := range s.TxDrops {
		s.TxDrops[i] = c.txDrops[i].Load()
		s.RxDrops[i] = c.rxDrops[i].Load()
	}
	return s
}

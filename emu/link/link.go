package link

import (
	"fmt"
	"net/netip"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Frame and buffer sizes.
const (
	// MaxFrameSize is the largest frame a link carries: Ethernet, an
	// 802.1Q tag, an IPv4 header with the longest options (longer than
	// the 40-byte IPv6 header), UDP and the largest RoCEv2 packet
	// (BTH+RETH+ImmDt, 4096 bytes of payload, ICRC). There is no FCS:
	// like a capture or a socket, a link carries frames without it.
	MaxFrameSize = wire.EthernetSize + wire.VLANSize + wire.IPv4MaximumHeaderSize + wire.UDPSize + wire.MaxPacketSize

	// BufferSize is the size of every pooled packet buffer: MaxFrameSize
	// rounded up to whole 64-byte cache lines, so that one buffer holds
	// any frame and, on the UDP link, a maximum-size UDP payload behind
	// the Ethernet/IP/UDP headers the link synthesises in front of it.
	BufferSize = (MaxFrameSize + 63) &^ 63

	// MaxMTU is the largest link MTU (IP packet size) a buffer can carry
	// with an 802.1Q-tagged Ethernet header in front.
	MaxMTU = BufferSize - wire.EthernetSize - wire.VLANSize

	// MinMTU is the smallest link MTU: the IPv6 minimum link MTU (RFC 8200
	// §5), which also carries a 1024-byte RoCE path MTU.
	MinMTU = 1280

	// DefaultMTU carries the 4096-byte RoCE path MTU with the longest
	// transport header chain over IPv6: 40 (IPv6) + 8 (UDP) + 12 (BTH) +
	// 16 (RETH) + 4 (ImmDt) + 4096 + 4 (ICRC) = 4180 ≤ 4200.
	DefaultMTU = 4200

	// DefaultBatchSize is how many frames a link hands to its Receiver in
	// one call, at most. Like wireguard-go's IdealBatchSize it amortises
	// the per-call cost without holding frames back: a batch is whatever
	// is due, up to this many.
	DefaultBatchSize = 64
)

// State is the state of a link's carrier, which the device turns into port
// events (IB_EVENT_PORT_ACTIVE / IB_EVENT_PORT_ERR, the port state in
// ibv_query_port).
type State uint8

// Link states.
const (
	StateDown State = iota
	StateUp
)

// String returns "down" or "up".
func (s State) String() string {
	switch s {
	case StateDown:
		return "down"
	case StateUp:
		return "up"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// ICRCStatus is what the link knows about a received frame's ICRC. A link
// that carries whole frames leaves the check to the receiver; the UDP link
// reconstructs the IP and UDP headers the ICRC covers and can only check it
// where it knows every covered field (see the package documentation).
type ICRCStatus uint8

// ICRC statuses.
const (
	// ICRCUnchecked: the link did not look; the frame is as it was sent
	// (faults aside) and the receiver verifies the ICRC itself.
	ICRCUnchecked ICRCStatus = iota
	// ICRCGood: the link verified the ICRC.
	ICRCGood
	// ICRCBad: the link verified the ICRC and it does not match. The
	// receiver drops the frame and counts it, as rxe_icrc_check does.
	ICRCBad
	// ICRCUnverifiable: the link could not rebuild the covered bytes (an
	// IPv4 packet received on a UDP socket whose IP ID is not known to be
	// 0). The receiver accepts the frame and counts it.
	ICRCUnverifiable
	// ICRCInDevice: no link carried the frame — the device delivered it
	// to itself (hardware loopback) — so it was built without an ICRC,
	// unless a capture wanted one (Looper), and none is checked.
	ICRCInDevice
)

var icrcStatusText = [...]string{
	ICRCUnchecked:    "unchecked",
	ICRCGood:         "good",
	ICRCBad:          "bad",
	ICRCUnverifiable: "unverifiable",
	ICRCInDevice:     "in-device",
}

// String returns the status's name.
func (s ICRCStatus) String() string {
	if int(s) < len(icrcStatusText) {
		return icrcStatusText[s]
	}
	return fmt.Sprintf("icrc(%d)", uint8(s))
}

// DropReason says why a link dropped a frame. Drops on the data path are
// counted by reason, never returned as errors.
type DropReason uint8

// Drop reasons.
const (
	// DropLinkDown: sent while the link was down, or in flight when it
	// went down.
	DropLinkDown DropReason = iota
	// DropQueueFull: the link's queue of frames in flight was full (a
	// full transmit ring).
	DropQueueFull
	// DropTooBig: the frame's IP packet is longer than the link MTU.
	DropTooBig
	// DropRunt: the frame is shorter than an Ethernet header.
	DropRunt
	// DropNoBuffer: the link needed a buffer and the pool was exhausted
	// (a duplicate to inject; on the UDP link, a receive buffer: a NIC
	// with no free receive descriptor).
	DropNoBuffer
	// DropNoReceiver: the frame arrived while no Receiver was attached.
	DropNoReceiver
	// DropClosed: in flight when the link was closed.
	DropClosed

	numDropReasons
)

// NumDropReasons is the number of DropReasons, for arrays indexed by them.
const NumDropReasons = int(numDropReasons)

var dropReasonText = [numDropReasons]string{
	DropLinkDown:   "link down",
	DropQueueFull:  "queue full",
	DropTooBig:     "too big",
	DropRunt:       "runt",
	DropNoBuffer:   "no buffer",
	DropNoReceiver: "no receiver",
	DropClosed:     "closed",
}

// String returns a short description of the reason.
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropReasonText[r]
	}
	return fmt.Sprintf("drop(%d)", uint8(r))
}

// Stats are the counters of one end of a link.
type Stats struct {
	// TxFrames and TxBytes count the frames this end put on the wire:
	// accepted by Send and past the MTU and queue checks, including those
	// the fault injector then lost.
	TxFrames, TxBytes uint64
	// RxFrames and RxBytes count the frames handed to this end's
	// Receiver.
	RxFrames, RxBytes uint64
	// Drops counts, by reason, the frames this end sent that the link
	// dropped, except DropNoReceiver and (on the UDP link) DropNoBuffer,
	// which count frames arriving at this end.
	Drops [NumDropReasons]uint64
	// Faults counts the faults injected into the frames this end sent.
	// Frames lost by injection are counted here (Faults.Lost), not in
	// Drops.
	Faults FaultStats
}

// Dropped returns the sum of Drops.
func (s Stats) Dropped() uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d
	}
	return n
}

// Receiver is the device side of a link: the port that frames and state
// changes are pushed to.
type Receiver interface {
	// Receive is handed a batch of received frames, in arrival order.
	// The receiver owns every packet in pkts from the call on and must
	// Release each exactly once (or pass it on to whoever will); the
	// slice itself belongs to the link and must not be kept after
	// Receive returns. Receive should not block: the device dispatches
	// the frames onto its workers' bounded queues and drops (counting)
	// what does not fit.
	//
	// A link never calls Receive for one receiver from two goroutines at
	// once. Receive may call Send on any link, but must not call Close on
	// the link that delivers to it: Close waits for a delivery in
	// progress.
	Receive(pkts []*Packet)
	// LinkStateChanged reports that the link went up or down. Frames in
	// flight when it went down are dropped. It must not change the
	// link's state itself (Pair.SetUp).
	LinkStateChanged(s State)
}

// Link is one port's attachment to the network: it sends and receives
// complete RoCEv2 Ethernet frames (see the package documentation). All
// methods are safe for concurrent use.
type Link interface {
	// Send puts frames on the wire. It takes ownership of every packet
	// in pkts whatever happens: the link returns each to its pool once it
	// has been delivered, written to a socket or dropped. The caller may
	// reuse the slice as soon as Send returns, but not the packets. Frames
	// the link cannot carry (link down, queue full, too big) are dropped
	// and counted in Stats. Send returns net.ErrClosed after Close, and
	// no other error for a data-path reason.
	Send(pkts []*Packet) error
	// Attach sets the receiver frames and state changes are pushed to;
	// nil detaches it (frames are then dropped and counted). A batch
	// being delivered while Attach runs may still reach the previous
	// receiver.
	Attach(r Receiver)
	// State returns the link's state.
	State() State
	// MTU returns the largest IP packet the link carries (the netdev MTU).
	MTU() int
	// MAC returns the port's Ethernet address.
	MAC() wire.MAC
	// BatchSize returns the largest batch the link hands to Receive; a
	// sender gains nothing by batching more per Send.
	BatchSize() int
	// Pool returns the pool the link takes its own buffers from. Senders
	// may take theirs from it or from any other pool.
	Pool() *Pool
	// Stats returns a snapshot of the link's counters.
	Stats() Stats
	// Close stops the link's goroutines and timers, drops and releases the
	// frames in flight, and waits for a delivery in progress to finish.
	// Afterwards Send returns net.ErrClosed and nothing is delivered.
	// Closing twice is harmless.
	Close() error
}

// Looper is an optional interface of a Link. A device that delivers a frame
// to itself instead of sending it (hardware loopback: a frame to one of its
// own addresses, docs/dataplane.md "Loopback") shows it to Looped first,
// just before its own receive path takes it, so that a capture on the link
// records it as it records a sent frame — which the wire never sees. The
// packets stay the caller's: Looped must not keep or release them, and
// must not block for long (it runs on the device's data path).
//
// Capturing reports whether Looped records anything now: the device
// computes the ICRC of a frame it keeps for itself only then, so the
// capture holds the frame a wire would have carried.
type Looper interface {
	Looped(pkts []*Packet)
	Capturing() bool
}

// SourcePorter is an optional interface of a Link that sends every frame
// from source address src with one fixed UDP source port, whatever the
// frame carries (a UDP socket's: udp.Link in udp send mode). The ICRC
// covers the source port, so such a link reseals each frame built with
// another one; a device that builds its frames with the port the link
// reports spares that second ICRC pass. ok false: the link keeps each
// frame's own port.
type SourcePorter interface {
	SourcePort(src netip.Addr) (port uint16, ok bool)
}

// ipLen returns the length of the IP packet inside an Ethernet frame of at
// least wire.EthernetSize bytes, skipping one 802.1Q tag.
func ipLen(frame []byte) int {
	n := len(frame) - wire.EthernetSize
	if wire.Ethernet(frame).EtherType() == wire.EtherTypeVLAN {
		n -= wire.VLANSize
	}
	return n
}

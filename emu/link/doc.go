// Package link is the link a device's port sends and receives RoCEv2 frames
// on: the Link interface, pooled packet buffers, an in-process Pair with an
// injectable clock, serialisation and propagation delay, seeded fault
// injection and a pcap tap, and the fault Injector the daemon's UDP link
// reuses on its send path.
//
// # What travels
//
// A link carries complete Ethernet frames as the device builds them with
// emu/wire: Ethernet, an optional 802.1Q tag, IPv4 or IPv6, UDP to 4791,
// BTH through ICRC, no FCS. Whole frames let an in-process pair be captured
// to pcap and judged by tshark, and give the device one receive path
// (wire.ParseFrame) whatever the link. The UDP link strips a frame to its
// UDP payload on send and, on receive, synthesises the Ethernet, IP and UDP
// headers in front of the payload, in the buffer's headroom (see below).
//
// Each received Packet carries metadata: Time, the arrival time on the
// link's clock, and ICRC, what the link knows about the ICRC (unchecked,
// good, bad, unverifiable), which the receiver acts on and counts.
//
// # Buffers and who owns them
//
// Every frame lives in a Packet from a Pool: a fixed BufferSize buffer
// (MaxFrameSize, about 4.2 KB, rounded to cache lines) plus metadata,
// recycled through a sync.Pool so the steady state allocates nothing. A
// packet has exactly one owner at a time, and only the owner touches it:
//
//   - Pool.Get hands a packet to the caller (nil when the pool's bound is
//     reached: Get never blocks, see Pool).
//   - Send takes every packet of the batch, whatever happens to it. The
//     link releases each when it is done with it: when the far end's
//     receiver takes it (pair), after sendmmsg returns (UDP link), or when
//     it drops it. The caller keeps the batch slice, not the packets.
//   - Receiver.Receive hands every packet of the batch to the receiver,
//     which releases each exactly once, possibly after passing it to a
//     worker (so the device dispatches frames to its QP workers without
//     copying). The batch slice stays the link's.
//   - Release clears the packet's pointers (Data) and metadata before
//     it goes back to the pool; a second Release is counted and ignored.
//
// Nothing on this path copies a frame, except the pair when it injects a
// duplicate.
//
// # Receiving: pushed to the device, in batches
//
// The link pushes received batches into a Receiver the device attaches,
// rather than letting the device pull them (wireguard-go's ReceiveFunc
// shape). Two reasons. First, determinism: with a timing.Manual clock the
// pair delivers inside the clock's timer functions, so when a test's
// Advance returns, every frame due by then has reached the device's
// receive path — a pulled design would leave the frames in a channel for
// some device goroutine to pick up later, and loss or timeout tests would
// have to wait and guess. Second, the device has no receive goroutine of
// its own to spend: its fixed worker set serves QPs, and the receive path
// is a short dispatch (gate, QPN lookup, enqueue to the QP's worker, drop
// and count if that queue is full) that runs fine in the link's goroutine —
// the pair's delivery goroutine or the UDP link's recvmmsg loop. A link
// never calls one receiver from two goroutines at once.
//
// Link state changes (up, down) reach the same Receiver, which turns them
// into port events. Frames are dropped, counted by DropReason in Stats,
// never returned as errors; only a closed link's Send returns an error
// (net.ErrClosed).
//
// # The in-process pair
//
// NewPair joins two Ends in memory. What one sends arrives at the other
// after the serialisation delay at the configured Rate (frames queue
// behind each other on the wire), the propagation Delay and the faults of
// its direction, on the pair's Clock: with timing.Manual nothing moves
// until the test advances it, and a frame arrives exactly when the clock
// passes its due time (Packet.Time is that time); with the wall clock a
// goroutine per direction delivers promptly. Frames in flight are bounded
// (QueueLen). Faults are seeded and reproducible (Faults, ParseFaults,
// Injector): loss, duplication, corruption (inside the RoCEv2 packet so
// that the ICRC check fails, or anywhere), reordering by a number of
// frames or by a delay, and link down/up at run time (Pair.SetUp).
//
// # The daemon's UDP link
//
// The UDP link (later, in this package) implements Link over UDP/4791
// sockets with x/net's ReadBatch/WriteBatch (recvmmsg/sendmmsg). Send runs
// the Injector over each frame, finds the UDP payload and the destination
// address in the frame's IP header, and writes one message per frame
// whose buffer is a sub-slice of the packet (no copy), with the IP
// TOS/traffic class passed as a control message; it releases the batch
// when WriteBatch returns. Its receive goroutine keeps a batch of pool
// packets posted and reads each datagram at a fixed headroom offset (room
// for Ethernet, a VLAN tag, IPv6 and UDP), then writes the headers in
// front: its own MAC, the source from the message address, the
// destination and TTL/traffic class from IP_PKTINFO/IP_RECVTTL/IP_RECVTOS
// control messages, and IPv4 ID 0. Because a UDP socket does not reveal
// the IP ID, an IPv4 ICRC can be checked only under the assumption that
// the ID was 0, as our own senders (unconnected sockets with DF set) make
// it: a match is ICRCGood, a mismatch ICRCUnverifiable (it cannot tell a
// bad packet from a non-zero ID); IPv6 has no ID, so there a mismatch is
// ICRCBad. When the pool is empty it reads into a scratch buffer and
// counts DropNoBuffer, as a NIC without receive descriptors does.
package link

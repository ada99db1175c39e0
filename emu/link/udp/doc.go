// Package udp is the daemon's link: a link.Link over real RoCEv2 sockets
// (UDP port 4791), so that an emulated port exchanges frames with other
// emulated ports and with real peers such as Linux rdma_rxe.
//
// docs/transport.md is the user's view: modes, what each can verify, source
// ports, privileges. This comment is the implementer's.
//
// # Sockets
//
// Every port address (the IP half of each GID) gets one ordinary UDP
// socket bound to address:4791. It exists in every mode, because without a
// bound 4791 socket the kernel answers each RoCEv2 datagram with an ICMP
// port unreachable. In udp mode it also sends and receives:
//
//   - Sending. The socket is unconnected and has IP_MTU_DISCOVER =
//     IP_PMTUDISC_DO, so Linux sends with DF and IP ID 0
//     (ip_select_ident_segs), which lets the device compute the ICRC before
//     the kernel builds the IP header (measured: docs/interop.md "Measured:
//     the guest's network and what rxe accepts"). The link sends
//     each frame's UDP payload (BTH..ICRC) to the destination address of its
//     IP header, port 4791, with the frame's TOS/traffic class and
//     TTL/hop limit as per-datagram control messages, from the socket bound
//     to the frame's source address, batched with sendmmsg (issued on the
//     socket's RawConn without its write lock, so the device's senders do
//     not queue for one another), looping on partial writes. The UDP
//     source port is the socket's, 4791, for every QP of the port: rxe
//     does not check source ports (docs/roce.md "UDP ports and checksum").
//     The ICRC covers the source port, so a frame built with another port
//     (a per-QP one) is resealed: its ICRC is recomputed for the header
//     the kernel will write (Counters.Resealed; Link.SourcePort lets the
//     device avoid it).
//   - Sending equal frames. Runs of them to one destination go out as one
//     UDP segmentation offload send, sealed for the IDs the kernel will
//     give the datagrams it cuts (gso.go).
//   - Receiving. recvmmsg into pool packets at a fixed headroom, the rest
//     of a datagram carrying many frames (UDP_GRO) in an overflow area
//     of the slot, cut into frames by gro.go, with
//     IP_PKTINFO/IPV6_RECVPKTINFO, IP_RECVTTL/IPV6_RECVHOPLIMIT and
//     IP_RECVTOS/IPV6_RECVTCLASS, and UDP_NO_CHECK6_RX on IPv6 sockets (rxe
//     sends IPv6 with UDP checksum 0). The link writes Ethernet, IP and UDP
//     headers in front of the payload, so the device always parses a whole
//     frame (wire.ParseFrame). ICRC status: IPv4 is checked assuming IP ID 0
//     and DF (our own senders): a match is link.ICRCGood, a mismatch
//     link.ICRCUnverifiable, since a socket cannot reveal the ID and rxe
//     uses non-zero ones; IPv6 has no ID, so it is good or link.ICRCBad.
//
// Packet mode (CAP_NET_RAW) uses AF_PACKET sockets instead. Sending writes
// the device's frames unchanged on the port's interface, so per-QP source
// ports, exact IP IDs and MACs survive; the destination MAC must then be
// right (the daemon resolves neighbours). Receiving reads every IP packet
// for the port's addresses whatever interface it arrives on (a SOCK_RAW
// socket on all interfaces, a classic BPF filter for UDP/4791 to our
// addresses, outgoing copies ignored: on loopback every frame is seen
// leaving and arriving), so every ICRC is checked; the UDP socket's data is
// then dropped by a socket filter before it is queued.
//
// # Buffers and goroutines
//
// One goroutine per receiving socket keeps BatchSize packets of the Pool
// posted and delivers through one mutex, so the Receiver is never entered
// twice at once. Send runs in the caller's goroutine with a pooled context
// (messages, control-message buffers, addresses), releases every packet
// when sendmmsg returns, and allocates nothing in the steady state. Drops
// are counted by Reason, never returned; Send returns only net.ErrClosed.
//
// # Faults
//
// The link.Injector runs on the send path (loss, duplication, corruption,
// reordering by frames or by delay); frames held for reordering wait in a
// small queue with a timer on the link's clock (hold.go).
package udp

// Package wire is the RoCEv2 wire format: the InfiniBand transport headers
// (BTH and the extension headers), the opcode table, PSN arithmetic, the
// invariant CRC, and the Ethernet/IP/UDP framing below them.
//
// It imports nothing of the project and allocates nothing on its fast paths,
// so both the device model's requester/responder and the tools can use it.
//
// # Shape
//
// Following gVisor's tcpip/header package, every header is a named byte-slice
// view (type BTH []byte, type RETH []byte, ...) with named offset constants,
// XSize constants, getter/setter pairs, Encode(*XFields) and Fields(). The
// accessors do not check bounds: a view must come from the validation gate
// (Parse, ParseFrame, ParseIP) or from a builder (EncodePacket, EncodeFrame),
// which check every length against the named sizes before slicing.
//
//	Parse(udpPayload, &pkt)   BTH..ICRC: lengths, TVer, opcode, pad
//	ParseFrame(frame, &f)     Ethernet [802.1Q] → IPv4/IPv6 → UDP/4791 → Parse
//	f.VerifyICRC()            ICRC over the masked IP/UDP/BTH and the rest
//	EncodeFrame / BuildFrame  the reverse, ICRC included
//
// Errors from the gate are *ParseError values wrapping a Reason; test them
// with errors.Is(err, wire.ErrTruncated) and so on, or count drops by
// ReasonOf(err). The success paths (parse + verify, build + ICRC) allocate
// nothing; a rejected packet costs one small *ParseError, and a bad ICRC
// (the bare Reason ErrICRCMismatch) nothing.
//
// PSN arithmetic (PSN.Add, Diff, LessThan, InWindow) lives here so that no
// other package writes 24-bit wrap-around by hand. The opcode table
// (Opcode.Headers, Position, PayloadRule, the Has*/Is* predicates, String
// with Wireshark's names) is the one place that knows which headers an
// opcode carries.
//
// Subpackage layers adapts all of this to gopacket for tools and tests;
// `irdma-emu decode` prints captures with it.
//
// # References
//
//   - IBTA InfiniBand Architecture Specification Vol 1 (release 1.4), chapter
//     9 "Transport layer": §9.2 BTH, §9.3 extension headers, §9.7.5 ACK/NAK
//     and the AETH, §7.8.1 ICRC.
//   - IBTA Vol 1 Annex A17 "RoCEv2": UDP port 4791 (A17.4.2), the ICRC over
//     the IP/UDP header with variant fields masked (A17.4.1).
//   - Linux drivers/infiniband/sw/rxe (rxe_hdr.h, rxe_opcode.c, rxe_icrc.c,
//     rxe_recv.c), include/rdma/ib_pack.h: the behaviour of the peer we must
//     interoperate with.
//   - Wireshark epan/dissectors/packet-infiniband.c: the opcode names that
//     Opcode.String returns.
package wire

package wire

import "hash/crc32"

// The ICRC covers the IPv4 Identification field (IBTA Annex A17.4.1 masks
// only TOS, TTL and the header checksum), so a packet whose ID the sender's
// kernel chooses needs an ICRC for that ID. Linux's UDP segmentation offload
// numbers the IDs of the segments it cuts from one send (the first
// segment's ID, then one more per segment: af_inet.c inet_gso_segment for
// any GSO type but TCP's fixed-ID one), so the segments of one send carry
// IDs 0, 1, 2, … where the device sealed every one for ID 0.
//
// CRC-32 is linear: for inputs of one length, changing bytes by XOR with d
// changes the CRC by the CRC register that d alone leaves, run through the
// zero bytes that follow it. That change depends only on d, where it sits
// and how many bytes follow, not on the rest of the packet, so an ICRC can
// be moved from one ID to another without reading the payload, and a packet
// corrupted on purpose stays corrupted.

// ICRCIDDeltas moves the ICRCs of IPv4 RoCEv2 packets of one shape (IPv4
// header length and UDP payload length) from one IP ID to another. The
// zero value is empty; Reset sets the shape.
type ICRCIDDeltas struct {
	ipHL, pktLen int
	// basis[b] is the ICRC change of flipping bit b of the ID.
	basis [16]uint32
}

// zeros is read by the zero-extension of the CRC register; RoCEv2 packets
// carried by this emulator are at most this long (link.BufferSize).
var zeros [8192]byte

// Shape reports the shape the deltas are for.
func (d *ICRCIDDeltas) Shape() (ipHL, pktLen int) { return d.ipHL, d.pktLen }

// Reset computes the deltas for packets with an IPv4 header of ipHL bytes
// and a UDP payload (BTH through ICRC) of pktLen bytes. It reports false,
// leaving d empty, for a shape no ICRC is computed for.
func (d *ICRCIDDeltas) Reset(ipHL, pktLen int) bool {
	*d = ICRCIDDeltas{}
	if ipHL < IPv4MinimumSize || ipHL > IPv4MaximumHeaderSize || pktLen < MinPacketSize {
		return false
	}
	// The CRC input after the ID: the rest of the IP header, the UDP
	// header and the packet without its ICRC (ICRCIPv4's order).
	after := ipHL - ipv4IDEnd + UDPSize + pktLen - ICRCSize
	if after > len(zeros) {
		return false
	}
	for b := range 16 {
		bit := uint16(1) << b
		id := [2]byte{byte(bit >> 8), byte(bit)} // big-endian in the header
		// The register that id alone leaves, from state 0, then run
		// through the zero bytes after it. crc32.Update works on the
		// complemented register, and from state s over zero bytes the
		// register map is linear: raw(s) = ^Update(^s, zeros).
		s := crcUpdateRaw(0, id[:])
		d.basis[b] = ^crc32.Update(^s, crc32.IEEETable, zeros[:after])
	}
	d.ipHL, d.pktLen = ipHL, pktLen
	return true
}

// Delta returns what to XOR into the ICRC of a packet of d's shape sealed
// for IP ID from to make it the ICRC for IP ID to.
func (d *ICRCIDDeltas) Delta(from, to uint16) uint32 {
	var x uint32
	for v, b := from^to, 0; v != 0; v, b = v>>1, b+1 {
		if v&1 != 0 {
			x ^= d.basis[b]
		}
	}
	return x
}

// ipv4IDEnd is the offset just past the Identification field.
const ipv4IDEnd = 6

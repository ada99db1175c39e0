package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// The invariant CRC (IBTA Vol 1 §7.8.1; RoCEv2: Annex A17.4.1). It is the
// IEEE 802.3 CRC-32 (hash/crc32's IEEE) over a pseudo-packet:
//
//	8 bytes of 0xFF              stand-in for the LRH RoCEv2 does not have
//	IP header, variant fields 1s IPv4: TOS, TTL, header checksum
//	                             IPv6: traffic class, flow label, hop limit
//	UDP header, checksum 1s
//	BTH, byte 4 as 0xFF          FECN, BECN, Resv6a
//	extension headers, payload, pad
//
// and is sent least significant byte first. rxe does the same
// (rxe_icrc.c rxe_icrc_hdr: it starts crc32_le from 0xDEBB20E3, the CRC
// register after the eight 0xFF bytes, over a masked copy of IP+UDP+BTH).
//
// The fast path copies the masked IP, UDP and BTH headers (at most 80 bytes)
// into a stack array and runs a slicing-by-8 CRC over it here, because
// hash/crc32.Update dispatches through a function variable and so would
// move any array passed to it to the heap; the rest of the packet, which is
// the caller's memory, goes through crc32.Update and its carry-less
// multiply path. Nothing is allocated.

// icrcPrefixState is the (uncomplemented) CRC-32 register after the eight
// 0xFF bytes, starting from the standard initial value 0xFFFFFFFF; rxe's
// seed.
const icrcPrefixState = 0xdebb20e3

// maxICRCHeader is the largest masked header copy: IPv4 with options, UDP,
// BTH.
const maxICRCHeader = IPv4MaximumHeaderSize + UDPSize + BTHSize

var crcSlicing8 = makeSlicing8(crc32.IEEE)

// makeSlicing8 builds the eight tables of the slicing-by-8 CRC for a
// reflected polynomial: table 0 is the byte-at-a-time table, table k
// advances table k−1 by one more zero byte.
func makeSlicing8(poly uint32) *[8][256]uint32 {
	t := new([8][256]uint32)
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ poly
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}

// crcUpdateRaw advances the uncomplemented CRC-32 register state over p.
func crcUpdateRaw(state uint32, p []byte) uint32 {
	t := crcSlicing8
	for len(p) >= 8 {
		state ^= binary.LittleEndian.Uint32(p)
		state = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][state>>24] ^ t[5][state>>16&0xff] ^ t[6][state>>8&0xff] ^ t[7][state&0xff]
		p = p[8:]
	}
	for _, v := range p {
		state = t[0][byte(state)^v] ^ state>>8
	}
	return state
}

// icrcFinish runs the masked header copy hdr and then the rest of the
// packet through the CRC and returns the ICRC value.
func icrcFinish(hdr []byte, rest []byte) uint32 {
	state := crcUpdateRaw(icrcPrefixState, hdr)
	// crc32.Update takes and returns the complemented form.
	return crc32.Update(^state, crc32.IEEETable, rest)
}

// maskUDPAndBTH appends the masked UDP header and BTH to h at n and
// returns the new length.
func maskUDPAndBTH(h *[maxICRCHeader]byte, n int, udp UDP, bth []byte) int {
	copy(h[n:n+UDPSize], udp[:UDPSize])
	h[n+udpChecksum] = 0xff
	h[n+udpChecksum+1] = 0xff
	n += UDPSize
	copy(h[n:n+BTHSize], bth[:BTHSize])
	h[n+bthECN] = 0xff
	return n + BTHSize
}

// ICRCIPv4 returns the ICRC of pkt, a RoCEv2 UDP payload from the BTH
// through the ICRC field (which is not covered), sent with IPv4 header ip
// (its HeaderLength bytes, options included) and UDP header udp. It returns
// 0 if a view is shorter than its header.
func ICRCIPv4(ip IPv4, udp UDP, pkt []byte) uint32 {
	if len(ip) < IPv4MinimumSize || len(udp) < UDPSize || len(pkt) < MinPacketSize {
		return 0
	}
	hl := ip.HeaderLength()
	if hl < IPv4MinimumSize || hl > len(ip) {
		return 0
	}
	var h [maxICRCHeader]byte
	n := copy(h[:hl], ip[:hl])
	h[ipv4TOS] = 0xff
	h[ipv4TTL] = 0xff
	h[ipv4Checksum] = 0xff
	h[ipv4Checksum+1] = 0xff
	n = maskUDPAndBTH(&h, n, udp, pkt)
	return icrcFinish(h[:n], pkt[BTHSize:len(pkt)-ICRCSize])
}

// ICRCIPv6 is ICRCIPv4 for a packet sent with IPv6 header ip.
func ICRCIPv6(ip IPv6, udp UDP, pkt []byte) uint32 {
	if len(ip) < IPv6Size || len(udp) < UDPSize || len(pkt) < MinPacketSize {
		return 0
	}
	var h [maxICRCHeader]byte
	n := copy(h[:IPv6Size], ip[:IPv6Size])
	// Version stays; traffic class and flow label become ones.
	h[0] |= 0x0f
	h[1] = 0xff
	h[2] = 0xff
	h[3] = 0xff
	h[ipv6HopLimit] = 0xff
	n = maskUDPAndBTH(&h, n, udp, pkt)
	return icrcFinish(h[:n], pkt[BTHSize:len(pkt)-ICRCSize])
}

// PutICRC writes v into the last four bytes of pkt, least significant byte
// first.
func PutICRC(pkt []byte, v uint32) {
	if len(pkt) >= ICRCSize {
		binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCSize:], v)
	}
}

package wire

import (
	"hash/crc32"
)

// Exports for the external tests.
var (
	CRCUpdateRaw    = crcUpdateRaw
	ICRCPrefixState = uint32(icrcPrefixState)
)

// ReferenceICRC is the slow, obviously-right ICRC kept for differential
// tests: it builds the whole pseudo-packet of IBTA §7.8.1 / Annex A17.4.1
// in a fresh buffer (8 bytes of 0xFF, the IP header with its variant
// fields set to ones, the UDP header with its checksum set to ones, the
// BTH with byte 4 set to 0xFF, the rest of the packet without the ICRC)
// and runs hash/crc32's ChecksumIEEE over it. ipHdr is the IP header
// (IPv4 with options, or the 40-byte IPv6 header), udpHdr the 8-byte UDP
// header, pkt the UDP payload through the ICRC.
func ReferenceICRC(ipHdr, udpHdr, pkt []byte) uint32 {
	var ps []byte
	for range 8 {
		ps = append(ps, 0xff)
	}
	ip := append([]byte(nil), ipHdr...)
	switch ip[0] >> 4 {
	case 4:
		ip[1] = 0xff                // TOS
		ip[8] = 0xff                // TTL
		ip[10], ip[11] = 0xff, 0xff // header checksum
	case 6:
		ip[0] |= 0x0f                          // traffic class, high nibble
		ip[1], ip[2], ip[3] = 0xff, 0xff, 0xff // traffic class low nibble, flow label
		ip[7] = 0xff                           // hop limit
	}
	ps = append(ps, ip...)
	udp := append([]byte(nil), udpHdr...)
	udp[6], udp[7] = 0xff, 0xff
	ps = append(ps, udp...)
	rest := append([]byte(nil), pkt[:len(pkt)-4]...)
	rest[4] = 0xff // BTH FECN, BECN, Resv6a
	ps = append(ps, rest...)
	return crc32.ChecksumIEEE(ps)
}

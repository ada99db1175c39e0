package wire_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func TestGSOHeaderLen(t *testing.T) {
	v4 := func(ihl, proto byte) []byte {
		b := make([]byte, 64)
		b[0], b[9] = 0x40|ihl, proto
		return b
	}
	v6 := func(nh byte) []byte {
		b := make([]byte, 64)
		b[0], b[6] = 0x60, nh
		return b
	}
	for _, c := range []struct {
		name string
		ip   []byte
		n    int
		hl   int
		ok   bool
	}{
		{"IPv4", v4(5, 17), 1000, 28, true},
		{"IPv4 with options", v4(6, 17), 1000, 32, true},
		{"IHL below 5", v4(4, 17), 1000, 0, false},
		{"TCP", v4(5, 6), 1000, 0, false},
		{"shorter than its headers", v4(5, 17), 27, 0, false},
		{"headers not all there", v4(15, 17)[:40], 1000, 0, false},
		{"IPv6", v6(17), 1000, 48, true},
		{"IPv6 extension header", v6(0), 1000, 0, false},
		{"version 5", []byte{0x50, 0, 0, 0}, 1000, 0, false},
		{"empty", nil, 1000, 0, false},
	} {
		hl, ok := wire.GSOHeaderLen(c.ip, c.n)
		if hl != c.hl || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, hl, ok, c.hl, c.ok)
		}
	}
}

// TestSetGSOSegmentHeaders: the headers the kernel's cut writes for
// datagram 3 of a send with IPv4 ID 0x1234, 100 bytes of payload each (the
// values worked by hand from RFC 791 and RFC 768), and for IPv6.
func TestSetGSOSegmentHeaders(t *testing.T) {
	hdr := make([]byte, wire.IPv4MinimumSize+wire.UDPSize)
	ip := wire.IPv4(hdr[:wire.IPv4MinimumSize])
	ip.Encode(&wire.IPv4Fields{TotalLength: 20 + 8 + 400, ID: 0x1234, DF: true, TTL: 64, Protocol: wire.IPProtocolUDP,
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2")})
	udp := wire.UDP(hdr[wire.IPv4MinimumSize:])
	udp.Encode(&wire.UDPFields{SrcPort: 4791, DstPort: 4791, Length: 8 + 400})
	udp.SetChecksum(0xbeef)
	wire.SetGSOSegmentHeaders(hdr, 100, 3)
	if ip.TotalLength() != 128 || ip.ID() != 0x1237 || !ip.IsChecksumValid() || udp.Length() != 108 || udp.Checksum() != 0 {
		t.Errorf("IPv4: total %d, ID %#x, checksum ok %v, UDP length %d, checksum %#x; want 128, 0x1237, true, 108, 0",
			ip.TotalLength(), ip.ID(), ip.IsChecksumValid(), udp.Length(), udp.Checksum())
	}
	// The header checksum by hand: 4500 0080 1237 4000 4011 0000 c000 0201
	// c000 0202 sums to 0x2_5bcb, folded 0x5bcd, complemented 0xa432.
	if got := binary.BigEndian.Uint16(hdr[10:]); got != 0xa432 {
		t.Errorf("IPv4 header checksum %#04x, want 0xa432", got)
	}
	h6 := make([]byte, wire.IPv6Size+wire.UDPSize)
	h6[0], h6[6] = 0x60, wire.IPProtocolUDP
	wire.SetGSOSegmentHeaders(h6, 100, 3)
	if pl := wire.IPv6(h6).PayloadLength(); pl != 108 || wire.UDP(h6[wire.IPv6Size:]).Length() != 108 {
		t.Errorf("IPv6 payload length %d, UDP length %d; want 108", pl, wire.UDP(h6[wire.IPv6Size:]).Length())
	}
}

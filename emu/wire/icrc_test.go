package wire_test

import (
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

// Golden vectors of docs/roce.md "ICRC" (scapy test/contrib/roce.uts).
var (
	// A ConnectX-4 Lx CNP: IPv4 TOS 0xC2, TTL 64, BECN set, DestQP 0x118.
	goldenCNPFrame = `e41d2dab2bc2 7cfe90643b32 0800 |
		45c2 003c 718c 4000 4011 9161 0a001101 0a001201 |
		0000 12b7 0028 0000 |
		81 00 ffff 40 000118 00 000000 |
		00000000000000000000000000000000 |
		82fd002a`
	// A UC SEND Only: IPv4 TOS 0x01, non-zero UDP checksum, M=1, PadCnt 2.
	goldenUCSendIP = `45010040 04784000 4011b4d5 c0a80007 c0a80007 |
		c00012b7 002caca2 |
		2460ffff 000000d3 00cf1710 |
		4630818be28935d90e9a95505401be885e500000 |
		78f353f3`
)

func TestICRCGoldenVectors(t *testing.T) {
	t.Run("CNP", func(t *testing.T) {
		b := unhex(t, goldenCNPFrame)
		var f wire.Frame
		if err := wire.ParseFrame(b, &f); err != nil {
			t.Fatalf("ParseFrame: %v", err)
		}
		if got := f.Packet.Opcode(); got != wire.CNP {
			t.Errorf("opcode = %v, want CNP", got)
		}
		if !f.Packet.BTH.BECN() || f.Packet.BTH.DestQP() != 0x118 {
			t.Errorf("BECN = %v, DestQP = %#x; want true, 0x118", f.Packet.BTH.BECN(), f.Packet.BTH.DestQP())
		}
		const want = 0x2a00fd82
		if got := f.ComputeICRC(); got != want {
			t.Errorf("ComputeICRC = %#08x, want %#08x", got, want)
		}
		if got := f.Packet.ICRC(); got != want {
			t.Errorf("carried ICRC = %#08x, want %#08x (wire bytes 82 fd 00 2a)", got, want)
		}
		if got := wire.ReferenceICRC(f.IPv4, f.UDP, f.Packet.Raw); got != want {
			t.Errorf("ReferenceICRC = %#08x, want %#08x", got, want)
		}
		if err := f.VerifyICRC(); err != nil {
			t.Errorf("VerifyICRC: %v", err)
		}
		if !f.IPv4.IsChecksumValid() {
			t.Errorf("IPv4 header checksum %#04x invalid", f.IPv4.Checksum())
		}
	})
	t.Run("UC SEND Only", func(t *testing.T) {
		b := unhex(t, goldenUCSendIP)
		var f wire.Frame
		if err := wire.ParseIP(b, &f); err != nil {
			t.Fatalf("ParseIP: %v", err)
		}
		p := &f.Packet
		if p.Opcode() != wire.UCSendOnly || !p.BTH.MigReq() || p.BTH.PadCount() != 2 ||
			p.BTH.DestQP() != 211 || p.BTH.PSN() != 0xcf1710 || len(p.Payload) != 18 {
			t.Errorf("decoded %+v payload %d bytes; want UC Send Only, M, pad 2, QP 211, PSN 0xcf1710, 18 bytes",
				p.BTH.Fields(), len(p.Payload))
		}
		const want = 0xf353f378
		if got := f.ComputeICRC(); got != want {
			t.Errorf("ComputeICRC = %#08x, want %#08x", got, want)
		}
		if got := wire.ReferenceICRC(f.IPv4, f.UDP, f.Packet.Raw); got != want {
			t.Errorf("ReferenceICRC = %#08x, want %#08x", got, want)
		}
		if err := f.VerifyICRC(); err != nil {
			t.Errorf("VerifyICRC: %v", err)
		}
		// The UDP checksum covers the ICRC; it must verify too.
		got := f.UDP.CalculateChecksum(f.IPv4.SourceAddress(), f.IPv4.DestinationAddress(), f.Packet.Raw)
		if got != 0xaca2 {
			t.Errorf("UDP CalculateChecksum = %#04x, want 0xaca2", got)
		}
		// Seal must reproduce both checksums exactly.
		c := append([]byte(nil), b...)
		var g wire.Frame
		if err := wire.ParseIP(c, &g); err != nil {
			t.Fatal(err)
		}
		wire.PutICRC(g.Packet.Raw, 0)
		g.UDP.SetChecksum(1)
		g.Seal()
		if string(c) != string(b) {
			t.Errorf("Seal:\n got %x\nwant %x", c, b)
		}
	})
}

// TestICRCPrefixState pins rxe's seed: the CRC register after eight 0xFF
// bytes.
func TestICRCPrefixState(t *testing.T) {
	ff := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if got := ^crc32.ChecksumIEEE(ff); got != wire.ICRCPrefixState || got != 0xdebb20e3 {
		t.Errorf("state after 8×0xFF = %#08x, want 0xdebb20e3 (const %#08x)", got, wire.ICRCPrefixState)
	}
}

// TestCRCUpdateRaw checks the slicing-by-8 header CRC against hash/crc32
// for every length up to 100 at every alignment.
func TestCRCUpdateRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 128)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for off := 0; off < 8; off++ {
		for n := 0; n <= 100; n++ {
			p := buf[off : off+n]
			want := crc32.ChecksumIEEE(p)
			if got := ^wire.CRCUpdateRaw(0xffffffff, p); got != want {
				t.Fatalf("off %d len %d: got %#08x, want %#08x", off, n, got, want)
			}
		}
	}
}

// randomFrame builds a random valid RoCEv2 frame for the property tests.
func randomFrame(t testing.TB, r *rand.Rand, v6 bool) ([]byte, *wire.Frame) {
	t.Helper()
	ops := []wire.Opcode{
		wire.RCSendOnly, wire.RCRDMAWriteOnlyWithImm, wire.RCAcknowledge,
		wire.RCAtomicAcknowledge, wire.RCCompareSwap, wire.UCSendLastWithImm, wire.UDSendOnlyWithImm,
	}
	op := ops[r.IntN(len(ops))]
	n := 0
	if op.HasPayload() {
		n = 1 + r.IntN(300)
	}
	ff := wire.FrameFields{
		Dst:          wire.MAC{2, 0, 0, 0, 0, 1},
		Src:          wire.MAC{2, 0, 0, 0, 0, 2},
		SrcIP:        netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), 1}),
		DstIP:        netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), 2}),
		TrafficClass: uint8(r.Uint32()),
		HopLimit:     uint8(r.Uint32()),
		IPID:         uint16(r.Uint32()),
		SrcPort:      0xc000 | uint16(r.Uint32()&0x3fff),
		UDPChecksum:  r.IntN(2) == 0,
	}
	if v6 {
		var s, d [16]byte
		for i := range s {
			s[i], d[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		s[0], d[0] = 0xfd, 0xfd
		ff.SrcIP, ff.DstIP = netip.AddrFrom16(s), netip.AddrFrom16(d)
		ff.FlowLabel = r.Uint32() & 0xfffff
	}
	pf := wire.PacketFields{
		BTH: wire.BTHFields{
			Opcode: op, SE: r.IntN(2) == 0, PKey: 0xffff, DestQP: r.Uint32() & wire.QPNMask,
			AckReq: r.IntN(2) == 0, PSN: wire.PSN(r.Uint32()) & wire.PSNMask,
		},
		DETH:         wire.DETHFields{QKey: r.Uint32(), SrcQP: r.Uint32() & wire.QPNMask},
		RETH:         wire.RETHFields{VA: r.Uint64(), RKey: r.Uint32(), DMALen: uint32(n)},
		AtomicETH:    wire.AtomicETHFields{VA: r.Uint64() &^ 7, RKey: r.Uint32(), SwapAdd: r.Uint64(), Compare: r.Uint64()},
		AETH:         wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid), MSN: r.Uint32() & wire.MSNMask},
		AtomicAckETH: wire.AtomicAckETHFields{OrigRemoteData: r.Uint64()},
		ImmDt:        wire.ImmDtFields{Imm: r.Uint32()},
	}
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(r.Uint32())
	}
	b := make([]byte, wire.FrameLen(&ff, op, n))
	if _, err := wire.BuildFrame(b, &ff, &pf, payload); err != nil {
		t.Fatalf("BuildFrame(%v): %v", op, err)
	}
	f := new(wire.Frame)
	if err := wire.ParseFrame(b, f); err != nil {
		t.Fatalf("ParseFrame: %v", err)
	}
	if err := f.VerifyICRC(); err != nil {
		t.Fatalf("fresh frame: %v", err)
	}
	return b, f
}

// maskedOffsets returns the offsets within frame b of the bytes the ICRC
// treats as variant, and the offset range [lo, hi) it covers.
func maskedOffsets(b []byte, f *wire.Frame) (masked map[int]bool, lo, hi int) {
	base := func(s []byte) int { return offsetIn(b, s) }
	masked = map[int]bool{}
	var ip int
	if f.IPv4 != nil {
		ip = base(f.IPv4)
		masked[ip+wire.IPv4TOSOffset] = true
		masked[ip+wire.IPv4TTLOffset] = true
		masked[ip+wire.IPv4ChecksumOffset] = true
		masked[ip+wire.IPv4ChecksumOffset+1] = true
	} else {
		ip = base(f.IPv6)
		// Traffic class and flow label: the low nibble of byte 0 and
		// bytes 1..3; the hop limit.
		masked[ip+1], masked[ip+2], masked[ip+3] = true, true, true
		masked[ip+wire.IPv6HopLimitOffset] = true
	}
	udp := base(f.UDP)
	masked[udp+wire.UDPChecksumOffset] = true
	masked[udp+wire.UDPChecksumOffset+1] = true
	masked[base(f.Packet.BTH)+wire.BTHECNOffset] = true
	end := base(f.Packet.Raw) + len(f.Packet.Raw) - wire.ICRCSize
	return masked, ip, end
}

func icrcOf(t testing.TB, b []byte) uint32 {
	var f wire.Frame
	if err := wire.ParseFrame(b, &f); err != nil {
		t.Fatalf("ParseFrame after mutation: %v", err)
	}
	return f.ComputeICRC()
}

// TestICRCMasking is the property test of Annex A17.4.1: changing a variant
// field (IPv4 TOS/TTL/checksum, IPv6 traffic class/flow label/hop limit,
// UDP checksum, BTH byte 4 with FECN, BECN and Resv6a) leaves the ICRC
// alone; changing any covered byte changes it.
func TestICRCMasking(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, 7))
			for iter := 0; iter < 40; iter++ {
				b, f := randomFrame(t, r, v6)
				want := f.ComputeICRC()
				masked, lo, hi := maskedOffsets(b, f)
				ip0 := lo
				for off := lo; off < hi; off++ {
					orig := b[off]
					if masked[off] {
						b[off] = byte(r.Uint32())
						if off == ip0+1 && v6 {
							// also the traffic-class nibble in byte 0
							b[ip0] = b[ip0]&0xf0 | byte(r.Uint32())&0x0f
						}
						if got := icrcOf(t, b); got != want {
							t.Fatalf("iter %d: variant byte %d changed %#02x→%#02x and the ICRC changed %#08x→%#08x",
								iter, off, orig, b[off], want, got)
						}
						continue
					}
					if off == ip0 && v6 {
						// Byte 0 of IPv6 is half covered: the version nibble
						// (which the parser pins to 6) and the masked
						// traffic-class nibble; flip the masked half.
						b[off] ^= 0x05
						if got := icrcOf(t, b); got != want {
							t.Fatalf("iter %d: traffic-class nibble changed and the ICRC changed", iter)
						}
						b[off] = orig
						continue
					}
					// Flip one covered bit: CRC-32 detects every single-bit
					// error. The header bytes the parser relies on (lengths,
					// versions, ports, opcode) are checked through ICRCIPv4/6
					// directly so the frame need not stay parseable.
					b[off] ^= 1 << r.IntN(8)
					var got uint32
					if f.IPv4 != nil {
						got = wire.ICRCIPv4(f.IPv4, f.UDP, f.Packet.Raw)
					} else {
						got = wire.ICRCIPv6(f.IPv6, f.UDP, f.Packet.Raw)
					}
					if got == want {
						t.Fatalf("iter %d: covered byte %d changed %#02x→%#02x but the ICRC stayed %#08x", iter, off, orig, b[off], want)
					}
					b[off] = orig
				}
				if got := icrcOf(t, b); got != want {
					t.Fatalf("iter %d: ICRC not restored", iter)
				}
			}
		})
	}
}

// TestICRCFastVsReference compares the fast ICRC with the reference over
// random headers (IPv4 with and without options, IPv6) and random packet
// lengths.
func TestICRCFastVsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	for iter := 0; iter < 2000; iter++ {
		udp := make([]byte, wire.UDPSize)
		fill(udp)
		pkt := make([]byte, wire.MinPacketSize+r.IntN(4200))
		fill(pkt)
		// Start the packet at a random alignment.
		off := r.IntN(8)
		pkt = append(make([]byte, off), pkt...)[off:]
		if iter%2 == 0 {
			ihl := 5 + r.IntN(11)
			ip := make([]byte, ihl*4)
			fill(ip)
			ip[0] = 0x40 | byte(ihl)
			got, want := wire.ICRCIPv4(ip, udp, pkt), wire.ReferenceICRC(ip, udp, pkt)
			if got != want {
				t.Fatalf("IPv4 IHL %d len %d: fast %#08x, reference %#08x", ihl, len(pkt), got, want)
			}
		} else {
			ip := make([]byte, wire.IPv6Size)
			fill(ip)
			ip[0] = 0x60 | ip[0]&0x0f
			got, want := wire.ICRCIPv6(ip, udp, pkt), wire.ReferenceICRC(ip, udp, pkt)
			if got != want {
				t.Fatalf("IPv6 len %d: fast %#08x, reference %#08x", len(pkt), got, want)
			}
		}
	}
}

func TestICRCShortViews(t *testing.T) {
	ip := make([]byte, 20)
	ip[0] = 0x45
	udp := make([]byte, 8)
	for _, c := range []struct {
		name         string
		ip, udp, pkt []byte
	}{
		{"short pkt", ip, udp, make([]byte, wire.MinPacketSize-1)},
		{"short udp", ip, udp[:7], make([]byte, 32)},
		{"short ip", ip[:19], udp, make([]byte, 32)},
		{"IHL beyond view", append([]byte{0x46}, ip[1:]...), udp, make([]byte, 32)},
	} {
		if got := wire.ICRCIPv4(c.ip, c.udp, c.pkt); got != 0 {
			t.Errorf("%s: ICRCIPv4 = %#x, want 0", c.name, got)
		}
	}
	if got := wire.ICRCIPv6(make([]byte, 39), udp, make([]byte, 32)); got != 0 {
		t.Errorf("short IPv6: ICRCIPv6 = %#x, want 0", got)
	}
}

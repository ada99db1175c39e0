package wire_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func testFrameFields(v6, vlan bool) wire.FrameFields {
	ff := wire.FrameFields{
		Dst: wire.MAC{0x52, 0x54, 0, 0x99, 0, 3}, Src: wire.MAC{0x52, 0x54, 0, 0x99, 0, 2},
		SrcIP: netip.MustParseAddr("::ffff:10.99.0.2"), DstIP: netip.MustParseAddr("10.99.0.3"),
		TrafficClass: 0x68, HopLimit: 64, IPID: 0x1234, SrcPort: 0xc123,
	}
	if v6 {
		ff.SrcIP, ff.DstIP = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::3")
		ff.FlowLabel = 0xabcde
	}
	if vlan {
		ff.VLAN = &wire.VLANFields{Priority: 3, ID: 100}
	}
	return ff
}

func TestFrameBuildParse(t *testing.T) {
	for _, c := range []struct {
		name       string
		v6, vlan   bool
		udpCsum    bool
		wantLen    int
		wantEthTyp uint16
	}{
		{"IPv4", false, false, false, 14 + 20 + 8 + 12 + 16 + 1024 + 4, wire.EtherTypeIPv4},
		{"IPv4 VLAN UDP checksum", false, true, true, 18 + 20 + 8 + 12 + 16 + 1024 + 4, wire.EtherTypeVLAN},
		{"IPv6", true, false, false, 14 + 40 + 8 + 12 + 16 + 1024 + 4, wire.EtherTypeIPv6},
		{"IPv6 VLAN UDP checksum", true, true, true, 18 + 40 + 8 + 12 + 16 + 1024 + 4, wire.EtherTypeVLAN},
	} {
		t.Run(c.name, func(t *testing.T) {
			ff := testFrameFields(c.v6, c.vlan)
			ff.UDPChecksum = c.udpCsum
			pf := testFields(wire.RCRDMAWriteFirst)
			payload := bytes.Repeat([]byte{0xa5, 0x5a}, 512)
			buf := bytes.Repeat([]byte{0xff}, 2000)
			n, err := wire.BuildFrame(buf, &ff, &pf, payload)
			if err != nil {
				t.Fatal(err)
			}
			if n != c.wantLen || n != wire.FrameLen(&ff, wire.RCRDMAWriteFirst, len(payload)) {
				t.Fatalf("frame length %d, FrameLen %d, want %d", n, wire.FrameLen(&ff, wire.RCRDMAWriteFirst, len(payload)), c.wantLen)
			}
			b := buf[:n]
			var f wire.Frame
			if err := wire.ParseFrame(b, &f); err != nil {
				t.Fatal(err)
			}
			if err := f.VerifyICRC(); err != nil {
				t.Fatal(err)
			}
			if f.Ethernet.EtherType() != c.wantEthTyp || (f.VLAN != nil) != c.vlan {
				t.Errorf("EtherType %#x VLAN %v", f.Ethernet.EtherType(), f.VLAN)
			}
			if c.vlan && (f.VLAN.Priority() != 3 || f.VLAN.ID() != 100 || f.VLAN.DropEligible()) {
				t.Errorf("VLAN tag %+v", f.VLAN.Fields())
			}
			wantSrc := netip.AddrPortFrom(ff.SrcIP.Unmap(), 0xc123)
			wantDst := netip.AddrPortFrom(ff.DstIP.Unmap(), wire.RoCEv2Port)
			if f.Src() != wantSrc || f.Dst() != wantDst {
				t.Errorf("Src %v Dst %v, want %v %v", f.Src(), f.Dst(), wantSrc, wantDst)
			}
			if c.v6 {
				got := f.IPv6.Fields()
				want := wire.IPv6Fields{TrafficClass: 0x68, FlowLabel: 0xabcde, PayloadLength: uint16(8 + 16 + 12 + 1024 + 4),
					NextHeader: 17, HopLimit: 64, Src: ff.SrcIP, Dst: ff.DstIP}
				if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("IPv6 header (-want +got):\n%s", diff)
				}
			} else {
				got := f.IPv4.Fields()
				want := wire.IPv4Fields{TOS: 0x68, TotalLength: uint16(20 + 8 + 12 + 16 + 1024 + 4), ID: 0x1234, DF: true,
					TTL: 64, Protocol: 17, Checksum: got.Checksum, Src: ff.SrcIP.Unmap(), Dst: ff.DstIP.Unmap()}
				if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
					t.Errorf("IPv4 header (-want +got):\n%s", diff)
				}
				if !f.IPv4.IsChecksumValid() || f.IPv4.HeaderLength() != 20 {
					t.Errorf("IPv4 checksum %#x valid=%v IHL %d", f.IPv4.Checksum(), f.IPv4.IsChecksumValid(), f.IPv4.HeaderLength())
				}
			}
			csum := f.UDP.Checksum()
			if !c.udpCsum && csum != 0 {
				t.Errorf("UDP checksum %#x, want 0 (rxe sends none)", csum)
			}
			if c.udpCsum {
				var src, dst netip.Addr
				if c.v6 {
					src, dst = f.IPv6.SourceAddress(), f.IPv6.DestinationAddress()
				} else {
					src, dst = f.IPv4.SourceAddress(), f.IPv4.DestinationAddress()
				}
				if want := f.UDP.CalculateChecksum(src, dst, f.Packet.Raw); csum != want || csum == 0 {
					t.Errorf("UDP checksum %#x, want %#x", csum, want)
				}
			}
			if f.UDP.Length() != uint16(8+len(f.Packet.Raw)) {
				t.Errorf("UDP length %d, packet %d", f.UDP.Length(), len(f.Packet.Raw))
			}
			if buf[n] != 0xff {
				t.Errorf("BuildFrame wrote past the frame")
			}

			// ParseIP on the IP packet finds the same RoCEv2 packet.
			var g wire.Frame
			if err := wire.ParseIP(b[offsetIn(b, ipHeader(&f)):], &g); err != nil {
				t.Fatal(err)
			}
			if g.Ethernet != nil || g.ComputeICRC() != f.ComputeICRC() || !bytes.Equal(g.Packet.Raw, f.Packet.Raw) {
				t.Errorf("ParseIP disagrees with ParseFrame")
			}

			// Corrupting a payload byte breaks the ICRC; Seal repairs it.
			f.Packet.Payload[100] ^= 0x01
			if err := f.VerifyICRC(); !errors.Is(err, wire.ErrICRCMismatch) {
				t.Errorf("corrupted payload: VerifyICRC = %v", err)
			}
			f.Seal()
			if err := f.VerifyICRC(); err != nil {
				t.Errorf("after Seal: %v", err)
			}
		})
	}
}

func ipHeader(f *wire.Frame) []byte {
	if f.IPv4 != nil {
		return f.IPv4
	}
	return f.IPv6
}

// TestFrameEthernetPadding: bytes after the IP packet (minimum-size
// Ethernet padding, a trailer) are not part of the RoCEv2 packet.
func TestFrameEthernetPadding(t *testing.T) {
	ff := testFrameFields(false, false)
	pf := testFields(wire.RCAcknowledge)
	buf := make([]byte, 200)
	n, err := wire.BuildFrame(buf, &ff, &pf, nil)
	if err != nil {
		t.Fatal(err)
	}
	var f wire.Frame
	if err := wire.ParseFrame(buf[:n+10], &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Packet.Raw) != 12+4+4 || f.VerifyICRC() != nil {
		t.Errorf("ACK with trailer: packet %d bytes, ICRC %v", len(f.Packet.Raw), f.VerifyICRC())
	}
}

func TestFrameRejects(t *testing.T) {
	good := func(v6 bool) []byte {
		ff := testFrameFields(v6, false)
		pf := testFields(wire.RCSendOnly)
		buf := make([]byte, 300)
		n, err := wire.BuildFrame(buf, &ff, &pf, []byte("hello"))
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	mut := func(v6 bool, fn func(b []byte) []byte) []byte { return fn(good(v6)) }
	for _, c := range []struct {
		name string
		b    []byte
		want wire.Reason
	}{
		{"short Ethernet", make([]byte, 13), wire.ErrTruncated},
		{"ARP", mut(false, func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), wire.ErrNotRoCEv2},
		{"VLAN tag cut", mut(false, func(b []byte) []byte { b[12], b[13] = 0x81, 0x00; return b[:16] }), wire.ErrTruncated},
		{"IPv4 cut", mut(false, func(b []byte) []byte { return b[:30] }), wire.ErrTruncated},
		{"IPv4 version 5", mut(false, func(b []byte) []byte { b[14] = 0x55; return b }), wire.ErrBadIPHeader},
		{"IPv4 IHL 4", mut(false, func(b []byte) []byte { b[14] = 0x44; return b }), wire.ErrBadIPHeader},
		{"IPv4 total length beyond frame", mut(false, func(b []byte) []byte { return b[:len(b)-1] }), wire.ErrTruncated},
		{"TCP", mut(false, func(b []byte) []byte { b[14+9] = 6; return b }), wire.ErrNotRoCEv2},
		// A capture's snap length cuts packets short; other traffic must
		// still be told apart from broken RoCEv2.
		{"TCP cut short", mut(false, func(b []byte) []byte { b[14+9] = 6; return b[:40] }), wire.ErrNotRoCEv2},
		{"UDP/53 cut short", mut(false, func(b []byte) []byte { b[34+2], b[34+3] = 0, 53; return b[:44] }), wire.ErrNotRoCEv2},
		{"RoCEv2 cut short", mut(false, func(b []byte) []byte { return b[:44] }), wire.ErrTruncated},
		{"IPv6 UDP/53 cut short", mut(true, func(b []byte) []byte { b[54+2], b[54+3] = 0, 53; return b[:64] }), wire.ErrNotRoCEv2},
		{"later fragment", mut(false, func(b []byte) []byte { b[14+6], b[14+7] = 0x00, 0x10; return b }), wire.ErrNotRoCEv2},
		{"first fragment", mut(false, func(b []byte) []byte { b[14+6] = 0x20; return b }), wire.ErrIPFragment},
		{"UDP to 4789", mut(false, func(b []byte) []byte { b[34+3] = 0xb5; return b }), wire.ErrNotRoCEv2},
		{"UDP length too long", mut(false, func(b []byte) []byte { b[34+5]++; return b }), wire.ErrBadUDPHeader},
		{"UDP length 7", mut(false, func(b []byte) []byte { b[34+4], b[34+5] = 0, 7; return b }), wire.ErrBadUDPHeader},
		{"IPv6 cut", mut(true, func(b []byte) []byte { return b[:40] }), wire.ErrTruncated},
		{"IPv6 version 4 in 0x86dd", mut(true, func(b []byte) []byte { b[14] = 0x40; return b }), wire.ErrBadIPHeader},
		{"IPv6 payload length beyond frame", mut(true, func(b []byte) []byte { return b[:len(b)-2] }), wire.ErrTruncated},
		{"IPv6 extension header", mut(true, func(b []byte) []byte { b[14+6] = 0; return b }), wire.ErrNotRoCEv2},
		{"BTH TVer", mut(true, func(b []byte) []byte { b[62+1] |= 1; return b }), wire.ErrBadTVer},
	} {
		var f wire.Frame
		if err := wire.ParseFrame(c.b, &f); !errors.Is(err, c.want) {
			t.Errorf("%s: ParseFrame = %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		want wire.Reason
	}{
		{"empty", nil, wire.ErrTruncated},
		{"version 5", []byte{0x50}, wire.ErrBadIPHeader},
		{"IPv4 19 bytes", append([]byte{0x45}, make([]byte, 18)...), wire.ErrTruncated},
	} {
		var f wire.Frame
		if err := wire.ParseIP(c.b, &f); !errors.Is(err, c.want) {
			t.Errorf("ParseIP %s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestEncodeFrameErrors(t *testing.T) {
	pf := testFields(wire.RCSendOnly)
	ff := testFrameFields(false, false)
	ff.DstIP = netip.MustParseAddr("fd00::3") // IPv4 source, IPv6 destination
	if _, err := wire.BuildFrame(make([]byte, 200), &ff, &pf, nil); !errors.Is(err, wire.ErrBadField) {
		t.Errorf("mixed families: %v", err)
	}
	ff = testFrameFields(false, false)
	if _, err := wire.BuildFrame(make([]byte, 60), &ff, &pf, make([]byte, 10)); !errors.Is(err, wire.ErrBufferTooSmall) {
		t.Errorf("small buffer: %v", err)
	}
	pf.BTH.Opcode = 0x15
	if _, err := wire.BuildFrame(make([]byte, 200), &ff, &pf, nil); !errors.Is(err, wire.ErrInvalidOpcode) {
		t.Errorf("reserved opcode: %v", err)
	}
}

package wire_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestFramingEncode: a Framing set once writes, packet after packet, the
// bytes EncodeFrame writes for the same fields — across families, tags,
// UDP checksums and packets of other opcodes and lengths in between, so a
// length or checksum left over from the previous packet shows.
func TestFramingEncode(t *testing.T) {
	packets := []struct {
		op      wire.Opcode
		payload int
	}{
		{wire.RCRDMAWriteFirst, 4096},
		{wire.RCRDMAWriteMiddle, 4096},
		{wire.RCAcknowledge, 0},
		{wire.RCRDMAWriteLast, 1},
		{wire.RCSendOnlyWithImm, 7},
		{wire.RCRDMAReadResponseOnly, 1500},
		{wire.RCCompareSwap, 0},
		{wire.UDSendOnly, 0},
	}
	for _, c := range []struct {
		name          string
		v6, vlan, csm bool
	}{
		{"IPv4", false, false, false},
		{"IPv4 VLAN", false, true, false},
		{"IPv4 UDP checksum", false, false, true},
		{"IPv6", true, false, false},
		{"IPv6 VLAN UDP checksum", true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ff := testFrameFields(c.v6, c.vlan)
			ff.UDPChecksum = c.csm
			var fr wire.Framing
			if fr.Matches(&ff) {
				t.Fatal("the zero Framing matches")
			}
			if err := fr.Set(&ff); err != nil {
				t.Fatal(err)
			}
			if !fr.Matches(&ff) {
				t.Fatal("does not match the fields it was set from")
			}
			for _, pk := range packets {
				pf := testFields(pk.op)
				want := bytes.Repeat([]byte{0xee}, 4300)
				got := bytes.Repeat([]byte{0x11}, 4300)
				var wf, gf wire.Frame
				wn, err := wire.EncodeFrame(want, &ff, &pf, pk.payload, &wf)
				if err != nil {
					t.Fatal(err)
				}
				gn, err := fr.Encode(got, &pf, pk.payload, &gf)
				if err != nil {
					t.Fatalf("%v: %v", pk.op, err)
				}
				// The payload is the caller's: fill both alike.
				for i := range wf.Packet.Payload {
					wf.Packet.Payload[i] = byte(i)
					gf.Packet.Payload[i] = byte(i)
				}
				wf.Seal()
				gf.Seal()
				if gn != wn || !bytes.Equal(got[:gn], want[:wn]) {
					t.Fatalf("%v: Encode wrote\n% x\nEncodeFrame\n% x", pk.op, got[:min(gn, 96)], want[:min(wn, 96)])
				}
				var pf2 wire.Frame
				if err := wire.ParseFrame(got[:gn], &pf2); err != nil {
					t.Fatalf("%v: %v", pk.op, err)
				}
				if err := pf2.VerifyICRC(); err != nil {
					t.Errorf("%v: %v", pk.op, err)
				}
				if gf.IPv4 != nil && !gf.IPv4.IsChecksumValid() {
					t.Errorf("%v: IPv4 header checksum %#04x, want %#04x", pk.op, gf.IPv4.Checksum(), gf.IPv4.CalculateChecksum())
				}
				if (gf.VLAN != nil) != c.vlan || (gf.IPv4 != nil) == c.v6 || len(gf.UDP) != wire.UDPSize {
					t.Errorf("%v: views %+v", pk.op, gf)
				}
			}
		})
	}
}

// TestFramingMatches: a change to any field of the framing, the tag
// included, makes the Framing stale.
func TestFramingMatches(t *testing.T) {
	base := testFrameFields(false, true)
	changes := map[string]func(*wire.FrameFields){
		"Dst":          func(ff *wire.FrameFields) { ff.Dst[5]++ },
		"Src":          func(ff *wire.FrameFields) { ff.Src[0]++ },
		"no VLAN":      func(ff *wire.FrameFields) { ff.VLAN = nil },
		"VLAN ID":      func(ff *wire.FrameFields) { v := *ff.VLAN; v.ID++; ff.VLAN = &v },
		"VLAN PCP":     func(ff *wire.FrameFields) { v := *ff.VLAN; v.Priority++; ff.VLAN = &v },
		"SrcIP":        func(ff *wire.FrameFields) { ff.SrcIP = netip.MustParseAddr("10.99.0.9") },
		"DstIP":        func(ff *wire.FrameFields) { ff.DstIP = netip.MustParseAddr("::ffff:10.99.0.9") },
		"TrafficClass": func(ff *wire.FrameFields) { ff.TrafficClass++ },
		"HopLimit":     func(ff *wire.FrameFields) { ff.HopLimit-- },
		"FlowLabel":    func(ff *wire.FrameFields) { ff.FlowLabel++ },
		"IPID":         func(ff *wire.FrameFields) { ff.IPID++ },
		"SrcPort":      func(ff *wire.FrameFields) { ff.SrcPort++ },
		"UDPChecksum":  func(ff *wire.FrameFields) { ff.UDPChecksum = !ff.UDPChecksum },
	}
	var fr wire.Framing
	if err := fr.Set(&base); err != nil {
		t.Fatal(err)
	}
	same := base
	v := *base.VLAN
	same.VLAN = &v // another pointer to an equal tag
	if !fr.Matches(&same) {
		t.Error("an equal tag behind another pointer does not match")
	}
	for name, change := range changes {
		ff := base
		change(&ff)
		if fr.Matches(&ff) {
			t.Errorf("%s changed: still matches", name)
		}
	}
	untagged := testFrameFields(false, false)
	if err := fr.Set(&untagged); err != nil {
		t.Fatal(err)
	}
	if fr.Matches(&base) {
		t.Error("set untagged, matches the tagged fields")
	}
}

// TestFramingErrors: the errors of EncodeFrame, and a failed Set leaves
// the Framing matching nothing.
func TestFramingErrors(t *testing.T) {
	var fr wire.Framing
	pf := testFields(wire.RCSendOnly)
	if _, err := fr.Encode(make([]byte, 200), &pf, 0, new(wire.Frame)); !errors.Is(err, wire.ErrBadField) {
		t.Errorf("Encode before Set: %v", err)
	}
	ff := testFrameFields(false, false)
	if err := fr.Set(&ff); err != nil {
		t.Fatal(err)
	}
	mixed := ff
	mixed.DstIP = netip.MustParseAddr("fd00::3")
	if err := fr.Set(&mixed); !errors.Is(err, wire.ErrBadField) {
		t.Errorf("mixed families: %v", err)
	}
	if fr.Matches(&ff) || fr.Matches(&mixed) {
		t.Error("a failed Set left the Framing usable")
	}
	if _, err := fr.Encode(make([]byte, 200), &pf, 0, new(wire.Frame)); !errors.Is(err, wire.ErrBadField) {
		t.Errorf("Encode after a failed Set: %v", err)
	}
	if err := fr.Set(&ff); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Encode(make([]byte, 60), &pf, 10, new(wire.Frame)); !errors.Is(err, wire.ErrBufferTooSmall) {
		t.Errorf("small buffer: %v", err)
	}
	pf.BTH.Opcode = 0x15
	if _, err := fr.Encode(make([]byte, 200), &pf, 0, new(wire.Frame)); !errors.Is(err, wire.ErrInvalidOpcode) {
		t.Errorf("reserved opcode: %v", err)
	}
}

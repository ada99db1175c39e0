package engine

import (
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func buildTo(t testing.TB, src, dst netip.Addr, vlan bool) []byte {
	t.Helper()
	b := make([]byte, link.BufferSize)
	ff := &wire.FrameFields{Dst: macA, Src: macB, SrcIP: src, DstIP: dst, HopLimit: 64, SrcPort: 0xc001}
	if vlan {
		ff.VLAN = &wire.VLANFields{ID: 7}
	}
	n, err := wire.BuildFrame(b, ff, &wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, DestQP: 2, PKey: 0xffff}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// TestFrameDst: the destination flush routes by is read at fixed offsets
// from IPv4 and IPv6 frames, with or without an 802.1Q tag; anything else,
// or anything cut short, is "not known" (and goes to the link).
func TestFrameDst(t *testing.T) {
	v4a, v4b := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	v6a, v6b := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fd00::2")
	f4 := buildTo(t, v4a, v4b, false)
	f6v := buildTo(t, v6a, v6b, true)
	arp := append([]byte(nil), f4...)
	wire.Ethernet(arp).SetEtherType(0x0806)
	for _, tc := range []struct {
		name  string
		frame []byte
		want  netip.Addr
		ok    bool
	}{
		{"ipv4", f4, v4b, true},
		{"ipv4 mapped destination", buildTo(t, netip.AddrFrom16(v4a.As16()), netip.AddrFrom16(v4b.As16()), false), v4b, true},
		{"ipv6 with vlan", f6v, v6b, true},
		{"ipv6", buildTo(t, v6b, v6a, false), v6a, true},
		{"empty", nil, netip.Addr{}, false},
		{"ethernet header only", f4[:wire.EthernetSize], netip.Addr{}, false},
		{"ipv4 cut short", f4[:wire.EthernetSize+wire.IPv4MinimumSize-1], netip.Addr{}, false},
		{"ipv4 header only", f4[:wire.EthernetSize+wire.IPv4MinimumSize], v4b, true},
		{"vlan tag cut short", f6v[:wire.EthernetSize+2], netip.Addr{}, false},
		{"ipv6 cut short", f6v[:wire.EthernetSize+wire.VLANSize+wire.IPv6Size-1], netip.Addr{}, false},
		{"not ip", arp, netip.Addr{}, false},
	} {
		got, ok := frameDst(tc.frame)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: frameDst = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRouteOf: a frame goes to the device itself exactly when its
// destination is one of the port's GIDs, and nowhere but the link when the
// port has none; a multicast frame without a local group goes to the link
// only.
func TestRouteOf(t *testing.T) {
	p := &port{e: &Engine{dev: devtest.Bringup(t, devtest.Options{}).Dev}}
	own := []netip.Addr{ipA, netip.MustParseAddr("fe80::a")}
	for _, tc := range []struct {
		name  string
		own   []netip.Addr
		frame []byte
		want  route
	}{
		{"own ipv4", own, buildTo(t, ipA, ipA, false), toSelf},
		{"own fe80", own, buildTo(t, netip.MustParseAddr("fe80::a"), netip.MustParseAddr("fe80::a"), true), toSelf},
		{"peer", own, buildTo(t, ipA, ipB, false), toWire},
		{"no GIDs configured", nil, buildTo(t, ipA, ipA, false), toWire},
		{"another loopback address", []netip.Addr{netip.MustParseAddr("127.0.0.2")},
			buildTo(t, netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), false), toWire},
		{"multicast, no local group", own, buildTo(t, ipA, netip.MustParseAddr("239.1.1.1"), false), toWire},
		{"runt", own, []byte{1, 2, 3}, toWire},
	} {
		if got := p.routeOf(tc.own, tc.frame); got != tc.want {
			t.Errorf("%s: route %d, want %d", tc.name, got, tc.want)
		}
	}
}

// FuzzFrameDst: any bytes, no panic; a destination is reported only for a
// frame long enough to hold it.
func FuzzFrameDst(f *testing.F) {
	f.Add(buildTo(f, ipA, ipB, false))
	f.Add(buildTo(f, netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2"), true))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := frameDst(b)
		if ok && (!a.IsValid() || len(b) < wire.EthernetSize+wire.IPv4MinimumSize) {
			t.Fatalf("frameDst(%d bytes) = %v, %v", len(b), a, ok)
		}
	})
}

// sealSpy is a link end that records the frames it is sent and shown as
// looped back, as they are at that moment.
type sealSpy struct {
	*link.End
	capturing    bool
	sent, looped [][]byte
}

func (s *sealSpy) Send(pkts []*link.Packet) error {
	for _, p := range pkts {
		s.sent = append(s.sent, append([]byte(nil), p.Data...))
	}
	return s.End.Send(pkts)
}

func (s *sealSpy) Looped(pkts []*link.Packet) {
	for _, p := range pkts {
		s.looped = append(s.looped, append([]byte(nil), p.Data...))
	}
}

func (s *sealSpy) Capturing() bool { return s.capturing }

// TestFlushSeals: a frame built unsealed (qp.Ctx.SealAtWire, as the
// workers build them) gets its ICRC when flush sends it to the link; one
// the device keeps for itself gets none — its ICRC bytes stay as the
// encoder left them, zero — unless the link captures, and the gate counts
// it in-device without checking it.
func TestFlushSeals(t *testing.T) {
	for _, capturing := range []bool{false, true} {
		pair, err := link.NewPair(link.PairConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pair.Close() })
		spy := &sealSpy{End: pair.A(), capturing: capturing}
		n := newNode(t, timing.NewManual(), Config{Stepped: true}, ipA, ipB, macB, spy)
		pool := link.NewPool(0)
		unsealed := func(dst netip.Addr) *link.Packet {
			p := pool.Get()
			ff := wire.FrameFields{Dst: macB, Src: macA, SrcIP: ipA, DstIP: dst, HopLimit: 64, SrcPort: 0xc001}
			pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAcknowledge, DestQP: 2, PKey: 0xffff},
				AETH: wire.AETHFields{Syndrome: 0x1f}}
			m, err := wire.EncodeFrame(p.Buf(), &ff, &pf, 0, &p.Frame)
			if err != nil {
				t.Fatal(err)
			}
			p.Data, p.Unsealed = p.Buf()[:m], true
			return p
		}
		w := n.eng.workers[0]
		w.send(unsealed(ipB)) // to the peer: the wire
		w.send(unsealed(ipA)) // to itself
		w.flush()
		for n.eng.Poll() {
		}
		if len(spy.sent) != 1 || len(spy.looped) != 1 {
			t.Fatalf("capturing %v: %d frames sent, %d looped back; want 1 and 1", capturing, len(spy.sent), len(spy.looped))
		}
		var f wire.Frame
		if err := wire.ParseFrame(spy.sent[0], &f); err != nil || f.VerifyICRC() != nil {
			t.Errorf("capturing %v: the frame sent to the link: parse %v, ICRC %v; want it sealed", capturing, err, f.VerifyICRC())
		}
		if err := wire.ParseFrame(spy.looped[0], &f); err != nil {
			t.Fatal(err)
		}
		if capturing && f.VerifyICRC() != nil {
			t.Errorf("capturing: the looped-back frame has a bad ICRC; the capture wants the wire's")
		}
		if !capturing && f.Packet.ICRC() != 0 {
			t.Errorf("not capturing: the looped-back frame's ICRC is %#x; want none computed (0)", f.Packet.ICRC())
		}
		if g := n.eng.Stats().Gate; g.ICRCInDevice != 1 || g.ICRCVerified+g.ICRCFailed != 0 {
			t.Errorf("capturing %v: gate ICRC in-device %d verified %d failed %d; want 1, 0, 0", capturing,
				g.ICRCInDevice, g.ICRCVerified, g.ICRCFailed)
		}
	}
}

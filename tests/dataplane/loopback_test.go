package dataplane_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestLoopback: two RC QPs and two UD QPs of one device, addressed through
// the device's own GID, exchange SEND, WRITE and READ (RC) and SEND (UD)
// byte for byte without a frame reaching the link (docs/dataplane.md
// "Loopback"), over IPv4 and IPv6, stepped and on the wall clock with
// several workers (the QPs then sit on different workers, which deliver to
// each other). The frames pass the receive gate and the QP checks as frames
// from the link do: a datagram with a wrong Q_Key is dropped by the QP, one
// to a QPN that does not exist by the gate. No ICRC is checked (none is
// computed: the frames never leave the device), and the capture, when
// there is one, has every frame once with a correct ICRC. Without one, the
// receiver of an RC payload reads it from the sender's buffer.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    opts
	}{
		{"ipv4/stepped", opts{stepped: true, capture: true}},
		{"ipv6/stepped", opts{stepped: true, ipv6: true, capture: true}},
		{"ipv4/wall-3-workers", opts{workers: 3, capture: true}},
		{"ipv4/stepped/no-capture", opts{stepped: true}},
		{"ipv4/wall-3-workers/no-capture", opts{workers: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.o)
			n, other := w.nodes[0], w.nodes[1]
			a, b := n.loopRC(withMTU(1024))
			src := n.newMR(256<<10, devtest.RightsAll, a.pd)
			dst := n.newMR(256<<10, devtest.RightsAll, b.pd)
			pattern(src.bytes(), 7)

			// RC: SEND at sizes around the MTU, WRITE, READ back.
			for i, size := range []int{0, 1, 1023, 1024, 1025, 4097, 64 << 10} {
				clear(dst.bytes())
				b.recv(uk.RecvWR{WrID: uint64(i), SGList: []uk.SGE{{Addr: dst.va, Length: 128 << 10, LKey: dst.stag}}})
				var sge []uk.SGE
				if size > 0 {
					sge = []uk.SGE{{Addr: src.va, Length: uint32(size), LKey: src.stag}}
				}
				a.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: sge})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "loopback SEND")
				wantWC(t, b.waitRecv(1)[0], uk.WCSuccess, uk.WCRecv, uint32(size), "loopback RECV")
				mustEqual(t, dst.bytes()[:size], src.bytes()[:size], fmt.Sprintf("SEND of %d bytes", size))
			}
			const big = 200 << 10
			clear(dst.bytes())
			a.post(uk.SendWR{WrID: 100, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
				SGList: []uk.SGE{{Addr: src.va, Length: big, LKey: src.stag}}, RemoteAddr: dst.va + 7, RKey: dst.stag})
			wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, big, "loopback WRITE")
			mustEqual(t, dst.bytes()[7:7+big], src.bytes()[:big], "WRITE")
			clear(src.bytes()[big:])
			b.post(uk.SendWR{WrID: 101, Opcode: uk.WRRDMARead, Flags: uk.SendSignaled,
				SGList: []uk.SGE{{Addr: dst.va + 7 + big, Length: 50 << 10, LKey: dst.stag}}, RemoteAddr: src.va + 1000, RKey: src.stag})
			wantWC(t, b.waitSend(1)[0], uk.WCSuccess, uk.WCRDMARead, 50<<10, "loopback READ")
			mustEqual(t, dst.bytes()[7+big:7+big+50<<10], src.bytes()[1000:1000+50<<10], "READ")

			// UD through an AH to the device's own address.
			u1 := n.newEP(true, nil)
			u2 := n.newEP(true, nil, func(s *devtest.QPSpec) { s.QKey = 0x2222 })
			n.env.Connect(u1.q)
			n.env.Connect(u2.q)
			n.env.CreateAH(devtest.AHSpec{Index: 4, PD: u1.pd, SrcMAC: n.mac, ARPIdx: 1, SrcIP: n.ip, DestIP: n.ip, HopLimit: 64})
			usrc := n.newMR(4096, devtest.RightsAll, u1.pd)
			udst := n.newMR(4096, devtest.RightsAll, u2.pd)
			pattern(usrc.bytes(), 9)
			for i, size := range []int{0, 300, 1024} {
				clear(udst.bytes())
				u2.recv(uk.RecvWR{WrID: uint64(i), SGList: []uk.SGE{{Addr: udst.va, Length: 4096, LKey: udst.stag}}})
				var sge []uk.SGE
				if size > 0 {
					sge = []uk.SGE{{Addr: usrc.va, Length: uint32(size), LKey: usrc.stag}}
				}
				u1.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRSendWithImm, Flags: uk.SendSignaled, SGList: sge,
					AHID: 4, RemoteQPN: u2.q.Spec.ID, RemoteQKey: 0x2222, ImmData: uint32(i)})
				wantWC(t, u1.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "loopback UD SEND")
				rc := u2.waitRecv(1)[0]
				wantWC(t, rc, uk.WCSuccess, uk.WCRecv, uint32(size+40), "loopback UD RECV")
				if rc.SrcQP != u1.q.Spec.ID || rc.ImmData != uint32(i) || rc.Flags&uk.WCGRH == 0 || rc.SMAC != [6]byte(n.mac) {
					t.Fatalf("UD completion %+v", rc)
				}
				mustEqual(t, udst.bytes()[40:40+size], usrc.bytes()[:size], fmt.Sprintf("UD SEND of %d bytes", size))
			}
			// The checks of the wire path: the QP's Q_Key, the gate's QPN.
			u1.post(uk.SendWR{WrID: 50, Opcode: uk.WRSend, Flags: uk.SendSignaled, AHID: 4, RemoteQPN: u2.q.Spec.ID, RemoteQKey: 0x3333})
			u1.post(uk.SendWR{WrID: 51, Opcode: uk.WRSend, Flags: uk.SendSignaled, AHID: 4, RemoteQPN: 999, RemoteQKey: 0x2222})
			u1.waitSend(2)

			// Every packet the device sent it received itself, through the
			// gate, and none went to the link. (On the wall clock the
			// counters settle once the workers have flushed.)
			var s engine.Stats
			var gateDrops uint64
			w.until("the loopback counters", func() bool {
				s = n.eng.Stats()
				gateDrops = 0
				for _, d := range s.Gate.Drops {
					gateDrops += d
				}
				q, _ := n.eng.QPStats(u2.q.Spec.ID)
				return q.Drops[qp.DropQKey] == 1 && s.Gate.Drops[qp.DropUnknownQPN] == 1 &&
					s.Loopback.Frames == s.Port.TxPackets && s.Delivered+gateDrops == s.Loopback.Frames &&
					s.Port.RxPackets+2 == s.Loopback.Frames
			})
			if got := poll(t, u2.ur, nil); len(got) != 0 {
				t.Fatalf("dropped datagrams completed: %+v", got)
			}
			lb := s.Loopback
			if s.Link.TxFrames != 0 || s.Link.RxFrames != 0 || other.eng.Stats().Port.RxPackets != 0 {
				t.Errorf("link frames tx %d rx %d, the other device received %d; want none", s.Link.TxFrames,
					s.Link.RxFrames, other.eng.Stats().Port.RxPackets)
			}
			const payload = 72706 + 204800 + 51200 + 1324 // SENDs, WRITE, READ, UD SENDs
			if lb.Frames < 330 || lb.Multicast != 0 || lb.Bytes <= payload {
				t.Errorf("loopback %+v, packets sent %d: want every one looped back", lb, s.Port.TxPackets)
			}
			if s.Gate.ICRCInDevice != lb.Frames || s.Gate.ICRCVerified+s.Gate.ICRCFailed != 0 || gateDrops != 1 {
				t.Errorf("gate: delivered %d + dropped %d, ICRC in-device %d verified %d failed %d; want %d looped-back frames, one dropped",
					s.Delivered, gateDrops, s.Gate.ICRCInDevice, s.Gate.ICRCVerified, s.Gate.ICRCFailed, lb.Frames)
			}
			// Without a capture every RC packet with a payload was read by
			// its receiver straight from the sender's buffer (emu/qp
			// dma.go, "Lending"): the SENDs' 1+1+1+2+5+64 packets, the
			// WRITE's 200 and the READ's 50 responses; UD copies. A capture
			// seals every frame at the wire, payload included.
			wantLent := uint64(74 + 200 + 50)
			if tc.o.capture {
				wantLent = 0
			}
			if lb.Lent != wantLent {
				t.Errorf("loopback payloads read from the sender's buffer: %d, want %d", lb.Lent, wantLent)
			}
			if !tc.o.capture {
				return
			}

			// The capture has each looped-back frame once, as sent, with
			// the ICRC a wire would have carried.
			if err := w.pair.Close(); err != nil {
				t.Fatal(err)
			}
			frames := readPcap(t, w.pcap)
			if uint64(len(frames)) != lb.Frames {
				t.Fatalf("capture has %d frames, want the %d looped back", len(frames), lb.Frames)
			}
			var f wire.Frame
			for i, fr := range frames {
				if err := wire.ParseFrame(fr, &f); err != nil {
					t.Fatalf("captured frame %d: %v", i, err)
				}
				if err := f.VerifyICRC(); err != nil {
					t.Fatalf("captured frame %d: %v", i, err)
				}
				if f.Dst().Addr().Unmap() != n.ip || f.Src().Addr().Unmap() != n.ip {
					t.Fatalf("captured frame %d: %v → %v, want %v both ways", i, f.Src(), f.Dst(), n.ip)
				}
			}
		})
	}
}

// TestLoopbackMulticast: a UD datagram to a multicast group goes on the link
// to the other device's members and, inside the device, to this device's
// members of the group, the sending QP too when it is one (irdma sets
// DOLOOPBACK on every multicast AH, and refuses the create flag that would
// block multicast loopback). A group this device has no members in gets no
// copy.
func TestLoopbackMulticast(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	an, bn := w.nodes[0], w.nodes[1]
	gmac := [6]byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}
	an.env.SetARP(2, gmac)
	qk := func(s *devtest.QPSpec) { s.QKey = 0x4444 }
	snd := an.newEP(true, nil, qk)
	m0 := an.newEP(true, nil, qk)
	m1 := bn.newEP(true, nil, qk)
	for _, e := range []*ep{snd, m0, m1} {
		e.n.env.Connect(e.q)
	}
	group := netip.MustParseAddr("239.1.2.3")
	an.env.CreateMcast(5, group, gmac, snd.q.Spec.ID, m0.q.Spec.ID)
	bn.env.CreateMcast(5, group, gmac, m1.q.Spec.ID)
	an.env.CreateAH(devtest.AHSpec{Index: 1, PD: snd.pd, SrcMAC: an.mac, ARPIdx: 2, SrcIP: an.ip, DestIP: group, HopLimit: 8})
	an.env.CreateAH(devtest.AHSpec{Index: 2, PD: snd.pd, SrcMAC: an.mac, ARPIdx: 2, SrcIP: an.ip,
		DestIP: netip.MustParseAddr("239.9.9.9"), HopLimit: 8})
	src := an.newMR(4096, devtest.RightsAll, snd.pd)
	dstA := an.newMR(3*4096, devtest.RightsAll, m0.pd)
	dstB := bn.newMR(4096, devtest.RightsAll, m1.pd)
	pattern(src.bytes(), 5)
	for i, e := range []*ep{snd, m0} {
		e.recv(uk.RecvWR{WrID: uint64(i), SGList: []uk.SGE{{Addr: dstA.va + uint64(i)*4096, Length: 4096, LKey: dstA.stag}}})
	}
	m1.recv(uk.RecvWR{WrID: 9, SGList: []uk.SGE{{Addr: dstB.va, Length: 4096, LKey: dstB.stag}}})
	snd.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 500, LKey: src.stag}},
		AHID: 1, RemoteQPN: wire.QPNMask, RemoteQKey: 0x4444})
	wantWC(t, snd.waitSend(1)[0], uk.WCSuccess, uk.WCSend, 500, "multicast SEND")
	for _, m := range []struct {
		name string
		e    *ep
		b    []byte
	}{{"the sender", snd, dstA.bytes()[:4096]}, {"a member on the device", m0, dstA.bytes()[4096 : 2*4096]},
		{"a member on the other device", m1, dstB.bytes()}} {
		rc := m.e.waitRecv(1)[0]
		wantWC(t, rc, uk.WCSuccess, uk.WCRecv, 540, m.name)
		if rc.SrcQP != snd.q.Spec.ID {
			t.Errorf("%s: source QP %d, want %d", m.name, rc.SrcQP, snd.q.Spec.ID)
		}
		mustEqual(t, m.b[40:540], src.bytes()[:500], m.name)
	}
	s := an.eng.Stats()
	if s.Loopback.Frames != 1 || s.Loopback.Multicast != 1 || s.Link.TxFrames != 1 || s.Delivered != 2 {
		t.Errorf("loopback %+v, link tx %d, delivered %d: want the frame on the link once and one copy here, "+
			"which the gate gives to both members", s.Loopback, s.Link.TxFrames, s.Delivered)
	}
	// A group with no member here: the link only.
	snd.post(uk.SendWR{WrID: 2, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 10, LKey: src.stag}},
		AHID: 2, RemoteQPN: wire.QPNMask, RemoteQKey: 0x4444})
	snd.waitSend(1)
	w.settle()
	if s2 := an.eng.Stats(); s2.Loopback != s.Loopback || s2.Link.TxFrames != 2 || s2.Gate.Drops[qp.DropMcastNoGroup] != 0 {
		t.Errorf("to a group without local members: loopback %+v, link tx %d, gate drops %v", s2.Loopback,
			s2.Link.TxFrames, s2.Gate.Drops)
	}
}

// readPcap returns the frames of a pcap file.
func readPcap(t testing.TB, b *bytes.Buffer) [][]byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), data...))
	}
}

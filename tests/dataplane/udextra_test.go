package dataplane_test

import (
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestUDMulticastGSIAndVLAN: a datagram to DestQP 0xFFFFFF and a multicast
// address reaches every UD QP of the group (and not a UD QP outside it); a
// datagram to QP1 is checked against the GSI Q_Key and QP1 sends with it
// whatever the WQE says (IBTA C10-15); an AH with a VLAN tag puts the
// frame on the VLAN and the receive CQE reports the tag.
func TestUDMulticastGSIAndVLAN(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	an, bn := w.nodes[0], w.nodes[1]
	an.env.SetARP(1, bn.mac)
	an.env.SetARP(2, [6]byte{0x01, 0x00, 0x5e, 0x01, 0x01, 0x01})
	a := an.newEP(true, nil)
	m1 := bn.newEP(true, nil, func(s *devtest.QPSpec) { s.QKey = 0x4444 })
	m2 := bn.newEP(true, nil, func(s *devtest.QPSpec) { s.QKey = 0x4444 })
	out := bn.newEP(true, nil, func(s *devtest.QPSpec) { s.QKey = 0x4444 })
	gsi := bn.newEP(true, nil, func(s *devtest.QPSpec) { s.ID = 1; s.QP1 = true; s.QKey = 0 })
	for _, e := range []*ep{a, m1, m2, out, gsi} {
		e.n.env.Connect(e.q)
	}
	group := netip.MustParseAddr("239.1.1.1")
	bn.env.CreateMcast(5, group, [6]byte{0x01, 0x00, 0x5e, 0x01, 0x01, 0x01}, m1.q.Spec.ID, m2.q.Spec.ID)
	an.env.CreateAH(devtest.AHSpec{Index: 1, PD: a.pd, SrcMAC: an.mac, ARPIdx: 2, SrcIP: an.ip, DestIP: group, HopLimit: 8})
	an.env.CreateAH(devtest.AHSpec{Index: 2, PD: a.pd, SrcMAC: an.mac, ARPIdx: 1, SrcIP: an.ip, DestIP: bn.ip, HopLimit: 64,
		InsVLAN: true, VLAN: 5<<13 | 100})
	src := an.newMR(4096, devtest.RightsAll, a.pd)
	dst := bn.newMR(4*4096, devtest.RightsAll, m1.pd)
	pattern(src.bytes(), 11)
	for i, e := range []*ep{m1, m2, out, gsi} {
		e.recv(uk.RecvWR{WrID: uint64(i), SGList: []uk.SGE{{Addr: dst.va + uint64(i)*4096, Length: 4096, LKey: dst.stag}}})
	}
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 300, LKey: src.stag}},
		AHID: 1, RemoteQPN: wire.QPNMask, RemoteQKey: 0x4444})
	a.waitSend(1)
	for i, e := range []*ep{m1, m2} {
		rc := e.waitRecv(1)[0]
		wantWC(t, rc, uk.WCSuccess, uk.WCRecv, 340, "multicast member")
		mustEqual(t, dst.bytes()[uint64(i)*4096+40:uint64(i)*4096+340], src.bytes()[:300], "multicast payload")
	}
	w.settle()
	if got := poll(t, out.ur, nil); len(got) != 0 {
		t.Fatalf("a QP outside the group received %+v", got)
	}

	// GSI: an ordinary UD QP cannot send the controlled GSI Q_Key (a Q_Key
	// with the high bit set selects its own, IBTA C10-15), so QP1 drops
	// it; QP1 itself sends with 0x80010000 whatever its WQE says.
	a.post(uk.SendWR{WrID: 2, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 8, LKey: src.stag}},
		AHID: 2, RemoteQPN: 1, RemoteQKey: wire.GSIQKey})
	a.waitSend(1)
	w.settle()
	if got := poll(t, gsi.ur, nil); len(got) != 0 {
		t.Fatalf("GSI took a datagram from a non-GSI Q_Key: %+v", got)
	}
	if s, _ := bn.eng.QPStats(1); s.Drops[qp.DropQKey] != 1 {
		t.Fatalf("GSI Q_Key drops %v", s.Drops)
	}
	agsi := an.newEP(true, nil, func(s *devtest.QPSpec) { s.ID = 1; s.QP1 = true; s.QKey = 0 })
	an.env.Connect(agsi.q)
	agsi.post(uk.SendWR{WrID: 3, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 8, LKey: src.stag}},
		AHID: 2, RemoteQPN: 1, RemoteQKey: 0x1234})
	agsi.waitSend(1)
	rc := gsi.waitRecv(1)[0]
	wantWC(t, rc, uk.WCSuccess, uk.WCRecv, 48, "GSI")
	if rc.SrcQP != 1 || rc.Flags&uk.WCWithVLAN == 0 || rc.VLANID != 100 || rc.SL != 5 {
		t.Fatalf("GSI completion (VLAN-tagged AH) %+v", rc)
	}
}

// TestStagesAndCounters: every stage of a transfer charges the meter
// (doorbell, WQE fetch, payload DMA both ways, packet build, wire time,
// receive, CQE write, event), and the function's hardware counters count
// the packets and messages (GATHER_STATS reports them).
func TestStagesAndCounters(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	src := a.n.newMR(8192, devtest.RightsAll, a.pd)
	dst := b.n.newMR(8192, devtest.RightsAll, b.pd)
	b.n.env.ArmCQ(b.rcq.ID, b.rcq.Shadow.IOVA(), true) // a CEQE for the next completion
	b.recv(uk.RecvWR{WrID: 1, SGList: []uk.SGE{{Addr: dst.va, Length: 8192, LKey: dst.stag}}})
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 3000, LKey: src.stag}}},
		uk.SendWR{WrID: 2, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 100, LKey: src.stag}},
			RemoteAddr: dst.va, RKey: dst.stag},
		uk.SendWR{WrID: 3, Opcode: uk.WRRDMARead, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 100, LKey: src.stag}},
			RemoteAddr: dst.va, RKey: dst.stag})
	a.waitSend(3)
	b.waitRecv(1)
	for i, n := range w.nodes {
		m := n.env.Dev.Meter()
		stages := []timing.Stage{timing.WQEFetch, timing.PayloadDMARead, timing.PacketBuild, timing.Serialise,
			timing.Receive, timing.PayloadDMAWrite, timing.CQEWrite}
		if i == 0 {
			stages = append(stages, timing.Doorbell)
		} else {
			stages = append(stages, timing.Event)
		}
		for _, s := range stages {
			if st := m.Stage(s); st.Count == 0 || st.Cycles == 0 {
				t.Errorf("node %d: stage %v not charged: %+v", i, s, st)
			}
		}
	}
	fa := &a.n.env.Dev.HWStats().Function
	fb := &b.n.env.Dev.HWStats().Function
	tx := a.n.eng.Stats().Port.TxPackets
	if fa.Get(qp.StatIP4TxPkts) != tx || fa.Get(qp.StatUDPTxPkts) != tx || fa.Get(qp.StatRDMATxSnds) != 1 ||
		fa.Get(qp.StatRDMATxWrs) != 1 || fa.Get(qp.StatRDMATxRds) != 1 {
		t.Errorf("A counters: ip4 tx %d udp tx %d snds %d wrs %d rds %d (packets %d)", fa.Get(qp.StatIP4TxPkts),
			fa.Get(qp.StatUDPTxPkts), fa.Get(qp.StatRDMATxSnds), fa.Get(qp.StatRDMATxWrs), fa.Get(qp.StatRDMATxRds), tx)
	}
	if fb.Get(qp.StatIP4RxPkts) != tx || fb.Get(qp.StatRDMARxSnds) != 1 || fb.Get(qp.StatRDMARxWrs) != 1 || fb.Get(qp.StatRDMARxRds) != 1 {
		t.Errorf("B counters: ip4 rx %d snds %d wrs %d rds %d", fb.Get(qp.StatIP4RxPkts), fb.Get(qp.StatRDMARxSnds),
			fb.Get(qp.StatRDMARxWrs), fb.Get(qp.StatRDMARxRds))
	}
	if s := a.n.eng.Stats(); s.Meter.Total == 0 || s.QPs != 1 || !s.PortUp {
		t.Errorf("engine stats %+v", s)
	}
}

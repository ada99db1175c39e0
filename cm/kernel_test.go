package cm

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// rxeCapture holds an rping between two rdma_rxe devices of Linux 6.1
// (testdata/captures/README.md): its CM MADs were written by the kernel's
// cm.c.
const rxeCapture = "../testdata/captures/rxe-rc-uc-ud-ipv4-mtu1024.pcap"

// kernelMADs returns the CM MADs of the capture, in order, with the GIDs
// of their sender and receiver.
func kernelMADs(t *testing.T) (mads [][]byte, src, dst [][16]byte) {
	t.Helper()
	fh, err := os.Open(rxeCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		var f wire.Frame
		if wire.ParseFrame(data, &f) != nil {
			continue
		}
		p := &f.Packet
		if p.DETH == nil || p.BTH.DestQP() != 1 || len(p.Payload) < mad.Size || p.Payload[1] != mad.ClassCM {
			continue
		}
		mads = append(mads, append([]byte(nil), p.Payload[:mad.Size]...))
		src = append(src, f.Src().Addr().As16())
		dst = append(dst, f.Dst().Addr().As16())
	}
	return mads, src, dst
}

// sameMAD compares our MAD with the kernel's, the transaction ID aside
// (the kernel's carries its MAD agent's number and the comm ID in host
// byte order; both are opaque to the peer).
func sameMAD(t *testing.T, what string, ours, kernel []byte) {
	t.Helper()
	o := append([]byte(nil), ours...)
	mad.Header(o).SetTID(mad.Header(kernel).TID())
	if bytes.Equal(o, kernel) {
		return
	}
	for i := range o {
		if o[i] != kernel[i] {
			t.Errorf("%s: byte %d (message offset %d): ours %#02x, kernel %#02x", what, i, i-mad.HeaderSize, o[i], kernel[i])
		}
	}
}

// TestKernelEncodings: given the parameters the kernel's connection used,
// our CM writes the REQ, REP, RTU, DREQ and DREP byte for byte as the
// Linux 6.1 kernel's cm.c did for rping, and accepts the kernel's.
func TestKernelEncodings(t *testing.T) {
	mads, src, dst := kernelMADs(t)
	want := []mad.AttrID{mad.AttrREQ, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ, mad.AttrDREP}
	if len(mads) != len(want) {
		t.Fatalf("%d CM MADs in the capture, want %d", len(mads), len(want))
	}
	for i, m := range mads {
		if a, err := mad.Check(m); err != nil || a != want[i] {
			t.Fatalf("MAD %d: %v %v", i, a, err)
		}
	}
	kreq, krep, krtu, kdreq, kdrep := mad.REQ(mads[0]), mad.REP(mads[1]), mads[2], mad.DREQ(mads[3]), mads[4]
	active, passive := src[0], dst[0]

	// Two Managers with the kernel's CA GUIDs and rxe's CA ACK delay (15),
	// whose next comm IDs are the kernel's.
	f := newFabric(t)
	mk := func(n byte, gid [16]byte, guid uint64, next uint32) *node {
		nd := f.node(n, func(c *Config) { c.CAGUID, c.CAACKDelay = guid, 15; c.LookupGID = nil })
		delete(f.nodes, nd.gid)
		nd.gid = gid
		f.nodes[gid] = nd
		nd.m.next = next - 1
		return nd
	}
	a := mk(1, active, kreq.LocalCAGUID(), kreq.LocalCommID())
	b := mk(2, passive, krep.LocalCAGUID(), krep.CommIDs().LocalCommID())
	f.drop = func(packet) bool { return true }  // each side gets the kernel's MADs, not ours
	b.m.next = krep.CommIDs().LocalCommID() - 2 // the listener takes one
	b.listen(kreq.ServiceID())

	// The active side's REQ.
	pp := kreq.Primary()
	id := a.newID()
	if err := id.SendREQ(&REQParam{
		Path: Path{SGID: active, DGID: passive, HopLimit: pp.HopLimit(), TrafficClass: pp.TrafficClass(),
			FlowLabel: pp.FlowLabel(), Rate: pp.PacketRate(), MTU: MTU(kreq.PathMTU()), PacketLifeTime: 18},
		ServiceID: kreq.ServiceID(), QPN: kreq.LocalQPN(), QPType: QPTypeRC, StartingPSN: kreq.StartingPSN(),
		PrivateData: kreq.PrivateData(), ResponderResources: kreq.ResponderResources(), InitiatorDepth: kreq.InitiatorDepth(),
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, RetryCount: 7, RNRRetryCount: 7, MaxCMRetries: 15,
	}); err != nil {
		t.Fatal(err)
	}
	sameMAD(t, "REQ", f.lastSent(a, mad.AttrREQ), mads[0])

	// The passive side takes the kernel's REQ and answers with the REP the
	// kernel sent.
	b.m.Deliver(Addr{SGID: passive, DGID: active, HopLimit: 64, RemoteQPN: 1}, mads[0])
	ev, idb := b.last[EventREQReceived], b.ids[EventREQReceived]
	if ev == nil {
		t.Fatalf("the kernel's REQ was not accepted: %+v", b.m.Stats())
	}
	if r := ev.REQ; r.RemoteQPN != 0x1c || r.Path.MTU != MTU1024 || r.Path.PacketLifeTime != 18 || r.RetryCount != 7 ||
		r.ServiceID != 0x1061c06 {
		t.Errorf("REQ event %+v", r)
	}
	if err := idb.SendREP(&REPParam{QPN: krep.LocalQPN(), StartingPSN: krep.StartingPSN(),
		ResponderResources: krep.ResponderResources(), InitiatorDepth: krep.InitiatorDepth(),
		FailoverAccepted: krep.FailoverAccepted(), RNRRetryCount: krep.RNRRetryCount(), PrivateData: krep.PrivateData()}); err != nil {
		t.Fatal(err)
	}
	sameMAD(t, "REP", f.lastSent(b, mad.AttrREP), mads[1])

	// The active side takes the kernel's REP: RTU, later DREQ.
	a.m.Deliver(Addr{SGID: active, DGID: passive, HopLimit: 64, RemoteQPN: 1}, mads[1])
	if a.last[EventREPReceived] == nil {
		t.Fatalf("the kernel's REP was not accepted: %+v", a.m.Stats())
	}
	if err := id.SendRTU(mad.RTU(krtu).PrivateData()); err != nil {
		t.Fatal(err)
	}
	sameMAD(t, "RTU", f.lastSent(a, mad.AttrRTU), krtu)
	b.m.Deliver(Addr{SGID: passive, DGID: active, HopLimit: 64, RemoteQPN: 1}, krtu)
	mustState(t, "passive after the kernel's RTU", idb, StateEstablished)

	// Both QPs' attributes agree with what the kernel exchanged.
	artr, _ := idb.InitQPAttr(QPStateRTR)
	if artr.DestQPN != kreq.LocalQPN() || artr.RQPSN != krep.StartingPSN() {
		t.Errorf("passive RTR %+v", artr)
	}
	// rxe's CA ACK delay 15 and packet lifetime 18: local ACK timeout 19,
	// as the kernel's REQ carries it; timewait 2^(19-8) ms.
	if arts, _ := id.InitQPAttr(QPStateRTS); arts.Timeout != 19 || pp.LocalACKTimeout() != 19 {
		t.Errorf("active RTS timeout %d, the kernel's REQ %d", arts.Timeout, pp.LocalACKTimeout())
	}

	if err := id.SendDREQ(kdreq.PrivateData()); err != nil {
		t.Fatal(err)
	}
	sameMAD(t, "DREQ", f.lastSent(a, mad.AttrDREQ), mads[3])
	b.m.Deliver(Addr{SGID: passive, DGID: active, HopLimit: 64, RemoteQPN: 1}, mads[3])
	if b.last[EventDREQReceived] == nil {
		t.Fatalf("the kernel's DREQ was not accepted: %+v", b.m.Stats())
	}
	if err := idb.SendDREP(mad.DREP(kdrep).PrivateData()); err != nil {
		t.Fatal(err)
	}
	sameMAD(t, "DREP", f.lastSent(b, mad.AttrDREP), kdrep)
	a.m.Deliver(Addr{SGID: active, DGID: passive, HopLimit: 64, RemoteQPN: 1}, kdrep)
	mustState(t, "active after the kernel's DREP", id, StateTimewait)

	f.advance(2047 * time.Millisecond)
	mustState(t, "active in timewait", id, StateTimewait)
	f.advance(time.Millisecond)
	mustState(t, "active after timewait", id, StateIdle)
}

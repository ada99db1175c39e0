package rdmacm

import (
	"bytes"
	"context"

	"github.com/irdma-emu/irdma-emu/attach"
	"syscall"
	"testing"
)

// TestSIDR: the UDP port space resolves a service with SIDR (udaddy's
// sequence): CONNECT sends SIDR_REQ, the listener's ACCEPT answers with
// its QPN and the RDMA CM Q_Key, and the requester gets ESTABLISHED with
// the address vector, QPN and Q_Key to send to.
func TestSIDR(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	b := newDevice(t, w, "10.0.0.2", 2)
	srv, cli := b.open(t), a.open(t)
	lid := srv.createID(1, PSUDP)
	srv.must("bind", srv.bindIP(lid, "0.0.0.0:7174"))
	srv.must("listen", srv.listen(lid, 8))
	cid := cli.createID(2, PSUDP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:7174", 2000))
	cli.expect(EventAddrResolved)
	init, e := cli.initQPAttr(cid, qpsInit)
	cli.must("INIT", e)
	if le.Uint32(init[qaMask:])&maskQKey == 0 || le.Uint32(init[qaQKey:]) != UDPQKey {
		t.Fatalf("UD INIT mask %#x qkey %#x", le.Uint32(init[qaMask:]), le.Uint32(init[qaQKey:]))
	}
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x31, []byte("udp")))
	req := srv.expect(EventConnectRequest)
	if !bytes.HasPrefix(req.param[udPrivateData:], []byte("udp")) || req.param[udAHAttr+ahIsGlobal] != 1 {
		t.Fatalf("SIDR request param % x", req.param[:48])
	}
	srv.must("accept", srv.accept(req.id, 3, 0x41, true))
	est := cli.expect(EventEstablished)
	if le.Uint32(est.param[udQPN:]) != 0x41 || le.Uint32(est.param[udQKey:]) != UDPQKey ||
		!bytes.Equal(est.param[udAHAttr:udAHAttr+16], mapped(10, 0, 0, 2)) {
		t.Fatalf("ESTABLISHED ud qpn %#x qkey %#x dgid % x", le.Uint32(est.param[udQPN:]),
			le.Uint32(est.param[udQKey:]), est.param[udAHAttr:udAHAttr+16])
	}
}

// TestListeners: a specific and a wildcard listener share a port; a
// request goes to the listener of its destination address.
func TestListeners(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	b := newDevice(t, w, "10.0.0.2", 2)
	s1, s2, cli := b.open(t), b.open(t), a.open(t)
	wild := s1.createID(11, PSTCP)
	s1.must("bind any", s1.bindIP(wild, "0.0.0.0:8000"))
	s1.must("listen any", s1.listen(wild, 8))
	spec := s2.createID(12, PSTCP)
	if e := s2.bindIP(spec, "10.0.0.2:8000"); e != syscall.EADDRINUSE {
		t.Fatalf("specific bind beside a wildcard listener: %v, want EADDRINUSE", e)
	}
	// Another port: both listeners, then a second listen on the same
	// address is refused.
	l1 := s1.createID(13, PSTCP)
	s1.must("bind", s1.bindIP(l1, "10.0.0.2:8001"))
	s1.must("listen", s1.listen(l1, 8))
	dup := s2.createID(14, PSTCP)
	if e := s2.bindIP(dup, "10.0.0.2:8001"); e != syscall.EADDRINUSE {
		t.Fatalf("second bind: %v", e)
	}
	cid := cli.createID(21, PSTCP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:8000", 2000))
	cli.expect(EventAddrResolved)
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x10, nil))
	if req := s1.expect(EventConnectRequest); req.uid != 11 {
		t.Fatalf("request reached listener uid %d", req.uid)
	}
}

// TestDeviceRemoval: the daemon going away tells every id.
func TestDeviceRemoval(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c := d.open(t)
	h1 := c.createID(1, PSTCP)
	c.must("bind", c.bindIP(h1, "10.0.0.1:9000"))
	c.must("listen", c.listen(h1, 1))
	h2 := c.createID(2, PSUDP)
	go d.p.Remove(context.Background())
	got := map[uint64]bool{}
	for range 2 {
		got[c.expect(EventDeviceRemoval).uid] = true
	}
	if !got[1] || !got[2] {
		t.Fatalf("DEVICE_REMOVAL reached %v", got)
	}
	if _, _, err := d.p.Open(&attach.Peer{Hello: attach.Hello{Version: 1, Flags: attach.HelloRdmaCM}}); err == nil {
		t.Fatal("a new channel opened on a removed device")
	}
	_ = h2
}

// TestMigrate: MIGRATE_ID moves an id and its queued event to another
// channel of the same process, and answers its delivered-event count.
func TestMigrate(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c1, c2 := d.open(t), d.open(t)
	h := c1.createID(5, PSTCP)
	c1.must("resolve", c1.resolveIP(h, "10.0.0.1:1", 1000))
	for !c1.readable() {
		waitReadable(c1)
	}
	b := make([]byte, sizeMigrateID)
	le.PutUint64(b, c2.respAddr())
	le.PutUint32(b[8:], h)
	le.PutUint32(b[12:], c1.token)
	c2.must("migrate", c2.raw(CmdMigrateID, 4, b))
	if c1.readable() {
		t.Fatal("the old channel still has the event")
	}
	if e := c2.expect(EventAddrResolved); e.uid != 5 {
		t.Fatalf("migrated event uid %d", e.uid)
	}
	if _, e := c1.destroyID(h); e != syscall.EINVAL {
		t.Fatalf("destroy on the old channel: %v, want EINVAL", e)
	}
	if n, e := c2.destroyID(h); e != 0 || n != 1 {
		t.Fatalf("destroy on the new channel: %d %v", n, e)
	}
}

// TestMulticast: a join completes at once on RoCE (no SA) with the
// group's GID, QPN 0xFFFFFF and the RDMA CM Q_Key; LEAVE_MCAST answers the
// join's delivered events.
func TestMulticast(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c := d.open(t)
	h := c.createID(1, PSUDP)
	c.must("bind", c.bindIP(h, "10.0.0.1:0"))
	b := make([]byte, sizeJoinIPMcast)
	le.PutUint64(b, c.respAddr())
	le.PutUint64(b[8:], 0x77)
	copy(b[16:44], sockaddr("239.1.2.3:0"))
	le.PutUint32(b[44:], h)
	c.must("join", c.raw(CmdJoinIPMcast, 4, b))
	mh := le.Uint32(c.resp)
	ev := c.expect(EventMulticastJoin)
	if ev.uid != 0x77 || ev.id != mh || le.Uint32(ev.param[udQPN:]) != 0xffffff || le.Uint32(ev.param[udQKey:]) != UDPQKey ||
		!bytes.Equal(ev.param[udAHAttr:udAHAttr+16], mapped(239, 1, 2, 3)) || ev.param[udAHAttr+ahSGIDIndex] != 1 {
		t.Fatalf("MULTICAST_JOIN uid %#x id %d/%d param % x", ev.uid, ev.id, mh, ev.param[:40])
	}
	l := make([]byte, sizeDestroyID)
	le.PutUint64(l, c.respAddr())
	le.PutUint32(l[8:], mh)
	c.must("leave", c.raw(CmdLeaveMcast, 4, l))
	if n := le.Uint32(c.resp); n != 1 {
		t.Fatalf("LEAVE_MCAST events %d, want 1", n)
	}
	if e := c.raw(CmdLeaveMcast, 4, l); e != syscall.ENOENT {
		t.Fatalf("second leave: %v", e)
	}
	if n, _ := c.destroyID(h); n != 1 {
		t.Fatalf("DESTROY_ID events %d, want 1 (the join's)", n)
	}
}

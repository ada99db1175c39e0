package rdmacm

import (
	"bytes"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm/mad"
)

// TestConnectDisconnect runs librdmacm's sequence of commands for one RC
// connection between two devices (rdma_resolve_addr … rdma_accept,
// rdma_disconnect, rdma_destroy_id) and checks what each side is told.
func TestConnectDisconnect(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	b := newDevice(t, w, "10.0.0.2", 2)
	srv, cli := b.open(t), a.open(t)

	lid := srv.createID(0x5001, PSTCP)
	srv.must("bind", srv.bindIP(lid, "10.0.0.2:7174"))
	srv.must("listen", srv.listen(lid, 4))
	if srv.readable() {
		t.Fatal("readable with no event queued")
	}

	cid := cli.createID(0xc001, PSTCP)
	cli.must("resolve addr", cli.resolveIP(cid, "10.0.0.2:7174", 2000))
	cli.expect(EventAddrResolved)
	route, e := cli.queryRoute(cid)
	cli.must("query route", e)
	if be.Uint64(route) != 0x0200_00ff_fe00_0001 || route[196] != 1 {
		t.Fatalf("QUERY_ROUTE node_guid %#x port %d", be.Uint64(route), route[196])
	}
	cli.must("resolve route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	route, _ = cli.queryRoute(cid)
	if le.Uint32(route[192:]) != 1 || !bytes.Equal(route[8+prDGID:8+prDGID+16], mapped(10, 0, 0, 2)) ||
		!bytes.Equal(route[8+prSGID:8+prSGID+16], mapped(10, 0, 0, 1)) || be.Uint16(route[8+prPKey:]) != 0xffff {
		t.Fatalf("route record % x", route[8:72])
	}

	// Before CONNECT: INIT with no access (cma_ib_init_qp_attr).
	qa, e := cli.initQPAttr(cid, qpsInit)
	cli.must("init_qp_attr INIT", e)
	if le.Uint32(qa) != maskState|maskPKeyIndex|maskPort|maskAccessFlags || qa[qaPortNum] != 1 {
		t.Fatalf("INIT mask %#x port %d", le.Uint32(qa), qa[qaPortNum])
	}

	// Watch the REQ and REP on the wire: their starting PSNs are what the
	// QPs' attributes must agree with (not merely with each other).
	var reqPSN, repPSN atomic.Uint32
	w.mu.Lock()
	w.drop = func(b []byte) bool {
		switch mad.Header(b).AttrID() {
		case mad.AttrREQ:
			reqPSN.Store(mad.REQ(b).StartingPSN() | 1<<31)
		case mad.AttrREP:
			repPSN.Store(mad.REP(b).StartingPSN() | 1<<31)
		}
		return false
	}
	w.mu.Unlock()
	cli.must("connect", cli.connect(cid, 0x111, []byte("hello")))
	req := srv.expect(EventConnectRequest)
	if req.uid != 0x5001 || req.id == lid {
		t.Fatalf("CONNECT_REQUEST uid %#x id %d (listener %d)", req.uid, req.id, lid)
	}
	cp := req.param
	if le.Uint32(cp[cpQPN:]) != 0x111 || !bytes.HasPrefix(cp[cpPrivateData:], []byte("hello")) ||
		cp[cpPrivateDataLen] != maxREQUserData || cp[cpRespRes] != 4 || cp[cpInitDepth] != 4 {
		t.Fatalf("request param qpn %#x len %d rr %d id %d", le.Uint32(cp[cpQPN:]), cp[cpPrivateDataLen], cp[cpRespRes], cp[cpInitDepth])
	}
	nid := req.id
	// The passive QP's RTR: the requester's QPN and PSN.
	rtr, e := srv.initQPAttr(nid, qpsRTR)
	srv.must("passive RTR", e)
	if le.Uint32(rtr[qaDestQPN:]) != 0x111 || rtr[qaAHAttr+ahIsGlobal] != 1 ||
		!bytes.Equal(rtr[qaAHAttr:qaAHAttr+16], mapped(10, 0, 0, 1)) || rtr[qaAHAttr+ahSGIDIndex] != 1 {
		t.Fatalf("passive RTR dest %#x av % x", le.Uint32(rtr[qaDestQPN:]), rtr[qaAHAttr:qaAHAttr+32])
	}
	srts, _ := srv.initQPAttr(nid, qpsRTS)
	srv.must("accept", srv.accept(nid, 0x5002, 0x222, true))

	resp := cli.expect(EventConnectResponse)
	if le.Uint32(resp.param[cpQPN:]) != 0x222 {
		t.Fatalf("CONNECT_RESPONSE qpn %#x", le.Uint32(resp.param[cpQPN:]))
	}
	crtr, _ := cli.initQPAttr(cid, qpsRTR)
	crts, _ := cli.initQPAttr(cid, qpsRTS)
	// Each side's receive PSN is the other's send PSN.
	if le.Uint32(crtr[qaRQPSN:]) != le.Uint32(srts[qaSQPSN:]) || le.Uint32(rtr[qaRQPSN:]) != le.Uint32(crts[qaSQPSN:]) {
		t.Fatalf("PSNs: client rq %#x server sq %#x, server rq %#x client sq %#x",
			le.Uint32(crtr[qaRQPSN:]), le.Uint32(srts[qaSQPSN:]), le.Uint32(rtr[qaRQPSN:]), le.Uint32(crts[qaSQPSN:]))
	}
	// cm.c: the PSN a side puts in its REQ or REP is the one its own
	// receive queue expects (ib_send_cm_req/ib_send_cm_rep set rq_psn from
	// it); a kernel peer (rdma_rxe) NAKs every packet otherwise.
	if q, p := reqPSN.Load(), repPSN.Load(); q>>31 == 0 || p>>31 == 0 ||
		le.Uint32(crtr[qaRQPSN:]) != q&0xffffff || le.Uint32(rtr[qaRQPSN:]) != p&0xffffff {
		t.Fatalf("PSNs: REQ %#x REP %#x, client rq %#x, server rq %#x", q, p, le.Uint32(crtr[qaRQPSN:]), le.Uint32(rtr[qaRQPSN:]))
	}
	if le.Uint32(crtr[qaDestQPN:]) != 0x222 || crtr[qaMaxDestRdAtom] != 2 || crts[qaMaxRdAtomic] != 2 {
		t.Fatalf("active RTR dest %#x max_dest_rd %d RTS max_rd %d", le.Uint32(crtr[qaDestQPN:]), crtr[qaMaxDestRdAtom], crts[qaMaxRdAtomic])
	}
	cli.must("accept (RTU)", cli.accept(cid, 0, 0, false))
	est := srv.expect(EventEstablished)
	if est.uid != 0x5002 || est.id != nid {
		t.Fatalf("ESTABLISHED uid %#x id %d", est.uid, est.id)
	}

	cli.must("disconnect", cli.simple(CmdDisconnect, cid, sizeDisconnect))
	srv.expect(EventDisconnected)
	srv.must("disconnect (DREP)", srv.simple(CmdDisconnect, nid, sizeDisconnect))
	cli.expect(EventDisconnected)

	// DESTROY_ID counts the events delivered on each id.
	for _, c := range []struct {
		ch   *channel
		h    uint32
		want int
	}{{cli, cid, 4}, {srv, nid, 2}, {srv, lid, 1}} {
		n, e := c.ch.destroyID(c.h)
		c.ch.must("destroy", e)
		if n != c.want {
			t.Errorf("DESTROY_ID %d: %d events reported, want %d", c.h, n, c.want)
		}
	}
	for _, d := range []*device{a, b} {
		if got := d.p.Counts(); got.IDs != 0 || got.Listens != 0 {
			t.Errorf("after destroy: %+v", got)
		}
	}
}

func mapped(a, b, c, d byte) []byte { return []byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }

// TestRejectedNoListener: a REQ to a port nobody listens on is rejected
// by the peer's CM with reason 8, invalid service ID (IBTA Table 112),
// which the program sees as RDMA_CM_EVENT_REJECTED with that status.
func TestRejectedNoListener(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	newDevice(t, w, "10.0.0.2", 2)
	cli := a.open(t)
	cid := cli.createID(1, PSTCP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:9", 2000))
	cli.expect(EventAddrResolved)
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x10, nil))
	rej := cli.expect(EventRejected)
	if rej.status != 8 {
		t.Fatalf("REJECTED status %d, want 8", rej.status)
	}
}

// TestCloseDestroysIDs: closing the channel in mid-connection destroys its
// ids, and the peer is told (REJ before the connection, DREQ after).
func TestCloseDestroysIDs(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	b := newDevice(t, w, "10.0.0.2", 2)
	srv, cli := b.open(t), a.open(t)
	lid := srv.createID(7, PSTCP)
	srv.must("bind", srv.bindIP(lid, "0.0.0.0:7000"))
	srv.must("listen", srv.listen(lid, 0))
	cid := cli.createID(8, PSTCP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:7000", 2000))
	cli.expect(EventAddrResolved)
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x10, nil))
	req := srv.expect(EventConnectRequest)
	srv.must("accept", srv.accept(req.id, 9, 0x20, true))
	cli.expect(EventConnectResponse)
	cli.must("rtu", cli.accept(cid, 0, 0, false))
	srv.expect(EventEstablished)
	srv.close() // the server program dies
	cli.expect(EventDisconnected)
	if got := b.p.Counts(); got.IDs != 0 || got.Channels != 0 || got.Listens != 0 {
		t.Fatalf("server device after close: %+v", got)
	}
	cli.must("disconnect", cli.simple(CmdDisconnect, cid, sizeDisconnect))
	if _, e := cli.destroyID(cid); e != 0 {
		t.Fatal(e)
	}
}

var _ = syscall.EINVAL

// TestPassiveDisconnect: the passive side disconnects first; both sides
// get DISCONNECTED.
func TestPassiveDisconnect(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	b := newDevice(t, w, "10.0.0.2", 2)
	srv, cli := b.open(t), a.open(t)
	lid := srv.createID(1, PSTCP)
	srv.must("bind", srv.bindIP(lid, "10.0.0.2:7001"))
	srv.must("listen", srv.listen(lid, 1))
	cid := cli.createID(2, PSTCP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:7001", 2000))
	cli.expect(EventAddrResolved)
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x10, nil))
	req := srv.expect(EventConnectRequest)
	srv.must("accept", srv.accept(req.id, 3, 0x20, true))
	cli.expect(EventConnectResponse)
	cli.must("rtu", cli.accept(cid, 0, 0, false))
	srv.expect(EventEstablished)
	srv.must("disconnect", srv.simple(CmdDisconnect, req.id, sizeDisconnect))
	cli.expect(EventDisconnected)
	cli.must("disconnect (DREP)", cli.simple(CmdDisconnect, cid, sizeDisconnect))
	srv.expect(EventDisconnected)
}

// TestOtherProcess: a channel token of another process does not name a
// channel for MIGRATE_ID (the kernel's fdget sees only the caller's
// descriptors).
func TestOtherProcess(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	mine := d.open(t)
	h := mine.createID(1, PSTCP)
	s, _, err := d.p.Open(&attach.Peer{Hello: attach.Hello{Version: 1, Flags: attach.HelloRdmaCM},
		Cred: &unix.Ucred{Pid: int32(os.Getpid()) + 1}})
	if err != nil {
		t.Fatal(err)
	}
	theirs := &channel{t: t, ch: s.(*Channel), resp: make([]byte, 64)}
	defer theirs.close()
	b := make([]byte, sizeMigrateID)
	le.PutUint32(b[8:], h)
	le.PutUint32(b[12:], mine.token)
	if e := theirs.raw(CmdMigrateID, 4, b); e != syscall.ENOENT {
		t.Fatalf("MIGRATE_ID from another process: %v, want ENOENT", e)
	}
	if _, e := theirs.destroyID(h); e != syscall.EINVAL {
		t.Fatalf("DESTROY_ID from another process: %v, want EINVAL", e)
	}
}

// TestConnectAgain: after a REJ the id stays in CONNECT, as in cma.c: a
// second CONNECT is EINVAL and the program makes a new id.
func TestConnectAgain(t *testing.T) {
	w := newWire()
	a := newDevice(t, w, "10.0.0.1", 1)
	newDevice(t, w, "10.0.0.2", 2)
	cli := a.open(t)
	cid := cli.createID(1, PSTCP)
	cli.must("resolve", cli.resolveIP(cid, "10.0.0.2:7002", 2000))
	cli.expect(EventAddrResolved)
	cli.must("route", cli.simple(CmdResolveRoute, cid, sizeResolveRoute))
	cli.expect(EventRouteResolved)
	cli.must("connect", cli.connect(cid, 0x10, nil))
	cli.expect(EventRejected)
	if e := cli.connect(cid, 0x10, nil); e != syscall.EINVAL {
		t.Fatalf("CONNECT after REJ: %v, want EINVAL", e)
	}
	if n, e := cli.destroyID(cid); e != 0 || n != 3 {
		t.Fatalf("DESTROY_ID: %d events, %v", n, e)
	}
	if got := a.p.Counts(); got.IDs != 0 {
		t.Fatalf("after destroy: %+v", got)
	}
}

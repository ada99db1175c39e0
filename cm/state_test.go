package cm

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm/mad"
)

// connect runs REQ/REP/RTU between a (active) and b (passive, listening)
// and returns both IDs in ESTABLISHED.
func connect(t *testing.T, f *fabric, a, b *node, qpnA, qpnB, psnA, psnB uint32) (*ID, *ID) {
	t.Helper()
	react := func(id *ID, ev *Event) error {
		switch ev.Type {
		case EventREQReceived:
			return id.SendREP(&REPParam{QPN: qpnB, StartingPSN: psnB, ResponderResources: 4, InitiatorDepth: 4,
				RNRRetryCount: 7, PrivateData: []byte("rep-pd")})
		case EventREPReceived:
			return id.SendRTU([]byte("rtu-pd"))
		}
		return nil
	}
	a.react, b.react = react, react
	ida := a.newID()
	if err := ida.SendREQ(reqParam(a, b, qpnA, psnA, "req-pd")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idb := b.ids[EventREQReceived]
	if idb == nil {
		t.Fatalf("no REQ at the passive side; it saw %q", b.seen())
	}
	mustState(t, "active", ida, StateEstablished)
	mustState(t, "passive", idb, StateEstablished)
	a.react, b.react = nil, nil
	return ida, idb
}

func TestConnectDisconnect(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	l := b.listen(svc)
	ida, idb := connect(t, f, a, b, 0x11, 0x22, 0x100, 0x200)
	mustSeen(t, a, "REP_RECEIVED")
	mustSeen(t, b, "REQ_RECEIVED RTU_RECEIVED")
	if b.last[EventREQReceived].Listen != l {
		t.Error("REQ event does not name the listener")
	}
	req := b.last[EventREQReceived].REQ
	if req.RemoteQPN != 0x11 || req.StartingPSN != 0x100 || req.ServiceID != svc || req.Path.DGID != a.gid ||
		req.Path.SGID != b.gid || req.Path.MTU != MTU1024 || req.Path.FlowLabel != 0x1234 || req.RetryCount != 7 ||
		req.RemoteCAGUID != 0x0200c9fffe000001 {
		t.Errorf("REQ event %+v", req)
	}
	if !hasPrefix(b.last[EventREQReceived].PrivateData, "req-pd") || len(b.last[EventREQReceived].PrivateData) != 92 {
		t.Errorf("REQ private data %q", b.last[EventREQReceived].PrivateData[:8])
	}
	if rep := a.last[EventREPReceived]; rep.REP.RemoteQPN != 0x22 || rep.REP.StartingPSN != 0x200 ||
		!hasPrefix(rep.PrivateData, "rep-pd") || len(rep.PrivateData) != 196 {
		t.Errorf("REP event %+v", rep.REP)
	}
	if !hasPrefix(b.last[EventRTUReceived].PrivateData, "rtu-pd") {
		t.Error("RTU private data lost")
	}
	// The comm IDs pair up.
	if ida.RemoteCommID() != idb.LocalCommID() || idb.RemoteCommID() != ida.LocalCommID() || ida.LocalCommID() == 0 {
		t.Errorf("comm IDs: a %x→%x, b %x→%x", ida.LocalCommID(), ida.RemoteCommID(), idb.LocalCommID(), idb.RemoteCommID())
	}

	// QP attributes: each side's send PSN is the other's receive PSN
	// (cm.c: the REQ's starting PSN is the active side's rq_psn).
	artr, _ := ida.InitQPAttr(QPStateRTR)
	arts, _ := ida.InitQPAttr(QPStateRTS)
	brtr, _ := idb.InitQPAttr(QPStateRTR)
	brts, _ := idb.InitQPAttr(QPStateRTS)
	if artr.DestQPN != 0x22 || brtr.DestQPN != 0x11 || artr.RQPSN != 0x100 || brts.SQPSN != 0x100 ||
		brtr.RQPSN != 0x200 || arts.SQPSN != 0x200 {
		t.Errorf("PSNs/QPNs: a rtr %+v rts %+v; b rtr %+v rts %+v", artr, arts, brtr, brts)
	}
	if artr.PathMTU != MTU1024 || artr.Path.DGID != b.gid || brtr.Path.DGID != a.gid || brtr.Path.DMAC != [6]byte{2, 0, 0, 0, 0, 1} {
		t.Errorf("address vectors: a %+v b %+v", artr.Path, brtr.Path)
	}
	// RoCE: packet lifetime 16 → REQ local ACK timeout cm_ack_timeout(0, 16) = 17.
	if arts.Timeout != 17 || brts.Timeout != 17 || arts.RetryCount != 7 || brts.RNRRetry != 7 || arts.MaxRdAtomic != 4 ||
		artr.MaxDestRdAtomic != 4 || artr.Mask&QPAttrMaxDestRdAtomic == 0 {
		t.Errorf("RTS: a %+v b %+v", arts, brts)
	}
	if init, _ := ida.InitQPAttr(QPStateInit); init.AccessFlags != accessRemoteWrite|accessRemoteRead|accessRemoteAtomic {
		t.Errorf("INIT access %#x", init.AccessFlags)
	}

	// Disconnect: DREQ, DREP, timewait on both sides, then exit.
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventDREQReceived {
			return id.SendDREP([]byte("bye"))
		}
		return nil
	}
	if err := ida.SendDREQ([]byte("dreq")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	mustState(t, "active after DREP", ida, StateTimewait)
	mustState(t, "passive after DREP", idb, StateTimewait)
	if !hasPrefix(a.last[EventDREPReceived].PrivateData, "bye") || !hasPrefix(b.last[EventDREQReceived].PrivateData, "dreq") {
		t.Error("DREQ/DREP private data lost")
	}
	if s := a.m.Stats(); s.Timewaits != 1 {
		t.Errorf("timewaits %d", s.Timewaits)
	}
	// Timewait is cm_convert_to_ms(local ACK timeout 17) = 2^9 ms.
	f.advance(511 * time.Millisecond)
	mustState(t, "active before timewait ends", ida, StateTimewait)
	f.advance(time.Millisecond)
	mustState(t, "active after timewait", ida, StateIdle)
	mustState(t, "passive after timewait", idb, StateIdle)
	mustSeen(t, a, "REP_RECEIVED DREP_RECEIVED TIMEWAIT_EXIT")
	mustSeen(t, b, "REQ_RECEIVED RTU_RECEIVED DREQ_RECEIVED TIMEWAIT_EXIT")
	for _, id := range []*ID{ida, idb, l} {
		id.Destroy()
	}
	for _, n := range []*node{a, b} {
		if s := n.m.Stats(); s.IDs != 0 || s.Timewaits != 0 || s.Retransmits != 0 {
			t.Errorf("stats %+v", s)
		}
	}
	if f.clk.Pending() != 0 {
		t.Errorf("%d timers pending", f.clk.Pending())
	}
}

func TestRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		listen bool
		react  func(id *ID, ev *Event) error
		mutate func(p *REQParam)
		reason RejReason
		pd     string
		keep   bool // the passive consumer keeps its (Idle) ID
	}{
		{name: "no listener", reason: RejInvalidServiceID},
		{name: "consumer reject", listen: true, reason: RejConsumerDefined, pd: "go away", keep: true,
			react: func(id *ID, ev *Event) error { return id.SendREJ(RejConsumerDefined, nil, []byte("go away")) }},
		{name: "handler error", listen: true, reason: RejConsumerDefined,
			react: func(id *ID, ev *Event) error { return ErrInvalidState }},
		{name: "handler no resources", listen: true, reason: RejNoResources,
			react: func(id *ID, ev *Event) error { return ErrNoResources }},
		{name: "destroy in REQ_RCVD", listen: true, reason: RejConsumerDefined,
			react: func(id *ID, ev *Event) error { id.Destroy(); return nil }},
		{name: "wrong GID", listen: true, reason: RejInvalidGID,
			mutate: func(p *REQParam) { p.Path.DGID[15] = 9 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFabric(t)
			a, b := f.node(1, nil), f.node(2, nil)
			if c.listen {
				b.listen(svc)
			}
			b.react = c.react
			id := a.newID()
			p := reqParam(a, b, 0x11, 0x100, "")
			if c.mutate != nil {
				c.mutate(p)
			}
			if err := id.SendREQ(p); err != nil {
				t.Fatal(err)
			}
			if c.name == "wrong GID" {
				// The REQ goes to b's address but names another GID.
				f.mu.Lock()
				f.q[0].to.DGID = b.gid
				f.mu.Unlock()
			}
			f.pump()
			mustSeen(t, a, "REJ_RECEIVED")
			rej := a.last[EventREJReceived].REJ
			if rej.Reason != c.reason {
				t.Errorf("reason %d, want %d", rej.Reason, c.reason)
			}
			if c.pd != "" && !hasPrefix(a.last[EventREJReceived].PrivateData, c.pd) {
				t.Errorf("REJ private data %q", a.last[EventREJReceived].PrivateData[:8])
			}
			if c.reason == RejInvalidGID && (rej.ARILength != 16 || rej.ARI[15] != 2) {
				t.Errorf("invalid GID ARI %x (len %d)", rej.ARI[:16], rej.ARILength)
			}
			mustState(t, "active", id, StateIdle)
			// The passive side keeps no ID (a listener is the only one).
			want := uint64(0)
			if c.listen {
				want = 1
			}
			if c.keep {
				want = 2
			}
			if s := b.m.Stats(); s.IDs != want {
				t.Errorf("passive IDs %d, want %d", s.IDs, want)
			}
			// The REJ answered the REQ: message rejected REQ.
			if r := mad.REJ(f.lastSent(b, mad.AttrREJ)); r.MessageRejected() != mad.MsgREQ || r.CommIDs().RemoteCommID() != id.LocalCommID() {
				t.Errorf("REJ answers %d for comm ID %x", r.MessageRejected(), r.CommIDs().RemoteCommID())
			}
			f.advance(time.Minute)
			if n := f.count(a, mad.AttrREQ); n != 1 {
				t.Errorf("%d REQs sent after the REJ", n)
			}
		})
	}
}

// TestREQRetries: nothing answers; the REQ goes out 1 + 15 times, one
// response timeout apart (cm.c: 2 × cm_convert_to_ms(packet lifetime 16)
// + cm_convert_to_ms(remote CM response timeout 20) = 512 + 4096 ms),
// then REQ_ERROR.
func TestREQRetries(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	f.drop = func(p packet) bool { return true }
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 0x100, "")); err != nil {
		t.Fatal(err)
	}
	const rto = 4608 * time.Millisecond
	for i := 1; i <= 15; i++ {
		f.advance(rto - time.Millisecond)
		if n := f.count(a, mad.AttrREQ); n != i {
			t.Fatalf("before retry %d: %d REQs", i, n)
		}
		f.advance(time.Millisecond)
		if n := f.count(a, mad.AttrREQ); n != i+1 {
			t.Fatalf("at retry %d: %d REQs", i, n)
		}
	}
	mustState(t, "waiting for the last", id, StateREQSent)
	f.advance(rto)
	mustSeen(t, a, "REQ_ERROR")
	if a.last[EventREQError].Err != ErrTimeout {
		t.Errorf("error %v", a.last[EventREQError].Err)
	}
	mustState(t, "after timeout", id, StateIdle)
	if s := a.m.Stats(); s.Retransmits != 15 || s.Timeouts != 1 {
		t.Errorf("stats %+v", s)
	}
	id.Destroy()
	if f.clk.Pending() != 0 {
		t.Errorf("%d timers left", f.clk.Pending())
	}
}

// TestMRAOnDuplicateREQ: the passive consumer asks for time with a
// delayed MRA (cma.c's CMA_CM_MRA_SETTING); the MRA goes out only when
// the REQ is retransmitted, and the active side then waits the service
// timeout instead of retransmitting.
func TestMRAOnDuplicateREQ(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREQReceived {
			return id.SendMRA(MRAFlagDelay|24, nil)
		}
		return nil
	}
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 0x100, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idb := b.ids[EventREQReceived]
	mustState(t, "passive", idb, StateMRAREQSent)
	if n := f.count(b, mad.AttrMRA); n != 0 {
		t.Fatalf("delayed MRA sent at once (%d)", n)
	}
	f.advance(4608 * time.Millisecond) // the REQ's first retransmission
	if n := f.count(b, mad.AttrMRA); n != 1 {
		t.Fatalf("%d MRAs after the duplicate REQ", n)
	}
	mustSeen(t, a, "MRA_RECEIVED")
	mustState(t, "active", id, StateMRAREQRcvd)
	if a.last[EventMRAReceived].MRA.ServiceTimeout != 24 {
		t.Errorf("service timeout %d", a.last[EventMRAReceived].MRA.ServiceTimeout)
	}
	if s := b.m.Stats(); s.DropDuplicate != 1 || s.IDs != 2 {
		t.Errorf("passive stats %+v", s)
	}
	// The active side now waits 2^(24-8) + 2^(17-8) ms before sending
	// the REQ again.
	reqs := f.count(a, mad.AttrREQ)
	f.advance(65536*time.Millisecond + 512*time.Millisecond - time.Millisecond)
	if n := f.count(a, mad.AttrREQ); n != reqs {
		t.Fatalf("REQ resent during the MRA's service timeout (%d → %d)", reqs, n)
	}
	// The passive consumer accepts in time: REP, RTU.
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREPReceived {
			return id.SendRTU(nil)
		}
		return nil
	}
	if err := idb.SendREP(&REPParam{QPN: 0x22, StartingPSN: 0x200}); err != nil {
		t.Fatal(err)
	}
	f.pump()
	mustState(t, "active", id, StateEstablished)
	mustState(t, "passive", idb, StateEstablished)
}

// TestLostREPAndRTU: the REP is lost once (the passive side sends it
// again after the active side's local CM response timeout, 2^12 ms); the
// RTU is lost, so the REP is sent again, and the active side answers the
// duplicate REP with the RTU again (cm.c:cm_dup_rep_handler).
func TestLostREPAndRTU(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	reps, rtus := 0, 0
	f.drop = func(p packet) bool {
		switch p.attr() {
		case mad.AttrREP:
			reps++
			return reps == 1
		case mad.AttrRTU:
			rtus++
			return rtus == 1
		}
		return false
	}
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREQReceived {
			return id.SendREP(&REPParam{QPN: 0x22, StartingPSN: 0x200})
		}
		return nil
	}
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREPReceived {
			return id.SendRTU(nil)
		}
		return nil
	}
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 0x100, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idb := b.ids[EventREQReceived]
	mustState(t, "passive", idb, StateREPSent)
	f.advance(4096 * time.Millisecond) // REP again; the RTU is lost
	mustState(t, "active", id, StateEstablished)
	mustState(t, "passive", idb, StateREPSent)
	f.advance(4096 * time.Millisecond) // REP again; the RTU again
	mustState(t, "passive", idb, StateEstablished)
	if f.count(b, mad.AttrREP) != 3 || f.count(a, mad.AttrRTU) != 2 {
		t.Errorf("REPs %d RTUs %d", f.count(b, mad.AttrREP), f.count(a, mad.AttrRTU))
	}
	mustSeen(t, a, "REP_RECEIVED")
	if s := a.m.Stats(); s.DropDuplicate != 1 {
		t.Errorf("active stats %+v", s)
	}
	// The duplicate REQ is not seen: the REQ was answered before its timer.
	if f.count(a, mad.AttrREQ) != 1 {
		t.Errorf("%d REQs", f.count(a, mad.AttrREQ))
	}
}

// TestPeerVanishes: a DREQ nobody answers is retried, then DREQ_ERROR and
// timewait; a REP nobody acknowledges ends in REP_ERROR.
func TestPeerVanishes(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	ida, idb := connect(t, f, a, b, 0x11, 0x22, 1, 2)
	f.drop = func(p packet) bool { return true }
	if err := ida.SendDREQ(nil); err != nil {
		t.Fatal(err)
	}
	f.advance(16 * 4608 * time.Millisecond)
	mustSeen(t, a, "REP_RECEIVED DREQ_ERROR")
	mustState(t, "active", ida, StateTimewait)
	if n := f.count(a, mad.AttrDREQ); n != 16 {
		t.Errorf("%d DREQs", n)
	}
	mustState(t, "passive (saw nothing)", idb, StateEstablished)

	// A REP that is never acknowledged.
	f.drop = nil
	c := f.node(3, nil)
	c.listen(svc)
	c.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREQReceived {
			return id.SendREP(&REPParam{QPN: 0x33})
		}
		return nil
	}
	id := a.newID()
	f.drop = func(p packet) bool { return p.attr() == mad.AttrREP }
	if err := id.SendREQ(reqParam(a, c, 0x12, 1, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idc := c.ids[EventREQReceived]
	f.advance(16 * 4096 * time.Millisecond)
	if ev := c.last[EventREPError]; ev == nil || ev.Err != ErrTimeout {
		t.Fatalf("passive saw %q", c.seen())
	}
	mustState(t, "passive", idc, StateIdle)
	if n := f.count(c, mad.AttrREP); n != 16 {
		t.Errorf("%d REPs", n)
	}
}

// TestStaleConnection: a REQ from a remote QPN still connected here is
// rejected as stale, and the old connection is disconnected
// (cm.c:cm_match_req).
func TestStaleConnection(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	_, idb := connect(t, f, a, b, 0x11, 0x22, 1, 2)
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventDREQReceived {
			return id.SendDREP(nil)
		}
		return nil
	}
	// a "forgot" the connection and reuses its QPN.
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 5, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	if ev := a.last[EventREJReceived]; ev == nil || ev.REJ.Reason != RejStaleConn {
		t.Fatalf("active saw %q", a.seen())
	}
	// REJ stale puts the requester in timewait (cm_rej_handler).
	mustState(t, "new active", id, StateTimewait)
	if f.count(b, mad.AttrDREQ) != 1 {
		t.Errorf("old connection not disconnected")
	}
	mustState(t, "old passive", idb, StateTimewait)
	if s := b.m.Stats(); s.StaleRejected != 1 || s.IDs != 2 {
		t.Errorf("passive stats %+v", s)
	}
	// Once the old connection is over, the QPN may connect again.
	a.react = nil
	id2, _ := connect(t, f, a, b, 0x11, 0x23, 7, 8)
	mustState(t, "reconnected", id2, StateEstablished)
}

// TestBadMADs: malformed and unexpected MADs are counted and dropped or
// answered as cm.c does, never creating or leaking an ID.
func TestBadMADs(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	from := Addr{SGID: b.gid, DGID: a.gid, HopLimit: 64, RemoteQPN: 1}
	mk := func(attr mad.AttrID, set func(b []byte)) []byte {
		m := newMAD(attr, 77)
		if set != nil {
			set(m)
		}
		return m
	}
	for _, c := range []struct {
		name  string
		b     []byte
		check func(s Stats) bool
		reply mad.AttrID
	}{
		{"truncated", make([]byte, 100), func(s Stats) bool { return s.DropTruncated == 1 }, 0},
		{"wrong class", mk(mad.AttrREQ, func(b []byte) { b[1] = 0x04 }), func(s Stats) bool { return s.DropBadHeader == 1 }, 0},
		{"wrong class version", mk(mad.AttrREQ, func(b []byte) { b[2] = 1 }), func(s Stats) bool { return s.DropBadHeader == 2 }, 0},
		{"wrong base version", mk(mad.AttrREQ, func(b []byte) { b[0] = 0x82 }), func(s Stats) bool { return s.DropBadHeader == 3 }, 0},
		{"LAP", mk(mad.AttrLAP, nil), func(s Stats) bool { return s.DropBadAttribute == 1 }, 0},
		{"attribute 0x42", mk(0x42, nil), func(s Stats) bool { return s.DropBadAttribute == 2 }, 0},
		{"REP for no REQ", mk(mad.AttrREP, func(b []byte) { mad.CommIDs(b).SetRemoteCommID(0x1234) }),
			func(s Stats) bool { return s.DropUnknownCommID == 1 }, 0},
		{"RTU for nothing", mk(mad.AttrRTU, nil), func(s Stats) bool { return s.DropUnknownCommID == 2 }, 0},
		{"REJ for nothing", mk(mad.AttrREJ, nil), func(s Stats) bool { return s.DropUnknownCommID == 3 }, 0},
		{"MRA for nothing", mk(mad.AttrMRA, nil), func(s Stats) bool { return s.DropUnknownCommID == 4 }, 0},
		{"DREP for nothing", mk(mad.AttrDREP, nil), func(s Stats) bool { return s.DropUnknownCommID == 5 }, 0},
		{"SIDR_REP for nothing", mk(mad.AttrSIDRREP, nil), func(s Stats) bool { return s.DropUnknownCommID == 6 }, 0},
		// cm.c answers a DREQ for an unknown connection with a DREP.
		{"DREQ for nothing", mk(mad.AttrDREQ, nil), func(s Stats) bool { return s.DropUnknownCommID == 7 }, mad.AttrDREP},
		{"REQ for XRC", mk(mad.AttrREQ, func(b []byte) {
			r := mad.REQ(b)
			r.SetServiceID(svc)
			r.SetTransportServiceType(3)
		}), func(s Stats) bool { return s.REJSent == 1 && s.IDs == 1 }, mad.AttrREJ},
	} {
		before := f.count(b, c.reply)
		b.m.Deliver(from, c.b)
		f.pump()
		s := b.m.Stats()
		if !c.check(s) {
			t.Errorf("%s: stats %+v", c.name, s)
		}
		if c.reply != 0 && f.count(b, c.reply) != before+1 {
			t.Errorf("%s: no %v in answer", c.name, c.reply)
		}
		if s.IDs != 1 {
			t.Errorf("%s: %d IDs", c.name, s.IDs)
		}
	}
	if b.seen() != "" {
		t.Errorf("consumer saw %q", b.seen())
	}
}

// TestREQFlood: REQs beyond MaxIDs are rejected with "no resources"; the
// IDs made before are the consumer's, and all go when destroyed.
func TestREQFlood(t *testing.T) {
	f := newFabric(t)
	a := f.node(1, nil)
	b := f.node(2, func(c *Config) { c.MaxIDs = 5 })
	b.listen(svc)
	var ids []*ID
	for i := range 10 {
		id := a.newID()
		ids = append(ids, id)
		if err := id.SendREQ(reqParam(a, b, uint32(0x100+i), 1, "")); err != nil {
			t.Fatal(err)
		}
	}
	f.pump()
	s := b.m.Stats()
	if s.IDs != 5 || s.DropNoResources != 6 {
		t.Fatalf("stats %+v", s)
	}
	rej := 0
	for _, id := range ids {
		if id.State() == StateIdle {
			rej++
		}
	}
	if rej != 6 {
		t.Errorf("%d requesters rejected", rej)
	}
	b.m.Close()
	f.pump()
	if s := b.m.Stats(); s.IDs != 0 {
		t.Errorf("after Close: %+v", s)
	}
	// The four REQ_RCVD IDs were destroyed with a REJ each.
	for _, id := range ids {
		if st := id.State(); st != StateIdle {
			t.Errorf("requester in state %d after the passive CM closed", st)
		}
	}
	if _, err := b.m.CreateID(b.handler, nil); err != ErrClosed {
		t.Errorf("CreateID after Close: %v", err)
	}
}

func TestSIDR(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	const udpSvc = 0x0000000002114e20
	b.listen(udpSvc)
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventSIDRREQReceived {
			return id.SendSIDRREP(&SIDRREPParam{QPN: 0x77, QKey: 0x1234567, Status: SIDRSuccess, PrivateData: []byte("ok")})
		}
		return nil
	}
	id := a.newID()
	if err := id.SendSIDRREQ(&SIDRREQParam{Path: pathTo(a, b), ServiceID: udpSvc, PrivateData: []byte("hdr")}); err != nil {
		t.Fatal(err)
	}
	f.pump()
	mustSeen(t, a, "SIDR_REP_RECEIVED")
	rep := a.last[EventSIDRREPReceived]
	if rep.SIDRREP.QPN != 0x77 || rep.SIDRREP.QKey != 0x1234567 || rep.SIDRREP.Status != SIDRSuccess || !hasPrefix(rep.PrivateData, "ok") {
		t.Errorf("SIDR_REP %+v", rep.SIDRREP)
	}
	if ev := b.last[EventSIDRREQReceived]; ev.SIDRREQ.ServiceID != udpSvc || ev.SIDRREQ.PKey != 0xffff || !hasPrefix(ev.PrivateData, "hdr") {
		t.Errorf("SIDR_REQ %+v", ev.SIDRREQ)
	}
	mustState(t, "requester", id, StateIdle)
	mustState(t, "responder", b.ids[EventSIDRREQReceived], StateIdle)

	// No listener: status 1 (service ID not supported).
	id2 := a.newID()
	if err := id2.SendSIDRREQ(&SIDRREQParam{Path: pathTo(a, b), ServiceID: udpSvc + 1}); err != nil {
		t.Fatal(err)
	}
	f.pump()
	if ev := a.ids[EventSIDRREPReceived]; ev != id2 || a.last[EventSIDRREPReceived].SIDRREP.Status != SIDRUnsupported {
		t.Errorf("no-listener SIDR_REP status %d", a.last[EventSIDRREPReceived].SIDRREP.Status)
	}
	// No answer: retries, then SIDR_REQ_ERROR.
	f.drop = func(packet) bool { return true }
	id3 := a.newID()
	if err := id3.SendSIDRREQ(&SIDRREQParam{Path: pathTo(a, b), ServiceID: udpSvc, Timeout: 100 * time.Millisecond, MaxCMRetries: 3}); err != nil {
		t.Fatal(err)
	}
	f.advance(399 * time.Millisecond)
	if a.last[EventSIDRREQError] != nil {
		t.Fatal("SIDR error too early")
	}
	f.advance(time.Millisecond)
	if a.last[EventSIDRREQError] == nil || f.count(a, mad.AttrSIDRREQ) != 2+4 {
		t.Fatalf("events %q, %d SIDR_REQs", a.seen(), f.count(a, mad.AttrSIDRREQ))
	}
}

// TestDestroyEstablished: destroying a connected ID sends a DREQ (the
// peer sees DREQ_RECEIVED, answers, and both go through timewait).
func TestDestroyEstablished(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	l := b.listen(svc)
	ida, idb := connect(t, f, a, b, 0x11, 0x22, 1, 2)
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventDREQReceived {
			return id.SendDREP(nil)
		}
		return nil
	}
	ida.Destroy()
	f.pump()
	mustSeen(t, b, "REQ_RECEIVED RTU_RECEIVED DREQ_RECEIVED")
	mustState(t, "passive", idb, StateTimewait)
	if s := a.m.Stats(); s.IDs != 0 || s.Timewaits != 1 || s.AfterDestroy != 1 || s.DropUnknownCommID != 0 {
		// The DREP finds no ID any more, only its timewait: counted
		// apart, not answered.
		t.Errorf("active stats %+v", s)
	}
	if err := ida.SendDREQ(nil); err != ErrDestroyed {
		t.Errorf("send on destroyed ID: %v", err)
	}
	f.advance(time.Second)
	mustState(t, "passive", idb, StateIdle)
	idb.Destroy()
	l.Destroy()
	for _, n := range []*node{a, b} {
		if s := n.m.Stats(); s.IDs != 0 || s.Timewaits != 0 {
			t.Errorf("stats %+v", s)
		}
	}
	if f.clk.Pending() != 0 {
		t.Errorf("%d timers", f.clk.Pending())
	}
}

// TestLoopback: both ends on one Manager.
func TestLoopback(t *testing.T) {
	f := newFabric(t)
	a := f.node(1, nil)
	a.listen(svc)
	ida, idb := connect(t, f, a, a, 0x11, 0x22, 1, 2)
	if ida == idb || ida.RemoteCommID() != idb.LocalCommID() {
		t.Fatalf("loopback IDs %x/%x", ida.LocalCommID(), idb.LocalCommID())
	}
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventDREQReceived {
			return id.SendDREP(nil)
		}
		return nil
	}
	if err := idb.SendDREQ(nil); err != nil {
		t.Fatal(err)
	}
	f.pump()
	mustState(t, "a", ida, StateTimewait)
	mustState(t, "b", idb, StateTimewait)
}

func TestAPIErrors(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	id := a.newID()
	long := make([]byte, 93)
	if err := id.SendREQ(&REQParam{Path: pathTo(a, b), PrivateData: long}); err != ErrPrivateDataTooLong {
		t.Errorf("long REQ private data: %v", err)
	}
	if err := id.SendREQ(&REQParam{Path: Path{}}); err == nil {
		t.Error("REQ without MTU accepted")
	}
	for name, err := range map[string]error{
		"REP": id.SendREP(&REPParam{}), "RTU": id.SendRTU(nil), "MRA": id.SendMRA(1, nil),
		"DREQ": id.SendDREQ(nil), "DREP": id.SendDREP(nil), "REJ": id.SendREJ(RejConsumerDefined, nil, nil),
		"SIDR_REP": id.SendSIDRREP(&SIDRREPParam{}), "established": id.Established(),
	} {
		if err != ErrInvalidState {
			t.Errorf("%s in Idle: %v", name, err)
		}
	}
	if _, err := id.InitQPAttr(QPStateRTR); err != ErrInvalidState {
		t.Errorf("InitQPAttr in Idle: %v", err)
	}
	if err := id.SendDREQ(make([]byte, 221)); err != ErrPrivateDataTooLong {
		t.Errorf("long DREQ private data: %v", err)
	}
	if err := id.SendREJ(RejConsumerDefined, make([]byte, 73), nil); err != ErrPrivateDataTooLong {
		t.Errorf("long ARI: %v", err)
	}
	l := a.listen(svc)
	if err := a.newID().Listen(svc, 0); err != ErrBusy {
		t.Errorf("second listen: %v", err)
	}
	if err := a.newID().Listen(svc&^0xffff, 0xffffffffffff0000); err != ErrBusy {
		t.Errorf("overlapping masked listen: %v", err)
	}
	l.Destroy()
	if err := a.newID().Listen(svc, 0); err != nil {
		t.Errorf("listen after destroy: %v", err)
	}
	l.Destroy() // twice: a no-op
}

// TestMRAOnREPAndCommEst: the active side asks for time on the REP (MRA
// REP, sent at once); the passive side, whose QP sees traffic before the
// RTU, reports the connection established itself (ib_cm_notify
// COMM_EST), and the RTU arriving later changes nothing.
func TestMRAOnREPAndCommEst(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREQReceived {
			return id.SendREP(&REPParam{QPN: 0x22, StartingPSN: 0x200})
		}
		return nil
	}
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREPReceived {
			return id.SendMRA(12, []byte("wait"))
		}
		return nil
	}
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 0x100, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idb := b.ids[EventREQReceived]
	mustState(t, "active", id, StateMRAREPSent)
	mustState(t, "passive", idb, StateMRAREPRcvd)
	if ev := b.last[EventMRAReceived]; ev == nil || ev.MRA.ServiceTimeout != 12 || !hasPrefix(ev.PrivateData, "wait") {
		t.Fatalf("passive saw %q", b.seen())
	}
	// The REP is not resent within the MRA's service timeout plus the
	// local ACK timeout: 2^(12-8) + 2^(17-8) ms.
	f.advance(16*time.Millisecond + 512*time.Millisecond - time.Millisecond)
	if n := f.count(b, mad.AttrREP); n != 1 {
		t.Fatalf("%d REPs during the MRA", n)
	}
	f.advance(time.Millisecond)
	if n := f.count(b, mad.AttrREP); n != 2 {
		t.Fatalf("%d REPs after the MRA's time", n)
	}
	// The duplicate REP is answered with the MRA again.
	if n := f.count(a, mad.AttrMRA); n != 2 {
		t.Errorf("%d MRAs from the active side", n)
	}
	// Traffic on the passive QP: COMM_EST.
	if err := idb.Established(); err != nil {
		t.Fatal(err)
	}
	mustState(t, "passive", idb, StateEstablished)
	if ev := b.last[EventUserEstablished]; ev == nil {
		t.Fatalf("passive saw %q", b.seen())
	}
	if err := id.SendRTU(nil); err != nil {
		t.Fatal(err)
	}
	f.pump()
	mustState(t, "active", id, StateEstablished)
	mustSeen(t, b, "REQ_RECEIVED MRA_RECEIVED USER_ESTABLISHED")
	// Two duplicates: the second MRA, and the RTU after COMM_EST.
	if s := b.m.Stats(); s.DropDuplicate != 2 {
		t.Errorf("passive stats %+v", s)
	}
	// No REP is left to retransmit.
	n := f.count(b, mad.AttrREP)
	f.advance(time.Minute)
	if f.count(b, mad.AttrREP) != n {
		t.Error("REP retransmitted after COMM_EST")
	}
}

// TestREJAfterREP: the active side rejects the REP (REJ "message REP");
// the passive side returns to Idle (cm_rej_handler: only a sender of REJ
// in REP_SENT, or a REJ for stale connection, enters timewait).
func TestREJAfterREP(t *testing.T) {
	f := newFabric(t)
	a, b := f.node(1, nil), f.node(2, nil)
	b.listen(svc)
	b.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREQReceived {
			return id.SendREP(&REPParam{QPN: 0x22})
		}
		return nil
	}
	a.react = func(id *ID, ev *Event) error {
		if ev.Type == EventREPReceived {
			return id.SendREJ(RejConsumerDefined, nil, []byte("no thanks"))
		}
		return nil
	}
	id := a.newID()
	if err := id.SendREQ(reqParam(a, b, 0x11, 0x100, "")); err != nil {
		t.Fatal(err)
	}
	f.pump()
	idb := b.ids[EventREQReceived]
	mustState(t, "active", id, StateIdle)
	mustState(t, "passive", idb, StateIdle)
	if r := mad.REJ(f.lastSent(a, mad.AttrREJ)); r.MessageRejected() != mad.MsgREP || r.CommIDs().LocalCommID() != id.LocalCommID() {
		t.Errorf("REJ rejects %v from %#x", r.MessageRejected(), r.CommIDs().LocalCommID())
	}
	if ev := b.last[EventREJReceived]; ev == nil || !hasPrefix(ev.PrivateData, "no thanks") {
		t.Fatalf("passive saw %q", b.seen())
	}
}

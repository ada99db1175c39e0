package gsi

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/driver"
)

const svc = 0x0000000001064e20

// connectDisconnect runs a whole connection between a (active) and b
// (passive) through the two devices' QP1s: REQ, REP, RTU, DREQ, DREP.
func connectDisconnect(t *testing.T, w *world, a, b *host) {
	l, err := b.m.CreateID(b.handler, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(svc, 0); err != nil {
		t.Fatal(err)
	}
	react := func(id *cm.ID, ev *cm.Event) error {
		switch ev.Type {
		case cm.EventREQReceived:
			return id.SendREP(&cm.REPParam{QPN: 0x22, StartingPSN: 0x200, PrivateData: []byte("rep")})
		case cm.EventDREQReceived:
			return id.SendDREP([]byte("drep"))
		case cm.EventREPReceived:
			return id.SendRTU(nil)
		}
		return nil
	}
	a.react, b.react = react, react
	id, err := a.m.CreateID(a.handler, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.SendREQ(&cm.REQParam{Path: a.path(b), ServiceID: svc, QPN: 0x11, QPType: cm.QPTypeRC,
		StartingPSN: 0x100, PrivateData: []byte("req"), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req, _ := w.wait(b, cm.EventREQReceived, "REQ")
	if req.REQ.RemoteQPN != 0x11 || req.REQ.Path.DGID != a.gid || !bytes.HasPrefix(req.PrivateData, []byte("req")) {
		t.Errorf("REQ event %+v", req.REQ)
	}
	// The passive side learned how to answer from the GSI packet: our
	// GID index and the requester's MAC.
	if req.REQ.Path.SGIDIndex != b.gidIx || req.REQ.Path.DMAC != a.mac {
		t.Errorf("passive path: GID index %d (want %d), DMAC %x (want %x)", req.REQ.Path.SGIDIndex, b.gidIx, req.REQ.Path.DMAC, a.mac)
	}
	rep, _ := w.wait(a, cm.EventREPReceived, "REP")
	if rep.REP.RemoteQPN != 0x22 || rep.REP.StartingPSN != 0x200 {
		t.Errorf("REP event %+v", rep.REP)
	}
	_, idb := w.wait(b, cm.EventRTUReceived, "RTU")
	if err := id.SendDREQ([]byte("dreq")); err != nil {
		t.Fatal(err)
	}
	drep, _ := w.wait(a, cm.EventDREPReceived, "DREP")
	if !bytes.HasPrefix(drep.PrivateData, []byte("drep")) {
		t.Errorf("DREP private data %q", drep.PrivateData[:8])
	}
	if id.State() != cm.StateTimewait || idb.State() != cm.StateTimewait {
		t.Errorf("states %d %d", id.State(), idb.State())
	}
	w.clk.Advance(time.Minute)
	if id.State() != cm.StateIdle || idb.State() != cm.StateIdle {
		t.Errorf("after timewait: states %d %d", id.State(), idb.State())
	}
	id.Destroy()
	idb.Destroy()
	l.Destroy()
	for _, h := range []*host{a, b} {
		if s := h.m.Stats(); s.IDs != 0 || s.Retransmits != 0 || s.DropBadHeader+s.DropTruncated+s.DropUnexpected != 0 {
			t.Errorf("CM stats %+v", s)
		}
	}
}

func TestTwoDevices(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "IPv4"
		if v6 {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, v6)
			a, b := w.hosts[0], w.hosts[1]
			connectDisconnect(t, w, a, b)
			if s := a.agent.Stats(); s.Sent != 3 || s.Received != 2 || s.SendErrors != 0 {
				t.Errorf("active agent %+v", s)
			}
		})
	}
}

// TestLoopback: both ends on one device; the engine delivers frames to
// the device's own GID inside the device.
func TestLoopback(t *testing.T) {
	w := newWorld(t, false)
	a := w.hosts[0]
	connectDisconnect(t, w, a, a)
	if st := w.pair.A().Stats(); st.TxFrames != 0 {
		t.Errorf("%d frames went on the link", st.TxFrames)
	}
}

func TestSIDR(t *testing.T) {
	w := newWorld(t, false)
	a, b := w.hosts[0], w.hosts[1]
	l, _ := b.m.CreateID(b.handler, nil)
	const udpSvc = 0x0000000002114e20
	if err := l.Listen(udpSvc, 0); err != nil {
		t.Fatal(err)
	}
	b.react = func(id *cm.ID, ev *cm.Event) error {
		if ev.Type == cm.EventSIDRREQReceived {
			return id.SendSIDRREP(&cm.SIDRREPParam{QPN: 0x55, QKey: 0x1111, Status: cm.SIDRSuccess})
		}
		return nil
	}
	id, _ := a.m.CreateID(a.handler, nil)
	if err := id.SendSIDRREQ(&cm.SIDRREQParam{Path: a.path(b), ServiceID: udpSvc}); err != nil {
		t.Fatal(err)
	}
	ev, _ := w.wait(a, cm.EventSIDRREPReceived, "SIDR_REP")
	if ev.SIDRREP.QPN != 0x55 || ev.SIDRREP.QKey != 0x1111 {
		t.Errorf("SIDR_REP %+v", ev.SIDRREP)
	}
	// No listener: the service ID is not supported.
	id2, _ := a.m.CreateID(a.handler, nil)
	a.mu.Lock()
	a.events, a.ids = nil, nil
	a.mu.Unlock()
	if err := id2.SendSIDRREQ(&cm.SIDRREQParam{Path: a.path(b), ServiceID: udpSvc + 1}); err != nil {
		t.Fatal(err)
	}
	ev, _ = w.wait(a, cm.EventSIDRREPReceived, "SIDR_REP (no listener)")
	if ev.SIDRREP.Status != cm.SIDRUnsupported {
		t.Errorf("status %d", ev.SIDRREP.Status)
	}
}

// TestNoListener: a REQ to a service nobody listens on is answered with
// REJ "invalid service ID" across the link.
func TestNoListener(t *testing.T) {
	w := newWorld(t, false)
	a, b := w.hosts[0], w.hosts[1]
	id, _ := a.m.CreateID(a.handler, nil)
	if err := id.SendREQ(&cm.REQParam{Path: a.path(b), ServiceID: svc, QPN: 0x11, QPType: cm.QPTypeRC}); err != nil {
		t.Fatal(err)
	}
	ev, _ := w.wait(a, cm.EventREJReceived, "REJ")
	if ev.REJ.Reason != cm.RejInvalidServiceID {
		t.Errorf("reason %d", ev.REJ.Reason)
	}
}

// TestQP1Recovers: QP1 in ERROR after a fatal event (an AE such as an ARP
// entry replaced under its AH) is re-created, and the CM connects again.
func TestQP1Recovers(t *testing.T) {
	w := newWorld(t, false)
	a, b := w.hosts[0], w.hosts[1]
	connectDisconnect(t, w, a, b)
	a.agent.wqMu.Lock()
	err := a.drv.ModifyQP(a.agent.qp, &driver.QPAttr{QPState: driver.QPSErr}, driver.QPAttrState)
	a.agent.wqMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	a.agent.qpEvent(driver.AsyncEvent{Type: driver.EventQPFatal})
	deadline := time.Now().Add(10 * time.Second)
	for a.agent.Stats().Resets != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("QP1 not re-created: %+v", a.agent.Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
	for _, h := range []*host{a, b} {
		h.mu.Lock()
		h.events, h.ids = nil, nil
		h.mu.Unlock()
	}
	connectDisconnect(t, w, a, b)
}

// TestConcurrentConnections: many consumers connect and disconnect at
// once, from their own goroutines, across the two devices; every
// connection completes and nothing is left.
func TestConcurrentConnections(t *testing.T) {
	w := newWorld(t, false)
	a, b := w.hosts[0], w.hosts[1]
	l, _ := b.m.CreateID(b.handler, nil)
	if err := l.Listen(svc, 0); err != nil {
		t.Fatal(err)
	}
	b.react = func(id *cm.ID, ev *cm.Event) error {
		switch ev.Type {
		case cm.EventREQReceived:
			req := ev.REQ
			return id.SendREP(&cm.REPParam{QPN: req.RemoteQPN + 0x1000, StartingPSN: req.StartingPSN + 1})
		case cm.EventDREQReceived:
			return id.SendDREP(nil)
		}
		return nil
	}
	const n = 24
	type conn struct {
		events chan *cm.Event
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c := conn{events: make(chan *cm.Event, 8)}
			h := func(id *cm.ID, ev *cm.Event) error {
				if ev.Type == cm.EventREPReceived {
					if err := id.SendRTU(nil); err != nil {
						return err
					}
				}
				c.events <- ev
				return nil
			}
			id, err := a.m.CreateID(h, nil)
			if err != nil {
				errs <- err
				return
			}
			defer id.Destroy()
			if err := id.SendREQ(&cm.REQParam{Path: a.path(b), ServiceID: svc, QPN: uint32(0x100 + i), QPType: cm.QPTypeRC,
				StartingPSN: uint32(i)}); err != nil {
				errs <- err
				return
			}
			next := func(want cm.EventType) error {
				select {
				case ev := <-c.events:
					if ev.Type != want {
						return fmt.Errorf("conn %d: event %d, want %d", i, ev.Type, want)
					}
					if want == cm.EventREPReceived && ev.REP.RemoteQPN != uint32(0x1100+i) {
						return fmt.Errorf("conn %d: REP from QP %#x", i, ev.REP.RemoteQPN)
					}
					return nil
				case <-time.After(20 * time.Second):
					return fmt.Errorf("conn %d: no event %d", i, want)
				}
			}
			if err := next(cm.EventREPReceived); err != nil {
				errs <- err
				return
			}
			if err := id.SendDREQ(nil); err != nil {
				errs <- err
				return
			}
			errs <- next(cm.EventDREPReceived)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	w.clk.Advance(time.Minute) // timewait
	b.mu.Lock()
	ids := append([]*cm.ID(nil), b.ids...)
	b.mu.Unlock()
	for _, id := range ids {
		id.Destroy()
	}
	l.Destroy()
	for _, h := range []*host{a, b} {
		if s := h.m.Stats(); s.IDs != 0 || s.Timewaits != 0 {
			t.Errorf("left: %+v", s)
		}
	}
	if s := a.agent.Stats(); s.Sent != 3*n || s.NoSendBuffer != 0 {
		t.Errorf("active agent %+v", s)
	}
}

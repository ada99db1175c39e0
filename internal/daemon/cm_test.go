package daemon_test

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// cmEnd is a CM consumer on one daemon that records its events.
type cmEnd struct {
	d      *daemon.Daemon
	gid    [16]byte
	ix     uint8
	mu     sync.Mutex
	events []*cm.Event
	ids    []*cm.ID
	react  func(id *cm.ID, ev *cm.Event) error
}

func newCMEnd(t *testing.T, d *daemon.Daemon, ip netip.Addr) *cmEnd {
	e := &cmEnd{d: d, gid: netip.AddrFrom16(ip.As16()).As16()}
	var ok bool
	if e.ix, ok = d.GSI().LookupGID(e.gid); !ok {
		t.Fatalf("%v not in the GID table", ip)
	}
	return e
}

func (e *cmEnd) handler(id *cm.ID, ev *cm.Event) error {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.ids = append(e.ids, id)
	r := e.react
	e.mu.Unlock()
	if r != nil {
		return r(id, ev)
	}
	return nil
}

func (e *cmEnd) wait(t *testing.T, et cm.EventType) (*cm.Event, *cm.ID) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		for i, ev := range e.events {
			if ev.Type == et {
				ev, id := ev, e.ids[i]
				e.mu.Unlock()
				return ev, id
			}
		}
		e.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: no event %d; CM stats %+v", e.d.Name(), et, e.d.CM().Stats())
	return nil, nil
}

// TestCMBetweenDaemons: two daemons on real UDP sockets connect and
// disconnect through their CMs (no MAC given: the GSI agent resolves the
// peer as an AH would), and the stats name the MADs.
func TestCMBetweenDaemons(t *testing.T) {
	addrs := testaddr.Loopback(t, 2)
	d0 := daemontest.Start(t, "cm0", addrs[0].String(), nil)
	d1 := daemontest.Start(t, "cm1", addrs[1].String(), nil)
	a, b := newCMEnd(t, d0, addrs[0]), newCMEnd(t, d1, addrs[1])
	l, err := d1.CM().CreateID(b.handler, nil)
	if err != nil {
		t.Fatal(err)
	}
	const svc = 0x0000000001064e20
	if err := l.Listen(svc, 0); err != nil {
		t.Fatal(err)
	}
	react := func(id *cm.ID, ev *cm.Event) error {
		switch ev.Type {
		case cm.EventREQReceived:
			return id.SendREP(&cm.REPParam{QPN: 0x22, StartingPSN: 0x200})
		case cm.EventREPReceived:
			return id.SendRTU(nil)
		case cm.EventDREQReceived:
			return id.SendDREP(nil)
		}
		return nil
	}
	a.react, b.react = react, react
	id, err := d0.CM().CreateID(a.handler, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.SendREQ(&cm.REQParam{Path: cm.Path{SGID: a.gid, DGID: b.gid, SGIDIndex: a.ix, HopLimit: 64,
		MTU: cm.MTU1024, PacketLifeTime: 16}, ServiceID: svc, QPN: 0x11, QPType: cm.QPTypeRC, StartingPSN: 0x100,
		PrivateData: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	req, _ := b.wait(t, cm.EventREQReceived)
	if !bytes.HasPrefix(req.PrivateData, []byte("hello")) || req.REQ.RemoteQPN != 0x11 {
		t.Errorf("REQ %+v", req.REQ)
	}
	b.wait(t, cm.EventRTUReceived)
	if err := id.SendDREQ(nil); err != nil {
		t.Fatal(err)
	}
	a.wait(t, cm.EventDREPReceived)
	s0, err := d0.Stats(-1)
	if err != nil {
		t.Fatal(err)
	}
	// REQ, RTU, DREQ out; REP, DREP in.
	if c := s0.CM; c.MADsSent != 3 || c.MADsReceived != 2 || c.GSI.Sent != 3 || c.GSI.Received != 2 || c.IDs != 1 ||
		c.Timewaits != 1 || c.GSI.AHs != 1 {
		t.Errorf("active CM stats %+v", c)
	}
	// The CM's own QP1, PD, CQ, MR and AH are not a consumer's.
	if r := s0.Resources; r.PDs != 0 || r.CQs != 0 || r.MRs != 0 || r.AHs != 0 || r.Transports != 0 {
		t.Errorf("resources %+v", r)
	}
	id.Destroy()
	l.Destroy()
}

package gsi

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// host is one emulated device with its driver, data plane, GSI agent and
// CM, on one end of an in-process link.
type host struct {
	ip    netip.Addr
	mac   [6]byte
	dev   *device.Device
	drv   *driver.Device
	eng   *engine.Engine
	agent *Agent
	m     *cm.Manager
	gid   [16]byte
	gidIx uint8

	mu     sync.Mutex
	events []*cm.Event
	ids    []*cm.ID
	react  func(id *cm.ID, ev *cm.Event) error
}

// world is two hosts on a link pair; the CM runs on a manual clock (no
// retransmission happens unless a test advances it), the data plane on
// the wall clock.
type world struct {
	t     *testing.T
	clk   *timing.Manual
	pair  *link.Pair
	hosts [2]*host
	pcap  *bytes.Buffer
}

func newWorld(t *testing.T, ipv6 bool) *world {
	w := &world{t: t, clk: timing.NewManual(), pcap: &bytes.Buffer{}}
	var err error
	w.pair, err = link.NewPair(link.PairConfig{Capture: w.pcap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.pair.Close() })
	ends := [2]*link.End{w.pair.A(), w.pair.B()}
	for i := range w.hosts {
		h := &host{}
		if ipv6 {
			h.ip = netip.MustParseAddr(fmt.Sprintf("fd00::%d", i+1))
		} else {
			h.ip = netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", i+1))
		}
		h.mac = [6]byte(ends[i].MAC())
		if h.dev, err = device.New(device.Config{}); err != nil {
			t.Fatal(err)
		}
		nd := &driver.StaticNetdev{HWAddr: net.HardwareAddr(h.mac[:]), MTUSize: 1500, IPs: []netip.Addr{h.ip}}
		if h.drv, err = driver.Open(h.dev, driver.Config{Netdev: nd, CQPTimeout: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if h.eng, err = engine.New(h.dev, engine.Config{GIDs: []netip.Addr{h.ip}}); err != nil {
			t.Fatal(err)
		}
		if err = h.eng.AttachLink(ends[i]); err != nil {
			t.Fatal(err)
		}
		if err = h.eng.Start(); err != nil {
			t.Fatal(err)
		}
		if h.agent, err = New(Config{Driver: h.drv, Mem: h.dev.Mem()}); err != nil {
			t.Fatal(err)
		}
		h.gid = netip.AddrFrom16(h.ip.As16()).As16()
		var ok bool
		if h.gidIx, ok = h.agent.LookupGID(h.gid); !ok {
			t.Fatalf("GID %v not in the table", h.ip)
		}
		attr, _ := h.drv.QueryDevice()
		if h.m, err = cm.NewManager(cm.Config{Transport: h.agent, Clock: w.clk, CAGUID: guid(attr.NodeGUID),
			LookupGID: h.agent.LookupGID}); err != nil {
			t.Fatal(err)
		}
		h.agent.SetReceiver(h.m.Deliver)
		w.hosts[i] = h
		t.Cleanup(func() {
			h.m.Close()
			if err := h.agent.Close(); err != nil {
				t.Errorf("agent close: %v", err)
			}
			h.eng.Close()
			if err := h.drv.Close(); err != nil {
				t.Errorf("driver close: %v", err)
			}
			if n := h.dev.Mem().NumRegions(); n != 0 {
				t.Errorf("%d host-memory regions left", n)
			}
			h.dev.Close()
		})
	}
	return w
}

func guid(g [8]byte) uint64 {
	var v uint64
	for _, b := range g {
		v = v<<8 | uint64(b)
	}
	return v
}

func (h *host) handler(id *cm.ID, ev *cm.Event) error {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.ids = append(h.ids, id)
	r := h.react
	h.mu.Unlock()
	if r != nil {
		return r(id, ev)
	}
	return nil
}

// wait waits (wall time: the MADs cross real goroutines) for an event of
// type et and returns it with its ID.
func (w *world) wait(h *host, et cm.EventType, what string) (*cm.Event, *cm.ID) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for i, ev := range h.events {
			if ev.Type == et {
				id := h.ids[i]
				h.mu.Unlock()
				return ev, id
			}
		}
		h.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	w.t.Fatalf("%s: no event %d (agent stats %+v, CM stats %+v)", what, et, h.agent.Stats(), h.m.Stats())
	return nil, nil
}

func (h *host) path(to *host) cm.Path {
	return cm.Path{SGID: h.gid, DGID: to.gid, SGIDIndex: h.gidIx, HopLimit: 64, MTU: cm.MTU1024,
		PacketLifeTime: 16, DMAC: to.mac}
}

package cm

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// fabric carries MADs between Managers by GID, one at a time when
// pumped, so that a test sees (and may drop or duplicate) each one.
type fabric struct {
	t     *testing.T
	clk   *timing.Manual
	mu    sync.Mutex
	nodes map[[16]byte]*node
	q     []packet
	drop  func(p packet) bool
	sent  []packet // every packet handed to the fabric
}

type packet struct {
	from [16]byte
	to   Addr
	b    []byte
}

func (p packet) attr() mad.AttrID { return mad.Header(p.b).AttrID() }

// node is one Manager with the events its handlers saw.
type node struct {
	f      *fabric
	gid    [16]byte
	m      *Manager
	mu     sync.Mutex
	events []string
	last   map[EventType]*Event
	ids    map[EventType]*ID
	react  func(id *ID, ev *Event) error
}

func gidN(n byte) [16]byte {
	return [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: n}
}

func newFabric(t *testing.T) *fabric {
	return &fabric{t: t, clk: timing.NewManual(), nodes: map[[16]byte]*node{}}
}

func (f *fabric) node(n byte, mod func(*Config)) *node {
	nd := &node{f: f, gid: gidN(n), last: map[EventType]*Event{}, ids: map[EventType]*ID{}}
	cfg := Config{Transport: nd, Clock: f.clk, CAGUID: 0x0200c9fffe000000 | uint64(n),
		LookupGID: func(g [16]byte) (uint8, bool) { return 1, g == nd.gid }}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	nd.m = m
	f.nodes[nd.gid] = nd
	return nd
}

func (nd *node) SendMAD(to Addr, b []byte) error {
	f := nd.f
	f.mu.Lock()
	defer f.mu.Unlock()
	p := packet{from: nd.gid, to: to, b: append([]byte(nil), b...)}
	f.sent = append(f.sent, p)
	f.q = append(f.q, p)
	return nil
}

// pump delivers queued MADs until none is left.
func (f *fabric) pump() {
	for i := 0; ; i++ {
		if i > 10000 {
			f.t.Fatal("fabric: MAD storm")
		}
		f.mu.Lock()
		if len(f.q) == 0 {
			f.mu.Unlock()
			return
		}
		p := f.q[0]
		f.q = f.q[1:]
		drop := f.drop != nil && f.drop(p)
		f.mu.Unlock()
		if drop {
			continue
		}
		dst := f.nodes[p.to.DGID]
		if dst == nil {
			continue
		}
		dst.m.Deliver(Addr{SGIDIndex: 1, SGID: p.to.DGID, DGID: p.from, HopLimit: 64, RemoteQPN: 1,
			DMAC: [6]byte{2, 0, 0, 0, 0, p.from[15]}}, p.b)
	}
}

// advance moves the clock by d, pumping after every timer.
func (f *fabric) advance(d time.Duration) {
	end := f.clk.Now() + d
	for {
		f.pump()
		next, ok := f.clk.Next()
		if !ok || next > end {
			break
		}
		f.clk.Advance(max(next-f.clk.Now(), 0))
	}
	if now := f.clk.Now(); now < end {
		f.clk.Advance(end - now)
	}
	f.pump()
}

// count is how many MADs of attr were sent from src.
func (f *fabric) count(src *node, attr mad.AttrID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.sent {
		if p.from == src.gid && p.attr() == attr {
			n++
		}
	}
	return n
}

func (f *fabric) lastSent(src *node, attr mad.AttrID) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.sent) - 1; i >= 0; i-- {
		if p := f.sent[i]; p.from == src.gid && p.attr() == attr {
			return p.b
		}
	}
	return nil
}

var evNames = map[EventType]string{
	EventREQError: "REQ_ERROR", EventREQReceived: "REQ_RECEIVED", EventREPError: "REP_ERROR",
	EventREPReceived: "REP_RECEIVED", EventRTUReceived: "RTU_RECEIVED", EventUserEstablished: "USER_ESTABLISHED",
	EventDREQError: "DREQ_ERROR", EventDREQReceived: "DREQ_RECEIVED", EventDREPReceived: "DREP_RECEIVED",
	EventTimewaitExit: "TIMEWAIT_EXIT", EventMRAReceived: "MRA_RECEIVED", EventREJReceived: "REJ_RECEIVED",
	EventSIDRREQError: "SIDR_REQ_ERROR", EventSIDRREQReceived: "SIDR_REQ_RECEIVED", EventSIDRREPReceived: "SIDR_REP_RECEIVED",
}

func (nd *node) handler(id *ID, ev *Event) error {
	nd.mu.Lock()
	nd.events = append(nd.events, evNames[ev.Type])
	nd.last[ev.Type] = ev
	nd.ids[ev.Type] = id
	r := nd.react
	nd.mu.Unlock()
	if r != nil {
		return r(id, ev)
	}
	return nil
}

func (nd *node) seen() string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return strings.Join(nd.events, " ")
}

func (nd *node) newID() *ID {
	id, err := nd.m.CreateID(nd.handler, nil)
	if err != nil {
		nd.f.t.Fatal(err)
	}
	return id
}

func (nd *node) listen(sid uint64) *ID {
	l := nd.newID()
	if err := l.Listen(sid, 0); err != nil {
		nd.f.t.Fatal(err)
	}
	return l
}

func pathTo(src, dst *node) Path {
	return Path{SGID: src.gid, DGID: dst.gid, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0,
		FlowLabel: 0x1234, MTU: MTU1024, PacketLifeTime: 16, DMAC: [6]byte{2, 0, 0, 0, 0, dst.gid[15]}}
}

const svc = 0x0000000001064e20 // RDMA_PS_TCP << 16 | 20000

func reqParam(src, dst *node, qpn, psn uint32, pd string) *REQParam {
	return &REQParam{Path: pathTo(src, dst), ServiceID: svc, QPN: qpn, QPType: QPTypeRC, StartingPSN: psn,
		PrivateData: []byte(pd), ResponderResources: 4, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 15}
}

func mustState(t *testing.T, what string, id *ID, want State) {
	t.Helper()
	if got := id.State(); got != want {
		t.Fatalf("%s: state %d, want %d", what, got, want)
	}
}

func mustSeen(t *testing.T, nd *node, want string) {
	t.Helper()
	if got := nd.seen(); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func hasPrefix(b []byte, s string) bool { return bytes.HasPrefix(b, []byte(s)) }

var _ = fmt.Sprint

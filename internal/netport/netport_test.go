package netport_test

import (
	"context"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/netport"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
)

// The driver reads its net_device through this interface; a Port is one.
var _ driver.Netdev = (*netport.Port)(nil)

func TestActiveMTU(t *testing.T) {
	for _, c := range []struct {
		mtu  int
		want netport.IBMTU
		enum uint8
	}{
		{-1, 0, 0},
		{0, 0, 0},
		{335, 0, 0},
		{336, 256, 1},
		{591, 256, 1},
		{592, 512, 2},
		{1103, 512, 2},
		{1104, 1024, 3},
		{1280, 1024, 3},
		{1500, 1024, 3}, // the standard Ethernet MTU: rxe and irdma both report 1024
		{2127, 1024, 3},
		{2128, 2048, 4},
		{4175, 2048, 4}, // irdma's ib_mtu_int_to_enum would say 4096; rxe 2048
		{4176, 4096, 5},
		{4200, 4096, 5},
		{9000, 4096, 5},
		{65536, 4096, 5}, // loopback
	} {
		got := netport.ActiveMTU(c.mtu)
		if got != c.want || got.Enum() != c.enum {
			t.Errorf("ActiveMTU(%d) = %v (enum %d), want %v (enum %d)", c.mtu, got, got.Enum(), c.want, c.enum)
		}
	}
}

func TestDefaultGID(t *testing.T) {
	// A MAC and the link-local address Linux derived from it (eth0 of
	// the machine this was written on, `ip -6 addr`): U/L bit flipped,
	// ff:fe inserted.
	g := netport.DefaultGID(wire.MAC{0x02, 0xfc, 0x00, 0x00, 0x00, 0x01})
	if g.String() != "fe80::fc:ff:fe00:1" {
		t.Errorf("DefaultGID = %v, want fe80::fc:ff:fe00:1 (this machine's eth0 link-local address)", g)
	}
	if got := netport.GIDOf(netip.MustParseAddr("10.0.0.1")).String(); got != "::ffff:10.0.0.1" {
		t.Errorf("GIDOf(10.0.0.1) = %s", got)
	}
}

// open opens a port and closes it when the test ends, checking that its
// goroutines are gone.
func open(t *testing.T, cfg netport.Config) *netport.Port {
	t.Helper()
	p, err := netport.Open(cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	if _, done := checked.LoadOrStore(t, true); !done {
		// Runs after every port of the test is closed.
		t.Cleanup(func() {
			checked.Delete(t)
			checkNoGoroutines(t)
		})
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

var checked sync.Map

func checkNoGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "internal/netport.(*Port)") || strings.Contains(g, "netlink.linkSubscribeAt") || strings.Contains(g, "netlink.addrSubscribeAt") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left running:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLoopbackAddr: --addr 127.0.0.2 puts the port on lo, MTU 65536 →
// active MTU 4096, with a synthetic MAC (lo's is zero) and a GID table of
// the default GID and ::ffff:127.0.0.2. No root needed.
func TestLoopbackAddr(t *testing.T) {
	a := netip.MustParseAddr("127.0.0.2")
	p := open(t, netport.Config{Addr: a})
	i := p.Info()
	wantMAC := wire.MAC{0x02, 0x00, 127, 0, 0, 2}
	if i.Name != "lo" || !i.Loopback || i.MTU != 65536 || i.ActiveMTU != 4096 || i.State != netport.PortActive || !i.Present {
		t.Errorf("info %+v", i)
	}
	if i.NetdevMAC != (wire.MAC{}) || i.MAC != wantMAC {
		t.Errorf("netdev MAC %v, port MAC %v; want zero and %v", i.NetdevMAC, i.MAC, wantMAC)
	}
	def := netip.MustParseAddr("fe80::7fff:fe00:2") // EUI-64 of 02:00:7f:00:00:02
	want := []netport.GIDEntry{
		{Index: 0, GID: netport.GIDOf(def), Type: netport.GIDTypeRoCEv2, Addr: def, Default: true},
		{Index: 1, GID: netport.GIDOf(a), Type: netport.GIDTypeRoCEv2, Addr: a},
	}
	if !slices.Equal(i.GIDs, want) {
		t.Errorf("GIDs\n%v\nwant\n%v", i.GIDs, want)
	}
	if i.GIDs[1].GID.String() != "::ffff:127.0.0.2" {
		t.Errorf("GID 1 = %v", i.GIDs[1].GID)
	}
	if !slices.Equal(p.Addrs(), []netip.Addr{a}) || !p.LinkUp() || p.MTU() != 65536 || p.MAC().String() != "02:00:7f:00:00:02" {
		t.Errorf("Netdev view: addrs %v up %v MTU %d MAC %v", p.Addrs(), p.LinkUp(), p.MTU(), p.MAC())
	}
	// Two ports on lo have different MACs and default GIDs.
	q := open(t, netport.Config{Addr: netip.MustParseAddr("127.0.0.3")})
	if q.Info().GIDs[0].GID == i.GIDs[0].GID {
		t.Error("two loopback ports share their default GID")
	}
	m, err := p.Resolve(context.Background(), netip.MustParseAddr("127.0.0.3"))
	if err != nil || m != (wire.MAC{}) {
		t.Errorf("Resolve(127.0.0.3) = %v, %v; want the zero MAC (loopback)", m, err)
	}
}

// TestLoopbackNetdev: --netdev lo without --addr takes all of lo's
// addresses, IPv4 first.
func TestLoopbackNetdev(t *testing.T) {
	p := open(t, netport.Config{Netdev: "lo"})
	i := p.Info()
	if len(i.Addrs) < 1 || i.Addrs[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("addrs %v", i.Addrs)
	}
	if len(i.GIDs) != 1+len(i.Addrs) {
		t.Errorf("GIDs %v for addrs %v", i.GIDs, i.Addrs)
	}
	for k, a := range i.Addrs {
		if e := i.GIDs[k+1]; e.Index != k+1 || e.Addr != a || e.Type != netport.GIDTypeRoCEv2 {
			t.Errorf("GID %d = %+v, want %v", k+1, e, a)
		}
	}
	t.Logf("lo: %v", i.GIDs)
}

func TestOpenErrors(t *testing.T) {
	for _, cfg := range []netport.Config{
		{},
		{Netdev: "no-such-if0"},
		{Addr: netip.MustParseAddr("198.51.100.77")},
		{Netdev: "lo", Addr: netip.MustParseAddr("198.51.100.77")},
	} {
		if p, err := netport.Open(cfg); err == nil {
			p.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

// waitEvent waits up to bound for an event of kind k and returns it.
func waitEvent(t *testing.T, p *netport.Port, k netport.EventKind, bound time.Duration, what string) netport.Event {
	t.Helper()
	deadline := time.After(bound)
	for {
		select {
		case e, ok := <-p.Events():
			if !ok {
				t.Fatalf("%s: events closed", what)
			}
			if e.Kinds&k != 0 {
				return e
			}
		case <-deadline:
			t.Fatalf("%s: no %v event within %v (port now %+v)", what, k, bound, p.Info())
		}
	}
}

// TestFollowVeth: a port on one end of a veth pair in a namespace follows
// addresses added and removed (GID indices stay put: a removed address
// leaves a hole that the next new address fills), MTU changes, the link
// set down and up and the carrier (the peer going down), each reported as
// an event within a bound; Resolve finds the peer's MAC.
func TestFollowVeth(t *testing.T) {
	const bound = 2 * time.Second
	ns1, ns2 := nstest.New(t), nstest.New(t)
	nstest.Veth(t, ns1, "pv0", ns2, "pv1", 1500)
	p := open(t, netport.Config{Netdev: "pv0", NetNS: ns1.Path()})
	mac := wire.MAC(ns1.MAC(t, "pv0"))
	i := p.Info()
	if i.MAC != mac || i.NetdevMAC != mac || i.MTU != 1500 || i.ActiveMTU != 1024 || i.State != netport.PortActive {
		t.Fatalf("info %+v", i)
	}
	// The kernel gives pv0 its EUI-64 link-local address: it is the
	// default GID, so it is in Addrs but takes no slot of its own.
	if len(i.GIDs) != 1 || i.GIDs[0].GID != netport.DefaultGID(mac) {
		t.Errorf("GIDs %v, want only the default", i.GIDs)
	}

	ns1.AddAddr(t, "pv0", "10.8.0.1/24")
	e := waitEvent(t, p, netport.EventGIDs, bound, "IPv4 address added")
	if g, ok := e.Info.GID(1); !ok || g.GID.String() != "::ffff:10.8.0.1" {
		t.Errorf("after adding 10.8.0.1: %v", e.Info.GIDs)
	}
	ns1.AddAddr(t, "pv0", "fd78::1/64")
	e = waitEvent(t, p, netport.EventGIDs, bound, "IPv6 address added")
	if g, ok := e.Info.GID(2); !ok || g.Addr != netip.MustParseAddr("fd78::1") {
		t.Errorf("after adding fd78::1: %v", e.Info.GIDs)
	}
	ns1.DelAddr(t, "pv0", "10.8.0.1/24")
	e = waitEvent(t, p, netport.EventGIDs, bound, "IPv4 address removed")
	if _, ok := e.Info.GID(1); ok {
		t.Errorf("index 1 still used after removing 10.8.0.1: %v", e.Info.GIDs)
	}
	if g, ok := e.Info.GID(2); !ok || g.Addr != netip.MustParseAddr("fd78::1") {
		t.Errorf("fd78::1 moved: %v", e.Info.GIDs)
	}
	ns1.AddAddr(t, "pv0", "10.8.0.9/24")
	e = waitEvent(t, p, netport.EventGIDs, bound, "another IPv4 address")
	if g, ok := e.Info.GID(1); !ok || g.Addr != netip.MustParseAddr("10.8.0.9") {
		t.Errorf("10.8.0.9 did not fill the hole: %v", e.Info.GIDs)
	}

	ns1.Run(t, "ip", "link", "set", "pv0", "mtu", "4200")
	e = waitEvent(t, p, netport.EventMTU, bound, "MTU change")
	if e.Info.MTU != 4200 || e.Info.ActiveMTU != 4096 {
		t.Errorf("after MTU 4200: MTU %d active %v", e.Info.MTU, e.Info.ActiveMTU)
	}

	ns1.SetUp(t, "pv0", false)
	e = waitEvent(t, p, netport.EventState, bound, "link set down")
	if e.Info.State != netport.PortDown || p.LinkUp() {
		t.Errorf("after set down: %v", e.Info.State)
	}
	ns1.SetUp(t, "pv0", true)
	e = waitEvent(t, p, netport.EventState, bound, "link set up")
	if e.Info.State != netport.PortActive {
		t.Errorf("after set up: %v", e.Info.State)
	}
	// Carrier: the peer going down takes ours away.
	ns2.SetUp(t, "pv1", false)
	e = waitEvent(t, p, netport.EventState, bound, "peer down (carrier lost)")
	if e.Info.State != netport.PortDown {
		t.Errorf("after peer down: %v", e.Info.State)
	}
	ns2.SetUp(t, "pv1", true)
	waitEvent(t, p, netport.EventState, bound, "peer up")

	ns2.AddAddr(t, "pv1", "10.8.0.2/24")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := p.Resolve(ctx, netip.MustParseAddr("10.8.0.2"))
	if peer := wire.MAC(ns2.MAC(t, "pv1")); err != nil || m != peer {
		t.Errorf("Resolve(10.8.0.2) = %v, %v; want %v", m, err, peer)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := p.Resolve(ctx2, netip.MustParseAddr("10.8.0.77")); err == nil {
		t.Error("Resolve of an absent neighbour succeeded")
	}
}

// TestRestrictedAddr: with --addr on a veth, only that address is in the
// table, and it follows the address's removal and return.
func TestRestrictedAddr(t *testing.T) {
	const bound = 2 * time.Second
	ns1, ns2 := nstest.New(t), nstest.New(t)
	nstest.Veth(t, ns1, "pv0", ns2, "pv1", 0)
	ns1.AddAddr(t, "pv0", "10.9.0.1/24")
	ns1.AddAddr(t, "pv0", "10.9.0.3/24")
	a := netip.MustParseAddr("10.9.0.3")
	p := open(t, netport.Config{Addr: a, NetNS: ns1.Path()})
	i := p.Info()
	if i.Name != "pv0" || !slices.Equal(i.Addrs, []netip.Addr{a}) || len(i.GIDs) != 2 {
		t.Fatalf("info %+v", i)
	}
	ns1.DelAddr(t, "pv0", "10.9.0.3/24")
	e := waitEvent(t, p, netport.EventGIDs, bound, "address removed")
	if len(e.Info.GIDs) != 1 || len(e.Info.Addrs) != 0 {
		t.Errorf("after removal: %v %v", e.Info.GIDs, e.Info.Addrs)
	}
	ns1.AddAddr(t, "pv0", "10.9.0.3/24")
	e = waitEvent(t, p, netport.EventGIDs, bound, "address back")
	if g, ok := e.Info.GID(1); !ok || g.Addr != a {
		t.Errorf("after return: %v", e.Info.GIDs)
	}
}

// TestSlowReader: a reader that does not keep up gets merged events, none
// lost in kind, and Info stays current meanwhile.
func TestSlowReader(t *testing.T) {
	ns1, ns2 := nstest.New(t), nstest.New(t)
	nstest.Veth(t, ns1, "pv0", ns2, "pv1", 0)
	p := open(t, netport.Config{Netdev: "pv0", NetNS: ns1.Path(), Events: 1})
	for k := range 5 {
		ns1.AddAddr(t, "pv0", "10.6.0."+string(rune('1'+k))+"/24")
	}
	ns1.Run(t, "ip", "link", "set", "pv0", "mtu", "2000")
	waitFor := time.Now().Add(2 * time.Second)
	for p.Info().MTU != 2000 || len(p.Info().GIDs) < 6 {
		if time.Now().After(waitFor) {
			t.Fatalf("Info not current: %+v", p.Info())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the watcher emits right after storing Info
	var kinds netport.EventKind
	n := 0
	for len(p.Events()) > 0 {
		e := <-p.Events()
		kinds |= e.Kinds
		n++
	}
	if kinds&netport.EventGIDs == 0 || kinds&netport.EventMTU == 0 || n != 1 {
		t.Errorf("%d queued events, kinds %v; want one carrying gids and mtu", n, kinds)
	}
}

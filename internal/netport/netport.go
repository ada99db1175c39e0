// Package netport is the model of a port's network side, read from
// netlink: which interface the port sits on, its MAC and MTU (and from it
// the active IB MTU), its state (ACTIVE or DOWN, following the carrier),
// its RoCE v2 GID table (built the way ib_core builds it for irdma, with
// stable indices), and neighbour resolution for destination MACs. It
// follows the interface while running (netlink link and address
// subscriptions) and reports changes as Events.
//
// It is daemon-side: the device model never imports it. A *Port satisfies
// the driver's Netdev interface (MAC, MTU, Addrs, LinkUp), which is how
// the emulated function reads its net_device; the daemon turns Events into
// port events (IB_EVENT_PORT_ACTIVE/ERR, IB_EVENT_GID_CHANGE) and into
// udp.Link.SetUp / SetAddrs.
//
// # Loopback
//
// Any 127.0.0.0/8 address is local on lo, so `--addr 127.0.0.2` puts a
// port on lo with a GID table of that one address; several ports can share
// lo this way. lo's MAC is all zeros, which would give every such port the
// same default GID; a port on an interface without a MAC instead uses the
// locally administered unicast MAC 02:00:a:b:c:d made from its IPv4
// address (for IPv6 only, the last four bytes of its first address), fixed
// when the port is opened: stable across restarts and distinct per
// address. On loopback the MAC is informational: frames never carry it
// (udp.Link receives through sockets, and AF_PACKET on lo needs
// destination MAC 0, which Resolve returns).
package netport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Config says which interface a port sits on.
type Config struct {
	// Netdev is the interface name (--netdev). With Addr, the interface
	// must hold Addr.
	Netdev string
	// Addr restricts the port to one address (--addr): the GID table is
	// the default GID and this address. Without Netdev, the interface is
	// the one holding Addr; an address inside a loopback interface's
	// prefix (any 127.0.0.0/8 address) belongs to lo.
	Addr netip.Addr
	// NetNS is the path of the network namespace the interface is in;
	// "": the caller's.
	NetNS string
	// GIDTableLen is the size of the GID table; 0: DefaultGIDTableLen.
	// Addresses beyond it get no GID (logged).
	GIDTableLen int
	// Events is the capacity of the Events channel; 0: 16. The watcher
	// never waits for room: when the channel is full the oldest event is
	// merged into the newest (each Event carries the whole Info), so a
	// slow reader sees fewer, combined events and loses no kind of
	// change.
	Events int
	// Logger; nil: none.
	Logger *zap.Logger
}

// PortState is the IB port state the port reports (enum ib_port_state).
type PortState uint8

// Port states: a RoCE port is ACTIVE when its netdev is up with carrier
// (rxe: netif_running && netif_carrier_ok; irdma likewise), else DOWN.
const (
	PortDown   PortState = 1
	PortActive PortState = 4
)

// String returns the name ibv_devinfo prints.
func (s PortState) String() string {
	switch s {
	case PortDown:
		return "PORT_DOWN"
	case PortActive:
		return "PORT_ACTIVE"
	}
	return fmt.Sprintf("port_state(%d)", uint8(s))
}

// Info is a snapshot of the port. Its slices are not shared with later
// snapshots.
type Info struct {
	Name    string
	Ifindex int
	// NetdevMAC is the interface's MAC as it has it (zero on loopback).
	NetdevMAC wire.MAC
	// MAC is the port's MAC: the interface's, or the synthetic one when
	// the interface has none (see the package documentation).
	MAC       wire.MAC
	MTU       int
	ActiveMTU IBMTU
	State     PortState
	Loopback  bool
	// GIDs are the used entries of the GID table, by index (holes
	// left out; index 0 is the default GID).
	GIDs []GIDEntry
	// Addrs are the interface addresses the port uses, in GID order:
	// what udp.Config.Addrs / udp.Link.SetAddrs want. The EUI-64
	// link-local address, if the interface has it, is here although its
	// GID is the default one.
	Addrs []netip.Addr
	// Present is false once the interface has gone (deleted); the port
	// is then DOWN with only the default GID, until an interface of the
	// same name appears again.
	Present bool
}

// GID returns the entry at index, or false for a free or out-of-range
// slot (which reads as the zero GID).
func (i *Info) GID(index int) (GIDEntry, bool) {
	for _, e := range i.GIDs {
		if e.Index == index {
			return e, true
		}
	}
	return GIDEntry{}, false
}

// EventKind says what changed; an Event may carry several.
type EventKind uint8

// Event kinds.
const (
	// EventState: the port went ACTIVE or DOWN (Info.State), or the
	// interface went away or came back (Info.Present).
	EventState EventKind = 1 << iota
	// EventGIDs: the GID table changed (IB_EVENT_GID_CHANGE).
	EventGIDs
	// EventMTU: the netdev MTU changed (and maybe the active MTU).
	EventMTU
	// EventMAC: the MAC changed (and with it the default GID).
	EventMAC
	// EventAddrs: Info.Addrs changed — what the link binds. Usually
	// with EventGIDs; alone when the EUI-64 link-local address, whose GID
	// is the default one, finishes duplicate address detection.
	EventAddrs
)

// String lists the kinds.
func (k EventKind) String() string {
	var s []string
	for _, x := range []struct {
		k    EventKind
		name string
	}{{EventState, "state"}, {EventGIDs, "gids"}, {EventMTU, "mtu"}, {EventMAC, "mac"}, {EventAddrs, "addrs"}} {
		if k&x.k != 0 {
			s = append(s, x.name)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return fmt.Sprint(s)
}

// Event is a change of the port and the port as it is after it.
type Event struct {
	Kinds EventKind
	Info  Info
}

// Port follows one interface. Its methods are safe for concurrent use.
type Port struct {
	cfg     Config
	log     *zap.Logger
	ns      netns.NsHandle
	h       *netlink.Handle
	name    string
	synth   wire.MAC // the MAC used when the interface has none
	ifindex atomic.Int64

	info   atomic.Pointer[Info]
	table  *gidTable // owned by the watcher after Open
	events chan Event

	done      chan struct{}
	exited    chan struct{}
	closeOnce sync.Once
}

// Open finds the interface, reads the port's state and starts following
// it.
func Open(cfg Config) (*Port, error) {
	if cfg.GIDTableLen == 0 {
		cfg.GIDTableLen = DefaultGIDTableLen
	}
	if cfg.GIDTableLen < 2 {
		return nil, fmt.Errorf("netport: GID table of %d entries", cfg.GIDTableLen)
	}
	if cfg.Events <= 0 {
		cfg.Events = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Addr.IsValid() {
		cfg.Addr = cfg.Addr.Unmap().WithZone("")
	}
	if cfg.Netdev == "" && !cfg.Addr.IsValid() {
		return nil, errors.New("netport: need an interface or an address")
	}
	p := &Port{
		cfg:    cfg,
		log:    cfg.Logger,
		ns:     netns.None(),
		table:  newGIDTable(cfg.GIDTableLen),
		events: make(chan Event, cfg.Events),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	ok := false
	defer func() {
		if !ok {
			p.release()
		}
	}()
	if cfg.NetNS != "" {
		ns, err := netns.GetFromPath(cfg.NetNS)
		if err != nil {
			return nil, fmt.Errorf("netport: network namespace %s: %w", cfg.NetNS, err)
		}
		p.ns = ns
	}
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return nil, fmt.Errorf("netport: netlink: %w", err)
	}
	p.h = h
	l, err := p.findLink()
	if err != nil {
		return nil, err
	}
	p.name = l.Attrs().Name
	p.ifindex.Store(int64(l.Attrs().Index))
	// Subscribe before the first read, so that no change falls between.
	linkCh, err := p.subscribeLinks()
	if err != nil {
		return nil, err
	}
	addrCh, err := p.subscribeAddrs()
	if err == nil {
		_, err = p.refresh()
	}
	if err != nil {
		close(p.done)
		drain(linkCh, addrCh)
		return nil, err
	}
	if i := p.info.Load(); i.NetdevMAC == (wire.MAC{}) {
		p.synth = synthMAC(cfg.Addr, i.Addrs)
		p.refresh()
	}
	ok = true
	go p.watch(linkCh, addrCh)
	return p, nil
}

// findLink returns the configured interface.
func (p *Port) findLink() (netlink.Link, error) {
	if p.cfg.Netdev != "" {
		l, err := p.h.LinkByName(p.cfg.Netdev)
		if err != nil {
			return nil, fmt.Errorf("netport: interface %s: %w", p.cfg.Netdev, err)
		}
		if p.cfg.Addr.IsValid() {
			addrs, err := p.h.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				return nil, fmt.Errorf("netport: addresses of %s: %w", p.cfg.Netdev, err)
			}
			if !holds(l, addrs, p.cfg.Addr) {
				return nil, fmt.Errorf("netport: %s does not hold %v", p.cfg.Netdev, p.cfg.Addr)
			}
		}
		return l, nil
	}
	links, err := p.h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netport: interfaces: %w", err)
	}
	var loop netlink.Link
	for _, l := range links {
		addrs, err := p.h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipOf(a) == p.cfg.Addr {
				return l, nil
			}
		}
		if loop == nil && holds(l, addrs, p.cfg.Addr) {
			loop = l
		}
	}
	if loop != nil {
		return loop, nil
	}
	return nil, fmt.Errorf("netport: no interface holds %v", p.cfg.Addr)
}

// holds reports whether interface l with addresses addrs holds a: as one
// of them, or, on a loopback interface, inside one of their prefixes.
func holds(l netlink.Link, addrs []netlink.Addr, a netip.Addr) bool {
	loop := l.Attrs().Flags&net.FlagLoopback != 0
	for _, x := range addrs {
		if ipOf(x) == a {
			return true
		}
		if loop {
			if pfx, ok := prefixOf(x); ok && pfx.Contains(a) {
				return true
			}
		}
	}
	return false
}

func ipOf(a netlink.Addr) netip.Addr {
	if a.IPNet == nil {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(a.IP)
	return ip.Unmap()
}

func prefixOf(a netlink.Addr) (netip.Prefix, bool) {
	ip := ipOf(a)
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip, ones).Masked(), true
}

// synthMAC is the MAC of a port on an interface without one: locally
// administered, unicast, 02:00 and four bytes of an address.
func synthMAC(addr netip.Addr, addrs []netip.Addr) wire.MAC {
	pick := addr
	if !pick.IsValid() {
		for _, a := range addrs {
			if a.Is4() {
				pick = a
				break
			}
		}
	}
	if !pick.IsValid() && len(addrs) > 0 {
		pick = addrs[0]
	}
	m := wire.MAC{0x02, 0x00}
	if pick.IsValid() {
		b := pick.As16()
		copy(m[2:], b[12:])
	}
	return m
}

// errCB logs a subscription's error unless the port is closing.
func (p *Port) errCB(err error) {
	select {
	case <-p.done:
	default:
		p.log.Warn("netlink subscription", zap.Error(err))
	}
}

// subscribeLinks and subscribeAddrs start netlink subscriptions to link
// and address changes in the port's namespace; they end when p.done is
// closed (their channels are then closed).
func (p *Port) subscribeLinks() (chan netlink.LinkUpdate, error) {
	ns := p.ns
	ch := make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(ch, p.done, netlink.LinkSubscribeOptions{Namespace: &ns, ErrorCallback: p.errCB}); err != nil {
		return nil, fmt.Errorf("netport: subscribe to links: %w", err)
	}
	return ch, nil
}

func (p *Port) subscribeAddrs() (chan netlink.AddrUpdate, error) {
	ns := p.ns
	ch := make(chan netlink.AddrUpdate, 64)
	if err := netlink.AddrSubscribeWithOptions(ch, p.done, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: p.errCB}); err != nil {
		return nil, fmt.Errorf("netport: subscribe to addresses: %w", err)
	}
	return ch, nil
}

// drain consumes the subscription channels until their goroutines close
// them (after p.done closed), so that none is left blocked on a send.
func drain(linkCh chan netlink.LinkUpdate, addrCh chan netlink.AddrUpdate) {
	if linkCh != nil {
		for range linkCh {
		}
	}
	if addrCh != nil {
		for range addrCh {
		}
	}
}

// watch is the port's goroutine: it re-reads the interface on every
// relevant netlink update and reports what changed. A subscription that
// ends by itself (its netlink socket overflowed: ENOBUFS ends
// vishvananda/netlink's receive loop) is renewed and the state re-read,
// since updates were lost.
func (p *Port) watch(linkCh chan netlink.LinkUpdate, addrCh chan netlink.AddrUpdate) {
	defer close(p.exited)
	defer close(p.events)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		changed := false
		select {
		case <-p.done:
			drain(linkCh, addrCh)
			return
		case u, ok := <-linkCh:
			if !ok {
				linkCh, changed = nil, true
				break
			}
			changed = u.Attrs().Index == int(p.ifindex.Load()) || u.Attrs().Name == p.name
		case u, ok := <-addrCh:
			if !ok {
				addrCh, changed = nil, true
				break
			}
			changed = u.LinkIndex == int(p.ifindex.Load())
		case <-retry.C:
			changed = true
		}
		var err error
		if linkCh == nil {
			p.log.Warn("netlink link subscription ended; renewing it and re-reading the interface")
			linkCh, err = p.subscribeLinks()
		}
		if err == nil && addrCh == nil {
			p.log.Warn("netlink address subscription ended; renewing it and re-reading the interface")
			addrCh, err = p.subscribeAddrs()
		}
		if err != nil {
			p.log.Warn("netlink resubscribe failed; retrying", zap.Error(err))
			retry.Reset(time.Second)
			continue
		}
		if !changed {
			continue
		}
		kinds, err := p.refresh()
		if err != nil {
			p.log.Warn("netport: reading the interface", zap.Error(err))
			retry.Reset(time.Second)
			continue
		}
		if kinds != 0 {
			p.emit(Event{Kinds: kinds, Info: *p.info.Load()})
		}
	}
}

// emit queues an event without ever waiting: when the channel is full the
// oldest queued event is taken back and its kinds merged into e, which
// carries the newer Info. So a reader that falls behind, or never reads,
// neither stalls the watcher (Info stays current) nor misses a kind of
// change. The watcher is the only sender.
func (p *Port) emit(e Event) {
	for {
		select {
		case p.events <- e:
			return
		default:
		}
		select {
		case old := <-p.events:
			e.Kinds |= old.Kinds
		default:
		}
	}
}

// refresh re-reads the interface and its addresses, updates the GID table
// and the snapshot, and returns what changed.
func (p *Port) refresh() (EventKind, error) {
	next := Info{Name: p.name}
	l, err := p.h.LinkByName(p.name)
	var addrs []netlink.Addr
	switch {
	case err != nil && errors.As(err, new(netlink.LinkNotFoundError)):
		// Gone: DOWN, only the default GID (ib_core drops every GID
		// of an unregistered netdev).
	case err != nil:
		return 0, err
	default:
		addrs, err = p.h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return 0, err
		}
		a := l.Attrs()
		next.Present = true
		next.Ifindex = a.Index
		p.ifindex.Store(int64(a.Index))
		if len(a.HardwareAddr) == 6 {
			next.NetdevMAC = wire.MAC(a.HardwareAddr)
		}
		next.MTU = a.MTU
		next.Loopback = a.Flags&net.FlagLoopback != 0
		// Carrier and administratively up: IFF_UP and IFF_LOWER_UP
		// (netif_running && netif_carrier_ok).
		if a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0 {
			next.State = PortActive
		}
	}
	if next.State == 0 {
		next.State = PortDown
	}
	next.ActiveMTU = ActiveMTU(next.MTU)
	next.MAC = next.NetdevMAC
	if next.MAC == (wire.MAC{}) {
		next.MAC = p.synth
	}
	if next.Present {
		next.Addrs = p.selectAddrs(l, addrs)
	}
	dropped := p.table.update(DefaultGID(next.MAC), next.Addrs)
	for _, a := range dropped {
		p.log.Warn("GID table full; address gets no GID", zap.Stringer("addr", a), zap.Int("size", p.cfg.GIDTableLen))
	}
	next.GIDs = p.table.entries()

	old := p.info.Load()
	p.info.Store(&next)
	if old == nil {
		return 0, nil
	}
	var k EventKind
	if old.State != next.State || old.Present != next.Present {
		k |= EventState
	}
	if !slices.Equal(old.GIDs, next.GIDs) {
		k |= EventGIDs
	}
	if old.MTU != next.MTU {
		k |= EventMTU
	}
	if old.MAC != next.MAC {
		k |= EventMAC
	}
	if !slices.Equal(old.Addrs, next.Addrs) {
		k |= EventAddrs
	}
	return k, nil
}

// selectAddrs returns the addresses the port uses, IPv4 first, then IPv6
// (ib_core's enum_netdev_ipv4_ips, then enum_netdev_ipv6_ips), skipping
// IPv6 addresses still in duplicate address detection or failed it (they
// cannot be bound, and ib_core adds an IPv6 GID when addrconf reports the
// address, after DAD); with Config.Addr, only that one, if present.
func (p *Port) selectAddrs(l netlink.Link, addrs []netlink.Addr) []netip.Addr {
	if p.cfg.Addr.IsValid() {
		if holds(l, addrs, p.cfg.Addr) {
			return []netip.Addr{p.cfg.Addr}
		}
		return nil
	}
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		ip := ipOf(a)
		switch {
		case !ip.IsValid():
		case ip.Is4():
			v4 = append(v4, ip)
		case a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0:
			v6 = append(v6, ip)
		}
	}
	return append(v4, v6...)
}

// Info returns the port as it is now.
func (p *Port) Info() Info {
	i := *p.info.Load()
	return i
}

// Events returns the channel of changes, closed by Close.
func (p *Port) Events() <-chan Event { return p.events }

// Close stops following the interface and closes Events. Closing twice is
// harmless.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		close(p.done)
		<-p.exited
		p.release()
	})
	return nil
}

func (p *Port) release() {
	if p.h != nil {
		p.h.Close()
	}
	if p.ns != netns.None() {
		p.ns.Close()
	}
}

// MAC returns the port's MAC (driver.Netdev).
func (p *Port) MAC() net.HardwareAddr {
	m := p.info.Load().MAC
	return net.HardwareAddr(m[:])
}

// MTU returns the netdev MTU (driver.Netdev).
func (p *Port) MTU() int { return p.info.Load().MTU }

// Addrs returns the port's addresses in GID order (driver.Netdev).
func (p *Port) Addrs() []netip.Addr { return slices.Clone(p.info.Load().Addrs) }

// LinkUp reports whether the port is ACTIVE (driver.Netdev).
func (p *Port) LinkUp() bool { return p.info.Load().State == PortActive }

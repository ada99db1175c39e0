package netport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Neighbour states whose link-layer address can be used (NUD_VALID).
const nudValid = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP

// discardPort is where Resolve sends its probe: UDP discard (RFC 863).
// Not 4791, where a peer's rxe would count an empty datagram as a bad
// packet; the peer may answer port unreachable, which is harmless.
const discardPort = 9

// ErrUnresolved is returned when the neighbour did not answer in time.
var ErrUnresolved = errors.New("netport: neighbour not resolved")

// Resolve returns the destination MAC for frames to dst: the link-layer
// address of the next hop (dst itself, or the gateway of its route) from
// the kernel's neighbour table. If the table has none it makes the kernel
// resolve it without privileges, by sending an empty UDP datagram to the
// next hop's discard port from an ordinary socket (which queues ARP or
// neighbour solicitation exactly as any traffic would), and polls the
// table until ctx ends. Destinations reached through loopback, and
// interfaces without ARP, give the zero MAC: on lo that is the MAC frames
// carry.
//
// The MAC matters to packet sending (udp.IOPacket), which writes frames
// as built; udp sending leaves it to the kernel and it is informational.
func (p *Port) Resolve(ctx context.Context, dst netip.Addr) (wire.MAC, error) {
	dst = dst.Unmap()
	if !dst.IsValid() {
		return wire.MAC{}, errors.New("netport: resolve: no address")
	}
	routes, err := p.h.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return wire.MAC{}, fmt.Errorf("netport: no route to %v: %v", dst, err)
	}
	r := routes[0]
	if r.Type == unix.RTN_LOCAL {
		return wire.MAC{}, nil // delivered through lo
	}
	l, err := p.h.LinkByIndex(r.LinkIndex)
	if err != nil {
		return wire.MAC{}, fmt.Errorf("netport: route to %v: %w", dst, err)
	}
	if a := l.Attrs(); a.Flags&net.FlagLoopback != 0 || a.RawFlags&unix.IFF_NOARP != 0 {
		return wire.MAC{}, nil
	}
	hop := dst
	if gw, ok := netip.AddrFromSlice(r.Gw); ok {
		hop = gw.Unmap()
	}
	family := netlink.FAMILY_V4
	if hop.Is6() {
		family = netlink.FAMILY_V6
	}
	lookup := func() (wire.MAC, bool) {
		neighs, err := p.h.NeighList(r.LinkIndex, family)
		if err != nil {
			return wire.MAC{}, false
		}
		for _, n := range neighs {
			ip, _ := netip.AddrFromSlice(n.IP)
			if ip.Unmap() == hop && n.State&nudValid != 0 && len(n.HardwareAddr) == 6 {
				return wire.MAC(n.HardwareAddr), true
			}
		}
		return wire.MAC{}, false
	}
	if m, ok := lookup(); ok {
		return m, nil
	}
	zone := ""
	if hop.Is6() && hop.IsLinkLocalUnicast() {
		zone = strconv.Itoa(r.LinkIndex)
	}
	probe := func() error {
		return inNS(p.ns, func() error {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(hop.WithZone(zone), discardPort)))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write(nil)
			return err
		})
	}
	if err := probe(); err != nil {
		return wire.MAC{}, fmt.Errorf("netport: probing %v: %w", hop, err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	reprobe := time.Now().Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			return wire.MAC{}, fmt.Errorf("%w: %v via %s: %v", ErrUnresolved, hop, l.Attrs().Name, ctx.Err())
		case now := <-tick.C:
			if m, ok := lookup(); ok {
				return m, nil
			}
			if now.After(reprobe) {
				// The kernel gives up after its solicitations
				// (NUD_FAILED); a new packet starts over.
				_ = probe()
				reprobe = now.Add(time.Second)
			}
		}
	}
}

// inNS runs fn with the thread in network namespace ns (netns.None(): as
// is); see udp's inNetNS for why the thread stays locked if it cannot be
// moved back.
func inNS(ns netns.NsHandle, fn func() error) error {
	if ns == netns.None() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return err
	}
	runtime.UnlockOSThread()
	return ferr
}

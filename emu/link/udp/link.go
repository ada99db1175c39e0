package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Link is a link.Link over real UDP/4791 sockets (see the package
// documentation). All methods are safe for concurrent use.
type Link struct {
	mode    Mode
	gso     bool // UDP sending may use GSO sends (gso.go)
	mac     wire.MAC
	mtu     int
	ifindex int
	zone    string // ifindex as an IPv6 zone, for link-local destinations
	netns   string
	bufSize int
	batch   int
	pool    *link.Pool
	clock   timing.Clock
	inj     *link.Injector // nil: no faults
	hold    *holdQueue     // nil: no reordering
	log     *zap.Logger

	table   atomic.Pointer[sockTable]
	ptx     *packetSock // packet sending; nil in udp sending
	prx     *packetSock // packet receiving; nil in udp receiving
	prxRing *rxRing

	up     atomic.Bool
	closed atomic.Bool
	rx     atomic.Pointer[receiverBox]

	// deliverMu serialises deliveries from the receive goroutines, so
	// that a Receiver never sees two batches at once.
	deliverMu sync.Mutex
	// stateMu serialises SetUp, SetAddrs and Close.
	stateMu sync.Mutex
	// sendMu is read-held by every Send and hold-queue release; Close
	// write-locks it to wait for those in progress.
	sendMu sync.RWMutex
	// wg counts the receive goroutines.
	wg sync.WaitGroup

	c    counters
	ctxs sync.Pool // *sendCtx
}

var _ link.Link = (*Link)(nil)

type receiverBox struct{ r link.Receiver }

// sockTable is the immutable set of UDP sockets, swapped whole by
// SetAddrs so that the send path looks sockets up without a lock.
type sockTable struct {
	socks []*udpSock
	rings []*rxRing // receive rings of the sockets, nil entries in packet receive mode
}

// lookup returns the socket bound to a, or nil.
func (t *sockTable) lookup(a netip.Addr) *udpSock {
	for _, s := range t.socks {
		if s.addr == a {
			return s
		}
	}
	return nil
}

func (t *sockTable) addrs() []netip.Addr {
	out := make([]netip.Addr, len(t.socks))
	for i, s := range t.socks {
		out[i] = s.addr
	}
	return out
}

// New opens the sockets of a link and starts receiving. The link is up.
func New(cfg Config) (*Link, error) {
	cfg.Addrs = slices.Clone(cfg.Addrs)
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	l := &Link{
		mode:    cfg.Mode,
		mac:     cfg.MAC,
		mtu:     cfg.MTU,
		ifindex: cfg.Ifindex,
		netns:   cfg.NetNS,
		bufSize: cfg.SocketBuffer,
		batch:   cfg.BatchSize,
		pool:    cfg.Pool,
		clock:   cfg.Clock,
		log:     cfg.Logger,
	}
	if cfg.Faults.Enabled() {
		inj, err := link.NewInjector(cfg.Faults, 0)
		if err != nil {
			return nil, err
		}
		l.inj = inj
		if cfg.Faults.Reorder > 0 {
			l.hold = newHoldQueue(l, cfg.HoldTimeout)
		}
	}
	var rings []*rxRing
	err := inNetNS(cfg.NetNS, func() error {
		if err := l.setupInterface(cfg.Addrs[0]); err != nil {
			return err
		}
		if l.mode.Recv == IOAuto {
			// Packet receiving verifies every ICRC (docs/transport.md),
			// so it is the default wherever the process may use it.
			l.mode.Recv = IOUDP
			if canPacket() {
				l.mode.Recv = IOPacket
			}
		}
		if l.mode.Send == IOAuto {
			// UDP sending leaves routing, neighbours and netfilter to
			// the kernel, so the device's destination MACs need not be
			// right; packet sending must be asked for.
			l.mode.Send = IOUDP
		}
		l.gso = l.mode.Send == IOUDP && !l.mode.NoGSO
		var err error
		rings, err = l.openAll(cfg.Addrs)
		return err
	})
	if err != nil {
		l.closeSockets()
		return nil, err
	}
	l.up.Store(true)
	for _, r := range rings {
		l.startRing(r)
	}
	return l, nil
}

// setupInterface finds the interface, and from it the MAC and MTU the
// configuration left open.
func (l *Link) setupInterface(first netip.Addr) error {
	if l.ifindex == 0 {
		idx, err := interfaceFor(first)
		if err != nil {
			return err
		}
		l.ifindex = idx
	}
	ifc, err := net.InterfaceByIndex(l.ifindex)
	if err != nil {
		return fmt.Errorf("udp: interface %d: %w", l.ifindex, err)
	}
	l.zone = strconv.Itoa(l.ifindex)
	if l.mac == (wire.MAC{}) && len(ifc.HardwareAddr) == 6 {
		l.mac = wire.MAC(ifc.HardwareAddr)
	}
	if l.mtu == 0 {
		l.mtu = min(ifc.MTU, link.MaxMTU)
	}
	return nil
}

// openAll opens every socket of the configured mode and publishes the
// socket table; the caller starts the returned rings.
func (l *Link) openAll(addrs []netip.Addr) ([]*rxRing, error) {
	t := &sockTable{}
	l.table.Store(t)
	var rings []*rxRing
	for _, a := range addrs {
		if t.lookup(a) != nil {
			continue
		}
		s, ring, err := l.openAddr(a)
		if err != nil {
			return nil, err
		}
		t.socks = append(t.socks, s)
		t.rings = append(t.rings, ring)
		if ring != nil {
			rings = append(rings, ring)
		}
	}
	if l.mode.Recv == IOPacket {
		ps, err := openPacketRecv(t.addrs(), l.bufSize, l.mode.WaitInPoller)
		if err != nil {
			return nil, err
		}
		l.prx = ps
		l.prxRing = newRxRing(l, rxPacket, nil, ps.raw)
		rings = append(rings, l.prxRing)
	}
	if l.mode.Send == IOPacket {
		ps, err := openPacketSend(l.ifindex, l.bufSize)
		if err != nil {
			return nil, err
		}
		l.ptx = ps
	}
	return rings, nil
}

// openAddr opens the UDP socket of one address and, in udp receive mode,
// its receive ring.
func (l *Link) openAddr(a netip.Addr) (*udpSock, *rxRing, error) {
	discard := l.mode.Recv == IOPacket // no ring reads it
	s, err := openUDP(a, scopeOf(a, l.ifindex), l.bufSize, discard, l.mode.WaitInPoller && !discard)
	if err != nil {
		return nil, nil, err
	}
	if l.mode.Recv == IOPacket {
		return s, nil, nil
	}
	kind := rxUDP4
	if a.Is6() {
		kind = rxUDP6
	}
	return s, newRxRing(l, kind, s, s.raw), nil
}

func (l *Link) startRing(r *rxRing) {
	if !l.mode.WaitInPoller {
		if err := r.m.openWake(); err != nil {
			// Out of descriptors: the ring waits in ppoll on its
			// socket alone and notices a stop within wakeCheck.
			l.log.Warn("udp: receive ring has no wake eventfd", zap.Error(err))
		}
	}
	l.wg.Add(1)
	go r.run()
}

// closeSockets closes every socket; the receive goroutines then exit.
func (l *Link) closeSockets() {
	if t := l.table.Load(); t != nil {
		for i, s := range t.socks {
			t.rings[i].stop()
			s.file.Close()
		}
	}
	if l.prx != nil {
		l.prxRing.stop()
		l.prx.close()
	}
	if l.ptx != nil {
		l.ptx.close()
	}
}

// SetAddrs makes the link's addresses addrs: it opens sockets for the new
// ones and closes those of the ones gone (frames from a removed address
// are then dropped, ReasonNoSocket). The daemon calls it when the port's
// GID table changes. In packet receive mode the filter follows.
func (l *Link) SetAddrs(addrs []netip.Addr) error {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.closed.Load() {
		return net.ErrClosed
	}
	want := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("udp: address %v cannot be a port address", a)
		}
		if !slices.Contains(want, a) {
			want = append(want, a)
		}
	}
	if len(want) == 0 {
		return ErrNoAddr
	}
	old := l.table.Load()
	next := &sockTable{}
	var started []*rxRing
	var opened []*udpSock
	err := inNetNS(l.netns, func() error {
		for _, a := range want {
			if s := old.lookup(a); s != nil {
				i := slices.Index(old.socks, s)
				next.socks = append(next.socks, s)
				next.rings = append(next.rings, old.rings[i])
				continue
			}
			s, ring, err := l.openAddr(a)
			if err != nil {
				return err
			}
			opened = append(opened, s)
			next.socks = append(next.socks, s)
			next.rings = append(next.rings, ring)
			if ring != nil {
				started = append(started, ring)
			}
		}
		if l.prx != nil {
			return attachFilter(l.prx.fd, packetFilter(next.addrs()))
		}
		return nil
	})
	if err != nil {
		for _, s := range opened {
			s.file.Close()
		}
		return err
	}
	l.table.Store(next)
	for _, r := range started {
		l.startRing(r)
	}
	for i, s := range old.socks {
		if next.lookup(s.addr) == nil {
			r := old.rings[i]
			r.stop()
			s.file.Close() // its ring, if any, exits and releases its buffers
			if r != nil {
				// The socket is closed when the ring lets go of it:
				// the address is free when SetAddrs returns.
				<-r.done
			}
		}
	}
	return nil
}

// Addrs returns the addresses the link has sockets for.
func (l *Link) Addrs() []netip.Addr { return l.table.Load().addrs() }

// Mode returns the active mode (never automatic).
func (l *Link) Mode() Mode { return l.mode }

// SourcePort returns the UDP source port of what the link sends from
// address a in udp send mode: the socket's, 4791. A device that builds its
// frames with this source port spares the link recomputing their ICRCs
// (Counters.Resealed). In packet send mode frames keep their own ports and
// ok is false.
func (l *Link) SourcePort(a netip.Addr) (port uint16, ok bool) {
	if l.mode.Send != IOUDP {
		return 0, false
	}
	if s := l.table.Load().lookup(a.Unmap()); s != nil {
		return s.port, true
	}
	return 0, false
}

// Attach implements link.Link.
func (l *Link) Attach(r link.Receiver) {
	if r == nil {
		l.rx.Store(nil)
		return
	}
	l.rx.Store(&receiverBox{r})
}

func (l *Link) receiver() link.Receiver {
	if b := l.rx.Load(); b != nil {
		return b.r
	}
	return nil
}

// State implements link.Link.
func (l *Link) State() link.State {
	if l.up.Load() {
		return link.StateUp
	}
	return link.StateDown
}

// SetUp brings the link up or down at run time, as the port's carrier
// would: while down, Send drops (link.DropLinkDown), received datagrams are
// dropped and counted, and frames held back for reordering are dropped.
// The Receiver is told synchronously. The daemon calls it when netlink
// reports the interface down or up.
func (l *Link) SetUp(up bool) {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.closed.Load() || l.up.Load() == up {
		return
	}
	l.up.Store(up)
	if !up && l.hold != nil {
		l.hold.purge(l, link.DropLinkDown)
	}
	s := link.StateDown
	if up {
		s = link.StateUp
	}
	if r := l.receiver(); r != nil {
		r.LinkStateChanged(s)
	}
}

// MTU implements link.Link.
func (l *Link) MTU() int { return l.mtu }

// MAC implements link.Link.
func (l *Link) MAC() wire.MAC { return l.mac }

// Ifindex returns the index of the port's interface.
func (l *Link) Ifindex() int { return l.ifindex }

// BatchSize implements link.Link.
func (l *Link) BatchSize() int { return l.batch }

// Pool implements link.Link.
func (l *Link) Pool() *link.Pool { return l.pool }

// Stats implements link.Link.
func (l *Link) Stats() link.Stats { return l.Counters().Stats() }

// Counters returns a snapshot of every counter of the link.
func (l *Link) Counters() Counters {
	c := l.c.snapshot()
	if l.inj != nil {
		c.Faults = l.inj.Stats()
	}
	return c
}

// String describes the link for logs and devinfo: its addresses and mode.
func (l *Link) String() string {
	return fmt.Sprintf("udp %v %v", l.Addrs(), l.mode)
}

// Close implements link.Link: it drops held frames, closes the sockets,
// waits for the receive goroutines (and so for a delivery in progress) and
// for Sends in progress, and releases the posted receive buffers. Send
// then returns net.ErrClosed. It must not be called from the Receiver.
func (l *Link) Close() error {
	l.stateMu.Lock()
	if !l.closed.CompareAndSwap(false, true) {
		l.stateMu.Unlock()
		return nil
	}
	l.up.Store(false)
	l.stateMu.Unlock()
	if l.hold != nil {
		l.hold.close(l)
	}
	l.closeSockets()
	l.wg.Wait()
	l.sendMu.Lock()
	//lint:ignore SA2001 an empty critical section waits for the Sends holding the read lock
	l.sendMu.Unlock()
	return nil
}

// isClosed reports whether err says the socket was closed.
func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed)
}

package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// portLink is the link the engine attaches: a link.Link decorator over the
// port's UDP link. It
//
//   - taps both directions into the capture, if any (--pcap), and the
//     frames the device keeps for itself (Looped);
//   - keeps the engine's receiver while the UDP link underneath is replaced
//     (reopen), which is how faults change at run time as long as the UDP
//     link has no setter of its own (see setFaults);
//   - keeps what the daemon decided about the link (up, addresses) so that a
//     replacement starts in the same state;
//   - sums the counters of every UDP link it has had.
//
// Send holds the read side of mu, reopen the write side: a Send never meets
// a closed UDP link because of a reopen, and a reopen waits for the Sends in
// progress (sendmmsg with MSG_DONTWAIT: short).
type portLink struct {
	clock timing.Clock
	pool  *link.Pool
	mac   wire.MAC
	mtu   int
	batch int

	rx  atomic.Pointer[rxBox]    // the engine's receiver
	cap atomic.Pointer[capture]  // the capture, if any
	cur atomic.Pointer[udp.Link] // lock-free view of inner, for readers

	reopenMu sync.Mutex // serialises setFaults

	mu     sync.RWMutex
	inner  *udp.Link    // guarded by mu (write side to replace); nil while being replaced
	cfg    udp.Config   // guarded by mu: what the next reopen starts from
	up     bool         // guarded by mu: the state the daemon wants
	base   udp.Counters // guarded by mu: counters of the links replaced
	closed bool         // guarded by mu

	reopens  atomic.Uint64
	gapDrops atomic.Uint64 // frames sent while the link was being replaced
}

type rxBox struct{ r link.Receiver }

var (
	_ link.Link         = (*portLink)(nil)
	_ link.SourcePorter = (*portLink)(nil)
)

// SourcePort implements link.SourcePorter: the current UDP link's.
func (pl *portLink) SourcePort(src netip.Addr) (uint16, bool) {
	if l := pl.cur.Load(); l != nil {
		return l.SourcePort(src)
	}
	return 0, false
}

// newPortLink opens the UDP link for cfg (with cfg.Pool shared by every
// incarnation, so the engine's buffers stay valid across a reopen).
func newPortLink(cfg udp.Config) (*portLink, error) {
	if cfg.Pool == nil {
		cfg.Pool = link.NewPool(link.DefaultPoolSize)
	}
	l, err := udp.New(cfg)
	if err != nil {
		return nil, err
	}
	pl := &portLink{clock: cfg.Clock, pool: cfg.Pool, mac: l.MAC(), mtu: l.MTU(), batch: l.BatchSize(),
		inner: l, cfg: cfg, up: true}
	pl.cur.Store(l)
	l.Attach(portRx{pl})
	return pl, nil
}

// Send implements link.Link: capture, then the UDP link.
func (pl *portLink) Send(pkts []*link.Packet) error {
	if c := pl.cap.Load(); c != nil {
		// A capture begun since the device asked Capturing finds frames
		// unsealed, their payload perhaps lent (link.Packet.Lend): sealed
		// here, they show what the wire would carry.
		for _, pk := range pkts {
			pk.Seal()
		}
		c.record(pl.clock.Now(), pkts)
	}
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	if pl.closed || pl.inner == nil {
		for _, p := range pkts {
			if p != nil {
				p.Release()
			}
		}
		if pl.closed {
			return net.ErrClosed
		}
		// Being reopened: lost, as on a link flap.
		pl.gapDrops.Add(uint64(len(pkts)))
		return nil
	}
	return pl.inner.Send(pkts)
}

// Looped implements link.Looper: the frames the device delivered to itself
// (an own GID: docs/dataplane.md "Loopback") go into the capture like the
// frames it sends, once, stamped now — an E810 would not put them on the
// wire, but the capture shows what the port did. The UDP link never sees
// them.
func (pl *portLink) Looped(pkts []*link.Packet) {
	if c := pl.cap.Load(); c != nil {
		// A capture begun since the device asked Capturing finds frames
		// unsealed, their payload perhaps lent (link.Packet.Lend): sealed
		// here, they show what the wire would carry.
		for _, pk := range pkts {
			pk.Seal()
		}
		c.record(pl.clock.Now(), pkts)
	}
}

// Capturing implements link.Looper: whether --pcap (or a capture started
// since) records now.
func (pl *portLink) Capturing() bool { return pl.cap.Load() != nil }

var _ link.Looper = (*portLink)(nil)

// Attach implements link.Link: the receiver stays attached across reopens.
func (pl *portLink) Attach(r link.Receiver) {
	if r == nil {
		pl.rx.Store(nil)
		return
	}
	pl.rx.Store(&rxBox{r})
}

// State implements link.Link.
func (pl *portLink) State() link.State { return pl.cur.Load().State() }

// MTU, MAC, BatchSize and Pool implement link.Link; they do not change
// across reopens (same interface, same pool).
func (pl *portLink) MTU() int         { return pl.mtu }
func (pl *portLink) MAC() wire.MAC    { return pl.mac }
func (pl *portLink) BatchSize() int   { return pl.batch }
func (pl *portLink) Pool() *link.Pool { return pl.pool }

// Stats implements link.Link.
func (pl *portLink) Stats() link.Stats { return pl.Counters().Stats() }

// Counters returns the UDP link's counters, summed over reopens.
func (pl *portLink) Counters() udp.Counters {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	c := pl.base
	if pl.inner != nil {
		addCounters(&c, pl.inner.Counters())
	}
	return c
}

// Mode returns the UDP link's mode.
func (pl *portLink) Mode() udp.Mode { return pl.cur.Load().Mode() }

// Addrs returns the addresses the link has sockets for.
func (pl *portLink) Addrs() []netip.Addr { return pl.cur.Load().Addrs() }

// Faults returns the faults the link injects.
func (pl *portLink) Faults() link.Faults {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	return pl.cfg.Faults
}

// Ifindex returns the interface index.
func (pl *portLink) Ifindex() int { return pl.cur.Load().Ifindex() }

// String describes the link.
func (pl *portLink) String() string { return pl.cur.Load().String() }

// SetUp brings the link up or down (carrier; `link down`).
func (pl *portLink) SetUp(up bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.up = up
	if !pl.closed && pl.inner != nil {
		pl.inner.SetUp(up)
	}
}

// SetAddrs follows the GID table.
func (pl *portLink) SetAddrs(addrs []netip.Addr) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return net.ErrClosed
	}
	// While the link is being replaced the new one takes them.
	if pl.inner != nil {
		if err := pl.inner.SetAddrs(addrs); err != nil {
			return err
		}
	}
	pl.cfg.Addrs = append([]netip.Addr(nil), addrs...)
	return nil
}

// faultSetter is what a UDP link that can change its faults in place
// would offer; setFaults prefers it to a reopen.
type faultSetter interface {
	SetFaults(link.Faults) error
}

// setFaults changes the faults injected on the send path. The UDP link
// takes its faults at creation, so unless it can change them in place
// (faultSetter), the link is reopened with the new ones: the sockets are
// closed and bound again, which loses the datagrams queued in them and
// answers with ICMP port unreachable for the moment in between — a link
// flap of about a millisecond, which RC retransmission recovers from.
func (pl *portLink) setFaults(f link.Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	pl.reopenMu.Lock()
	defer pl.reopenMu.Unlock()
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return net.ErrClosed
	}
	if fs, ok := any(pl.inner).(faultSetter); ok {
		defer pl.mu.Unlock()
		if err := fs.SetFaults(f); err != nil {
			return err
		}
		pl.cfg.Faults = f
		return nil
	}
	// Take the old link out under the lock, close it without: its
	// receive goroutine may be inside the engine's Receive, which may
	// Send (link.Receiver allows it) and so take the read lock.
	old := pl.inner
	pl.inner = nil
	cfg := pl.cfg
	pl.mu.Unlock()
	old.Attach(nil)
	// Modes are resolved: a reopen must not change them (auto could pick
	// differently if privileges were dropped since).
	cfg.Mode = old.Mode()
	oldCounters := func() udp.Counters { _ = old.Close(); return old.Counters() }()
	next := cfg
	next.Faults = f
	l, err := udp.New(next)
	if err != nil {
		l2, err2 := udp.New(cfg)
		if err2 != nil {
			err = fmt.Errorf("reopening the link with faults %q: %w; and with the old faults: %v: the port has no link", f, err, err2)
			l = nil
		} else {
			l, f = l2, cfg.Faults
			err = fmt.Errorf("reopening the link with faults %q: %w (kept the old faults)", next.Faults, err)
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	addCounters(&pl.base, oldCounters)
	pl.reopens.Add(1)
	if l == nil {
		// Keep the closed link in place: Send drops (the engine ignores
		// net.ErrClosed) until the daemon exits.
		pl.inner = old
		return err
	}
	if pl.closed {
		_ = l.Close()
		pl.inner = old
		return net.ErrClosed
	}
	pl.cfg.Faults, pl.cfg.Mode = f, cfg.Mode
	// What the daemon decided while the link was being replaced.
	if !slices.Equal(pl.cfg.Addrs, cfg.Addrs) {
		if aerr := l.SetAddrs(pl.cfg.Addrs); aerr != nil && err == nil {
			err = aerr
		}
	}
	l.SetUp(pl.up)
	// The new link said nothing to a receiver (none was attached), so the
	// engine keeps the state it had, which is pl.up.
	l.Attach(portRx{pl})
	pl.inner = l
	pl.cur.Store(l)
	return err
}

// close closes the UDP link; Send then returns net.ErrClosed.
func (pl *portLink) Close() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return nil
	}
	pl.closed = true
	if pl.inner == nil {
		return nil // setFaults closes the link it is opening
	}
	return pl.inner.Close()
}

// portRx is the receiver the UDP link delivers to: capture, then the
// engine's receiver.
type portRx struct{ pl *portLink }

func (r portRx) Receive(pkts []*link.Packet) {
	if c := r.pl.cap.Load(); c != nil {
		c.recordAt(pkts)
	}
	if b := r.pl.rx.Load(); b != nil {
		b.r.Receive(pkts)
		return
	}
	for _, p := range pkts {
		p.Release()
	}
}

func (r portRx) LinkStateChanged(s link.State) {
	if b := r.pl.rx.Load(); b != nil {
		b.r.LinkStateChanged(s)
	}
}

// addCounters adds o to c.
func addCounters(c *udp.Counters, o udp.Counters) {
	c.TxFrames += o.TxFrames
	c.TxBytes += o.TxBytes
	c.RxFrames += o.RxFrames
	c.RxBytes += o.RxBytes
	for i := range c.TxDrops {
		c.TxDrops[i] += o.TxDrops[i]
		c.RxDrops[i] += o.RxDrops[i]
	}
	c.ICRCGood += o.ICRCGood
	c.ICRCUnverifiable += o.ICRCUnverifiable
	c.ICRCBad += o.ICRCBad
	c.Resealed += o.Resealed
	c.SendCalls += o.SendCalls
	c.RecvCalls += o.RecvCalls
	c.Partial += o.Partial
	c.GSOSends += o.GSOSends
	c.GSOFrames += o.GSOFrames
	c.GSORefused += o.GSORefused
	c.GROReceives += o.GROReceives
	c.GROFrames += o.GROFrames
	c.Faults.Offered += o.Faults.Offered
	c.Faults.Lost += o.Faults.Lost
	c.Faults.Duplicated += o.Faults.Duplicated
	c.Faults.Corrupted += o.Faults.Corrupted
	c.Faults.Reordered += o.Faults.Reordered
}

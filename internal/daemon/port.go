package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/internal/netport"
	"github.com/irdma-emu/irdma-emu/sysfs"
)

// PortEvent is a change of the port as the daemon reported it: to user
// contexts (as an IB async event), in the log, and on the control socket's
// event stream.
type PortEvent struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Event is the IB event raised: PORT_ACTIVE, PORT_ERR or GID_CHANGE.
	Event string `json:"event"`
	// State is the port state after the change (PORT_ACTIVE, PORT_DOWN).
	State string `json:"state"`
	// Cause is "netlink" (the interface changed) or "control" (`link
	// up|down` on the control socket).
	Cause string `json:"cause"`
	// Kinds lists what netlink said changed (state, gids, mtu, mac, addrs).
	Kinds string   `json:"kinds,omitempty"`
	GIDs  []string `json:"gids,omitempty"`
}

// eventLog keeps the recent port events and fans them out to subscribers
// (the control socket's `events` streams). A slow subscriber loses events
// rather than holding the port loop: its channel is buffered and sends never
// block.
type eventLog struct {
	mu     sync.Mutex
	seq    uint64                  // guarded by mu
	recent []PortEvent             // guarded by mu: the last maxRecent
	subs   map[chan PortEvent]bool // guarded by mu
}

const maxRecent = 64

func (l *eventLog) init() { l.subs = map[chan PortEvent]bool{} }

func (l *eventLog) publish(ev PortEvent) PortEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	ev.Seq = l.seq
	l.recent = append(l.recent, ev)
	if len(l.recent) > maxRecent {
		l.recent = slices.Delete(l.recent, 0, len(l.recent)-maxRecent)
	}
	for c := range l.subs {
		select {
		case c <- ev:
		default:
		}
	}
	return ev
}

// subscribe returns the events after seq `after` that are still kept, and a
// channel of the later ones; cancel ends the subscription.
func (l *eventLog) subscribe(after uint64) (past []PortEvent, ch <-chan PortEvent, cancel func()) {
	c := make(chan PortEvent, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.recent {
		if ev.Seq > after {
			past = append(past, ev)
		}
	}
	l.subs[c] = true
	return past, c, func() {
		l.mu.Lock()
		delete(l.subs, c)
		l.mu.Unlock()
	}
}

// Events returns the port events still kept (the last 64).
func (d *Daemon) Events() []PortEvent {
	past, _, cancel := d.events.subscribe(0)
	cancel()
	return past
}

// SubscribeEvents returns a channel of the port events from now on; cancel
// ends it. Events a slow reader does not take in time are dropped for it.
func (d *Daemon) SubscribeEvents() (<-chan PortEvent, func()) {
	_, ch, cancel := d.events.subscribe(^uint64(0))
	return ch, cancel
}

// followPort turns the port model's netlink events into port changes until
// the port is closed.
func (d *Daemon) followPort() {
	defer d.bg.Done()
	for ev := range d.port.Events() {
		d.portChanged(ev.Info, ev.Kinds, "netlink")
	}
}

// portChanged brings everything that depends on the port in line with info
// (and the operator's override): the link's addresses and the engine's GID
// check, the link's carrier, the sysfs tree, then the IB events.
func (d *Daemon) portChanged(info netport.Info, kinds netport.EventKind, cause string) {
	d.portMu.Lock()
	defer d.portMu.Unlock()
	if d.closing.Load() && cause != "netlink" {
		return
	}
	log := d.log.With(zap.String("cause", cause))
	if kinds&(netport.EventGIDs|netport.EventAddrs) != 0 {
		if len(info.Addrs) == 0 {
			// The link needs an address to bind; keep the old sockets
			// (frames to the gone addresses fail in the kernel) until one
			// comes back.
			log.Warn("the interface has no address left: the link keeps its sockets", zap.String("netdev", info.Name))
		} else if err := d.link.SetAddrs(info.Addrs); err != nil {
			log.Error("link addresses", zap.Stringers("addrs", info.Addrs), zap.Error(err))
		}
	}
	if kinds&(netport.EventGIDs|netport.EventAddrs|netport.EventMAC) != 0 {
		d.eng.SetGIDs(d.engineGIDs())
	}
	if kinds&netport.EventMTU != 0 {
		// QUERY_PORT reads the MTU live; the link's MTU is fixed when it is
		// opened (udp.Config.MTU), so frames keep the old limit.
		log.Warn("interface MTU changed: the active MTU follows, the link keeps its MTU until restart",
			zap.Int("mtu", info.MTU), zap.Stringer("active_mtu", info.ActiveMTU), zap.Int("link_mtu", d.link.MTU()))
	}
	up := d.nd.LinkUp()
	stateChanged := up != d.lastUp
	if stateChanged {
		d.lastUp = up
		d.link.SetUp(up)
	}
	if err := d.writeSysfs(); err != nil {
		log.Error("sysfs tree", zap.Error(err))
	}
	state := d.portState().String()
	var raised []driver.AsyncEvent
	if stateChanged {
		raised = append(raised, d.drv.PortEvent())
	}
	if kinds&(netport.EventGIDs|netport.EventMAC) != 0 {
		raised = append(raised, driver.AsyncEvent{Type: EventGIDChange})
	}
	sink, _ := d.handler.(PortEventSink)
	for _, ev := range raised {
		if sink != nil {
			sink.PortEvent(ev)
		}
		pe := d.events.publish(PortEvent{Time: time.Now(), Event: eventName(ev.Type), State: state, Cause: cause,
			Kinds: kindsString(kinds), GIDs: d.gidStrings()})
		log.Info("port event", zap.Uint64("seq", pe.Seq), zap.String("event", pe.Event), zap.String("state", state),
			zap.Strings("gids", pe.GIDs))
	}
	if len(raised) == 0 && kinds != 0 {
		log.Debug("port changed", zap.String("kinds", kinds.String()))
	}
}

func kindsString(k netport.EventKind) string {
	if k == 0 {
		return ""
	}
	return k.String()
}

// eventName is the name of an IB event (ib_event_msg).
func eventName(t driver.AsyncEventType) string {
	switch t {
	case driver.EventPortActive:
		return "PORT_ACTIVE"
	case driver.EventPortErr:
		return "PORT_ERR"
	case EventGIDChange:
		return "GID_CHANGE"
	case EventDeviceFatal:
		return "DEVICE_FATAL"
	}
	return fmt.Sprintf("EVENT_%d", t)
}

// engineGIDs are the addresses of every entry of the driver's GID table
// (the default GID included, which on lo is no interface address): what
// the engine's receive gate accepts (rxe_rcv checks the destination
// against the whole table) and what it delivers inside the device when
// the device sends to it (docs/dataplane.md "Loopback").
func (d *Daemon) engineGIDs() []netip.Addr {
	t := d.drv.GIDTable()
	out := make([]netip.Addr, 0, len(t))
	for _, g := range t {
		out = append(out, g.Addr)
	}
	return out
}

// gidStrings is the driver's GID table as text.
func (d *Daemon) gidStrings() []string {
	var out []string
	for _, g := range d.drv.GIDTable() {
		out = append(out, netport.GID(g.GID).String())
	}
	return out
}

// sysfsDevice describes the device for its sysfs tree from what the driver
// answers, so that libibverbs (which reads GIDs, GUIDs and port state from
// sysfs) sees the values the driver's query verbs and QP address resolution
// use. In particular the GID table is the driver's (driver.GIDTable), not
// the port model's own indices: a QP's sgid_index is resolved by the driver.
func (d *Daemon) sysfsDevice() (sysfs.Device, error) {
	info := d.port.Info()
	prof := profileOf(d.cfg)
	up := d.nd.LinkUp()
	dev := sysfs.DefaultDevice(d.cfg.Name, d.cfg.Uverbs, info.Name, d.nd.MAC(), nil, up, prof)
	attr, err := d.drv.QueryDevice()
	if err != nil {
		return sysfs.Device{}, fmt.Errorf("query device: %w", err)
	}
	dev.NodeGUID = beUint64(attr.NodeGUID)
	dev.SysImageGUID = beUint64(attr.SysImageGUID)
	maj, min := d.drv.FWVersion()
	dev.FWVersion = fmt.Sprintf("%d.%d", maj, min)
	p := &dev.Ports[0]
	p.GIDs = p.GIDs[:0]
	for _, g := range d.drv.GIDTable() {
		p.GIDs = append(p.GIDs, sysfs.GID{GID: g.GID, Type: sysfs.GIDTypeRoCEv2, NetDev: info.Name})
	}
	if pa, err := d.drv.QueryPort(1); err == nil {
		p.GIDTableLen = max(int(pa.GIDTblLen), len(p.GIDs))
	}
	return dev, nil
}

// writeSysfs rewrites the device's sysfs tree (atomically: sysfs.Write
// swaps a complete tree in).
func (d *Daemon) writeSysfs() error {
	dev, err := d.sysfsDevice()
	if err != nil {
		return err
	}
	if err := sysfs.Write(d.paths.Sysfs, dev); err != nil {
		return fmt.Errorf("sysfs tree: %w", err)
	}
	return nil
}

func beUint64(b [8]byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

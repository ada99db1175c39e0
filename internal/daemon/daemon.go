package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/cm/gsi"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/internal/netport"
)

// ErrInUse is returned by Start when a running daemon already answers on
// the device's attach or control socket.
var ErrInUse = errors.New("device name in use by a running daemon")

// ErrClosed is returned by operations on a daemon that is shutting down.
var ErrClosed = errors.New("daemon shutting down")

// IB event types the daemon raises beyond the driver's (enum ib_event_type).
const (
	EventDeviceFatal driver.AsyncEventType = 8  // IB_EVENT_DEVICE_FATAL
	EventGIDChange   driver.AsyncEventType = 18 // IB_EVENT_GID_CHANGE
)

// PortEventSink is implemented by an attach handler that delivers IB async
// events to its user contexts (each context's async event descriptor), as
// ib_dispatch_event does for port and GID events.
type PortEventSink interface {
	PortEvent(ev driver.AsyncEvent)
}

// Quiescer is implemented by an attach handler that can, before the daemon
// goes away, move every QP of its user contexts to the error state through
// the driver (so programs get flush completions) and tell its clients the
// device is gone (IB_EVENT_DEVICE_FATAL). The daemon calls it once, first
// thing in Close, while the device and the data plane still run.
type Quiescer interface {
	Quiesce(ctx context.Context) error
}

// Daemon is one running emulated function.
type Daemon struct {
	cfg   Config
	paths Paths
	log   *zap.Logger
	clock *timing.Wall
	start time.Time

	port *netport.Port
	nd   *netdev
	dev  *device.Device
	drv  *driver.Device
	eng  *engine.Engine
	link *portLink
	capf *os.File // the --pcap file, if any
	capt *capture

	gsi *gsi.Agent  // QP1 (cm.go)
	cm  *cm.Manager // the IBTA CM on it

	handler attach.Handler
	attach  *attach.Server
	ctl     *controlServer

	portMu  sync.Mutex // serialises port changes (netlink, control)
	lastUp  bool       // guarded by portMu
	events  eventLog
	closing atomic.Bool

	hookMu sync.Mutex
	hooks  []func(context.Context) // guarded by hookMu

	stop      chan struct{} // closed when Close starts
	done      chan struct{} // closed when Close has finished
	bg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start brings a daemon up: the port model, the device, the driver, the data
// plane on the port's link, the sysfs tree, the attach socket and the
// control socket. On error everything made so far is undone.
func Start(cfg Config) (_ *Daemon, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	paths, err := cfg.paths()
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, paths: paths, log: cfg.Logger.With(zap.String("device", cfg.Name)),
		clock: timing.NewWall(), stop: make(chan struct{}), done: make(chan struct{})}
	d.start = d.clock.Epoch()
	d.events.init()

	// Refuse before touching anything: another daemon's sockets and tree
	// must survive a second `irdma-emu run` with the same name.
	for _, s := range []string{paths.Socket, paths.Control} {
		if live(s) {
			return nil, fmt.Errorf("%w: %s answers on %s (stop it, or give this one another --name)", ErrInUse, cfg.Name, s)
		}
	}
	if err := os.MkdirAll(paths.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w (run as root, or set --run-dir or $%s to a directory you can write)", err, attach.EnvRunDir)
	}

	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	// The port model: interface, MAC, MTU, state, GID table.
	d.port, err = netport.Open(netport.Config{Netdev: cfg.Netdev, Addr: cfg.Addr, NetNS: cfg.NetNS,
		GIDTableLen: int(profileOf(cfg).Limits.GIDTableLen), Logger: d.log.Named("netport")})
	if err != nil {
		return nil, fmt.Errorf("port: %w", err)
	}
	undo = append(undo, func() { _ = d.port.Close() })
	d.nd = &netdev{port: d.port}
	info := d.port.Info()
	if len(info.Addrs) == 0 {
		return nil, fmt.Errorf("port: interface %s has no IPv4 or IPv6 address: RoCEv2 needs one (add one, or use --addr)", info.Name)
	}

	// The device and the driver's bring-up through the hardware interface.
	d.dev, err = device.New(device.Config{Profile: cfg.Profile, Clock: d.clock, Logger: d.log.Named("device")})
	if err != nil {
		return nil, fmt.Errorf("device: %w", err)
	}
	undo = append(undo, func() { _ = d.dev.Close() })
	d.drv, err = driver.Open(d.dev, driver.Config{Profile: cfg.Profile, Clock: d.clock, Logger: d.log.Named("driver"), Netdev: d.nd})
	if err != nil {
		return nil, fmt.Errorf("driver bring-up: %w", err)
	}
	undo = append(undo, func() { _ = d.drv.Close() })

	// The data plane and the port's link.
	ecfg := cfg.Engine
	ecfg.GIDs = d.engineGIDs()
	d.eng, err = engine.New(d.dev, ecfg)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	undo = append(undo, func() { _ = d.eng.Close() })
	d.link, err = newPortLink(udp.Config{Addrs: info.Addrs, Ifindex: info.Ifindex, MAC: info.MAC,
		Mode: cfg.Mode, Faults: cfg.Faults, Clock: d.clock, NetNS: cfg.NetNS, Logger: d.log.Named("link")})
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("link: %w (another daemon, or the kernel's rdma_rxe, holds UDP port 4791 on this address: give each daemon its own --addr)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	undo = append(undo, func() { _ = d.link.Close() })
	if err = d.openCapture(); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = d.closeCapture() })
	if err = d.eng.AttachLink(d.link); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	d.lastUp = d.nd.LinkUp()
	d.link.SetUp(d.lastUp)
	if err = d.eng.Start(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	// QP1 and the communication manager (cm.go).
	if err = d.startCM(); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = d.stopCM() })

	// What programs see: the sysfs tree, then the socket that opens the
	// device.
	if err = d.writeSysfs(); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = os.RemoveAll(d.paths.Dir) })
	mk := cfg.Handler
	if mk == nil {
		mk = DefaultHandler
	}
	if d.handler, err = mk(d); err != nil {
		return nil, fmt.Errorf("attach handler: %w", err)
	}
	d.attach, err = attach.ListenConfig{Logger: d.log.Named("attach"), Netlink: netlinkHandler{d}}.Listen(paths.Socket, d.handler)
	if errors.Is(err, attach.ErrInUse) {
		err = fmt.Errorf("%w: %s answers on %s (another daemon started meanwhile)", ErrInUse, cfg.Name, paths.Socket)
	}
	if err != nil {
		return nil, fmt.Errorf("attach socket: %w", err)
	}
	undo = append(undo, func() { _ = d.attach.Close() })
	if d.ctl, err = listenControl(d, paths.Control); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	undo = append(undo, func() { d.ctl.close() })

	d.bg.Add(1)
	go d.followPort()
	if d.capt != nil {
		d.bg.Add(1)
		go d.flushCapture()
	}
	d.log.Info("device up",
		zap.String("netdev", info.Name), zap.Stringer("state", d.portState()),
		zap.Stringers("addrs", info.Addrs), zap.String("transport", d.link.Mode().String()),
		zap.String("faults", faultsString(d.link.Faults())), zap.String("socket", paths.Socket),
		zap.String("control", paths.Control), zap.String("sysfs", paths.Sysfs))
	return d, nil
}

// profileOf is the configured profile or GEN_2 (the device's default).
func profileOf(cfg Config) profile.Profile {
	if cfg.Profile.Limits.GIDTableLen != 0 {
		return cfg.Profile
	}
	return profile.GEN2()
}

// live reports whether a unix socket at path answers, whichever its type
// (the attach socket is SOCK_SEQPACKET, the control socket SOCK_STREAM).
func live(path string) bool {
	for _, network := range []string{"unixpacket", "unix"} {
		c, err := net.DialTimeout(network, path, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		// ENOENT, or ECONNREFUSED for a stale socket nobody listens on:
		// not live. EPROTOTYPE: a socket of the other type; try that.
		if !errors.Is(err, syscall.EPROTOTYPE) {
			return false
		}
	}
	return false
}

// Name returns the device name.
func (d *Daemon) Name() string { return d.cfg.Name }

// Paths returns the daemon's files.
func (d *Daemon) Paths() Paths { return d.paths }

// Driver returns the driver half: kernel-mode verbs (PD, CQ, QP, MR,
// PostSend, PollCQ) for in-process consumers and tests.
func (d *Daemon) Driver() *driver.Device { return d.drv }

// Device returns the device model.
func (d *Daemon) Device() *device.Device { return d.dev }

// Engine returns the data plane.
func (d *Daemon) Engine() *engine.Engine { return d.eng }

// Port returns the port model.
func (d *Daemon) Port() *netport.Port { return d.port }

// Clock returns the daemon's clock (device, driver, link and capture share it).
func (d *Daemon) Clock() *timing.Wall { return d.clock }

// Logger returns the daemon's logger.
func (d *Daemon) Logger() *zap.Logger { return d.log }

// Done is closed when the daemon has shut down.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// OnShutdown registers fn to run first in Close, before the handler is
// quiesced: an in-process consumer of kernel-mode verbs moves its QPs to the
// error state there. fn should return by the context's deadline.
func (d *Daemon) OnShutdown(fn func(context.Context)) {
	d.hookMu.Lock()
	defer d.hookMu.Unlock()
	d.hooks = append(d.hooks, fn)
}

// portState is the port state the device reports.
func (d *Daemon) portState() netport.PortState {
	if d.nd.LinkUp() {
		return netport.PortActive
	}
	return netport.PortDown
}

// Resolve returns the destination MAC for an IP address (the next hop's),
// which packet sending needs (netport.Port.Resolve).
func (d *Daemon) Resolve(ctx context.Context, ip netip.Addr) ([6]byte, error) {
	m, err := d.port.Resolve(ctx, ip)
	return [6]byte(m), err
}

// SetFaults changes the faults injected on the port's send path.
func (d *Daemon) SetFaults(f link.Faults) error {
	if d.closing.Load() {
		return ErrClosed
	}
	old := d.link.Faults()
	err := d.link.setFaults(f)
	d.log.Info("faults changed", zap.String("from", faultsString(old)), zap.String("to", faultsString(d.link.Faults())), zap.Error(err))
	return err
}

// Faults returns the faults injected on the port's send path.
func (d *Daemon) Faults() link.Faults { return d.link.Faults() }

// SetLinkUp overrides the port's carrier: false takes the port down as if
// the cable were pulled (link dropped, port DOWN, IB_EVENT_PORT_ERR to user
// contexts); true gives it back to the interface's own state.
func (d *Daemon) SetLinkUp(up bool) error {
	if d.closing.Load() {
		return ErrClosed
	}
	d.nd.forcedDown.Store(!up)
	d.portChanged(d.port.Info(), 0, "control")
	return nil
}

// Close shuts the daemon down in order:
//
//  1. shutdown hooks (kernel-mode consumers) and the handler's Quiesce:
//     every QP to the error state through the driver, so that programs get
//     flush completions, and clients told the device is going;
//  2. the attach server: every session closed, which destroys what its
//     context created (the data plane still runs, so DESTROY_QP finds it);
//  3. the control socket, the port watcher;
//  4. the driver (remaining objects, then the reverse of bring-up), the
//     engine, the link, the device;
//  5. the capture flushed and closed, the sysfs tree and sockets removed.
//
// Close is idempotent and safe to call concurrently; every caller gets the
// first call's result.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		d.closing.Store(true)
		close(d.stop)
		d.closeErr = d.shutdown()
		close(d.done)
	})
	<-d.done
	return d.closeErr
}

func (d *Daemon) shutdown() error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	d.log.Info("shutting down")
	d.hookMu.Lock()
	hooks := d.hooks
	d.hookMu.Unlock()
	for _, fn := range hooks {
		fn(ctx)
	}
	if q, ok := d.handler.(Quiescer); ok {
		if err := q.Quiesce(ctx); err != nil {
			errs = append(errs, fmt.Errorf("quiesce: %w", err))
		}
	}
	if err := d.attach.Close(); err != nil {
		errs = append(errs, fmt.Errorf("attach server: %w", err))
	}
	d.ctl.close()
	_ = d.port.Close() // ends followPort
	d.bg.Wait()
	if err := d.stopCM(); err != nil {
		errs = append(errs, fmt.Errorf("cm: %w", err))
	}
	if err := d.drv.Close(); err != nil {
		errs = append(errs, fmt.Errorf("driver: %w", err))
	}
	if err := d.eng.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: %w", err))
	}
	if err := d.link.Close(); err != nil {
		errs = append(errs, fmt.Errorf("link: %w", err))
	}
	if err := d.dev.Close(); err != nil {
		errs = append(errs, fmt.Errorf("device: %w", err))
	}
	if err := d.closeCapture(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(d.paths.Dir); err != nil {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if err != nil {
		d.log.Error("shut down with errors", zap.Error(err))
	} else {
		d.log.Info("shut down cleanly")
	}
	return err
}

// openCapture opens the --pcap capture.
func (d *Daemon) openCapture() error {
	w := d.cfg.PcapWriter
	ng := false
	if w == nil && d.cfg.Pcap != "" {
		f, err := os.OpenFile(d.cfg.Pcap, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("pcap: %w", err)
		}
		d.capf, w, ng = f, f, isPcapng(d.cfg.Pcap)
	}
	if w == nil {
		return nil
	}
	c, err := newCapture(w, ng, d.clock.Epoch())
	if err != nil {
		if d.capf != nil {
			d.capf.Close()
			d.capf = nil
		}
		return fmt.Errorf("pcap %s: %w", d.cfg.Pcap, err)
	}
	d.capt = c
	d.link.cap.Store(c)
	return nil
}

// closeCapture stops the capture and closes its file.
func (d *Daemon) closeCapture() error {
	if d.capt == nil {
		return nil
	}
	d.link.cap.Store(nil)
	err := d.capt.flush()
	if d.capf != nil {
		if cerr := d.capf.Close(); err == nil {
			err = cerr
		}
	}
	d.capt, d.capf = nil, nil
	if err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	return nil
}

// flushCapture writes the capture out a second after the first frame that
// is not on disk yet, so that it can be read while the daemon runs. With
// no traffic it sleeps on the capture's dirty channel: no ticker wakes an
// idle daemon.
func (d *Daemon) flushCapture() {
	defer d.bg.Done()
	c := d.capt
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-c.dirty:
		}
		t.Reset(time.Second)
		select {
		case <-d.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if err := c.flush(); err != nil {
			d.log.Error("capture stopped", zap.Error(err))
			return
		}
	}
}

// faultsString is the compact form of f, "none" for no faults.
func faultsString(f link.Faults) string {
	if !f.Enabled() {
		return "none"
	}
	return f.String()
}

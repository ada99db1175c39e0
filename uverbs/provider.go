package uverbs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Resolver finds the Ethernet address of a RoCE destination, as the
// kernel's rdma_addr_find_l2_eth_by_grh does through the routing and
// neighbour tables. The daemon implements it over netlink; tests use a
// StaticResolver. Destinations that are multicast or one of the device's
// own addresses never reach it (ib_resolve_eth_dmac maps the former; the
// latter resolve to the device's MAC through the loopback route).
type Resolver interface {
	// Resolve returns the MAC of the next hop towards dst from the local
	// address src and the route's hop limit. Errors are errnos as
	// rdma_resolve_ip returns them: ENETUNREACH/EHOSTUNREACH without a
	// route, ETIMEDOUT when the neighbour does not answer.
	Resolve(src, dst netip.Addr) (mac net.HardwareAddr, hopLimit uint8, err error)
}

// StaticResolver is a Resolver over a fixed neighbour table.
type StaticResolver struct {
	Neighbours map[netip.Addr]net.HardwareAddr
	HopLimit   uint8 // the route's hop limit; 0 means 64 (ip4_dst_hoplimit's default)
}

// Resolve implements Resolver: a neighbour not in the table times out, as
// an unanswered ARP/ND does (process_one_req: -ETIMEDOUT).
func (r *StaticResolver) Resolve(src, dst netip.Addr) (net.HardwareAddr, uint8, error) {
	hl := r.HopLimit
	if hl == 0 {
		hl = defaultHopLimit
	}
	if mac, ok := r.Neighbours[dst.Unmap()]; ok && len(mac) == 6 {
		return mac, hl, nil
	}
	return nil, 0, eTIMEDOUT
}

// defaultHopLimit is what ip4_dst_hoplimit / ip6_dst_hoplimit give for a
// route without an explicit hop limit (sysctl ip_default_ttl / hop_limit).
const defaultHopLimit = 64

// Limits bound what one context may hold, so that a misbehaving program
// cannot exhaust the daemon. Zero fields take the defaults.
type Limits struct {
	MaxObjects   int    // live handles (PDs, MRs, MWs, CQs, QPs, AHs); default 65536
	MaxChannels  int    // completion channels; default 1024
	MaxMemRanges int    // MEM ranges handed over; default 4096
	MaxMemBytes  uint64 // bytes of MEM ranges; default 64 GiB
	MaxMapIO     uint64 // bytes registered through /proc/self/mem at once; default 64 GiB
	MaxMRBytes   uint64 // bytes of one registration; default 16 GiB
}

func (l *Limits) fill() {
	if l.MaxObjects <= 0 {
		l.MaxObjects = 1 << 16
	}
	if l.MaxChannels <= 0 {
		l.MaxChannels = 1024
	}
	if l.MaxMemRanges <= 0 {
		l.MaxMemRanges = 4096
	}
	if l.MaxMemBytes == 0 {
		l.MaxMemBytes = 64 << 30
	}
	if l.MaxMapIO == 0 {
		l.MaxMapIO = 64 << 30
	}
	if l.MaxMRBytes == 0 {
		l.MaxMRBytes = 16 << 30
	}
}

// Config configures a Provider.
type Config struct {
	// Device is the device name sent in the HELLO reply (default irdma0).
	Device string
	// Mem is the device's host memory bus (the driver's HW.Mem()): client
	// memory is mapped there. Required.
	Mem *hostmem.Memory
	// Resolver resolves destination MACs for CREATE_AH and for MODIFY_QP
	// with an address vector on connected QPs. Nil resolves only the
	// device's own addresses and multicast; anything else times out.
	Resolver Resolver
	// Logger receives per-session diagnostics; nil means none.
	Logger *zap.Logger
	// Limits bound each context.
	Limits Limits
	// DataPlane is the engine that polls the doorbell pages (the
	// provider is its NotifyingSource); nil: none.
	DataPlane DataPlane
}

// DataPlane is what the provider asks of the data plane: pass on a post
// notification for a QP (Notify: a notification names a context, whose
// QPs are all notified; the data plane wakes only those with a WQE at the
// SQ head), and wake a parked engine when a context that cannot notify
// gets a QP, so that it polls that context's doorbell page with backoff
// again. (The data plane takes a QP's context up when the device loads
// it at MODIFY_QP: emu/qp Table.Loaded.)
type DataPlane interface {
	Notify(qpid uint32)
	Kick()
	// TakeUpPosted returns once the data plane has fetched the WQEs
	// posted at the QP's SQ head (bounded): commands that must come
	// after the program's posts call it first (Session.Command).
	TakeUpPosted(qpid uint32)
}

// Provider is the daemon's uverbs device: an attach.Handler whose Sessions
// are the kernel's uverbs files, each with one ucontext, answering
// libibverbs' write() commands and libirdma's provider data as the
// uverbs core (drivers/infiniband/core/uverbs_cmd.c) and irdma
// (drivers/infiniband/hw/irdma/verbs.c) do.
//
// It also gives the data plane its view of user contexts: Poll, Park and
// Unpark make it an engine.NotifyingSource over every context's doorbell
// page (docs/dataplane.md "Idle and wake-up on post").
type Provider struct {
	d      *driver.Device
	mem    *hostmem.Memory
	cfg    Config
	log    *zap.Logger
	lim    uk.Limits
	regAtt driver.DeviceAttr // ib_device.attrs as cached at registration
	// srq: the device has SRQs (IRDMA_FEATURE_SRQ, GEN_3): the SRQ
	// commands exist and GET_CONTEXT answers as a kernel with GEN_3
	// support does.
	srq bool

	// mu guards the list of open sessions; Poll holds it for reading, Open
	// and Session.Close (before it unmaps the session's doorbell page) for
	// writing, each only for a slice copy.
	mu       sync.RWMutex
	sessions atomic.Pointer[[]*Session]
	nextID   atomic.Uint64
	// nextMRResID is the next MR's restrack id (restrack.go).
	nextMRResID atomic.Uint32

	// nmu guards the contexts that notify, the state last published to
	// them and the counters of those gone.
	nmu            sync.Mutex
	parked         bool
	notifiers      map[*Session]*notifier
	notifiedGone   uint64
	suppressedGone uint64
	notifyWakeups  atomic.Uint64 // eventfd reads: notifications that woke the daemon
	notifyNamed    atomic.Uint64 // QPs rung by their bit in a notify page

	procMemCalls atomic.Uint64 // reads and writes of programs' /proc/self/mem (progMem)

	doorbells atomic.Uint64 // SQ doorbell hints delivered by Poll
	foreignDB atomic.Uint64 // doorbell values naming no QP of the context
	panics    atomic.Uint64 // commands that panicked (a bug; answered -EIO)
	quiesced  atomic.Bool   // the device is going away (Quiesce)
}

// NewProvider creates the uverbs device for a driver instance. The
// device attributes are snapshot now: the legacy QUERY_DEVICE returns
// ib_device.attrs, cached when the device registered.
func NewProvider(d *driver.Device, cfg Config) (*Provider, error) {
	if d == nil {
		return nil, errors.New("uverbs: nil driver")
	}
	if cfg.Mem == nil {
		return nil, errors.New("uverbs: Config.Mem is required")
	}
	if cfg.Device == "" {
		cfg.Device = attach.DefaultDevice
	}
	cfg.Limits.fill()
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	attr, err := d.QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("uverbs: query device: %w", err)
	}
	p := &Provider{d: d, mem: cfg.Mem, cfg: cfg, log: log, regAtt: attr,
		lim: uk.LimitsFrom(profile.Profile{UK: d.UKAttrs()}), parked: true, notifiers: map[*Session]*notifier{},
		srq: d.UKAttrs().FeatureFlags&profile.FeatureSRQ != 0}
	empty := []*Session{}
	p.sessions.Store(&empty)
	return p, nil
}

// Open implements attach.Handler: every HELLO opens a uverbs file (no
// context yet: GET_CONTEXT creates it, ib_uverbs_open).
func (p *Provider) Open(peer *attach.Peer) (attach.Session, attach.Welcome, error) {
	if peer == nil {
		return nil, attach.Welcome{}, eINVAL
	}
	if p.quiesced.Load() {
		return nil, attach.Welcome{}, eIO // ib_uverbs_open: no ib_dev any more
	}
	s := newSession(p, peer)
	p.mu.Lock()
	old := *p.sessions.Load()
	l := make([]*Session, 0, len(old)+1)
	l = append(l, old...)
	l = append(l, s)
	p.sessions.Store(&l)
	p.mu.Unlock()
	s.log.Debug("uverbs: open", zap.Bool("procmem", peer.Mem != nil))
	w := attach.Welcome{Device: p.cfg.Device, ABIVersion: irdmaABIVer}
	if p.cfg.DataPlane != nil {
		w.Features |= attach.FeatureNotify // the notification rings the engine's QPs
	}
	return s, w, nil
}

// remove takes a closing session off the list. Once it returns, no Poll
// touches the session's doorbell page.
func (p *Provider) remove(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.sessions.Load()
	l := make([]*Session, 0, len(old))
	for _, x := range old {
		if x != s {
			l = append(l, x)
		}
	}
	p.sessions.Store(&l)
}

// Sessions returns the number of open uverbs files.
func (p *Provider) Sessions() int { return len(*p.sessions.Load()) }

// Poll is the doorbell hook of the data plane (it satisfies
// engine.DoorbellSource): for each context's doorbell page it takes the
// SQ doorbell word (offset 0, the qp_id libirdma's irdma_uk_qp_post_wr
// stores) and clears it, and calls ring with the QP id if the QP belongs
// to that context. The CQ arm word (offset 64) is cleared too: the arm
// state itself is read from the CQ shadow area when a CQE is written.
// Both are hints — stores of the same value coalesce, and a cleared word
// is rewritten at the next post — so the data plane must still find SQ
// WQEs by their valid bits, and RQ WQEs (which have no doorbell) always.
// Poll waits only for a session being opened or taken off the list (a
// slice copy under mu): it must not skip a round, because the poll right
// after Park is what catches a post that read "polling" just before it
// (engine.NotifyingSource).
func (p *Provider) Poll(ring func(qpid uint32)) {
	p.mu.RLock()
	var buf [16]uint32
	rung := buf[:0]
	for _, s := range *p.sessions.Load() {
		db := s.db.Load()
		if db == nil {
			continue
		}
		_ = db.takeCQ()
		v := db.takeSQ()
		if v == 0 {
			continue
		}
		if !s.ownsQP(v) {
			p.foreignDB.Add(1)
			continue
		}
		// The context has one SQ doorbell word: when two of its QPs post
		// back to back the second store replaces the first, and stores of
		// the same id coalesce. The value read names only the last ringer,
		// so every QP of the context is rung; an engine scan of a QP with
		// no new WQE costs one valid-bit read.
		p.doorbells.Add(1)
		for id := range *s.qpIDs.Load() {
			rung = append(rung, id)
		}
	}
	p.mu.RUnlock()
	for _, id := range rung {
		ring(id)
	}
}

// Park implements engine.NotifyingSource: no worker polls the doorbell
// pages any more, so every context that notifies is told "parked" (its
// next post writes its eventfd). It reports whether a doorbell page must
// still be polled with backoff: a context with a QP that cannot notify
// (no NOTIFY: an old preload or client, or a reader that failed).
func (p *Provider) Park() bool {
	p.nmu.Lock()
	p.parked = true
	for _, n := range p.notifiers {
		n.setPolling(false)
	}
	p.nmu.Unlock()
	for _, s := range *p.sessions.Load() {
		if s.db.Load() == nil || len(*s.qpIDs.Load()) == 0 {
			continue
		}
		if n := s.ntf.Load(); n == nil || n.dead.Load() {
			return true
		}
	}
	return false
}

// Unpark implements engine.NotifyingSource: a worker polls the doorbell
// pages again; the contexts that notify stop notifying.
func (p *Provider) Unpark() {
	p.nmu.Lock()
	p.parked = false
	for _, n := range p.notifiers {
		n.setPolling(true)
	}
	p.nmu.Unlock()
}

// PortEvent delivers a port event to every open context's asynchronous
// event file, element = port number 1 (ib_uverbs_event_handler):
// IB_EVENT_PORT_ACTIVE or IB_EVENT_PORT_ERR as driver.Device.PortEvent
// computes them on a link change, or any other port-scoped ib_event_type
// (IB_EVENT_GID_CHANGE, 18, when the GID table changed).
func (p *Provider) PortEvent(ev driver.AsyncEvent) {
	for _, s := range *p.sessions.Load() {
		s.asyncEvent(nil, 1, uint32(ev.Type))
	}
}

// ibEventDeviceFatal is IB_EVENT_DEVICE_FATAL.
const ibEventDeviceFatal = 8

// Quiesce prepares the device's removal, as the uverbs core does when a
// device goes away under open files (ib_uverbs_free_hw_resources): from
// now on new opens fail with -EIO, and so does every command but the
// destroys (rdma_lookup_get_uobject on a disassociated file); every QP of
// every context is moved to the error state through the driver
// (MODIFY_QP to ERROR, then FLUSH_WQES, as irdma_modify_qp_roce does), so
// that the work the programs posted completes as flushed in their own CQ
// rings; and every context gets IB_EVENT_DEVICE_FATAL (element 0) on its
// async event file. The attach server's Close then destroys what the
// contexts still hold. ctx bounds the flushes; the event is sent anyway.
func (p *Provider) Quiesce(ctx context.Context) error {
	if p.quiesced.Swap(true) {
		return nil
	}
	var err error
	for _, s := range *p.sessions.Load() {
		for _, q := range *s.qpIDs.Load() {
			if err = ctx.Err(); err != nil {
				break
			}
			// A QP destroyed meanwhile by its program answers an error;
			// one already in ERROR is not modified again by the driver.
			_ = p.d.ModifyQP(q, &driver.QPAttr{QPState: driver.QPSErr}, driver.QPAttrState)
		}
	}
	for _, s := range *p.sessions.Load() {
		s.asyncEvent(nil, 0, ibEventDeviceFatal)
	}
	return err
}

// Stats are the provider's counters.
type Stats struct {
	Sessions         int
	Doorbells        uint64 // SQ doorbell hints passed to the data plane
	ForeignDoorbells uint64 // doorbell values that named no QP of the context
	Panics           uint64 // commands that hit a bug of the daemon (answered -EIO)
	// NotifyContexts is the contexts that notify now (NOTIFY);
	// NotifyWakeups the eventfd reads (notifications that woke the daemon,
	// several coalesced writes counting once); Notified and Suppressed the
	// posts the programs notified and those they did not because the
	// engine polled (the programs' own counters in their notify pages,
	// those of closed contexts included). NotifyNamed is the QPs rung by
	// their bit in a notify page (attach.NotifyQPBits), where a client
	// that names none has every QP of its context rung.
	NotifyContexts       int
	NotifyWakeups        uint64
	NotifyNamed          uint64
	Notified, Suppressed uint64
	// ProcMemCalls is the reads and writes of programs' /proc/self/mem:
	// registrations outside shared memory (mem.go progMem), one system
	// call each. Memory in the programs' arenas is reached without one.
	ProcMemCalls uint64
}

// Stats returns the provider's counters.
func (p *Provider) Stats() Stats {
	st := Stats{Sessions: p.Sessions(), Doorbells: p.doorbells.Load(), ForeignDoorbells: p.foreignDB.Load(),
		Panics: p.panics.Load(), NotifyWakeups: p.notifyWakeups.Load(),
		NotifyNamed: p.notifyNamed.Load(), ProcMemCalls: p.procMemCalls.Load()}
	p.nmu.Lock()
	st.NotifyContexts = len(p.notifiers)
	st.Notified, st.Suppressed = p.notifiedGone, p.suppressedGone
	for _, n := range p.notifiers {
		a, b := n.counters()
		st.Notified += a
		st.Suppressed += b
	}
	p.nmu.Unlock()
	return st
}

package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Config configures an Engine. Zero fields take defaults.
type Config struct {
	// Workers is the number of worker goroutines; 0: min(GOMAXPROCS, 4).
	Workers int
	// Stepped runs no goroutines: the caller drives Poll (deterministic
	// tests with a timing.Manual clock, the simulated-time mode). Workers
	// still partition the QPs.
	Stepped bool
	// Tunables are the transport's choices (qp.DefaultTunables).
	Tunables qp.Tunables
	// Scan configures the rescan of idle active QPs.
	Scan ScanConfig
	// GIDs are the port's addresses, every entry of its GID table: a
	// packet received for any other address is dropped (rxe_rcv's GID
	// check), and a frame the device sends to one of them is delivered
	// inside the device instead of on the link (loopback.go). Empty: no
	// check and no loopback. SetGIDs changes them.
	GIDs []netip.Addr
	// TxBatch bounds the packets a worker hands to the link per Send; 0:
	// the link's BatchSize.
	TxBatch int
	// HandOff turns run to completion off: every QP runs on its worker,
	// also when the worker is parked and the link's receive goroutine or
	// a notification could run it at once (inline.go). Off by default on
	// the wall clock; a manual clock and Stepped never run inline.
	HandOff bool
}

// ScanConfig is the idle-worker policy: how long a worker with nothing to
// do keeps polling before it parks, and how a source whose posters cannot
// notify is polled (docs/dataplane.md "Idle and wake-up on post" has the
// measured figures).
type ScanConfig struct {
	// Disabled turns the rescan off: only doorbells, notifications and
	// traffic wake QPs.
	Disabled bool
	// Spin is how many yields (runtime.Gosched) an idle worker makes at
	// least before it parks; default 4, negative: none.
	Spin int
	// Poll is how long an idle worker keeps polling — the doorbell
	// sources and its active QPs' SQs by valid bit, yielding in between —
	// after its last work, once its Spin yields are done, before it parks;
	// default (0 or negative) none: on two cores shared with busy-polling
	// programs any window measured slower than parking at once
	// (docs/dataplane.md). While some worker polls, notifying posters need
	// not notify (NotifyingSource).
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the sleeps, doubling from MinBackoff
	// (default 10 µs) to MaxBackoff (default 1 ms), between the polls of a
	// source that cannot be notified (Parker.Park reports true, or a plain
	// DoorbellSource). MaxBackoff is also the period of the rescan of
	// active QPs while a worker is busy.
	MinBackoff, MaxBackoff time.Duration
	// Linger is how long a QP with nothing outstanding stays in the scan
	// set after its last work; default 100 ms.
	Linger time.Duration
}

func (c *Config) fill() {
	if c.Workers <= 0 {
		c.Workers = min(runtime.GOMAXPROCS(0), 4)
	}
	s := &c.Scan
	if s.Spin < 0 {
		s.Spin = 0
	} else if s.Spin == 0 {
		s.Spin = 4
	}
	s.Poll = max(s.Poll, 0)
	if s.MinBackoff <= 0 {
		s.MinBackoff = 10 * time.Microsecond
	}
	if s.MaxBackoff <= 0 {
		s.MaxBackoff = time.Millisecond
	}
	s.MaxBackoff = max(s.MaxBackoff, s.MinBackoff)
	if s.Linger <= 0 {
		s.Linger = 100 * time.Millisecond
	}
}

// DoorbellSource is a place doorbells land that nothing traps: the user
// doorbell pages in shared memory. Poll calls ring for every QP id it saw
// rung since its last call; it must not block. It is called by one worker
// at a time, whenever some worker polls: while it is busy and during its
// Spin yields and poll window (ScanConfig). A source that is only a DoorbellSource is
// also polled with backoff while every worker is parked.
type DoorbellSource interface {
	Poll(ring func(qpid uint32))
}

// NotifyingSource is a DoorbellSource whose posters can tell the engine
// that they posted, as a virtio driver kicks its device: the engine
// publishes through Park and Unpark whether any worker is polling, the
// poster reads that after its doorbell store and notifies only when none
// is; the notification rings the QPs (Engine.Doorbell), which wakes their
// workers (docs/dataplane.md "Idle and wake-up on post").
type NotifyingSource interface {
	DoorbellSource
	// Park tells the source that no worker polls from now on: posters
	// must notify. The engine polls the source once more right after
	// Park returns, so a post whose poster read "polling" before Park's
	// store is still found: each side stores, then fences, then loads
	// the other's word, so at least one sees the other (Dekker; virtio's
	// event index closes the same race). Park reports whether the source
	// must still be polled with backoff (posters that cannot notify).
	Park() (poll bool)
	// Unpark tells the source that a worker polls again: posters may
	// stop notifying.
	Unpark()
}

// Errors.
var (
	ErrStarted = errors.New("engine: already started")
	ErrClosed  = errors.New("engine: closed")
)

// Engine is the data plane of one device.
type Engine struct {
	dev     *device.Device
	cfg     Config
	dp      qp.DataPlane
	clock   timing.Clock
	workers []*worker
	runners []*worker // run to completion (inline.go); none when it is off
	every   []*worker // workers and runners: every qp.Ctx of the engine
	port    *port

	srcMu   sync.Mutex
	sources atomic.Pointer[[]DoorbellSource]

	// srcPoll serialises the polls of the sources (any polling worker
	// takes it with TryLock; parking waits for it).
	srcPoll sync.Mutex
	srcRing func(qpid uint32) // ringFromSource
	srcRang bool              // under srcPoll: the current poll rang a QP
	srcInto *pending          // under srcPoll: where the current poll collects the QPs it rings, or nil
	// pollers counts the workers that are not parked (stepped: 1 while
	// Poll finds work, 0 once a Poll found nothing).
	pollers atomic.Int32
	// parkMu serialises Park and Unpark; parked and backoff are under it.
	parkMu  sync.Mutex
	parked  bool // the notifying sources were told Park
	backoff bool // since the last Park, some source must be polled with backoff
	sched   schedCounters

	entMu   sync.Mutex
	entries []*entry // every transport attached, for Close and Stats

	cancelDB func()
	started  atomic.Bool
	closed   atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup

	unknownDoorbells atomic.Uint64
	intakeTimeouts   atomic.Uint64
}

// New creates the data plane of dev and subscribes to its WQEALLOC
// register. Attach a link, then Start (unless Config.Stepped).
func New(dev *device.Device, cfg Config) (*Engine, error) {
	cfg.fill()
	e := &Engine{dev: dev, cfg: cfg, clock: dev.Clock(), stop: make(chan struct{}), parked: true}
	e.dp = qp.DataPlane{
		QPs: dev.QPs(), Mem: dev.Mem(), MRs: dev.MRs(), AHs: dev.AHs(), Events: dev.Events(),
		Stats: dev.HWStats(), Meter: dev.Meter(), Clock: dev.Clock(), Profile: dev.Profile(),
		Tun: cfg.Tunables,
	}
	e.dp.Init()
	e.srcRing = e.ringFromSource
	e.port = &port{e: e}
	e.port.rx.meter = e.dp.Meter.Local()
	e.SetGIDs(cfg.GIDs)
	pool := link.NewPool(link.DefaultPoolSize)
	for i := 0; i < cfg.Workers; i++ {
		e.workers = append(e.workers, newWorker(e, i, pool))
	}
	if inlineOK(&cfg, e.clock) {
		for i := 0; i < runners; i++ {
			e.runners = append(e.runners, newWorker(e, -1-i, pool))
		}
	}
	e.every = append(append([]*worker{}, e.workers...), e.runners...)
	if len(e.runners) > 0 {
		e.port.rx.pend.on = true
		for _, w := range e.every {
			w.rx.pend.on = true
		}
	}
	cancel, err := dev.Regs().OnWrite(dev.Profile().Regs.WQEALLOC, func(v uint32) {
		e.Doorbell(v & regs.WQEALLOC_QPID)
	})
	if err != nil {
		return nil, err
	}
	e.cancelDB = cancel
	if !cfg.Stepped {
		dev.QPs().SetOnLoad(e.load)
	}
	return e, nil
}

// load takes up a QP's context when the device loads it (qp.Table.Loaded:
// CREATE_QP, MODIFY_QP): the transport is built now, and a QP that can
// now receive or send is run once, which reads the context and sets the
// PSNs up, so that its first packet or WQE finds it ready. Not in
// Config.Stepped, whose order of events the tests and emu/sim pin: there
// the first doorbell or packet takes the QP up.
func (e *Engine) load(q *qp.QP) {
	if e.closed.Load() {
		return
	}
	tr := e.transportFor(q)
	switch q.State() {
	case qp.StateRTR, qp.StateRTS:
		tr.Doorbell()
	}
}

// AttachLink makes l the port's link: frames the port sends go to it, the
// frames it receives come to the port. Call it before Start.
func (e *Engine) AttachLink(l link.Link) error {
	if e.started.Load() {
		return ErrStarted
	}
	if e.closed.Load() {
		return ErrClosed
	}
	e.port.l = l
	e.port.looper, _ = l.(link.Looper)
	e.dp.SrcPorts, _ = l.(link.SourcePorter)
	e.port.state.Store(uint32(l.State()))
	e.dp.PortMTU = ibMTU(l.MTU())
	batch := e.cfg.TxBatch
	if batch <= 0 {
		batch = l.BatchSize()
	}
	for _, w := range e.every {
		w.ctx.Pool = l.Pool()
		w.ctx.MAC = l.MAC()
		w.batch = max(batch, 1)
		w.tx = make([]*link.Packet, 0, w.batch)
		w.local = make([]*link.Packet, 0, w.batch)
	}
	l.Attach(e.port)
	return nil
}

// ibMTU is the largest IB MTU whose packets fit an IP MTU of ipMTU with
// the longest headers (IPv6, UDP, BTH, RETH, ImmDt, ICRC).
func ibMTU(ipMTU int) int {
	room := ipMTU - wire.IPv6Size - wire.UDPSize - wire.BTHSize - wire.RETHSize - wire.ImmDtSize - wire.ICRCSize
	m := wire.MaxPMTU
	for m > wire.MinPMTU && m > room {
		m /= 2
	}
	return m
}

// Start starts the workers (not with Config.Stepped).
func (e *Engine) Start() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if !e.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	if e.cfg.Stepped {
		return nil
	}
	for _, w := range e.workers {
		e.wg.Add(1)
		go w.loop()
	}
	return nil
}

// Poll runs one round of every worker in the caller's goroutine: the QPs
// ready now, then a poll of the doorbell sources, or, if nothing ran, a
// rescan. It reports whether anything ran. A Poll that finds nothing parks
// the notifying sources (and polls them once more, as a parking worker
// does); the next Poll that finds work unparks them. Only with
// Config.Stepped.
func (e *Engine) Poll() bool {
	if !e.cfg.Stepped || e.closed.Load() {
		return false
	}
	e.started.Store(true)
	did := false
	for _, w := range e.workers {
		if w.round() {
			did = true
		}
	}
	if e.pollSources(false, nil) {
		did = true
	}
	if !did && !e.cfg.Scan.Disabled {
		for _, w := range e.workers {
			if w.scan(e.clock.Now()) {
				did = true
			}
		}
	}
	switch {
	case did && e.pollers.CompareAndSwap(0, 1):
		e.syncSources(nil)
	case !did && e.pollers.CompareAndSwap(1, 0):
		if found, _ := e.syncSources(nil); found {
			did = true
		}
	}
	return did
}

// SetGIDs replaces the port's addresses (Config.GIDs). Workers read the
// new snapshot at their next flush.
func (e *Engine) SetGIDs(gids []netip.Addr) {
	g := make([]netip.Addr, len(gids))
	for i, a := range gids {
		g[i] = a.Unmap()
	}
	e.port.gids.Store(&g)
}

// AddDoorbellSource registers a polled doorbell source.
func (e *Engine) AddDoorbellSource(s DoorbellSource) {
	e.srcMu.Lock()
	defer e.srcMu.Unlock()
	var l []DoorbellSource
	if old := e.sources.Load(); old != nil {
		l = append(l, *old...)
	}
	l = append(l, s)
	e.sources.Store(&l)
	e.addSource(s)
	e.Kick()
}

// Kick wakes every worker, so that a parked engine looks at its sources
// again: a source whose posters cannot notify calls it when it gets one
// (its NotifyingSource.Park answers true from then on, and the workers
// park again with a backoff timer).
func (e *Engine) Kick() {
	for _, w := range e.workers {
		w.kick()
	}
}

// Doorbell is a doorbell hint for QP qpid (WQEALLOC, a doorbell source).
func (e *Engine) Doorbell(qpid uint32) {
	if tr := e.rung(qpid); tr != nil {
		tr.Doorbell()
	}
}

// rung returns the transport of the QP a doorbell or notification names,
// nil (counted) when no QP has that id or the engine is closed.
func (e *Engine) rung(qpid uint32) *qp.Transport {
	if e.closed.Load() {
		return nil
	}
	q := e.dev.QPs().Get(qpid)
	if q == nil {
		e.unknownDoorbells.Add(1)
		return nil
	}
	return e.transportFor(q)
}

// posted returns the transport of QP qpid if it has a WQE at its SQ fetch
// index (qp.Transport.Posted); nil, counted in skipped, if it has nothing
// new; nil if no QP has that id.
func (e *Engine) posted(qpid uint32, skipped *atomic.Uint64) *qp.Transport {
	tr := e.rung(qpid)
	if tr == nil {
		return nil
	}
	if !tr.Posted() {
		skipped.Add(1)
		return nil
	}
	return tr
}

// Notify is a post notification's ring of QP qpid (a context's eventfd,
// docs/dataplane.md "Idle and wake-up on post"): the notification names a
// context, not a QP, so it is rung for every QP of the context, and only
// a QP with something new at its SQ head is woken (qp.Transport.Posted) —
// run at once on the caller's goroutine if its worker is parked
// (inline.go). Not for WQEALLOC: a register write runs in its writer's
// goroutine, which may hold the device's locks.
func (e *Engine) Notify(qpid uint32) {
	tr := e.posted(qpid, &e.sched.skipped)
	if tr == nil {
		return
	}
	tr.Ring()
	e.wake(tr.Scheduler().(*entry))
}

// intakeLimit bounds how long a control command waits for a worker to
// take up what was posted before it (TakeUpPosted): long enough for a
// worker behind busy programs on two cores, short enough that a stuck one
// cannot stall the control path.
const intakeLimit = 100 * time.Millisecond

// TakeUpPosted returns once the worker of QP qpid has fetched the WQEs
// posted at its SQ head now (qp/intake.go: a command the program issues
// after posting must find its work done, as on the device), or after
// intakeLimit. Stepped engines return at once: their caller runs the
// workers.
func (e *Engine) TakeUpPosted(qpid uint32) {
	if e.cfg.Stepped || e.closed.Load() {
		return
	}
	q := e.dev.QPs().Get(qpid)
	if q == nil {
		return
	}
	if !e.transportFor(q).TakeUpPosted(intakeLimit) {
		e.intakeTimeouts.Add(1)
	}
}

// transportFor returns q's transport, attaching one (and the engine's
// record of it, its Scheduler) on first use.
func (e *Engine) transportFor(q *qp.QP) *qp.Transport {
	for {
		if tr := q.Transport.Load(); tr != nil {
			return tr
		}
		en := &entry{w: e.workers[int(q.ID)%len(e.workers)]}
		en.tr = qp.NewTransport(q, &e.dp, en)
		if q.Transport.CompareAndSwap(nil, en.tr) {
			e.register(en)
			return en.tr
		}
	}
}

// register records a new transport, forgetting the ones whose QP was
// destroyed and that hold nothing any more, so that QPs created and
// destroyed for the life of a daemon do not accumulate.
func (e *Engine) register(en *entry) {
	e.entMu.Lock()
	defer e.entMu.Unlock()
	if len(e.entries) >= 64 && len(e.entries)&63 == 0 {
		j := 0
		for _, x := range e.entries {
			if x.tr.Dead() && !x.queued.Load() && x.tr.Queued() == 0 {
				continue
			}
			e.entries[j] = x
			j++
		}
		clear(e.entries[j:])
		e.entries = e.entries[:j]
	}
	e.entries = append(e.entries, en)
}

// Close stops the engine: the doorbell subscription, the port (waiting for
// a delivery in progress), the workers, every QP's timers; queued packets
// are released. Close the engine before the device.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	if e.cancelDB != nil {
		e.cancelDB()
	}
	if !e.cfg.Stepped {
		e.dev.QPs().SetOnLoad(nil)
	}
	e.port.close()
	close(e.stop)
	e.wg.Wait()
	// A notification reader may be running a QP on a runner: wait for it,
	// and keep the runners taken, so that nothing runs inline from now on.
	for _, r := range e.runners {
		for !r.busy.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
	}
	for _, w := range e.every {
		w.close()
	}
	e.entMu.Lock()
	ents := e.entries
	e.entMu.Unlock()
	for _, en := range ents {
		// Wait out a control operation in progress; workers are stopped.
		for !en.tr.TryClaim() {
			runtime.Gosched()
		}
		en.tr.Close()
		en.tr.Unclaim()
	}
	return nil
}

// entry is the engine's record of one QP's transport: its worker and its
// place in the ready queue. It is the transport's qp.Scheduler.
type entry struct {
	tr     *qp.Transport
	w      *worker
	next   atomic.Pointer[entry]
	queued atomic.Bool
	// active: in w.active. Only the worker changes it; a runner reads it
	// (runNow hands a QP its worker has not seen to the worker).
	active atomic.Bool
	// txq orders the transmits of the QP's runs (txorder.go).
	txq txQueue
}

var _ qp.Scheduler = (*entry)(nil)

// Wake queues the QP on its worker (at most once) and kicks the worker.
func (en *entry) Wake() {
	if en.queue() {
		en.w.kick()
	}
}

// queue queues the QP on its worker (at most once) without a kick, and
// reports whether it did. Only the worker itself uses it, for a QP it will
// run in its next round anyway: a kick to itself would be found by its
// next park, which would wake at once — with perftest keeping an SQ
// posted, the rescan's kicks (HasWork) kept the worker cycling through
// park and unpark instead of parking
// (docs/performance.md, "Self-kicks, in-device ICRC, syscalls per
// packet").
func (en *entry) queue() bool {
	if !en.queued.CompareAndSwap(false, true) {
		return false
	}
	en.w.ready.push(en)
	return true
}

// String describes the scheduling state (Engine.Debug).
func (en *entry) String() string {
	return fmt.Sprintf("worker %d queued %v", en.w.id, en.queued.Load())
}

package link

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// PairConfig configures an in-process pair. The zero value is a prompt,
// fault-free link on the wall clock.
type PairConfig struct {
	// Clock times delivery; nil: a new wall clock. With a *timing.Wall
	// each direction has a delivery goroutine; with any other clock
	// (timing.Manual) frames are delivered inside the clock's timer
	// functions, so nothing arrives until the clock is advanced, even
	// with no delay at all.
	Clock timing.Clock
	// Pool is the pool both ends report as theirs and the pair takes
	// duplicates from; nil: NewPool(DefaultPoolSize).
	Pool *Pool
	// MTU is the largest IP packet either end sends (MinMTU..MaxMTU);
	// 0: DefaultMTU.
	MTU int
	// MACs are the Ethernet addresses of ends A and B; zero:
	// 02:00:00:00:00:0a and 02:00:00:00:00:0b (locally administered).
	// The pair delivers every frame whatever its destination address.
	MACs [2]wire.MAC

	// Rate is the line rate in bits per second (e.g. 100e9); 0: frames
	// take no time to serialise. A frame occupies the wire for its length
	// plus FCS, preamble and inter-frame gap, and waits for the frames
	// sent before it.
	Rate uint64
	// Delay is the propagation delay added to every frame (at most a
	// day, so that due times cannot overflow).
	Delay time.Duration
	// QueueLen bounds the frames in flight per direction, held-back
	// frames included; a frame sent beyond it is dropped and counted
	// (DropQueueFull). 0: 1024.
	QueueLen int
	// BatchSize is the most frames handed to a Receiver per call; 0:
	// DefaultBatchSize.
	BatchSize int

	// AtoB and BtoA are the faults injected into each direction. Both
	// may use the same seed: the directions draw from different streams.
	AtoB, BtoA Faults

	// VerifyICRC makes the receiving end check each RoCEv2 frame's ICRC
	// and report it in Packet.ICRC (good or bad), as the UDP link does;
	// otherwise frames arrive ICRCUnchecked.
	VerifyICRC bool

	// Capture, if set, receives a pcap (Ethernet, nanosecond timestamps)
	// of every frame as it arrives at either end, after faults, stamped
	// with the arrival time. Writes are buffered; Close flushes.
	Capture io.Writer
	// CaptureEpoch is the capture's time for clock time 0; zero: the wall
	// clock's epoch, or the Unix epoch for other clocks (so that a Manual
	// clock gives the same file every run).
	CaptureEpoch time.Time

	// StartDown starts the link down (Pair.SetUp brings it up).
	StartDown bool
}

// DefaultQueueLen is the default bound on frames in flight per direction.
const DefaultQueueLen = 1024

// Pair is two link ends joined in memory, for tests and simulations: what
// one end sends arrives at the other on the pair's clock, through the
// configured serialisation, delay and faults. Receivers must not Close
// either end, since closing one stops both directions and waits for
// deliveries in progress.
type Pair struct {
	ends       [2]*End
	dirs       [2]*direction // [0]: A→B, [1]: B→A
	pool       *Pool
	verifyICRC bool
	tap        *captureTap

	up      atomic.Bool
	stateMu sync.Mutex // serialises state changes and their notifications
	dead    bool       // guarded by stateMu; an end was closed
}

// End is one end of a Pair; it implements Link.
type End struct {
	pair   *Pair
	tx     *direction // the direction this end sends on
	name   string
	mac    wire.MAC
	mtu    int
	batch  int
	closed atomic.Bool
	rx     atomic.Pointer[receiverBox]
	c      counters
}

var _ Link = (*End)(nil)

type receiverBox struct{ r Receiver }

// counters are an End's statistics; Stats snapshots them.
type counters struct {
	txFrames, txBytes atomic.Uint64
	rxFrames, rxBytes atomic.Uint64
	drops             [NumDropReasons]atomic.Uint64
}

// NewPair returns a pair, up unless cfg.StartDown, with no receivers
// attached.
func NewPair(cfg PairConfig) (*Pair, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &Pair{pool: cfg.Pool, verifyICRC: cfg.VerifyICRC}
	for i, name := range [2]string{"A", "B"} {
		p.ends[i] = &End{pair: p, name: name, mac: cfg.MACs[i], mtu: cfg.MTU, batch: cfg.BatchSize}
	}
	if cfg.Capture != nil {
		epoch := cfg.CaptureEpoch
		if epoch.IsZero() {
			epoch = time.Unix(0, 0).UTC()
			if w, ok := cfg.Clock.(*timing.Wall); ok {
				epoch = w.Epoch()
			}
		}
		tap, err := newCaptureTap(cfg.Capture, epoch)
		if err != nil {
			return nil, err
		}
		p.tap = tap
	}
	p.up.Store(!cfg.StartDown)
	for i, f := range [2]Faults{cfg.AtoB, cfg.BtoA} {
		d, err := newDirection(p, p.ends[i], p.ends[1-i], f, uint64(i), &cfg)
		if err != nil {
			p.dirs[0].stopIfSet()
			return nil, err
		}
		p.dirs[i] = d
		p.ends[i].tx = d
	}
	return p, nil
}

// stopIfSet stops d unless it is nil (a NewPair that failed half-way).
func (d *direction) stopIfSet() {
	if d != nil {
		d.stop()
	}
}

// fill applies the defaults and checks the ranges.
func (cfg *PairConfig) fill() error {
	if cfg.Clock == nil {
		cfg.Clock = timing.NewWall()
	}
	if cfg.Pool == nil {
		cfg.Pool = NewPool(DefaultPoolSize)
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < MinMTU || cfg.MTU > MaxMTU {
		return fmt.Errorf("link: MTU %d not in %d..%d", cfg.MTU, MinMTU, MaxMTU)
	}
	if cfg.MACs[0] == (wire.MAC{}) {
		cfg.MACs[0] = wire.MAC{0x02, 0, 0, 0, 0, 0x0a}
	}
	if cfg.MACs[1] == (wire.MAC{}) {
		cfg.MACs[1] = wire.MAC{0x02, 0, 0, 0, 0, 0x0b}
	}
	if cfg.Rate > maxLinkRate {
		return fmt.Errorf("link: rate %d b/s above %d", cfg.Rate, uint64(maxLinkRate))
	}
	if cfg.Delay < 0 || cfg.Delay > maxDelay {
		return fmt.Errorf("link: delay %v not in 0..%v", cfg.Delay, maxDelay)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.QueueLen < 1 || cfg.QueueLen > maxQueueLen {
		return fmt.Errorf("link: queue length %d not in 1..%d", cfg.QueueLen, maxQueueLen)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > maxBatchSize {
		return fmt.Errorf("link: batch size %d not in 1..%d", cfg.BatchSize, maxBatchSize)
	}
	if err := cfg.AtoB.Validate(); err != nil {
		return fmt.Errorf("link: A→B faults: %w", err)
	}
	if err := cfg.BtoA.Validate(); err != nil {
		return fmt.Errorf("link: B→A faults: %w", err)
	}
	return nil
}

// A returns end A.
func (p *Pair) A() *End { return p.ends[0] }

// B returns end B.
func (p *Pair) B() *End { return p.ends[1] }

// Up reports whether the link is up.
func (p *Pair) Up() bool { return p.up.Load() }

// SetUp brings the link up or down, as pulling and replugging the cable
// would: going down drops every frame in flight (DropLinkDown) and both
// ends' receivers are told, synchronously, in end order. While down, Send
// drops and counts. It does nothing once an end has been closed.
func (p *Pair) SetUp(up bool) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.dead || p.up.Load() == up {
		return
	}
	p.up.Store(up)
	if !up {
		for _, d := range p.dirs {
			d.purge(DropLinkDown)
		}
	}
	s := StateDown
	if up {
		s = StateUp
	}
	for _, e := range p.ends {
		e.notify(s)
	}
}

// Close closes both ends and returns the capture's error, if any.
func (p *Pair) Close() error {
	return errors.Join(p.ends[0].Close(), p.ends[1].Close())
}

// shutdown takes the pair down for good when end e is closed: the
// directions stop and the other end is told the link went down.
func (p *Pair) shutdown(e *End) error {
	p.stateMu.Lock()
	wasUp := p.up.Swap(false)
	first := !p.dead
	p.dead = true
	p.stateMu.Unlock()
	if first {
		for _, d := range p.dirs {
			d.stop()
		}
	}
	if wasUp {
		p.stateMu.Lock()
		for _, o := range p.ends {
			if o != e {
				o.notify(StateDown)
			}
		}
		p.stateMu.Unlock()
	}
	if first && p.tap != nil {
		// Nothing is written once the directions have stopped.
		return p.tap.flush()
	}
	return nil
}

// Send implements Link.
func (e *End) Send(pkts []*Packet) error {
	if e.closed.Load() {
		releaseAll(pkts)
		return net.ErrClosed
	}
	e.tx.send(pkts, e.tx.clock.Now())
	return nil
}

// Looped implements Looper: the capture, if any, records the frames a
// device kept for itself, at the sending end's clock.
func (e *End) Looped(pkts []*Packet) {
	t := e.pair.tap
	if t == nil {
		return
	}
	now := e.tx.clock.Now()
	for _, p := range pkts {
		if p != nil {
			p.Seal() // as the device would for the wire (Packet.Lend)
			t.write(now, p.Data)
		}
	}
}

// Capturing implements Looper: whether the pair has a capture.
func (e *End) Capturing() bool { return e.pair.tap != nil }

var _ Looper = (*End)(nil)

// dropped counts p as dropped for reason and releases it.
func (e *End) dropped(reason DropReason, p *Packet) {
	e.c.drops[reason].Add(1)
	p.Release()
}

// Attach implements Link.
func (e *End) Attach(r Receiver) {
	if r == nil {
		e.rx.Store(nil)
		return
	}
	e.rx.Store(&receiverBox{r})
}

func (e *End) receiver() Receiver {
	if b := e.rx.Load(); b != nil {
		return b.r
	}
	return nil
}

// notify tells e's receiver, if any, about a state change, unless e is
// closed.
func (e *End) notify(s State) {
	if e.closed.Load() {
		return
	}
	if r := e.receiver(); r != nil {
		r.LinkStateChanged(s)
	}
}

// State implements Link.
func (e *End) State() State {
	if e.pair.up.Load() {
		return StateUp
	}
	return StateDown
}

// MTU implements Link.
func (e *End) MTU() int { return e.mtu }

// MAC implements Link.
func (e *End) MAC() wire.MAC { return e.mac }

// BatchSize implements Link.
func (e *End) BatchSize() int { return e.batch }

// Pool implements Link.
func (e *End) Pool() *Pool { return e.pair.pool }

// Peer returns the other end of the pair.
func (e *End) Peer() *End {
	if e == e.pair.ends[0] {
		return e.pair.ends[1]
	}
	return e.pair.ends[0]
}

// String returns "A" or "B".
func (e *End) String() string { return e.name }

// Stats implements Link.
func (e *End) Stats() Stats {
	s := Stats{
		TxFrames: e.c.txFrames.Load(),
		TxBytes:  e.c.txBytes.Load(),
		RxFrames: e.c.rxFrames.Load(),
		RxBytes:  e.c.rxBytes.Load(),
	}
	for i := range s.Drops {
		s.Drops[i] = e.c.drops[i].Load()
	}
	if e.tx.inj != nil {
		s.Faults = e.tx.inj.Stats()
	}
	return s
}

// Close implements Link. Closing either end stops the pair: the other
// end's receiver is told the link went down, and its Send drops
// (DropLinkDown) until it too is closed. It returns the capture's error,
// if any.
func (e *End) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	return e.pair.shutdown(e)
}

package link

import (
	"math"
	"sync"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Ethernet framing the serialisation delay charges besides the frame the
// link carries (IEEE 802.3 clause 4): frames are padded to 60 bytes before
// the 4-byte FCS, and each is preceded by 7 bytes of preamble and the SFD
// and followed by a 12-byte inter-frame gap.
const (
	ethMinFrame  = 60
	ethOverhead  = 4 + 8 + 12
	maxLinkRate  = 1e15 // 1 Pb/s: keeps the serialisation arithmetic in uint64
	maxDelay     = 24 * time.Hour
	maxQueueLen  = 1 << 20
	maxBatchSize = 1024
)

// flight is a frame on its way, due at the far end at due; seq breaks ties
// in send order.
type flight struct {
	due time.Duration
	seq uint64
	p   *Packet
}

// flightQueue is a min-heap of flights by (due, seq), written out rather
// than through container/heap, whose interface{} arguments would allocate
// on every push. Without reordering, frames are pushed in due order and a
// push costs one comparison.
type flightQueue []flight

func (q flightQueue) less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].seq < q[j].seq
}

func (q *flightQueue) push(f flight) {
	*q = append(*q, f)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *flightQueue) pop() flight {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = flight{} // drop the pointer the backing array would keep
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// heldFrame is a frame held back for reordering until left later frames
// have overtaken it.
type heldFrame struct {
	p    *Packet
	due  time.Duration // when it would have arrived unheld
	left int
}

// direction carries frames from one end of a pair to the other: the
// serialiser, the propagation delay, the fault injector and the queue of
// frames in flight, delivered on the clock.
//
// Delivery runs in deliverDue. With the wall clock a goroutine per
// direction runs it when kicked (by Send for frames already due, by the
// clock's timer otherwise), so Send never delivers synchronously and a
// timer expiry costs no goroutine beyond the runtime's. With any other
// clock (Manual, a simulated clock) it runs inside the timer function, so
// nothing moves until the clock is advanced and a test sees the result as
// soon as Advance returns.
type direction struct {
	pair     *Pair
	from, to *End
	clock    timing.Clock
	wall     bool
	inj      *Injector // nil: no faults
	rate     uint64    // bits per second; 0: no serialisation delay
	delay    time.Duration
	capacity int

	mu      sync.Mutex
	queue   flightQueue   // guarded by mu
	held    []heldFrame   // guarded by mu; in hold order
	seq     uint64        // guarded by mu
	txFree  time.Duration // guarded by mu; when the serialiser is next free
	txRem   uint64        // guarded by mu; sub-nanosecond remainder, in 1e-9 bit·s units
	armed   bool          // guarded by mu; the timer is (believed) pending
	armedAt time.Duration // guarded by mu; its deadline
	stopped bool          // guarded by mu

	timer timing.Timer

	// deliverMu serialises deliveries, so that a Receiver never sees two
	// batches of one direction at once and stop can wait for the one in
	// progress.
	deliverMu sync.Mutex
	batch     []*Packet // guarded by deliverMu

	kick   chan struct{} // wall clock: wakes the goroutine
	done   chan struct{} // wall clock: stops it
	exited chan struct{} // wall clock: closed when it has stopped
}

func newDirection(pair *Pair, from, to *End, f Faults, stream uint64, cfg *PairConfig) (*direction, error) {
	d := &direction{
		pair:     pair,
		from:     from,
		to:       to,
		clock:    cfg.Clock,
		rate:     cfg.Rate,
		delay:    cfg.Delay,
		capacity: cfg.QueueLen,
		queue:    make(flightQueue, 0, cfg.QueueLen),
		batch:    make([]*Packet, 0, cfg.BatchSize),
	}
	if f.Enabled() {
		inj, err := NewInjector(f, stream)
		if err != nil {
			return nil, err
		}
		d.inj = inj
	}
	if f.Reorder > 0 && f.ReorderDelay == 0 {
		d.held = make([]heldFrame, 0, min(cfg.QueueLen, 64))
	}
	_, d.wall = cfg.Clock.(*timing.Wall)
	d.timer = cfg.Clock.AfterFunc(math.MaxInt64, d.onTimer)
	d.timer.Stop()
	if d.wall {
		d.kick = make(chan struct{}, 1)
		d.done = make(chan struct{})
		d.exited = make(chan struct{})
		go d.run()
	}
	return d, nil
}

// run is the wall-clock delivery goroutine.
func (d *direction) run() {
	defer close(d.exited)
	for {
		select {
		case <-d.done:
			return
		case <-d.kick:
			d.deliverDue()
		}
	}
}

func (d *direction) wake() {
	select {
	case d.kick <- struct{}{}:
	default: // already kicked
	}
}

func (d *direction) onTimer() {
	d.mu.Lock()
	d.armed = false
	d.mu.Unlock()
	if d.wall {
		d.wake()
		return
	}
	d.deliverDue()
}

// send puts pkts on the wire at now; the caller has checked that its end
// is open. It reports the frames it did not take to the sending end's
// counters.
func (d *direction) send(pkts []*Packet, now time.Duration) {
	kick := false
	d.mu.Lock()
	for _, p := range pkts {
		if p == nil {
			continue
		}
		switch {
		case d.stopped || !d.pair.up.Load():
			// A stopped direction belongs to a pair whose other end
			// was closed: the carrier is gone.
			d.from.dropped(DropLinkDown, p)
		case len(p.Data) < wire.EthernetSize:
			d.from.dropped(DropRunt, p)
		case ipLen(p.Data) > d.from.mtu:
			d.from.dropped(DropTooBig, p)
		default:
			kick = d.transmitLocked(p, now) || kick
		}
	}
	d.mu.Unlock()
	if kick {
		d.wake()
	}
}

func (d *direction) inFlightLocked() int { return len(d.queue) + len(d.held) }

// transmitLocked serialises p onto the wire, applies the faults and queues
// what arrives. It reports whether the wall-clock goroutine must be woken.
func (d *direction) transmitLocked(p *Packet, now time.Duration) bool {
	if d.inFlightLocked() >= d.capacity {
		d.from.dropped(DropQueueFull, p)
		return false
	}
	n := len(p.Data)
	d.from.c.txFrames.Add(1)
	d.from.c.txBytes.Add(uint64(n))
	due := d.serialiseLocked(n, now) + d.delay
	var v Verdict
	if d.inj != nil {
		v = d.inj.Decide(p.Data)
		if v.Drop {
			p.Release()
			return false
		}
	}
	var dup *Packet
	if v.Duplicate {
		// Copy before corrupting: the duplicate is the frame as sent.
		if dup = d.pair.pool.Get(); dup == nil {
			d.from.c.drops[DropNoBuffer].Add(1)
		} else {
			dup.Data = dup.buf[:copy(dup.buf[:], p.Data)]
		}
	}
	v.ApplyCorruption(p.Data)
	kick := false
	switch {
	case v.Reorder && v.HoldDelay > 0:
		kick = d.pushLocked(p, due+v.HoldDelay, now)
	case v.Reorder:
		d.held = append(d.held, heldFrame{p: p, due: due, left: v.HoldFrames})
		// The timer must run at its natural due time at the latest, in
		// case nothing else is in flight to overtake it.
		kick = d.scheduleLocked(due, now)
	default:
		kick = d.pushLocked(p, due, now)
		kick = d.overtakeLocked(due, now) || kick
	}
	if dup != nil {
		if d.inFlightLocked() >= d.capacity {
			d.from.dropped(DropQueueFull, dup)
		} else {
			kick = d.pushLocked(dup, due, now) || kick
		}
	}
	return kick
}

// serialiseLocked returns when the last bit of an n-byte frame leaves the
// serialiser, which becomes free then. The remainder below a nanosecond is
// carried from frame to frame, so back-to-back frames keep the exact rate.
func (d *direction) serialiseLocked(n int, now time.Duration) time.Duration {
	if d.rate == 0 {
		return now
	}
	start := d.txFree
	if now > start {
		start = now
		d.txRem = 0
	}
	bits := uint64(max(n, ethMinFrame)+ethOverhead) * 8
	num := bits*uint64(time.Second) + d.txRem
	d.txRem = num % d.rate
	d.txFree = start + time.Duration(num/d.rate)
	return d.txFree
}

// pushLocked queues p to arrive at due.
func (d *direction) pushLocked(p *Packet, due, now time.Duration) bool {
	d.seq++
	d.queue.push(flight{due: due, seq: d.seq, p: p})
	return d.scheduleLocked(due, now)
}

// overtakeLocked counts one frame arriving at due past every held frame,
// and queues, right behind it, those overtaken often enough.
func (d *direction) overtakeLocked(due, now time.Duration) bool {
	if len(d.held) == 0 {
		return false
	}
	kick := false
	j := 0
	for _, h := range d.held {
		h.left--
		if h.left <= 0 {
			kick = d.pushLocked(h.p, max(due, h.due), now) || kick
			continue
		}
		d.held[j] = h
		j++
	}
	clear(d.held[j:])
	d.held = d.held[:j]
	return kick
}

// scheduleLocked makes sure a frame due at due will be delivered: with
// the wall clock a frame already due wakes the goroutine (reported to the
// caller, which wakes it after unlocking); otherwise the timer is armed
// for due unless it is armed earlier.
func (d *direction) scheduleLocked(due, now time.Duration) bool {
	if d.wall && due <= now {
		return true
	}
	if !d.armed || due < d.armedAt {
		d.timer.Reset(due - now)
		d.armed = true
		d.armedAt = due
	}
	return false
}

// rearmLocked arms the timer for the next frame to deliver: the head of
// the queue, or, when the queue is empty, the first held frame.
func (d *direction) rearmLocked(now time.Duration) {
	var next time.Duration
	switch {
	case len(d.queue) > 0:
		next = d.queue[0].due
	case len(d.held) > 0:
		next = d.held[0].due
	default:
		if d.armed {
			d.timer.Stop()
			d.armed = false
		}
		return
	}
	d.timer.Reset(next - now)
	d.armed = true
	d.armedAt = next
}

// deliverDue hands every frame due by now to the far end, in batches.
// Held frames are released when nothing else is in flight: the frames
// that were to overtake them never came.
func (d *direction) deliverDue() {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	for {
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			return
		}
		now := d.clock.Now()
		batch := d.batch[:0]
		for len(batch) < cap(batch) && len(d.queue) > 0 && d.queue[0].due <= now {
			batch = append(batch, d.queue.pop().p)
		}
		if len(d.queue) == 0 {
			k := 0
			for len(batch) < cap(batch) && k < len(d.held) && d.held[k].due <= now {
				batch = append(batch, d.held[k].p)
				k++
			}
			if k > 0 {
				n := copy(d.held, d.held[k:])
				clear(d.held[n:])
				d.held = d.held[:n]
			}
		}
		full := len(batch) == cap(batch)
		if !full {
			d.rearmLocked(now)
		}
		d.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		d.deliver(batch, now)
		clear(batch) // the receiver owns the packets now; keep no pointers
		if !full {
			return
		}
	}
}

// deliver hands a batch to the far end's receiver.
func (d *direction) deliver(batch []*Packet, now time.Duration) {
	for _, p := range batch {
		p.Time = now
		p.ICRC = ICRCUnchecked
		if d.pair.verifyICRC {
			p.ICRC = checkICRC(p.Data)
		}
		if d.pair.tap != nil {
			d.pair.tap.write(now, p.Data)
		}
	}
	to := d.to
	r := to.receiver()
	if r == nil {
		to.c.drops[DropNoReceiver].Add(uint64(len(batch)))
		releaseAll(batch)
		return
	}
	var bytes uint64
	for _, p := range batch {
		bytes += uint64(len(p.Data))
	}
	to.c.rxFrames.Add(uint64(len(batch)))
	to.c.rxBytes.Add(bytes)
	r.Receive(batch)
}

// checkICRC verifies a frame's ICRC as a link that sees whole frames can.
// A frame that does not pass the gate is left to the receiver's gate.
func checkICRC(frame []byte) ICRCStatus {
	var f wire.Frame
	if wire.ParseFrame(frame, &f) != nil {
		return ICRCUnchecked
	}
	if f.VerifyICRC() != nil {
		return ICRCBad
	}
	return ICRCGood
}

// purgeLocked drops every frame in flight, counting them under reason on
// the sending end.
func (d *direction) purgeLocked(reason DropReason) {
	for len(d.queue) > 0 {
		d.from.dropped(reason, d.queue.pop().p)
	}
	for i := range d.held {
		d.from.dropped(reason, d.held[i].p)
	}
	clear(d.held)
	d.held = d.held[:0]
}

// purge drops the frames in flight (the link went down).
func (d *direction) purge(reason DropReason) {
	d.mu.Lock()
	d.purgeLocked(reason)
	if d.armed {
		d.timer.Stop()
		d.armed = false
	}
	d.mu.Unlock()
}

// stop drops the frames in flight, stops the timer and the goroutine, and
// waits for a delivery in progress. It must not run inside a delivery of
// this direction.
func (d *direction) stop() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.stopped = true
	d.purgeLocked(DropClosed)
	d.timer.Stop()
	d.armed = false
	d.mu.Unlock()
	if d.wall {
		close(d.done)
		<-d.exited
	}
	d.deliverMu.Lock()
	//lint:ignore SA2001 an empty critical section waits for the delivery holding the lock
	d.deliverMu.Unlock()
}

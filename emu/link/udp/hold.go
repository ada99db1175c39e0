package udp

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// holdQueue holds frames back for reordering, as the injector decides
// (link.Verdict HoldFrames/HoldDelay), on the send side of the link. The
// pair's own queue is private to emu/link and tied to its simulated wire;
// here a frame leaves when enough later frames have been sent, or when its
// delay is over, or — held by frames — after the hold timeout when traffic
// stops, since a socket has no "in flight" that drains.
type holdQueue struct {
	timeout time.Duration
	clock   timing.Clock
	n       atomic.Int32 // len(held), read without the lock on the fast path

	mu      sync.Mutex
	held    []heldFrame // guarded by mu; in hold order
	closed  bool        // guarded by mu
	timer   timing.Timer
	armed   bool          // guarded by mu
	armedAt time.Duration // guarded by mu
}

// heldFrame is one frame held back.
type heldFrame struct {
	p    *link.Packet
	left int           // later frames still to overtake it; 0: by time only
	due  time.Duration // when it leaves anyway
}

func newHoldQueue(l *Link, timeout time.Duration) *holdQueue {
	h := &holdQueue{timeout: timeout, clock: l.clock}
	h.timer = l.clock.AfterFunc(math.MaxInt64, func() { l.releaseDue() })
	h.timer.Stop()
	return h
}

// add holds p as v says; false if the link is closing (the caller drops
// p).
func (h *holdQueue) add(p *link.Packet, v *link.Verdict, now time.Duration) bool {
	f := heldFrame{p: p, left: v.HoldFrames, due: now + h.timeout}
	if v.HoldDelay > 0 {
		f.left, f.due = 0, now+v.HoldDelay
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.held = append(h.held, f)
	h.n.Store(int32(len(h.held)))
	h.armLocked(f.due, now)
	h.mu.Unlock()
	return true
}

func (h *holdQueue) armLocked(due, now time.Duration) {
	if !h.armed || due < h.armedAt {
		h.timer.Reset(due - now)
		h.armed, h.armedAt = true, due
	}
}

// overtake counts one frame sent past every frame held by frames, and
// adds those overtaken often enough to ctx, right behind it.
func (h *holdQueue) overtake(l *Link, ctx *sendCtx) {
	if h.n.Load() == 0 {
		return
	}
	var out [8]*link.Packet
	rel := out[:0]
	h.mu.Lock()
	j := 0
	for _, f := range h.held {
		if f.left > 0 {
			f.left--
			if f.left == 0 {
				rel = append(rel, f.p)
				continue
			}
		}
		h.held[j] = f
		j++
	}
	clear(h.held[j:])
	h.held = h.held[:j]
	h.n.Store(int32(j))
	h.mu.Unlock()
	for _, p := range rel {
		l.stageAgain(ctx, p)
	}
}

// takeDue removes and returns the frames due by now, and re-arms the timer
// for the next.
func (h *holdQueue) takeDue(now time.Duration, out []*link.Packet) []*link.Packet {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	j := 0
	next := time.Duration(math.MaxInt64)
	for _, f := range h.held {
		if f.due <= now {
			out = append(out, f.p)
			continue
		}
		next = min(next, f.due)
		h.held[j] = f
		j++
	}
	clear(h.held[j:])
	h.held = h.held[:j]
	h.n.Store(int32(j))
	if j > 0 && !h.closed {
		h.armLocked(next, now)
	}
	return out
}

// releaseDue is the timer function: it sends the frames whose time has
// come.
func (l *Link) releaseDue() {
	l.sendMu.RLock()
	defer l.sendMu.RUnlock()
	if l.closed.Load() {
		return
	}
	var buf [16]*link.Packet
	due := l.hold.takeDue(l.clock.Now(), buf[:0])
	if len(due) == 0 {
		return
	}
	ctx := l.getCtx()
	for _, p := range due {
		l.stageAgain(ctx, p)
	}
	l.flush(ctx)
	l.putCtx(ctx)
}

// purge drops every held frame, counting it under reason.
func (h *holdQueue) purge(l *Link, reason link.DropReason) {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.n.Store(0)
	if h.armed {
		h.timer.Stop()
		h.armed = false
	}
	h.mu.Unlock()
	for _, f := range held {
		l.txDrop(Reason(reason), f.p)
	}
}

// close purges the queue for good: later adds drop their frame.
func (h *holdQueue) close(l *Link) {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.purge(l, link.DropClosed)
}

package qp

import (
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// dpTimer is a lazy protocol timer on the injected clock, after gVisor's
// tcp timer.go: the deadline lives in the QP's state and the clock timer
// may fire early or late; the worker compares the deadline when the
// expiry event reaches it (checkExpiration). Re-arming to a later deadline
// does not touch the clock timer ("orphaned" until it fires, then re-armed
// for the rest), so an ACK that pushes the retransmission deadline costs no
// timer call. The clock's callback only sets an event bit on the QP and
// wakes its worker: the expiry is handled there, in order with packets.
//
// Worker-owned (under the Transport's claim), except the callback.
type dpTimer struct {
	t         timing.Timer
	fire      func()
	deadline  time.Duration
	armed     bool          // a deadline is set
	scheduled bool          // the clock timer is pending
	at        time.Duration // when the clock timer fires
}

// arm sets the deadline to now+d.
func (x *dpTimer) arm(clock timing.Clock, now, d time.Duration) {
	x.deadline = now + d
	x.armed = true
	if x.scheduled && x.at <= x.deadline {
		return // fires early; rescheduled then
	}
	x.schedule(clock, d)
}

func (x *dpTimer) schedule(clock timing.Clock, d time.Duration) {
	x.scheduled = true
	x.at = x.deadline
	if x.t == nil {
		x.t = clock.AfterFunc(d, x.fire)
		return
	}
	x.t.Reset(d)
}

// disarm clears the deadline; a pending clock timer fires and is ignored.
func (x *dpTimer) disarm() { x.armed = false }

// stop clears the deadline and stops the clock timer.
func (x *dpTimer) stop() {
	x.armed = false
	x.scheduled = false
	if x.t != nil {
		x.t.Stop()
	}
}

// fired is called by the worker when the timer's event bit was set. It
// reports whether the deadline has passed (the timer expired); a deadline
// still ahead is rescheduled.
func (x *dpTimer) fired(clock timing.Clock, now time.Duration) bool {
	x.scheduled = false
	if !x.armed {
		return false
	}
	if now >= x.deadline {
		x.armed = false
		return true
	}
	x.schedule(clock, x.deadline-now)
	return false
}

// due reports an armed deadline that has passed (for a worker that ran
// the QP for another reason after the deadline).
func (x *dpTimer) due(now time.Duration) bool { return x.armed && now >= x.deadline }

package engine

import (
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Stats is a snapshot of the data plane's statistics.
type Stats struct {
	// Port sums the port gate's counters and every worker's: packets and
	// bytes both ways, retransmissions, NAKs by kind, ICRC outcomes, drops
	// by reason.
	Port qp.CounterSnapshot
	// Meter is the device's cycle meter: modelled cycles per stage next to
	// the counts (docs/timing.md).
	Meter timing.Snapshot
	// Link is the port link's own counters.
	Link link.Stats
	// Gate counts what the port's receive path did before the QPs: the
	// drops by reason (ICRC, GID, QPN, transport, inbox full) and the ICRC
	// outcomes; Delivered the frames it queued to QPs (a multicast frame
	// once per member). Every received frame is one or the other.
	Gate      qp.CounterSnapshot
	Delivered uint64
	// Loopback counts the frames the device delivered to itself instead of
	// sending them (docs/dataplane.md "Loopback"); they passed the gate
	// too, so Gate and Delivered account for Link.RxFrames plus these.
	Loopback LoopbackStats
	// QPs is the number of live (not destroyed) QPs with a transport
	// attached. Records of destroyed QPs are dropped lazily (register).
	QPs int
	// UnknownDoorbells counts doorbells naming no QP.
	UnknownDoorbells uint64
	// IntakeTimeouts counts control commands that went ahead before the
	// worker had taken up the work posted before them (TakeUpPosted).
	IntakeTimeouts uint64
	// PortUp reports the link state last signalled.
	PortUp bool
	// Sched are the workers' scheduling counters: wake-ups, backoff
	// timers, parks.
	Sched SchedStats
}

// Stats returns a snapshot.
func (e *Engine) Stats() Stats {
	s := Stats{Port: e.port.c.Snapshot(), Gate: e.port.c.Snapshot(), Delivered: e.port.delivered.Load(), Meter: e.dp.Meter.Snapshot(),
		Loopback:         e.port.lb.snapshot(),
		UnknownDoorbells: e.unknownDoorbells.Load(), IntakeTimeouts: e.intakeTimeouts.Load(), PortUp: link.State(e.port.state.Load()) == link.StateUp,
		Sched: e.schedStats()}
	for _, w := range e.every {
		s.Port.Add(w.port.Snapshot())
	}
	if e.port.l != nil {
		s.Link = e.port.l.Stats()
	}
	e.entMu.Lock()
	for _, en := range e.entries {
		if !en.tr.Dead() {
			s.QPs++
		}
	}
	e.entMu.Unlock()
	return s
}

// QPStats returns the counters of QP id, if it has a transport.
func (e *Engine) QPStats(id uint32) (qp.CounterSnapshot, bool) {
	q := e.dev.QPs().Get(id)
	if q == nil {
		return qp.CounterSnapshot{}, false
	}
	tr := q.Transport.Load()
	if tr == nil {
		return qp.CounterSnapshot{}, false
	}
	return tr.C.Snapshot(), true
}

// Debug describes QP id's transport state (diagnostics).
func (e *Engine) Debug(id uint32) string {
	q := e.dev.QPs().Get(id)
	if q == nil {
		return "no QP"
	}
	tr := q.Transport.Load()
	if tr == nil {
		return "no transport"
	}
	return tr.Scheduler().String() + ": " + tr.Debug()
}

package sim

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// CQWatch follows one CQ of the device: each CQE the real code writes is
// shown to the program when its PCIe write completes.
type CQWatch struct {
	n       *NIC
	c       *cq.CQ
	ID      uint32
	written uint64
	times   ring
	ev      Event
	// Visible counts the CQEs whose write completed; the program may poll
	// that many.
	Visible int
	// OnCQE is called each time one more becomes visible.
	OnCQE func(at timing.Ps)
}

// WatchCQ follows device CQ id.
func (n *NIC) WatchCQ(c *cq.CQ) *CQWatch {
	w := &CQWatch{n: n, c: c, ID: c.ID(), written: c.Stats().CQEs}
	w.ev.Init(w.fire)
	n.cqs = append(n.cqs, w)
	return w
}

// checkCQs schedules the writes of the CQEs written since the last check,
// after at.
func (n *NIC) checkCQs(at timing.Ps) {
	p := n.p
	for _, w := range n.cqs {
		now := w.c.Stats().CQEs
		for ; w.written < now; w.written++ {
			start, end := n.Res[ResPCIeWrite].Serve(at, p.PCIe(p.CQEBytes), p.CQEBytes)
			vis := end + p.PCIeWrite
			n.s.tr.span(n.idx, trackPCIeWrite, "cqe-write", start, vis, w.ID)
			w.times.push(vis)
		}
		if w.times.len() > 0 {
			if _, ok := w.ev.Pending(); !ok {
				n.s.loop.At(&w.ev, w.times.front())
			}
		}
	}
}

func (w *CQWatch) fire() {
	now := w.n.s.loop.now
	w.times.pop()
	w.Visible++
	w.n.s.tr.instant(w.n.idx, cqTrack(w.ID), "CQE", now)
	if w.times.len() > 0 {
		w.n.s.loop.At(&w.ev, w.times.front())
	}
	if w.OnCQE != nil {
		w.OnCQE(now)
	}
}

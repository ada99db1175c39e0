package sim

import (
	"math/rand/v2"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Wire is one direction of a cable: frames serialised by one NIC reach
// the other after the propagation delay, unless lost. A switch would be
// another node taking frames from Wires in the same loop.
type Wire struct {
	s     *Sim
	to    *NIC
	from  *NIC
	delay timing.Ps
	loss  float64
	rng   *rand.Rand
}

// carry takes a frame whose serialisation ends at t.
func (w *Wire) carry(f *flight, t timing.Ps) {
	if w.loss > 0 && w.rng.Float64() < w.loss {
		w.from.lost++
		w.s.tr.instant(w.from.idx, trackWire, "lost "+f.op.String(), t)
		f.pk.Release()
		f.pk = nil
		w.from.putFlight(f)
		return
	}
	// The flight moves to the receiving NIC's free list once delivered.
	f.n = w.to
	f.stage = stageArrive
	w.s.loop.At(&f.ev, t+w.delay)
}

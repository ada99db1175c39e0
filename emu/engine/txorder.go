package engine

import (
	"sync"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

// Transmit order. A QP's runs follow one another in the order they take
// its claim, and their frames must reach the wire in that order too: a
// go-back-N burst overtaken by the frames of the run an ACK started
// arrives behind later PSNs. A Run that let its claim go and then
// transmitted could be overtaken so (TestTransmitOrder). One that kept the
// claim through its transmit, or that let it go under a transmit lock,
// made the next run wait for its send system call — and on two cores the
// sender is often off its CPU in the middle of it, preempted by the peer
// it woke: the receive thread blocked behind it stopped reading, and the
// Go client's round trip between two daemons went from 73–115 to 107–148 µs
// (docs/performance.md "Transmit order").
//
// So each QP has a transmit queue. The goroutine that finds no transmit
// of the QP in progress becomes its sender: it transmits its batch and
// then whatever later runs queued meanwhile, in the order they queued,
// until the queue is empty. A run that finds a sender queues its frames
// behind the sender's and goes on at once. A run queues or becomes the
// sender before it lets the claim go, so the runs' frames queue in claim
// order.

// txQueue is a QP's transmit queue.
type txQueue struct {
	mu      sync.Mutex
	sending bool           // a goroutine is transmitting the QP's frames
	pkts    []*link.Packet // frames of later runs, for that goroutine to send
}

// release lets the claim of en's QP go and transmits what its Run built,
// in order.
func (w *worker) release(en *entry) {
	w.cur = nil
	if len(w.tx) == 0 {
		en.tr.Unclaim()
		return
	}
	w.transmitInOrder(en, true)
}

// transmitInOrder transmits w.tx, en's frames, behind those of en's
// earlier runs, and lets en's claim go once its frames have their place
// when unclaim is set. The caller holds the claim.
func (w *worker) transmitInOrder(en *entry, unclaim bool) {
	q := &en.txq
	q.mu.Lock()
	if q.sending {
		q.pkts = append(q.pkts, w.tx...)
		q.mu.Unlock()
		clear(w.tx)
		w.tx = w.tx[:0]
		if unclaim {
			en.tr.Unclaim()
		}
		return
	}
	q.sending = true
	q.mu.Unlock()
	if unclaim {
		en.tr.Unclaim()
	}
	for {
		w.transmit()
		q.mu.Lock()
		if len(q.pkts) == 0 {
			q.sending = false
			q.mu.Unlock()
			return
		}
		w.tx = append(w.tx, q.pkts...)
		clear(q.pkts)
		q.pkts = q.pkts[:0]
		q.mu.Unlock()
	}
}

package qp

import (
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

// Inbox is a QP's bounded queue of received packets: many producers (the
// receive paths of the port's links) and one consumer (the worker running
// the QP). It is Dmitry Vyukov's bounded MPMC array queue: a sequence
// number per cell orders producers and the consumer without locks. Push
// returns false when the queue is full: the caller keeps the packet, drops
// it and counts it (gVisor segment_queue.go).
type Inbox struct {
	mask  uint64
	cells []inboxCell
	_     [64]byte
	enq   atomic.Uint64
	_     [56]byte
	deq   atomic.Uint64
	_     [56]byte
}

type inboxCell struct {
	seq atomic.Uint64
	p   *link.Packet
}

// NewInbox returns an empty queue of size cells (a power of two ≥ 2).
func NewInbox(size int) *Inbox {
	if size < 2 || size&(size-1) != 0 {
		size = 512
	}
	q := &Inbox{mask: uint64(size - 1), cells: make([]inboxCell, size)}
	for i := range q.cells {
		q.cells[i].seq.Store(uint64(i))
	}
	return q
}

// Push appends p; false when full.
func (q *Inbox) Push(p *link.Packet) bool {
	pos := q.enq.Load()
	for {
		c := &q.cells[pos&q.mask]
		seq := c.seq.Load()
		switch d := int64(seq) - int64(pos); {
		case d == 0:
			if q.enq.CompareAndSwap(pos, pos+1) {
				c.p = p
				c.seq.Store(pos + 1)
				return true
			}
			pos = q.enq.Load()
		case d < 0:
			return false
		default:
			pos = q.enq.Load()
		}
	}
}

// Pop removes the oldest packet; nil when empty (or when the oldest push
// has not finished yet: its producer wakes the consumer after it).
func (q *Inbox) Pop() *link.Packet {
	pos := q.deq.Load()
	for {
		c := &q.cells[pos&q.mask]
		seq := c.seq.Load()
		switch d := int64(seq) - int64(pos+1); {
		case d == 0:
			if q.deq.CompareAndSwap(pos, pos+1) {
				p := c.p
				c.p = nil
				c.seq.Store(pos + q.mask + 1)
				return p
			}
			pos = q.deq.Load()
		case d < 0:
			return nil
		default:
			pos = q.deq.Load()
		}
	}
}

// Peek returns the oldest packet without removing it; nil when empty. Only
// the consumer may call it (the next Pop returns the same packet).
func (q *Inbox) Peek() *link.Packet {
	pos := q.deq.Load()
	c := &q.cells[pos&q.mask]
	if c.seq.Load() != pos+1 {
		return nil
	}
	return c.p
}

// Len is the number of queued packets (approximate while producers run).
func (q *Inbox) Len() int {
	n := int64(q.enq.Load()) - int64(q.deq.Load())
	if n < 0 {
		return 0
	}
	return int(n)
}

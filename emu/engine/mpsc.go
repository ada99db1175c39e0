package engine

import "sync/atomic"

// readyQueue is a worker's queue of QPs to run: Dmitry Vyukov's intrusive
// lock-free MPSC queue. Any goroutine pushes (the port's receive path, a
// doorbell, a clock callback, the control plane after EndControl); only
// the worker pops. An entry is in the queue at most once (entry.queued),
// so the queue is bounded by the number of QPs and needs no allocation.
type readyQueue struct {
	head atomic.Pointer[entry] // producers swap in here
	_    [56]byte
	tail *entry // the consumer's end
	stub entry
}

func (q *readyQueue) init() {
	q.head.Store(&q.stub)
	q.tail = &q.stub
}

// push appends n (n must not be in the queue).
func (q *readyQueue) push(n *entry) {
	n.next.Store(nil)
	prev := q.head.Swap(n)
	prev.next.Store(n)
}

// pop removes the oldest entry; nil when empty or when a producer is
// between its two stores (it wakes the worker after the second).
func (q *readyQueue) pop() *entry {
	tail := q.tail
	next := tail.next.Load()
	if tail == &q.stub {
		if next == nil {
			return nil
		}
		q.tail = next
		tail = next
		next = next.next.Load()
	}
	if next != nil {
		q.tail = next
		return tail
	}
	if tail != q.head.Load() {
		return nil
	}
	q.push(&q.stub)
	next = tail.next.Load()
	if next != nil {
		q.tail = next
		return tail
	}
	return nil
}

// queued reports whether pop would return an entry (or a producer is past
// its first store: it kicks the worker after the second). Consumer only.
func (q *readyQueue) queued() bool {
	return q.tail != &q.stub || q.stub.next.Load() != nil
}

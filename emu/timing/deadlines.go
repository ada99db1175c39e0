package timing

// Deadline is what an item of a Deadlines queue embeds: when it is due,
// the order it was armed in, and its place in the queue. The zero value is
// not armed.
type Deadline struct {
	at  int64  // the due time, in the queue owner's unit
	seq uint64 // arm order: equal deadlines fire first-armed first
	pos int    // 1 + index in the heap; 0 when not armed
}

// Armed reports whether the item is queued.
func (d *Deadline) Armed() bool { return d.pos > 0 }

// Due returns the time the item was last armed for.
func (d *Deadline) Due() int64 { return d.at }

func (d *Deadline) deadline() *Deadline { return d }

// deadlined is an item of a Deadlines queue: a pointer to a struct that
// embeds Deadline.
type deadlined interface{ deadline() *Deadline }

// Deadlines is a min-heap of items by due time, ties in arm order, so that
// whatever pops them runs deterministically: the Manual clock's timers and
// the simulation loop's events (emu/sim) are both one. Not safe for
// concurrent use; the owner locks.
type Deadlines[T deadlined] struct {
	h   []T
	seq uint64
}

// Len returns the number of armed items.
func (q *Deadlines[T]) Len() int { return len(q.h) }

// Arm queues x for at; an armed x moves (and counts as armed now for ties).
func (q *Deadlines[T]) Arm(x T, at int64) {
	d := x.deadline()
	if d.pos > 0 {
		q.remove(d.pos - 1)
	}
	q.seq++
	d.at, d.seq = at, q.seq
	q.h = append(q.h, x)
	d.pos = len(q.h)
	q.up(len(q.h) - 1)
}

// Remove unqueues x and reports whether it was armed.
func (q *Deadlines[T]) Remove(x T) bool {
	d := x.deadline()
	if d.pos == 0 {
		return false
	}
	q.remove(d.pos - 1)
	return true
}

// First returns the earliest item without removing it.
func (q *Deadlines[T]) First() (x T, ok bool) {
	if len(q.h) == 0 {
		return x, false
	}
	return q.h[0], true
}

// Pop removes and returns the earliest item; the queue must not be empty.
func (q *Deadlines[T]) Pop() T {
	x := q.h[0]
	q.remove(0)
	return x
}

func (q *Deadlines[T]) remove(i int) {
	last := len(q.h) - 1
	x := q.h[i]
	if i != last {
		q.swap(i, last)
	}
	var zero T
	q.h[last] = zero
	q.h = q.h[:last]
	x.deadline().pos = 0
	if i != last {
		if !q.down(i) {
			q.up(i)
		}
	}
}

func (q *Deadlines[T]) less(i, j int) bool {
	a, b := q.h[i].deadline(), q.h[j].deadline()
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *Deadlines[T]) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].deadline().pos = i + 1
	q.h[j].deadline().pos = j + 1
}

func (q *Deadlines[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

// down sifts i towards the leaves and reports whether it moved.
func (q *Deadlines[T]) down(i int) bool {
	start, n := i, len(q.h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && q.less(r, l) {
			c = r
		}
		if !q.less(c, i) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > start
}

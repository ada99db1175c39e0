package sim

import "github.com/irdma-emu/irdma-emu/emu/timing"

// ring is a FIFO of times.
type ring struct {
	b    []timing.Ps
	h, n int
}

func (r *ring) len() int { return r.n }

func (r *ring) push(t timing.Ps) {
	if r.n == len(r.b) {
		nb := make([]timing.Ps, max(16, 2*len(r.b)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.b[(r.h+i)%len(r.b)]
		}
		r.b, r.h = nb, 0
	}
	r.b[(r.h+r.n)%len(r.b)] = t
	r.n++
}

func (r *ring) front() timing.Ps { return r.b[r.h] }

func (r *ring) pop() {
	r.h = (r.h + 1) % len(r.b)
	r.n--
}

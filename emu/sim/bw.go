package sim

import "github.com/irdma-emu/irdma-emu/emu/timing"

// runBW is ib_{write,read,send}_bw: every QP keeps TxDepth work requests
// posted, signalled every CQMod, until Iters completed.
func (w *Sim) runBW(sc *Scenario, conns []*Conn, size int, inline bool) (Result, error) {
	var r Result
	var failed error
	now := w.loop.Time()
	type qstate struct {
		posted, done, rposted int
		sc, rc                int // CQEs consumed
		end                   timing.Ps
		fin                   bool
	}
	st := make([]qstate, len(conns))
	left := len(conns)
	m := w.begin()
	fill := func(i int, at timing.Ps) {
		c, q := conns[i], &st[i]
		a, b := c.Side[0], c.Side[1]
		for failed == nil && q.posted < sc.Iters && q.posted-q.done+sc.PostList <= sc.TxDepth {
			k := min(sc.PostList, sc.Iters-q.posted)
			if err := a.postSend(sc, b, k, size, inline, q.posted, sc.Iters, at); err != nil {
				failed = err
				return
			}
			q.posted += k
		}
	}
	for i, c := range conns {
		i, a, b := i, c.Side[0], c.Side[1]
		q := &st[i]
		a.SW.OnCQE = func(at timing.Ps) {
			wcs, t, err := a.poll(a.SCQ, a.SW, &q.sc, at)
			if err != nil {
				failed = err
				return
			}
			for _, wc := range wcs {
				q.done = max(q.done, int(wc.WrID)+1)
			}
			if q.done >= sc.Iters && !q.fin {
				q.fin, q.end = true, t
				left--
				return
			}
			fill(i, t)
		}
		b.RW.OnCQE = nil
		if sc.Verb == "send" {
			b.RW.OnCQE = func(at timing.Ps) {
				wcs, t, err := b.poll(b.RCQ, b.RW, &q.rc, at)
				if err != nil {
					failed = err
					return
				}
				if k := min(len(wcs), sc.Iters-q.rposted); k > 0 {
					if err := b.postRecv(k, size, t); err != nil {
						failed = err
					}
					q.rposted += k
				}
			}
			k := min(sc.RxDepth, sc.Iters)
			if err := b.postRecv(k, size, now); err != nil {
				return r, err
			}
			q.rposted = k
		}
	}
	// Receives pre-posted; the clients start together.
	for i := range conns {
		fill(i, now)
	}
	w.settle()
	ok := w.loop.Run(now+limit, func() bool { return left == 0 || failed != nil })
	if failed != nil {
		return r, failed
	}
	if !ok {
		return r, errStalled
	}
	var end timing.Ps
	for _, q := range st {
		end = max(end, q.end)
	}
	for _, c := range conns {
		c.Side[0].SW.OnCQE, c.Side[1].RW.OnCQE = nil, nil
	}
	m.end(&r, end)
	r.SimTime = end - now
	if r.SimTime > 0 {
		bits := float64(len(conns)) * float64(sc.Iters) * float64(size) * 8
		r.Gbps = bits / float64(r.SimTime) * 1e3 // bits per ps → Gb/s
		r.Mpps = float64(len(conns)) * float64(sc.Iters) / float64(r.SimTime) * 1e6
	}
	return r, nil
}

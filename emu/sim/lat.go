package sim

import (
	"math"
	"slices"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// runLat is ib_{write,send,read}_lat between the first QP pair: one
// operation in flight. write: each side writes to the other when it sees
// the peer's data in its buffer; send: each side sends when its receive
// completes; read: the client reads, waiting for each completion.
func (w *Sim) runLat(sc *Scenario, c *Conn, size int, inline bool) (Result, error) {
	var r Result
	var failed error
	a, b := c.Side[0], c.Side[1]
	now := w.loop.Time()
	m := w.begin()
	lats := make([]timing.Ps, 0, sc.Iters)
	iter, sent := 0, [2]int{}
	var start timing.Ps
	var last [2]legTimes // per direction: the leg of the last iteration
	var consumed [2][2]int
	p := &w.p
	post := func(e, peer *Endpoint, side int, at timing.Ps) {
		if failed != nil {
			return
		}
		if err := e.postSend(sc, peer, 1, size, inline, sent[side], math.MaxInt, at); err != nil {
			failed = err
		}
		sent[side]++
	}
	drain := func(e *Endpoint, side int) func(timing.Ps) {
		return func(at timing.Ps) {
			if _, _, err := e.poll(e.SCQ, e.SW, &consumed[side][0], at); err != nil {
				failed = err
			}
		}
	}
	finish := func(at timing.Ps) {
		lats = append(lats, at-start)
		iter++
		if iter < sc.Iters {
			start = a.host().Free
			start = max(start, at)
			post(a, b, 0, start)
		}
	}
	a.Model.OnData, b.Model.OnData = nil, nil
	a.SW.OnCQE, b.SW.OnCQE, a.RW.OnCQE, b.RW.OnCQE = drain(a, 0), drain(b, 1), nil, nil
	switch sc.Verb {
	case "write":
		b.Model.OnData = func(at timing.Ps) {
			last[0] = b.Model.legTo(at)
			_, t := b.host().Serve(at, p.HostPoll, 0)
			post(b, a, 1, t)
		}
		a.Model.OnData = func(at timing.Ps) {
			last[1] = a.Model.legTo(at)
			_, t := a.host().Serve(at, p.HostPoll, 0)
			finish(t)
		}
	case "send":
		for _, e := range []*Endpoint{a, b} {
			// Top up to RxDepth: receives left from the previous size stay.
			if k := sc.RxDepth - e.recvs; k > 0 {
				if err := e.postRecv(k, size, now); err != nil {
					return r, err
				}
			}
		}
		b.RW.OnCQE = func(at timing.Ps) {
			last[0] = b.Model.legTo(at)
			wcs, t, err := b.poll(b.RCQ, b.RW, &consumed[1][1], at)
			if err != nil {
				failed = err
				return
			}
			if err := b.postRecv(len(wcs), size, t); err != nil {
				failed = err
				return
			}
			post(b, a, 1, b.host().Free)
		}
		a.RW.OnCQE = func(at timing.Ps) {
			last[1] = a.Model.legTo(at)
			wcs, t, err := a.poll(a.RCQ, a.RW, &consumed[0][1], at)
			if err != nil {
				failed = err
				return
			}
			if err := a.postRecv(len(wcs), size, t); err != nil {
				failed = err
				return
			}
			finish(a.host().Free)
		}
	case "read":
		a.SW.OnCQE = func(at timing.Ps) {
			last[0] = b.Model.lastRx.leg(b.Model.lastRx.rxEnd)
			last[1] = a.Model.legTo(at)
			_, t, err := a.poll(a.SCQ, a.SW, &consumed[0][0], at)
			if err != nil {
				failed = err
				return
			}
			finish(t)
		}
	}
	start = now
	post(a, b, 0, now)
	w.settle()
	ok := w.loop.Run(now+limit, func() bool { return iter >= sc.Iters || failed != nil })
	if failed != nil {
		return r, failed
	}
	if !ok {
		return r, errStalled
	}
	end := w.loop.Time()
	// Let the last ACKs and CQEs land so the next size starts clean.
	w.loop.Run(end+100*timing.Microsecond, func() bool { return false })
	a.Model.OnData, b.Model.OnData = nil, nil
	a.SW.OnCQE, b.SW.OnCQE, a.RW.OnCQE, b.RW.OnCQE = nil, nil, nil, nil
	for side, e := range []*Endpoint{a, b} {
		e.poll(e.SCQ, e.SW, &consumed[side][0], w.loop.now)
	}
	m.end(&r, end)
	half := sc.Verb != "read"
	us := func(t timing.Ps) float64 {
		v := float64(t) / float64(timing.Microsecond)
		if half {
			v /= 2
		}
		return v
	}
	sorted := slices.Clone(lats)
	slices.Sort(sorted)
	if n := len(sorted); n > 0 {
		r.LatMin, r.LatMax, r.LatTypical = us(sorted[0]), us(sorted[n-1]), us(sorted[n/2])
		var sum timing.Ps
		for _, l := range sorted {
			sum += l
		}
		r.LatAvg = us(sum / timing.Ps(n))
	}
	r.Breakdown = breakdown(p, last, half, sc.Verb == "read", sc.Verb == "send")
	if r.SimTime > 0 {
		r.Mpps = float64(sc.Iters) / float64(r.SimTime) * 1e6
		r.Gbps = float64(sc.Iters) * float64(size) * 8 / float64(r.SimTime) * 1e3
	}
	return r, nil
}

// legTimes are the times of one leg of an operation: the message's last
// packet through the model, and when its effect became visible.
type legTimes struct {
	built, wqeAt, readAt, peEnd, wireEnd, arrived, rxEnd, visible timing.Ps
	needWQE                                                       bool
}

func (l legTimes) leg(visible timing.Ps) legTimes { l.visible = visible; return l }

func (q *QPModel) legTo(visible timing.Ps) legTimes { return q.lastRx.leg(visible) }

// breakdown splits the last iteration's critical path by resource. The
// program's time (post, poll) is host-cpu; the doorbell is the posted
// MMIO write; wqe-fetch the read of the WQE; then payload read, packet
// engine, wire, propagation, receive parser, and the PCIe writes (plus,
// for SEND, the receive WQE fetch) until the effect is visible.
func breakdown(p *timing.Pipeline, legs [2]legTimes, half, read, send bool) []Span {
	names := []string{"host-cpu", "doorbell", "wqe-fetch", "payload-read", "tx-engine", "wire", "propagation", "rx-parser", "pcie-write"}
	acc := make([]timing.Ps, len(names))
	for i, l := range legs {
		if read && i == 1 {
			// The READ response: built when the request was parsed; the
			// CQE write ends the operation.
			acc[3] += l.readAt - l.built
		} else {
			host := p.HostPost + p.HostPoll
			if send {
				host += p.HostPost // the receive reposted before the SEND
			}
			acc[0] += host
			acc[1] += p.PCIeWrite
			if l.needWQE {
				acc[2] += l.wqeAt - (l.built + host + p.PCIeWrite)
			}
			acc[3] += l.readAt - max(l.wqeAt, l.built)
		}
		acc[4] += l.peEnd - l.readAt
		acc[5] += l.wireEnd - l.peEnd
		acc[6] += l.arrived - l.wireEnd
		acc[7] += l.rxEnd - l.arrived
		acc[8] += l.visible - l.rxEnd
	}
	if read {
		acc[0] = p.HostPost + p.HostPoll
		acc[1] = p.PCIeWrite
	}
	out := make([]Span, len(names))
	for i, n := range names {
		v := acc[i]
		if half {
			v /= 2
		}
		out[i] = Span{n, v}
	}
	return out
}

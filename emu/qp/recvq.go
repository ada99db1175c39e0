package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// RecvSource is where the responder takes receive WQEs from. A QP's own RQ
// (rqSource) is the only one on GEN_2; GEN_3's SRQ (a shared ring bounded
// by the producer index in its shadow area, WQEs carrying their wr_id,
// docs/hw-datapath.md "SRQ (GEN_3)") will be a second implementation shared by
// the QPs attached to it, selected when the QP context says USE_SRQ.
//
// The responder peeks the next WQE when a message that needs one starts,
// consumes it when it commits to the message, and completes it (CQE) at the
// message end; an RNR NAK leaves it in place.
type RecvSource interface {
	// Peek decodes the next posted WQE into w. ok is false when none is
	// posted (the responder sends an RNR NAK, or drops a UD datagram);
	// err is a bus fault reading the ring.
	Peek(mem *hostmem.Memory, meter *timing.Meter, lim WQELimits, w *RQWQE) (ok bool, err error)
	// Consume retires the WQE Peek returned and returns its WQE index in
	// quanta (the CQE's WQEIDX; RQ: wqe_no × rq_wqe_size_multiplier).
	Consume() uint32
	// State is the consumer index and polarity (for FLUSH_WQES).
	State() WQState
	// SetState moves the consumer (after a flush).
	SetState(WQState)
	// SRQ reports whether completions are SRQ CQEs (GEN_3: IRDMA_CQ_SRQ,
	// wr_id from the WQE, the QP context in the extension).
	SRQ() bool
}

// rqSource is the QP's own RQ: fixed-size WQEs of 1 << RQWQESIZE quanta at
// index i × that stride, valid bit at the ring's polarity
// (docs/hw-datapath.md "RQ WQE"). It has no doorbell: the device reads it
// when a message arrives.
type rqSource struct {
	mem    cq.RingMem
	stride uint32
	cons   uint32
	pol    uint8
	peeked bool
}

func newRQSource(w WQ) *rqSource {
	return &rqSource{mem: w.Mem, stride: max(w.WQEQuanta, 1), cons: w.cons, pol: w.pol}
}

func (r *rqSource) Peek(mem *hostmem.Memory, meter *timing.Meter, lim WQELimits, w *RQWQE) (bool, error) {
	r.peeked = false
	if r.mem.Size < r.stride {
		return false, nil
	}
	h, err := mem.Load64(r.mem.Addr(r.cons, headerOffset))
	if err != nil {
		return false, err
	}
	if Header(h).ValidBit() != r.pol {
		return false, nil
	}
	var buf [MaxWQEQuanta * QuantumSize]byte
	n := int(min(r.stride, MaxWQEQuanta)) * QuantumSize
	// A WQE never crosses a page (strides are powers of two ≤ 256 bytes).
	if err := mem.Read(r.mem.Addr(r.cons, 0), buf[:n]); err != nil {
		return false, err
	}
	meter.Charge(timing.WQEFetch, n)
	if err := DecodeRQ(w, buf[:n], DecodeParams{Polarity: r.pol, Limits: lim, WQEQuanta: int(r.stride)}); err != nil {
		// ErrNotValid cannot happen (checked above); a short read cannot
		// either: report as not posted.
		return false, nil
	}
	r.peeked = true
	return true, nil
}

func (r *rqSource) Consume() uint32 {
	idx := r.cons
	r.cons += r.stride
	if r.cons >= r.mem.Size {
		r.cons = 0
		r.pol ^= 1
	}
	r.peeked = false
	return idx
}

func (r *rqSource) State() WQState     { return WQState{r.cons, r.pol} }
func (r *rqSource) SetState(s WQState) { r.cons, r.pol = s.Cons, s.Pol }
func (r *rqSource) SRQ() bool          { return false }

package uk

// RecvWR is a receive work request (ib_recv_wr).
type RecvWR struct {
	WrID   uint64
	SGList []SGE
}

// PostReceive is irdma_uk_post_receive (docs/hw-datapath.md "RQ WQE"): the RQ
// WQE at index head × (1 << rq_shift) quanta gets the SGEs in fragment slots
// (GEN_2 pad slot after an even count, counted in ADDFRAGCNT), qword2 0, and
// a header of ADDFRAGCNT | VALID only, stored last. The wr_id stays in
// software (rq_wrid_array); the RQ has no doorbell.
//
// With 0 SGEs irdma writes slot 0 from sg_list[0] anyway, i.e. whatever
// the caller's array held; we write an empty slot (VALID only) instead,
// which the hardware reads the same way as the 0-length receive it is.
func (q *QP) PostReceive(wrID uint64, sges []SGE) error {
	if q.srq != nil || len(sges) > q.maxRQFrag {
		return ErrInvalid
	}
	if q.rq.full() {
		return ErrNoMem
	}
	idx := q.rq.head.Load()
	q.rq.head.Store((q.rq.head.Load() + 1) % q.rq.size)
	if idx == 0 {
		q.rwqePol ^= 1
	}
	q.rqWrID[idx] = wrID
	off := int(idx*q.rqMult) * QuantumSize
	w := q.rqBuf[off : off+int(q.rqMult)*QuantumSize]

	var first *SGE
	if len(sges) > 0 {
		first = &sges[0]
	}
	setFragment(w, 0, first, q.rwqePol)
	b := QuantumSize
	for i := 1; i < len(sges); i++ {
		setFragment(w, b, &sges[i], q.rwqePol)
		b += 16
	}
	addl := uint64(0)
	if len(sges) > 1 {
		addl = uint64(len(sges) - 1)
	}
	if n := len(sges); n != 0 && n%2 == 0 {
		setFragment(w, b, nil, q.rwqePol)
		if !q.lim.PadFragUncounted { // GEN_2 counts the pad slot
			addl++
		}
	}
	put64(w, 16, 0)
	store64(w, 24, addl<<sqAddFragCntShift|uint64(q.rwqePol)<<sqValidShift)
	return nil
}

// PostRecv is irdma_post_recv's loop for a kernel QP: each receive in
// order until the first that fails (EINVAL for too many SGEs, ENOMEM for
// a full RQ), whose index it returns with the error; the ones before it
// stay posted. posted == len(wrs) means all were.
func (q *QP) PostRecv(wrs []RecvWR) (posted int, err error) {
	for i := range wrs {
		if err := q.PostReceive(wrs[i].WrID, wrs[i].SGList); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

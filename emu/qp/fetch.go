package qp

import "github.com/irdma-emu/irdma-emu/emu/timing"

// The WQE fetch stage (timing.WQEFetch): SQ WQEs are read by valid bit
// at the fetch index and decoded once; a fetched WQE stays in the ring until
// software sees its completion, so the requester reads it again (refetchWQE)
// when it needs the whole decode later (a retransmission, a READ's sink).

// fetchWQE reads and validates the WQE at the fetch index and appends it.
// It returns false when there is none (or the QP failed).
func (r *requester) fetchWQE(t *Transport, ctx *Ctx) bool {
	if r.ents == nil {
		r.ents = make([]sqEntry, r.capacity(t))
	}
	if r.n >= len(r.ents) || r.sq.Mem.Size == 0 {
		return false
	}
	mem := t.dp.Mem
	idx, pol := r.fetch.Cons, r.fetch.Pol
	h, err := mem.Load64(r.sq.Mem.Addr(idx, headerOffset))
	if err != nil {
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	if Header(h).ValidBit() != pol {
		return false
	}
	// A WQE never crosses a max_hw_sq_chunk boundary (docs/hw-datapath.md
	// "Valid bit and NOP padding"); read up to the end of the chunk, which
	// also never crosses a page.
	chunk := uint32(max(t.dp.limits.ChunkQuanta, 1))
	nq := min(chunk-idx%chunk, r.sq.Mem.Size-idx, MaxWQEQuanta)
	b := ctx.wqe[:nq*QuantumSize]
	if err := mem.Read(r.sq.Mem.Addr(idx, 0), b); err != nil {
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	w := &r.cur
	derr := DecodeSQ(w, b, DecodeParams{Index: idx, Polarity: pol, Limits: t.dp.limits})
	quanta := SQQuantaPad(Header(h), t.dp.limits.PadUncounted)
	if derr == nil {
		quanta = w.Quanta
	}
	// Step over what the header claims (a WQE crossing the chunk is
	// refused below, and the quanta it covers are its own), never past
	// the ring's end.
	quanta = min(quanta, int(r.sq.Mem.Size-idx))
	t.charge(ctx, timing.WQEFetch, min(quanta, int(nq))*QuantumSize)
	r.seq++
	e := r.at(r.n)
	*e = sqEntry{seq: r.seq, idx: idx, pol: pol, quanta: uint8(quanta), op: Header(h).Opcode()}
	r.n++
	r.curSeq, r.curOK = e.seq, derr == nil
	r.advanceFetch(uint32(quanta))
	t.count(ctx, CntSQWQEs, 1)
	if derr != nil {
		// Longer than the chunk it starts in: the NOP padding rule is
		// broken (ViolCrossesChunk's reaction).
		t.sqFatal(ctx, e, ViolCrossesChunk.Reaction().AE)
		return false
	}
	e.signaled = w.Signaled
	e.fence = w.ReadFence || w.LocalFence && !t.isUD()
	e.length = w.TotalLen
	if ae := r.validate(t, ctx, w, e); ae != 0 {
		t.sqFatal(ctx, e, ae)
		return false
	}
	return true
}

func (r *requester) advanceFetch(n uint32) {
	r.fetch.Cons += n
	if r.fetch.Cons >= r.sq.Mem.Size {
		r.fetch.Cons -= r.sq.Mem.Size
		r.fetch.Pol ^= 1
	}
}

// decodeCur makes r.cur the decode of e (re-reading it from the ring).
func (r *requester) decodeCur(t *Transport, ctx *Ctx, e *sqEntry) bool {
	if r.curOK && r.curSeq == e.seq {
		return true
	}
	if !r.refetchWQE(t, ctx, e, &r.cur) {
		return false
	}
	r.curSeq, r.curOK = e.seq, true
	return true
}

// decodeRd makes r.rd the decode of e, for the completer.
func (r *requester) decodeRd(t *Transport, ctx *Ctx, e *sqEntry) bool {
	if r.rdOK && r.rdSeq == e.seq {
		return true
	}
	if r.curOK && r.curSeq == e.seq {
		r.rd = r.cur
		r.rdSeq, r.rdOK = e.seq, true
		return true
	}
	if !r.refetchWQE(t, ctx, e, &r.rd) {
		return false
	}
	r.rdSeq, r.rdOK = e.seq, true
	return true
}

func (r *requester) refetchWQE(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	b := ctx.wqe[:int(e.quanta)*QuantumSize]
	if err := t.dp.Mem.Read(r.sq.Mem.Addr(e.idx, 0), b); err != nil ||
		DecodeSQ(w, b, DecodeParams{Index: e.idx, Polarity: e.pol, Limits: t.dp.limits}) != nil || !w.OK() {
		// Software overwrote a WQE the device has not completed.
		t.sqFatal(ctx, e, AELCEQPCatastrophic)
		return false
	}
	t.charge(ctx, timing.WQEFetch, len(b))
	return true
}

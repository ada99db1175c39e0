package qp

import "github.com/irdma-emu/irdma-emu/emu/hostmem"

// The control plane coordinates with the data plane through the QP's
// Transport: MODIFY_QP, FLUSH_WQES and DESTROY_QP bracket their work with
// Transport.BeginControl and Transport.EndControl when one is attached.
//
// BeginControl returns once the data plane is not running the QP and will
// not run it until EndControl; before returning it writes its consumer
// indices back into the QP's work queues (SyncWQ), so that FLUSH_WQES walks
// from the oldest WQE the data plane has not completed. EndControl lets the
// data plane run the QP again; destroyed reports DESTROY_QP, after which
// the data plane drops the QP's state, timers and queued packets.
//
// Neither call may be made with q.mu held: the data plane takes q.mu in
// SyncWQ and EnterError, after it holds the QP.

// SetOnLoad makes f what Loaded calls (the engine: it takes up a QP's
// context when the device loads it); nil: nothing.
func (t *Table) SetOnLoad(f func(*QP)) {
	if f == nil {
		t.onLoad.Store(nil)
		return
	}
	t.onLoad.Store(&f)
}

// Loaded tells the data plane that the device loaded q's context: the
// CQP's CREATE_QP and MODIFY_QP call it once the QP has its new context
// and state, before the command completes, so the data plane can take
// the context up then, as hardware does at the modify, rather than at the
// QP's first doorbell (which then paid for it: docs/performance.md
// "Idle").
func (t *Table) Loaded(q *QP) {
	if f := t.onLoad.Load(); f != nil {
		(*f)(q)
	}
}

// beginControl calls the transport's BeginControl and returns the matching
// end.
func (q *QP) beginControl() func(destroyed bool) {
	t := q.Transport.Load()
	if t == nil {
		return func(bool) {}
	}
	t.BeginControl()
	return t.EndControl
}

// Gen counts the changes of the QP's context (CREATE_QP, every MODIFY_QP):
// the data plane re-reads Attrs and Context when it moves.
func (q *QP) Gen() uint64 { return q.gen.Load() }

// WQState is a work queue's consumer index and the polarity expected
// there.
type WQState struct {
	Cons uint32
	Pol  uint8
}

// SyncWQ stores the data plane's consumer indices: for each queue, the
// oldest WQE it has not completed. FLUSH_WQES walks from there. The data
// plane calls it from BeginControl and when it moves the QP to ERROR.
func (q *QP) SyncWQ(sq, rq WQState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sq.cons, q.sq.pol = sq.Cons%max(q.sq.Mem.Size, 1), sq.Pol&1
	q.rq.cons, q.rq.pol = rq.Cons%max(q.rq.Mem.Size, 1), rq.Pol&1
}

// WQStates returns the consumer states of the SQ and the RQ.
func (q *QP) WQStates() (sq, rq WQState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return WQState{q.sq.cons, q.sq.pol}, WQState{q.rq.cons, q.rq.pol}
}

// EnterError moves the QP to ERROR on a fatal error the data plane found
// (a malformed WQE, an access violation, retries exhausted), storing its
// consumer indices first as SyncWQ does. The hardware raises the AE; the
// driver then issues MODIFY_QP(ERROR) and FLUSH_WQES (hw.c:irdma_process_aeq;
// docs/hw-datapath.md "Flush generation").
func (q *QP) EnterError(sq, rq WQState) {
	q.SyncWQ(sq, rq)
	q.state.Store(uint32(StateError))
	q.gen.Add(1)
}

// PublishSQTail writes the data plane's SQ fetch index into the shadow
// area (qword0 [14:0], IRDMA_QP_DBSA_HW_SQ_TAIL) without taking q.mu: the
// kernel's doorbell suppression compares it with its ring head
// (irdma_uk_qp_post_wr, docs/hw-datapath.md "Doorbells").
func PublishSQTail(mem *hostmem.Memory, shadow hostmem.IOVA, idx uint32) {
	if shadow == 0 {
		return
	}
	_ = mem.Store64(shadow, uint64(idx&ShadowSQTailMask))
}

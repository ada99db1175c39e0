package driver

import (
	"errors"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// Kernel-mode data-path types, from the uk layer.
type (
	SendWR         = uk.SendWR
	RecvWR         = uk.RecvWR
	SGE            = uk.SGE
	WorkCompletion = uk.WorkCompletion
)

// PostSend is verbs.c:irdma_post_send for a kernel QP: each work request
// is written by the uk layer in order until one fails; the doorbell
// (WQEALLOC ← qp_id, irdma_uk_qp_post_wr) is then rung once if no flush
// was issued and the hardware state is at most RTS, and the uk layer's
// shadow-tail check says the hardware needs it. It returns how many were
// posted: on error, wrs[posted] is the bad work request.
func (d *Device) PostSend(q *QP, wrs []SendWR) (int, error) {
	if q == nil || q.d != d || q.ukqp == nil {
		return 0, syscall.EINVAL
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return 0, syscall.EINVAL
	}
	n, err := q.ukqp.PostSend(wrs)
	if !q.flushIssued {
		if q.hwIWState <= qpHWStateRTS && q.ukqp.SQDoorbell() {
			d.hw.Write32(d.regs.WQEALLOC, q.id)
		}
	} else {
		// The hardware flushed this QP already: the new requests are
		// completed as flushed by software (dwork_flush).
		d.schedFlush(q)
	}
	return n, err
}

// PostRecv is verbs.c:irdma_post_recv: the receives are written in order
// until one fails (no doorbell: the hardware finds RQ WQEs by their valid
// bits).
func (d *Device) PostRecv(q *QP, wrs []RecvWR) (int, error) {
	if q == nil || q.d != d || q.ukqp == nil {
		return 0, syscall.EINVAL
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return 0, syscall.EINVAL
	}
	n, err := q.ukqp.PostRecv(wrs)
	if q.flushIssued {
		d.schedFlush(q)
	}
	return n, err
}

// PollCQ is verbs.c:irdma_poll_cq / __irdma_poll_cq for a kernel CQ: up
// to n completions, first from rings replaced by a resize, then from the
// current ring (irdma_poll_one → irdma_uk_cq_poll_cmpl +
// irdma_process_cqe); CQEs of destroyed QPs are skipped. Once the current
// ring has produced a CQE the old rings are released and the hardware
// told how many resizes completed (irdma_process_resize_list,
// irdma_uk_cq_set_resized_cnt).
func (d *Device) PollCQ(c *CQ, n int) ([]WorkCompletion, error) {
	if c == nil || c.d != d || c.ukcq == nil {
		return nil, syscall.EINVAL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]WorkCompletion, 0, min(n, 64))
	var info uk.CQPollInfo
	poll := func(cq *uk.CQ) (bool, error) {
		got := false
		for len(out) < n {
			err := cq.PollCmpl(&info)
			switch {
			case err == nil:
				out = append(out, uk.ProcessCQE(&info))
				got = true
			case errors.Is(err, uk.ErrCQEmpty):
				return got, nil
			case errors.Is(err, uk.ErrQPDestroyed):
				got = true
			default:
				return got, err
			}
		}
		return got, nil
	}
	lastBuf := -1
	for i, b := range c.resize {
		got, err := poll(b.ukcq)
		if err != nil {
			return out, err
		}
		if got {
			lastBuf = i
		}
	}
	gotNew, err := poll(c.ukcq)
	if err != nil {
		return out, err
	}
	// __irdma_poll_cq: when the ring is empty, software flush completions
	// (irdma_generated_cmpls).
	if k := min(n-len(out), len(c.generated)); k > 0 {
		out = append(out, c.generated[:k]...)
		c.generated = append(c.generated[:0], c.generated[k:]...)
	}
	done := 0
	switch {
	case gotNew:
		done = len(c.resize)
	case lastBuf >= 0:
		done = lastBuf
	}
	if done > 0 {
		for _, b := range c.resize[:done] {
			d.freeDMA(&b.mem)
		}
		c.resize = c.resize[done:]
		c.ukcq.SetResizedCnt(uint16(done))
	}
	return out, nil
}

// CQ notification flags (ib_cq_notify_flags).
const (
	CQSolicited          = 1
	CQNextComp           = 2
	CQReportMissedEvents = 4
)

// ReqNotifyCQ is verbs.c:irdma_req_notify_cq: arm the CQ if it is not
// armed yet, or promote a solicited-only arm to any completion
// (irdma_uk_cq_request_notification, then CQARM ← cq_id). With
// IB_CQ_REPORT_MISSED_EVENTS it returns 1 when completions are already
// waiting.
func (d *Device) ReqNotifyCQ(c *CQ, flags int) (int, error) {
	if c == nil || c.d != d || c.ukcq == nil {
		return 0, syscall.EINVAL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	notify := uk.NotifyAny
	if flags&3 == CQSolicited {
		notify = uk.NotifySolicited
	}
	promo := c.lastNotify == uk.NotifySolicited && flags&3 != CQSolicited
	if c.armed.CompareAndSwap(false, true) || promo {
		c.lastNotify = notify
		db := c.ukcq.RequestNotification(notify)
		d.hw.Write32(d.regs.CQARM, db)
	}
	if flags&CQReportMissedEvents != 0 && (!c.ukcq.Empty() || len(c.generated) > 0) {
		return 1, nil
	}
	return 0, nil
}

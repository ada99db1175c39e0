package cq

import (
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// CQE timestamps. A device with IRDMA_FEATURE_CQE_TIMESTAMPING (GEN_3)
// writes its clock into qword0 [63:32] (IRDMACQ_TCPSQN_ROCEPSN_RTT_TS) of
// every CQE as the CQE is written; libirdma 65 returns that field, unscaled,
// as ibv_wc_read_completion_ts (providers/irdma uverbs.c
// irdma_wc_read_completion_ts reads cur_cqe.stat.timestamp, which uk.c
// irdma_uk_cq_poll_cmpl fills from the field). The clock counts at
// hca_core_clock and wraps at timestamp_mask (verbs.c:irdma_query_device:
// 1 GHz, GENMASK(31, 0)). No CREATE_CQ bit turns it on: irdma_create_cq
// only checks IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION (cq_validate_flags)
// and programs nothing for it. Without the feature (GEN_2) the field
// carries what the data path put there (the PSN). CCQEs are not stamped.
type stamp struct {
	ctr  timing.Counter
	mask uint64
}

// cqeStamp is the field's position in qword0.
const cqeStampShift = 32

// StampCQEs makes every CQE written from now on carry ctr's value, masked
// to mask (at most 32 bits: the field's width), in qword0 [63:32]. A
// device calls it once, before its first CQ.
func (ev *Events) StampCQEs(ctr timing.Counter, mask uint64) {
	ev.stamp.Store(&stamp{ctr: ctr, mask: mask & (1<<32 - 1)})
}

// stampInto writes the timestamp into qword0, if the device stamps CQEs.
func stampInto(p *atomic.Pointer[stamp], q0 *uint64) {
	s := p.Load()
	if s == nil {
		return
	}
	*q0 = *q0&(1<<cqeStampShift-1) | (s.ctr.Ticks()&s.mask)<<cqeStampShift
}

package driver

import (
	"sync"

	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// ceq is irdma_ceq / irdma_sc_ceq: a ring of 8-byte CEQEs, bit 63 the
// valid bit (polarity starts at 1), bits 62:0 the CQ context of a CQ that
// has a completion event.
type ceq struct {
	id     uint32
	ring   dmaMem
	size   uint32
	vector int
	mu     sync.Mutex // ce_lock
	tail   uint32
	pol    uint8
}

// aeq is irdma_aeq: a ring of 16-byte AEQEs (polarity starts at 1).
type aeq struct {
	ring dmaMem
	size uint32
	mu   sync.Mutex
	tail uint32
	pol  uint8
}

// aeInfo is irdma_aeqe_info (GEN_1/2 layout, ctrl.c:irdma_sc_get_next_aeqe;
// docs/hw-controlpath.md "AEQE").
type aeInfo struct {
	ComplCtx  uint64
	QPCQID    uint32
	WQEIdx    uint32
	Overflow  bool
	AECode    uint16
	AESrc     uint8
	IWState   uint8
	TCPState  uint8
	Q2Data    uint8
	QP, CQ    bool
	SQ, RQ    bool
	InRdWr    bool
	OutRdResp bool
}

// parseAEQE is the decode half of ctrl.c:irdma_sc_get_next_aeqe: QP/CQ id
// [17:0] plus bit 46 as bit 18, WQE index [32:18], overflow b33, AE code
// [45:34], source [53:50], iWARP state [56:54], TCP state [60:57], Q2 data
// [62:61]; the source decides QP (SQ/RQ) or CQ, except for the codes the
// driver forces to QP and LCE_CQ_CATASTROPHIC, forced to CQ.
func parseAEQE(qw0, qw1 uint64) aeInfo {
	i := aeInfo{
		ComplCtx: qw0,
		QPCQID:   uint32(qw1&0x3ffff) | uint32((qw1>>46)&1)<<18,
		WQEIdx:   uint32(qw1>>18) & 0x7fff,
		Overflow: qw1&(1<<33) != 0,
		AECode:   uint16(qw1>>34) & 0xfff,
		AESrc:    uint8(qw1>>50) & 0xf,
		IWState:  uint8(qw1>>54) & 0x7,
		TCPState: uint8(qw1>>57) & 0xf,
		Q2Data:   uint8(qw1>>61) & 0x3,
	}
	switch i.AESrc {
	case aeSrcRQ, aeSrcRQ0011:
		i.QP, i.RQ = true, true
	case aeSrcSQ, aeSrcSQ0111:
		i.QP, i.SQ = true, true
	case aeSrcCQ, aeSrcCQ0110, aeSrcCQ1010, aeSrcCQ1110:
		i.CQ = true
		i.ComplCtx = qw0 << 1 // irdma stores the CQ context >> 1
	case aeSrcInRRWR, aeSrcInRR:
		i.QP, i.InRdWr = true, true
	case aeSrcOutRR, aeSrcOutRRF:
		i.QP, i.OutRdResp = true, true
	default:
		switch {
		case i.AECode == aeLCECQCatastrophic:
			i.CQ = true
			i.ComplCtx = qw0 << 1
		case aeForcedQP(i.AECode):
			i.QP = true
		}
	}
	return i
}

// aeForcedQP lists the AE codes irdma_sc_get_next_aeqe treats as QP events
// whatever their source.
func aeForcedQP(c uint16) bool {
	switch {
	case c >= 0x0102 && c <= 0x0121: // AMP_*, PRIV_OPERATION_DENIED, MW/FASTREG
		return true
	case c >= 0x0132 && c <= 0x0135: // UDA_*
		return true
	case c >= 0x0201 && c <= 0x0224 && c != aeCQOperationError && c != 0x0209:
		return true
	case c >= 0x0301 && c <= 0x0316:
		return true
	case c >= 0x0380 && c <= 0x0383, c >= 0x0401 && c <= 0x0406:
		return true
	case c >= 0x0501 && c <= 0x0520, c >= 0x0601 && c <= 0x0603:
		return true
	case c == aeLCEQPCatastrophic, c >= 0x0703 && c <= 0x0705, c == aeQPSuspendComplete:
		return true
	}
	return false
}

// createCEQ is hw.c:irdma_create_ceq: a ring of min(CQ count,
// max_hw_ceq_size) entries, 256-aligned, created with CREATE_CEQ (CEQ 0
// through irdma_sc_cceq_create and a CCQ poll, the others through the CQP
// command path; both complete on the CCQ here).
func (d *Device) createCEQ(id uint32, vector int) (*ceq, error) {
	size := min(d.hmc.Obj[hmcCQ].Cnt, d.prof.Limits.MaxCEQSize)
	if size == 0 {
		size = 1
	}
	m, err := d.allocDMA(int(roundUp(uint64(size)*ceqeSize, eqAlign)), eqAlign, "ceq")
	if err != nil {
		return nil, err
	}
	q := &ceq{id: id, ring: m, size: size, vector: vector, pol: 1}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildCreateCEQ(eqWQEInfo{ID: id, ElemCnt: size, PA: m.pa, VSIIdx: d.cfg.VSINum}), nil
	}); err != nil {
		d.freeDMA(&m)
		return nil, err
	}
	return q, nil
}

// cfgCEQVector is icrdma_cfg_ceq: GLINT_CEQCTL(ceq) = CAUSE_ENA |
// MSIX_INDX | ITR_INDX 3.
func (d *Device) cfgCEQVector(ceqID uint32, vector int, enable bool) {
	v := regs.Prep(regs.GLINT_CEQCTL_MSIX_INDX, uint32(vector)) | regs.Prep(regs.GLINT_CEQCTL_ITR_INDX, regs.ITRIndexNone)
	if enable {
		v |= regs.GLINT_CEQCTL_CAUSE_ENA
	}
	d.hw.Write32(d.regs.GLINT_CEQCTL+4*regs.Offset(ceqID), v)
}

// cfgAEQ is irdma_cfg_aeq: PFINT_AEQCTL, same layout.
func (d *Device) cfgAEQ(vector int, enable bool) {
	v := regs.Prep(regs.GLINT_CEQCTL_MSIX_INDX, uint32(vector)) | regs.Prep(regs.GLINT_CEQCTL_ITR_INDX, regs.ITRIndexNone)
	if enable {
		v |= regs.GLINT_CEQCTL_CAUSE_ENA
	}
	d.hw.Write32(d.regs.PFINT_AEQCTL, v)
}

// enaIntr is icrdma_ena_irq: GLINT_DYN_CTL(vector) = INTENA | CLEARPBA,
// ITR index 0, interval 0.
func (d *Device) enaIntr(vector int) {
	d.hw.Write32(d.regs.GLINT_DYN_CTL+4*regs.Offset(vector), regs.GLINT_DYN_CTL_INTENA|regs.GLINT_DYN_CTL_CLEARPBA)
}

// disIntr is icrdma_disable_irq.
func (d *Device) disIntr(vector int) {
	d.hw.Write32(d.regs.GLINT_DYN_CTL+4*regs.Offset(vector), 0)
}

// startIRQ starts the goroutine of one MSI-X vector (irdma_irq_handler /
// irdma_ceq_handler and their tasklets irdma_dpc / irdma_ceq_dpc).
func (d *Device) startIRQ(vector int) bool {
	ch := d.hw.MSIX(vector)
	if ch == nil {
		return false
	}
	d.wg.Add(1)
	go d.irqRoutine(vector, ch)
	return true
}

func (d *Device) irqRoutine(vector int, ch <-chan struct{}) {
	defer d.wg.Done()
	for {
		select {
		case <-d.stop:
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
		}
		d.serviceVector(vector)
	}
}

// serviceVector is irdma_dpc (vector 0: CEQ 0 and the AEQ, msix_shared)
// or irdma_ceq_dpc (other vectors), then re-enables the interrupt.
func (d *Device) serviceVector(vector int) {
	for _, q := range d.ceqs {
		if q != nil && q.vector == vector {
			d.processCEQ(q)
		}
	}
	if vector == 0 {
		d.processAEQ()
	}
	d.enaIntr(vector)
}

// processCEQ is hw.c:irdma_process_ceq over ctrl.c:irdma_sc_process_ceq:
// consume CEQEs while their valid bit matches the polarity; a zero
// context (scrubbed by a CQ destroy) is skipped; each CQ found is
// acknowledged (CQACK ← cq_id) and then handled: the CCQ by processing CQP
// completions, a verbs CQ by its completion handler.
func (d *Device) processCEQ(q *ceq) {
	for {
		q.mu.Lock()
		a := q.ring.at(int(q.tail) * ceqeSize)
		v := d.load64(a)
		if uint8(v>>63) != q.pol {
			q.mu.Unlock()
			return
		}
		q.tail++
		if q.tail == q.size {
			q.tail = 0
			q.pol ^= 1
		}
		ctx := v &^ (1 << 63)
		q.mu.Unlock()
		if ctx == 0 {
			continue
		}
		if ctx == d.ccq.ctx {
			d.hw.Write32(d.regs.CQACK, 0)
			d.ccq.process()
			continue
		}
		cq := d.cqByCtx(ctx)
		if cq == nil {
			d.log.Debug("CEQE for unknown CQ context", u64Field("ctx", ctx))
			continue
		}
		d.hw.Write32(d.regs.CQACK, cq.id)
		cq.compEvent()
	}
}

// processAEQ is hw.c:irdma_process_aeq for RoCE: drain the AEQ, dispatch
// each event to its QP or CQ, then tell the device how many entries were
// consumed (AEQALLOC, irdma_sc_repost_aeq_entries).
func (d *Device) processAEQ() {
	q := d.aeq
	if q == nil {
		return
	}
	var cnt uint32
	for {
		q.mu.Lock()
		base := q.ring.at(int(q.tail) * aeqeSize)
		qw1 := d.load64(base + 8)
		if uint8(qw1>>63) != q.pol {
			q.mu.Unlock()
			break
		}
		qw0 := d.load64(base)
		q.tail++
		if q.tail == q.size {
			q.tail = 0
			q.pol ^= 1
		}
		q.mu.Unlock()
		cnt++
		info := parseAEQE(qw0, qw1)
		if info.Overflow {
			// irdma requests a function reset; we can only report it.
			d.log.Error("AEQ overflow")
		}
		d.handleAE(&info)
	}
	if cnt > 0 {
		d.hw.Write32(d.regs.AEQALLOC, cnt)
	}
}

package driver

import (
	"errors"
	"fmt"
	mbits "math/bits"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// Feature types of QUERY_RDMA_FEATURES (type.h enum irdma_feature_type).
const (
	featFWInfo   = 0
	featFTNFlags = 32
	// FTN_FLAGS bits (ctrl.c:irdma_get_rdma_features).
	ftnAtomicsAllowed = 1 << 1
)

func (d *Device) bringUp() error {
	// irdma_sc_dev_init: the doorbell BAR size, then the PE-ready wait.
	lbar := d.hw.Read32(d.regs.GLPCI_LBARCTRL)
	if db := regs.Get(lbar, regs.GLPCI_LBARCTRL_PE_DB_SIZE); db != regs.PEDBSize4M && db != regs.PEDBSize8M {
		return fmt.Errorf("%w: GLPCI_LBARCTRL PE_DB_SIZE %d", syscall.ENODEV, db)
	}
	if err := d.waitPEReady(); err != nil {
		return err
	}
	// irdma_setup_init_state: the 8 KB obj_mem region.
	var err error
	if d.objMem, err = d.allocDMA(8192, 0, "obj-mem"); err != nil {
		return err
	}
	// irdma_initialize_dev: the FPM query and commit buffers.
	qpa, err := d.objAlloc(fpmQueryBufSize, 8)
	if err != nil {
		return err
	}
	cpa, err := d.objAlloc(fpmCommitBufSize, 8)
	if err != nil {
		return err
	}
	d.fpmQuery = dmaMem{r: d.objMem.r, pa: qpa, size: fpmQueryBufSize}
	d.fpmCmt = dmaMem{r: d.objMem.r, pa: cpa, size: fpmCommitBufSize}
	if err := d.createCQP(); err != nil {
		return fmt.Errorf("create CQP: %w", err)
	}
	if err := d.getRDMAFeatures(); err != nil {
		return fmt.Errorf("QUERY_RDMA_FEATURES: %w", err)
	}
	if err := d.hmcSetup(); err != nil {
		return fmt.Errorf("HMC setup: %w", err)
	}
	d.initHWRsrc()
	if err := d.createCCQ(); err != nil {
		return fmt.Errorf("create CCQ: %w", err)
	}
	// MSI-X vectors the device provides (irdma_save_msix_info). Vector 0
	// carries the AEQ and CEQ 0 (msix_shared).
	for v := 0; v < d.cfg.MSIXVectors; v++ {
		if d.hw.MSIX(v) == nil {
			break
		}
		d.msixCount++
	}
	if d.msixCount == 0 {
		d.log.Warn("no MSI-X vectors: events will not be delivered")
	}
	numCEQs := max(1, min(d.msixCount, int(d.hmc.Misc.MaxCEQs)))
	d.ceqs = make([]*ceq, 0, numCEQs)
	// irdma_setup_ceq_0
	q, err := d.createCEQ(0, 0)
	if err != nil {
		return fmt.Errorf("create CEQ 0: %w", err)
	}
	d.ceqs = append(d.ceqs, q)
	if d.msixCount > 0 {
		d.cfgCEQVector(0, 0, true)
		d.enaIntr(0)
	}
	// irdma_ctrl_init_hw's last step: arm the CCQ.
	d.ccq.mu.Lock()
	d.ccq.ready = true
	d.ccq.armLocked()
	d.ccq.mu.Unlock()
	// irdma_rt_init_hw: statistics instance, CEQs 1.., PBLE pool, AEQ.
	d.statsInit()
	for id := 1; id < numCEQs; id++ {
		q, err := d.createCEQ(uint32(id), id)
		if err != nil {
			return fmt.Errorf("create CEQ %d: %w", id, err)
		}
		d.ceqs = append(d.ceqs, q)
		d.cfgCEQVector(uint32(id), id, true)
		d.enaIntr(id)
	}
	d.pble = newPBLEPool(d)
	if err := d.pble.grow(); err != nil && !errors.Is(err, syscall.ENOMEM) {
		return fmt.Errorf("PBLE init: %w", err)
	}
	if err := d.createAEQ(); err != nil {
		return fmt.Errorf("create AEQ: %w", err)
	}
	// The DPC goroutines start once the event queues are all in place
	// (until then every wait polls the CCQ itself, so nothing needs
	// them; an interrupt raised meanwhile is pending in its channel).
	if d.msixCount > 0 {
		for v := range d.ceqs {
			d.startIRQ(v)
		}
		d.irqRunning = true
	}
	return nil
}

// waitPEReady is irdma_wait_pe_ready: GLPE_CPUSTATUS0/1/2 must all read
// 0x80, polled for up to 14 s (docs/hw-controlpath.md "Registers").
func (d *Device) waitPEReady() error {
	deadline := d.clock.Now() + peReadyTimeout
	for {
		if d.hw.Read32(d.regs.GLPE_CPUSTATUS0) == regs.CPUStatusReady &&
			d.hw.Read32(d.regs.GLPE_CPUSTATUS1) == regs.CPUStatusReady &&
			d.hw.Read32(d.regs.GLPE_CPUSTATUS2) == regs.CPUStatusReady {
			return nil
		}
		if d.clock.Now() >= deadline {
			return fmt.Errorf("%w: protocol engine not ready", syscall.ETIMEDOUT)
		}
		time.Sleep(time.Millisecond)
	}
}

// createCQP is hw.c:irdma_create_cqp + ctrl.c:irdma_sc_cqp_init /
// irdma_sc_cqp_create: a 2048-entry ring aligned to 0x200, the SD overflow
// buffer, the 64-byte host context; CQPTAIL, CQPDB and CCQPSTATUS zeroed;
// then CCQPHIGH and CCQPLOW (the create trigger) and CCQPSTATUS polled
// until it is non-zero: CCQP_ERR (with CQPERRCODES) fails the create.
func (d *Device) createCQP() error {
	c := &cqp{d: d, size: cqpSQSize, ctxVal: cqpCtxMagic}
	var err error
	if c.ring, err = d.allocDMA(cqpSQSize*cqpWQESize, cqpAlign, "cqp-sq"); err != nil {
		return err
	}
	if c.sdbuf, err = d.allocDMA(cqpSQSize*cqpSDBufPerWQE, 0, "cqp-sdbuf"); err != nil {
		return err
	}
	if c.ctxPA, err = d.objAlloc(cqpHostCtxSize, 64); err != nil {
		return err
	}
	d.cqp = c
	d.hw.Write32(d.regs.CQPTAIL, 0)
	d.hw.Write32(d.regs.CQPDB, 0)
	d.hw.Write32(d.regs.CCQPSTATUS, 0)
	ctx := buildCQPHostCtx(cqpCtxInfo{
		SQSize:       cqpSQSize,
		SQPA:         c.ring.pa,
		HMCProfile:   hmcProfileDefault,
		ProtocolUsed: protocolRoCEOnly,
		ComplCtx:     c.ctxVal,
		HWMajVer:     uint16(d.prof.Queues.CQPHWMajorVer),
	})
	for i, q := range ctx {
		d.store64(hostIOVA(int(c.ctxPA)+8*i), q)
	}
	d.hw.Write32(d.regs.CCQPHIGH, uint32(c.ctxPA>>32))
	d.hw.Write32(d.regs.CCQPLOW, uint32(c.ctxPA))
	deadline := d.clock.Now() + d.cqpTimeout
	interval := pollIntervalMin
	for {
		v := d.hw.Read32(d.regs.CCQPSTATUS)
		if v != 0 {
			if d.prof.Fields.CCQPStatusErr.Get(uint64(v)) != 0 {
				codes := d.hw.Read32(d.regs.CQPERRCODES)
				return &CQPError{Major: uint16(codes >> 16), Minor: uint16(codes)}
			}
			return nil
		}
		if d.clock.Now() >= deadline {
			return syscall.ETIMEDOUT
		}
		time.Sleep(interval)
		interval = min(2*interval, pollIntervalMax)
	}
}

// getRDMAFeatures is ctrl.c:irdma_get_rdma_features: QUERY_RDMA_FEATURES into
// a buffer of ALIGN(8 × IRDMA_MAX_FEATURES, 16) bytes; FEATURE_CNT [47:32] of
// entry 0 must be ≥ 2; if it exceeds IRDMA_MAX_FEATURES the query is repeated
// with a buffer of that many entries (docs/hw-controlpath.md "Feature query":
// the maximum is 27 or 34 depending on the kernel). Each entry's TYPE [63:48]
// below the maximum is stored; firmware version from FW_INFO, atomics from
// FTN_FLAGS bit 1 (IRDMA_ATOMICS_ALLOWED_BIT). Register-polled: it runs
// before the CCQ exists.
func (d *Device) getRDMAFeatures() error {
	size := int(roundUp(8*maxFeatures, featureBufAlign))
	for attempt := 0; attempt < 2; attempt++ {
		buf, err := d.allocDMA(size, featureBufAlign, "feature-buf")
		if err != nil {
			return err
		}
		err = d.cqp.execPoll(func(uint32) (cqpWQE, error) {
			return buildQueryRDMAFeatures(buf.pa, uint32(size)), nil
		})
		if err != nil {
			d.freeDMA(&buf)
			return err
		}
		raw := make([]byte, size)
		_ = d.mem.Read(buf.at(0), raw)
		d.freeDMA(&buf)
		cnt := uint32(le64(raw, 0)>>32) & 0xffff
		if cnt < 2 {
			return fmt.Errorf("%w: feature count %d", syscall.EINVAL, cnt)
		}
		if cnt > maxFeatures && attempt == 0 {
			size = int(roundUp(8*uint64(cnt), featureBufAlign))
			continue
		}
		for i := 0; i < int(min(cnt, maxFeatures)) && 8*i+8 <= len(raw); i++ {
			v := le64(raw, 8*i)
			t := v >> 48
			if t >= maxFeatures {
				continue
			}
			d.featureInfo[t] = v
		}
		break
	}
	fw := d.featureInfo[featFWInfo]
	d.fwMinor, d.fwMajor = uint16(fw), uint16(fw>>16)
	if d.featureInfo[featFTNFlags]&ftnAtomicsAllowed != 0 {
		d.ukAttrs.FeatureFlags |= profile.FeatureAtomicOps
	} else {
		d.ukAttrs.FeatureFlags &^= profile.FeatureAtomicOps
	}
	return nil
}

// initHWRsrc is hw.c:irdma_initialize_hw_rsrc: limits from the committed
// HMC counts, the id bitmaps with their reserved ids (QP 0/1/2, CQ
// 0/1/2, PD 0/1/2, MR 0, AH 0, MCG 0, ARP 0), and the STag driver-key
// mask: mrdrvbits = 24 − max(ceil_log2(max_mr), 14), mr_stagmask =
// ~(((1 << mrdrvbits) − 1) << (32 − mrdrvbits)) (verbs.c irdma_create_stag;
// docs/hw-controlpath.md "STags").
func (d *Device) initHWRsrc() {
	d.maxCQE = d.prof.UK.MaxHWCQSize
	d.maxQP = d.hmc.Obj[hmcQP].Cnt
	d.maxMR = d.hmc.Obj[hmcMR].Cnt
	d.maxCQ = d.hmc.Obj[hmcCQ].Cnt
	d.maxPD = d.prof.Limits.MaxPDs
	d.arpSize = d.hmc.Obj[hmcARP].Cnt
	d.maxAH = d.hmc.Obj[hmcFSIAV].Cnt
	d.maxMCG = d.maxQP
	d.qpIDs = newIDBitmap(d.maxQP)
	d.cqIDs = newIDBitmap(d.maxCQ)
	d.mrIDs = newIDBitmap(d.maxMR)
	d.pdIDs = newIDBitmap(d.maxPD)
	d.ahIDs = newIDBitmap(d.maxAH)
	d.mcgIDs = newIDBitmap(d.maxMCG)
	d.arpIDs = newIDBitmap(min(d.arpSize, 4096)) // MAT_ARPENTRYIDX is 12 bits
	if d.prof.SRQ {
		// GEN_3: the SRQ id space (the emulator's MaxSRQs stands for the
		// HMC SRQ count); id 0 stays unused, as QP and CQ 0 do (our choice
		// for hw_attrs.min_hw_srq_id).
		d.srqIDs = newIDBitmap(d.prof.Limits.MaxSRQs)
		d.srqIDs.reserve(0)
	}
	for _, b := range []*idBitmap{d.mrIDs, d.qpIDs, d.cqIDs, d.pdIDs, d.arpIDs, d.ahIDs, d.mcgIDs} {
		b.reserve(0)
	}
	d.qpIDs.reserve(1) // GSI/ILQ
	d.qpIDs.reserve(2) // IEQ
	d.cqIDs.reserve(1)
	d.cqIDs.reserve(2)
	d.pdIDs.reserve(1)
	d.pdIDs.reserve(2)
	d.mrStagMask = stagMask(d.maxMR)
}

// countOrder is get_count_order: ceil(log2(n)).
func countOrder(n uint32) int {
	if n <= 1 {
		return 0
	}
	return mbits.Len32(n - 1)
}

// stagMask is irdma_initialize_hw_rsrc's mr_stagmask for max_mr MRs.
func stagMask(maxMR uint32) uint32 {
	drv := maxStagIndexBits - max(countOrder(maxMR), 14)
	if drv <= 0 {
		return 0xffffffff
	}
	return ^(uint32(1<<drv-1) << (32 - drv))
}

// createCCQ is hw.c:irdma_create_ccq + ctrl.c:irdma_sc_ccq_create: cq_id
// 0, 2050 entries in a 0x100-aligned ring, a 64-byte shadow area aligned
// to 128 in obj_mem, threshold 16, CEQ 0 valid, CEQE mask off, overflow
// check on. Its CREATE_CQ is posted like any CQP WQE and its completion
// is found on the CCQ itself (irdma_sc_ccq_create_done).
func (d *Device) createCCQ() error {
	q := &ccq{d: d, size: ccqSize, pol: 1, ctx: cqCtxValue(0)}
	var err error
	if q.ring, err = d.allocDMA(int(roundUp(ccqSize*cqeSize, cq0Align)), cq0Align, "ccq"); err != nil {
		return err
	}
	pa, err := d.objAlloc(shadowAreaSize, 128)
	if err != nil {
		return err
	}
	q.shadow = dmaMem{r: d.objMem.r, pa: pa, size: shadowAreaSize}
	d.ccq = q
	info := d.ccqWQEInfo()
	req := &cqpRequest{done: make(chan struct{})}
	if _, err := d.cqp.post(req, func(uint32) (cqpWQE, error) {
		return buildCreateCQ(d.prof.Fields, info), nil
	}); err != nil {
		return err
	}
	d.ccqUp.Store(true)
	if _, err := d.cqp.wait(req); err != nil {
		d.ccqUp.Store(false)
		return err
	}
	return nil
}

func (d *Device) ccqWQEInfo() cqWQEInfo {
	return cqWQEInfo{
		CQID: 0, Size: ccqSize, Ctx: d.ccq.ctx, ShadowThresh: ccqReadThreshold,
		PA: d.ccq.ring.pa, ShadowPA: d.ccq.shadow.pa, CEQID: 0, CEQIDValid: true,
		CEQEMask: false, CheckOverflow: true,
	}
}

// createAEQ is hw.c:irdma_create_aeq + irdma_cfg_aeq_vector: QP count +
// CQ count entries (≤ max_hw_aeq_size), 256-aligned, CREATE_AEQ, then
// PFINT_AEQCTL pointed at vector 0.
func (d *Device) createAEQ() error {
	size := min(d.hmc.Obj[hmcQP].Cnt+d.hmc.Obj[hmcCQ].Cnt, d.prof.Limits.MaxAEQSize)
	m, err := d.allocDMA(int(roundUp(uint64(size)*aeqeSize, eqAlign)), eqAlign, "aeq")
	if err != nil {
		return err
	}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildCreateAEQ(eqWQEInfo{ElemCnt: size, PA: m.pa}), nil
	}); err != nil {
		d.freeDMA(&m)
		return err
	}
	d.aeq = &aeq{ring: m, size: size, pol: 1}
	if d.msixCount > 0 {
		d.cfgAEQ(0, true)
	}
	return nil
}

// teardown is irdma_rt_deinit_hw + irdma_ctrl_deinit_hw, tolerant of a
// partial bring-up: interrupts off and their goroutines stopped; then the
// statistics instance, AEQ, CEQs, PBLE SDs, CCQ (register-polled), the
// HMC SDs, the CQP; finally every DMA region.
func (d *Device) teardown() error {
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	if d.aeq != nil && d.msixCount > 0 {
		d.cfgAEQ(0, false)
	}
	for _, q := range d.ceqs {
		d.cfgCEQVector(q.id, q.vector, false)
		d.disIntr(q.vector)
	}
	close(d.stop)
	d.wg.Wait()
	if d.cqp != nil && d.ccqReady() {
		d.statsFree()
		if d.aeq != nil {
			_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
				return buildDestroyAEQ(eqWQEInfo{ElemCnt: d.aeq.size}), nil
			})
			note("DESTROY_AEQ", err)
			d.freeDMA(&d.aeq.ring)
			d.aeq = nil
		}
		for i := len(d.ceqs) - 1; i >= 0; i-- {
			q := d.ceqs[i]
			_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
				return buildDestroyCEQ(eqWQEInfo{ID: q.id, ElemCnt: q.size}), nil
			})
			note(fmt.Sprintf("DESTROY_CEQ %d", q.id), err)
			d.freeDMA(&q.ring)
		}
		d.ceqs = nil
		// irdma_destroy_ccq: DESTROY_CQ for cq 0, register-polled.
		d.ccqUp.Store(false)
		note("DESTROY_CQ (CCQ)", d.cqp.execPoll(func(uint32) (cqpWQE, error) {
			return buildDestroyCQ(d.prof.Fields, d.ccqWQEInfo()), nil
		}))
	}
	if d.cqp != nil && d.sds != nil {
		note("UPDATE_PE_SDS (clear)", d.sds.clearAll())
	}
	if d.cqp != nil {
		note("CQP destroy", d.destroyCQP())
	}
	d.dmaMu.Lock()
	regions := make([]dmaMem, 0, len(d.dmaRegions))
	for r := range d.dmaRegions {
		regions = append(regions, dmaMem{r: r})
	}
	d.dmaMu.Unlock()
	for i := range regions {
		d.freeDMA(&regions[i])
	}
	d.cqp = nil
	return errors.Join(errs...)
}

// destroyCQP is ctrl.c:irdma_sc_cqp_destroy: CCQPHIGH and CCQPLOW zeroed,
// then CCQPSTATUS polled until CCQP_DONE clears.
func (d *Device) destroyCQP() error {
	d.hw.Write32(d.regs.CCQPHIGH, 0)
	d.hw.Write32(d.regs.CCQPLOW, 0)
	deadline := d.clock.Now() + d.cqpTimeout
	for {
		v := d.hw.Read32(d.regs.CCQPSTATUS)
		if d.prof.Fields.CCQPStatusDone.Get(uint64(v)) == 0 {
			if d.prof.Fields.CCQPStatusErr.Get(uint64(v)) != 0 {
				return syscall.EIO
			}
			return nil
		}
		if d.clock.Now() >= deadline {
			return syscall.ETIMEDOUT
		}
		time.Sleep(pollIntervalMax)
	}
}

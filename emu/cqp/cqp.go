package cqp

import (
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// CQP host context fields (docs/hw-controlpath.md "CQP host context"; defs.h
// IRDMA_CQPHC_*).
const (
	HostCtxSize = 64 // IRDMA_CQP_CTX_SIZE × 8

	hcSQSizeShift   = 8 // +0 [11:8] encoded ring size
	hcSQSizeMask    = 0xf
	hcProtocolShift = 3 // +0 [4:3] PROTOCOL_USED
	hcProtocolMask  = 0x3
	hcSQBaseMask    = ^uint64(0x1ff) // +8 [63:9], 512-aligned
	hcMinVerMask    = 0xffff         // +32 [15:0] HW_MINVER
	hcMajVerShift   = 16             // +32 [31:16] HW_MAJVER
)

// Protocols of the CQP host context's PROTOCOL_USED (irdma.h
// IRDMA_*_PROTOCOL_ONLY; docs/hw-controlpath.md "CQP host context").
const (
	ProtocolAny   = 0
	ProtocolIWARP = 1
	ProtocolRoCE  = 2
)

// CCQE qword3 fields (ctrl.c irdma_sc_ccq_get_cqe_info;
// docs/hw-controlpath.md "CQP completion").
const (
	ccqeWQEIdxShift = 32 // [46:32]
	ccqeWQEIdxMask  = 0x7fff
	ccqeErrorBit    = 55
)

// ccqID is the CCQ's CQ id (irdma_sc_ccq_init: always 0).
const ccqID = 0

// Config wires a CQP to its device.
type Config struct {
	Profile profile.Profile
	Regs    *regs.File
	Mem     *hostmem.Memory
	Meter   *timing.Meter // nil: no charging
	Logger  *zap.Logger   // nil: nop
	HMC     HMC
	MR      MRTable  // nil: STag ops fail with MinorMRError
	AH      AHTables // nil: AH/ARP/mcast ops fail with MinorAHError
	CQs     *cq.Table
	QPs     *qp.Table
	SRQs    *qp.SRQTable // nil without SRQ (GEN_2)
	Stats   *qp.StatsBlock
}

// Counters are the CQP's statistics.
type Counters struct {
	WQEs     uint64 // WQEs consumed
	Errors   uint64 // WQEs that failed
	CCQEs    uint64 // CCQEs written
	CCQLost  uint64 // CCQEs not written (CCQ overflow or fault)
	Creates  uint64 // successful CQP creations
	Destroys uint64 // CQP destroys
	ByOpcode [64]uint64
}

// CQP is the control QP engine of one function.
type CQP struct {
	cfg Config
	log *zap.Logger

	wake       chan struct{}
	quit       chan struct{}
	wg         sync.WaitGroup
	ctlPending atomic.Bool
	cancels    []func()
	closeOnce  sync.Once

	// Engine state, owned by the engine goroutine.
	created  bool
	sqBase   hostmem.IOVA
	size     uint32
	tail     uint32 // next WQE to consume
	pol      uint8  // expected valid bit
	ccqCtx   uint64 // host context +24
	protocol uint8
	ccq      *cq.CQ
	after    []func() // actions after the current completion
	ext      extState // bookkeeping of ops without a domain table

	mu  sync.Mutex // guards cnt
	cnt Counters
}

// New returns a CQP. Start subscribes it to its registers and starts the
// engine.
func New(cfg Config) (*CQP, error) {
	if cfg.Regs == nil || cfg.Mem == nil || cfg.HMC == nil || cfg.CQs == nil || cfg.QPs == nil {
		return nil, errors.New("cqp: Config needs Regs, Mem, HMC, CQs and QPs")
	}
	if cfg.Stats == nil {
		cfg.Stats = qp.NewStatsBlock(cfg.Profile.Limits.StatsInstances)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	c := &CQP{cfg: cfg, log: log, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	c.ext.init()
	return c, nil
}

// Start subscribes to CCQPLOW, CCQPHIGH and CQPDB and starts the engine
// goroutine.
func (c *CQP) Start() error {
	r := c.cfg.Regs
	for _, sub := range []struct {
		off regs.Offset
		fn  func(uint32)
	}{
		{c.cfg.Profile.Regs.CCQPLOW, func(uint32) { c.ctlPending.Store(true); c.kick() }},
		{c.cfg.Profile.Regs.CQPDB, func(uint32) { c.kick() }},
	} {
		cancel, err := r.OnWrite(sub.off, sub.fn)
		if err != nil {
			c.unsubscribe()
			return err
		}
		c.cancels = append(c.cancels, cancel)
	}
	c.wg.Add(1)
	go c.run()
	return nil
}

func (c *CQP) unsubscribe() {
	for _, f := range c.cancels {
		f()
	}
	c.cancels = nil
}

// Close stops the engine and waits for it.
func (c *CQP) Close() {
	c.closeOnce.Do(func() {
		c.unsubscribe()
		close(c.quit)
		c.wg.Wait()
	})
}

func (c *CQP) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Counters returns a copy of the statistics.
func (c *CQP) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cnt
}

func (c *CQP) run() {
	defer c.wg.Done()
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		if c.ctlPending.Swap(false) {
			c.control()
		}
		c.drain()
	}
}

// control handles a CCQPLOW write: create from the context address in
// CCQPHIGH:CCQPLOW, or destroy when both are zero.
func (c *CQP) control() {
	rg := c.cfg.Regs
	lay := c.cfg.Profile.Regs
	hi, lo := rg.Read32(lay.CCQPHIGH), rg.Read32(lay.CCQPLOW)
	pa := hostmem.IOVA(uint64(hi)<<32 | uint64(lo))
	if pa == 0 {
		c.created = false
		c.ccq = nil
		rg.Set(lay.CCQPSTATUS, 0)
		c.mu.Lock()
		c.cnt.Destroys++
		c.mu.Unlock()
		return
	}
	st := c.create(pa)
	if !st.OK() {
		rg.Set(lay.CQPERRCODES, uint32(st.Major)<<16|uint32(st.Minor))
		rg.Set(lay.CCQPSTATUS, regs.CCQPSTATUS_ERR)
		c.log.Debug("cqp create failed", zap.Stringer("status", st))
		return
	}
	rg.Set(lay.CQPERRCODES, 0)
	rg.Set(lay.CQPTAIL, 0)
	rg.Set(lay.CCQPSTATUS, regs.CCQPSTATUS_DONE)
	c.mu.Lock()
	c.cnt.Creates++
	c.mu.Unlock()
}

// create reads and validates the CQP host context at pa.
func (c *CQP) create(pa hostmem.IOVA) Status {
	var b [HostCtxSize]byte
	if err := c.cfg.Mem.Read(pa, b[:]); err != nil {
		return Fail(MinorPAFault)
	}
	w := ParseWQE(b[:]) // eight qwords
	enc := uint32(w.W[0] >> hcSQSizeShift & hcSQSizeMask)
	// irdma_get_encoded_wqe_size (CQP): log2(size) − 1, sizes 4..2048.
	if enc < 1 || enc > 10 {
		return Fail(MinorBadSize)
	}
	size := uint32(1) << (enc + 1)
	proto := uint8(w.W[0] >> hcProtocolShift & hcProtocolMask)
	if proto > ProtocolRoCE {
		return Fail(MinorBadContext)
	}
	if maj := uint32(w.W[4] >> hcMajVerShift & 0xffff); maj != c.cfg.Profile.Queues.CQPHWMajorVer {
		return Fail(MinorBadContext)
	}
	base := hostmem.IOVA(w.W[1] & hcSQBaseMask)
	if w.W[1]&^hcSQBaseMask != 0 {
		return Fail(MinorBadAlignment)
	}
	if err := cq.CheckRange(c.cfg.Mem, base, uint64(size)*WQESize); err != nil {
		return Fail(MinorPAFault)
	}
	c.created = true
	c.sqBase, c.size, c.tail, c.pol = base, size, 0, 1
	c.ccqCtx = w.W[3]
	c.protocol = proto
	c.ccq = c.cfg.CQs.Get(ccqID)
	return Status{}
}

// drain consumes every valid WQE.
func (c *CQP) drain() {
	for c.created {
		select {
		case <-c.quit:
			return
		default:
		}
		slot := c.sqBase + hostmem.IOVA(c.tail)*WQESize
		h, err := c.cfg.Mem.Load64(slot + 24)
		if err != nil || uint8(h>>hdrValidBit) != c.pol {
			return
		}
		var b [WQESize]byte
		if err := c.cfg.Mem.Read(slot, b[:]); err != nil {
			return
		}
		w := ParseWQE(b[:])
		w.W[3] = h
		c.consume(&w)
	}
}

// result is what an opcode returns.
type result struct {
	st     Status
	retval uint32
	bytes  int  // host memory touched besides the WQE (for the meter)
	noCCQE bool // the CCQ was destroyed by this WQE
}

func (c *CQP) consume(w *WQE) {
	idx := c.tail
	op := w.Opcode()
	res := c.execute(w)
	if c.cfg.Meter != nil {
		c.cfg.Meter.Charge(timing.CQPCommand, res.bytes)
	}
	// CCQE (once the CCQ exists).
	if ccq := c.ccq; ccq != nil && !res.noCCQE {
		var q [4]uint64
		q[1] = c.ccqCtx
		q[2] = uint64(res.retval)
		q[3] = uint64(res.st.Minor) | uint64(idx&ccqeWQEIdxMask)<<ccqeWQEIdxShift
		if !res.st.OK() {
			q[3] |= uint64(res.st.Major)<<16 | 1<<ccqeErrorBit
		}
		err := ccq.PostRaw(q, nil, false)
		c.mu.Lock()
		if err != nil {
			c.cnt.CCQLost++
		} else {
			c.cnt.CCQEs++
		}
		c.mu.Unlock()
	}
	// Registers: error codes first, then the tail the driver polls.
	lay := c.cfg.Profile.Regs
	c.tail++
	if c.tail == c.size {
		c.tail = 0
		c.pol ^= 1
	}
	tailv := c.tail & regs.CQPTAIL_WQTAIL
	if !res.st.OK() {
		c.cfg.Regs.Set(lay.CQPERRCODES, uint32(res.st.Major)<<16|uint32(res.st.Minor))
		tailv |= regs.CQPTAIL_CQP_OP_ERR
	} else {
		c.cfg.Regs.Set(lay.CQPERRCODES, 0)
	}
	c.cfg.Regs.Set(lay.CQPTAIL, tailv)
	c.mu.Lock()
	c.cnt.WQEs++
	c.cnt.ByOpcode[op]++
	if !res.st.OK() {
		c.cnt.Errors++
	}
	c.mu.Unlock()
	if !res.st.OK() {
		c.log.Debug("cqp wqe failed", zap.Uint8("opcode", op), zap.Uint32("index", idx), zap.Stringer("status", res.st))
	}
	for _, f := range c.after {
		f()
	}
	c.after = c.after[:0]
}

// execute runs one WQE. Every failure is a Status; nothing panics.
func (c *CQP) execute(w *WQE) (res result) {
	var err *Error
	switch op := w.Opcode(); op {
	case OpCreateQP:
		res, err = c.createQP(w)
	case OpModifyQP:
		res, err = c.modifyQP(w)
	case OpDestroyQP:
		res, err = c.destroyQP(w)
	case OpCreateCQ:
		res, err = c.createCQ(w)
	case OpModifyCQ:
		res, err = c.modifyCQ(w)
	case OpDestroyCQ:
		res, err = c.destroyCQ(w)
	case OpAllocSTag:
		res, err = c.allocSTag(w)
	case OpRegMR:
		res, err = c.regMR(w)
	case OpDeallocSTag:
		res, err = c.deallocSTag(w)
	case OpManageARP:
		res, err = c.manageARP(w)
	case OpManagePushPages:
		res, err = c.managePushPages(w)
	case OpQueryRDMAFeatures:
		res, err = c.queryRDMAFeatures(w)
	case OpUploadContext:
		res, err = c.uploadContext(w)
	case OpManageHMCPMFuncTbl:
		res, err = c.manageHMCPMFuncTable(w)
	case OpCreateCEQ:
		res, err = c.createCEQ(w)
	case OpDestroyCEQ:
		res, err = c.destroyCEQ(w)
	case OpCreateAEQ:
		res, err = c.createAEQ(w)
	case OpDestroyAEQ:
		res, err = c.destroyAEQ(w)
	case OpCreateAddrHandle, OpDestroyAddrHandle:
		res, err = c.accessAH(w)
	case OpUpdatePESDs:
		res, err = c.updatePESDs(w)
	case OpQueryFPMVal:
		res, err = c.queryFPM(w)
	case OpCommitFPMVal:
		res, err = c.commitFPM(w)
	case OpFlushWQEs:
		res, err = c.flushWQEs(w)
	case OpManageAPBVT:
		res, err = c.manageAPBVT(w)
	case OpManageQHash:
		res, err = c.manageQHash(w)
	case OpCreateMcastGrp, OpModifyMcastGrp, OpDestroyMcastGrp:
		res, err = c.accessMcast(w)
	case OpSuspendQP, OpResumeQP:
		res, err = c.suspendResumeQP(w)
	case OpSHMCPagesAllocated:
		res, err = c.shmcPagesAllocated(w)
	case OpWorkSchedNode:
		res, err = c.workSchedNode(w)
	case OpManageStats:
		res, err = c.manageStats(w)
	case OpGatherStats:
		res, err = c.gatherStats(w)
	case OpUpMap:
		res, err = c.upMap(w)
	case OpCreateSRQ, OpModifySRQ, OpDestroySRQ:
		res, err = c.srqOp(w)
	default:
		// 0x0b QUERY_STAG, 0x0c REG_SMR, 0x10 MANAGE_VF_PBLE_BP, 0x1d
		// MODIFY_ADDR_HANDLE, 0x24 NOP: no builder in irdma; 0x0e/0x14:
		// GEN_1 local MAC table; 0x17, 0x1a, > 0x2f: unassigned.
		err = fail(MinorUnsupportedOp, "opcode not supported", nil)
	}
	if err != nil {
		res.st = err.Status
		c.log.Debug("cqp op", zap.Error(err))
	}
	return res
}

// needHMC fails unless COMMIT_FPM_VAL has succeeded.
func (c *CQP) needHMC() *Error {
	if !c.cfg.HMC.Committed() {
		return fail(MinorHMCNotCommitted, "HMC not committed", nil)
	}
	return nil
}

// checkIndex fails unless idx < the committed count of t.
func (c *CQP) checkIndex(t ObjType, idx uint32) *Error {
	if err := c.needHMC(); err != nil {
		return err
	}
	if idx >= c.cfg.HMC.Count(t) {
		return fail(MinorIndexRange, "object index out of range", nil)
	}
	return nil
}

// pbleList reads n level-1 PBLEs from first on: 4 KiB page addresses.
func (c *CQP) pbleList(first uint32, n uint64) ([]hostmem.IOVA, *Error) {
	if err := c.needHMC(); err != nil {
		return nil, err
	}
	cnt := uint64(c.cfg.HMC.Count(ObjPBLE))
	if n == 0 || uint64(first)+n > cnt {
		return nil, fail(MinorPBLERange, "PBLE range beyond the committed count", nil)
	}
	pages := make([]hostmem.IOVA, n)
	for i := range pages {
		a, err := c.cfg.HMC.ObjectIOVA(ObjPBLE, first+uint32(i))
		if err != nil {
			return nil, fail(MinorPBLERange, "PBLE not backed", err)
		}
		v, err := c.cfg.Mem.Load64(a)
		if err != nil {
			return nil, fail(MinorPAFault, "PBLE read", err)
		}
		if v&(cq.PageSize-1) != 0 {
			return nil, fail(MinorBadAlignment, "PBLE not page aligned", nil)
		}
		pages[i] = hostmem.IOVA(v)
	}
	return pages, nil
}

// ring builds the RingMem of a queue given either a PA or (virtual) a
// first PBLE index.
func (c *CQP) ring(virtual bool, pa uint64, firstPBLE uint32, entry, size uint32, align uint64) (cq.RingMem, *Error) {
	r := cq.RingMem{Entry: entry, Size: size}
	if virtual {
		pages, err := c.pbleList(firstPBLE, cq.PagesFor(r.Bytes()))
		if err != nil {
			return r, err
		}
		r.Pages = pages
	} else {
		if pa == 0 {
			return r, fail(MinorPAFault, "ring address 0", nil)
		}
		if pa%align != 0 {
			return r, fail(MinorBadAlignment, "ring address not aligned", nil)
		}
		r.Base = hostmem.IOVA(pa)
	}
	if err := r.Check(c.cfg.Mem); err != nil {
		return r, fail(MinorPAFault, "ring not in host memory", err)
	}
	return r, nil
}

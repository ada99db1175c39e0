package driver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// cqCtxTag marks the CQ context values this driver puts in CREATE_CQ qw1:
// tag | cq_id. It is never zero (a zero CEQE context means "scrubbed",
// ctrl.c:irdma_sc_cleanup_ceqes) even for the CCQ (cq 0), it fits the 63
// bits the device echoes, and maps back to the CQ without a pointer
// (irdma puts the irdma_sc_cq pointer >> 1 there; the newest hw.c looks
// the CQ up by index instead).
const cqCtxTag uint64 = 0x1c << 56

func cqCtxValue(id uint32) uint64 { return cqCtxTag | uint64(id) }

func (d *Device) cqByCtx(ctx uint64) *CQ {
	if ctx&^0xffffffff != cqCtxTag {
		return nil
	}
	d.tblMu.RLock()
	defer d.tblMu.RUnlock()
	return d.cqTable[uint32(ctx)]
}

// CQ is a completion queue (irdma_cq).
type CQ struct {
	d        *Device
	id       uint32
	ceqID    uint32
	ctx      uint64
	user     bool
	size     uint32 // hardware ring entries (cq_uk.cq_size)
	cqe      int    // ibcq.cqe
	thresh   uint32
	ringPA   uint64
	shadowPA uint64
	virtual  bool
	firstPBL uint32

	// kernel mode
	kmem    dmaMem
	kshadow dmaMem
	ukcq    *uk.CQ
	resize  []*cqBuf // irdma_cq_buf list of pre-resize rings
	// generated is cmpl_generated: software flush completions
	// (generateFlushCompletions), polled after the ring.
	generated []WorkCompletion
	bound     map[uint64]*uk.QP

	// user mode: the registrations backing the ring and the shadow area
	umr       *MR
	umrShadow *MR

	mu           sync.Mutex // iwcq->lock
	armed        atomic.Bool
	lastNotify   uk.Notify
	compHandler  func(*CQ)
	eventHandler func(*CQ, AsyncEvent)
	compEvents   atomic.Uint32
	asyncEvents  atomic.Uint32
	qps          atomic.Int32
	dead         bool
}

type cqBuf struct {
	mem  dmaMem
	ukcq *uk.CQ
}

// ID is the CQ number (cq_id of irdma_create_cq_resp).
func (c *CQ) ID() uint32 { return c.id }

// Size is the hardware ring size in CQEs (cq_size of the create
// response).
func (c *CQ) Size() uint32 { return c.size }

// CQE is ibcq->cqe: the capacity reported to the consumer.
func (c *CQ) CQE() int { return c.cqe }

// CEQ is the completion event queue the CQ reports to.
func (c *CQ) CEQ() uint32 { return c.ceqID }

// UserCQ locates a user CQ's memory: the user virtual addresses under
// which the ring and the shadow area were registered with RegUserMR
// (reg_type CQ), as irdma_create_cq_req carries them.
type UserCQ struct {
	Ctx        *UContext
	CQBuf      uint64 // user_cq_buf
	ShadowArea uint64 // user_shadow_area
}

// CQAttr is ib_cq_init_attr plus the handlers.
type CQAttr struct {
	CQE        int
	CompVector int
	Flags      uint32 // IB_UVERBS_CQ_FLAGS_*; only TIMESTAMP_COMPLETION (1) is accepted
	User       *UserCQ
	// CompHandler runs (from the interrupt goroutine) for each completion
	// event of the CQ (ibcq->comp_handler).
	CompHandler func(*CQ)
	// EventHandler receives CQ async events (IB_EVENT_CQ_ERR).
	EventHandler func(*CQ, AsyncEvent)
}

// cqFlagTimestamp is IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, which
// cq_validate_flags accepts on GEN_2 and GEN_3 (only GEN_1 refuses flags;
// the GEN_3 series narrows it to GEN_3, and the GEN_2 profile follows the
// kernel before it). It programs nothing: a GEN_3 device stamps every CQE
// (docs/hw-datapath.md "Memory windows and CQE timestamps (GEN_3)").
const cqFlagTimestamp = 1

// CreateCQ is verbs.c:irdma_create_cq. Kernel CQs get a ring of
// uk.KernelCQSize entries (256-aligned) and a 64-byte shadow area; user
// CQs use the registrations named by attr.User (contiguous: ring PA;
// otherwise VIRTMAP with a level-1 PBL). The CQ reports to CEQ
// comp_vector if that CEQ exists, else CEQ 0. CREATE_CQ carries
// check_overflow, ENCEQEMASK and shadow_read_threshold = min(size/2,
// 0x3FFFF).
func (d *Device) CreateCQ(attr CQAttr) (*CQ, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if attr.Flags&^cqFlagTimestamp != 0 { // cq_validate_flags
		return nil, syscall.EOPNOTSUPP
	}
	id, err := d.cqIDs.alloc(-1)
	if err != nil {
		return nil, err
	}
	c := &CQ{d: d, id: id, ctx: cqCtxValue(id), compHandler: attr.CompHandler, eventHandler: attr.EventHandler}
	fail := func(err error) (*CQ, error) {
		d.cqFreeRsrc(c)
		return nil, err
	}
	c.size = uint32(max(attr.CQE, 4))
	if attr.CompVector >= 0 && attr.CompVector < len(d.ceqs) {
		c.ceqID = uint32(attr.CompVector)
	}
	if attr.User != nil {
		c.user = true
		uc := attr.User.Ctx
		if uc == nil || uc.d != d {
			return fail(syscall.EINVAL)
		}
		mr := uc.getPBL(attr.User.CQBuf, MemRegCQ)
		if mr == nil {
			return fail(syscall.EPROTO)
		}
		c.umr = mr
		// IRDMA_FEATURE_CQ_RESIZE: the shadow area is its own registration.
		sh := uc.getPBL(attr.User.ShadowArea, MemRegCQ)
		if sh == nil {
			uc.addPBL(mr, MemRegCQ)
			c.umr = nil
			return fail(syscall.EPROTO)
		}
		c.umrShadow = sh
		c.shadowPA = sh.qAddr
		if mr.pblAllocated {
			c.virtual = true
			c.firstPBL = mr.palloc.firstIdx()
		} else {
			c.ringPA = mr.qAddr
		}
	} else {
		// Kernel mode: irdma_create_cq's size rule (uk.KernelCQSize).
		if attr.CQE < 1 || uint32(attr.CQE) > d.maxCQE {
			return fail(syscall.EINVAL)
		}
		sizeRule := uk.KernelCQSize
		if d.wideCQE() {
			sizeRule = uk.KernelCQSizeWide
		}
		n, err := sizeRule(uk.LimitsFrom(d.prof), attr.CQE)
		if err != nil || uint32(n) > 1<<21-1 {
			return fail(syscall.EINVAL)
		}
		c.size = uint32(n)
		rsize := roundUp(uint64(n)*d.cqeBytes(), 256)
		if c.kmem, err = d.allocDMA(int(rsize), 256, fmt.Sprintf("cq-%d", id)); err != nil {
			return fail(err)
		}
		if c.kshadow, err = d.allocDMA(shadowAreaSize, 64, fmt.Sprintf("cq-%d-shadow", id)); err != nil {
			return fail(err)
		}
		c.ringPA, c.shadowPA = c.kmem.pa, c.kshadow.pa
		c.ukcq, err = d.newUKCQ(id, c.kmem.r.Bytes()[:uint64(n)*d.cqeBytes()], c.kshadow.r.Bytes()[:shadowAreaSize])
		if err != nil {
			return fail(err)
		}
	}
	c.cqe = int(c.size)
	if !c.user {
		c.cqe = attr.CQE
	}
	c.thresh = min(c.size/2, maxCQReadThresh)
	d.tblMu.Lock()
	d.cqTable[id] = c
	d.tblMu.Unlock()
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildCreateCQ(d.prof.Fields, c.wqeInfo(true)), nil
	}); err != nil {
		d.tblMu.Lock()
		delete(d.cqTable, id)
		d.tblMu.Unlock()
		return fail(err)
	}
	return c, nil
}

func (c *CQ) wqeInfo(checkOverflow bool) cqWQEInfo {
	i := cqWQEInfo{
		CQID: c.id, Size: c.size, Ctx: c.ctx, ShadowThresh: c.thresh, PA: c.ringPA,
		ShadowPA: c.shadowPA, CEQID: c.ceqID, CEQIDValid: true, CEQEMask: true,
		CheckOverflow: checkOverflow, VSIIdx: c.d.cfg.VSINum,
		// irdma_create_cq: avoid_mem_cflct = cqe_64byte_ena, for kernel and
		// user CQs alike (GEN_3 IRDMA_FEATURE_64_BYTE_CQE).
		AvoidMemCnfl: c.d.wideCQE(),
	}
	if c.virtual {
		i.VirtualMap, i.LPBLSize, i.FirstPBLIdx, i.PA = true, 1, c.firstPBL, 0
	}
	return i
}

// cqFreeRsrc is verbs.c:irdma_cq_free_rsrc.
func (d *Device) cqFreeRsrc(c *CQ) {
	if !c.user {
		d.freeDMA(&c.kmem)
		d.freeDMA(&c.kshadow)
		for _, b := range c.resize {
			d.freeDMA(&b.mem)
		}
		c.resize = nil
	}
	d.cqIDs.free(c.id)
}

// DestroyCQ is verbs.c:irdma_destroy_cq: DESTROY_CQ, scrub the CQ's
// pending CEQEs (irdma_sc_cleanup_ceqes), free the resources. It returns
// the number of completion events delivered for the CQ (the uverbs
// destroy-CQ response's comp_events_reported) and of async events. A CQ
// still bound to a QP is -EBUSY (the RDMA core's usecnt check).
func (d *Device) DestroyCQ(c *CQ) (compEvents, asyncEvents uint32, err error) {
	if c == nil || c.d != d {
		return 0, 0, syscall.EINVAL
	}
	if c.qps.Load() != 0 {
		return 0, 0, syscall.EBUSY
	}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return 0, 0, syscall.EINVAL
	}
	c.dead = true
	c.generated = nil // irdma_remove_cmpls_list
	c.mu.Unlock()
	if d.alive() == nil {
		if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
			return buildDestroyCQ(d.prof.Fields, c.wqeInfo(true)), nil
		}); err != nil {
			d.log.Warn("DESTROY_CQ failed", errField(err))
		}
	}
	d.cleanupCEQEs(c)
	d.tblMu.Lock()
	delete(d.cqTable, c.id)
	d.tblMu.Unlock()
	d.cqFreeRsrc(c)
	if c.user {
		// The registrations are owned by their MRs (irdma_dereg_mr).
		c.umr, c.umrShadow = nil, nil
	}
	return c.compEvents.Load(), c.asyncEvents.Load(), nil
}

// cleanupCEQEs is ctrl.c:irdma_sc_cleanup_ceqes: rewrite every pending
// CEQE of the CQ's CEQ that names this CQ to just its valid bit.
func (d *Device) cleanupCEQEs(c *CQ) {
	if int(c.ceqID) >= len(d.ceqs) {
		return
	}
	q := d.ceqs[c.ceqID]
	q.mu.Lock()
	defer q.mu.Unlock()
	i, pol := q.tail, q.pol
	for n := uint32(0); n < q.size; n++ {
		a := q.ring.at(int(i) * ceqeSize)
		v := d.load64(a)
		if uint8(v>>63) != pol {
			break
		}
		if v&^(1<<63) == c.ctx {
			d.store64(a, uint64(pol)<<63)
		}
		i++
		if i == q.size {
			i, pol = 0, pol^1
		}
	}
}

// compEvent is irdma_iwarp_ce_handler: a kernel CQ is disarmed, then the
// consumer's completion handler runs.
func (c *CQ) compEvent() {
	if !c.user {
		c.armed.Store(false)
	}
	c.compEvents.Add(1)
	if h := c.compHandler; h != nil {
		h(c)
	}
}

// ResizeCQ is verbs.c:irdma_resize_cq (requires IRDMA_FEATURE_CQ_RESIZE):
// a kernel CQ gets a new ring of (entries+1)×2 CQEs, a user CQ the ring
// registered under userBuf; MODIFY_CQ with CQRESIZE, the new size and the
// new ring; the old kernel ring stays on the resize list until CQEs are
// seen in the new one. Asking for the current size is a no-op.
func (d *Device) ResizeCQ(c *CQ, entries int, uc *UContext, userBuf uint64) error {
	if err := d.alive(); err != nil {
		return err
	}
	if c == nil || c.d != d {
		return syscall.EINVAL
	}
	if d.ukAttrs.FeatureFlags&cqResizeFeature == 0 {
		return syscall.EOPNOTSUPP
	}
	if entries > int(d.maxCQE) || entries < 0 {
		return syscall.EINVAL
	}
	if !c.user {
		entries++
		if !d.wideCQE() {
			entries *= 2
		}
	}
	newSize := uint32(max(entries, 4))
	if newSize == c.size-1 {
		return nil
	}
	info := c.wqeInfo(false)
	info.Size, info.Resize = newSize, true
	info.VirtualMap, info.LPBLSize, info.FirstPBLIdx, info.PA = false, 0, 0, 0
	var kmem dmaMem
	var mr *MR
	if c.user {
		if uc == nil {
			return syscall.EINVAL
		}
		if mr = uc.getPBL(userBuf, MemRegCQ); mr == nil {
			return syscall.ENOMEM
		}
		if mr.pblAllocated {
			info.VirtualMap, info.LPBLSize, info.FirstPBLIdx = true, 1, mr.palloc.firstIdx()
		} else {
			info.PA = mr.qAddr
		}
	} else {
		var err error
		if kmem, err = d.allocDMA(int(roundUp(uint64(newSize)*d.cqeBytes(), 256)), 256, fmt.Sprintf("cq-%d-resize", c.id)); err != nil {
			return err
		}
		info.PA = kmem.pa
	}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildModifyCQ(info), nil }); err != nil {
		if !c.user {
			d.freeDMA(&kmem)
		} else {
			uc.addPBL(mr, MemRegCQ)
		}
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.user {
		ncq, err := d.newUKCQ(c.id, kmem.r.Bytes()[:uint64(newSize)*d.cqeBytes()], c.kshadow.r.Bytes()[:shadowAreaSize])
		if err != nil {
			d.freeDMA(&kmem)
			return err
		}
		for ctx, q := range c.bound {
			ncq.BindQP(ctx, q)
		}
		c.resize = append(c.resize, &cqBuf{mem: c.kmem, ukcq: c.ukcq})
		c.kmem, c.ukcq = kmem, ncq
		c.ringPA = kmem.pa
	} else {
		c.umr = mr
		c.virtual = info.VirtualMap
		c.firstPBL = info.FirstPBLIdx
		c.ringPA = info.PA
	}
	c.size = newSize
	c.cqe = int(newSize) - 1
	return nil
}

// cqResizeFeature is IRDMA_FEATURE_CQ_RESIZE.
const cqResizeFeature = 0x2

// bindQP tells the kernel CQ (and the rings kept by a resize) which uk QP
// a completion context means.
func (c *CQ) bindQP(ctx uint64, q *uk.QP) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ukcq == nil {
		return
	}
	if c.bound == nil {
		c.bound = map[uint64]*uk.QP{}
	}
	c.bound[ctx] = q
	c.ukcq.BindQP(ctx, q)
	for _, b := range c.resize {
		b.ukcq.BindQP(ctx, q)
	}
}

// cleanQP is verbs.c:irdma_clean_cqes: zero the completion context of the
// QP's unpolled CQEs and forget the QP.
func (c *CQ) cleanQP(ctx uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ukcq == nil {
		return
	}
	delete(c.bound, ctx)
	c.dropGenerated(uint32(ctx &^ qpCtxTag))
	c.ukcq.Clean(ctx)
	c.ukcq.UnbindQP(ctx)
	for _, b := range c.resize {
		b.ukcq.Clean(ctx)
		b.ukcq.UnbindQP(ctx)
	}
}

// wideCQE reports 64-byte CQEs (IRDMA_FEATURE_64_BYTE_CQE, GEN_3).
func (d *Device) wideCQE() bool { return d.prof.Queues.CQESize == 64 }

// cqeBytes is one CQ ring entry: struct irdma_cqe or irdma_extended_cqe.
func (d *Device) cqeBytes() uint64 { return uint64(d.prof.Queues.CQESize) }

// newUKCQ is irdma_uk_cq_init for a kernel ring of this profile.
func (d *Device) newUKCQ(id uint32, ring, shadow []byte) (*uk.CQ, error) {
	return uk.NewCQ(uk.CQConfig{ID: id, Ring: ring, Shadow: shadow, Wide: d.wideCQE(),
		HWFlushPerWQE: d.prof.Queues.HWFlushPerWQE})
}

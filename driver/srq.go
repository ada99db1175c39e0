package driver

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Shared receive queues (GEN_3: IRDMA_FEATURE_SRQ, ig3rdma_hw.c
// ig3rdma_init_hw). On a profile without SRQ every SRQ verb answers
// -EOPNOTSUPP, as irdma does on GEN_2 (verbs.c:irdma_create_srq checks the
// feature flag first; the RDMA core never calls the others there because
// no SRQ can exist). docs/verbs.md "SRQ (GEN_3)" is the contract the
// uverbs side calls.

// SRQAttrMask is ib_srq_attr_mask.
type SRQAttrMask uint32

const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // IB_SRQ_MAX_WR: resizing, which irdma refuses
	SRQAttrLimit SRQAttrMask = 1 << 1 // IB_SRQ_LIMIT: arm the limit event
)

// SRQAttr is ib_srq_attr.
type SRQAttr struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
}

// UserSRQ locates a user SRQ's memory (irdma_create_srq_req): the user
// virtual address of the ring, registered before with RegUserMR and
// MemReg{Type: MemRegSRQ, RQPages: ring pages} (ring pages, then one
// shadow page: verbs.c:irdma_reg_user_mr_type_srq), and the shadow area's
// virtual address (libirdma puts it right after the ring; the driver takes
// the shadow's address from the registration, as irdma does).
type UserSRQ struct {
	Ctx            *UContext
	UserSRQBuf     uint64 // user_srq_buf
	UserShadowArea uint64 // user_shadow_area
}

// SRQInitAttr is ib_srq_init_attr (IB_SRQT_BASIC only).
type SRQInitAttr struct {
	Attr SRQAttr
	// User is nil for a kernel SRQ (ring, shadow and wr_id array allocated
	// here: verbs.c:irdma_setup_kmode_srq).
	User *UserSRQ
	// EventHandler receives IB_EVENT_SRQ_LIMIT_REACHED (ibsrq->event_handler,
	// called from irdma_srq_event). It runs on the AE goroutine: it must not
	// block on the device.
	EventHandler func(*SRQ, AsyncEvent)
}

// SRQCreateResp is what irdma_create_srq answers a user
// (irdma_create_srq_resp): the SRQ id and the ring size in WQEs
// (depth >> shift, what libirdma's irdma_uk_srq_init is given).
type SRQCreateResp struct {
	SRQID   uint32
	SRQSize uint32
}

// Async event types of SRQs (ib_event_type).
const (
	EventSRQErr          AsyncEventType = 14 // IB_EVENT_SRQ_ERR
	EventSRQLimitReached AsyncEventType = 15 // IB_EVENT_SRQ_LIMIT_REACHED
)

// SRQ is a shared receive queue (irdma_srq with its irdma_sc_srq).
type SRQ struct {
	d       *Device
	id      uint32
	pd      *PD
	user    bool
	uctx    *UContext
	kmem    dmaMem
	ringPA  uint64 // srq_pa (or the first PBLE index when virtual)
	virtual bool
	shadow  uint64 // shadow_area_pa
	// hwSize is the encoded ring size (irdma_get_encoded_wqe_size of the
	// ring in quanta, at least IRDMA_SRQ_MIN_QUANTA); wqeSize the WQE
	// shift (srq_uk.wqe_size).
	hwSize  uint8
	wqeSize uint8
	depth   uint32 // quanta
	size    uint32 // WQEs (depth >> shift)
	maxWR   uint32
	maxSGE  uint32
	uksrq   *uk.SRQ

	mu           sync.Mutex // iwsrq->lock
	limit        uint32     // sc_srq.srq_limit: 0 once the event fired (irdma_srq_event)
	qps          int        // QPs bound to it (the RDMA core's srq usecnt)
	dead         bool
	eventHandler func(*SRQ, AsyncEvent)
}

// ID is the SRQ number.
func (s *SRQ) ID() uint32 { return s.id }

// Size is the ring size in WQEs (irdma_create_srq_resp srq_size).
func (s *SRQ) Size() uint32 { return s.size }

// srqSupported is the feature check that opens every SRQ verb.
func (d *Device) srqSupported() error {
	if d.ukAttrs.FeatureFlags&profile.FeatureSRQ == 0 || d.srqIDs == nil {
		return syscall.EOPNOTSUPP
	}
	return nil
}

// srqCtxTag marks SRQ contexts (CREATE_SRQ qword1, returned in the SRQ's
// AEs; irdma uses the irdma_sc_srq pointer). The id sits above bit 6: a
// GEN_3 AEQE keeps only [63:6] of the context (defs.h
// IRDMA_AEQE_CMPL_CTXT), as for a 64-byte-aligned pointer.
const srqCtxTag uint64 = 0x5e << 56

func srqCtxValue(id uint32) uint64 { return srqCtxTag | uint64(id)<<6 }

// srqWQEInfo is irdma_sc_srq's CQP view.
type srqWQEInfo struct {
	ID        uint32
	PD        uint32
	Ctx       uint64
	HWSize    uint8 // RQSIZE: log2(ring quanta) − 3
	WQESize   uint8 // RQ_WQE_SIZE: the WQE shift
	Limit     uint32
	Arm       bool
	RingPA    uint64
	ShadowPA  uint64
	FirstPBL  uint32
	Virtual   bool
	LeafPBL   uint8
	ModifyCtx bool // MODIFY_SRQ: qword1 is SRQCTX [63:6] = id
}

// buildSRQ is irdma_sc_srq_create / irdma_sc_srq_modify (defs.h
// IRDMA_CQPSQ_SRQ_*): qw0 SRQ_LIMIT [43:32], RQSIZE [3:0], RQ_WQE_SIZE
// [5:4]; qw1 the context (MODIFY: SRQCTX [63:6] = the id); qw2 PD_ID
// [39:16]; qw4 PHYSICAL_BUFFER_ADDR [63:8]; qw5 DB_SHADOW_ADDR [63:6]; qw6
// FIRST_PM_PBL_IDX [27:0]; hdr the id, the opcode, LEAF_PBL_SIZE [45:44],
// VIRTMAP b47, ARM_LIMIT_EVENT b61.
func buildSRQ(op uint8, i srqWQEInfo) cqpWQE {
	var w cqpWQE
	w[0] = bits(uint64(i.Limit), 43, 32) | bits(uint64(i.HWSize), 3, 0) | bits(uint64(i.WQESize), 5, 4)
	w[1] = i.Ctx
	if i.ModifyCtx {
		w[1] = bits(uint64(i.ID), 63, 6)
	}
	w[2] = bits(uint64(i.PD), 39, 16)
	w[4] = bits(i.RingPA>>8, 63, 8)
	w[5] = bits(i.ShadowPA>>6, 63, 6)
	w[6] = bits(uint64(i.FirstPBL), 27, 0)
	w[3] = uint64(i.ID) | opHdr(op) | bits(uint64(i.LeafPBL), 45, 44) | b2u(i.Virtual)<<47 | b2u(i.Arm)<<61
	return w
}

// buildDestroySRQ is irdma_sc_srq_destroy: qw1 the context, hdr the id.
func buildDestroySRQ(id uint32, ctx uint64) cqpWQE {
	var w cqpWQE
	w[1] = ctx
	w[3] = uint64(id) | opHdr(cqpOpDestroySRQ)
	return w
}

func (s *SRQ) wqeInfo() srqWQEInfo {
	i := srqWQEInfo{ID: s.id, PD: s.pd.id, Ctx: srqCtxValue(s.id), HWSize: s.hwSize, WQESize: s.wqeSize,
		Limit: s.limit, Arm: s.limit != 0, RingPA: s.ringPA, ShadowPA: s.shadow}
	if s.virtual {
		i.Virtual, i.LeafPBL, i.FirstPBL, i.RingPA = true, 1, uint32(s.ringPA), 0
	}
	return i
}

// encodedSRQSize is irdma_get_encoded_wqe_size for IRDMA_QUEUE_TYPE_SRQ:
// log2(quanta) − 3 (8 quanta, the smallest SRQ, encode as 0).
func encodedSRQSize(quanta uint32) uint8 {
	n := uint8(0)
	for q := quanta >> 3; q > 1; q >>= 1 {
		n++
	}
	return n
}

// CreateSRQ is verbs.c:irdma_create_srq: the feature check (-EOPNOTSUPP
// without IRDMA_FEATURE_SRQ), max_sge ≤ max_hw_wq_frags and max_wr ≤
// max_hw_srq_quanta (-EINVAL), srq_limit ≤ max_wr (-EINVAL); an id from
// the SRQ bitmap; the ring depth of irdma_get_srqdepth for the WQE shift
// of max_sge; kernel SRQs get ring + shadow in one allocation, user SRQs
// use the MemRegSRQ registration found by attr.User.UserSRQBuf (-EPROTO
// if none: irdma_setup_umode_srq, where irdma_setup_umode_qp answers
// -ENODATA for the QP's rings); then CREATE_SRQ (SRQ_LIMIT = srq_limit, ARM_LIMIT_EVENT when
// srq_limit ≠ 0).
func (d *Device) CreateSRQ(pd *PD, attr SRQInitAttr) (*SRQ, SRQCreateResp, error) {
	var resp SRQCreateResp
	if err := d.srqSupported(); err != nil {
		return nil, resp, err
	}
	if err := d.alive(); err != nil {
		return nil, resp, err
	}
	a := attr.Attr
	u := d.ukAttrs
	if pd == nil || pd.d != d || pd.dead.Load() || a.MaxSGE > u.MaxHWWQFrags || a.MaxWR > u.MaxHWSRQQuanta ||
		a.MaxWR == 0 || a.SRQLimit > a.MaxWR {
		return nil, resp, syscall.EINVAL
	}
	lim := uk.LimitsFrom(d.ukProfile())
	shift := uk.WQEShift(max(a.MaxSGE, 1), 0)
	depth, err := uk.SRQDepth(lim, a.MaxWR, shift)
	if err != nil {
		return nil, resp, syscall.EINVAL
	}
	id, err := d.srqIDs.alloc(-1)
	if err != nil {
		return nil, resp, err
	}
	s := &SRQ{d: d, id: id, pd: pd, wqeSize: shift, depth: depth, size: depth >> shift,
		maxSGE: max(a.MaxSGE, 1), limit: a.SRQLimit, eventHandler: attr.EventHandler}
	s.maxWR = s.size - 1
	s.hwSize = encodedSRQSize(max(depth, 8)) // IRDMA_SRQ_MIN_QUANTA
	fail := func(err error) (*SRQ, SRQCreateResp, error) {
		d.srqFreeRsrc(s)
		return nil, resp, err
	}
	if attr.User != nil {
		uc := attr.User.Ctx
		if uc == nil || uc.d != d {
			return fail(syscall.EINVAL)
		}
		// irdma_setup_umode_srq
		mr := uc.getSRQPBL(attr.User.UserSRQBuf)
		if mr == nil {
			return fail(syscall.EPROTO)
		}
		s.user, s.uctx = true, uc
		s.shadow = mr.shadow
		if mr.pblAllocated {
			s.virtual, s.ringPA = true, uint64(mr.sqPBLIdx)
		} else {
			s.ringPA = mr.qAddr
		}
	} else {
		// irdma_setup_kmode_srq: ring, then the shadow area.
		ring := int(depth) * qpWQEMinSize
		if s.kmem, err = d.allocDMA(int(roundUp(uint64(ring+shadowAreaSize), 256)), 256, fmt.Sprintf("srq-%d", id)); err != nil {
			return fail(err)
		}
		buf := s.kmem.r.Bytes()
		s.ringPA, s.shadow = s.kmem.pa, s.kmem.pa+uint64(ring)
		if s.uksrq, err = uk.NewSRQ(uk.SRQConfig{Limits: lim, ID: id, Ring: buf[:ring], Shift: shift,
			Shadow: buf[ring : ring+shadowAreaSize], MaxFragCnt: int(s.maxSGE)}); err != nil {
			return fail(err)
		}
	}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildSRQ(cqpOpCreateSRQ, s.wqeInfo()), nil }); err != nil {
		return fail(err)
	}
	d.tblMu.Lock()
	d.srqTable[id] = s
	d.tblMu.Unlock()
	pd.users.Add(1)
	resp.SRQID, resp.SRQSize = id, s.size
	return s, resp, nil
}

// srqFreeRsrc is verbs.c:irdma_srq_free_rsrc: the kernel ring, a user
// SRQ's registration, the id.
func (d *Device) srqFreeRsrc(s *SRQ) {
	d.freeDMA(&s.kmem)
	d.srqIDs.free(s.id)
}

// ModifySRQ is verbs.c:irdma_modify_srq: IB_SRQ_MAX_WR is refused
// (-EINVAL: irdma cannot resize an SRQ); IB_SRQ_LIMIT with a limit above
// the SRQ's size is -EINVAL; otherwise MODIFY_SRQ arms the limit event at
// the new limit (ARM_LIMIT_EVENT 1). A zero mask is a no-op.
func (d *Device) ModifySRQ(s *SRQ, attr SRQAttr, mask SRQAttrMask) error {
	if err := d.srqSupported(); err != nil {
		return err
	}
	if s == nil || s.d != d {
		return syscall.EINVAL
	}
	if mask&SRQAttrMaxWR != 0 {
		return syscall.EINVAL
	}
	if mask&SRQAttrLimit == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || attr.SRQLimit > s.size {
		return syscall.EINVAL
	}
	info := s.wqeInfo()
	info.Limit, info.Arm, info.ModifyCtx = attr.SRQLimit, true, true
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildSRQ(cqpOpModifySRQ, info), nil }); err != nil {
		return err
	}
	s.limit = attr.SRQLimit
	return nil
}

// QuerySRQ is verbs.c:irdma_query_srq: max_wr, max_sge and the current
// srq_limit, from the driver (no CQP command).
func (d *Device) QuerySRQ(s *SRQ) (SRQAttr, error) {
	if err := d.srqSupported(); err != nil {
		return SRQAttr{}, err
	}
	if s == nil || s.d != d {
		return SRQAttr{}, syscall.EINVAL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQAttr{MaxWR: s.maxWR, MaxSGE: s.maxSGE, SRQLimit: s.limit}, nil
}

// DestroySRQ is verbs.c:irdma_destroy_srq: -EBUSY while QPs are bound to
// it (the RDMA core's usecnt), DESTROY_SRQ, then irdma_srq_free_rsrc.
func (d *Device) DestroySRQ(s *SRQ) error {
	if err := d.srqSupported(); err != nil {
		return err
	}
	if s == nil || s.d != d {
		return syscall.EINVAL
	}
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return syscall.EINVAL
	}
	if s.qps > 0 {
		s.mu.Unlock()
		return syscall.EBUSY
	}
	s.dead = true
	s.mu.Unlock()
	if d.alive() == nil {
		if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDestroySRQ(s.id, srqCtxValue(s.id)), nil }); err != nil {
			d.log.Warn("DESTROY_SRQ failed", errField(err))
		}
	}
	d.tblMu.Lock()
	delete(d.srqTable, s.id)
	d.tblMu.Unlock()
	d.srqFreeRsrc(s)
	s.pd.users.Add(-1)
	return nil
}

// PostSRQRecv is verbs.c:irdma_post_srq_recv for a kernel SRQ: each work
// request through irdma_uk_srq_post_receive in order (-EINVAL for more
// SGEs than the SRQ's max_sge, -ENOMEM when the ring is full); the
// producer index goes to the shadow area, which is the only doorbell. It
// returns how many were posted: on error, wrs[posted] is the bad one.
func (d *Device) PostSRQRecv(s *SRQ, wrs []RecvWR) (int, error) {
	if err := d.srqSupported(); err != nil {
		return 0, err
	}
	if s == nil || s.d != d || s.uksrq == nil {
		return 0, syscall.EINVAL
	}
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if dead {
		return 0, syscall.EINVAL
	}
	return s.uksrq.PostRecv(wrs) // uk's errors are -EINVAL and -ENOMEM
}

// srqEvent is verbs.c:irdma_srq_event, from the AE handler for
// IRDMA_AE_SRQ_LIMIT: the SRQ named by the AE's context gets
// IB_EVENT_SRQ_LIMIT_REACHED, and its limit reads 0 from then on (the
// hardware disarmed it).
func (d *Device) srqEvent(ctx uint64, code uint16) {
	if ctx&^(1<<62-1) != srqCtxTag&^(1<<62-1) {
		return
	}
	id := uint32((ctx &^ srqCtxTag) >> 6)
	d.tblMu.RLock()
	s := d.srqTable[id]
	d.tblMu.RUnlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	s.limit = 0
	h := s.eventHandler
	s.mu.Unlock()
	if h != nil {
		h(s, AsyncEvent{Type: EventSRQLimitReached, AECode: code})
	}
}

// bindQP and unbindQP count the QPs using the SRQ (ib_srq usecnt).
func (s *SRQ) bindQP() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return syscall.EINVAL
	}
	s.qps++
	return nil
}

func (s *SRQ) unbindQP() {
	s.mu.Lock()
	s.qps--
	s.mu.Unlock()
}

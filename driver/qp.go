package driver

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// QPType is ib_qp_type for the types irdma's RoCE mode creates.
type QPType uint8

const (
	QPTypeGSI QPType = 1 // IB_QPT_GSI: always QP 1, a UD QP in hardware
	QPTypeRC  QPType = 2 // IB_QPT_RC
	QPTypeUD  QPType = 4 // IB_QPT_UD
)

// QPState is ib_qp_state.
type QPState uint8

const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
)

func (s QPState) String() string {
	names := [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// QPCap is ib_qp_cap.
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// UserQP locates a user QP's memory (irdma_create_qp_req): the user
// virtual address under which SQ, RQ and shadow were registered
// (reg_type QP) and the completion context the hardware returns in CQEs.
type UserQP struct {
	Ctx          *UContext
	UserWQEBufs  uint64
	UserComplCtx uint64
}

// QPInitAttr is ib_qp_init_attr.
type QPInitAttr struct {
	Type        QPType
	SendCQ      *CQ
	RecvCQ      *CQ
	Cap         QPCap
	SignalAll   bool   // IB_SIGNAL_ALL_WR
	CreateFlags uint32 // must be 0 (irdma_validate_qp_attrs)
	User        *UserQP
	// SRQ binds the QP's receive side to a shared receive queue (GEN_3):
	// the QP context gets USE_SRQ and the SRQ id, receives come from the
	// SRQ and PostRecv on the QP is refused (-EINVAL). Cap.MaxRecvWR and
	// MaxRecvSGE are then ignored, as irdma ignores them (the QP gets the
	// minimum RQ). nil on GEN_2, where there are no SRQs.
	SRQ *SRQ
	// EventHandler receives the QP's asynchronous events (ibqp->event_handler).
	EventHandler func(*QP, AsyncEvent)
}

// QPCreateResp is what irdma_create_qp answers a user (irdma_create_qp_resp).
type QPCreateResp struct {
	QPID         uint32
	ActualSQSize uint32
	ActualRQSize uint32
	PushIdx      uint32
	LSMM         uint32
	QPCaps       uint32
}

// QP capability bits (user.h qp_caps).
const (
	capWriteWithImm uint32 = 1
	capSendWithImm  uint32 = 2
	capRoCE         uint32 = 4
	capPushMode     uint32 = 8
)

// QP is a queue pair (irdma_qp).
type QP struct {
	d        *Device
	id       uint32
	typ      QPType
	pd       *PD
	sendCQ   *CQ
	recvCQ   *CQ
	user     bool
	uctx     *UContext
	hwType   uint8 // IRDMA_QP_TYPE_ROCE_RC / _UD
	qpCaps   uint32
	q2ctx    dmaMem
	ctxPA    uint64
	kmem     dmaMem
	shadowPA uint64
	virtual  bool
	sizes    uk.QPSizes
	cap      QPCap
	sigAll   bool
	ukqp     *uk.QP
	srq      *SRQ // GEN_3: the receives come from it

	mu        sync.Mutex // iwqp->lock
	modifyMu  sync.Mutex // serialises modify_qp (hw_mod_qp_pend)
	ctx       roceCtx    // the driver's shadow of the host context
	av        AHAttr
	avValid   bool
	ibState   QPState
	hwState   uint8 // iwarp_state
	hwIWState uint8 // hw_iwarp_state from AEs
	userPri   uint8
	onQoS     bool

	flushIssued bool
	flushTimer  timing.Timer // dwork_flush
	sqGen       uint32       // software flush cursor (see generateFlushCompletions)
	rqGen       uint32
	sqGenValid  bool
	rqGenValid  bool
	flushSQ     bool // sc_qp.flush_sq: SQ already flushed
	flushRQ     bool
	sqFlushCode bool
	rqFlushCode bool
	flushCode   uint16
	eventType   AsyncEventType
	lastAE      uint16

	suspendMu      sync.Mutex
	suspendPending bool
	suspendDone    chan struct{}

	destroyPending bool
	dead           bool
	eventHandler   func(*QP, AsyncEvent)
	ceaseOnce      sync.Once
}

// ID is the QP number.
func (q *QP) ID() uint32 { return q.id }

// Type is the QP type.
func (q *QP) Type() QPType { return q.typ }

// State is the QP state the driver holds (ibqp_state).
func (q *QP) State() QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ibState
}

// HWState is the hardware (iwarp) state the driver last moved the QP to.
func (q *QP) HWState() uint8 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.hwState
}

// qpCtxTag marks kernel QP completion contexts: tag | qp_id (irdma uses
// the irdma_sc_qp pointer). It is never zero, as uk.CQ requires.
const qpCtxTag uint64 = 0x9f << 56

// validateQPAttrs is verbs.c:irdma_validate_qp_attrs: no create flags;
// inline, send and receive SGEs within the hardware maxima; RC, UD or
// GSI only.
func (d *Device) validateQPAttrs(a *QPInitAttr) error {
	if a.CreateFlags != 0 {
		return syscall.EOPNOTSUPP
	}
	u := d.prof.UK
	if a.Cap.MaxInlineData > u.MaxHWInline || a.Cap.MaxSendSGE > u.MaxHWWQFrags || a.Cap.MaxRecvSGE > u.MaxHWWQFrags {
		return syscall.EINVAL
	}
	switch a.Type {
	case QPTypeRC, QPTypeUD, QPTypeGSI:
	default:
		return syscall.EOPNOTSUPP
	}
	return nil
}

// CreateQP is verbs.c:irdma_create_qp for RoCE. Kernel QPs get the SQ, RQ
// and shadow area in one 256-aligned allocation sized by
// irdma_setup_kmode_qp (the caps reported back are the usable ones);
// user QPs use the queue registration named by attr.User (PAs if each
// queue is contiguous, otherwise VQ with level-1 PBLE indices). The
// 256-byte Q2 buffer and the 256-byte host context share one allocation.
// The GSI QP is QP 1; others come from the bitmap. The host context is
// written in full, CREATE_QP issued (next state IDLE, MACVALID,
// CQNUMVALID), then the work-scheduler tree is extended for user priority
// 0 (GEN_2 dev->ws_add).
func (d *Device) CreateQP(pd *PD, attr QPInitAttr) (*QP, QPCreateResp, error) {
	var resp QPCreateResp
	if err := d.alive(); err != nil {
		return nil, resp, err
	}
	if err := d.validateQPAttrs(&attr); err != nil {
		return nil, resp, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() || attr.SendCQ == nil || attr.RecvCQ == nil ||
		attr.SendCQ.d != d || attr.RecvCQ.d != d || (attr.SRQ != nil && attr.SRQ.d != d) {
		return nil, resp, syscall.EINVAL
	}
	q := &QP{d: d, typ: attr.Type, pd: pd, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, cap: attr.Cap,
		sigAll: attr.SignalAll, eventHandler: attr.EventHandler, hwState: qpHWStateInvalid, ibState: QPSReset}
	q.ctx.PushIdx = invalidPushIdx
	if attr.SRQ != nil {
		// irdma_create_qp with init_attr->srq: qp_uk.srq_uk, and the GEN_3
		// context's USE_SRQ / SRQ_ID (irdma_sc_qp_setctx_roce_gen_3).
		q.srq = attr.SRQ
		q.ctx.UseSRQ, q.ctx.SRQID = true, attr.SRQ.id
	}
	q.hwType = qpTypeRoCEUD
	q.qpCaps = capSendWithImm | capRoCE | capPushMode
	if attr.Type == QPTypeRC {
		q.hwType = qpTypeRoCERC
		q.qpCaps |= capWriteWithImm
	}
	var err error
	if q.q2ctx, err = d.allocDMA(q2BufSize+qpCtxSize, 256, "qp-q2ctx"); err != nil {
		return nil, resp, err
	}
	q.ctxPA = q.q2ctx.pa + q2BufSize
	fail := func(err error) (*QP, QPCreateResp, error) {
		d.qpFreeRsrc(q)
		return nil, resp, err
	}
	if attr.Type == QPTypeGSI {
		d.tblMu.RLock()
		_, busy := d.qpTable[1]
		d.tblMu.RUnlock()
		if busy {
			return fail(syscall.EBUSY)
		}
		q.id = 1
	} else {
		if q.id, err = d.qpIDs.alloc(-1); err != nil {
			return fail(err)
		}
	}
	// Sizing: irdma_setup_kmode_qp's rules, which user space computes
	// the same way (irdma_uk_calc_depth_shift_sq / _rq).
	q.sizes, err = uk.KernelQPSizes(uk.LimitsFrom(d.prof), uk.QPCap{
		MaxSendWR: attr.Cap.MaxSendWR, MaxRecvWR: attr.Cap.MaxRecvWR, MaxSendSGE: attr.Cap.MaxSendSGE,
		MaxRecvSGE: attr.Cap.MaxRecvSGE, MaxInlineData: attr.Cap.MaxInlineData,
	})
	if err != nil {
		return fail(syscall.EINVAL)
	}
	if attr.User != nil {
		q.user = true
		uc := attr.User.Ctx
		if uc == nil || uc.d != d {
			return fail(syscall.EINVAL)
		}
		q.uctx = uc
		q.ctx.QPComplCtx = attr.User.UserComplCtx
		if attr.User.UserWQEBufs != 0 {
			mr := uc.getPBL(attr.User.UserWQEBufs, MemRegQP)
			if mr == nil {
				return fail(syscall.ENODATA)
			}
			// irdma_setup_virt_qp
			q.shadowPA = mr.shadow
			if mr.pblAllocated {
				q.virtual = true
				q.ctx.SQPA, q.ctx.RQPA = uint64(mr.sqPBLIdx), uint64(mr.rqPBLIdx)
			} else {
				q.ctx.SQPA, q.ctx.RQPA = mr.qAddr, mr.rqAddr
			}
		}
		resp.ActualSQSize, resp.ActualRQSize = attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR
	} else {
		q.ctx.QPComplCtx = qpCtxTag | uint64(q.id)
		s := q.sizes
		size := int(roundUp(uint64(s.SQDepth+s.RQDepth)*qpWQEMinSize+shadowAreaSize, 256))
		if q.kmem, err = d.allocDMA(size, 256, fmt.Sprintf("qp-%d", q.id)); err != nil {
			return fail(err)
		}
		buf := q.kmem.r.Bytes()
		sqEnd := int(s.SQDepth) * qpWQEMinSize
		rqEnd := sqEnd + int(s.RQDepth)*qpWQEMinSize
		q.ctx.SQPA = q.kmem.pa
		q.ctx.RQPA = q.kmem.pa + uint64(sqEnd)
		q.shadowPA = q.kmem.pa + uint64(rqEnd)
		ukt := uk.QPTypeUD
		if q.hwType == qpTypeRoCERC {
			ukt = uk.QPTypeRC
		}
		q.ukqp, err = uk.NewQP(uk.QPConfig{
			Limits: uk.LimitsFrom(d.ukProfile()), ID: q.id, Type: ukt,
			SQ: buf[:sqEnd], SQShift: s.SQShift, RQ: buf[sqEnd:rqEnd], RQShift: s.RQShift,
			Shadow: buf[rqEnd : rqEnd+shadowAreaSize], MaxSQFragCnt: int(attr.Cap.MaxSendSGE),
			MaxRQFragCnt: int(attr.Cap.MaxRecvSGE), MaxInlineData: int(attr.Cap.MaxInlineData),
			SignalAll: attr.SignalAll, SRQ: q.srqUK(),
		})
		if err != nil {
			return fail(err)
		}
		q.cap.MaxSendWR, q.cap.MaxRecvWR = s.MaxSendWR, s.MaxRecvWR
	}
	q.ctx.RQWQESize = q.sizes.RQShift
	q.ctx.HWSQSize = uint8(encodedWQSize(q.sizes.SQDepth))
	q.ctx.HWRQSize = uint8(encodedWQSize(q.sizes.RQDepth))
	// irdma_create_qp as upstream has it since the GEN_3 series ("RDMA/irdma:
	// Add GEN3 virtual QP1 support", 2024; before it, this came after
	// CREATE_QP and the create context carried no QS handle): dev->ws_add
	// for priority 0, then irdma_qp_add_qos, before the context is filled,
	// so CREATE_QP's context names the queue set. Another program creating
	// or destroying a QP at the same time meets us in the QoS table, which
	// qpJoinQoS reads and writes under its lock; a failure below leaves it
	// again in qpFreeRsrc.
	if err := d.qpJoinQoS(q); err != nil {
		return fail(syscall.EINVAL)
	}
	d.fillRoCECtx(q)
	q.writeCtx()
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildCreateQP(qpWQEInfo{QPID: q.id, QPType: q.hwType, CtxPA: q.ctxPA, ShadowPA: q.shadowPA,
			NextState: qpHWStateIdle, MACValid: true, CQNumValid: true, VirtualMap: q.virtual}), nil
	}); err != nil {
		return fail(err)
	}
	if q.srq != nil {
		if err := q.srq.bindQP(); err != nil {
			_ = d.destroyQPCmd(q)
			return fail(err)
		}
	}
	d.tblMu.Lock()
	d.qpTable[q.id] = q
	d.tblMu.Unlock()
	pd.users.Add(1)
	q.sendCQ.qps.Add(1)
	q.recvCQ.qps.Add(1)
	if q.ukqp != nil {
		q.sendCQ.bindQP(q.ctx.QPComplCtx, q.ukqp)
		if q.recvCQ != q.sendCQ {
			q.recvCQ.bindQP(q.ctx.QPComplCtx, q.ukqp)
		}
	}
	resp.QPID = q.id
	resp.QPCaps = q.qpCaps
	resp.PushIdx = invalidPushIdx
	return q, resp, nil
}

// ukProfile is the profile with uk_attrs after the feature query (the
// atomics bit comes from firmware).
func (d *Device) ukProfile() profile.Profile {
	p := d.prof
	p.UK = d.ukAttrs
	return p
}

// fillRoCECtx is verbs.c:irdma_roce_fill_and_set_qpctx_info: MSS from
// the netdev MTU (rounded to an IB MTU), cwnd, retry and RNR thresholds
// 2, UDP ports 0xC000 → 4791, the netdev MAC, read/write/bind enabled,
// RTOMIN 5, ACK credits, IRD/ORD at the hardware maxima, and for kernel
// QPs the privileged, fast-register and UD-privileged-CQ bits.
func (d *Device) fillRoCECtx(q *QP) {
	c := &q.ctx
	c.SndMSS = mtuEnumToInt(mtuIntToEnum(d.netdev.MTU()))
	c.CWnd = roceCWndDefault
	c.RexmitThresh = 2
	c.RNRNakThresh = 2
	c.SrcPort = roceSrcPortMin
	c.DstPort = roceV2UDPDPort
	c.MAC = d.mac()
	c.IsQP1 = q.typ == QPTypeGSI && q.id != 1
	c.RdEn, c.WrRdRespEn, c.BindEn = true, true, true
	c.RTOMin = 5
	c.AckCredits = roceAckCredsDflt
	c.IRDSize = d.prof.Limits.MaxIRD
	c.ORDSize = uint8(min(d.prof.Limits.MaxORD, 255))
	if !q.user {
		c.PrivModeEn, c.FastRegEn, c.UDPrivCQEn = true, true, true
	}
	c.PDID = q.pd.id
	c.PKey = defaultPKey
	c.SendCQ = q.sendCQ.id
	c.RecvCQ = q.recvCQ.id
	// The QS handle is already in the context: qpJoinQoS put it there
	// under the QoS table's lock (irdma_qp_add_qos).
	// Every QP counts into the function's statistics instance
	// (irdma_vsi_stats_init allocated it with MANAGE_STATS); GATHER_STATS
	// on that instance is what irdma_get_hw_stats reads.
	c.StatsIdx, c.StatsIdxValid = d.stats.instIdx, d.stats.inst
}

// writeCtx stores the host context (irdma_sc_qp_setctx_roce).
func (q *QP) writeCtx() {
	words := encodeRoCECtx(&q.ctx)
	for i, w := range words {
		q.d.store64(hostIOVA(int(q.ctxPA)+8*i), w)
	}
}

// destroyQPCmd is utils.c:irdma_cqp_qp_destroy_cmd.
func (d *Device) destroyQPCmd(q *QP) error {
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildDestroyQP(qpWQEInfo{QPID: q.id, QPType: q.hwType, CtxPA: q.ctxPA, ShadowPA: q.shadowPA}), nil
	})
	return err
}

// qpFreeRsrc is utils.c:irdma_free_qp_rsrc.
func (d *Device) qpFreeRsrc(q *QP) {
	d.qpLeaveQoS(q)
	if q.id > 2 {
		d.qpIDs.free(q.id)
	}
	d.freeDMA(&q.q2ctx)
	d.freeDMA(&q.kmem)
}

// DestroyQP is verbs.c:irdma_destroy_qp: a QP still in RTS is first moved
// to error (irdma_modify_qp_to_err, which also flushes); DESTROY_QP; the
// QP's CQEs still in its kernel CQs are cleaned (irdma_clean_cqes); then
// the resources go.
func (d *Device) DestroyQP(q *QP) error {
	if q == nil || q.d != d {
		return syscall.EINVAL
	}
	// A modify in flight (the AE work, the provider's shutdown flush) is
	// waited for, and none starts once destroyPending is set.
	q.modifyMu.Lock()
	defer q.modifyMu.Unlock()
	q.mu.Lock()
	if q.dead || q.destroyPending {
		q.mu.Unlock()
		return syscall.EINVAL
	}
	q.destroyPending = true
	hw := q.hwState
	if q.flushTimer != nil {
		q.flushTimer.Stop() // cancel_delayed_work_sync
	}
	q.mu.Unlock()
	if d.alive() == nil {
		if hw == qpHWStateRTS {
			_, _ = d.modifyQPLocked(q, &QPAttr{QPState: QPSErr}, QPAttrState, nil)
		}
		if err := d.destroyQPCmd(q); err != nil {
			d.log.Warn("DESTROY_QP failed", errField(err))
		}
	}
	d.mcastDetachAll(q)
	if q.ukqp != nil {
		q.sendCQ.cleanQP(q.ctx.QPComplCtx)
		if q.recvCQ != q.sendCQ {
			q.recvCQ.cleanQP(q.ctx.QPComplCtx)
		}
	}
	d.tblMu.Lock()
	if d.qpTable[q.id] == q {
		delete(d.qpTable, q.id)
	}
	d.tblMu.Unlock()
	q.mu.Lock()
	q.dead = true
	q.mu.Unlock()
	d.qpFreeRsrc(q)
	if q.srq != nil {
		q.srq.unbindQP()
	}
	q.pd.users.Add(-1)
	q.sendCQ.qps.Add(-1)
	q.recvCQ.qps.Add(-1)
	return nil
}

// QPAttrMask is ib_qp_attr_mask.
type QPAttrMask uint32

const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25

	// QPAttrStandardBits is IB_QP_ATTR_STANDARD_BITS (GENMASK(20, 0)).
	QPAttrStandardBits QPAttrMask = 1<<21 - 1
)

// MTU is ib_mtu.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// mtuIntToEnum is ib_mtu_int_to_enum.
func mtuIntToEnum(mtu int) MTU {
	switch {
	case mtu >= 4096:
		return MTU4096
	case mtu >= 2048:
		return MTU2048
	case mtu >= 1024:
		return MTU1024
	case mtu >= 512:
		return MTU512
	}
	return MTU256
}

// mtuEnumToInt is ib_mtu_enum_to_int (-1 for an invalid value → 0 here).
func mtuEnumToInt(m MTU) uint32 {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// QPAttr is ib_qp_attr (the fields RoCE uses).
type QPAttr struct {
	QPState          QPState
	CurQPState       QPState
	PathMTU          MTU
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	Cap              QPCap
	AH               AHAttr
	PKeyIndex        uint16
	EnSQDAsyncNotify bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
}

// QueryQP is verbs.c:irdma_query_qp: driver-cached values only, no CQP
// command.
func (d *Device) QueryQP(q *QP) (QPAttr, QPInitAttr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var a QPAttr
	a.QPState, a.CurQPState = q.ibState, q.ibState
	a.Cap = q.cap
	if q.ctx.WrRdRespEn {
		a.QPAccessFlags |= AccessLocalWrite | AccessRemoteWrite
	}
	if q.ctx.RdEn {
		a.QPAccessFlags |= AccessRemoteRead
	}
	if q.ctx.BindEn {
		a.QPAccessFlags |= AccessMWBind
	}
	if q.ctx.RemoteAtomicsEn { // irdma_get_ib_acc_flags
		a.QPAccessFlags |= AccessRemoteAtomic
	}
	a.PortNum = 1
	a.PathMTU = mtuIntToEnum(int(q.ctx.SndMSS))
	a.QKey = q.ctx.QKey
	a.RQPSN = q.ctx.EPSN
	a.SQPSN = q.ctx.PSNNxt
	a.DestQPNum = q.ctx.DestQP
	a.PKeyIndex = q.ctx.PKey // irdma reports p_key in pkey_index
	a.RetryCnt = q.ctx.RexmitThresh
	a.RNRRetry = q.ctx.RNRNakThresh
	a.MinRNRTimer = q.ctx.MinRNRTimer // irdma_query_qp: udp_info.min_rnr_timer
	a.MaxRdAtomic = q.ctx.ORDSize
	a.MaxDestRdAtomic = uint8(min(q.ctx.IRDSize, 255))
	if q.avValid {
		a.AH = q.av
	}
	init := QPInitAttr{Type: q.typ, SendCQ: q.sendCQ, RecvCQ: q.recvCQ, Cap: q.cap, SignalAll: q.sigAll,
		EventHandler: q.eventHandler}
	return a, init
}

// srqUK is the kernel SRQ a kernel QP's receives come from (nil: its own RQ).
func (q *QP) srqUK() *uk.SRQ {
	if q.srq == nil {
		return nil
	}
	return q.srq.uksrq
}

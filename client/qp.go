package client

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// QPType is ibv_qp_type (RC and UD are what irdma offers).
type QPType uint8

const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// QPState is ibv_qp_state.
type QPState uint8

const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSSQD   QPState = 4
	QPSSQE   QPState = 5
	QPSErr   QPState = 6
)

func (s QPState) String() string {
	names := [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// QPAttrMask is ibv_qp_attr_mask.
type QPAttrMask uint32

const (
	AttrState           QPAttrMask = 1 << 0
	AttrCurState        QPAttrMask = 1 << 1
	AttrEnSQDAsync      QPAttrMask = 1 << 2
	AttrAccessFlags     QPAttrMask = 1 << 3
	AttrPKeyIndex       QPAttrMask = 1 << 4
	AttrPort            QPAttrMask = 1 << 5
	AttrQKey            QPAttrMask = 1 << 6
	AttrAV              QPAttrMask = 1 << 7
	AttrPathMTU         QPAttrMask = 1 << 8
	AttrTimeout         QPAttrMask = 1 << 9
	AttrRetryCnt        QPAttrMask = 1 << 10
	AttrRNRRetry        QPAttrMask = 1 << 11
	AttrRQPSN           QPAttrMask = 1 << 12
	AttrMaxQPRdAtomic   QPAttrMask = 1 << 13
	AttrAltPath         QPAttrMask = 1 << 14
	AttrMinRNRTimer     QPAttrMask = 1 << 15
	AttrSQPSN           QPAttrMask = 1 << 16
	AttrMaxDestRdAtomic QPAttrMask = 1 << 17
	AttrPathMigState    QPAttrMask = 1 << 18
	AttrCap             QPAttrMask = 1 << 19
	AttrDestQPN         QPAttrMask = 1 << 20
)

// AHAttr is ibv_ah_attr (RoCE: the GRH part is what matters).
type AHAttr struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     bool
	PortNum      uint8
}

// QPCapabilities is ibv_qp_cap.
type QPCapabilities struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// QPAttr is ibv_qp_attr.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      AccessFlags
	Cap              QPCapabilities
	AH               AHAttr
	PKeyIndex        uint16
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	SigAll           bool // from QUERY_QP
	EnSQDAsyncNotify uint8
}

// QPInitAttr is ibv_qp_init_attr.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	Cap            QPCapabilities
	Type           QPType
	SigAll         bool
}

// QP is a queue pair whose SQ, RQ and shadow area live in shared memory,
// written with driver/uk's builders.
type QP struct {
	pd      *PD
	handle  uint32
	uhandle uint64
	qpn     uint32
	typ     QPType
	sendCQ  *CQ
	recvCQ  *CQ
	buf     []byte
	bufMR   *MR
	compl   uint64 // user_compl_ctx: what CQEs carry in qword1
	uk      *uk.QP
	caps    uint32
	cap     QPCapabilities // what the caller can rely on

	state       atomic.Uint32 // ibv_qp.state as libibverbs tracks it
	asyncEvents atomic.Uint64
	gather      []byte       // inline gather scratch (under sendCQ.mu)
	kw          [1]uk.SendWR // the request being posted (under sendCQ.mu)
	destroyed   bool
	destroyMu   sync.Mutex
}

var complCtxSeq atomic.Uint64

// CreateQP is ibv_create_qp as libirdma 44 does it (irdma_ucreate_qp): the
// SQ and RQ depths and WQE shifts computed as irdma_get_sqdepth /
// irdma_get_rqdepth compute them (driver/uk sizing), SQ ‖ RQ ‖ 64-byte
// shadow area in one buffer registered with reg_type QP (sq_pages,
// rq_pages), then CREATE_QP with the ring sizes in WQEs and
// user_wqe_bufs / user_compl_ctx.
func (p *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	c := p.ctx
	lim := c.uctx.Limits
	if attr.Type != QPTypeRC && attr.Type != QPTypeUD {
		return nil, fmt.Errorf("client: QP type %d: %w", attr.Type, syscall.EOPNOTSUPP)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("client: QP without CQs: %w", syscall.EINVAL)
	}
	cp := attr.Cap
	if cp.MaxSendSGE > uint32(lim.MaxWQFrags) || cp.MaxRecvSGE > uint32(lim.MaxWQFrags) || cp.MaxInlineData > uint32(lim.MaxInline) {
		return nil, fmt.Errorf("client: QP caps %+v over the device's: %w", cp, syscall.EINVAL)
	}
	sqShift := uk.WQEShift(cp.MaxSendSGE+1, cp.MaxInlineData) // GEN_2 counts the immediate
	sqDepth, err := uk.SQDepth(lim, cp.MaxSendWR, sqShift)
	if err != nil {
		return nil, fmt.Errorf("client: SQ of %d WRs: %w", cp.MaxSendWR, syscall.EINVAL)
	}
	rqShift := uk.WQEShift(cp.MaxRecvSGE, 0)
	rqDepth, err := uk.RQDepth(lim, cp.MaxRecvWR, rqShift)
	if err != nil {
		return nil, fmt.Errorf("client: RQ of %d WRs: %w", cp.MaxRecvWR, syscall.EINVAL)
	}
	sqBytes := roundPage(int(sqDepth) * uk.QuantumSize)
	rqBytes := roundPage(int(rqDepth) * uk.QuantumSize)
	total := sqBytes + rqBytes + uk.ShadowAreaSize

	q := &QP{pd: p, typ: attr.Type, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, uhandle: c.nextHandle()}
	q.compl = complCtxSeq.Add(1) << 10 // non-zero: a zero context marks a destroyed QP's CQE
	fail := func(err error) (*QP, error) {
		if q.bufMR != nil {
			q.bufMR.Dereg()
		}
		if q.buf != nil {
			c.arena.free(q.buf)
		}
		c.mu.Lock()
		delete(c.qps, q.uhandle)
		c.mu.Unlock()
		return nil, err
	}
	if q.buf, err = c.arena.alloc(total); err != nil {
		return nil, err
	}
	if q.bufMR, err = p.regMR(addrOf(q.buf), uint64(total), AccessLocalWrite, memRegQP, 0, uint16(rqBytes/pageSize), uint16(sqBytes/pageSize)); err != nil {
		return fail(err)
	}
	sqSize, rqSize := sqDepth>>sqShift, rqDepth>>rqShift
	var core, udata wbuf
	core.u64(c.respAddr())
	core.u64(q.uhandle)
	core.u32(p.handle)
	core.u32(attr.SendCQ.handle)
	core.u32(attr.RecvCQ.handle)
	core.u32(0) // srq_handle
	core.u32(sqSize)
	core.u32(rqSize)
	core.u32(cp.MaxSendSGE)
	core.u32(cp.MaxRecvSGE)
	core.u32(cp.MaxInlineData)
	core.u8(b2u8(attr.SigAll))
	core.u8(uint8(attr.Type))
	core.u8(0) // is_srq
	core.u8(0)
	udata.u64(addrOf(q.buf))
	udata.u64(q.compl)
	n := createQPRespSize + irdmaCreateQPResp
	c.mu.Lock()
	c.qps[q.uhandle] = q
	c.mu.Unlock()
	r, err := c.run(legacyCmd(cmdCreateQP, core, udata, n), n)
	if err != nil {
		return fail(err)
	}
	q.handle, q.qpn = r.u32(0), r.u32(4)
	qpID := r.u32(32)
	actSQ, actRQ := r.u32(36), r.u32(40)
	q.caps = r.u32(52)
	// libirdma sizes its rings from actual_sq_size / actual_rq_size; they
	// must fit the memory registered above.
	if actSQ == 0 || actSQ<<sqShift > sqDepth || actRQ == 0 || actRQ<<rqShift > rqDepth {
		q.destroyCmd()
		return fail(fmt.Errorf("client: CREATE_QP answered ring sizes %d/%d for %d/%d: %w", actSQ, actRQ, sqSize, rqSize, syscall.EPROTO))
	}
	ukt := uk.QPTypeRC
	if attr.Type == QPTypeUD {
		ukt = uk.QPTypeUD
	}
	caps := uk.QPCaps(q.caps & uint32(uk.CapWriteWithImm|uk.CapSendWithImm))
	if caps == 0 {
		caps = uk.DefaultCaps(ukt)
	}
	sqEnd := int(actSQ<<sqShift) * uk.QuantumSize
	rqEnd := int(actRQ<<rqShift) * uk.QuantumSize
	q.uk, err = uk.NewQP(uk.QPConfig{
		Limits: lim, ID: qpID, Type: ukt, Caps: caps,
		SQ: q.buf[:sqEnd], SQShift: sqShift,
		RQ: q.buf[sqBytes : sqBytes+rqEnd], RQShift: rqShift,
		Shadow:       q.buf[sqBytes+rqBytes : sqBytes+rqBytes+uk.ShadowAreaSize],
		MaxSQFragCnt: int(cp.MaxSendSGE), MaxRQFragCnt: int(cp.MaxRecvSGE),
		MaxInlineData: int(cp.MaxInlineData), SignalAll: attr.SigAll,
	})
	if err != nil {
		q.destroyCmd()
		return fail(err)
	}
	if q.qpn == 0 {
		q.qpn = qpID
	}
	q.cap = QPCapabilities{
		MaxSendWR: (sqDepth - uk.SQReserve) >> sqShift, MaxRecvWR: (rqDepth - uk.RQReserve) >> rqShift,
		MaxSendSGE: cp.MaxSendSGE, MaxRecvSGE: cp.MaxRecvSGE, MaxInlineData: cp.MaxInlineData,
	}
	attr.SendCQ.bind(q.compl, q, true)
	if attr.RecvCQ != attr.SendCQ {
		attr.RecvCQ.bind(q.compl, q, false)
	}
	return q, nil
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// QPN is the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// Handle is the uverbs handle.
func (q *QP) Handle() uint32 { return q.handle }

// Type is the QP type.
func (q *QP) Type() QPType { return q.typ }

// Cap is what the QP was created with, as libirdma reports it back
// (max_send_wr/max_recv_wr are the usable depths).
func (q *QP) Cap() QPCapabilities { return q.cap }

// State is the state the last successful Modify set.
func (q *QP) State() QPState { return QPState(q.state.Load()) }

// AsyncEvents counts the asynchronous events received for this QP.
func (q *QP) AsyncEvents() uint64 { return q.asyncEvents.Load() }

func appendDest(w *wbuf, a *AHAttr) {
	w.bytes(a.DGID[:])
	w.u32(a.FlowLabel)
	w.u16(a.DLID)
	w.u16(0)
	w.u8(a.SGIDIndex)
	w.u8(a.HopLimit)
	w.u8(a.TrafficClass)
	w.u8(a.SL)
	w.u8(a.SrcPathBits)
	w.u8(a.StaticRate)
	w.u8(b2u8(a.IsGlobal))
	w.u8(a.PortNum)
}

// modifyCore is copy_modify_qp_fields: ib_uverbs_modify_qp with only the
// fields the mask names filled in.
func (q *QP) modifyCore(a *QPAttr, mask QPAttrMask) wbuf {
	var zero AHAttr
	dest := &zero
	if mask&AttrAV != 0 {
		dest = &a.AH
	}
	pick := func(m QPAttrMask, v uint32) uint32 {
		if mask&m != 0 {
			return v
		}
		return 0
	}
	pick8 := func(m QPAttrMask, v uint8) uint8 {
		if mask&m != 0 {
			return v
		}
		return 0
	}
	w := make(wbuf, 0, modifyQPSize)
	appendDest(&w, dest)
	appendDest(&w, &zero) // alt path: irdma has none
	w.u32(q.handle)
	w.u32(uint32(mask))
	w.u32(pick(AttrQKey, a.QKey))
	w.u32(pick(AttrRQPSN, a.RQPSN))
	w.u32(pick(AttrSQPSN, a.SQPSN))
	w.u32(pick(AttrDestQPN, a.DestQPN))
	w.u32(pick(AttrAccessFlags, uint32(a.AccessFlags)))
	w.u16(uint16(pick(AttrPKeyIndex, uint32(a.PKeyIndex))))
	w.u16(0) // alt_pkey_index
	w.u8(pick8(AttrState, uint8(a.State)))
	w.u8(pick8(AttrCurState, uint8(a.CurState)))
	w.u8(pick8(AttrPathMTU, uint8(a.PathMTU)))
	w.u8(0) // path_mig_state
	w.u8(pick8(AttrEnSQDAsync, a.EnSQDAsyncNotify))
	w.u8(pick8(AttrMaxQPRdAtomic, a.MaxRdAtomic))
	w.u8(pick8(AttrMaxDestRdAtomic, a.MaxDestRdAtomic))
	w.u8(pick8(AttrMinRNRTimer, a.MinRNRTimer))
	w.u8(pick8(AttrPort, a.PortNum))
	w.u8(pick8(AttrTimeout, a.Timeout))
	w.u8(pick8(AttrRetryCnt, a.RetryCnt))
	w.u8(pick8(AttrRNRRetry, a.RNRRetry))
	w.u8(0) // alt_port_num
	w.u8(0) // alt_timeout
	w.zero(2)
	return w
}

// Modify is ibv_modify_qp: the legacy MODIFY_QP (libirdma uses it when no
// push mode is offered).
func (q *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	if a == nil {
		return syscall.EINVAL
	}
	ctx := q.pd.ctx
	if _, err := ctx.run(legacyCmd(cmdModifyQP, q.modifyCore(a, mask), nil, 0), 0); err != nil {
		return err
	}
	if mask&AttrState != 0 {
		q.state.Store(uint32(a.State))
	}
	return nil
}

// issueFlush is irdma_issue_flush: the extended MODIFY_QP to ERR with
// irdma_modify_qp_req's sq_flush / rq_flush, which asks the device for
// flush completions of work posted to a QP already in error.
func (q *QP) issueFlush(sq, rq bool) {
	ctx := q.pd.ctx
	a := QPAttr{State: QPSErr}
	core := q.modifyCore(&a, AttrState)
	core.u32(0) // rate_limit
	core.u32(0)
	var udata wbuf
	udata.u8(b2u8(sq))
	udata.u8(b2u8(rq))
	udata.zero(6)
	ctx.run(exCmd(cmdModifyQP, ctx.respAddr(), core, udata, exModifyQPRespSize, 0), exModifyQPRespSize)
}

// Query is ibv_query_qp.
func (q *QP) Query(mask QPAttrMask) (QPAttr, error) {
	ctx := q.pd.ctx
	var core wbuf
	core.u64(ctx.respAddr())
	core.u32(q.handle)
	core.u32(uint32(mask))
	r, err := ctx.run(legacyCmd(cmdQueryQP, core, nil, queryQPRespSize), queryQPRespSize)
	if err != nil {
		return QPAttr{}, err
	}
	a := QPAttr{
		AH: AHAttr{
			DGID: r.gid(0), FlowLabel: r.u32(16), DLID: r.u16(20), SGIDIndex: r.u8(24), HopLimit: r.u8(25),
			TrafficClass: r.u8(26), SL: r.u8(27), SrcPathBits: r.u8(28), StaticRate: r.u8(29),
			IsGlobal: r.u8(30) != 0, PortNum: r.u8(31),
		},
		Cap: QPCapabilities{
			MaxSendWR: r.u32(64), MaxRecvWR: r.u32(68), MaxSendSGE: r.u32(72), MaxRecvSGE: r.u32(76),
			MaxInlineData: r.u32(80),
		},
		QKey: r.u32(84), RQPSN: r.u32(88), SQPSN: r.u32(92), DestQPN: r.u32(96),
		AccessFlags: AccessFlags(r.u32(100)), PKeyIndex: r.u16(104),
		State: QPState(r.u8(108)), CurState: QPState(r.u8(109)), PathMTU: MTU(r.u8(110)),
		SQDraining: r.u8(112), MaxRdAtomic: r.u8(113), MaxDestRdAtomic: r.u8(114), MinRNRTimer: r.u8(115),
		PortNum: r.u8(116), Timeout: r.u8(117), RetryCnt: r.u8(118), RNRRetry: r.u8(119),
		SigAll: r.u8(122) != 0,
	}
	return a, nil
}

func (q *QP) destroyCmd() (rbuf, error) {
	ctx := q.pd.ctx
	var core wbuf
	core.u64(ctx.respAddr())
	core.u32(q.handle)
	core.u32(0)
	return ctx.run(legacyCmd(cmdDestroyQP, core, nil, destroyQPRespSize), destroyQPRespSize)
}

// Destroy is ibv_destroy_qp (irdma_udestroy_qp): DESTROY_QP, DEREG_MR of
// the rings, then the CQs forget the QP and skip its unpolled CQEs.
func (q *QP) Destroy() error {
	q.destroyMu.Lock()
	defer q.destroyMu.Unlock()
	if q.destroyed {
		return nil
	}
	if _, err := q.destroyCmd(); err != nil {
		return err
	}
	q.destroyed = true
	ctx := q.pd.ctx
	q.bufMR.Dereg()
	q.sendCQ.unbind(q.compl, q)
	if q.recvCQ != q.sendCQ {
		q.recvCQ.unbind(q.compl, q)
	}
	ctx.arena.free(q.buf)
	ctx.mu.Lock()
	delete(ctx.qps, q.uhandle)
	ctx.mu.Unlock()
	return nil
}

// AttachMcast is ibv_attach_mcast (ibv_cmd_attach_mcast): the UD QP joins
// the multicast group of gid; lid is carried but means nothing on RoCE.
func (q *QP) AttachMcast(gid GID, lid uint16) error { return q.mcastCmd(cmdAttachMcast, gid, lid) }

// DetachMcast is ibv_detach_mcast: the QP leaves the group.
func (q *QP) DetachMcast(gid GID, lid uint16) error { return q.mcastCmd(cmdDetachMcast, gid, lid) }

// mcastCmd sends ib_uverbs_attach_mcast / ib_uverbs_detach_mcast (the same
// layout: gid, qp_handle, mlid, reserved), which have no response.
func (q *QP) mcastCmd(cmd uint32, gid GID, lid uint16) error {
	var core wbuf
	core.bytes(gid[:])
	core.u32(q.handle)
	core.u16(lid)
	core.u16(0)
	_, err := q.pd.ctx.run(legacyCmd(cmd, core, nil, 0), 0)
	return err
}

// SGE is ibv_sge.
type SGE = uk.SGE

// WROpcode is ibv_wr_opcode.
type WROpcode = uk.WROpcode

// Work request opcodes.
const (
	WRRDMAWrite         = uk.WRRDMAWrite
	WRRDMAWriteWithImm  = uk.WRRDMAWriteWithImm
	WRSend              = uk.WRSend
	WRSendWithImm       = uk.WRSendWithImm
	WRRDMARead          = uk.WRRDMARead
	WRAtomicCmpAndSwp   = uk.WRAtomicCmpAndSwp
	WRAtomicFetchAndAdd = uk.WRAtomicFetchAndAdd
	WRLocalInv          = uk.WRLocalInv
	WRSendWithInv       = uk.WRSendWithInv
)

// SendFlags are ibv_send_flags.
type SendFlags = uk.SendFlags

// Send flags.
const (
	SendFence     = uk.SendFence
	SendSignaled  = uk.SendSignaled
	SendSolicited = uk.SendSolicited
	SendInline    = uk.SendInline
)

// SendWR is ibv_send_wr (one request; PostSend takes a slice).
type SendWR struct {
	WrID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGList []SGE
	// ImmData is the immediate in host order (ibv_send_wr holds it
	// big-endian; libirdma converts with ntohl).
	ImmData        uint32
	InvalidateRKey uint32
	RemoteAddr     uint64 // RDMA and atomics
	RKey           uint32
	CompareAdd     uint64 // atomics
	Swap           uint64
	AH             *AH // UD
	RemoteQPN      uint32
	RemoteQKey     uint32
}

// RecvWR is ibv_recv_wr.
type RecvWR struct {
	WrID   uint64
	SGList []SGE
}

// PostSend is ibv_post_send: the WQEs are written into the SQ in shared
// memory by driver/uk's builders (the kernel-mode PostSend code), then the
// QP id is stored into the doorbell page — always, as libirdma does, even
// when a request failed. It returns how many requests were posted; on
// error wrs[n] is the bad one. Inline data is gathered from the SGEs,
// which must then point into memory from AllocBuffer.
func (q *QP) PostSend(wrs []SendWR) (int, error) {
	cq := q.sendCQ
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if q.destroyed {
		return 0, syscall.EINVAL
	}
	reflush := q.uk.SQHead() == q.uk.SQTail() && q.State() == QPSErr
	kw := q.kw[:]
	n := 0
	var err error
	for i := range wrs {
		w := &wrs[i]
		k := &kw[0]
		*k = uk.SendWR{
			WrID: w.WrID, Opcode: w.Opcode, Flags: w.Flags, SGList: w.SGList, ImmData: w.ImmData,
			InvalidateRKey: w.InvalidateRKey, RemoteAddr: w.RemoteAddr, RKey: w.RKey,
			CompareAdd: w.CompareAdd, Swap: w.Swap, RemoteQPN: w.RemoteQPN, RemoteQKey: w.RemoteQKey,
		}
		if q.typ == QPTypeUD {
			if w.AH == nil {
				err = fmt.Errorf("client: UD send without an AH: %w", syscall.EINVAL)
				break
			}
			k.AHID = w.AH.id
		}
		if w.Flags&SendInline != 0 && (w.Opcode == WRSend || w.Opcode == WRSendWithImm || w.Opcode == WRSendWithInv ||
			w.Opcode == WRRDMAWrite || w.Opcode == WRRDMAWriteWithImm) {
			if k.InlineData, err = q.gatherInline(w.SGList); err != nil {
				break
			}
		}
		if _, err = q.uk.PostSend(kw); err != nil {
			break
		}
		n++
	}
	q.pd.ctx.ringSQ(q.uk.ID())
	if reflush {
		q.issueFlush(true, false)
	}
	return n, err
}

// RingDoorbell stores the QP id into the doorbell page again: a hint that
// the SQ has work, for a program that waits on memory rather than on the
// CQ (whose polls retry doorbells by themselves; see CQ.Poll).
func (q *QP) RingDoorbell() { q.pd.ctx.ringSQ(q.uk.ID()) }

// gatherInline copies the SGEs' bytes for an inline WQE (irdma's
// irdma_copy_inline_data reads them through their addresses).
func (q *QP) gatherInline(sges []SGE) ([]byte, error) {
	q.gather = q.gather[:0]
	for _, s := range sges {
		b, ok := q.pd.ctx.arena.slice(s.Addr, int(s.Length))
		if !ok {
			return nil, fmt.Errorf("client: inline SGE %#x+%d outside shared memory: %w", s.Addr, s.Length, syscall.EFAULT)
		}
		q.gather = append(q.gather, b...)
	}
	return q.gather, nil
}

// PostRecv is ibv_post_recv: RQ WQEs in shared memory, no doorbell (the
// device finds them by their valid bits). It returns how many were posted;
// on error wrs[n] is the bad one.
func (q *QP) PostRecv(wrs []RecvWR) (int, error) {
	cq := q.recvCQ
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if q.destroyed {
		return 0, syscall.EINVAL
	}
	reflush := q.uk.RQHead() == q.uk.RQTail() && q.State() == QPSErr
	for i := range wrs {
		if err := q.uk.PostReceive(wrs[i].WrID, wrs[i].SGList); err != nil {
			return i, err
		}
		if reflush {
			q.issueFlush(false, true)
		}
	}
	return len(wrs), nil
}

// AH is an address handle for UD sends.
type AH struct {
	pd     *PD
	handle uint32
	id     uint32 // irdma ah_id: what UD WQEs carry
	Attr   AHAttr
}

// CreateAH is ibv_create_ah (irdma_ucreate_ah): the source GID is read
// first, as libirdma does, then CREATE_AH.
func (p *PD) CreateAH(a AHAttr) (*AH, error) {
	c := p.ctx
	if _, err := c.QueryGID(a.PortNum, int(a.SGIDIndex)); err != nil {
		return nil, err
	}
	var core wbuf
	core.u64(c.respAddr())
	core.u64(c.nextHandle())
	core.u32(p.handle)
	core.u32(0)
	core.bytes(a.DGID[:])
	core.u32(a.FlowLabel)
	core.u8(a.SGIDIndex)
	core.u8(a.HopLimit)
	core.u8(a.TrafficClass)
	core.u8(0)
	core.u16(a.DLID)
	core.u8(a.SL)
	core.u8(a.SrcPathBits)
	core.u8(a.StaticRate)
	core.u8(b2u8(a.IsGlobal))
	core.u8(a.PortNum)
	core.u8(0)
	n := createAHRespSize + irdmaCreateAHResp
	r, err := c.run(legacyCmd(cmdCreateAH, core, nil, n), n)
	if err != nil {
		return nil, err
	}
	return &AH{pd: p, handle: r.u32(0), id: r.u32(4), Attr: a}, nil
}

// ID is irdma's AH index.
func (ah *AH) ID() uint32 { return ah.id }

// Destroy is ibv_destroy_ah.
func (ah *AH) Destroy() error {
	var core wbuf
	core.u32(ah.handle)
	_, err := ah.pd.ctx.run(legacyCmd(cmdDestroyAH, core, nil, 0), 0)
	return err
}

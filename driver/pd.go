package driver

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// PD is a protection domain (irdma_pd).
type PD struct {
	d    *Device
	id   uint32
	user bool
	// unsafeGlobalRKey is IB_PD_UNSAFE_GLOBAL_RKEY: only such a PD may
	// register an all-memory (zero-length) MR (get_dma_mr).
	unsafeGlobalRKey bool
	users            atomic.Int32 // QPs, MRs, MWs, AHs using it
	dead             atomic.Bool
}

// ID is the PD number (the pd_id of irdma_alloc_pd_resp).
func (p *PD) ID() uint32 { return p.id }

// PDFlags are ib_pd_flags.
type PDFlags uint32

// PDUnsafeGlobalRKey is IB_PD_UNSAFE_GLOBAL_RKEY.
const PDUnsafeGlobalRKey PDFlags = 1 << 0

// AllocPD is verbs.c:irdma_alloc_pd: a PD id from the bitmap
// (max IRDMA_MAX_PDS, 0..2 reserved). user marks a PD allocated for a
// user context (irdma_sc_pd_init with the context's ABI version).
// -EOVERFLOW when all ids are taken.
func (d *Device) AllocPD(user bool, flags PDFlags) (*PD, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	id, err := d.pdIDs.alloc(-1)
	if err != nil {
		return nil, err
	}
	return &PD{d: d, id: id, user: user, unsafeGlobalRKey: flags&PDUnsafeGlobalRKey != 0}, nil
}

// DeallocPD is verbs.c:irdma_dealloc_pd. irdma itself frees the id
// unconditionally; the objects that hold a PD are tracked by the RDMA core
// (uobject refcounts), which refuses with -EBUSY while any remain. We do
// the core's check here.
func (d *Device) DeallocPD(p *PD) error {
	if p == nil || p.d != d {
		return syscall.EINVAL
	}
	if p.users.Load() != 0 {
		return syscall.EBUSY
	}
	if p.dead.Swap(true) {
		return syscall.EINVAL
	}
	d.pdIDs.free(p.id)
	return nil
}

// MemRegType is irdma_memreg_type (reg_type of irdma_mem_reg_req).
type MemRegType uint8

const (
	MemRegMem MemRegType = 0 // IRDMA_MEMREG_TYPE_MEM
	MemRegQP  MemRegType = 1 // IRDMA_MEMREG_TYPE_QP
	MemRegCQ  MemRegType = 2 // IRDMA_MEMREG_TYPE_CQ
	MemRegSRQ MemRegType = 3 // IRDMA_MEMREG_TYPE_SRQ (GEN_3): MemReg.RQPages ring pages, then the shadow page
)

// UContext is a user context (irdma_ucontext): the queue-memory
// registrations (reg_type QP and CQ) a later CREATE_QP / CREATE_CQ finds
// by their user virtual address (irdma_get_pbl), and the doorbell page.
type UContext struct {
	d      *Device
	ABIVer uint32
	mu     sync.Mutex // cq_reg_mem_list_lock, qp_reg_mem_list_lock
	qpMem  []*MR
	cqMem  []*MR
	srqMem []*MR // GEN_3: srq_reg_mem_list
	dead   bool
}

// UContextResp is what irdma_alloc_ucontext returns to user space
// (irdma_alloc_ucontext_resp, ABI 5).
type UContextResp struct {
	KernelVer      uint32
	FeatureFlags   uint64
	MaxHWWQFrags   uint32
	MaxHWReadSGEs  uint32
	MaxHWInline    uint32
	MaxHWRQQuanta  uint32
	MaxHWWQQuanta  uint32
	MaxHWSQChunk   uint32
	MaxHWCQSize    uint32
	MinHWCQSize    uint32
	HWRev          uint32
	MinHWWQSize    uint32
	DBBarOffset    uint64 // BAR0 offset of the user doorbell page (db_mmap_key's target)
	MaxHWSRQQuanta uint32
}

// abiVer is IRDMA_ABI_VER.
const abiVer = 5

// AllocUContext is verbs.c:irdma_alloc_ucontext: userspace_ver must be
// 4..5 (-EINVAL otherwise); legacy (libi40iw) contexts are GEN_1 only
// (-EOPNOTSUPP).
func (d *Device) AllocUContext(userspaceVer uint32, legacy bool) (*UContext, UContextResp, error) {
	if err := d.alive(); err != nil {
		return nil, UContextResp{}, err
	}
	if userspaceVer < 4 || userspaceVer > abiVer {
		return nil, UContextResp{}, syscall.EINVAL
	}
	if legacy {
		return nil, UContextResp{}, syscall.EOPNOTSUPP
	}
	u := d.ukAttrs
	resp := UContextResp{
		KernelVer:      abiVer,
		FeatureFlags:   u.FeatureFlags,
		MaxHWWQFrags:   u.MaxHWWQFrags,
		MaxHWReadSGEs:  u.MaxHWReadSGEs,
		MaxHWInline:    u.MaxHWInline,
		MaxHWRQQuanta:  u.MaxHWRQQuanta,
		MaxHWWQQuanta:  u.MaxHWWQQuanta,
		MaxHWSQChunk:   u.MaxHWSQChunk,
		MaxHWCQSize:    u.MaxHWCQSize,
		MinHWCQSize:    u.MinHWCQSize,
		HWRev:          uint32(u.HWRev),
		MinHWWQSize:    u.MinHWWQSize,
		DBBarOffset:    uint64(regs.DB_ADDR_OFFSET),
		MaxHWSRQQuanta: u.MaxHWSRQQuanta,
	}
	return &UContext{d: d, ABIVer: userspaceVer}, resp, nil
}

// DeallocUContext is verbs.c:irdma_dealloc_ucontext.
func (d *Device) DeallocUContext(u *UContext) error {
	if u == nil || u.d != d {
		return syscall.EINVAL
	}
	u.mu.Lock()
	u.dead = true
	u.mu.Unlock()
	return nil
}

// getPBL is verbs.c:irdma_get_pbl: take the registration of type t
// (QP, CQ or SRQ) whose user base is va off its list.
func (u *UContext) getPBL(va uint64, t MemRegType) *MR {
	u.mu.Lock()
	defer u.mu.Unlock()
	list := u.memList(t)
	for i, m := range *list {
		if m.userBase == va {
			*list = append((*list)[:i], (*list)[i+1:]...)
			m.onList = false
			return m
		}
	}
	return nil
}

// getSRQPBL is getPBL on the SRQ list (ucontext->srq_reg_mem_list).
func (u *UContext) getSRQPBL(va uint64) *MR { return u.getPBL(va, MemRegSRQ) }

// memList is the registration list of type t (u.mu held).
func (u *UContext) memList(t MemRegType) *[]*MR {
	switch t {
	case MemRegCQ:
		return &u.cqMem
	case MemRegSRQ:
		return &u.srqMem
	}
	return &u.qpMem
}

func (u *UContext) addPBL(m *MR, t MemRegType) {
	u.mu.Lock()
	defer u.mu.Unlock()
	l := u.memList(t)
	*l = append(*l, m)
	m.onList = true
}

// delMemlist is verbs.c:irdma_del_memlist.
func (u *UContext) delMemlist(m *MR) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, list := range []*[]*MR{&u.qpMem, &u.cqMem, &u.srqMem} {
		for i, x := range *list {
			if x == m {
				*list = append((*list)[:i], (*list)[i+1:]...)
				m.onList = false
				return
			}
		}
	}
}

// AsyncEventType is ib_event_type, for the events this driver raises.
type AsyncEventType uint8

const (
	EventCQErr            AsyncEventType = 0  // IB_EVENT_CQ_ERR
	EventQPFatal          AsyncEventType = 1  // IB_EVENT_QP_FATAL
	EventQPReqErr         AsyncEventType = 2  // IB_EVENT_QP_REQ_ERR
	EventQPAccessErr      AsyncEventType = 3  // IB_EVENT_QP_ACCESS_ERR
	EventSQDrained        AsyncEventType = 5  // IB_EVENT_SQ_DRAINED
	EventPortActive       AsyncEventType = 9  // IB_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // IB_EVENT_PORT_ERR
	EventQPLastWQEReached AsyncEventType = 16
)

// AsyncEvent is what an event handler receives: the ib_event type and the
// AE code that caused it.
type AsyncEvent struct {
	Type   AsyncEventType
	AECode uint16
}

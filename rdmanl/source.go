package rdmanl

// Source is what the responder asks about the device it answers for: one
// device (one daemon, one socket per program). Every method is called on
// the request's goroutine and returns a snapshot.
type Source interface {
	Device() Device
	// Port returns port n (1-based) of the device, ok false if none.
	Port(n uint32) (Port, bool)
	// Resources are the objects the device holds now (restrack).
	Resources() Resources
	// Counters are the port's hardware counters in the driver's order
	// (rdma_alloc_hw_stats_struct's names), or an error.
	Counters(port uint32) ([]Counter, error)
	// Chardev is a global character device by client name ("rdma_cm":
	// ucma_get_global_nl_info), ok false if the device serves none.
	Chardev(name string) (Chardev, bool)
	// CopyOnFork is what RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK reports.
	CopyOnFork() bool
}

// Device is what fill_dev_info and the uverbs client report.
type Device struct {
	Index        uint32 // ib_device.index
	Name         string
	Ports        uint32 // rdma_end_port
	CapFlags     uint64 // ib_device_attr.device_cap_flags
	FWVersion    string // ib_get_device_fw_str; omitted when empty
	NodeGUID     uint64 // host order, as be64_to_cpu gives it
	SysImageGUID uint64
	NodeType     uint8  // RDMA_NODE_IB_CA = 1
	Protocol     string // "roce"
	DriverID     uint32 // ib_device_ops.driver_id (RDMA_DRIVER_IRDMA)
	Uverbs       Chardev
}

// Chardev is a character device as ib_get_client_nl_info reports it.
type Chardev struct {
	Name         string
	Major, Minor uint32
	ABI          uint64
}

// Encode is the kernel's huge_encode_dev: minor's low byte, major, then
// the minor's upper bits from bit 20.
func (c Chardev) Encode() uint64 {
	return uint64(c.Minor&0xff) | uint64(c.Major&0xfff)<<8 | uint64(c.Minor&^0xff)<<12
}

// Port is what fill_port_info reports for a RoCE port (no LID, SM LID,
// LMC, subnet prefix: rdma_protocol_ib is false).
type Port struct {
	Index     uint32
	CapFlags  uint64 // port_cap_flags; reported for IB ports only
	State     uint8  // ib_port_state
	PhysState uint8  // ib_port_phys_state
	// Netdev and NetdevIndex are the port's net_device; Netdev "" when it
	// has none.
	Netdev      string
	NetdevIndex uint32
}

// Resources are the restrack entries of the device.
type Resources struct {
	QPs  []QP
	CQs  []CQ
	MRs  []MR
	PDs  []PD
	SRQs []SRQ
	Ctxs []Ctx
}

// Owner is who created a resource: a process (PID) or the kernel
// (KernName).
type Owner struct {
	PID      uint32
	KernName string
}

// QP is a restrack QP as fill_res_qp_entry reports it.
type QP struct {
	Owner
	Port         uint32 // 0: not set yet (no modify with IB_QP_PORT)
	LQPN         uint32
	RQPN         uint32 // RC/UC only
	RQPSN        uint32 // RC/UC only
	SQPSN        uint32
	PathMigState uint8 // RC/UC/XRC only
	Type         uint8 // ib_qp_type
	State        uint8 // ib_qp_state
	PDN          uint32
}

// CQ is a restrack CQ (fill_res_cq_entry).
type CQ struct {
	Owner
	CQN   uint32
	CQE   uint32
	Users uint64 // usecnt
	CtxN  uint32
}

// MR is a restrack MR (fill_res_mr_entry).
type MR struct {
	Owner
	MRN        uint32
	RKey, LKey uint32 // reported to CAP_NET_ADMIN only
	Length     uint64
	PDN        uint32
}

// PD is a restrack PD (fill_res_pd_entry).
type PD struct {
	Owner
	PDN          uint32
	LocalDMALKey uint32 // reported to CAP_NET_ADMIN only
	Users        uint64
	CtxN         uint32
}

// SRQ is a restrack SRQ (GEN_3; fill_res_srq_entry).
type SRQ struct {
	Owner
	SRQN uint32
	PDN  uint32
	QPNs []uint32 // the QPs bound to it, ascending
}

// Ctx is a user context (fill_res_ctx_entry).
type Ctx struct {
	Owner
	CtxN uint32
}

// Counter is one hardware counter.
type Counter struct {
	Name  string
	Value uint64
}

// IB QP types (enum ib_qp_type) and the driver id the responder reports.
const (
	QPTypeRC = 2
	QPTypeUC = 3
	QPTypeUD = 4
	// SRQTypeBasic is IB_SRQT_BASIC, the only type irdma creates.
	SRQTypeBasic = 0
	// DriverIRDMA is RDMA_DRIVER_IRDMA (enum rdma_driver_id): libibverbs
	// matches providers by it when netlink names the device.
	DriverIRDMA = 9 // = RDMA_DRIVER_I40IW
)

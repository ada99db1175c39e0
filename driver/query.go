package driver

import (
	"sync"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// DeviceAttr is ib_device_attr as irdma_query_device fills it.
type DeviceAttr struct {
	FWVer                 uint64
	SysImageGUID          [8]byte // EUI-64 of the netdev MAC (addrconf_addr_eui48)
	NodeGUID              [8]byte
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint64
	KernelCapLocalDMALKey bool // IBK_LOCAL_DMA_LKEY
	MaxSendSGE            uint32
	MaxRecvSGE            uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxMW                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxQPInitRdAtom       uint32
	AtomicCap             uint8 // ib_atomic_cap: 0 NONE, 1 HCA
	MaxAH                 uint32
	MaxSRQ                uint32 // GEN_3; 0 without SRQ
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxFastRegPageListLen uint32
	MaxPKeys              uint16
	TimestampMask         uint64
	HCACoreClock          uint64 // kHz; GEN_3 only
	PhysPortCnt           uint8
	NumCompVectors        int
}

// eui48 is addrconf_addr_eui48: the MAC as an EUI-64 with the U/L bit
// flipped.
func eui48(mac [6]byte) [8]byte {
	return [8]byte{mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
}

// QueryDevice is verbs.c:irdma_query_device: limits from the committed
// HMC (minus what is in use for QPs, CQs, MRs and PDs), the hardware
// attributes, and RC_RNR_NAK_GEN for RoCE. Atomics are reported
// (IB_ATOMIC_HCA) only when firmware allowed them (IRDMA_FEATURE_ATOMIC_OPS).
func (d *Device) QueryDevice() (DeviceAttr, error) {
	if err := d.alive(); err != nil {
		return DeviceAttr{}, err
	}
	p := d.prof
	mac := d.mac()
	a := DeviceAttr{
		FWVer:                 uint64(d.fwMajor)<<32 | uint64(d.fwMinor),
		SysImageGUID:          eui48(mac),
		NodeGUID:              eui48(mac),
		MaxMRSize:             p.Limits.MaxMRSize,
		PageSizeCap:           p.Limits.PageSizeCap,
		VendorID:              uint32(p.Identity.VendorID),
		VendorPartID:          uint32(p.Identity.DeviceID),
		HWVer:                 uint32(p.Identity.Revision),
		MaxQP:                 d.maxQP - d.qpIDs.inUse(),
		MaxQPWR:               p.Limits.MaxQPWR,
		DeviceCapFlags:        p.Limits.DeviceCapFlags, // MEM_WINDOW | MEM_MGT_EXTENSIONS | RC_RNR_NAK_GEN (+ MEM_WINDOW_TYPE_2B on GEN_3)
		KernelCapLocalDMALKey: true,
		MaxSendSGE:            d.ukAttrs.MaxHWWQFrags,
		MaxRecvSGE:            d.ukAttrs.MaxHWWQFrags,
		MaxSGERd:              d.ukAttrs.MaxHWReadSGEs,
		MaxCQ:                 d.maxCQ - d.cqIDs.inUse(),
		MaxCQE:                d.maxCQE - 1,
		MaxMR:                 d.maxMR - d.mrIDs.inUse(),
		MaxPD:                 d.maxPD - d.pdIDs.inUse(),
		MaxQPRdAtom:           p.Limits.MaxIRD,
		MaxQPInitRdAtom:       p.Limits.MaxORD,
		MaxAH:                 d.maxAH,
		MaxMcastGrp:           d.maxMCG,
		MaxMcastQPAttach:      maxMgsPerCtx,
		MaxTotalMcastQPAttach: d.maxQP * maxMgsPerCtx,
		MaxFastRegPageListLen: p.Limits.MaxFastRegPageListLen,
		MaxPKeys:              uint16(p.Limits.MaxPKeys),
		TimestampMask:         p.Limits.TimestampMask,
		HCACoreClock:          p.Limits.HCACoreClockKHz,
		PhysPortCnt:           1,
		NumCompVectors:        len(d.ceqs),
	}
	a.MaxMW = a.MaxMR
	if d.srqIDs != nil {
		// irdma_query_device: max_srq = max_srq − used_srqs, max_srq_wr
		// IRDMA_MAX_SRQ_WRS, max_srq_sge max_hw_wq_frags.
		a.MaxSRQ = d.prof.Limits.MaxSRQs - d.srqIDs.inUse()
		a.MaxSRQWR, a.MaxSRQSGE = p.Limits.MaxSRQWR, p.Limits.MaxSRQSGE
	}
	if d.ukAttrs.FeatureFlags&profile.FeatureAtomicOps != 0 {
		a.AtomicCap = 1
	}
	return a, nil
}

// Port states (ib_port_state, ib_port_phys_state).
const (
	PortDown          uint8 = 1
	PortActive        uint8 = 4
	PhysStateDisabled uint8 = 3
	PhysStateLinkUp   uint8 = 5
)

// Port capability flags irdma sets (IB_PORT_CM_SUP, IB_PORT_REINIT_SUP).
const (
	PortCapCMSup     uint32 = 1 << 16
	PortCapReinitSup uint32 = 1 << 18 // ib_verbs.h: 1<<19 is DEVICE_MGMT_SUP
)

// PortAttr is ib_port_attr as irdma_query_port fills it.
type PortAttr struct {
	State        uint8
	PhysState    uint8
	MaxMTU       MTU
	ActiveMTU    MTU
	GIDTblLen    uint32
	PKeyTblLen   uint16
	PortCapFlags uint32
	MaxMsgSz     uint32
	LID          uint16
	ActiveSpeed  uint16 // ib_port_speed
	ActiveWidth  uint8  // ib_port_width
	IPGIDs       bool
}

// QueryPort is verbs.c:irdma_query_port: max MTU 4096, the active MTU from
// the netdev MTU (ib_mtu_int_to_enum: 1500 → 1024), ACTIVE/LINK_UP when
// the link is up, speed and width from the link speed (ib_get_eth_speed),
// 32 GIDs, one P_Key, CM_SUP | REINIT_SUP.
func (d *Device) QueryPort(port uint8) (PortAttr, error) {
	if err := d.alive(); err != nil {
		return PortAttr{}, err
	}
	if port != 1 {
		return PortAttr{}, syscall.EINVAL
	}
	a := PortAttr{
		MaxMTU:       MTU4096,
		ActiveMTU:    mtuIntToEnum(d.netdev.MTU()),
		GIDTblLen:    d.prof.Limits.GIDTableLen,
		PKeyTblLen:   uint16(d.prof.Limits.MaxPKeys),
		PortCapFlags: PortCapCMSup | PortCapReinitSup,
		MaxMsgSz:     d.prof.Limits.MaxMsgSize,
		LID:          1,
		IPGIDs:       true,
	}
	if d.netdev.LinkUp() {
		a.State, a.PhysState = PortActive, PhysStateLinkUp
	} else {
		a.State, a.PhysState = PortDown, PhysStateDisabled
	}
	mbps := defaultLinkSpeedMb
	if s, ok := d.netdev.(NetdevSpeed); ok && s.SpeedMbps() > 0 {
		mbps = s.SpeedMbps()
	}
	a.ActiveSpeed, a.ActiveWidth = ethSpeed(mbps)
	return a, nil
}

// ethSpeed is ib_get_eth_speed's speed → (IB speed, width) table.
func ethSpeed(mbps int) (uint16, uint8) {
	const (
		sdr, ddr, fdr10, edr = 1, 2, 8, 32 // IB_SPEED_*
		w1x, w4x             = 1, 2        // IB_WIDTH_*
	)
	switch {
	case mbps <= 1000:
		return sdr, w1x
	case mbps <= 10000:
		return fdr10, w1x
	case mbps <= 20000:
		return ddr, w4x
	case mbps <= 25000:
		return edr, w1x
	case mbps <= 40000:
		return fdr10, w4x
	}
	return edr, w4x
}

// UKAttrs returns the uk_attrs after the feature query.
func (d *Device) UKAttrs() profile.UKAttrs { return d.ukAttrs }

// FWVersion is the firmware version from QUERY_RDMA_FEATURES (FW_INFO).
func (d *Device) FWVersion() (major, minor uint16) { return d.fwMajor, d.fwMinor }

// NumCompVectors is ibdev.num_comp_vectors: the number of CEQs.
func (d *Device) NumCompVectors() int { return len(d.ceqs) }

// PortEvent is verbs.c:irdma_port_ibevent: the event a link change
// raises (the daemon calls it from netlink).
func (d *Device) PortEvent() AsyncEvent {
	if d.netdev.LinkUp() {
		return AsyncEvent{Type: EventPortActive}
	}
	return AsyncEvent{Type: EventPortErr}
}

// destroyAllObjects releases what the consumer left behind at Close, in
// the order the RDMA core's uobject cleanup uses: QPs, AHs and multicast,
// MRs/MWs are the consumer's; here QPs and CQs the driver tracks.
func (d *Device) destroyAllObjects() {
	for _, q := range tableSnapshot(&d.tblMu, d.qpTable) {
		_ = d.DestroyQP(q)
	}
	d.waitWork()
	for _, s := range tableSnapshot(&d.tblMu, d.srqTable) {
		_ = d.DestroySRQ(s)
	}
	for _, c := range tableSnapshot(&d.tblMu, d.cqTable) {
		_, _, _ = d.DestroyCQ(c)
	}
}

// tableSnapshot copies the values of one of the device's object tables
// under its read lock, so that they can be destroyed without it.
func tableSnapshot[K comparable, V any](mu *sync.RWMutex, m map[K]V) []V {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

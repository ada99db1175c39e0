// Package profile holds what differs between irdma hardware generations, as
// one value per generation: identity, the capabilities the driver reports to
// user space (uk_attrs), device limits, queue-entry sizes, field widths that
// moved between generations, and the register layout.
//
// The device model and the driver half read these values instead of
// testing the generation, so GEN_3 becomes a second value rather than
// conditionals through the model ("emu/profile" in docs/architecture.md).
// GEN2 returns the default (E810), GEN3 the Intel IPU E2100; ByName picks
// one by its command-line name.
//
// Every value cites its source, the driver symbol; docs/hw-datapath.md
// ("Generations", "GEN_2 capabilities") and docs/hw-controlpath.md ("GEN_2
// limits", "Registers", "Version differences") record them.
package profile

import (
	"errors"
	"fmt"

	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// Generation is the hardware revision the driver reports as hw_rev
// (irdma.h enum irdma_vers).
type Generation uint8

const (
	Gen1 Generation = 1 // X722, i40iw: iWARP only
	Gen2 Generation = 2 // E810, icrdma: iWARP or RoCEv2
	Gen3 Generation = 3 // Intel IPU E2100, ig3rdma (GEN3)
)

func (g Generation) String() string {
	switch g {
	case Gen1, Gen2, Gen3:
		return fmt.Sprintf("GEN_%d", uint8(g))
	}
	return fmt.Sprintf("Generation(%d)", uint8(g))
}

// Feature flags of uk_attrs.feature_flags (rdma-core/kernel user.h enum
// irdma_feature_flags; docs/hw-datapath.md "GEN_2 capabilities").
const (
	FeatureRTSAE           uint64 = 0x1   // IRDMA_FEATURE_RTS_AE
	FeatureCQResize        uint64 = 0x2   // IRDMA_FEATURE_CQ_RESIZE
	Feature64ByteCQE       uint64 = 0x20  // IRDMA_FEATURE_64_BYTE_CQE
	FeatureAtomicOps       uint64 = 0x40  // IRDMA_FEATURE_ATOMIC_OPS
	FeatureSRQ             uint64 = 0x80  // IRDMA_FEATURE_SRQ
	FeatureCQETimestamping uint64 = 0x100 // IRDMA_FEATURE_CQE_TIMESTAMPING
)

// Device capability flags as uverbs reports them (ib_user_verbs.h enum
// ib_uverbs_device_cap_flags), for ibv_query_device.
const (
	DeviceRCRNRNAKGen     uint64 = 1 << 12 // IB_UVERBS_DEVICE_RC_RNR_NAK_GEN
	DeviceMemWindow       uint64 = 1 << 17 // IB_UVERBS_DEVICE_MEM_WINDOW
	DeviceMemMgtExtension uint64 = 1 << 21 // IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS
	DeviceMemWindowType2B uint64 = 1 << 24 // IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B
)

// Page sizes for page_size_cap.
const (
	Page4K uint64 = 1 << 12
	Page2M uint64 = 1 << 21
	Page1G uint64 = 1 << 30
)

// Identity is what identifies the PCI function and what ibv_devinfo shows.
type Identity struct {
	VendorID          uint16 // PCI vendor; ibv_devinfo vendor_id (irdma_query_device: pcidev->vendor)
	DeviceID          uint16 // PCI device; ibv_devinfo vendor_part_id (pcidev->device)
	SubsystemVendorID uint16 // modalias "sv" field
	SubsystemID       uint16 // modalias "sd" field
	Revision          uint8  // PCI revision; ibv_devinfo hw_ver (pcidev->revision)
	FWMajor, FWMinor  uint16 // fw_ver = major<<32 | minor (irdma_query_device; FW_INFO feature)
}

// UKAttrs are the capabilities the kernel driver passes to user space in
// the GET_CONTEXT response (irdma_alloc_ucontext → struct
// irdma_alloc_ucontext_resp; kernel struct irdma_uk_attrs).
type UKAttrs struct {
	HWRev          Generation // hw_rev
	FeatureFlags   uint64     // feature_flags (Feature*)
	MaxHWWQFrags   uint32     // max_hw_wq_frags: SGEs per SQ/RQ WQE
	MaxHWReadSGEs  uint32     // max_hw_read_sges
	MaxHWInline    uint32     // max_hw_inline: bytes of inline data
	MaxHWRQQuanta  uint32     // max_hw_rq_quanta
	MaxHWWQQuanta  uint32     // max_hw_wq_quanta
	MinHWCQSize    uint32     // min_hw_cq_size
	MaxHWCQSize    uint32     // max_hw_cq_size
	MaxHWSQChunk   uint32     // max_hw_sq_chunk: max quanta per WR, NOP-pad boundary
	MinHWWQSize    uint32     // min_hw_wq_size: WQEs
	MaxHWSRQQuanta uint32     // max_hw_srq_quanta (0: no SRQ)
}

// Limits are the device limits (docs/hw-controlpath.md "GEN_2 limits"). The
// QP, CQ, MR and AH counts the driver actually uses come from the HMC object
// counts that QUERY_FPM_VAL returns, which emu/hmc chooses within the ID
// spaces below (docs/hmc.md).
type Limits struct {
	MaxQPID               uint32 // QP ids < MaxQPID (IRDMA_MAX_IW_QP_ID + 1)
	MaxCQID               uint32 // CQ ids < MaxCQID (IRDMA_MAX_CQID + 1)
	MaxPDs                uint32 // max_pd (IRDMA_MAX_PDS)
	MaxCEQs               uint32 // CEQ ids < MaxCEQs (IRDMA_CEQ_MAX_COUNT = IRDMA_MAX_CEQID + 1)
	MaxCEQSize            uint32 // CEQ entries 1..MaxCEQSize (IRDMA_MAX_CEQ_ENTRIES)
	MaxAEQSize            uint32 // AEQ entries 1..MaxAEQSize (IRDMA_MAX_AEQ_ENTRIES)
	MaxQPWR               uint32 // max_qp_wr = (max_hw_wq_quanta − 258) / max_hw_sq_chunk (IRDMA_MAX_QP_WRS)
	MaxCQE                uint32 // max_cqe reported = IRDMA_MAX_CQ_SIZE − 1 (irdma_query_device)
	MaxSGE                uint32 // max_send_sge = max_recv_sge (= max_hw_wq_frags)
	MaxSGERd              uint32 // max_sge_rd (= max_hw_read_sges)
	MaxInline             uint32 // max inline bytes (IRDMA_MAX_INLINE_DATA_SIZE)
	MaxIRD                uint32 // max_qp_rd_atom (max_hw_ird)
	MaxORD                uint32 // max_qp_init_rd_atom (max_hw_ord)
	MaxMRSize             uint64 // max_mr_size (IRDMA_MAX_MR_SIZE)
	MaxMsgSize            uint32 // max message size (IRDMA_MAX_OUTBOUND/INBOUND_MSG_SIZE)
	PageSizeCap           uint64 // page_size_cap (Page*)
	MaxFastRegPageListLen uint32 // max_fast_reg_page_list_len (IRDMA_MAX_PAGES_PER_FMR)
	MaxMcastQPAttach      uint32 // max_mcast_qp_attach (IRDMA_MAX_MGS_PER_CTX)
	MaxPKeys              uint32 // max_pkeys, pkey_tbl_len (IRDMA_PKEY_TBL_SZ)
	GIDTableLen           uint32 // gid_tbl_len for RoCE (irdma_query_port)
	MinMTU, MaxMTU        uint32 // path MTU range in bytes (IB_MTU_256 … max_mtu IB_MTU_4096)
	TimestampMask         uint64 // timestamp_mask (HCA_CLOCK_TIMESTAMP_MASK)
	// HCACoreClockKHz is hca_core_clock: the rate of the clock the device
	// writes into CQEs (IRDMA_FEATURE_CQE_TIMESTAMPING); 0 without one.
	HCACoreClockKHz uint64
	DeviceCapFlags  uint64 // device_cap_flags for RoCE (Device*)
	PushPages       uint32 // max_hw_device_pages; the emulator declines push pages anyway
	StatsInstances  uint32 // max_stat_inst (ICRDMA_MAX_STATS_COUNT)
	// SRQs (GEN_3; all 0 without SRQ): the SRQ id space (the HMC SRQ
	// object count), max_srq_wr and max_srq_sge of irdma_query_device.
	MaxSRQs   uint32
	MaxSRQWR  uint32
	MaxSRQSGE uint32
}

// Queues are the sizes and geometry of the rings the device reads and
// writes.
type Queues struct {
	WQEQuantum       uint32 // SQ/RQ WQE quantum, bytes (IRDMA_QP_WQE_MIN_SIZE)
	CQESize          uint32 // CQE bytes (struct irdma_cqe)
	CQEExtNextSlot   bool   // extended CQE (EXTCQE) occupies the next 32-byte slot (GEN_2) rather than bytes 32–63 of a 64-byte CQE (GEN_3)
	PadFragCounted   bool   // the pad fragment counts in ADDFRAGCNT (GEN_2 yes, GEN_3 no)
	HWFlushPerWQE    bool   // hardware writes one flush CQE per WQE (GEN_3) rather than one per queue that software expands (GEN_1/2)
	CQPWQESize       uint32 // CQP WQE bytes (IRDMA_CQP_WQE_SIZE × 8)
	CQPMaxSize       uint32 // CQP ring WQEs the driver uses (IRDMA_CQP_SW_SQSIZE_2048)
	CQPHWMajorVer    uint32 // HW_MAJVER in the CQP host context (irdma_create_cqp)
	CCQSize          uint32 // CCQ entries (IW_CCQ_SIZE)
	CQPAlign         uint64 // CQP ring alignment (IRDMA_CQP_ALIGNMENT)
	CQ0Align         uint64 // CCQ ring alignment (IRDMA_CQ0_ALIGNMENT)
	ShadowAreaSize   uint32 // QP/CQ shadow area bytes (IRDMA_SHADOW_AREA_SIZE × 8)
	QueryFPMBufSizes []int  // QUERY/COMMIT_FPM buffer sizes kernels use (user.h)
}

// Field is a bit field of a 64-bit word: Width bits starting at Shift.
type Field struct {
	Shift, Width uint8
}

// Mask returns the field's mask in its word.
func (f Field) Mask() uint64 {
	if f.Width == 0 || f.Shift >= 64 {
		return 0
	}
	if f.Width >= 64 {
		return ^uint64(0) << f.Shift
	}
	return (uint64(1)<<f.Width - 1) << f.Shift
}

// Get extracts the field from w.
func (f Field) Get(w uint64) uint64 {
	if f.Shift >= 64 {
		return 0
	}
	return (w & f.Mask()) >> f.Shift
}

// Prep places x in the field; bits that do not fit are dropped.
func (f Field) Prep(x uint64) uint64 {
	if f.Shift >= 64 {
		return 0
	}
	return (x << f.Shift) & f.Mask()
}

// Fields are the per-device field layouts the driver reads through
// dev->hw_masks / hw_shifts (icrdma_hw.c icrdma_masks[]/icrdma_shifts[];
// irdma.h enum irdma_masks has exactly these six; docs/hw-controlpath.md
// "Per-device field masks"), plus the wider fields that moved between
// generations.
type Fields struct {
	CCQPStatusDone Field // CCQPSTATUS CCQP_DONE
	CCQPStatusErr  Field // CCQPSTATUS CCQP_ERR
	STagPDID       Field // CQP STag WQEs qword1 PD id (CQPSQ_STAG_PDID)
	CQCEQID        Field // CQP CQ WQEs header CEQ id (CQPSQ_CQ_CEQID)
	CQID           Field // CQP CQ WQEs header CQ id (CQPSQ_CQ_CQID)
	CommitFPMCQCnt Field // COMMIT_FPM_VAL buffer CQ count (COMMIT_FPM_CQCNT)
	AHID           Field // UD SQ WQE header AH index (IRDMAQPSQ_AHID)
}

// Profile is everything generation-specific the model and the driver need.
// It is a plain value: copy it, adjust it (WithAtomics), Validate it.
type Profile struct {
	Name     string     // "E810"
	Gen      Generation // hw_rev
	Identity Identity
	UK       UKAttrs
	Limits   Limits
	Queues   Queues
	Fields   Fields
	Regs     regs.Layout // the driver's hw_regs[] for this generation
	SRQ      bool        // shared receive queues exist (IRDMA_FEATURE_SRQ)
	// Atomics: RDMA FetchAdd and CmpSwap are offered (IRDMA_FEATURE_ATOMIC_OPS,
	// set by irdma_get_rdma_features only when firmware sets
	// IRDMA_ATOMICS_ALLOWED_BIT). Change it with WithAtomics so that the
	// feature flag follows.
	Atomics bool
}

// WithAtomics returns p with RDMA atomics enabled or disabled, keeping
// UK.FeatureFlags consistent.
func (p Profile) WithAtomics(on bool) Profile {
	p.Atomics = on
	if on {
		p.UK.FeatureFlags |= FeatureAtomicOps
	} else {
		p.UK.FeatureFlags &^= FeatureAtomicOps
	}
	return p
}

// Validate checks the profile's internal consistency (values derived from
// other values, flags that must agree). It catches a hand-edited profile
// that would make the driver and the device disagree.
func (p *Profile) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.UK.HWRev == p.Gen, "UK.HWRev %v != Gen %v", p.UK.HWRev, p.Gen)
	check(p.Atomics == (p.UK.FeatureFlags&FeatureAtomicOps != 0), "Atomics %v disagrees with feature flag ATOMIC_OPS", p.Atomics)
	check(p.SRQ == (p.UK.FeatureFlags&FeatureSRQ != 0), "SRQ %v disagrees with feature flag SRQ", p.SRQ)
	check(p.SRQ == (p.UK.MaxHWSRQQuanta != 0), "SRQ %v disagrees with MaxHWSRQQuanta %d", p.SRQ, p.UK.MaxHWSRQQuanta)
	check(p.SRQ == (p.Limits.MaxSRQs != 0), "SRQ %v disagrees with MaxSRQs %d", p.SRQ, p.Limits.MaxSRQs)
	if p.SRQ {
		check(p.Limits.MaxSRQWR == (p.UK.MaxHWSRQQuanta-1)/p.UK.MaxHWSQChunk, "MaxSRQWR %d != (MaxHWSRQQuanta − 1) / MaxHWSQChunk", p.Limits.MaxSRQWR)
		check(p.Limits.MaxSRQSGE == p.UK.MaxHWWQFrags, "MaxSRQSGE %d != MaxHWWQFrags", p.Limits.MaxSRQSGE)
	}
	check(p.Queues.PadFragCounted == (p.Gen <= Gen2), "PadFragCounted %v on %v", p.Queues.PadFragCounted, p.Gen)
	check(p.Queues.HWFlushPerWQE == (p.Gen >= Gen3), "HWFlushPerWQE %v on %v", p.Queues.HWFlushPerWQE, p.Gen)
	check((p.Queues.CQESize == 64) == (p.UK.FeatureFlags&Feature64ByteCQE != 0), "CQESize %d disagrees with feature flag 64_BYTE_CQE", p.Queues.CQESize)
	check(p.Queues.CQEExtNextSlot == (p.Queues.CQESize == 32), "CQEExtNextSlot %v with CQESize %d", p.Queues.CQEExtNextSlot, p.Queues.CQESize)
	if p.UK.MaxHWSQChunk != 0 {
		check(p.Limits.MaxQPWR == (p.UK.MaxHWWQQuanta-258)/p.UK.MaxHWSQChunk,
			"MaxQPWR %d != (MaxHWWQQuanta − 258) / MaxHWSQChunk", p.Limits.MaxQPWR)
	}
	check(p.Limits.MaxSGE == p.UK.MaxHWWQFrags, "MaxSGE %d != MaxHWWQFrags %d", p.Limits.MaxSGE, p.UK.MaxHWWQFrags)
	check(p.Limits.MaxSGERd == p.UK.MaxHWReadSGEs, "MaxSGERd %d != MaxHWReadSGEs %d", p.Limits.MaxSGERd, p.UK.MaxHWReadSGEs)
	check(p.Limits.MaxInline == p.UK.MaxHWInline, "MaxInline %d != MaxHWInline %d", p.Limits.MaxInline, p.UK.MaxHWInline)
	check(p.Limits.MaxCQE+1 == p.UK.MaxHWCQSize, "MaxCQE %d != MaxHWCQSize − 1", p.Limits.MaxCQE)
	check(p.Limits.MaxCQID <= 1<<p.Fields.CQID.Width || p.Gen >= Gen3, "CQ ids exceed the CQID field")
	// The CQE timestamp needs a clock rate and fits qword0 [63:32].
	check((p.UK.FeatureFlags&FeatureCQETimestamping != 0) == (p.Limits.HCACoreClockKHz != 0),
		"HCACoreClockKHz %d disagrees with feature flag CQE_TIMESTAMPING", p.Limits.HCACoreClockKHz)
	check(p.Limits.TimestampMask <= 1<<32-1, "TimestampMask %#x wider than the CQE field", p.Limits.TimestampMask)
	return errors.Join(errs...)
}

// ByName returns the profile a command line names: "gen2" (E810, the
// default) or "gen3" (E2100).
func ByName(name string) (Profile, error) {
	switch name {
	case "", "gen2", "GEN_2", "e810":
		return GEN2(), nil
	case "gen3", "GEN_3", "e2100":
		return GEN3(), nil
	}
	return Profile{}, fmt.Errorf("profile %q: want gen2 or gen3", name)
}

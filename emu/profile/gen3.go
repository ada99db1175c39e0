package profile

import "github.com/irdma-emu/irdma-emu/emu/regs"

// GEN3 returns the Intel IPU E2100 RDMA function ("ig3rdma", GEN_3) with the
// values the upstream Linux driver gives it: ig3rdma_hw.c:ig3rdma_init_hw
// and ig3rdma_hw.h's ig3rdma_device_caps_const, the GEN_3 paths of
// ctrl.c:irdma_sc_dev_init and verbs.c:irdma_query_device. SRQ, 64-byte
// CQEs, one hardware flush CQE per WQE, the pad fragment not counted in
// ADDFRAGCNT; atomics off unless WithAtomics (irdma_get_rdma_features sets
// ATOMIC_OPS from the firmware's IRDMA_ATOMICS_ALLOWED_BIT, as on GEN_2).
//
// What the emulator keeps from GEN_2 (a real E2100 differs; none of it is
// visible to user space): the BAR0 register layout (GEN_3 takes it from
// the control plane over virtchnl, ig3rdma_get_reg_addr), the AEQE layout
// (GEN_3 moved its fields, defs.h IRDMA_AEQE_*_GEN_3), the RoCE QP host
// context apart from its SRQ fields (GEN_3 moved the PD id, the statistics
// index and the IRD/ORD encodings: ctrl.c:irdma_sc_qp_setctx_roce_gen_3),
// and the per-device field masks. docs/hw-datapath.md "Generations" lists
// the differences.
func GEN3() Profile {
	p := GEN2()
	p.Name = "E2100"
	p.Gen = Gen3
	p.Identity = Identity{
		VendorID: 0x8086, // PCI_VENDOR_ID_INTEL
		// The IPU's IDPF physical function (idpf_devids.h IDPF_DEV_ID_PF):
		// ig3rdma binds to the RDMA auxiliary device the idpf driver
		// creates on it, so ibv_devinfo's vendor_part_id is the PF's id.
		DeviceID:          0x1452,
		SubsystemVendorID: 0x8086,
		SubsystemID:       0x0000, // our choice
		Revision:          0x00,   // our choice: an A0 part
		FWMajor:           1,      // our choice, as on GEN_2
		FWMinor:           0,
	}
	p.UK = UKAttrs{
		HWRev: Gen3,
		// ig3rdma_init_hw: 64_BYTE_CQE | CQE_TIMESTAMPING | SRQ | RTS_AE |
		// CQ_RESIZE; ATOMIC_OPS only from firmware (WithAtomics).
		FeatureFlags:   FeatureRTSAE | FeatureCQResize | Feature64ByteCQE | FeatureSRQ | FeatureCQETimestamping,
		MaxHWWQFrags:   14,      // IG3RDMA_MAX_WQ_FRAGMENT_COUNT
		MaxHWReadSGEs:  14,      // IG3RDMA_MAX_SGE_RD
		MaxHWInline:    216,     // IG3RDMA_MAX_INLINE_DATA_SIZE
		MaxHWRQQuanta:  32768,   // IRDMA_QP_SW_MAX_RQ_QUANTA (irdma_sc_dev_init, every generation)
		MaxHWWQQuanta:  32768,   // IRDMA_QP_SW_MAX_WQ_QUANTA
		MinHWCQSize:    1,       // IRDMA_MIN_CQ_SIZE
		MaxHWCQSize:    1048575, // IRDMA_MAX_CQ_SIZE
		MaxHWSQChunk:   8,       // IRDMA_MAX_QUANTA_PER_WR (ig3rdma_init_hw)
		MinHWWQSize:    16,      // IG3RDMA_MIN_WQ_SIZE
		MaxHWSRQQuanta: 262144,  // IRDMA_SRQ_MAX_QUANTA
	}
	p.Limits.MaxSGE = 14
	p.Limits.MaxSGERd = 14
	p.Limits.MaxInline = 216
	// IG3RDMA_MAX_IRD_SIZE / IG3RDMA_MAX_ORD_SIZE in the merged driver (an
	// earlier posting of the series had 2048).
	p.Limits.MaxIRD = 64
	p.Limits.MaxORD = 64
	// irdma_query_device for GEN_3: a 32-bit completion timestamp counting
	// at hca_core_clock 1 GHz (HCA_CORE_CLOCK_KHZ 1 000 000 kHz), and type-2
	// memory windows (IB_DEVICE_MEM_WINDOW_TYPE_2B; the GEN_3 series' "Restrict
	// Memory Window and CQE Timestamping to GEN3").
	p.Limits.TimestampMask = 0xffffffff
	p.Limits.HCACoreClockKHz = 1_000_000
	p.Limits.DeviceCapFlags |= DeviceMemWindowType2B
	p.Limits.PushPages = 8192     // IG3RDMA_MAX_PF_PUSH_PAGE_COUNT
	p.Limits.StatsInstances = 128 // IG3RDMA_MAX_STATS_COUNT
	// SRQs: the HMC SRQ object count is the firmware's choice (QUERY_FPM);
	// ours, and the limits irdma_query_device derives from the uk attrs:
	// max_srq_wr = IRDMA_MAX_SRQ_WRS = (262144 − 1) / 8, max_srq_sge =
	// max_hw_wq_frags.
	p.Limits.MaxSRQs = 4096
	p.Limits.MaxSRQWR = (262144 - 1) / 8
	p.Limits.MaxSRQSGE = 14
	p.Queues.CQESize = 64           // struct irdma_extended_cqe
	p.Queues.CQEExtNextSlot = false // the extension is bytes 32–63 (AVOIDMEMCNFLCT)
	p.Queues.PadFragCounted = false // uk.c counts the pad only when hw_rev is GEN_2
	p.Queues.HWFlushPerWQE = true   // uk.c: "for GEN3 and beyond FW will generate/flush these CQEs"
	p.Queues.CQPHWMajorVer = 2      // IRDMA_CQPHC_HW_MAJVER_GEN_3
	p.Regs = regs.GEN2Layout()      // see above: not the virtchnl-provided layout
	p.SRQ = true
	p.Atomics = false
	return p
}

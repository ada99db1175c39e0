package profile

import "github.com/irdma-emu/irdma-emu/emu/regs"

// GEN2 returns the E810 ("icrdma", GEN_2) profile with the upstream Linux
// irdma driver's values: RoCEv2, no SRQ, 32-byte CQEs, atomics off (the
// ATOMIC_OPS feature needs a firmware bit the E810 driver of the reference
// does not see; use WithAtomics(true) to offer them anyway).
//
// Where kernel versions differ the newest upstream value is used and the
// difference is noted.
func GEN2() Profile {
	return Profile{
		Name: "E810",
		Gen:  Gen2,
		Identity: Identity{
			VendorID: 0x8086, // PCI_VENDOR_ID_INTEL
			// E810-C for QSFP (ice_devids.h ICE_DEV_ID_E810C_QSFP); listed in
			// libirdma's match table, so the real provider binds to it
			// (providers/irdma/umain.c; docs/preload.md "The sysfs tree").
			// ibv_devinfo shows vendor_part_id 5522.
			DeviceID:          0x1592,
			SubsystemVendorID: 0x8086,
			SubsystemID:       0x0002, // the modalias measured with rdma-core 44 (docs/preload.md)
			// hw_ver: production E810-C report PCI revision 0x02; the
			// measured ibv_devinfo shows hw_ver 0x2 (docs/uverbs.md "What
			// rdma-core 44 sends (measured)").
			Revision: 0x02,
			// Our choice: libirdma prints fw_ver as "1.60" (print_fw_ver;
			// docs/uverbs.md "What rdma-core 44 sends (measured)").
			FWMajor: 1,
			FWMinor: 60,
		},
		UK: UKAttrs{
			HWRev: Gen2, // irdma_sc_dev_init
			// RTS_AE | CQ_RESIZE (icrdma_init_hw); ATOMIC_OPS only with the
			// firmware bit (irdma_get_rdma_features); Intel's out-of-tree
			// driver also sets ENFORCE_SQ_SIZE, not known upstream
			// (docs/hw-datapath.md "Version differences").
			FeatureFlags:   FeatureRTSAE | FeatureCQResize,
			MaxHWWQFrags:   13,      // IRDMA_MAX_WQ_FRAGMENT_COUNT (irdma_sc_dev_init)
			MaxHWReadSGEs:  13,      // IRDMA_MAX_SGE_RD
			MaxHWInline:    101,     // IRDMA_MAX_INLINE_DATA_SIZE
			MaxHWRQQuanta:  32768,   // IRDMA_QP_SW_MAX_RQ_QUANTA
			MaxHWWQQuanta:  32768,   // IRDMA_QP_SW_MAX_WQ_QUANTA
			MinHWCQSize:    1,       // IRDMA_MIN_CQ_SIZE
			MaxHWCQSize:    1048575, // IRDMA_MAX_CQ_SIZE
			MaxHWSQChunk:   8,       // IRDMA_MAX_QUANTA_PER_WR (icrdma_init_hw)
			MinHWWQSize:    8,       // ICRDMA_MIN_WQ_SIZE
			MaxHWSRQQuanta: 0,       // not set on GEN_2: no SRQ
		},
		Limits: Limits{
			MaxQPID:    262144,  // IRDMA_MAX_IW_QP_ID = 262143 (user.h)
			MaxCQID:    524288,  // IRDMA_MAX_CQID = 524287 (user.h)
			MaxPDs:     262144,  // IRDMA_MAX_PDS
			MaxCEQs:    1024,    // IRDMA_CEQ_MAX_COUNT (IRDMA_MAX_CEQID = 1023)
			MaxCEQSize: 262143,  // IRDMA_MAX_CEQ_ENTRIES
			MaxAEQSize: 524287,  // IRDMA_MAX_AEQ_ENTRIES
			MaxQPWR:    4063,    // IRDMA_MAX_QP_WRS = (32768 − 258) / 8
			MaxCQE:     1048574, // IRDMA_MAX_CQ_SIZE − 1 (irdma_query_device)
			MaxSGE:     13,      // uk_attrs.max_hw_wq_frags
			MaxSGERd:   13,      // uk_attrs.max_hw_read_sges
			MaxInline:  101,     // IRDMA_MAX_INLINE_DATA_SIZE
			// ICRDMA_MAX_IRD_SIZE / ICRDMA_MAX_ORD_SIZE upstream; the FreeBSD
			// copy has 32/64 and Intel's out-of-tree driver 8/8
			// (docs/hw-datapath.md "Version differences").
			MaxIRD:      127,
			MaxORD:      255,
			MaxMRSize:   0x2000_0000_0000,         // IRDMA_MAX_MR_SIZE
			MaxMsgSize:  1<<31 - 1,                // IRDMA_MAX_OUTBOUND_MSG_SIZE
			PageSizeCap: Page4K | Page2M | Page1G, // icrdma_init_hw page_size_cap (newer kernels)
			// IRDMA_MAX_PAGES_PER_FMR (irdma_query_device).
			MaxFastRegPageListLen: 262144,
			MaxMcastQPAttach:      8,  // IRDMA_MAX_MGS_PER_CTX
			MaxPKeys:              1,  // IRDMA_PKEY_TBL_SZ
			GIDTableLen:           32, // irdma_query_port, RoCE
			MinMTU:                256,
			MaxMTU:                4096,    // irdma_query_port max_mtu IB_MTU_4096
			TimestampMask:         0x1ffff, // HCA_CLOCK_TIMESTAMP_MASK (GEN_2)
			// irdma_query_device: MEM_WINDOW | MEM_MGT_EXTENSIONS, plus
			// RC_RNR_NAK_GEN on RoCE.
			DeviceCapFlags: DeviceMemWindow | DeviceMemMgtExtension | DeviceRCRNRNAKGen,
			// IRDMA_MAX_PUSH_PAGE_COUNT in irdma_sc_dev_init before the GEN_3
			// series (256 after it): docs/hw-controlpath.md "Push pages". The
			// emulator declines push pages with IRDMA_INVALID_PUSH_PAGE_INDEX
			// either way.
			PushPages:      1024,
			StatsInstances: 128, // ICRDMA_MAX_STATS_COUNT
		},
		Queues: Queues{
			WQEQuantum:     32,   // IRDMA_QP_WQE_MIN_SIZE
			CQESize:        32,   // struct irdma_cqe (user.h)
			CQEExtNextSlot: true, // EXTCQE: qwords 4–7 in the next ring slot
			PadFragCounted: true, // GEN_2 counts the pad fragment in ADDFRAGCNT (uk.c)
			HWFlushPerWQE:  false,
			CQPWQESize:     64,   // IRDMA_CQP_WQE_SIZE = 8 qwords
			CQPMaxSize:     2048, // IRDMA_CQP_SW_SQSIZE_2048 (irdma_create_cqp)
			CQPHWMajorVer:  1,    // HW_MAJVER: GEN_1 0, GEN_2 1, GEN_3 2
			CCQSize:        2050, // IW_CCQ_SIZE = 2048 + 2
			CQPAlign:       0x200,
			CQ0Align:       0x100,
			ShadowAreaSize: 64,
			// IRDMA_QUERY/COMMIT_FPM_BUF_SIZE: 176 in older upstream, 192 in
			// Intel's out-of-tree 2.8, 200/208 in GEN_3-era kernels; a GEN_2
			// device writes only the first 176 bytes of the query buffer.
			QueryFPMBufSizes: []int{176, 192, 208},
		},
		Fields: Fields{
			CCQPStatusDone: Field{Shift: 0, Width: 1},   // ICRDMA_CCQPSTATUS_CCQP_DONE
			CCQPStatusErr:  Field{Shift: 31, Width: 1},  // ICRDMA_CCQPSTATUS_CCQP_ERR
			STagPDID:       Field{Shift: 46, Width: 18}, // ICRDMA_CQPSQ_STAG_PDID [63:46]
			CQCEQID:        Field{Shift: 22, Width: 10}, // ICRDMA_CQPSQ_CQ_CEQID [31:22]
			CQID:           Field{Shift: 0, Width: 19},  // ICRDMA_CQPSQ_CQ_CQID [18:0] (GEN_1: [15:0])
			CommitFPMCQCnt: Field{Shift: 0, Width: 20},  // ICRDMA_COMMIT_FPM_CQCNT [19:0] (GEN_1: [17:0])
			// IRDMAQPSQ_AHID [16:0] upstream; Intel's out-of-tree driver uses
			// [24:0] (docs/hw-datapath.md "Version differences"). Decoding
			// with the wide field is safe: the extra bits are zero from
			// upstream drivers.
			AHID: Field{Shift: 0, Width: 25},
		},
		Regs:    regs.GEN2Layout(),
		SRQ:     false, // IRDMA_FEATURE_SRQ is GEN_3 only (ig3rdma_init_hw)
		Atomics: false,
	}
}

// GEN3 (gen3.go) is the second constructor; from ig3rdma_hw.c:ig3rdma_init_hw
// and the GEN_3 paths of verbs.c/ctrl.c (docs/hw-datapath.md "Generations")
// it changes hw_rev, the feature flags (64_BYTE_CQE | SRQ | CQE_TIMESTAMPING),
// SGEs 14, inline 216, min WQ size 16, max_hw_srq_quanta 262144, 64-byte
// CQEs, the uncounted pad fragment, per-WQE hardware flush, IRD/ORD 64,
// push pages 8192, the 32-bit timestamp and CQP HW major 2.

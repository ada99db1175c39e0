// Package regs is the GEN_2 (E810) PF BAR0 register file the irdma driver
// touches: the CQP doorbell, tail, status and error registers, the kernel
// data-path doorbells (WQEALLOC, CQARM, CQACK, AEQALLOC), the interrupt
// controls and the few status registers read at bring-up, at their real
// offsets.
//
// Names follow the hardware/driver symbols (PFPE_CQPDB → CQPDB, GLINT_DYN_CTL,
// …) so that the driver sources can be grepped for them; every offset and
// mask cites the driver symbol it comes from (icrdma_hw.h, irdma.h; the
// table is in docs/hw-controlpath.md "Registers", the user doorbell page in
// docs/hw-datapath.md "User doorbell page").
//
// # Semantics
//
// A register is a 32-bit word. The driver side uses Read32 and Write32, as
// irdma uses readl/writel on BAR0. The device side sets status values with
// Set (no notification) and subscribes to driver writes with OnWrite: a
// write stores the value and calls the register's subscribers in the
// writer's goroutine. A write is a hint that wakes the owning engine, never
// a counted event: hardware doorbells coalesce (a second store of the same
// value may be indistinguishable from the first), so engines must derive
// their work from memory (ring valid bits, the value in the register) and
// never from the number of callbacks.
//
// Unknown offsets read as 0; writes to them are ignored. Both are counted
// (Stats), so a test can assert the driver touched only known registers.
// Driver writes to read-only status registers are dropped and counted too.
// Read32, Write32 and Set are lock-free and do not allocate.
//
// # The user doorbell page
//
// The 4 KiB page at DB_ADDR_OFFSET is not part of File. irdma maps it into
// user space (irdma_alloc_ucontext / irdma_mmap, IRDMA_MMAP_IO_NC); programs
// store the QP id at +0 (DBSQ, the user WQEALLOC) and the CQ id at +64
// (DBCQ, the user CQ arm) with no system call. In the emulator that page
// will be real shared memory (a memfd the preload maps in place of the BAR)
// that the device watches, not a register File; the offsets below define
// where it sits in the BAR so that the driver half can hand out the same
// mmap keys and offsets as irdma. The push pages that follow it (from
// PushOffset) are optional and not modelled.
package regs

// Offset is a byte offset in BAR0.
type Offset uint32

// GEN_2 PF BAR0 registers (icrdma_hw.h PFPE_*, GL*, PF*; the index in
// irdma.h enum irdma_registers is given as hw_regs[...] where the driver
// reaches the register through that table).
const (
	// CQPDB: the driver writes the CQP ring head (next free slot) after
	// posting WQEs (hw_regs[IRDMA_CQPDB], irdma_sc_cqp_post_sq).
	CQPDB Offset = 0x00500800
	// CQPTAIL: WQTAIL = the device's consumed index, CQP_OP_ERR on a failed
	// WQE (hw_regs[IRDMA_CQPTAIL], irdma_cqp_poll_registers). The driver
	// writes 0 in irdma_sc_cqp_init.
	CQPTAIL Offset = 0x00500880
	// CCQPSTATUS: CCQP_DONE / CCQP_ERR after CQP create or destroy
	// (hw_regs[IRDMA_CCQPSTATUS], irdma_sc_cqp_create / _destroy).
	CCQPSTATUS Offset = 0x0050a000
	// CCQPLOW: CQP host-context address bits 31:0; written after CCQPHIGH,
	// it is the CQP create trigger (hw_regs[IRDMA_CCQPLOW]).
	CCQPLOW Offset = 0x0050a080
	// CCQPHIGH: CQP host-context address bits 63:32 (hw_regs[IRDMA_CCQPHIGH]).
	CCQPHIGH Offset = 0x0050a100
	// CQPERRCODES: major/minor code of the last failed CQP WQE
	// (hw_regs[IRDMA_CQPERRCODES]).
	CQPERRCODES Offset = 0x0050a200
	// CQARM: kernel CQ arm doorbell, payload cq_id (hw_regs[IRDMA_CQARM],
	// dev->cq_arm_db, irdma_sc_ccq_arm / irdma_uk_cq_request_notification).
	CQARM Offset = 0x00502c00
	// CQACK: CQ acknowledge after its CEQE was handled, payload cq_id
	// (hw_regs[IRDMA_CQACK], irdma_sc_cq_ack).
	CQACK Offset = 0x00502c80
	// AEQALLOC: number of AEQEs consumed (hw_regs[IRDMA_AEQALLOC],
	// irdma_sc_repost_aeq_entries). Each write carries a count.
	AEQALLOC Offset = 0x00502d00
	// WQEALLOC: kernel SQ doorbell, payload qp_id (hw_regs[IRDMA_WQEALLOC],
	// dev->wqe_alloc_db, irdma_uk_qp_post_wr).
	WQEALLOC Offset = 0x00504400

	// GLPCI_LBARCTRL: PE_DB_SIZE must read 1 (4 MiB) or 2 (8 MiB)
	// (irdma_sc_dev_init).
	GLPCI_LBARCTRL Offset = 0x0009de74
	// GLPE_CPUSTATUS0..2 must each read CPUStatusReady before the driver
	// proceeds (ctrl.c:irdma_wait_pe_ready, up to 14 polls 1 s apart).
	GLPE_CPUSTATUS0 Offset = 0x0050ba5c
	GLPE_CPUSTATUS1 Offset = 0x0050ba60
	GLPE_CPUSTATUS2 Offset = 0x0050ba64
	// PFINT_AEQCTL: AEQ interrupt cause control, same layout as GLINT_CEQCTL
	// (irdma_cfg_aeq).
	PFINT_AEQCTL Offset = 0x0016cb00
	// PFHMC_PDINV: HMC PD-cache invalidate (irdma_invalidate_pf_hmc_pd).
	PFHMC_PDINV Offset = 0x00520300
	// GLPE_CRITERR: protocol-engine critical error status (icrdma_hw.h).
	GLPE_CRITERR Offset = 0x00534000
)

// Register arrays (icrdma_hw.h; the index ranges are the "_i=0...N" of the
// same header).
const (
	glintDynCtlBase  Offset = 0x00160000 // GLINT_DYN_CTL(_INT), _i=0...2047
	glintCeqctlBase  Offset = 0x0015c000 // GLINT_CEQCTL(_INT), _i=0...2047
	glintRateBase    Offset = 0x0015a000 // GLINT_RATE(_INT), _i=0...2047
	glhmcVFPDInvBase Offset = 0x00528300 // GLHMC_VFPDINV(_i), _i=0...31
	vsiqfPECtl1Base  Offset = 0x00414000 // VSIQF_PE_CTL1(_VSI), _i=0...767

	NumGLINT        = 2048 // GLINT_DYN_CTL, GLINT_CEQCTL, GLINT_RATE entries
	NumGLHMCVFPDInv = 32
	NumVSI          = 768
)

// GLINT_DYN_CTL returns the offset of the dynamic interrupt control of MSI-X
// vector i (hw_regs[IRDMA_GLINT_DYN_CTL] + 4·i, icrdma_ena_irq). An i out of
// range yields an offset the File does not know.
func GLINT_DYN_CTL(i int) Offset { return glintDynCtlBase + 4*Offset(i) }

// GLINT_CEQCTL returns the offset of the cause control of CEQ i
// (icrdma_cfg_ceq).
func GLINT_CEQCTL(i int) Offset { return glintCeqctlBase + 4*Offset(i) }

// GLINT_RATE returns the offset of the interrupt rate limit of vector i.
func GLINT_RATE(i int) Offset { return glintRateBase + 4*Offset(i) }

// GLHMC_VFPDINV returns the offset of the PD-cache invalidate of VF i.
func GLHMC_VFPDINV(i int) Offset { return glhmcVFPDInvBase + 4*Offset(i) }

// VSIQF_PE_CTL1 returns the offset of the PE control of VSI i.
func VSIQF_PE_CTL1(i int) Offset { return vsiqfPECtl1Base + 4*Offset(i) }

// The user doorbell page and push pages (not part of File; see the package
// documentation).
const (
	// DB_ADDR_OFFSET is the user doorbell page: 8 MiB − 64 KiB
	// (ICRDMA_DB_ADDR_OFFSET, hw_regs[IRDMA_DB_ADDR_OFFSET]).
	DB_ADDR_OFFSET Offset = 8<<20 - 64<<10
	// DBSQ is where user space stores the QP id (the page's +0, rdma-core
	// irdma_ucreate_qp wqe_alloc_db; docs/hw-datapath.md "User doorbell
	// page").
	DBSQ = DB_ADDR_OFFSET
	// DBCQ is where user space stores the CQ id to arm a CQ (+64,
	// IRDMA_DB_CQ_OFFSET; docs/hw-datapath.md "User doorbell page").
	DBCQ = DB_ADDR_OFFSET + 64
	// HWPageSize is the BAR page granule (IRDMA_HW_PAGE_SIZE).
	HWPageSize = 4096
	// PFBARReserved is the gap between the doorbell page and the first push
	// page (IRDMA_PF_BAR_RSVD, 60 KiB).
	PFBARReserved = 60 << 10
	// PushOffset is the first push WQE page: DB_ADDR_OFFSET + 4 KiB + 60 KiB
	// = 8 MiB (irdma_setup_push_mmap_entries; IRDMA_PUSH_OFFSET).
	PushOffset = DB_ADDR_OFFSET + HWPageSize + PFBARReserved
)

// Field masks (irdma.h IRDMA_*_M and icrdma_hw.h ICRDMA_*; the per-device
// masks the driver looks up through dev->hw_masks are marked so).
const (
	// CQPTAIL (irdma.h IRDMA_CQPTAIL_WQTAIL, IRDMA_CQPTAIL_CQP_OP_ERR).
	CQPTAIL_WQTAIL     uint32 = 0x7ff   // [10:0] consumed CQP WQE index
	CQPTAIL_CQP_OP_ERR uint32 = 1 << 31 // the WQE just consumed failed

	// CQPERRCODES (irdma.h IRDMA_CQPERRCODES_CQP_MINOR/MAJOR_CODE).
	CQPERRCODES_MINOR uint32 = 0x0000ffff // [15:0]
	CQPERRCODES_MAJOR uint32 = 0xffff0000 // [31:16]

	// CCQPSTATUS (icrdma_hw.h ICRDMA_CCQPSTATUS_CCQP_DONE/ERR; per-device
	// masks IRDMA_CCQPSTATUS_CCQP_DONE_M/ERR_M).
	CCQPSTATUS_DONE uint32 = 1 << 0
	CCQPSTATUS_ERR  uint32 = 1 << 31

	// WQEALLOC and the push doorbell: WQE_DESC_INDEX [31:20] = wqe_idx>>3
	// (irdma.h IRDMA_WQEALLOC_WQE_DESC_INDEX; rdma-core irdma_qp_ring_push_db)
	// with the QP id below it. The QP id field width is not named by the
	// driver; QP ids are < 2^18 (IRDMA_MAX_IW_QP_ID), so [19:0] holds them
	// (inference).
	WQEALLOC_WQE_DESC_INDEX uint32 = 0xfff00000
	WQEALLOC_QPID           uint32 = 0x000fffff

	// GLINT_DYN_CTL (irdma.h IRDMA_GLINT_DYN_CTL_*; icrdma_ena_irq).
	GLINT_DYN_CTL_INTENA   uint32 = 1 << 0
	GLINT_DYN_CTL_CLEARPBA uint32 = 1 << 1
	GLINT_DYN_CTL_ITR_INDX uint32 = 0x3 << 3   // [4:3]
	GLINT_DYN_CTL_INTERVAL uint32 = 0xfff << 5 // [16:5]

	// GLINT_CEQCTL and PFINT_AEQCTL (irdma.h IRDMA_GLINT_CEQCTL_*;
	// icrdma_cfg_ceq, irdma_cfg_aeq).
	GLINT_CEQCTL_MSIX_INDX uint32 = 0x7ff     // [10:0]
	GLINT_CEQCTL_ITR_INDX  uint32 = 0x3 << 11 // [12:11]; the driver uses 3
	GLINT_CEQCTL_CAUSE_ENA uint32 = 1 << 30

	// PFHMC_PDINV (irdma.h IRDMA_PFHMC_PDINV_*; irdma_invalidate_pf_hmc_pd).
	PFHMC_PDINV_PMSDIDX     uint32 = 0xfff // [11:0]
	PFHMC_PDINV_PMSDPARTSEL uint32 = 1 << 15
	PFHMC_PDINV_PMPDIDX     uint32 = 0x1ff << 16 // [24:16]

	// GLPCI_LBARCTRL (irdma.h IRDMA_GLPCI_LBARCTRL_PE_DB_SIZE; checked in
	// irdma_sc_dev_init).
	GLPCI_LBARCTRL_PE_DB_SIZE uint32 = 0x3 << 4 // [5:4]
)

// Field values.
const (
	// CPUStatusReady is what GLPE_CPUSTATUS0/1/2 read when the protocol
	// engine is up (irdma_wait_pe_ready).
	CPUStatusReady uint32 = 0x80
	// PE_DB_SIZE values accepted by irdma_sc_dev_init.
	PEDBSize4M uint32 = 1
	PEDBSize8M uint32 = 2
	// ITRIndexNone is the ITR index the driver programs into
	// GLINT_CEQCTL/PFINT_AEQCTL (3, "no ITR": icrdma_cfg_ceq).
	ITRIndexNone uint32 = 3
)

// Package driver is the Go counterpart of Linux drivers/infiniband/hw/irdma's
// verbs and control path for a GEN_2 (E810) RoCE function, or the GEN_3
// (E2100) profile with shared receive queues (srq.go). It reaches the
// device only through HW — BAR0 register reads and writes, host memory it
// allocates, fills and reads (dma_alloc_coherent is hostmem.Memory.Alloc),
// and MSI-X notifications — and encodes every CQP WQE and context itself
// from the driver's layouts (docs/hw-controlpath.md, docs/hw-datapath.md);
// it never imports the device model.
//
// Open brings the function up in the order of hw.c:irdma_ctrl_init_hw and
// irdma_rt_init_hw:
//
//  1. GLPCI_LBARCTRL doorbell size check; PE ready (GLPE_CPUSTATUS0/1/2 ==
//     0x80, polled on the injectable clock).
//  2. CQP: 2048-entry ring (0x200-aligned), host context, CQPTAIL/CQPDB
//     zeroed, CCQPHIGH then CCQPLOW, CCQPSTATUS polled with a bound.
//  3. QUERY_RDMA_FEATURES (register-polled; the buffer re-sized and the
//     query retried when FEATURE_CNT says more; atomics → feature flag).
//  4. HMC: QUERY_FPM_VAL, the counts of ctrl.c:irdma_cfg_fpm_val for
//     Config.QPLimit (default irdma's limits_sel), COMMIT_FPM_VAL (208-byte
//     buffer), bases parsed back, DIRECT 2 MB SDs programmed with
//     UPDATE_PE_SDS (register-polled, irdma_update_sds_noccq),
//     SHMC_PAGES_ALLOCATED.
//  5. irdma_initialize_hw_rsrc: id bitmaps (QP, CQ, MR, PD, AH, mcast,
//     ARP), reserved ids, STag driver-key bits (mrdrvbits).
//  6. CCQ (CQ 0, 2050 entries, shadow area, check_overflow) — from here on
//     commands complete through the CCQ — then CEQ 0 on vector 0, CCQ arm,
//     MANAGE_STATS, CEQs 1.. on their vectors, the first PBLE chunk, AEQ,
//     and one goroutine per MSI-X vector.
//
// Close tears down in reverse (remaining objects first). Errors are
// syscall.Errno values as the kernel returns them (-EINVAL, -ENOMEM, -EBUSY,
// -EIO for error completions, -ETIMEDOUT); a failed CQP command is a
// *CQPError, which unwraps to EIO.
//
// Choices where irdma leaves room or the emulator differs:
//   - Completion contexts: a kernel CQ's qw1 value is 0x1c<<56 | cq_id, a
//     kernel QP's completion context 0x9f<<56 | qp_id (irdma uses object
//     pointers); user QPs carry the caller's user_compl_ctx.
//   - SDs are always DIRECT 2 MB pages; runs of consecutive SDs share one
//     2 MB-aligned host region (our IOVAs are contiguous per region).
//   - The PBLE pool grows lazily in 2 MB SD steps as pble.c does, backed by
//     DIRECT SDs.
//   - Verbs validate everything before any side effect: a refused modify or
//     create never reaches the CQP.
//   - DeallocPD and DestroyCQ return -EBUSY while objects use them (the RDMA
//     core's usecnt checks, done here since there is no core).
//   - Software flush completions for requests posted to a flushed kernel
//     QP keep a driver-side cursor (see generateFlushCompletions).
//
// Concurrency: the verbs are called by many programs at once (one attach
// session each) and by the interrupt goroutines, the AE work and the
// daemon. Shared state has the lock irdma gives it: the id bitmaps
// (rf->rsrc_lock), the QP and CQ tables (qptable_lock, cqtable_lock), the
// work-scheduler tree and QoS table (ws_mutex and qos_mutex, one lock
// here: a QP's QS handle is read only under it), the CQP ring and request
// table (cqp_lock, req_lock), the CCQ (compl_lock), the PBLE pool
// (pble_mutex_lock), the AH cache (ah_tbl_lock), the multicast list
// (qh_list_lock), the ARP cache (arp_lock), each QP, CQ and EQ. A QP being
// destroyed takes no more modifies (irdma's QP reference count). The
// table of every piece of state, its guard and its kernel counterpart is
// docs/verbs.md, "Concurrency".
package driver

// Package uverbs is the kernel half of the irdma verbs for user contexts:
// the daemon's answer to the uverbs write() commands an unmodified
// rdma-core program issues through the real libibverbs and the real
// libirdma provider, forwarded by the preload over the attach socket
// (docs/attach.md). It answers as the kernel's uverbs core
// (drivers/infiniband/core/uverbs_main.c, uverbs_cmd.c) and irdma
// (drivers/infiniband/hw/irdma/verbs.c) answer libirdma, over the driver
// half in driver/.
//
// A Provider is the attach.Handler of one device; each connection is a
// Session — one open of /dev/infiniband/uverbsN, with the ucontext
// GET_CONTEXT creates. A command is parsed as ib_uverbs_write does (the
// header, the method table, verify_hdr, the core request and response
// and the provider's udata), executed with the kernel's checks in the
// kernel's order, and answered with the response bytes for the program's
// response address and the descriptors to pass (the async event file of
// GET_CONTEXT, the completion channel of CREATE_COMP_CHANNEL). Errors
// are the kernel's errnos.
//
// Memory: the program's rings and shadow areas are registered (REG_MR,
// reg_type QP or CQ) in MEM ranges — memfd pieces the preload hands over —
// mapped zero-copy on the device's bus; a buffer registered with
// reg_type MEM is reached zero-copy if it lies in a MEM range and through
// the program's /proc/self/mem otherwise. The doorbell page is a memfd page
// the program maps with the context's db_mmap_key; Provider.Poll hands
// the data plane the QP ids rung there.
//
// Events: completion channels and the async event file are pipes whose
// records are the kernel's ib_uverbs_comp_event_desc and
// ib_uverbs_async_event_desc; the destroy responses report exactly the
// events the program read, as ibv_destroy_cq and ibv_destroy_qp require.
//
// docs/uverbs.md has the command table, the memory rules, events and
// cleanup.
package uverbs

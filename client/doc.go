// Package client lets Go programs use the emulated irdma device without
// cgo: it is a user-mode client like libibverbs with the libirdma provider,
// speaking the attach protocol (docs/attach.md) to the daemon.
//
// The control path sends the uverbs write() commands byte for byte as
// libibverbs 44 builds them for libirdma 44 (legacy ABI: GET_CONTEXT with
// irdma_alloc_ucontext_req, ALLOC_PD, REG_MR with irdma's reg_type, CREATE_CQ
// and CREATE_QP with their ring addresses, MODIFY_QP, QUERY_*, CREATE_AH,
// DESTROY_*, CREATE_COMP_CHANNEL), so the daemon cannot tell this client from
// the preload under an unmodified program. The data path makes no request
// at all: WQEs are written into the SQ/RQ rings with driver/uk's builders
// (the code behind the driver's kernel-mode PostSend), the doorbell is a
// 32-bit store of the QP id into the doorbell page, CQEs are polled from the
// CQ ring with driver/uk, and a CQ is armed through its shadow area and the
// CQ doorbell.
//
// Memory: everything the device must reach — rings, shadow areas and the
// buffers a program registers — is allocated from memfd-backed chunks this
// process maps and hands to the daemon with MEM, so the daemon reads and
// writes it zero-copy and no /proc/self/mem descriptor is needed. Use
// Context.AllocBuffer for buffers to register; other memory cannot be
// registered.
//
// Sizing follows libirdma: CQs get (cqe+1)·2 entries, QP rings the depths of
// irdma_get_sqdepth / irdma_get_rqdepth (uk.SQDepth, uk.RQDepth).
//
// Concurrency: objects may be used from several goroutines. Posting to a
// QP and polling the CQ its completions go to are serialised by the CQ's
// lock, as libirdma's spinlocks do; give each goroutine its own QP and CQ
// for parallel throughput.
//
// Errors are *CmdError (the errno the daemon answered, matchable with
// errors.Is), errno values from the uk layer (EINVAL, ENOMEM for a full
// ring), and *WCError for completions that did not succeed, named as
// ibv_wc_status_str names them.
package client

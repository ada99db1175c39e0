package client

import (
	"encoding/binary"
	"fmt"
	"syscall"
)

// The uverbs write() ABI as libibverbs 44 builds it for the irdma provider
// (ib_user_verbs.h and irdma-abi.h of rdma-core v44.0): a legacy command is
// ib_uverbs_cmd_hdr {command, in_words, out_words} with in_words counting
// the whole buffer and out_words the whole response in 32-bit words, then
// the core request (whose first u64 is the response address when the
// command has a response), then the provider's udata. The extended form
// (only MODIFY_QP with irdma's flush request here) counts in 64-bit words
// and carries the response address in its own header.

// Write command numbers (enum ib_uverbs_write_cmds).
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdCreateAH          = 5
	cmdDestroyAH         = 8
	cmdRegMR             = 9
	cmdDeregMR           = 13
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdDestroyCQ         = 20
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdAttachMcast       = 30
	cmdDetachMcast       = 31

	cmdFlagExtended = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
)

// Sizes of the core structures (bytes), from ib_user_verbs.h.
const (
	hdrSize            = 8   // ib_uverbs_cmd_hdr
	exHdrSize          = 16  // ib_uverbs_ex_cmd_hdr
	getContextRespSize = 8   // ib_uverbs_get_context_resp
	queryDeviceResp    = 176 // ib_uverbs_query_device_resp
	queryPortRespSize  = 40  // ib_uverbs_query_port_resp
	allocPDRespSize    = 4   // ib_uverbs_alloc_pd_resp
	regMRRespSize      = 12  // ib_uverbs_reg_mr_resp
	createCQRespSize   = 8   // ib_uverbs_create_cq_resp
	destroyCQRespSize  = 8   // ib_uverbs_destroy_cq_resp
	createQPRespSize   = 32  // ib_uverbs_create_qp_resp
	queryQPRespSize    = 128 // ib_uverbs_query_qp_resp
	modifyQPSize       = 112 // ib_uverbs_modify_qp
	exModifyQPSize     = 120 // ib_uverbs_ex_modify_qp
	exModifyQPRespSize = 8   // ib_uverbs_ex_modify_qp_resp
	destroyQPRespSize  = 4   // ib_uverbs_destroy_qp_resp
	createAHRespSize   = 4   // ib_uverbs_create_ah_resp
	qpDestSize         = 32  // ib_uverbs_qp_dest
	compEventSize      = 8   // ib_uverbs_comp_event_desc
	asyncEventSize     = 16  // ib_uverbs_async_event_desc
)

// Sizes of irdma's provider data (irdma-abi.h, ABI 5 as rdma-core v44
// declares it: the ucontext response ends at rsvd2, 64 bytes).
const (
	irdmaUctxReqSize     = 8  // irdma_alloc_ucontext_req
	irdmaUctxRespSize    = 64 // irdma_alloc_ucontext_resp
	irdmaAllocPDRespSize = 8  // irdma_alloc_pd_resp
	irdmaMemRegReqSize   = 8  // irdma_mem_reg_req
	irdmaCreateCQReqSize = 16 // irdma_create_cq_req
	irdmaCreateCQResp    = 8  // irdma_create_cq_resp
	irdmaCreateQPReqSize = 16 // irdma_create_qp_req
	irdmaCreateQPResp    = 24 // irdma_create_qp_resp
	irdmaModifyQPReqSize = 8  // irdma_modify_qp_req
	irdmaCreateAHResp    = 8  // irdma_create_ah_resp
)

// irdmaABIVer is IRDMA_ABI_VER, the userspace_ver libirdma asks for first.
const irdmaABIVer = 5

// Memory registration types (enum irdma_memreg_type).
const (
	memRegMem = 0
	memRegQP  = 1
	memRegCQ  = 2
)

var le = binary.LittleEndian

// wbuf appends little-endian fields.
type wbuf []byte

func (w *wbuf) u8(v uint8)   { *w = append(*w, v) }
func (w *wbuf) u16(v uint16) { *w = le.AppendUint16(*w, v) }
func (w *wbuf) u32(v uint32) { *w = le.AppendUint32(*w, v) }
func (w *wbuf) u64(v uint64) { *w = le.AppendUint64(*w, v) }
func (w *wbuf) bytes(b []byte) {
	*w = append(*w, b...)
}
func (w *wbuf) zero(n int) { *w = append(*w, make([]byte, n)...) }

// legacyCmd builds a legacy write() command: header, core request, udata.
// respLen is the whole response the caller expects (core + provider).
func legacyCmd(command uint32, core, udata []byte, respLen int) []byte {
	n := hdrSize + len(core) + len(udata)
	b := make(wbuf, 0, n)
	b.u32(command)
	b.u16(uint16(n / 4))
	b.u16(uint16(respLen / 4))
	b.bytes(core)
	b.bytes(udata)
	return b
}

// exCmd builds an extended write() command (_execute_cmd_write_ex).
func exCmd(command uint32, respAddr uint64, core, udata []byte, coreResp, provResp int) []byte {
	b := make(wbuf, 0, hdrSize+exHdrSize+len(core)+len(udata))
	b.u32(cmdFlagExtended | command)
	b.u16(uint16(len(core) / 8))
	b.u16(uint16(coreResp / 8))
	b.u64(respAddr)
	b.u16(uint16(len(udata) / 8))
	b.u16(uint16(provResp / 8))
	b.u32(0)
	b.bytes(core)
	b.bytes(udata)
	return b
}

// rbuf reads little-endian fields from a response; reads past the end
// yield zeros, as from the zeroed response buffer libibverbs hands the
// kernel, so a short response never panics.
type rbuf []byte

func (r rbuf) u8(off int) uint8 {
	if off < 0 || off+1 > len(r) {
		return 0
	}
	return r[off]
}

func (r rbuf) u16(off int) uint16 {
	if off < 0 || off+2 > len(r) {
		return 0
	}
	return le.Uint16(r[off:])
}

func (r rbuf) u32(off int) uint32 {
	if off < 0 || off+4 > len(r) {
		return 0
	}
	return le.Uint32(r[off:])
}

func (r rbuf) u64(off int) uint64 {
	if off < 0 || off+8 > len(r) {
		return 0
	}
	return le.Uint64(r[off:])
}

func (r rbuf) be64(off int) uint64 {
	if off < 0 || off+8 > len(r) {
		return 0
	}
	return binary.BigEndian.Uint64(r[off:])
}

func (r rbuf) gid(off int) GID {
	var g GID
	if off >= 0 && off+16 <= len(r) {
		copy(g[:], r[off:off+16])
	}
	return g
}

// CmdError is a failed uverbs command: the errno the daemon answered,
// as the kernel's write() would have returned it.
type CmdError struct {
	Cmd   string
	Errno syscall.Errno
}

func (e *CmdError) Error() string { return fmt.Sprintf("client: %s: %v", e.Cmd, e.Errno) }

// Unwrap lets errors.Is match the errno.
func (e *CmdError) Unwrap() error { return e.Errno }

var cmdNames = map[uint32]string{
	cmdGetContext: "GET_CONTEXT", cmdQueryDevice: "QUERY_DEVICE", cmdQueryPort: "QUERY_PORT",
	cmdAllocPD: "ALLOC_PD", cmdDeallocPD: "DEALLOC_PD", cmdCreateAH: "CREATE_AH",
	cmdDestroyAH: "DESTROY_AH", cmdRegMR: "REG_MR", cmdDeregMR: "DEREG_MR",
	cmdCreateCompChannel: "CREATE_COMP_CHANNEL", cmdCreateCQ: "CREATE_CQ",
	cmdDestroyCQ: "DESTROY_CQ", cmdCreateQP: "CREATE_QP", cmdQueryQP: "QUERY_QP",
	cmdModifyQP: "MODIFY_QP", cmdDestroyQP: "DESTROY_QP", cmdAttachMcast: "ATTACH_MCAST",
	cmdDetachMcast: "DETACH_MCAST",
}

func cmdName(c uint32) string {
	if n, ok := cmdNames[c&^cmdFlagExtended]; ok {
		if c&cmdFlagExtended != 0 {
			return "EX_" + n
		}
		return n
	}
	return fmt.Sprintf("command %#x", c)
}

package uverbs

import (
	"encoding/binary"
	"syscall"
)

// The uverbs write() ABI (include/uapi/rdma/ib_user_verbs.h) and irdma's
// provider data (include/uapi/rdma/irdma-abi.h, ABI 5). Offsets are those
// of the C structures on every Linux ABI (naturally aligned, little-endian
// here); the tests pin them with hand-written buffers.

var le = binary.LittleEndian

// Command numbers (enum ib_uverbs_write_cmds and the IB_USER_VERBS_EX_CMD_*).
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdCreateAH          = 5
	cmdModifyAH          = 6
	cmdQueryAH           = 7
	cmdDestroyAH         = 8
	cmdRegMR             = 9
	cmdRegSMR            = 10
	cmdReregMR           = 11
	cmdQueryMR           = 12
	cmdDeregMR           = 13
	cmdAllocMW           = 14
	cmdBindMW            = 15
	cmdDeallocMW         = 16
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdResizeCQ          = 19
	cmdDestroyCQ         = 20
	cmdPollCQ            = 21
	cmdPeekCQ            = 22
	cmdReqNotifyCQ       = 23
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdPostSend          = 28
	cmdPostRecv          = 29
	cmdAttachMcast       = 30
	cmdDetachMcast       = 31
	cmdCreateSRQ         = 32
	cmdModifySRQ         = 33
	cmdQuerySRQ          = 34
	cmdDestroySRQ        = 35
	cmdPostSRQRecv       = 36
	cmdOpenXRCD          = 37
	cmdCloseXRCD         = 38
	cmdCreateXSRQ        = 39
	cmdOpenQP            = 40

	exCmdQueryDevice = 1
	exCmdCreateCQ    = 18
	exCmdCreateQP    = 24
	exCmdModifyQP    = 26
	exCmdModifyCQ    = 57

	// cmdFlagExtended is IB_USER_VERBS_CMD_FLAG_EXTENDED; cmdMask is
	// IB_USER_VERBS_CMD_COMMAND_MASK.
	cmdFlagExtended uint32 = 0x80000000
	cmdMask         uint32 = 0xff

	// numWrite and numWriteEx are the sizes of the uapi's write method
	// tables (uverbs_uapi.c: the largest declared command + 1): OPEN_QP
	// and EX MODIFY_CQ.
	numWrite   = cmdOpenQP + 1
	numWriteEx = exCmdModifyCQ + 1
)

// Header sizes.
const (
	cmdHdrSize   = 8  // struct ib_uverbs_cmd_hdr
	exCmdHdrSize = 16 // struct ib_uverbs_ex_cmd_hdr
)

// Request and response sizes (sizeof, or offsetofend of the last member
// UAPI_DEF_WRITE_IO_EX names for the extended commands).
const (
	szGetContext         = 8
	szGetContextResp     = 8
	szQueryDevice        = 8
	szQueryDeviceResp    = 176
	szExQueryDevice      = 8
	szExQueryDeviceResp  = 304
	szExQueryDeviceRespM = 184 // offsetofend(response_length)
	szQueryPort          = 16
	szQueryPortResp      = 40
	szAllocPD            = 8
	szAllocPDResp        = 4
	szDeallocPD          = 4
	szCreateAH           = 56
	szCreateAHResp       = 4
	szDestroyAH          = 4
	szRegMR              = 40
	szRegMRResp          = 12
	szReregMR            = 48 // response, mr_handle, flags, start, length, hca_va, pd_handle, access_flags
	szReregMRResp        = 8  // lkey, rkey
	szDeregMR            = 4
	szAllocMW            = 16
	szAllocMWResp        = 8
	szDeallocMW          = 4
	szCreateCompChannel  = 8
	szCompChannelResp    = 4
	szCreateCQ           = 32
	szCreateCQResp       = 8
	szExCreateCQ         = 32
	szExCreateCQResp     = 16
	szResizeCQ           = 16
	szResizeCQResp       = 8
	szDestroyCQ          = 16
	szDestroyCQResp      = 8
	szPollCQ             = 16
	szPollCQResp         = 8
	szReqNotifyCQ        = 8
	szCreateQP           = 56
	szCreateQPResp       = 32
	szExCreateQP         = 64
	szExCreateQPReqM     = 52 // offsetofend(comp_mask)
	szExCreateQPResp     = 40
	szQueryQP            = 16
	szQueryQPResp        = 128
	szModifyQP           = 112
	szExModifyQP         = 120
	szExModifyQPResp     = 8
	szDestroyQP          = 16
	szDestroyQPResp      = 4
	szPostSend           = 24
	szPostSendResp       = 4
	szPostRecv           = 24
	szPostRecvResp       = 4
	szSendWR             = 56
	szRecvWR             = 16
	szSGE                = 16
	szAttachMcast        = 24
	szOpenQP             = 32
	szOpenQPResp         = 32
	szAsyncEventDesc     = 16
	szCompEventDesc      = 8

	// The SRQ commands (ib_uverbs_create_srq, _create_xsrq, _modify_srq,
	// _query_srq, _destroy_srq, _post_srq_recv and their responses).
	szCreateSRQ       = 32 // response, user_handle, pd_handle, max_wr, max_sge, srq_limit
	szCreateXSRQ      = 48 // response, user_handle, srq_type, pd_handle, max_wr, max_sge, srq_limit, max_num_tags, xrcd_handle, cq_handle
	szCreateSRQResp   = 16 // srq_handle, max_wr, max_sge, srqn
	szModifySRQ       = 16 // srq_handle, attr_mask, max_wr, srq_limit
	szQuerySRQ        = 16 // response, srq_handle, reserved
	szQuerySRQResp    = 16 // max_wr, max_sge, srq_limit, reserved
	szDestroySRQ      = 16 // response, srq_handle, reserved
	szDestroySRQResp  = 4  // events_reported
	szPostSRQRecv     = 24 // response, srq_handle, wr_count, sge_count, wqe_size
	szPostSRQRecvResp = 4  // bad_wr
)

// irdma provider data (irdma-abi.h).
const (
	irdmaABIVer = 5

	szUctxReq      = 16 // irdma_alloc_ucontext_req
	szUctxReqMin   = 8  // offsetofend(rsvd8): IRDMA_ALLOC_UCTX_MIN_REQ_LEN
	szUctxResp     = 80 // irdma_alloc_ucontext_resp, newest layout
	szUctxRespMin  = 16 // offsetofend(rsvd): IRDMA_ALLOC_UCTX_MIN_RESP_LEN (libi40iw)
	szPDResp       = 8  // irdma_alloc_pd_resp
	szMemRegReq    = 8  // irdma_mem_reg_req: IRDMA_MEM_REG_MIN_REQ_LEN
	szCQReq        = 16 // irdma_create_cq_req
	szCQReqMin     = 8  // offsetofend(user_cq_buf)
	szCQResp       = 8  // irdma_create_cq_resp: IRDMA_CREATE_CQ_MIN_RESP_LEN
	szResizeCQReq  = 8  // irdma_resize_cq_req
	szQPReq        = 16 // irdma_create_qp_req: IRDMA_CREATE_QP_MIN_REQ_LEN
	szQPResp       = 24 // irdma_create_qp_resp
	szQPRespMin    = 20 // offsetofend(rsvd): IRDMA_CREATE_QP_MIN_RESP_LEN
	szModQPReqMin  = 2  // offsetofend(rq_flush)
	szModQPResp    = 24 // irdma_modify_qp_resp
	szModQPRespMin = 19 // offsetofend(push_valid)
	szAHResp       = 8  // irdma_create_ah_resp
	szSRQReq       = 16 // irdma_create_srq_req: IRDMA_CREATE_SRQ_MIN_REQ_LEN (offsetofend(user_shadow_area))
	szSRQResp      = 8  // irdma_create_srq_resp {srq_id, srq_size}

	// comp_mask bits of GET_CONTEXT.
	uctxUseRawAttr  = 1 << 0 // IRDMA_ALLOC_UCTX_USE_RAW_ATTR
	uctxMinHWWQSize = 1 << 1 // IRDMA_ALLOC_UCTX_MIN_HW_WQ_SIZE
	// The two bits kernels with GEN_3 support added: the response carries
	// max_hw_srq_quanta, and the request says the provider writes the
	// GEN_3 WQE format (a GEN_3 device refuses a provider without it).
	uctxMaxHWSRQQuanta = 1 << 2 // IRDMA_ALLOC_UCTX_MAX_HW_SRQ_QUANTA
	uctxWQEFormatV2    = 1 << 3 // IRDMA_SUPPORT_WQE_FORMAT_V2

	// irdma_memreg_type.
	memRegMem = 0
	memRegQP  = 1
	memRegCQ  = 2
	memRegSRQ = 3

	// srqQPRecvWR is the max_recv_wr irdma_create_qp gives a QP on an SRQ.
	srqQPRecvWR = 4

	// hwRevGen3 is IRDMA_GEN_3 (hw_rev of irdma_alloc_ucontext_resp).
	hwRevGen3 = 3

	// invalidPushIdxGen1 is IRDMA_INVALID_PUSH_PAGE_INDEX_GEN_1.
	invalidPushIdxGen1 = 0xffff
)

// IB constants the core checks.
const (
	ibQPTRC        = 2
	ibQPTUC        = 3
	ibQPTUD        = 4
	ibQPTRawPacket = 8
	ibQPTXRCIni    = 9
	ibQPTXRCTgt    = 10
	ibQPTDriver    = 0xff

	ibQPSErr = 6 // IB_QPS_ERR, the largest ib_qp_state

	// IB_USER_LEGACY_LAST_QP_ATTR_MASK (IB_QP_DEST_QPN) and
	// IB_USER_LAST_QP_ATTR_MASK (IB_QP_RATE_LIMIT).
	legacyQPAttrMaskLimit = 1<<21 - 1
	exQPAttrMaskLimit     = 1<<26 - 1

	ibQPSetQKey = 0x80000000 // IB_QP_SET_QKEY

	// ib_access_flags: IB_ACCESS_SUPPORTED is everything up to
	// FLUSH_PERSISTENT plus the optional range.
	accessLocalWrite   = 1 << 0
	accessRemoteWrite  = 1 << 1
	accessRemoteAtomic = 1 << 3
	accessOnDemand     = 1 << 6
	accessFlushGlobal  = 1 << 8
	accessFlushPersist = 1 << 9
	accessOptional     = (1<<30 - 1) &^ (1<<20 - 1)
	accessSupported    = (1<<10 - 1) | accessOptional

	// ib_qp_create_flags user space may pass (create_qp in uverbs_cmd.c).
	qpCreateAllowed = 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<8 | 1<<9 | 1<<10 | 1<<11
	qpCreateSrcQPN  = 1 << 10

	createQPMaskIndTable = 1 // IB_UVERBS_CREATE_QP_MASK_IND_TABLE

	ibPCFIPBasedGIDs = 1 << 26 // IB_UVERBS_PCF_IP_BASED_GIDS
	linkLayerEth     = 2       // IB_LINK_LAYER_ETHERNET
	ibSpeedNDR       = 128     // IB_SPEED_NDR

	ibMWType1 = 1
	ibMWType2 = 2

	// ib_srq_type.
	ibSRQTBasic = 0
	ibSRQTXRC   = 1
	ibSRQTTM    = 2

	// ib_event_type of SRQ events.
	ibEventSRQErr          = 14 // IB_EVENT_SRQ_ERR
	ibEventSRQLimitReached = 15 // IB_EVENT_SRQ_LIMIT_REACHED

	pageSize = 4096
)

// Errnos, as the syscall values the kernel returns.
const (
	eINVAL     = syscall.EINVAL
	eNOSPC     = syscall.ENOSPC
	eNOENT     = syscall.ENOENT
	eOPNOTSUPP = syscall.EOPNOTSUPP
	eFAULT     = syscall.EFAULT
	eBADF      = syscall.EBADF
	eBUSY      = syscall.EBUSY
	eNOMEM     = syscall.ENOMEM
	ePERM      = syscall.EPERM
	eMFILE     = syscall.EMFILE
	eEXIST     = syscall.EEXIST
	eNODATA    = syscall.ENODATA
	eTIMEDOUT  = syscall.ETIMEDOUT
	eIO        = syscall.EIO
	ePROTO     = syscall.EPROTO
)

// get8, get16, get32 and get64 read a field of a request that the
// caller has already sized; out-of-range offsets read as zero, so a
// mistake can never panic.
func get8(b []byte, off int) uint8 {
	if off < 0 || off >= len(b) {
		return 0
	}
	return b[off]
}

func get16(b []byte, off int) uint16 {
	if off < 0 || off+2 > len(b) {
		return 0
	}
	return le.Uint16(b[off:])
}

func get32(b []byte, off int) uint32 {
	if off < 0 || off+4 > len(b) {
		return 0
	}
	return le.Uint32(b[off:])
}

func get64(b []byte, off int) uint64 {
	if off < 0 || off+8 > len(b) {
		return 0
	}
	return le.Uint64(b[off:])
}

func put8(b []byte, off int, v uint8) {
	if off >= 0 && off < len(b) {
		b[off] = v
	}
}

func put16(b []byte, off int, v uint16) {
	if off >= 0 && off+2 <= len(b) {
		le.PutUint16(b[off:], v)
	}
}

func put32(b []byte, off int, v uint32) {
	if off >= 0 && off+4 <= len(b) {
		le.PutUint32(b[off:], v)
	}
}

func put64(b []byte, off int, v uint64) {
	if off >= 0 && off+8 <= len(b) {
		le.PutUint64(b[off:], v)
	}
}

// cleared reports whether b is all zero (ib_is_buffer_cleared).
func cleared(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

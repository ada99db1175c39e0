package driver

// CQP wire opcodes (defs.h IRDMA_CQP_OP_*; docs/hw-controlpath.md "CQP
// opcodes"). The opcode sits in the header qword (qw3) bits [37:32]; bit 63
// is the valid bit, set to the ring polarity when the WQE is posted.
const (
	cqpOpCreateQP           uint8 = 0x00
	cqpOpModifyQP           uint8 = 0x01
	cqpOpDestroyQP          uint8 = 0x02
	cqpOpCreateCQ           uint8 = 0x03
	cqpOpModifyCQ           uint8 = 0x04
	cqpOpDestroyCQ          uint8 = 0x05
	cqpOpCreateSRQ          uint8 = 0x06 // GEN_3
	cqpOpModifySRQ          uint8 = 0x07
	cqpOpDestroySRQ         uint8 = 0x08
	cqpOpAllocSTag          uint8 = 0x09
	cqpOpRegMR              uint8 = 0x0a
	cqpOpDeallocSTag        uint8 = 0x0d
	cqpOpManageARP          uint8 = 0x0f
	cqpOpManagePushPages    uint8 = 0x11
	cqpOpQueryRDMAFeatures  uint8 = 0x12
	cqpOpCreateCEQ          uint8 = 0x16
	cqpOpDestroyCEQ         uint8 = 0x18
	cqpOpCreateAEQ          uint8 = 0x19
	cqpOpDestroyAEQ         uint8 = 0x1b
	cqpOpCreateAddrHandle   uint8 = 0x1c
	cqpOpDestroyAddrHandle  uint8 = 0x1e
	cqpOpUpdatePESDs        uint8 = 0x1f
	cqpOpQueryFPMVal        uint8 = 0x20
	cqpOpCommitFPMVal       uint8 = 0x21
	cqpOpFlushWQEs          uint8 = 0x22
	cqpOpCreateMcastGrp     uint8 = 0x26
	cqpOpModifyMcastGrp     uint8 = 0x27
	cqpOpDestroyMcastGrp    uint8 = 0x28
	cqpOpSuspendQP          uint8 = 0x29
	cqpOpResumeQP           uint8 = 0x2a
	cqpOpSHMCPagesAllocated uint8 = 0x2b
	cqpOpWorkSchedNode      uint8 = 0x2c
	cqpOpManageStats        uint8 = 0x2d
	cqpOpGatherStats        uint8 = 0x2e
)

// Common header bits (defs.h IRDMA_CQPSQ_OPCODE, IRDMA_CQPSQ_WQEVALID).
const (
	cqpHdrOpcodeShift = 32
	cqpHdrValid       = uint64(1) << 63
)

// QP states as the hardware knows them ("iwarp states", defs.h
// IRDMA_QP_STATE_*; docs/hw-controlpath.md "QP types and states"). They go
// into NEXTIWSTATE.
const (
	qpHWStateInvalid   uint8 = 0
	qpHWStateIdle      uint8 = 1
	qpHWStateRTS       uint8 = 2
	qpHWStateClosing   uint8 = 3 // SQD on RoCE
	qpHWStateRTR       uint8 = 4
	qpHWStateTerminate uint8 = 5
	qpHWStateError     uint8 = 6
)

// QP types (defs.h IRDMA_QP_TYPE_*).
const (
	qpTypeRoCERC uint8 = 3
	qpTypeRoCEUD uint8 = 4
)

// Sizes and alignments (defs.h, user.h, main.h; docs/hw-controlpath.md "CQP
// ring", "CCQ", "Event queues"). The FPM and feature buffer sizes differ
// between kernels ("FPM WQEs", "Feature query"); these are the GEN_3-era
// values.
const (
	cqpWQESize        = 64    // IRDMA_CQP_WQE_SIZE × 8
	cqpSQSize         = 2048  // IRDMA_CQP_SW_SQSIZE_2048
	cqpAlign          = 0x200 // IRDMA_CQP_ALIGNMENT
	cqpHostCtxSize    = 64    // struct irdma_cqp_ctx
	cqpSDBufPerWQE    = 128   // IRDMA_UPDATE_SD_BUFF_SIZE: overflow buffer per CQP slot
	maxSDEntries      = 11    // IRDMA_MAX_SD_ENTRIES per UPDATE_PE_SDS
	cqeSize           = 32    // struct irdma_cqe (GEN_2)
	ccqSize           = 2050  // IW_CCQ_SIZE = 2048 + 2
	cq0Align          = 0x100 // IRDMA_CQ0_ALIGNMENT
	shadowAreaSize    = 64    // IRDMA_SHADOW_AREA_SIZE × 8
	ceqeSize          = 8     // IRDMA_CEQE_SIZE
	aeqeSize          = 16    // IRDMA_AEQE_SIZE
	eqAlign           = 256   // IRDMA_CEQ_ALIGNMENT, IRDMA_AEQ_ALIGNMENT
	qpCtxSize         = 256   // IRDMA_QP_CTX_SIZE
	q2BufSize         = 256   // IRDMA_Q2_BUF_SIZE
	qpWQEMinSize      = 32    // IRDMA_QP_WQE_MIN_SIZE (a quantum)
	hmcDirectBPSize   = 2 << 20
	hmcMaxBPCount     = 512 // IRDMA_HMC_MAX_BP_COUNT
	fpmQueryBufSize   = 200 // IRDMA_QUERY_FPM_BUF_SIZE (GEN_3-era value; a GEN_2 device writes 176)
	fpmCommitBufSize  = 208 // IRDMA_COMMIT_FPM_BUF_SIZE
	featureBufAlign   = 16  // IRDMA_FEATURE_BUF_ALIGNMENT
	maxFeatures       = 34  // IRDMA_MAX_FEATURES, type.h enum irdma_feature_type
	gatherStatsBuf    = 1024
	maxMgsPerCtx      = 8    // IRDMA_MAX_MGS_PER_CTX
	udaMaxFSIMgs      = 4096 // IRDMA_UDA_MAX_FSI_MGS
	pblePerPage       = 512  // PBLE_PER_PAGE
	maxStagIndexBits  = 24
	invalidPushIdx    = 0xffffffff // IRDMA_INVALID_PUSH_PAGE_INDEX
	roceV2UDPDPort    = 4791       // ROCE_V2_UDP_DPORT
	roceSrcPortMin    = 0xc000     // IB_ROCE_UDP_ENCAP_VALID_PORT_MIN
	defaultPKey       = 0xffff     // IRDMA_DEFAULT_PKEY
	roceCWndDefault   = 0x400      // IRDMA_ROCE_CWND_DEFAULT
	roceAckCredsDflt  = 0x1e       // IRDMA_ROCE_ACKCREDS_DEFAULT
	maxWSNodes        = 0x3ff      // IRDMA_MAX_WS_NODES
	maxUserPriority   = 8          // IRDMA_MAX_USER_PRIORITY
	maxCQReadThresh   = 0x3ffff    // IRDMA_MAX_CQ_READ_THRESH
	ccqReadThreshold  = 16         // irdma_create_ccq shadow_read_threshold
	hmcProfileDefault = 1          // IRDMA_HMC_PROFILE_DEFAULT
	protocolRoCEOnly  = 2          // IRDMA_ROCE_PROTOCOL_ONLY
	fpmMultiplier     = 1024       // FPM_MULTIPLIER
)

// CQP completion error codes the driver interprets (defs.h, main.h;
// docs/hw-controlpath.md "CQP error codes", "FLUSH_WQES and GEN_AE").
const (
	cqpComplRQWQEFlushed = 2 // IRDMA_CQP_COMPL_RQ_WQE_FLUSHED
	cqpComplSQWQEFlushed = 3 // IRDMA_CQP_COMPL_SQ_WQE_FLUSHED
)

// Flush codes (user.h enum irdma_flush_opcode) and the flush major code.
const (
	flushMajorErr      uint16 = 1 // IRDMA_FLUSH_MAJOR_ERR
	flushGeneralErr    uint16 = 1
	flushProtErr       uint16 = 2
	flushRemAccessErr  uint16 = 3
	flushLocQPOpErr    uint16 = 4
	flushRemOpErr      uint16 = 5
	flushLocLenErr     uint16 = 6
	flushFatalErr      uint16 = 7
	flushRetryExcErr   uint16 = 8
	flushMWBindErr     uint16 = 9
	flushRemInvReqErr  uint16 = 10
	flushRNRRetryExcEr uint16 = 11
)

// HMC object types (hmc.h enum irdma_hmc_rsrc_type; docs/hw-controlpath.md
// "HMC object types").
const (
	hmcQP = iota
	hmcCQ
	hmcSRQ
	hmcHTE
	hmcARP
	hmcAPBVT
	hmcMR
	hmcXF
	hmcXFFL
	hmcQ1
	hmcQ1FL
	hmcTimer
	hmcFSIMC
	hmcFSIAV
	hmcPBLE
	hmcRRF
	hmcRRFFL
	hmcHDR
	hmcMD
	hmcOOISC
	hmcOOISCFFL
	hmcMax
)

var hmcNames = [hmcMax]string{
	"QP", "CQ", "SRQ", "HTE", "ARP", "APBVT", "MR", "XF", "XFFL", "Q1", "Q1FL",
	"TIMER", "FSIMC", "FSIAV", "PBLE", "RRF", "RRFFL", "HDR", "MD", "OOISC", "OOISCFFL",
}

// Access rights the REG_MR/ALLOC_STAG ARIGHTS field carries (user.h
// IRDMA_ACCESS_FLAGS_*; docs/hw-controlpath.md "Access rights").
const (
	accessLocalRead   uint8 = 0x01
	accessLocalWrite  uint8 = 0x02
	accessRemoteRead  uint8 = 0x05 // REMOTEREAD_ONLY | LOCALREAD
	accessRemoteWrite uint8 = 0x0a // REMOTEWRITE_ONLY | LOCALWRITE
	accessBindWindow  uint8 = 0x10
	accessZeroBased   uint8 = 0x20
	accessRemoteOnly  uint8 = 0x04 | 0x08
)

// Asynchronous event codes the driver acts on (user.h/defs.h IRDMA_AE_*;
// docs/hw-controlpath.md "AE codes").
const (
	aeAMPUnallocatedSTag      uint16 = 0x0102
	aeAMPInvalidSTag          uint16 = 0x0103
	aeAMPBadQP                uint16 = 0x0104
	aeAMPBadPD                uint16 = 0x0105
	aeAMPBadSTagKey           uint16 = 0x0106
	aeAMPBadSTagIndex         uint16 = 0x0107
	aeAMPBoundsViolation      uint16 = 0x0108
	aeAMPRightsViolation      uint16 = 0x0109
	aeAMPToWrap               uint16 = 0x010a
	aeAMPInvNoRemoteRights    uint16 = 0x0112
	aeAMPMWBindInvalidRights  uint16 = 0x0118
	aeAMPMWBindInvalidBounds  uint16 = 0x0119
	aeAMPMWBindBindDisabled   uint16 = 0x011b
	aePrivOperationDenied     uint16 = 0x011c
	aeUDAXmitDgramTooLong     uint16 = 0x0132
	aeUDAXmitBadPD            uint16 = 0x0133
	aeUDAXmitDgramTooShort    uint16 = 0x0134
	aeUDAL4LenInvalid         uint16 = 0x0135
	aeCQOperationError        uint16 = 0x0203
	aeSTagZeroInvalid         uint16 = 0x0206
	aeIBRReqAndQ1Full         uint16 = 0x0207
	aeIBInvalidRequest        uint16 = 0x0208
	aeWQEUnexpectedOpcode     uint16 = 0x020a
	aeIBRemoteAccessError     uint16 = 0x020d
	aeIBRemoteOpError         uint16 = 0x020e
	aeDDPUBEInvalidMO         uint16 = 0x0305
	aeROCERspLengthError      uint16 = 0x0316
	aeInvalidARPEntry         uint16 = 0x0401
	aeStaleARPEntry           uint16 = 0x0403
	aeLLPReceivedMPACRCError  uint16 = 0x0505
	aeLLPSegmentTooSmall      uint16 = 0x0507
	aeLLPTooManyRetries       uint16 = 0x050a
	aeLLPDoubtReachability    uint16 = 0x050c
	aeLLPTooManyRNRs          uint16 = 0x050f
	aeResourceExhaustion      uint16 = 0x0520
	aeSRQLimit                uint16 = 0x0209 // IRDMA_AE_SRQ_LIMIT (GEN_3)
	aeSRQCatastrophic         uint16 = 0x020f // IRDMA_AE_SRQ_CATASTROPHIC_ERROR (GEN_3)
	aeResetNotSent            uint16 = 0x0603
	aeLCEQPCatastrophic       uint16 = 0x0700
	aeLCEFunctionCatastrophic uint16 = 0x0701
	aeLCECQCatastrophic       uint16 = 0x0702
	aeQPSuspendComplete       uint16 = 0x0900
)

// AE sources (defs.h IRDMA_AE_SOURCE_*; docs/hw-controlpath.md "AEQE").
const (
	aeSrcRsvd   = 0x0
	aeSrcRQ     = 0x1
	aeSrcRQ0011 = 0x3
	aeSrcCQ     = 0x2
	aeSrcCQ0110 = 0x6
	aeSrcCQ1010 = 0xa
	aeSrcCQ1110 = 0xe
	aeSrcSQ     = 0x5
	aeSrcSQ0111 = 0x7
	aeSrcInRRWR = 0x9
	aeSrcInRR   = 0xb
	aeSrcOutRR  = 0xd
	aeSrcOutRRF = 0xf
)

package rdmacm

import "encoding/binary"

// The /dev/infiniband/rdma_cm command ABI: the kernel's
// include/uapi/rdma/rdma_user_cm.h (RDMA_USER_CM_ABI_VERSION 4), as
// librdmacm 44 (librdmacm/rdma_cma_abi.h, librdmacm/cma.c) writes it. Every
// command is one write() of struct rdma_ucm_cmd_hdr followed by the
// command's body; offsets below are into the body (the kernel's struct,
// without the header), measured with the installed uapi headers.

// ABIVersion is class/misc/rdma_cm/abi_version (RDMA_USER_CM_ABI_VERSION);
// librdmacm accepts 3 and 4 (check_abi_version).
const ABIVersion = 4

// HdrSize is sizeof(struct rdma_ucm_cmd_hdr): u32 cmd, u16 in, u16 out.
const HdrSize = 8

// Commands (enum in rdma_user_cm.h; ucma.c ucma_cmd_table).
const (
	CmdCreateID     = 0
	CmdDestroyID    = 1
	CmdBindIP       = 2
	CmdResolveIP    = 3
	CmdResolveRoute = 4
	CmdQueryRoute   = 5
	CmdConnect      = 6
	CmdListen       = 7
	CmdAccept       = 8
	CmdReject       = 9
	CmdDisconnect   = 10
	CmdInitQPAttr   = 11
	CmdGetEvent     = 12
	CmdGetOption    = 13 // no handler in the kernel: ENOSYS
	CmdSetOption    = 14
	CmdNotify       = 15
	CmdJoinIPMcast  = 16
	CmdLeaveMcast   = 17
	CmdMigrateID    = 18
	CmdQuery        = 19
	CmdBind         = 20
	CmdResolveAddr  = 21
	CmdJoinMcast    = 22
	// CmdResolveIBService (23) resolves an IB service through the SA,
	// which RoCE has none of: it reaches dispatch and gets EINVAL.
	CmdResolveIBService = 23
	CmdWriteCMEvent     = 24 // ucma.c ucma_write_cm_event (Linux 6.18)
	numCmds             = 25

	// CmdChannel is not a kernel command: the preload's first command on a
	// new rdma_cm connection, answered with the channel's readiness pipe
	// and token (docs/cm.md "The channel"). It lies far outside the
	// kernel's table, so a program that writes it gets EINVAL from a
	// kernel; here it is accepted once, first.
	CmdChannel = 0x49454d01
)

// Command body sizes (sizeof the kernel's struct rdma_ucm_*).
const (
	sizeCreateID     = 24
	sizeDestroyID    = 16
	sizeBindIP       = 40
	sizeBind         = 136
	sizeResolveIP    = 64
	sizeResolveAddr  = 272
	sizeResolveRoute = 8
	sizeQuery        = 16
	sizeConnect      = 288
	sizeListen       = 8
	sizeAccept       = 296
	sizeReject       = 264
	sizeDisconnect   = 4
	sizeInitQPAttr   = 16
	sizeNotify       = 8
	sizeJoinIPMcast  = 48
	sizeJoinMcast    = 152
	sizeGetEvent     = 8
	sizeSetOption    = 24
	sizeMigrateID    = 16
	sizeWriteCMEvent = 16 + sizeUDParam // id, reserved, event, status, param (the ud param is the largest)

	sizeCreateIDResp   = 4
	sizeDestroyIDResp  = 4
	sizeQueryRouteResp = 208
	sizeQueryAddrResp  = 280
	sizeQueryPathResp  = 8  // num_paths, reserved; then ib_path_rec_data[]
	sizePathRecData    = 72 // u32 flags, reserved; u32 path_rec[16]
	sizeEventResp      = 336
	sizeQPAttr         = 144 // struct ib_uverbs_qp_attr
	sizeUserPathRec    = 64  // struct ib_user_path_rec
	sizeMigrateResp    = 4
	sizeConnParam      = 272
	sizeUDParam        = 304
	sizeSockaddrIn6    = 28
	sizeSockaddrStore  = 128
)

// struct rdma_ucm_conn_param offsets.
const (
	cpQPN            = 0
	cpQKey           = 4
	cpPrivateData    = 8
	cpPrivateDataLen = 264
	cpSRQ            = 265
	cpRespRes        = 266
	cpInitDepth      = 267
	cpFlowControl    = 268
	cpRetryCount     = 269
	cpRNRRetryCount  = 270
	cpValid          = 271
)

// struct rdma_ucm_ud_param offsets.
const (
	udQPN            = 0
	udQKey           = 4
	udAHAttr         = 8 // struct ib_uverbs_ah_attr, 32 bytes
	udPrivateData    = 40
	udPrivateDataLen = 296
)

// struct rdma_ucm_event_resp offsets.
const (
	evUID    = 0
	evID     = 8
	evEvent  = 12
	evStatus = 16
	evParam  = 20
	evECE    = 328
)

// PrivateDataMax is RDMA_MAX_PRIVATE_DATA, the private_data field of the
// ABI's conn/ud params.
const PrivateDataMax = 256

// Port spaces (enum rdma_ucm_port_space).
const (
	PSIPoIB = 0x0002
	PSIB    = 0x013F
	PSTCP   = 0x0106
	PSUDP   = 0x0111
)

// QP types of CREATE_ID (enum ib_uverbs_qp_type).
const (
	qptRC = 2
	qptUD = 4
)

// Event types (enum rdma_cm_event_type).
const (
	EventAddrResolved    = 0
	EventAddrError       = 1
	EventRouteResolved   = 2
	EventRouteError      = 3
	EventConnectRequest  = 4
	EventConnectResponse = 5
	EventConnectError    = 6
	EventUnreachable     = 7
	EventRejected        = 8
	EventEstablished     = 9
	EventDisconnected    = 10
	EventDeviceRemoval   = 11
	EventMulticastJoin   = 12
	EventMulticastError  = 13
	EventAddrChange      = 14
	EventTimewaitExit    = 15
	// EventUser and EventInternal are the two a program may write into
	// its own channel (WRITE_CM_EVENT): rdma_write_cm_event's, and
	// librdmacm's own ADDRINFO_RESOLVED of rdma_resolve_addrinfo.
	EventUser     = 18
	EventInternal = 19
)

// QUERY options (RDMA_USER_CM_QUERY_*).
const (
	queryAddr = 0
	queryPath = 1
	queryGID  = 2
)

// SET_OPTION levels and names (rdma_user_cm.h).
const (
	optLevelID      = 0
	optLevelIB      = 1
	optIDTOS        = 0
	optIDReuseAddr  = 1
	optIDAFOnly     = 2
	optIDAckTimeout = 3
	optIBPath       = 1
)

// Multicast join flags (enum rdma_ucm_join_flags... RDMA_MC_JOIN_FLAG_*).
const (
	joinFullMember         = 0
	joinSendOnlyFullMember = 1
)

// UDPQKey is RDMA_UDP_QKEY: the Q_Key of RDMA CM's UDP port space.
const UDPQKey = 0x01234567

// ib_uverbs_qp_attr offsets.
const (
	qaMask          = 0
	qaState         = 4
	qaPathMTU       = 12
	qaQKey          = 20
	qaRQPSN         = 24
	qaSQPSN         = 28
	qaDestQPN       = 32
	qaAccessFlags   = 36
	qaAHAttr        = 40
	qaPKeyIndex     = 124
	qaMaxRdAtomic   = 130
	qaMaxDestRdAtom = 131
	qaMinRNRTimer   = 132
	qaPortNum       = 133
	qaTimeout       = 134
	qaRetryCnt      = 135
	qaRNRRetry      = 136
)

// ib_uverbs_ah_attr offsets (grh first).
const (
	ahDGID         = 0
	ahFlowLabel    = 16
	ahSGIDIndex    = 20
	ahHopLimit     = 21
	ahTrafficClass = 22
	ahDLID         = 24
	ahSL           = 26
	ahIsGlobal     = 29
	ahPortNum      = 30
)

// ib_user_path_rec offsets.
const (
	prDGID         = 0
	prSGID         = 16
	prFlowLabel    = 40
	prReversible   = 44
	prMTU          = 48
	prPKey         = 52
	prHopLimit     = 54
	prTrafficClass = 55
	prNumbPath     = 56
	prMTUSelector  = 58
	prRateSelector = 59
	prRate         = 60
	prPLTSelector  = 61
	prPacketLife   = 62
)

var le = binary.LittleEndian
var be = binary.BigEndian

package uk

// FlushCode is irdma_flush_opcode (user.h): the minor error of a flush CQE
// (docs/hw-datapath.md "Flush codes").
type FlushCode uint16

// Flush codes.
const (
	FlushInvalid        FlushCode = 0
	FlushGeneralErr     FlushCode = 1
	FlushProtErr        FlushCode = 2
	FlushRemAccessErr   FlushCode = 3
	FlushLocQPOpErr     FlushCode = 4
	FlushRemOpErr       FlushCode = 5
	FlushLocLenErr      FlushCode = 6
	FlushFatalErr       FlushCode = 7
	FlushRetryExcErr    FlushCode = 8
	FlushMWBindErr      FlushCode = 9
	FlushRemInvReqErr   FlushCode = 10
	FlushRNRRetryExcErr FlushCode = 11
)

// AEToFlushCode is the flush half of irdma_ae_to_qp_err_code (user.h;
// docs/hw-datapath.md "AE to flush code"): the flush minor code an
// asynchronous event leads to. The uk poll uses it for GEN_3's 0xfffe flush
// CQEs, whose minor is an AE code.
func AEToFlushCode(ae uint16) FlushCode {
	switch ae {
	case 0x0108, 0x0103, 0x0109, 0x0102, 0x0105, 0x0104, 0x0106, 0x0107, 0x010a, 0x011c:
		return FlushProtErr
	case 0x0133, 0x020a:
		return FlushLocQPOpErr
	case 0x0134, 0x0132, 0x0135, 0x0305, 0x0303:
		return FlushLocLenErr
	case 0x0112, 0x020d:
		return FlushRemAccessErr
	case 0x0118, 0x011b, 0x0119, 0x0114:
		return FlushMWBindErr
	case 0x050a:
		return FlushRetryExcErr
	case 0x0208:
		return FlushRemInvReqErr
	case 0x0507, 0x0505, 0x0316, 0x020e:
		return FlushRemOpErr
	case 0x050f:
		return FlushRNRRetryExcErr
	case 0x0700, 0x0703, 0x0704, 0x0705:
		return FlushFatalErr
	}
	return FlushGeneralErr
}

// WCStatus is ib_wc_status.
type WCStatus uint8

// Work-completion statuses (enum ib_wc_status order).
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRDReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

var wcStatusNames = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
}

// String is ibv_wc_status_str.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return "unknown"
}

// FlushErrToWCStatus is irdma_flush_err_to_ib_wc_status (docs/hw-datapath.md
// "Flush codes").
func FlushErrToWCStatus(c FlushCode) WCStatus {
	switch c {
	case FlushProtErr:
		return WCLocProtErr
	case FlushRemAccessErr:
		return WCRemAccessErr
	case FlushLocQPOpErr:
		return WCLocQPOpErr
	case FlushRemOpErr:
		return WCRemOpErr
	case FlushLocLenErr:
		return WCLocLenErr
	case FlushGeneralErr:
		return WCWRFlushErr
	case FlushRetryExcErr:
		return WCRetryExcErr
	case FlushMWBindErr:
		return WCMWBindErr
	case FlushRemInvReqErr:
		return WCRemInvReqErr
	case FlushRNRRetryExcErr:
		return WCRNRRetryExcErr
	}
	return WCFatalErr
}

// WCOpcode is ib_wc_opcode.
type WCOpcode uint8

// Work-completion opcodes (enum ib_wc_opcode values).
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRegMR           WCOpcode = 8
	WCRecv            WCOpcode = 1 << 7
	WCRecvRDMAWithImm WCOpcode = WCRecv + 1
)

// WCFlags are ib_wc_flags.
type WCFlags uint8

// Work-completion flags.
const (
	WCGRH            WCFlags = 1
	WCWithImm        WCFlags = 2
	WCWithInvalidate WCFlags = 4
	WCWithSMAC       WCFlags = 16
	WCWithVLAN       WCFlags = 32
	WCWithNetHdrType WCFlags = 64
)

// IB BTH opcodes of RC/UD requests that carry an immediate with an RDMA
// WRITE (IBTA 9.2): what a GEN_2 RoCE RQ CQE reports in IRDMACQ_OP.
const (
	bthRCWriteLastImm = 0x09
	bthRCWriteOnlyImm = 0x0b
)

// WorkCompletion is the ib_wc the kernel's irdma_process_cqe fills.
type WorkCompletion struct {
	WrID       uint64
	Status     WCStatus
	Opcode     WCOpcode
	VendorErr  uint32 // major << 16 | minor
	ByteLen    uint32
	QPNum      uint32
	SrcQP      uint32
	Flags      WCFlags
	ImmData    uint32 // host order; the ib_wc holds htonl of it
	InvRKey    uint32
	SMAC       [6]byte
	VLANID     uint16
	SL         uint8
	NetHdrIPv4 bool // network_hdr_type: IPv4 (else IPv6) on UD
}

// ProcessCQE is the kernel's irdma_process_cqe for GEN_2 (docs/hw-datapath.md
// "How software consumes a CQE"): status from the error and flush code,
// opcode from the SQ WQE opcode or, on the RQ, from the received BTH opcode,
// UD source QP and L2 fields.
func ProcessCQE(info *CQPollInfo) WorkCompletion {
	wc := WorkCompletion{WrID: info.WrID, ByteLen: info.BytesXfered, QPNum: info.QPID}
	if info.Error {
		wc.Status = WCGeneralErr
		if info.CompStatus == CompFlushed {
			wc.Status = FlushErrToWCStatus(FlushCode(info.MinorErr))
		}
		wc.VendorErr = uint32(info.MajorErr)<<16 | uint32(info.MinorErr)
	} else {
		if info.ImmValid {
			wc.ImmData = info.ImmData
			wc.Flags |= WCWithImm
		}
		if info.UDSMACValid {
			wc.SMAC = info.UDSMAC
			wc.Flags |= WCWithSMAC
		}
		if info.UDVLANValid {
			wc.VLANID = info.UDVLAN & 0x0fff // VLAN_VID_MASK
			wc.SL = uint8(info.UDVLAN >> 13) // VLAN_PRIO_SHIFT
			wc.Flags |= WCWithVLAN
		}
	}
	ud := info.QP != nil && info.QP.typ == QPTypeUD
	if info.IsSQ {
		switch info.OpType {
		case OpRDMAWrite, OpRDMAWriteSol:
			wc.Opcode = WCRDMAWrite
		case OpRDMARead, OpRDMAReadInvSTag:
			wc.Opcode = WCRDMARead
		case OpSend, OpSendSol, OpSendInv, OpSendSolInv:
			wc.Opcode = WCSend
		case OpFastRegNSMR:
			wc.Opcode = WCRegMR
		case OpInvSTag:
			wc.Opcode = WCLocalInv
		case OpAtomicCompareSwap:
			wc.Opcode = WCCompSwap
		case OpAtomicFetchAdd:
			wc.Opcode = WCFetchAdd
		default:
			wc.Status = WCGeneralErr
		}
	} else {
		wc.Opcode = WCRecv
		if info.OpType == bthRCWriteLastImm || info.OpType == bthRCWriteOnlyImm || info.OpType == OpRecImm {
			wc.Opcode = WCRecvRDMAWithImm
		}
		if !ud && info.StagInvalidSet {
			wc.InvRKey = info.InvSTag
			wc.Flags |= WCWithInvalidate
		}
	}
	if ud {
		wc.SrcQP = info.UDSrcQPN
		wc.Flags |= WCGRH | WCWithNetHdrType
		wc.NetHdrIPv4 = info.IPv4
	} else {
		wc.SrcQP = info.QPID
	}
	return wc
}

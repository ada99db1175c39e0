package qp

import "github.com/irdma-emu/irdma-emu/emu/cq"

// Asynchronous event codes the transport raises besides the WQE violations
// (wqe_violation.go), emu/mr's memory codes and emu/ah's address codes
// (irdma user.h "Async Events codes"; docs/hw-controlpath.md "AE codes").
const (
	AERDMAReadWhileORDZero  uint16 = 0x0205 // IRDMA_AE_RDMA_READ_WHILE_ORD_ZERO
	AEIBInvalidRequest      uint16 = 0x0208 // IRDMA_AE_IB_INVALID_REQUEST: the peer NAKed "invalid request"
	AEIBRemoteAccessError   uint16 = 0x020d // IRDMA_AE_IB_REMOTE_ACCESS_ERROR: the peer NAKed "remote access"
	AEIBRemoteOpError       uint16 = 0x020e // IRDMA_AE_IB_REMOTE_OP_ERROR: the peer NAKed "remote operational"
	AEInvalidRequest        uint16 = 0x0223 // IRDMA_AE_INVALID_REQUEST: we found the peer's request invalid
	AEUDAXmitDgramTooLong   uint16 = 0x0132 // IRDMA_AE_UDA_XMIT_DGRAM_TOO_LONG
	AEUDAXmitBadPD          uint16 = 0x0133 // IRDMA_AE_UDA_XMIT_BAD_PD
	AEMsgTooLongForBuffer   uint16 = 0x0303 // IRDMA_AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER
	AERoCERspLengthError    uint16 = 0x0316 // IRDMA_AE_ROCE_RSP_LENGTH_ERROR
	AELLPTooManyRetries     uint16 = 0x050a // IRDMA_AE_LLP_TOO_MANY_RETRIES
	AELLPTooManyRNRs        uint16 = 0x050f // IRDMA_AE_LLP_TOO_MANY_RNRS
	AELCEQPCatastrophic     uint16 = 0x0700 // IRDMA_AE_LCE_QP_CATASTROPHIC
	AEPrivOperationDenied   uint16 = 0x011c // IRDMA_AE_PRIV_OPERATION_DENIED
	AEInvalidARPEntry       uint16 = 0x0401 // IRDMA_AE_INVALID_ARP_ENTRY
	AEInvalidAHEntry        uint16 = 0x0406 // IRDMA_AE_INVALID_AH_ENTRY
	aeInvalidateNoRemoteAcc uint16 = 0x0112
)

// FlushCodeForAE is irdma_ae_to_qp_err_code (user.h; docs/hw-datapath.md "AE
// to flush code"): the flush code the driver puts into FLUSH_WQES for a QP
// that raised ae. The device writes the error CQE of the WQE that failed with
// major IRDMA_FLUSH_MAJOR_ERR and this minor, so that software reports the
// work-completion status irdma_flush_err_to_ib_wc_status gives it ("Flush
// codes"): a major other than 1 would only ever read as IB_WC_GENERAL_ERR
// ("CQE error codes").
func FlushCodeForAE(ae uint16) uint16 {
	switch ae {
	case 0x0108, 0x0103, 0x0109, 0x0102, 0x0105, 0x0104, 0x0106, 0x0107, 0x010a, 0x011c:
		return cq.FlushProtErr
	case 0x0133, 0x020a:
		return cq.FlushLocQPOpErr
	case 0x0134, 0x0132, 0x0135, 0x0305, 0x0303:
		return cq.FlushLocLenErr
	case 0x0112, 0x020d:
		return cq.FlushRemAccessErr
	case 0x0118, 0x011b, 0x0119, 0x0114:
		return cq.FlushMWBindErr
	case 0x050a:
		return cq.FlushRetryExcErr
	case 0x0208:
		return cq.FlushRemInvReqErr
	case 0x0507, 0x0505, 0x0316, 0x020e:
		return cq.FlushRemOpErr
	case 0x050f:
		return cq.FlushRNRRetryExErr
	case 0x0700, 0x0703, 0x0704, 0x0705:
		return cq.FlushFatalErr
	}
	return cq.FlushGeneralErr
}

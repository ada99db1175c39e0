package qp_test

import (
	"fmt"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// TestFlushCodeForAE pins the AE → flush minor code map the device writes
// into the error CQE of the WQE that failed. Every value is written by
// hand: the AE codes from the "Async Events codes" of the Linux driver's
// drivers/infiniband/hw/irdma/user.h, the flush codes from the same
// header's enum irdma_flush_opcode (FLUSH_GENERAL_ERR 1 … FLUSH_RNR_RETRY_EXC_ERR
// 11) as irdma_ae_to_qp_err_code (user.h) assigns them; an AE that
// function does not name gets its default, FLUSH_GENERAL_ERR.
//
// The rows with a device constant cover every AE the device raises for a
// QP: emu/qp's own codes, the WQE violations' codes, and every emu/mr code
// (a translation error reaches the QP as its AE). The constant is checked
// against the hand-written AE too, so a mistyped constant cannot hide
// behind a map that agrees with it. The rows without one are the rest of
// irdma_ae_to_qp_err_code's cases, so the whole upstream table is pinned.
func TestFlushCodeForAE(t *testing.T) {
	const none = -1 // no device constant: an upstream case the device does not raise
	cases := []struct {
		name   string // the IRDMA_AE_* name
		device int    // the device's constant for it, or none
		ae     uint16 // user.h
		flush  uint16 // irdma_ae_to_qp_err_code
	}{
		// emu/qp
		{"RDMA_READ_WHILE_ORD_ZERO", int(qp.AERDMAReadWhileORDZero), 0x0205, 1},
		{"IB_INVALID_REQUEST", int(qp.AEIBInvalidRequest), 0x0208, 10},
		{"IB_REMOTE_ACCESS_ERROR", int(qp.AEIBRemoteAccessError), 0x020d, 3},
		{"IB_REMOTE_OP_ERROR", int(qp.AEIBRemoteOpError), 0x020e, 5},
		{"INVALID_REQUEST", int(qp.AEInvalidRequest), 0x0223, 1},
		{"UDA_XMIT_DGRAM_TOO_LONG", int(qp.AEUDAXmitDgramTooLong), 0x0132, 6},
		{"UDA_XMIT_BAD_PD", int(qp.AEUDAXmitBadPD), 0x0133, 4},
		{"DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER", int(qp.AEMsgTooLongForBuffer), 0x0303, 6},
		{"ROCE_RSP_LENGTH_ERROR", int(qp.AERoCERspLengthError), 0x0316, 5},
		{"LLP_TOO_MANY_RETRIES", int(qp.AELLPTooManyRetries), 0x050a, 8},
		{"LLP_TOO_MANY_RNRS", int(qp.AELLPTooManyRNRs), 0x050f, 11},
		{"LCE_QP_CATASTROPHIC", int(qp.AELCEQPCatastrophic), 0x0700, 7},
		{"PRIV_OPERATION_DENIED", int(qp.AEPrivOperationDenied), 0x011c, 2},
		{"INVALID_ARP_ENTRY", int(qp.AEInvalidARPEntry), 0x0401, 1},
		{"INVALID_AH_ENTRY", int(qp.AEInvalidAHEntry), 0x0406, 1},
		{"WQE_UNEXPECTED_OPCODE", int(qp.AEWQEUnexpectedOpcode), 0x020a, 4},
		{"WQE_INVALID_PARAMETER", int(qp.AEWQEInvalidParameter), 0x020b, 1},
		{"WQE_INVALID_FRAG_DATA", int(qp.AEWQEInvalidFragData), 0x020c, 1},
		// emu/cq's copies of QP codes
		{"LCE_QP_CATASTROPHIC (cq)", int(cq.AELCEQPCatastrophic), 0x0700, 7},
		{"WQE_UNEXPECTED_OPCODE (cq)", int(cq.AEWQEUnexpectedOp), 0x020a, 4},
		{"LLP_TOO_MANY_RETRIES (cq)", int(cq.AELLPTooManyRetries), 0x050a, 8},
		// emu/mr
		{"AMP_UNALLOCATED_STAG", int(mr.AEUnallocatedSTag), 0x0102, 2},
		{"AMP_INVALID_STAG", int(mr.AEInvalidSTag), 0x0103, 2},
		{"AMP_BAD_QP", int(mr.AEBadQP), 0x0104, 2},
		{"AMP_BAD_PD", int(mr.AEBadPD), 0x0105, 2},
		{"AMP_BAD_STAG_KEY", int(mr.AEBadSTagKey), 0x0106, 2},
		{"AMP_BAD_STAG_INDEX", int(mr.AEBadSTagIndex), 0x0107, 2},
		{"AMP_BOUNDS_VIOLATION", int(mr.AEBoundsViolation), 0x0108, 2},
		{"AMP_RIGHTS_VIOLATION", int(mr.AERightsViolation), 0x0109, 2},
		{"AMP_TO_WRAP", int(mr.AEToWrap), 0x010a, 2},
		{"AMP_FASTREG_VALID_STAG", int(mr.AEFastRegValidSTag), 0x010c, 1},
		{"AMP_FASTREG_MW_STAG", int(mr.AEFastRegMWSTag), 0x010d, 1},
		{"AMP_FASTREG_INVALID_RIGHTS", int(mr.AEFastRegInvalidRights), 0x010e, 1},
		{"AMP_FASTREG_INVALID_LENGTH", int(mr.AEFastRegInvalidLength), 0x0110, 1},
		{"AMP_INVALIDATE_SHARED", int(mr.AEInvalidateShared), 0x0111, 1},
		{"AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS", int(mr.AEInvalidateNoRemoteAccessRights), 0x0112, 3},
		{"AMP_INVALIDATE_MR_WITH_BOUND_WINDOWS", int(mr.AEInvalidateMRWithBoundWindows), 0x0113, 1},
		{"AMP_MWBIND_VALID_STAG", int(mr.AEMWBindValidSTag), 0x0114, 9},
		{"AMP_MWBIND_OF_MR_STAG", int(mr.AEMWBindOfMRSTag), 0x0115, 1},
		{"AMP_MWBIND_TO_ZERO_BASED_STAG", int(mr.AEMWBindToZeroBasedSTag), 0x0116, 1},
		{"AMP_MWBIND_TO_MW_STAG", int(mr.AEMWBindToMWSTag), 0x0117, 1},
		{"AMP_MWBIND_INVALID_RIGHTS", int(mr.AEMWBindInvalidRights), 0x0118, 9},
		{"AMP_MWBIND_INVALID_BOUNDS", int(mr.AEMWBindInvalidBounds), 0x0119, 9},
		{"AMP_MWBIND_TO_INVALID_PARENT", int(mr.AEMWBindToInvalidParent), 0x011a, 1},
		{"AMP_MWBIND_BIND_DISABLED", int(mr.AEMWBindBindDisabled), 0x011b, 9},
		{"PRIV_OPERATION_DENIED (mr)", int(mr.AEPrivOperationDenied), 0x011c, 2},
		{"AMP_INVALIDATE_TYPE1_MW", int(mr.AEInvalidateType1MW), 0x011d, 1},
		{"AMP_MWBIND_ZERO_BASED_TYPE1_MW", int(mr.AEMWBindZeroBasedType1MW), 0x011e, 1},
		{"AMP_FASTREG_INVALID_PBL_HPS_CFG", int(mr.AEFastRegInvalidPBLHPSCfg), 0x011f, 1},
		{"AMP_MWBIND_WRONG_TYPE", int(mr.AEMWBindWrongType), 0x0120, 1},
		{"AMP_FASTREG_PBLE_MISMATCH", int(mr.AEFastRegPBLEMismatch), 0x0121, 1},
		{"STAG_ZERO_INVALID", int(mr.AESTagZeroInvalid), 0x0206, 1},
		{"LCE_QP_CATASTROPHIC (mr)", int(mr.AELCEQPCatastrophic), 0x0700, 7},
		// irdma_ae_to_qp_err_code's other cases
		{"UDA_XMIT_DGRAM_TOO_SHORT", none, 0x0134, 6},
		{"UDA_L4LEN_INVALID", none, 0x0135, 6},
		{"DDP_UBE_INVALID_MO", none, 0x0305, 6},
		{"LLP_RECEIVED_MPA_CRC_ERROR", none, 0x0505, 5},
		{"LLP_SEGMENT_TOO_SMALL", none, 0x0507, 5},
		{"REMOTE_QP_CATASTROPHIC", none, 0x0703, 7},
		{"LOCAL_QP_CATASTROPHIC", none, 0x0704, 7},
		{"RCE_QP_CATASTROPHIC", none, 0x0705, 7},
		// and its default
		{"BAD_CLOSE", none, 0x0201, 1},
		{"no such AE", none, 0xffff, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%#04x %s", c.ae, c.name), func(t *testing.T) {
			if c.device != none && c.device != int(c.ae) {
				t.Errorf("the device's constant for IRDMA_AE_%s is %#04x, user.h has %#04x", c.name, c.device, c.ae)
			}
			if got := qp.FlushCodeForAE(c.ae); got != c.flush {
				t.Errorf("FlushCodeForAE(%#04x) = %d, irdma_ae_to_qp_err_code gives %d", c.ae, got, c.flush)
			}
		})
	}
}

// TestFlushMinorCodes pins the CQE major and minor codes the device writes
// for an error or flushed WQE to the Linux driver's user.h: major
// IRDMA_FLUSH_MAJOR_ERR, minors enum irdma_flush_opcode. Software reads
// the minor through irdma_flush_err_to_ib_wc_status (verbs.c) only when
// the major is 1, so both values are part of the hardware contract.
func TestFlushMinorCodes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint16
	}{
		{"IRDMA_FLUSH_MAJOR_ERR", cq.MajorFlush, 1},
		{"FLUSH_INVALID", cq.FlushInvalid, 0},
		{"FLUSH_GENERAL_ERR", cq.FlushGeneralErr, 1},
		{"FLUSH_PROT_ERR", cq.FlushProtErr, 2},
		{"FLUSH_REM_ACCESS_ERR", cq.FlushRemAccessErr, 3},
		{"FLUSH_LOC_QP_OP_ERR", cq.FlushLocQPOpErr, 4},
		{"FLUSH_REM_OP_ERR", cq.FlushRemOpErr, 5},
		{"FLUSH_LOC_LEN_ERR", cq.FlushLocLenErr, 6},
		{"FLUSH_FATAL_ERR", cq.FlushFatalErr, 7},
		{"FLUSH_RETRY_EXC_ERR", cq.FlushRetryExcErr, 8},
		{"FLUSH_MW_BIND_ERR", cq.FlushMWBindErr, 9},
		{"FLUSH_REM_INV_REQ_ERR", cq.FlushRemInvReqErr, 10},
		{"FLUSH_RNR_RETRY_EXC_ERR", cq.FlushRNRRetryExErr, 11},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d, user.h has %d", c.name, c.got, c.want)
		}
	}
}

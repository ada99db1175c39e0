package client

import (
	"fmt"

	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// WCStatus is ibv_wc_status; the values and names are driver/uk's (the
// kernel's ib_wc_status has the same numbering).
type WCStatus = uk.WCStatus

// Work-completion statuses.
const (
	WCSuccess        = uk.WCSuccess
	WCLocLenErr      = uk.WCLocLenErr
	WCLocQPOpErr     = uk.WCLocQPOpErr
	WCLocEECOpErr    = uk.WCLocEECOpErr
	WCLocProtErr     = uk.WCLocProtErr
	WCWRFlushErr     = uk.WCWRFlushErr
	WCMWBindErr      = uk.WCMWBindErr
	WCBadRespErr     = uk.WCBadRespErr
	WCLocAccessErr   = uk.WCLocAccessErr
	WCRemInvReqErr   = uk.WCRemInvReqErr
	WCRemAccessErr   = uk.WCRemAccessErr
	WCRemOpErr       = uk.WCRemOpErr
	WCRetryExcErr    = uk.WCRetryExcErr
	WCRNRRetryExcErr = uk.WCRNRRetryExcErr
	WCLocRDDViolErr  = uk.WCLocRDDViolErr
	WCRemInvRDReqErr = uk.WCRemInvRDReqErr
	WCRemAbortErr    = uk.WCRemAbortErr
	WCInvEECNErr     = uk.WCInvEECNErr
	WCInvEECStateErr = uk.WCInvEECStateErr
	WCFatalErr       = uk.WCFatalErr
	WCRespTimeoutErr = uk.WCRespTimeoutErr
	WCGeneralErr     = uk.WCGeneralErr
)

// WCOpcode is ibv_wc_opcode.
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCBindMW:
		return "BIND_MW"
	case WCLocalInv:
		return "LOCAL_INV"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCFlags are ibv_wc_flags.
type WCFlags uint8

const (
	WCFlagGRH     WCFlags = 1
	WCFlagWithImm WCFlags = 2
	WCFlagWithInv WCFlags = 8
)

// WorkCompletion is ibv_wc.
type WorkCompletion struct {
	WrID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32 // major << 16 | minor
	ByteLen   uint32
	ImmData   uint32 // host order (ibv_wc holds it big-endian)
	InvRKey   uint32
	QPNum     uint32
	SrcQP     uint32
	Flags     WCFlags
}

// Err is nil for a successful completion, else a *WCError.
func (wc *WorkCompletion) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &WCError{WrID: wc.WrID, Status: wc.Status, Opcode: wc.Opcode, VendorErr: wc.VendorErr, QPNum: wc.QPNum}
}

// WCError is a work completion that did not succeed, named as
// ibv_wc_status_str names it.
type WCError struct {
	WrID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	QPNum     uint32
}

func (e *WCError) Error() string {
	return fmt.Sprintf("client: QP %#x wr_id %d: %s (%d), vendor error %#x", e.QPNum, e.WrID, e.Status, uint8(e.Status), e.VendorErr)
}

// makeWC is irdma_process_cqe (libirdma) on top of the uk decode: the
// status from the error and flush code, the opcode from the SQ WQE or the
// received BTH opcode, UD source QP and GRH flag. Atomics, which libirdma
// 44 cannot post, complete as the kernel reports them.
func makeWC(info *uk.CQPollInfo) WorkCompletion {
	k := uk.ProcessCQE(info)
	wc := WorkCompletion{
		WrID: k.WrID, Status: WCStatus(k.Status), Opcode: WCOpcode(k.Opcode), VendorErr: k.VendorErr,
		ByteLen: k.ByteLen, QPNum: k.QPNum, SrcQP: k.SrcQP,
	}
	if info.ImmValid {
		// libirdma reports the immediate even on error completions.
		wc.ImmData = info.ImmData
		wc.Flags |= WCFlagWithImm
	}
	if k.Flags&uk.WCWithInvalidate != 0 {
		wc.InvRKey = k.InvRKey
		wc.Flags |= WCFlagWithInv
	}
	if k.Flags&uk.WCGRH != 0 {
		wc.Flags |= WCFlagGRH
	}
	return wc
}

package qp

import "fmt"

// Opcode is the hardware SQ opcode, header OPCODE [37:32]
// (docs/hw-datapath.md "SQ opcodes", IRDMAQP_OP_* / IRDMA_OP_TYPE_*). It is
// also what a GEN_2 SQ CQE reports in IRDMACQ_OP.
type Opcode uint8

// Hardware SQ opcodes (GEN_2).
const (
	OpRDMAWrite          Opcode = 0x00 // irdma_uk_rdma_write, irdma_uk_inline_rdma_write
	OpRDMARead           Opcode = 0x01 // irdma_uk_rdma_read, inv_stag = false
	OpSend               Opcode = 0x03 // irdma_uk_send, irdma_uk_inline_send
	OpSendInv            Opcode = 0x04
	OpSendSolicited      Opcode = 0x05 // RDMA_SEND_SOL_EVENT
	OpSendSolicitedInv   Opcode = 0x06 // RDMA_SEND_SOL_EVENT_INV
	OpBindMW             Opcode = 0x08 // irdma_uk_mw_bind (user space only)
	OpFastRegister       Opcode = 0x09 // irdma_sc_mr_fast_register (kernel only)
	OpLocalInvalidate    Opcode = 0x0a // irdma_uk_stag_local_invalidate
	OpRDMAReadLocalInv   Opcode = 0x0b // irdma_uk_rdma_read, inv_stag = true
	OpNOP                Opcode = 0x0c // irdma_nop, irdma_nop_1 (padding)
	OpRDMAWriteSolicited Opcode = 0x0d // write with IB_SEND_SOLICITED
	OpAtomicFetchAdd     Opcode = 0x0f // irdma_uk_atomic_fetch_add
	OpAtomicCompareSwap  Opcode = 0x11 // irdma_uk_atomic_compare_swap
	OpGenRTSAE           Opcode = 0x30 // iWARP connection setup only (irdma_sc_gen_rts_ae)
	// OpRec and OpRecImm are software-only codes irdma uses for RQ
	// completions it synthesises; they never appear in a WQE.
	OpRec    Opcode = 0x3e
	OpRecImm Opcode = 0x3f
)

var opcodeNames = [64]string{
	OpRDMAWrite:          "RDMA_WRITE",
	OpRDMARead:           "RDMA_READ",
	OpSend:               "RDMA_SEND",
	OpSendInv:            "RDMA_SEND_INV",
	OpSendSolicited:      "RDMA_SEND_SOL_EVENT",
	OpSendSolicitedInv:   "RDMA_SEND_SOL_EVENT_INV",
	OpBindMW:             "BIND_MW",
	OpFastRegister:       "FAST_REGISTER",
	OpLocalInvalidate:    "LOCAL_INVALIDATE",
	OpRDMAReadLocalInv:   "RDMA_READ_LOC_INV",
	OpNOP:                "NOP",
	OpRDMAWriteSolicited: "RDMA_WRITE_SOL",
	OpAtomicFetchAdd:     "ATOMIC_FETCH_ADD",
	OpAtomicCompareSwap:  "ATOMIC_COMPARE_SWAP_ADD",
	OpGenRTSAE:           "GEN_RTS_AE",
	OpRec:                "REC",
	OpRecImm:             "REC_IMM",
}

// String is the irdma name of the opcode, or "RESERVED(0xNN)".
func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return fmt.Sprintf("RESERVED(%#02x)", uint8(o))
}

// Known reports whether a GEN_2 RoCE SQ may carry the opcode. GEN_RTS_AE
// is iWARP-only and the REC codes are software-only, so they are not.
func (o Opcode) Known() bool {
	switch o {
	case OpRDMAWrite, OpRDMARead, OpSend, OpSendInv, OpSendSolicited,
		OpSendSolicitedInv, OpBindMW, OpFastRegister, OpLocalInvalidate,
		OpRDMAReadLocalInv, OpNOP, OpRDMAWriteSolicited, OpAtomicFetchAdd,
		OpAtomicCompareSwap:
		return true
	}
	return false
}

// IsSend reports the four SEND opcodes.
func (o Opcode) IsSend() bool {
	return o == OpSend || o == OpSendInv || o == OpSendSolicited || o == OpSendSolicitedInv
}

// IsWrite reports RDMA WRITE and its solicited form.
func (o Opcode) IsWrite() bool { return o == OpRDMAWrite || o == OpRDMAWriteSolicited }

// IsRead reports RDMA READ and READ with local invalidate.
func (o Opcode) IsRead() bool { return o == OpRDMARead || o == OpRDMAReadLocalInv }

// IsAtomic reports FETCH_ADD and COMPARE_SWAP.
func (o Opcode) IsAtomic() bool { return o == OpAtomicFetchAdd || o == OpAtomicCompareSwap }

// Solicited reports whether the opcode itself asks for a solicited event:
// irdma encodes IB_SEND_SOLICITED in the opcode, not in a header bit
// (docs/hw-datapath.md "SQ opcodes").
func (o Opcode) Solicited() bool {
	return o == OpSendSolicited || o == OpSendSolicitedInv || o == OpRDMAWriteSolicited
}

// Invalidates reports SEND with invalidate (REMSTAG is the STag to
// invalidate at the responder).
func (o Opcode) Invalidates() bool { return o == OpSendInv || o == OpSendSolicitedInv }

// CarriesImm reports whether IMMDATAFLAG may be set: only SEND and WRITE
// without invalidate (irdma_post_send maps SEND_WITH_IMM and
// RDMA_WRITE_WITH_IMM onto them; IB has no send-with-invalidate-and-
// immediate).
func (o Opcode) CarriesImm() bool {
	return o == OpSend || o == OpSendSolicited || o == OpRDMAWrite || o == OpRDMAWriteSolicited
}

// CarriesInline reports whether INLINEDATAFLAG may be set: the inline
// builders exist for SEND* and WRITE* only (irdma_uk_inline_send,
// irdma_uk_inline_rdma_write; the provider ignores the flag on READ).
func (o Opcode) CarriesInline() bool { return o.IsSend() || o.IsWrite() }

// hasFragments reports the opcodes whose size follows from ADDFRAGCNT.
func (o Opcode) hasFragments() bool { return o.IsSend() || o.IsWrite() || o.IsRead() }

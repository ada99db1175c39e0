package cqp

import "encoding/binary"

// WQESize is the size of a CQP WQE (IRDMA_CQP_WQE_SIZE = 8 qwords).
const WQESize = 64

// CQP opcodes, header q3[37:32] (defs.h IRDMA_CQP_OP_*;
// docs/hw-controlpath.md "CQP opcodes").
const (
	OpCreateQP           uint8 = 0x00
	OpModifyQP           uint8 = 0x01
	OpDestroyQP          uint8 = 0x02
	OpCreateCQ           uint8 = 0x03
	OpModifyCQ           uint8 = 0x04
	OpDestroyCQ          uint8 = 0x05
	OpCreateSRQ          uint8 = 0x06
	OpModifySRQ          uint8 = 0x07
	OpDestroySRQ         uint8 = 0x08
	OpAllocSTag          uint8 = 0x09
	OpRegMR              uint8 = 0x0a
	OpQuerySTag          uint8 = 0x0b
	OpRegSMR             uint8 = 0x0c
	OpDeallocSTag        uint8 = 0x0d
	OpManageLocMACTable  uint8 = 0x0e
	OpManageARP          uint8 = 0x0f
	OpManageVFPBLEBP     uint8 = 0x10
	OpManagePushPages    uint8 = 0x11
	OpQueryRDMAFeatures  uint8 = 0x12
	OpUploadContext      uint8 = 0x13
	OpAllocLocMACEntry   uint8 = 0x14
	OpManageHMCPMFuncTbl uint8 = 0x15
	OpCreateCEQ          uint8 = 0x16
	OpDestroyCEQ         uint8 = 0x18
	OpCreateAEQ          uint8 = 0x19
	OpDestroyAEQ         uint8 = 0x1b
	OpCreateAddrHandle   uint8 = 0x1c
	OpModifyAddrHandle   uint8 = 0x1d
	OpDestroyAddrHandle  uint8 = 0x1e
	OpUpdatePESDs        uint8 = 0x1f
	OpQueryFPMVal        uint8 = 0x20
	OpCommitFPMVal       uint8 = 0x21
	OpFlushWQEs          uint8 = 0x22 // also GEN_AE (GENERATE_AE b59)
	OpManageAPBVT        uint8 = 0x23
	OpNOP                uint8 = 0x24
	OpManageQHash        uint8 = 0x25
	OpCreateMcastGrp     uint8 = 0x26
	OpModifyMcastGrp     uint8 = 0x27
	OpDestroyMcastGrp    uint8 = 0x28
	OpSuspendQP          uint8 = 0x29
	OpResumeQP           uint8 = 0x2a
	OpSHMCPagesAllocated uint8 = 0x2b
	OpWorkSchedNode      uint8 = 0x2c
	OpManageStats        uint8 = 0x2d
	OpGatherStats        uint8 = 0x2e
	OpUpMap              uint8 = 0x2f
)

// Header fields common to every CQP WQE (defs.h IRDMA_CQPSQ_OPCODE, _WQEVALID).
const (
	hdrOpcodeShift = 32
	hdrOpcodeMask  = 0x3f
	hdrValidBit    = 63
)

// WQE is one CQP WQE as eight little-endian qwords; W[3] is the header.
type WQE struct{ W [8]uint64 }

// ParseWQE decodes 64 bytes.
func ParseWQE(b []byte) WQE {
	var w WQE
	for i := range w.W {
		w.W[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

// Hdr returns the header qword.
func (w *WQE) Hdr() uint64 { return w.W[3] }

// Opcode returns q3[37:32].
func (w *WQE) Opcode() uint8 { return uint8(w.W[3] >> hdrOpcodeShift & hdrOpcodeMask) }

// Valid returns q3[63].
func (w *WQE) Valid() uint8 { return uint8(w.W[3] >> hdrValidBit) }

// field extracts bits [hi:lo] of v.
func field(v uint64, hi, lo uint) uint64 {
	return v >> lo & (1<<(hi-lo+1) - 1)
}

// bit reports bit n of v.
func bit(v uint64, n uint) bool { return v>>n&1 == 1 }

// macFromU64 unpacks a MAC stored with mac[0] in bits [47:40]
// (ether_addr_to_u64; docs/hw-controlpath.md "MAC and IP byte order").
func macFromU64(v uint64) [6]byte {
	var m [6]byte
	for i := range m {
		m[i] = byte(v >> (40 - 8*uint(i)))
	}
	return m
}

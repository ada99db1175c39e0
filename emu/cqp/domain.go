package cqp

import "github.com/irdma-emu/irdma-emu/emu/hostmem"

// The CQP decodes every CQP WQE (one place knows the CQP format) and hands
// the decoded operation to the table that owns the object: the HMC
// (emu/hmc), the MR table (emu/mr) and the AH/ARP/multicast tables
// (emu/ah). These interfaces are the CQP's view of them; emu/device
// adapts the concrete packages to them.

// ObjType is an HMC object type, hmc.h enum irdma_hmc_rsrc_type
// (docs/hw-controlpath.md "HMC object types").
type ObjType uint8

const (
	ObjQP       ObjType = 0
	ObjCQ       ObjType = 1
	ObjSRQ      ObjType = 2
	ObjHTE      ObjType = 3
	ObjARP      ObjType = 4
	ObjAPBVT    ObjType = 5
	ObjMR       ObjType = 6
	ObjXF       ObjType = 7
	ObjXFFL     ObjType = 8
	ObjQ1       ObjType = 9
	ObjQ1FL     ObjType = 10
	ObjTimer    ObjType = 11
	ObjFSIMC    ObjType = 12
	ObjFSIAV    ObjType = 13
	ObjPBLE     ObjType = 14
	ObjRRF      ObjType = 15
	ObjRRFFL    ObjType = 16
	ObjHDR      ObjType = 17
	ObjMD       ObjType = 18
	ObjOOISC    ObjType = 19
	ObjOOISCFFL ObjType = 20
)

// HMC is the host memory cache: the FPM values and the SD/PD backing.
type HMC interface {
	// EncodeQuery fills a QUERY_FPM_VAL buffer and returns the bytes
	// written (GEN_2: 176, docs/hw-controlpath.md "FPM WQEs").
	EncodeQuery(buf []byte) int
	// Commit parses the COMMIT_FPM_VAL buffer the driver wrote, assigns
	// the bases and writes base/count back into buf.
	Commit(buf []byte) error
	// Committed reports whether a commit succeeded.
	Committed() bool
	// SetSD applies one UPDATE_PE_SDS entry (cmd, data as in the WQE).
	SetSD(cmd, data uint64) error
	// InvalidatePD is a PFHMC_PDINV write.
	InvalidatePD(v uint32)
	// ObjectIOVA locates object idx of type t in host memory.
	ObjectIOVA(t ObjType, idx uint32) (hostmem.IOVA, error)
	// Count is the committed count of t, Size its object size in bytes.
	Count(t ObjType) uint32
	Size(t ObjType) uint32
	// MaxCEQs is the CEQ count QUERY_FPM_VAL reports.
	MaxCEQs() uint32
}

// STagAlloc is a decoded ALLOC_STAG (MR or MW variant,
// docs/hw-controlpath.md "STag WQEs").
type STagAlloc struct {
	Index       uint32 // STAG_IDX q2[31:8]: stag >> 8, driver key bits included
	PD          uint32 // PDID q1 (profile field) | PDID_HI q2[59:54] << 18
	Len         uint64 // STAGLEN q1[45:0]
	MR          bool   // hdr b43: MR (fast-register MR) vs MW
	MWType1     bool   // hdr b42 MWTYPE
	MW1NoKey    bool   // hdr b58 MW1_BIND_DONT_VLDT_KEY
	Rights      uint8  // hdr ARIGHTS [52:48]
	RemoteAcc   bool   // hdr b53 REMACCENABLED
	LPBLSize    uint8  // hdr [45:44]
	HPageSize   uint8  // hdr [47:46]: 0 4 KiB, 1 2 MiB, 2 1 GiB
	FirstPBLE   uint32 // q6 [27:0]
	HMCFnIdx    uint16 // q5 [15:0]
	UseHMCFnIdx bool   // hdr b60
	UsePFRID    bool   // hdr b61 on GEN_2

	// RemoteAtomic is hdr b61 on GEN_3 (REMOTE_ATOMIC_EN): the STag
	// grants remote atomics.
	RemoteAtomic bool
}

// MRReg is a decoded REG_MR (docs/hw-controlpath.md "STag WQEs").
type MRReg struct {
	Index       uint32 // STAG_IDX q2[31:8]
	Key         uint8  // KEY q2[7:0]
	PD          uint32
	Len         uint64
	VA          uint64 // q0: VA when VABased, else the first-byte offset
	VABased     bool   // hdr b59 VABASEDTO
	Rights      uint8
	RemoteAcc   bool
	LPBLSize    uint8  // 0 none (RegAddrPA), 1 level 1, 3 level 2
	HPageSize   uint8  // 0 4 KiB, 1 2 MiB, 2 1 GiB
	RegAddrPA   uint64 // q4 when LPBLSize is 0
	FirstPBLE   uint32 // q6 [27:0] otherwise
	HMCFnIdx    uint16
	UseHMCFnIdx bool
	UsePFRID    bool // hdr b61 on GEN_2

	RemoteAtomic bool // hdr b61 on GEN_3 (REMOTE_ATOMIC_EN)
}

// MRTable is the STag table.
type MRTable interface {
	AllocSTag(a STagAlloc) error
	RegisterNonShared(r MRReg) error
	Dealloc(stagIndex, pd uint32, isMR bool) error
}

// AH is a decoded CREATE/DESTROY_ADDR_HANDLE (uda.c:irdma_sc_access_ah).
type AH struct {
	Index      uint32  // AVIDX hdr [23:0]
	PD         uint32  // PDINDEXLO q1[63:48] | PDINDEXHI q2[27:20] << 16
	SrcMAC     [6]byte // q0 [63:16], mac[0] most significant (ether_addr_to_u64)
	VLANTag    uint16  // q1 [15:0]
	TC         uint8   // q1 [39:32]
	FlowLabel  uint32  // q2 [19:0]
	HopLimit   uint8   // q2 [39:32]
	ARPIndex   uint16  // q2 [63:48]
	DestIP     [4]uint32
	SrcIP      [4]uint32 // host-order words; IPv4 in word 3 (irdma_copy_ip_ntohl)
	IPv4       bool      // hdr b59
	InsertVLAN bool      // hdr b60
	DoLoopback bool      // hdr b62
}

// McastQP is one entry of a multicast group context.
type McastQP struct {
	QPID     uint32 // [17:0]
	Valid    bool   // VALIDENT b31
	DestPort uint16 // [47:32]
}

// McastGroup is a decoded CREATE/MODIFY_MCAST_GRP (uda.c:irdma_access_mcast_grp).
type McastGroup struct {
	Index     uint32  // MGIDX hdr [12:0]
	DestMAC   [6]byte // q0 [47:0]
	HMCFnID   uint8   // q1 [5:0]
	VLANID    uint16  // q2 [43:32]
	VLANValid bool    // hdr b59
	QSHandle  uint16  // q2 [9:0]
	IPv4      bool    // hdr b60
	DestIP    [4]uint32
	Entries   [8]McastQP // the 8-entry context at q4, as read
	QPs       []McastQP  // its valid entries, in order
}

// AHTables are the ARP cache, the AH table and the multicast groups.
type AHTables interface {
	// SetARP adds (valid) or deletes ARP entry idx.
	SetARP(idx uint32, mac [6]byte, valid, permanent bool) error
	AddAH(ah AH) error
	DelAH(idx uint32) error
	CreateMcast(g McastGroup) error
	ModifyMcast(g McastGroup) error
	DestroyMcast(idx uint32) error
}

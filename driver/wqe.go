package driver

import (
	"net/netip"
	"syscall"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// cqpWQE is one 64-byte CQP WQE as eight little-endian qwords. Builders fill
// every qword but leave the valid bit (qw3 bit 63) clear: the CQP posting
// code ORs in the ring polarity and stores qw3 last
// (irdma_sc_cqp_get_next_send_wqe_idx, "dma_wmb … set_64bit_val(wqe, 24,
// hdr)"). Every field position below is from the ctrl.c builders and defs.h
// IRDMA_CQPSQ_* (docs/hw-controlpath.md, the WQE sections), with the newer
// widths where kernels differ.
type cqpWQE [8]uint64

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// bits places x in a [hi:lo] field (FIELD_PREP over GENMASK_ULL(hi, lo));
// bits of x that do not fit are dropped.
func bits(x uint64, hi, lo uint) uint64 {
	width := hi - lo + 1
	if width >= 64 {
		return x << lo
	}
	return (x & (uint64(1)<<width - 1)) << lo
}

func opHdr(op uint8) uint64 { return uint64(op) << cqpHdrOpcodeShift }

// macU64 is ether_addr_to_u64: mac[0] in the most significant byte of the
// 48-bit value (docs/hw-controlpath.md "MAC and IP byte order").
func macU64(mac [6]byte) uint64 {
	var v uint64
	for _, b := range mac {
		v = v<<8 | uint64(b)
	}
	return v
}

// ipWords is the driver's host-order IP word layout (irdma_copy_ip_ntohl;
// docs/hw-controlpath.md "MAC and IP byte order"): for IPv6, words [0..3] are
// ntohl of the four big-endian 32-bit groups; for IPv4 the address goes in
// word 0 (callers place it where each structure wants it).
func ipWords(a netip.Addr) (w [4]uint32, ipv4 bool) {
	if a.Is4() || a.Is4In6() {
		b := a.Unmap().As4()
		w[0] = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		return w, true
	}
	b := a.As16()
	for i := range 4 {
		w[i] = uint32(b[4*i])<<24 | uint32(b[4*i+1])<<16 | uint32(b[4*i+2])<<8 | uint32(b[4*i+3])
	}
	return w, false
}

// --- CQP host context -------------------------------------------------------

// cqpCtxInfo is what irdma_sc_cqp_create writes into the 64-byte CQP host
// context (docs/hw-controlpath.md "CQP host context").
type cqpCtxInfo struct {
	SQSize       uint32 // ring WQEs (power of two, 4..2048)
	SQPA         uint64 // ring bus address, 512-aligned
	HMCProfile   uint8  // rf->rsrc_profile
	ProtocolUsed uint8  // 2 = RoCE only
	ComplCtx     uint64 // echoed in CCQE qw1
	HWMajVer     uint16
	HWMinVer     uint16
}

// encodedCQPSize is irdma_get_encoded_wqe_size(.., IRDMA_QUEUE_TYPE_CQP):
// log2(size) − 1 (4 → 1 … 2048 → 10).
func encodedCQPSize(size uint32) uint64 {
	var e uint64
	for s := size >> 1; s > 1; s >>= 1 {
		e++
	}
	return e
}

// encodedWQSize is irdma_get_encoded_wqe_size(.., IRDMA_QUEUE_TYPE_SQ_RQ):
// log2(quanta) − 2.
func encodedWQSize(quanta uint32) uint64 {
	var e uint64
	for s := quanta >> 2; s > 1; s >>= 1 {
		e++
	}
	return e
}

// buildCQPHostCtx is irdma_sc_cqp_create's context: +0 SQSIZE [11:8],
// PROTOCOL_USED [4:3]; +8 SQ base; +16 HMC_PROFILE [2:0]; +24 completion
// context; +32 HW_MINVER [15:0], HW_MAJVER [31:16]; DCQCN words zero.
func buildCQPHostCtx(c cqpCtxInfo) [8]uint64 {
	var q [8]uint64
	q[0] = bits(encodedCQPSize(c.SQSize), 11, 8) | bits(uint64(c.ProtocolUsed), 4, 3)
	q[1] = c.SQPA
	q[2] = bits(uint64(c.HMCProfile), 2, 0)
	q[3] = c.ComplCtx
	q[4] = bits(uint64(c.HWMinVer), 15, 0) | bits(uint64(c.HWMajVer), 31, 16)
	return q
}

// --- QP ---------------------------------------------------------------------

// qpWQEInfo carries the header flags of CREATE/MODIFY/DESTROY_QP
// (irdma_sc_qp_create / _modify / _destroy).
type qpWQEInfo struct {
	QPID          uint32
	QPType        uint8
	CtxPA         uint64
	ShadowPA      uint64
	NextState     uint8
	ORDValid      bool
	TCPCtxValid   bool
	CachedVar     bool
	VirtualMap    bool // VQ: SQ/RQ addresses in the context are PBLE indices
	ForceLoopback bool
	CQNumValid    bool
	MACValid      bool
	ARPIdxValid   bool
	MSSChange     bool
	RemoveHash    bool
	ResetCon      bool
	TermAct       uint8
	NewMSS        uint16
	TermLen       uint8
	IgnoreMWBound bool // destroy
}

// buildCreateQP is irdma_sc_qp_create: qw2 context PA, qw5 shadow PA; hdr
// raw qp_id, ORDVALID b42, TOECTXVALID b43, VQ b45, FORCELOOPBACK b46,
// CQNUMVALID b47, QPTYPE [50:48], MACVALID b51, ARPTABIDXVALID b59,
// NEXTIWSTATE [62:60].
func buildCreateQP(i qpWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = i.CtxPA
	w[5] = i.ShadowPA
	w[3] = bits(uint64(i.QPID), 23, 0) | opHdr(cqpOpCreateQP) |
		b2u(i.ORDValid)<<42 | b2u(i.TCPCtxValid)<<43 | b2u(i.VirtualMap)<<45 |
		b2u(i.ForceLoopback)<<46 | b2u(i.CQNumValid)<<47 | bits(uint64(i.QPType), 50, 48) |
		b2u(i.MACValid)<<51 | b2u(i.ARPIdxValid)<<59 | bits(uint64(i.NextState), 62, 60)
	return w
}

// buildModifyQP is irdma_sc_qp_modify: as create plus qw1 NEWMSS [45:32],
// TERMLEN [51:48]; CACHEDVARVALID b44, MSSCHANGE b52, REMOVEHASHENTRY b55,
// TERMACT [57:56], RESETCON b58.
func buildModifyQP(i qpWQEInfo) cqpWQE {
	var w cqpWQE
	w[1] = bits(uint64(i.NewMSS), 45, 32) | bits(uint64(i.TermLen), 51, 48)
	w[2] = i.CtxPA
	w[5] = i.ShadowPA
	w[3] = bits(uint64(i.QPID), 23, 0) | opHdr(cqpOpModifyQP) |
		b2u(i.ORDValid)<<42 | b2u(i.TCPCtxValid)<<43 | b2u(i.CachedVar)<<44 |
		b2u(i.VirtualMap)<<45 | b2u(i.ForceLoopback)<<46 | b2u(i.CQNumValid)<<47 |
		bits(uint64(i.QPType), 50, 48) | b2u(i.MACValid)<<51 | b2u(i.MSSChange)<<52 |
		b2u(i.RemoveHash)<<55 | bits(uint64(i.TermAct), 57, 56) | b2u(i.ResetCon)<<58 |
		b2u(i.ARPIdxValid)<<59 | bits(uint64(i.NextState), 62, 60)
	return w
}

// buildDestroyQP is irdma_sc_qp_destroy: qw2 context PA, qw5 shadow PA; hdr
// raw qp_id, QPTYPE [50:48], IGNOREMWBOUND b54, REMOVEHASHENTRY b55.
func buildDestroyQP(i qpWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = i.CtxPA
	w[5] = i.ShadowPA
	w[3] = bits(uint64(i.QPID), 23, 0) | opHdr(cqpOpDestroyQP) |
		bits(uint64(i.QPType), 50, 48) | b2u(i.IgnoreMWBound)<<54 | b2u(i.RemoveHash)<<55
	return w
}

// flushInfo is irdma_qp_flush_info.
type flushInfo struct {
	QPID       uint32
	SQ, RQ     bool
	UserFlCode bool
	SQMajor    uint16
	SQMinor    uint16
	RQMajor    uint16
	RQMinor    uint16
	GenerateAE bool
	AECode     uint16
	AESource   uint8
}

// buildFlushWQEs is irdma_sc_qp_flush_wqes: qw1 AE code [15:0] | source
// [19:16] (with GENERATE_AE); qw2 RQ minor [15:0], RQ major [31:16], SQ
// minor [47:32], SQ major [63:48] (with USERFLCODE); hdr raw qp_id,
// GENERATE_AE b59, USERFLCODE b60, FLUSHSQ b61, FLUSHRQ b62.
func buildFlushWQEs(f flushInfo) cqpWQE {
	var w cqpWQE
	if f.GenerateAE {
		w[1] = bits(uint64(f.AECode), 15, 0) | bits(uint64(f.AESource), 19, 16)
	}
	if f.UserFlCode {
		w[2] = bits(uint64(f.RQMinor), 15, 0) | bits(uint64(f.RQMajor), 31, 16) |
			bits(uint64(f.SQMinor), 47, 32) | bits(uint64(f.SQMajor), 63, 48)
	}
	w[3] = bits(uint64(f.QPID), 23, 0) | opHdr(cqpOpFlushWQEs) |
		b2u(f.GenerateAE)<<59 | b2u(f.UserFlCode)<<60 | b2u(f.SQ)<<61 | b2u(f.RQ)<<62
	return w
}

// buildSuspendQP is irdma_sc_suspend_qp: hdr QPID [23:0].
func buildSuspendQP(qpID uint32) cqpWQE {
	var w cqpWQE
	w[3] = bits(uint64(qpID), 23, 0) | opHdr(cqpOpSuspendQP)
	return w
}

// buildResumeQP is irdma_sc_resume_qp: qw2 QSHANDLE [31:0]; hdr QPID.
func buildResumeQP(qpID uint32, qsHandle uint16) cqpWQE {
	var w cqpWQE
	w[2] = uint64(qsHandle)
	w[3] = bits(uint64(qpID), 23, 0) | opHdr(cqpOpResumeQP)
	return w
}

// --- CQ ---------------------------------------------------------------------

// cqWQEInfo is what irdma_sc_cq_create / _modify / _destroy read from an
// irdma_sc_cq (and the modify info).
type cqWQEInfo struct {
	CQID          uint32
	Size          uint32
	Ctx           uint64 // qw1: the CQ context returned in CEQEs (63 bits)
	ShadowThresh  uint32
	PA            uint64 // ring bus address (0 when virtually mapped)
	ShadowPA      uint64
	FirstPBLIdx   uint32
	VirtualMap    bool
	LPBLSize      uint8
	CEQID         uint32
	CEQIDValid    bool
	CEQEMask      bool
	CheckOverflow bool
	TPHEn         bool
	TPHVal        uint8
	VSIIdx        uint16
	AvoidMemCnfl  bool
	Resize        bool // MODIFY_CQ CQRESIZE
}

// buildCreateCQ is irdma_sc_cq_create (docs/hw-controlpath.md "CQ WQEs"):
// qw0 size [20:0]; qw1 context [62:0]; qw2 SHADOW_READ_THRESHOLD [17:0];
// qw4 ring PA (0 if virtual); qw5 shadow PA; qw6 FIRSTPMPBLIDX [27:0]
// (virtual only); qw7 TPHVAL [7:0], VSIIDX [23:8]; hdr CQID and CEQID
// through the per-device masks (GEN_2 [18:0], [31:22]), LPBLSIZE [45:44],
// CHKOVERFLOW b46, VIRTMAP b47, ENCEQEMASK b48, CEQIDVALID b49, CQID_HIGH
// [52:50], CEQID_HIGH [59:54], TPHEN b60, AVOIDMEMCNFLCT b61.
func buildCreateCQ(f profile.Fields, c cqWQEInfo) cqpWQE {
	var w cqpWQE
	w[0] = bits(uint64(c.Size), 20, 0)
	w[1] = bits(c.Ctx, 62, 0)
	w[2] = bits(uint64(c.ShadowThresh), 17, 0)
	if !c.VirtualMap {
		w[4] = c.PA
	} else {
		w[6] = bits(uint64(c.FirstPBLIdx), 27, 0)
	}
	w[5] = c.ShadowPA
	w[7] = bits(uint64(c.TPHVal), 7, 0) | bits(uint64(c.VSIIdx), 23, 8)
	ceq := uint64(0)
	if c.CEQIDValid {
		ceq = uint64(c.CEQID)
	}
	w[3] = f.CQID.Prep(uint64(c.CQID)) | f.CQCEQID.Prep(ceq) | opHdr(cqpOpCreateCQ) |
		bits(uint64(c.LPBLSize), 45, 44) | b2u(c.CheckOverflow)<<46 | b2u(c.VirtualMap)<<47 |
		b2u(c.CEQEMask)<<48 | b2u(c.CEQIDValid)<<49 |
		// CQID_HIGH [52:50] and CEQID_HIGH [59:54] carry the bits above
		// the GEN_3 widths; GEN_2 ids fit the low fields, so they are 0.
		b2u(c.TPHEn)<<60 | b2u(c.AvoidMemCnfl)<<61
	return w
}

// buildModifyCQ is irdma_sc_cq_modify: qw0 new size; qw1 context; qw2
// threshold; qw4 new ring PA; qw5 shadow PA; qw6 first_pm_pbl_idx; qw7
// TPH/VSI; hdr raw cq_id, CQRESIZE b43, LPBLSIZE, CHKOVERFLOW, VIRTMAP,
// ENCEQEMASK, TPHEN, AVOIDMEMCNFLCT (no CEQID).
func buildModifyCQ(c cqWQEInfo) cqpWQE {
	var w cqpWQE
	w[0] = uint64(c.Size)
	w[1] = bits(c.Ctx, 62, 0)
	w[2] = bits(uint64(c.ShadowThresh), 17, 0)
	w[4] = c.PA
	w[5] = c.ShadowPA
	w[6] = uint64(c.FirstPBLIdx)
	w[7] = bits(uint64(c.TPHVal), 7, 0) | bits(uint64(c.VSIIdx), 23, 8)
	w[3] = uint64(c.CQID) | opHdr(cqpOpModifyCQ) | b2u(c.Resize)<<43 |
		bits(uint64(c.LPBLSize), 45, 44) | b2u(c.CheckOverflow)<<46 | b2u(c.VirtualMap)<<47 |
		b2u(c.CEQEMask)<<48 | b2u(c.TPHEn)<<60 | b2u(c.AvoidMemCnfl)<<61
	return w
}

// buildDestroyCQ is irdma_sc_cq_destroy: qw0 size; qw1 context; qw5 shadow
// PA; qw6 first_pm_pbl_idx when virtual; hdr raw cq_id, CEQID (device
// mask), LPBLSIZE, VIRTMAP, ENCEQEMASK, CEQIDVALID, TPHEN, AVOIDMEMCNFLCT.
// The CCQ destroy (irdma_sc_ccq_destroy) is the same without LPBLSIZE and
// VIRTMAP, which are zero for the CCQ anyway.
func buildDestroyCQ(f profile.Fields, c cqWQEInfo) cqpWQE {
	var w cqpWQE
	w[0] = uint64(c.Size)
	w[1] = bits(c.Ctx, 62, 0)
	w[5] = c.ShadowPA
	if c.VirtualMap {
		w[6] = uint64(c.FirstPBLIdx)
	}
	ceq := uint64(0)
	if c.CEQIDValid {
		ceq = uint64(c.CEQID)
	}
	w[3] = uint64(c.CQID) | f.CQCEQID.Prep(ceq) | opHdr(cqpOpDestroyCQ) |
		bits(uint64(c.LPBLSize), 45, 44) | b2u(c.VirtualMap)<<47 | b2u(c.CEQEMask)<<48 |
		b2u(c.CEQIDValid)<<49 | b2u(c.TPHEn)<<60 | b2u(c.AvoidMemCnfl)<<61
	return w
}

// --- CEQ / AEQ --------------------------------------------------------------

// eqWQEInfo describes a CEQ or the AEQ (irdma_sc_ceq / irdma_sc_aeq).
type eqWQEInfo struct {
	ID          uint32 // CEQ id (unused for the AEQ)
	ElemCnt     uint32
	PA          uint64
	FirstPBLIdx uint32
	VirtualMap  bool
	LPBLSize    uint8
	ITRNoExpire bool
	TPHEn       bool
	TPHVal      uint8
	VSIIdx      uint16
}

// buildCreateCEQ is irdma_sc_ceq_create: qw2 CEQSIZE [21:0]; qw4 ring PA
// (0 if virtual); qw6 first_pm_pbl_idx (virtual); qw7 TPHVAL [7:0], VSIIDX
// [23:8]; hdr CEQID [9:0], CEQID_HIGH [15:10], LPBLSIZE [45:44],
// ITRNOEXPIRE b46, VMAP b47, TPHEN b60.
func buildCreateCEQ(e eqWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = bits(uint64(e.ElemCnt), 21, 0)
	if e.VirtualMap {
		w[6] = uint64(e.FirstPBLIdx)
	} else {
		w[4] = e.PA
	}
	w[7] = bits(uint64(e.TPHVal), 7, 0) | bits(uint64(e.VSIIdx), 23, 8)
	w[3] = bits(uint64(e.ID), 9, 0) | bits(uint64(e.ID)>>10, 15, 10) | opHdr(cqpOpCreateCEQ) |
		bits(uint64(e.LPBLSize), 45, 44) | b2u(e.ITRNoExpire)<<46 | b2u(e.VirtualMap)<<47 |
		b2u(e.TPHEn)<<60
	return w
}

// buildDestroyCEQ is irdma_sc_ceq_destroy: qw2 element count; qw6
// first_pm_pbl_idx; hdr raw ceq_id, LPBLSIZE, VMAP, TPHEN.
func buildDestroyCEQ(e eqWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = uint64(e.ElemCnt)
	w[6] = uint64(e.FirstPBLIdx)
	w[3] = uint64(e.ID) | opHdr(cqpOpDestroyCEQ) | bits(uint64(e.LPBLSize), 45, 44) |
		b2u(e.VirtualMap)<<47 | b2u(e.TPHEn)<<60
	return w
}

// buildCreateAEQ is irdma_sc_aeq_create: qw2 AEQECNT [18:0]; qw4 ring PA
// (0 if virtual); qw6 first_pm_pbl_idx; hdr LPBLSIZE, VMAP b47.
func buildCreateAEQ(e eqWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = bits(uint64(e.ElemCnt), 18, 0)
	if e.VirtualMap {
		w[6] = uint64(e.FirstPBLIdx)
	} else {
		w[4] = e.PA
	}
	w[3] = opHdr(cqpOpCreateAEQ) | bits(uint64(e.LPBLSize), 45, 44) | b2u(e.VirtualMap)<<47
	return w
}

// buildDestroyAEQ is irdma_sc_aeq_destroy: qw2 count, qw6 pbl index; hdr
// LPBLSIZE, VMAP.
func buildDestroyAEQ(e eqWQEInfo) cqpWQE {
	var w cqpWQE
	w[2] = uint64(e.ElemCnt)
	w[6] = uint64(e.FirstPBLIdx)
	w[3] = opHdr(cqpOpDestroyAEQ) | bits(uint64(e.LPBLSize), 45, 44) | b2u(e.VirtualMap)<<47
	return w
}

// --- STags ------------------------------------------------------------------

// hwPageSize is the HPAGESIZE encoding (enum irdma_page_size: 4K 0, 2M 1,
// 1G 2).
func hwPageSize(pgsz uint64) (uint64, bool) {
	switch pgsz {
	case 4 << 10:
		return 0, true
	case 2 << 20:
		return 1, true
	case 1 << 30:
		return 2, true
	}
	return 0, false
}

// stagInfo is irdma_allocate_stag_info / irdma_reg_ns_stag_info /
// irdma_mw_alloc_info / irdma_dealloc_stag_info, merged.
type stagInfo struct {
	STagIdx      uint32 // stag >> 8, driver-key bits included
	STagKey      uint8
	PDID         uint32
	TotalLen     uint64
	PageSize     uint64
	AccessRights uint8
	RemoteAccess bool
	ChunkSize    uint8 // LPBLSIZE: 0 none, 1 level 1, 3 level 2
	FirstPBLIdx  uint32
	RegAddrPA    uint64 // level 0
	VA           uint64
	ZeroBased    bool
	HMCFcnIdx    uint16
	MWWide       bool // type-1 window
	MR           bool // dealloc: MR (true) or MW
	// RemoteAtomicsEn is GEN_3's REMOTE_ATOMIC_EN, hdr b61 (the bit
	// GEN_2 names USEPFRID, which the driver never sets).
	RemoteAtomicsEn bool
}

// buildAllocSTag is irdma_sc_alloc_stag (MR variant): qw1 PDID (device
// mask, GEN_2 [63:46]) | STAGLEN [45:0]; qw2 STAG_IDX [31:8] | PDID_HI
// [59:54]; qw5 HMCFNIDX [15:0]; qw6 FIRSTPMPBLIDX when chunk_size ≠ 0; hdr
// MR b43, ARIGHTS [52:48], LPBLSIZE [45:44], HPAGESIZE [47:46],
// REMACCENABLED b53. The page size falls back to 4K encoding as the
// driver's builder does (no error).
func buildAllocSTag(f profile.Fields, s stagInfo) cqpWQE {
	var w cqpWQE
	pg, _ := hwPageSize(s.PageSize)
	w[1] = f.STagPDID.Prep(uint64(s.PDID)) | bits(s.TotalLen, 45, 0)
	w[2] = bits(uint64(s.STagIdx), 23, 0)<<8 | bits(uint64(s.PDID)>>18, 59, 54)
	w[5] = uint64(s.HMCFcnIdx)
	if s.ChunkSize != 0 {
		w[6] = bits(uint64(s.FirstPBLIdx), 27, 0)
	}
	w[3] = opHdr(cqpOpAllocSTag) | 1<<43 | bits(uint64(s.AccessRights), 52, 48) |
		bits(uint64(s.ChunkSize), 45, 44) | bits(pg, 47, 46) | b2u(s.RemoteAccess)<<53 | b2u(s.RemoteAtomicsEn)<<61
	return w
}

// buildAllocMW is irdma_sc_mw_alloc: qw1 PDID; qw2 STAG_IDX | PDID_HI; hdr
// MR b43 = 0, MWTYPE b42 (mw_wide: type 1).
func buildAllocMW(f profile.Fields, s stagInfo) cqpWQE {
	var w cqpWQE
	w[1] = f.STagPDID.Prep(uint64(s.PDID))
	w[2] = bits(uint64(s.STagIdx), 23, 0)<<8 | bits(uint64(s.PDID)>>18, 59, 54)
	w[3] = opHdr(cqpOpAllocSTag) | b2u(s.MWWide)<<42
	return w
}

// buildRegMR is irdma_sc_mr_reg_non_shared: qw0 VA (VA-based) or first-byte
// offset; qw1 STAGLEN | PDID; qw2 KEY [7:0] | STAG_IDX [31:8] | PDID_HI;
// qw4 reg_addr_pa when chunk_size = 0; qw5 hmc_fcn_index; qw6 FIRSTPMPBLIDX
// when chunk_size ≠ 0; hdr MR b43, LPBLSIZE, HPAGESIZE, ARIGHTS,
// REMACCENABLED (rights include remote read or write), VABASEDTO b59,
// REMOTE_ATOMIC_EN b61 (GEN_3). The
// page size must be 4K, 2M or 1G (-EINVAL otherwise), and a PBL index must
// lie inside the PBLE object (pbleCnt).
func buildRegMR(f profile.Fields, s stagInfo, pbleCnt uint32) (cqpWQE, error) {
	var w cqpWQE
	pg, ok := hwPageSize(s.PageSize)
	if !ok {
		return w, syscall.EINVAL
	}
	if s.ChunkSize != 0 && s.FirstPBLIdx >= pbleCnt {
		return w, syscall.EINVAL
	}
	if s.ZeroBased {
		w[0] = s.VA & (s.PageSize - 1)
	} else {
		w[0] = s.VA
	}
	w[1] = bits(s.TotalLen, 45, 0) | f.STagPDID.Prep(uint64(s.PDID))
	w[2] = uint64(s.STagKey) | bits(uint64(s.STagIdx), 23, 0)<<8 | bits(uint64(s.PDID)>>18, 59, 54)
	if s.ChunkSize == 0 {
		w[4] = s.RegAddrPA
	} else {
		w[6] = bits(uint64(s.FirstPBLIdx), 27, 0)
	}
	w[5] = uint64(s.HMCFcnIdx)
	remote := s.AccessRights&accessRemoteOnly != 0
	w[3] = opHdr(cqpOpRegMR) | 1<<43 | bits(uint64(s.ChunkSize), 45, 44) | bits(pg, 47, 46) |
		bits(uint64(s.AccessRights), 52, 48) | b2u(remote)<<53 | b2u(!s.ZeroBased)<<59 | b2u(s.RemoteAtomicsEn)<<61
	return w, nil
}

// buildDeallocSTag is irdma_sc_dealloc_stag: qw1 PDID; qw2 STAG_IDX |
// PDID_HI; hdr MR b43 (1 MR, 0 MW).
func buildDeallocSTag(f profile.Fields, s stagInfo) cqpWQE {
	var w cqpWQE
	w[1] = f.STagPDID.Prep(uint64(s.PDID))
	w[2] = bits(uint64(s.STagIdx), 23, 0)<<8 | bits(uint64(s.PDID)>>18, 59, 54)
	w[3] = opHdr(cqpOpDeallocSTag) | b2u(s.MR)<<43
	return w
}

// --- ARP, push pages --------------------------------------------------------

// buildAddARP is irdma_sc_add_arp_cache_entry: qw1 reach_max (0); qw2 MAC
// [47:0]; hdr raw arp_index (MAT_ARPENTRYIDX [11:0]), ENTRYVALID b42,
// PERMANENT b43.
func buildAddARP(idx uint16, mac [6]byte, permanent bool) cqpWQE {
	var w cqpWQE
	w[2] = macU64(mac)
	w[3] = bits(uint64(idx), 11, 0) | 1<<42 | b2u(permanent)<<43 | opHdr(cqpOpManageARP)
	return w
}

// buildDelARP is irdma_sc_del_arp_cache_entry: hdr arp_index only.
func buildDelARP(idx uint16) cqpWQE {
	var w cqpWQE
	w[3] = bits(uint64(idx), 11, 0) | opHdr(cqpOpManageARP)
	return w
}

// buildManagePushPage is irdma_sc_manage_push_page: qw2 qs_handle; hdr
// PPIDX [31:0] (0 on alloc), PPTYPE [61:60], FREE_PAGE b62.
func buildManagePushPage(qsHandle uint16, pushIdx uint32, free bool) cqpWQE {
	var w cqpWQE
	w[2] = uint64(qsHandle)
	w[3] = uint64(pushIdx) | opHdr(cqpOpManagePushPages) | b2u(free)<<62
	return w
}

// --- Init-time commands ------------------------------------------------------

// buildQueryRDMAFeatures is irdma_sc_query_rdma_features: qw4 buffer PA;
// hdr BUF_LEN [31:0].
func buildQueryRDMAFeatures(bufPA uint64, bufLen uint32) cqpWQE {
	var w cqpWQE
	w[4] = bufPA
	w[3] = uint64(bufLen) | opHdr(cqpOpQueryRDMAFeatures)
	return w
}

// buildQueryFPM is irdma_sc_query_fpm_val: qw2 hmc_fn_id; qw4 buffer PA.
func buildQueryFPM(hmcFnID uint16, bufPA uint64) cqpWQE {
	var w cqpWQE
	w[2] = uint64(hmcFnID)
	w[4] = bufPA
	w[3] = opHdr(cqpOpQueryFPMVal)
	return w
}

// buildCommitFPM is irdma_sc_commit_fpm_val: qw2 hmc_fn_id; qw4 buffer PA;
// hdr BUFSIZE [31:0].
func buildCommitFPM(hmcFnID uint16, bufPA uint64, bufSize uint32) cqpWQE {
	var w cqpWQE
	w[2] = uint64(hmcFnID)
	w[4] = bufPA
	w[3] = uint64(bufSize) | opHdr(cqpOpCommitFPMVal)
	return w
}

// buildSHMCPagesAllocated is irdma_sc_static_hmc_pages_allocated: qw2
// HMC_FN_ID [5:0].
func buildSHMCPagesAllocated(hmcFnID uint16) cqpWQE {
	var w cqpWQE
	w[2] = bits(uint64(hmcFnID), 5, 0)
	w[3] = opHdr(cqpOpSHMCPagesAllocated)
	return w
}

// sdEntry is struct irdma_update_sd_entry: {cmd, data}.
type sdEntry struct {
	Cmd  uint64
	Data uint64
}

// setSDEntry is irdma_set_sd_entry: data = PA | PMSDBPCOUNT [11:2] = 512 |
// PMSDTYPE b1 (1 direct) | PMSDVALID b0; cmd = sd_idx | PMSDPARTSEL b15 |
// PMSDWR b31.
func setSDEntry(pa uint64, sdIdx uint32, direct bool) sdEntry {
	return sdEntry{
		Cmd:  uint64(sdIdx) | 1<<15 | 1<<31,
		Data: pa | bits(hmcMaxBPCount, 11, 2) | b2u(direct)<<1 | 1,
	}
}

// clrSDEntry is irdma_clr_sd_entry: no PA, valid clear.
func clrSDEntry(sdIdx uint32, direct bool) sdEntry {
	return sdEntry{
		Cmd:  uint64(sdIdx) | 1<<15 | 1<<31,
		Data: bits(hmcMaxBPCount, 11, 2) | b2u(direct)<<1,
	}
}

// buildUpdatePESDs is cqp_sds_wqe_fill: entry 0 in qw0 (cmd) / qw1 (data);
// entries 1 and 2 in qw4/qw5 and qw6/qw7 with ENTRY_VALID b63 on the cmd;
// entries 3.. as 16-byte {cmd, data} pairs in the overflow buffer at
// ovfPA, whose address goes in qw2 with HMCFNID [5:0]; hdr ENTRY_COUNT
// [3:0] = entries in the overflow buffer. It returns the overflow payload
// to write. At most maxSDEntries entries.
func buildUpdatePESDs(entries []sdEntry, hmcFnID uint16, ovfPA uint64) (cqpWQE, []sdEntry, error) {
	var w cqpWQE
	if len(entries) == 0 || len(entries) > maxSDEntries {
		return w, nil, syscall.EINVAL
	}
	var ovf []sdEntry
	memEntries := 0
	if len(entries) > 3 {
		ovf = entries[3:]
		memEntries = len(ovf)
		w[2] = ovfPA
	}
	w[2] |= bits(uint64(hmcFnID), 5, 0)
	w[0] = bits(entries[0].Cmd, 31, 0)
	w[1] = entries[0].Data
	if len(entries) > 1 {
		w[4] = entries[1].Cmd | 1<<63
		w[5] = entries[1].Data
	}
	if len(entries) > 2 {
		w[6] = entries[2].Cmd | 1<<63
		w[7] = entries[2].Data
	}
	w[3] = opHdr(cqpOpUpdatePESDs) | bits(uint64(memEntries), 3, 0)
	return w, ovf, nil
}

// --- AH, multicast -----------------------------------------------------------

// ahInfo is irdma_ah_info.
type ahInfo struct {
	AHIdx         uint32
	PDIdx         uint32
	SrcMAC        [6]byte
	VLANTag       uint16
	InsertVLANTag bool
	TCTOS         uint8
	FlowLabel     uint32
	HopTTL        uint8
	DstARPIdx     uint16
	IPv4          bool
	DestIP        [4]uint32 // host-order words; IPv4 in [0]
	SrcIP         [4]uint32
	DoLoopback    bool
}

// buildAccessAH is uda.c:irdma_sc_access_ah for CREATE (0x1c) and DESTROY
// (0x1e): qw0 source MAC << 16; qw1 VLANTAG [15:0], TC [39:32], PDINDEXLO
// [63:48]; qw2 FLOWLABEL [19:0], PDINDEXHI [27:20], HOPLIMIT [39:32],
// ARPINDEX [63:48]; IPv6 dest qw5 (ip[0] [63:32] | ip[1] [31:0]) / qw4
// (ip[2] | ip[3]) and source qw7 / qw6; IPv4 dest qw4 [31:0], source qw6
// [31:0]; hdr AVIDX [23:0], IPV4VALID b59, INSERTVLANTAG b60, DOLOOPBACK
// b62.
func buildAccessAH(op uint8, a ahInfo) cqpWQE {
	var w cqpWQE
	w[0] = macU64(a.SrcMAC) << 16
	w[1] = bits(uint64(a.PDIdx), 63, 48) | bits(uint64(a.TCTOS), 39, 32) | bits(uint64(a.VLANTag), 15, 0)
	w[2] = bits(uint64(a.DstARPIdx), 63, 48) | bits(uint64(a.FlowLabel), 19, 0) |
		bits(uint64(a.HopTTL), 39, 32) | bits(uint64(a.PDIdx)>>16, 27, 20)
	if !a.IPv4 {
		w[5] = uint64(a.DestIP[0])<<32 | uint64(a.DestIP[1])
		w[4] = uint64(a.DestIP[2])<<32 | uint64(a.DestIP[3])
		w[7] = uint64(a.SrcIP[0])<<32 | uint64(a.SrcIP[1])
		w[6] = uint64(a.SrcIP[2])<<32 | uint64(a.SrcIP[3])
	} else {
		w[4] = uint64(a.DestIP[0])
		w[6] = uint64(a.SrcIP[0])
	}
	w[3] = opHdr(op) | b2u(a.DoLoopback)<<62 | b2u(a.IPv4)<<59 |
		bits(uint64(a.AHIdx), 23, 0) | b2u(a.InsertVLANTag)<<60
	return w
}

// mcastGrpInfo is irdma_mcast_grp_info.
type mcastGrpInfo struct {
	MGID      uint16
	DestMAC   [6]byte
	VLANID    uint16
	VLANValid bool
	QSHandle  uint16
	HMCFcnID  uint16
	IPv4      bool
	DestIP    [4]uint32
	CtxPA     uint64 // the 8-entry MG context
}

// buildMcastGrp is uda.c:irdma_access_mcast_grp: qw0 dest MAC; qw1
// HMC_FCN_ID [5:0]; qw2 VLANID [43:32] | QS_HANDLE [9:0]; qw4 MG context
// PA; IPv6 dest qw7 / qw6, IPv4 dest qw6 [31:0]; hdr MGIDX [12:0],
// VLANVALID b59, IPV4VALID b60.
func buildMcastGrp(op uint8, m mcastGrpInfo) (cqpWQE, error) {
	var w cqpWQE
	if m.MGID >= udaMaxFSIMgs {
		return w, syscall.EINVAL
	}
	w[4] = m.CtxPA
	w[2] = bits(uint64(m.VLANID), 43, 32) | bits(uint64(m.QSHandle), 9, 0)
	w[0] = macU64(m.DestMAC)
	w[1] = bits(uint64(m.HMCFcnID), 5, 0)
	if !m.IPv4 {
		w[7] = uint64(m.DestIP[0])<<32 | uint64(m.DestIP[1])
		w[6] = uint64(m.DestIP[2])<<32 | uint64(m.DestIP[3])
	} else {
		w[6] = uint64(m.DestIP[0])
	}
	w[3] = opHdr(op) | bits(uint64(m.MGID), 12, 0) | b2u(m.VLANValid)<<59 | b2u(m.IPv4)<<60
	return w, nil
}

// mgCtxEntry is one irdma_mcast_grp_ctx_entry_info.
type mgCtxEntry struct {
	QPID     uint32
	DestPort uint16
	Valid    bool
	UseCnt   uint32
}

// encodeMgCtx is uda.c:irdma_create_mg_ctx: the valid entries packed from
// slot 0, each QPID [17:0] | VALIDENT b31 | DESTPORT [47:32].
func encodeMgCtx(entries *[maxMgsPerCtx]mgCtxEntry) [maxMgsPerCtx]uint64 {
	var out [maxMgsPerCtx]uint64
	n := 0
	for _, e := range entries {
		if !e.Valid {
			continue
		}
		out[n] = bits(uint64(e.DestPort), 47, 32) | 1<<31 | bits(uint64(e.QPID), 17, 0)
		n++
	}
	return out
}

// --- Work scheduler, statistics -----------------------------------------------

// wsNodeInfo is irdma_ws_node_info.
type wsNodeInfo struct {
	ID       uint16
	VSI      uint16
	ParentID uint16
	Weight   uint8
	TC       uint8
	PrioType uint8
	Leaf     bool
	Enable   bool
}

// Work scheduler node operations (enum irdma_ws_node_op).
const (
	wsAddNode    uint8 = 0
	wsModifyNode uint8 = 1
	wsDelNode    uint8 = 2
)

// buildWSNode is irdma_sc_manage_ws_node: qw4 VSI [63:48] | WEIGHT
// [38:32]; hdr NODEID [13:0], PARENTID [29:16], NODEOP [55:52], TC
// [58:56], PRIOTYPE [60:59], NODETYPE b61, ENABLENODE b62.
func buildWSNode(n wsNodeInfo, op uint8) cqpWQE {
	var w cqpWQE
	w[4] = bits(uint64(n.VSI), 63, 48) | bits(uint64(n.Weight), 38, 32)
	w[3] = bits(uint64(n.ID), 13, 0) | bits(uint64(n.ParentID), 29, 16) | opHdr(cqpOpWorkSchedNode) |
		bits(uint64(op), 55, 52) | bits(uint64(n.TC), 58, 56) | bits(uint64(n.PrioType), 60, 59) |
		b2u(n.Leaf)<<61 | b2u(n.Enable)<<62
	return w
}

// buildManageStats is irdma_sc_manage_stats_inst: qw5 HMC_FCN_INDEX
// [15:0]; hdr INST_INDEX [6:0], USE_HMC_FCN_INDEX b60, ALLOC_INST b62.
func buildManageStats(alloc bool, instIdx uint8, useHMCFcn bool, hmcFcn uint16) cqpWQE {
	var w cqpWQE
	w[5] = uint64(hmcFcn)
	w[3] = bits(uint64(instIdx), 6, 0) | opHdr(cqpOpManageStats) | b2u(useHMCFcn)<<60 | b2u(alloc)<<62
	return w
}

// buildGatherStats is irdma_sc_gather_stats: qw4 buffer PA; qw5
// HMC_FCN_INDEX; hdr INST_INDEX [6:0], USE_HMC_FCN_INDEX b60, USE_INST b61.
func buildGatherStats(bufPA uint64, useInst bool, instIdx uint8, useHMCFcn bool, hmcFcn uint16) cqpWQE {
	var w cqpWQE
	w[4] = bufPA
	w[5] = uint64(hmcFcn)
	w[3] = bits(uint64(instIdx), 6, 0) | opHdr(cqpOpGatherStats) | b2u(useHMCFcn)<<60 | b2u(useInst)<<61
	return w
}

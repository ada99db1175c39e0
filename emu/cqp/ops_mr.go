package cqp

import "github.com/irdma-emu/irdma-emu/emu/profile"

// ALLOC_STAG / REG_MR / DEALLOC_STAG fields (ctrl.c:irdma_sc_alloc_stag,
// irdma_sc_mw_alloc, irdma_sc_mr_reg_non_shared, irdma_sc_dealloc_stag;
// defs.h IRDMA_CQPSQ_STAG_*; docs/hw-controlpath.md "STag WQEs"). PDID's qword1
// position is the profile's per-device field.
const (
	stagLenMask        = uint64(1)<<46 - 1 // q1 [45:0] STAGLEN
	stagIdxShift       = 8                 // q2 [31:8] STAG_IDX
	stagIdxMask        = 0xffffff
	stagKeyMask        = 0xff // q2 [7:0] KEY (REG_MR)
	stagPDHiShift      = 54   // q2 [59:54] PDID_HI (pd >> 18)
	stagPDHiMask       = 0x3f
	stagFirstPBLMask   = 0xfffffff // q6 [27:0]
	stagHMCFnMask      = 0xffff    // q5 [15:0]
	stagMWTypeBit      = 42
	stagMRBit          = 43
	stagLPBLShift      = 44 // [45:44]
	stagHPageShift     = 46 // [47:46]
	stagRightsShift    = 48 // [52:48] ARIGHTS
	stagRemAccBit      = 53
	stagMW1NoKeyBit    = 58
	stagVABasedBit     = 59
	stagUseHMCFnIdxBit = 60
	stagUsePFRIDBit    = 61 // GEN_2 USEPFRID; GEN_3 REMOTE_ATOMIC_EN (stagBit61)
	pdHighShift        = 18
)

func (c *CQP) stagPD(w *WQE) uint32 {
	return uint32(c.cfg.Profile.Fields.STagPDID.Get(w.W[1])) |
		uint32(field(w.W[2], 59, stagPDHiShift))<<pdHighShift
}

// stagBit61 splits the STag WQEs' header b61 by generation: defs.h names
// it IRDMA_CQPSQ_STAG_USEPFRID (GEN_2) and IRDMA_CQPSQ_STAG_REMOTE_ATOMIC_EN
// (GEN_3, set from stag_info->remote_atomics_en by irdma_sc_alloc_stag and
// irdma_sc_mr_reg_non_shared).
func (c *CQP) stagBit61(h uint64) (usePFRID, remoteAtomic bool) {
	b := bit(h, stagUsePFRIDBit)
	if c.cfg.Profile.Gen >= profile.Gen3 {
		return false, b
	}
	return b, false
}

// checkPBLE refuses a first PBLE index beyond the committed count.
func (c *CQP) checkPBLE(lpbl uint8, first uint32) *Error {
	if lpbl != 0 && first >= c.cfg.HMC.Count(ObjPBLE) {
		return fail(MinorPBLERange, "first PBLE index beyond the PBLE count", nil)
	}
	return nil
}

func (c *CQP) allocSTag(w *WQE) (result, *Error) {
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	h := w.Hdr()
	a := STagAlloc{
		Index: uint32(w.W[2] >> stagIdxShift & stagIdxMask), PD: c.stagPD(w), Len: w.W[1] & stagLenMask,
		MR: bit(h, stagMRBit), MWType1: bit(h, stagMWTypeBit), MW1NoKey: bit(h, stagMW1NoKeyBit),
		Rights: uint8(field(h, 52, stagRightsShift)), RemoteAcc: bit(h, stagRemAccBit),
		LPBLSize: uint8(field(h, 45, stagLPBLShift)), HPageSize: uint8(field(h, 47, stagHPageShift)),
		FirstPBLE: uint32(w.W[6] & stagFirstPBLMask), HMCFnIdx: uint16(w.W[5] & stagHMCFnMask),
		UseHMCFnIdx: bit(h, stagUseHMCFnIdxBit),
	}
	a.UsePFRID, a.RemoteAtomic = c.stagBit61(h)
	if a.MR {
		if err := c.checkPBLE(a.LPBLSize, a.FirstPBLE); err != nil {
			return result{}, err
		}
	}
	if c.cfg.MR == nil {
		return result{}, fail(MinorMRError, "no MR table", nil)
	}
	if err := c.cfg.MR.AllocSTag(a); err != nil {
		return result{}, &Error{Status: statusOf(err, MinorMRError), Reason: "ALLOC_STAG", Err: err}
	}
	return result{}, nil
}

func (c *CQP) regMR(w *WQE) (result, *Error) {
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	h := w.Hdr()
	r := MRReg{
		Index: uint32(w.W[2] >> stagIdxShift & stagIdxMask), Key: uint8(w.W[2] & stagKeyMask),
		PD: c.stagPD(w), Len: w.W[1] & stagLenMask, VA: w.W[0], VABased: bit(h, stagVABasedBit),
		Rights: uint8(field(h, 52, stagRightsShift)), RemoteAcc: bit(h, stagRemAccBit),
		LPBLSize: uint8(field(h, 45, stagLPBLShift)), HPageSize: uint8(field(h, 47, stagHPageShift)),
		RegAddrPA: w.W[4], FirstPBLE: uint32(w.W[6] & stagFirstPBLMask), HMCFnIdx: uint16(w.W[5] & stagHMCFnMask),
		UseHMCFnIdx: bit(h, stagUseHMCFnIdxBit),
	}
	r.UsePFRID, r.RemoteAtomic = c.stagBit61(h)
	// irdma_sc_mr_reg_non_shared: page size 4 KiB, 2 MiB or 1 GiB; chunk
	// size 0 (PA), 1 (level 1) or 3 (level 2).
	if r.HPageSize > 2 || r.LPBLSize == 2 {
		return result{}, fail(MinorBadContext, "REG_MR page size or PBL level", nil)
	}
	if err := c.checkPBLE(r.LPBLSize, r.FirstPBLE); err != nil {
		return result{}, err
	}
	if c.cfg.MR == nil {
		return result{}, fail(MinorMRError, "no MR table", nil)
	}
	if err := c.cfg.MR.RegisterNonShared(r); err != nil {
		return result{}, &Error{Status: statusOf(err, MinorMRError), Reason: "REG_MR", Err: err}
	}
	return result{}, nil
}

func (c *CQP) deallocSTag(w *WQE) (result, *Error) {
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	if c.cfg.MR == nil {
		return result{}, fail(MinorMRError, "no MR table", nil)
	}
	idx := uint32(w.W[2] >> stagIdxShift & stagIdxMask)
	if err := c.cfg.MR.Dealloc(idx, c.stagPD(w), bit(w.Hdr(), stagMRBit)); err != nil {
		return result{}, &Error{Status: statusOf(err, MinorSTagInvalid), Reason: "DEALLOC_STAG", Err: err}
	}
	return result{}, nil
}

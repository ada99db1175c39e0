package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
)

// Local operations: SQ WQEs that send nothing (NOP, LOCAL_INV, FAST_REG,
// BIND_MW); they complete in WQE order like any other.

// execLocal runs a local operation: LOCAL_INV, FAST_REG and BIND_MW through
// emu/mr (whose errors carry the AE), NOP nothing.
func (r *requester) execLocal(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	var err error
	switch w.Opcode {
	case OpLocalInvalidate:
		err = t.dp.MRs.Invalidate(w.InvalidateSTag, t.pd(), t.q.ID, false)
		if err == nil {
			t.hw(StatRDMAVInv, 1)
		}
	case OpFastRegister:
		f := &w.FastReg
		err = t.dp.MRs.FastRegister(mr.FastRegArgs{
			STagIndex: f.STagIndex, Key: f.STagKey, PD: t.pd(), VA: f.VA, VABased: f.VABased,
			Length: f.Len, Access: mr.Access(f.Rights), PageSize: mr.PageSize(f.PageSize),
			LPBLSize: f.ChunkSize, FirstPBLE: f.FirstPMPBLIndex, PBLAddr: hostmem.IOVA(f.PBLAddr),
		})
	case OpBindMW:
		b := &w.Bind
		acc := mr.Access(b.Rights)
		if b.RemoteAtomics {
			acc |= mr.AccessRemoteAtomic
		}
		err = t.dp.MRs.BindMW(mr.BindArgs{MWSTag: b.MWSTag, MRSTag: b.ParentSTag, PD: t.pd(), QP: t.q.ID,
			VA: b.VA, Length: b.Len, Access: acc, VABased: b.VABased, Type1: b.Type1})
		if err == nil {
			t.hw(StatRDMAVBnd, 1)
		}
	}
	if err != nil {
		t.sqFatal(ctx, e, aeOf(err))
		return false
	}
	return true
}

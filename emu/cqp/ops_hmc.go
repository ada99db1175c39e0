package cqp

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// FPM buffer sizes (docs/hw-controlpath.md "FPM WQEs"): GEN_2 writes the
// first 176 bytes of the query buffer; COMMIT_FPM_VAL carries BUFSIZE 176,
// 192 or 208.
const (
	QueryFPMBufSize     = 176
	MinCommitFPMBufSize = 176
	MaxCommitFPMBufSize = 208
	commitBufSizeMask   = 0xffffffff // hdr [31:0] BUFSIZE
)

func (c *CQP) queryFPM(w *WQE) (result, *Error) {
	var buf [MaxCommitFPMBufSize]byte
	n := c.cfg.HMC.EncodeQuery(buf[:])
	n = min(max(n, 0), QueryFPMBufSize)
	if err := c.cfg.Mem.Write(hostmem.IOVA(w.W[4]), buf[:n]); err != nil {
		return result{}, fail(MinorPAFault, "QUERY_FPM_VAL buffer", err)
	}
	return result{bytes: n}, nil
}

func (c *CQP) commitFPM(w *WQE) (result, *Error) {
	size := w.Hdr() & commitBufSizeMask
	if size < MinCommitFPMBufSize {
		return result{}, fail(MinorBufferTooSmall, "COMMIT_FPM_VAL BUFSIZE", nil)
	}
	n := int(min(size, MaxCommitFPMBufSize))
	buf := make([]byte, n)
	pa := hostmem.IOVA(w.W[4])
	if err := c.cfg.Mem.Read(pa, buf); err != nil {
		return result{}, fail(MinorPAFault, "COMMIT_FPM_VAL buffer", err)
	}
	if err := c.cfg.HMC.Commit(buf); err != nil {
		return result{}, &Error{Status: statusOf(err, MinorHMCError), Reason: "COMMIT_FPM_VAL", Err: err}
	}
	if err := c.cfg.Mem.Write(pa, buf); err != nil {
		return result{}, fail(MinorPAFault, "COMMIT_FPM_VAL write-back", err)
	}
	c.cfg.QPs.SetCapacity(c.cfg.HMC.Count(ObjQP))
	c.cfg.CQs.SetCapacity(c.cfg.HMC.Count(ObjCQ))
	return result{bytes: 2 * n}, nil
}

// UPDATE_PE_SDS fields (ctrl.c:cqp_sds_wqe_fill; docs/hw-controlpath.md
// "UPDATE_PE_SDS").
const (
	sdsCmdMask        = 0xffffffff // SDCMD [31:0]
	sdsEntryValidBit  = 63
	sdsCountMask      = 0xf // hdr [3:0] ENTRY_COUNT: entries in the overflow buffer
	sdsMaxOverflow    = 8   // IRDMA_MAX_SD_ENTRIES (11) − 3
	sdsBufAddrMask    = ^uint64(0x3f)
	sdsOverflowEntryB = 16
)

func (c *CQP) updatePESDs(w *WQE) (result, *Error) {
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	type ent struct{ cmd, data uint64 }
	ents := []ent{{w.W[0] & sdsCmdMask, w.W[1]}}
	if bit(w.W[4], sdsEntryValidBit) {
		ents = append(ents, ent{w.W[4] & sdsCmdMask, w.W[5]})
	}
	if bit(w.W[6], sdsEntryValidBit) {
		ents = append(ents, ent{w.W[6] & sdsCmdMask, w.W[7]})
	}
	more := int(w.Hdr() & sdsCountMask)
	if more > sdsMaxOverflow {
		return result{}, fail(MinorBadSize, "UPDATE_PE_SDS ENTRY_COUNT above 8", nil)
	}
	if more > 0 {
		buf := make([]byte, more*sdsOverflowEntryB)
		if err := c.cfg.Mem.Read(hostmem.IOVA(w.W[2]&sdsBufAddrMask), buf); err != nil {
			return result{}, fail(MinorPAFault, "UPDATE_PE_SDS overflow buffer", err)
		}
		for i := 0; i < more; i++ {
			ents = append(ents, ent{binary.LittleEndian.Uint64(buf[16*i:]) & sdsCmdMask, binary.LittleEndian.Uint64(buf[16*i+8:])})
		}
	}
	for _, e := range ents {
		if err := c.cfg.HMC.SetSD(e.cmd, e.data); err != nil {
			return result{}, &Error{Status: statusOf(err, MinorHMCError), Reason: "UPDATE_PE_SDS", Err: err}
		}
	}
	return result{bytes: more * sdsOverflowEntryB}, nil
}

func (c *CQP) shmcPagesAllocated(w *WQE) (result, *Error) {
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	c.ext.shmcAllocated = true
	return result{}, nil
}

// MANAGE_HMC_PM_FUNC_TABLE fields (ctrl.c:irdma_sc_manage_hmc_pm_func_table).
const (
	pmVFIdxMask  = 0xffff // hdr [15:0]
	pmFreeBit    = 62
	pmMaxVFs     = 32 // GLHMC_VFPDINV(0..31)
	pmFirstVFFPM = 8  // our first VF FPM function index (emulator choice)
)

// manageHMCPMFuncTable records a VF's PM function. The model is one PF
// without VFs; it keeps the table so that the op is well defined: alloc
// returns pmFirstVFFPM + vf index as OP_RETVAL, free releases it.
func (c *CQP) manageHMCPMFuncTable(w *WQE) (result, *Error) {
	h := w.Hdr()
	vf := uint32(h & pmVFIdxMask)
	if vf >= pmMaxVFs {
		return result{}, fail(MinorIndexRange, "VF index", nil)
	}
	if bit(h, pmFreeBit) {
		if !c.ext.pmFn[vf] {
			return result{}, fail(MinorObjectNotFound, "PM function not allocated", nil)
		}
		c.ext.pmFn[vf] = false
		return result{}, nil
	}
	c.ext.pmFn[vf] = true
	return result{retval: pmFirstVFFPM + vf}, nil
}

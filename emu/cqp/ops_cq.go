package cqp

import (
	"errors"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// CREATE/MODIFY/DESTROY_CQ fields (ctrl.c:irdma_sc_cq_create / _modify /
// _destroy; defs.h IRDMA_CQPSQ_CQ_*; docs/hw-controlpath.md "CQ WQEs"). CQID
// and CEQID come from the profile's per-device fields.
const (
	cqSizeMask         = 0x1fffff          // qw0 [20:0] IRDMA_CQPSQ_CQ_CQSIZE
	cqCtxMask          = uint64(1)<<63 - 1 // qw1 [62:0] IRDMA_CQPSQ_CQ_CQCTX
	cqThreshMask       = 0x3ffff           // qw2 [17:0] SHADOW_READ_THRESHOLD
	cqFirstPBLMask     = 0xfffffff         // qw6 [27:0] FIRSTPMPBLIDX
	cqLPBLShift        = 44                // [45:44] LPBLSIZE
	cqResizeBit        = 43                // MODIFY_CQ CQRESIZE
	cqChkOverflowBit   = 46
	cqVirtMapBit       = 47
	cqEnCEQEMaskBit    = 48
	cqCEQIDValidBit    = 49
	cqTPHEnBit         = 60
	cqAvoidMemCflctBit = 61
	cqMinSize          = 2 // one usable entry: the ring holds at most size−1
	cqShadowAlign      = 8
)

func (c *CQP) cqEntry(h uint64) (uint32, *Error) {
	if bit(h, cqAvoidMemCflctBit) {
		if c.cfg.Profile.Queues.CQESize != 64 {
			return 0, fail(MinorBadContext, "64-byte CQEs not supported", nil)
		}
		return 64, nil
	}
	return 32, nil
}

// cqRing decodes the ring of a CREATE_CQ or MODIFY_CQ (with CQRESIZE).
func (c *CQP) cqRing(w *WQE) (cq.RingMem, *Error) {
	h := w.Hdr()
	// Any size the 21-bit CQSIZE holds: max_hw_cq_size (IRDMA_MAX_CQ_SIZE)
	// bounds the CQEs a program asks for, and both drivers double that
	// for 32-byte CQEs on GEN_2 (libirdma uverbs.c get_cq_size,
	// verbs.c irdma_create_cq kernel-mode sizing), so rings of up to
	// 2·max_cqe+2 entries reach the device.
	size := uint32(w.W[0] & cqSizeMask)
	if size < cqMinSize {
		return cq.RingMem{}, fail(MinorBadSize, "CQ size out of range (CQ too small)", nil)
	}
	entry, err := c.cqEntry(h)
	if err != nil {
		return cq.RingMem{}, err
	}
	virt := bit(h, cqVirtMapBit)
	if virt && field(h, 45, cqLPBLShift) != 1 {
		return cq.RingMem{}, fail(MinorBadContext, "virtually mapped CQ needs LPBLSIZE 1", nil)
	}
	return c.ring(virt, w.W[4], uint32(w.W[6]&cqFirstPBLMask), entry, size, uint64(entry))
}

func (c *CQP) createCQ(w *WQE) (result, *Error) {
	h := w.Hdr()
	f := c.cfg.Profile.Fields
	id := uint32(f.CQID.Get(h))
	if err := c.checkIndex(ObjCQ, id); err != nil {
		return result{}, err
	}
	if c.cfg.CQs.Get(id) != nil {
		return result{}, fail(MinorObjectExists, "CQ exists", nil)
	}
	ceq := uint32(f.CQCEQID.Get(h))
	ceqValid := bit(h, cqCEQIDValidBit)
	if ceqValid && ceq >= c.maxCEQs() {
		return result{}, fail(MinorIndexRange, "CEQ id out of range", nil)
	}
	r, err := c.cqRing(w)
	if err != nil {
		return result{}, err
	}
	shadow := hostmem.IOVA(w.W[5])
	if shadow%cqShadowAlign != 0 {
		return result{}, fail(MinorBadAlignment, "CQ shadow area not aligned", nil)
	}
	// The device's copy of the CQ context: the WQE itself, in the HMC CQ
	// object (our choice of CQ context format).
	if a, e := c.cfg.HMC.ObjectIOVA(ObjCQ, id); e != nil {
		return result{}, fail(MinorPAFault, "HMC CQ object not backed", e)
	} else {
		var b [WQESize]byte
		for i, q := range w.W {
			for j := 0; j < 8; j++ {
				b[8*i+j] = byte(q >> (8 * j))
			}
		}
		if e := c.cfg.Mem.Write(a, b[:min(int(c.cfg.HMC.Size(ObjCQ)), WQESize)]); e != nil {
			return result{}, fail(MinorPAFault, "HMC CQ object write", e)
		}
	}
	newCQ, e := c.cfg.CQs.Create(cq.Config{
		ID: id, Ring: r, Shadow: shadow, CEQ: ceq, CEQValid: ceqValid, Ctx: w.W[1] & cqCtxMask,
		CEQEMask: bit(h, cqEnCEQEMaskBit), CheckOverflow: bit(h, cqChkOverflowBit),
		AvoidMemCflct: bit(h, cqAvoidMemCflctBit), ShadowReadThreshold: uint32(w.W[2] & cqThreshMask),
		Virtual: bit(h, cqVirtMapBit), FirstPBLE: uint32(w.W[6] & cqFirstPBLMask),
		TPHEn: bit(h, cqTPHEnBit), TPHVal: uint8(w.W[7]), VSIIdx: uint16(field(w.W[7], 23, 8)),
	})
	switch {
	case errors.Is(e, cq.ErrExists):
		return result{}, fail(MinorObjectExists, "CQ exists", e)
	case errors.Is(e, cq.ErrRange):
		return result{}, fail(MinorIndexRange, "CQ id", e)
	case e != nil:
		return result{}, fail(MinorPAFault, "CQ ring or shadow area", e)
	}
	if id == ccqID {
		// The CCQ: its own CREATE_CQ completes on it (ctrl.c:irdma_sc_ccq_create_done).
		c.ccq = newCQ
	}
	return result{bytes: WQESize}, nil
}

func (c *CQP) maxCEQs() uint32 {
	n := min(c.cfg.Profile.Limits.MaxCEQs, c.cfg.CQs.Events().MaxCEQs())
	if m := c.cfg.HMC.MaxCEQs(); m != 0 {
		n = min(n, m)
	}
	return n
}

func (c *CQP) modifyCQ(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := uint32(c.cfg.Profile.Fields.CQID.Get(h))
	q := c.cfg.CQs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "CQ does not exist", nil)
	}
	set := func(cfg *cq.Config) {
		cfg.Ctx = w.W[1] & cqCtxMask
		cfg.ShadowReadThreshold = uint32(w.W[2] & cqThreshMask)
		cfg.CheckOverflow = bit(h, cqChkOverflowBit)
		cfg.CEQEMask = bit(h, cqEnCEQEMaskBit)
	}
	if !bit(h, cqResizeBit) {
		q.Update(set)
		return result{}, nil
	}
	r, err := c.cqRing(w)
	if err != nil {
		return result{}, err
	}
	// After this completes every CQE goes to the new ring from index 0 with
	// valid 1 (docs/hw-controlpath.md "CQ creation and resize").
	q.Resize(r, func(cfg *cq.Config) {
		set(cfg)
		cfg.Virtual = bit(h, cqVirtMapBit)
		cfg.FirstPBLE = uint32(w.W[6] & cqFirstPBLMask)
	})
	return result{}, nil
}

func (c *CQP) destroyCQ(w *WQE) (result, *Error) {
	id := uint32(c.cfg.Profile.Fields.CQID.Get(w.Hdr()))
	q := c.cfg.CQs.Get(id)
	if q == nil {
		return result{}, fail(MinorObjectNotFound, "CQ does not exist", nil)
	}
	if q.Bound() > 0 {
		return result{}, fail(MinorObjectInUse, "CQ still bound to a QP", nil)
	}
	if err := c.cfg.CQs.Destroy(id); err != nil {
		return result{}, fail(MinorObjectNotFound, "CQ does not exist", err)
	}
	if id == ccqID {
		// The CCQ destroy is register-polled (ctrl.c:irdma_sc_ccq_destroy).
		c.ccq = nil
		return result{noCCQE: true}, nil
	}
	return result{}, nil
}

// CREATE/DESTROY_CEQ and _AEQ fields (ctrl.c:irdma_sc_ceq_create,
// irdma_sc_aeq_create; docs/hw-controlpath.md "Event queue WQEs").
const (
	ceqIDMask      = 0x3ff    // hdr [9:0]
	ceqCountMask   = 0x3fffff // qw2 [21:0]
	aeqCountMask   = 0x7ffff  // qw2 [18:0]
	eqVMapBit      = 47
	eqFirstPBLMask = 0xfffffff
	eqAlign        = 8
)

func ceqID(h uint64) uint32 { return uint32(h&ceqIDMask) | uint32(field(h, 15, 10))<<10 }

func (c *CQP) createCEQ(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := ceqID(h)
	if id >= c.maxCEQs() {
		return result{}, fail(MinorIndexRange, "CEQ id out of range", nil)
	}
	if c.cfg.CQs.Events().CEQ(id) != nil {
		return result{}, fail(MinorObjectExists, "CEQ exists", nil)
	}
	n := uint32(w.W[2] & ceqCountMask)
	if n < 1 || n > c.cfg.Profile.Limits.MaxCEQSize {
		return result{}, fail(MinorBadSize, "CEQ size out of range", nil)
	}
	r, err := c.ring(bit(h, eqVMapBit), w.W[4], uint32(w.W[6]&eqFirstPBLMask), cq.CEQESize, n, eqAlign)
	if err != nil {
		return result{}, err
	}
	if e := c.cfg.CQs.Events().CreateCEQ(id, r); e != nil {
		return result{}, fail(MinorObjectExists, "CEQ", e)
	}
	return result{}, nil
}

func (c *CQP) destroyCEQ(w *WQE) (result, *Error) {
	if e := c.cfg.CQs.Events().DestroyCEQ(ceqID(w.Hdr())); e != nil {
		return result{}, fail(MinorObjectNotFound, "CEQ does not exist", e)
	}
	return result{}, nil
}

func (c *CQP) createAEQ(w *WQE) (result, *Error) {
	h := w.Hdr()
	if c.cfg.CQs.Events().HasAEQ() {
		return result{}, fail(MinorObjectExists, "AEQ exists", nil)
	}
	n := uint32(w.W[2] & aeqCountMask)
	if n < 1 || n > c.cfg.Profile.Limits.MaxAEQSize {
		return result{}, fail(MinorBadSize, "AEQ size out of range", nil)
	}
	r, err := c.ring(bit(h, eqVMapBit), w.W[4], uint32(w.W[6]&eqFirstPBLMask), cq.AEQESize, n, eqAlign)
	if err != nil {
		return result{}, err
	}
	if e := c.cfg.CQs.Events().CreateAEQ(r); e != nil {
		return result{}, fail(MinorObjectExists, "AEQ", e)
	}
	return result{}, nil
}

func (c *CQP) destroyAEQ(*WQE) (result, *Error) {
	if e := c.cfg.CQs.Events().DestroyAEQ(); e != nil {
		return result{}, fail(MinorObjectNotFound, "AEQ does not exist", e)
	}
	return result{}, nil
}

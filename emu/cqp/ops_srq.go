package cqp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// CREATE/MODIFY/DESTROY_SRQ (GEN_3; ctrl.c:irdma_sc_srq_create / _modify /
// _destroy; defs.h IRDMA_CQPSQ_SRQ_*; docs/hw-controlpath.md "SRQ WQEs"):
//
//	qw0  RQSIZE [3:0] (log2(ring quanta) − 3: 0 is 8 quanta, irdma's
//	     smallest SRQ), RQ_WQE_SIZE [5:4] (WQE shift), SRQ_LIMIT [43:32]
//	qw1  CREATE: the SRQ context its AEs carry; MODIFY: SRQCTX [63:6] = id
//	qw2  PD_ID [39:16]
//	qw4  PHYSICAL_BUFFER_ADDR [63:8] (the ring, 256-aligned)
//	qw5  DB_SHADOW_ADDR [63:6] (the shadow area, 64-aligned)
//	qw6  FIRST_PM_PBL_IDX [27:0] (VIRTMAP)
//	hdr  SRQ_ID [15:0], OP [37:32], LEAF_PBL_SIZE [45:44], VIRTMAP b47,
//	     TPH_EN b60, ARM_LIMIT_EVENT b61, WQEVALID b63
const (
	srqIDMask          = 0xffff
	srqRQSizeMask      = 0xf
	srqWQESizeShift    = 4
	srqWQESizeMask     = 0x3
	srqLimitShift      = 32
	srqLimitMask       = 0xfff
	srqPDShift         = 16
	srqPDMask          = 0xffffff
	srqRingAddrMask    = ^uint64(0xff)
	srqShadowAddrMask  = ^uint64(0x3f)
	srqFirstPBLMask    = 0xfffffff
	srqVirtMapBit      = 47
	srqArmLimitBit     = 61
	srqMinQuantaLog2   = 3 // IRDMA_SRQ_MIN_QUANTA = 8
	srqResultBytes     = 64
	srqMaxWQEShift     = 3
	srqMinWQEs         = 2
	srqShadowAlignment = 64
)

// SRQCreate is a decoded CREATE_SRQ or MODIFY_SRQ.
type SRQCreate struct {
	ID        uint32
	PD        uint32
	Ctx       uint64
	Quanta    uint32 // ring size in quanta
	WQEShift  uint8
	Limit     uint32
	Armed     bool
	RingPA    uint64
	ShadowPA  uint64
	FirstPBLE uint32
	Virtual   bool
}

// DecodeSRQWQE decodes the fields of a CREATE/MODIFY_SRQ WQE; it never
// fails: the ops check the values.
func DecodeSRQWQE(w *WQE) SRQCreate {
	h := w.Hdr()
	enc := uint32(w.W[0] & srqRQSizeMask)
	return SRQCreate{
		ID:        uint32(h & srqIDMask),
		PD:        uint32(w.W[2] >> srqPDShift & srqPDMask),
		Ctx:       w.W[1],
		Quanta:    1 << (enc + srqMinQuantaLog2),
		WQEShift:  uint8(w.W[0] >> srqWQESizeShift & srqWQESizeMask),
		Limit:     uint32(w.W[0] >> srqLimitShift & srqLimitMask),
		Armed:     bit(h, srqArmLimitBit),
		RingPA:    w.W[4] & srqRingAddrMask,
		ShadowPA:  w.W[5] & srqShadowAddrMask,
		FirstPBLE: uint32(w.W[6] & srqFirstPBLMask),
		Virtual:   bit(h, srqVirtMapBit),
	}
}

func (c *CQP) srqOp(w *WQE) (result, *Error) {
	if !c.cfg.Profile.SRQ || c.cfg.SRQs == nil {
		// GEN_2: a profile without SRQ has no such objects.
		return result{}, fail(MinorUnsupportedOp, "SRQ opcode without SRQ support", nil)
	}
	if err := c.needHMC(); err != nil {
		return result{}, err
	}
	switch w.Opcode() {
	case OpCreateSRQ:
		return c.createSRQ(w)
	case OpModifySRQ:
		return c.modifySRQ(w)
	}
	return c.destroySRQ(w)
}

func (c *CQP) createSRQ(w *WQE) (result, *Error) {
	d := DecodeSRQWQE(w)
	if d.ID >= c.cfg.Profile.Limits.MaxSRQs {
		return result{}, fail(MinorIndexRange, "SRQ id beyond the SRQ id space", nil)
	}
	if c.cfg.SRQs.Get(d.ID) != nil {
		return result{}, fail(MinorObjectExists, "SRQ exists", nil)
	}
	stride := uint32(1) << d.WQEShift
	if d.WQEShift > srqMaxWQEShift || d.Quanta > c.cfg.Profile.UK.MaxHWSRQQuanta || d.Quanta/stride < srqMinWQEs {
		return result{}, fail(MinorBadSize, "SRQ size out of range", nil)
	}
	ring, err := c.ring(d.Virtual, d.RingPA, d.FirstPBLE, stride*qp.QuantumSize, d.Quanta/stride, 256)
	if err != nil {
		return result{}, err
	}
	if d.ShadowPA%srqShadowAlignment != 0 {
		return result{}, fail(MinorBadAlignment, "SRQ shadow area not aligned", nil)
	}
	if e := cq.CheckRange(c.cfg.Mem, hostmem.IOVA(d.ShadowPA), 8); e != nil {
		return result{}, fail(MinorPAFault, "SRQ shadow area", e)
	}
	if _, e := c.cfg.SRQs.Create(qp.SRQSpec{ID: d.ID, PD: d.PD, Ctx: d.Ctx, Ring: ring,
		Shadow: hostmem.IOVA(d.ShadowPA), Limit: d.Limit, Armed: d.Armed}); e != nil {
		return result{}, fail(MinorObjectExists, "SRQ table", e)
	}
	return result{bytes: srqResultBytes}, nil
}

// modifySRQ applies the new limit and its arming; irdma re-sends the ring
// fields unchanged (irdma_modify_srq cannot resize).
func (c *CQP) modifySRQ(w *WQE) (result, *Error) {
	d := DecodeSRQWQE(w)
	s := c.cfg.SRQs.Get(d.ID)
	if s == nil {
		return result{}, fail(MinorObjectNotFound, "SRQ does not exist", nil)
	}
	s.SetLimit(d.Limit, d.Armed)
	return result{bytes: srqResultBytes}, nil
}

func (c *CQP) destroySRQ(w *WQE) (result, *Error) {
	id := uint32(w.Hdr() & srqIDMask)
	if err := c.cfg.SRQs.Destroy(id); err != nil {
		return result{}, fail(MinorObjectNotFound, "SRQ does not exist", err)
	}
	return result{}, nil
}

// qpSRQ resolves a CREATE_QP context's USE_SRQ / SRQ_ID (GEN_3 only: on
// GEN_2 the bits are reserved and ignored).
func (c *CQP) qpSRQ(ctx qp.Context) (*qp.SRQ, *Error) {
	if !c.cfg.Profile.SRQ || !ctx.UseSRQ() {
		return nil, nil
	}
	s := c.cfg.SRQs.Get(ctx.SRQID())
	if s == nil {
		return nil, fail(MinorObjectNotFound, "QP context names an SRQ that does not exist", nil)
	}
	return s, nil
}

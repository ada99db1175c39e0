package uk

// Limits are the device capabilities the uk layer enforces (irdma's uk_attrs,
// docs/hw-datapath.md "GEN_2 capabilities"). GEN2 holds the E810 values;
// LimitsFrom derives them from a device profile (emu/profile, the one part of
// emu/ the driver may import), and a test pins the two together.
type Limits struct {
	MaxWQFrags  int    // max_hw_wq_frags: SGEs per SEND/WRITE/RQ WQE
	MaxReadSGEs int    // max_hw_read_sges: sink SGEs per RDMA READ
	MaxInline   int    // max_hw_inline: inline bytes per WQE
	MaxSQChunk  uint32 // max_hw_sq_chunk: quanta a WQE may not straddle
	MaxWQQuanta uint32 // max_hw_wq_quanta: SQ depth limit
	MaxRQQuanta uint32 // max_hw_rq_quanta: RQ depth limit
	MinWQSize   uint32 // min_hw_wq_size: minimum depth in WQEs (<< shift)
	MinCQSize   int    // min_hw_cq_size
	MaxCQSize   int    // max_hw_cq_size
	AtomicsOK   bool   // feature_flags has IRDMA_FEATURE_ATOMIC_OPS (firmware's IRDMA_ATOMICS_ALLOWED_BIT)
	// MaxSRQQuanta is max_hw_srq_quanta: 0 means no SRQ (GEN_2).
	MaxSRQQuanta uint32
	// PadFragUncounted: an even fragment count's pad slot is not counted
	// in ADDFRAGCNT (GEN_3; uk.c counts it only when hw_rev is GEN_2). The
	// zero value is GEN_2's rule.
	PadFragUncounted bool
}

// GEN2 are the E810 values: irdma_sc_dev_init, icrdma_init_hw and
// defs.h (IRDMA_QP_SW_MAX_WQ_QUANTA, IRDMA_MAX_CQ_SIZE, …). Atomics are
// off: upstream advertises them only when firmware allows them; a device
// that does sets AtomicsOK.
var GEN2 = Limits{
	MaxWQFrags:  13,
	MaxReadSGEs: 13,
	MaxInline:   101,
	MaxSQChunk:  8,
	MaxWQQuanta: 32768,
	MaxRQQuanta: 32768,
	MinWQSize:   8,
	MinCQSize:   1,
	MaxCQSize:   1048575,
}

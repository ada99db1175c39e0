package driver

// roceCtx is everything irdma_sc_qp_setctx_roce_gen_2 reads: the fields of
// irdma_sc_qp, irdma_qp_host_ctx_info, irdma_roce_offload_info and
// irdma_udp_offload_info that land in the 256-byte RoCE QP host context
// (docs/hw-controlpath.md "QP host context", and "MAC and IP byte order").
type roceCtx struct {
	// irdma_sc_qp
	RQWQESize uint8  // qp_uk.rq_wqe_size: the RQ WQE shift
	SQPA      uint64 // bus address, or PBLE index when virtually mapped
	RQPA      uint64
	HWSQSize  uint8 // encoded: log2(SQ quanta) − 2
	HWRQSize  uint8 // encoded: log2(RQ quanta) − 2
	PushIdx   uint32
	QSHandle  uint16
	SQTPHEn   bool
	RQTPHEn   bool
	SQTPHVal  uint8
	RQTPHVal  uint8

	// irdma_qp_host_ctx_info
	SendCQ         uint32
	RecvCQ         uint32
	StatsIdx       uint8
	StatsIdxValid  bool
	QPComplCtx     uint64
	RemEndpointIdx uint32

	// irdma_roce_offload_info
	PDID          uint32
	DCTCPEn       bool
	ErrRQIdxValid bool
	ErrRQIdx      uint32
	IsQP1         bool
	ROCETVer      uint8
	PKey          uint16
	AckCredits    uint8
	QKey          uint32
	DestQP        uint32
	RTOMin        uint8
	MAC           [6]byte
	ORDSize       uint8
	IRDSize       uint32 // raw; encoded with irdma_sc_get_encoded_ird_size
	WrRdRespEn    bool
	RdEn          bool
	BindEn        bool
	FastRegEn     bool
	DCQCNEn       bool
	RcvNoICRC     bool
	FWCCEn        bool
	UDPrivCQEn    bool
	PrivModeEn    bool
	TimelyEn      bool
	THigh         uint16
	TLow          uint8
	// GEN_3 (irdma_sc_qp_setctx_roce_gen_3): USE_SRQ qword0 b10 and SRQ_ID
	// +200 [15:0], from qp_uk.srq_uk. The emulator's GEN_3 context keeps
	// GEN_2's layout otherwise (emu/profile GEN3).
	UseSRQ bool
	SRQID  uint32
	// RemoteAtomicsEn is GEN_3's REMOTE_ATOMIC_EN, +160 b18
	// (ctx_info->remote_atomics_en); set only on GEN_3, where IRDSIZE
	// never reaches b18 (the largest IRD, 64, encodes as 3).
	RemoteAtomicsEn bool

	// irdma_udp_offload_info
	IPv4          bool
	InsertVLANTag bool
	TTL           uint8
	TOS           uint8
	SrcPort       uint16
	DstPort       uint16
	DestIP        [4]uint32 // host-order words; IPv4 in word 3 (irdma_copy_ip_ntohl)
	LocalIP       [4]uint32
	SndMSS        uint32
	VLANTag       uint16
	ARPIdx        uint16
	FlowLabel     uint32
	PSNNxt        uint32
	LSN           uint32
	EPSN          uint32
	PSNMax        uint32
	PSNUna        uint32
	CWnd          uint32
	RexmitThresh  uint8
	RNRNakThresh  uint8
	// MinRNRTimer is udp_info.min_rnr_timer: irdma_modify_qp_roce stores
	// IB_QP_MIN_RNR_TIMER only from GEN_3 on (hw_rev >= IRDMA_GEN_3), so on
	// GEN_2 it stays 0; irdma_query_qp reports it on every generation. The
	// emulator's GEN_3 context keeps GEN_2's layout, which has no field for
	// it (encodeRoCECtx does not write it).
	MinRNRTimer uint8
}

// encodedIRDSize is irdma_sc_get_encoded_ird_size: roundup_pow_of_two(2 ×
// ird) → 4:0, 8/16:1, 32/64:2, 128:3, 256:4; anything else 0.
func encodedIRDSize(ird uint32) uint64 {
	v := uint64(1)
	for v < 2*uint64(ird) {
		v <<= 1
	}
	switch v {
	case 4:
		return 0
	case 8, 16:
		return 1
	case 32, 64:
		return 2
	case 128:
		return 3
	case 256:
		return 4
	}
	return 0
}

// encodeRoCECtx is irdma_sc_qp_setctx_roce_gen_2: the full 256-byte host
// context as 32 qwords, every qword the function does not write left zero
// (the Q2+context buffer is zeroed at allocation). With DCQCN or DCTCP on
// and ECN bits clear, TOS gets ECT(0) (|= 2).
func encodeRoCECtx(c *roceCtx) [qpCtxSize / 8]uint64 {
	var q [qpCtxSize / 8]uint64
	pushEn, pushIdx := false, uint32(0)
	if c.PushIdx != invalidPushIdx {
		pushEn, pushIdx = true, c.PushIdx
	}
	// +0
	q[0] = bits(uint64(c.RQWQESize), 9, 8) | b2u(c.RQTPHEn)<<30 | b2u(c.SQTPHEn)<<31 |
		bits(uint64(pushIdx), 41, 32) | b2u(pushEn)<<47 | bits(uint64(c.PDID)>>16, 21, 20) |
		b2u(c.DCTCPEn)<<25 | b2u(c.ErrRQIdxValid)<<19 | b2u(c.IsQP1)<<6 |
		bits(uint64(c.ROCETVer), 63, 60) | b2u(c.IPv4)<<3 | b2u(c.InsertVLANTag)<<5 | b2u(c.UseSRQ)<<10
	q[1] = c.SQPA // +8
	q[2] = c.RQPA // +16
	tos := c.TOS
	if (c.DCQCNEn || c.DCTCPEn) && tos&3 == 0 {
		tos |= 2 // ECN_CODE_PT_VAL
	}
	// +24
	q[3] = bits(uint64(c.HWRQSize), 11, 8) | bits(uint64(c.HWSQSize), 15, 12) |
		bits(uint64(c.TTL), 7, 0) | bits(uint64(tos), 31, 24) |
		bits(uint64(c.SrcPort), 47, 32) | bits(uint64(c.DstPort), 63, 48)
	// +32, +40: DESTIPADDR2 [63:32] | 3 [31:0]; DESTIPADDR0 [63:32] | 1 [31:0]
	q[4] = uint64(c.DestIP[2])<<32 | uint64(c.DestIP[3])
	q[5] = uint64(c.DestIP[0])<<32 | uint64(c.DestIP[1])
	// +48
	q[6] = bits(uint64(c.SndMSS), 29, 16) | bits(uint64(c.VLANTag), 47, 32) | bits(uint64(c.ARPIdx), 63, 48)
	// +56
	q[7] = bits(uint64(c.PKey), 47, 32) | bits(uint64(c.PDID), 63, 48) |
		bits(uint64(c.AckCredits), 24, 20) | bits(uint64(c.FlowLabel), 19, 0)
	// +64
	q[8] = bits(uint64(c.QKey), 63, 32) | bits(uint64(c.DestQP), 23, 0)
	// +80, +88, +96
	q[10] = bits(uint64(c.PSNNxt), 23, 0) | bits(uint64(c.LSN), 55, 32)
	q[11] = bits(uint64(c.EPSN), 23, 0)
	q[12] = bits(uint64(c.PSNMax), 23, 0) | bits(uint64(c.PSNUna), 55, 32)
	// +112
	q[14] = bits(uint64(c.CWnd), 55, 32)
	// +128
	q[16] = bits(uint64(c.ErrRQIdx), 46, 32) | bits(uint64(c.RNRNakThresh), 56, 54) |
		bits(uint64(c.RexmitThresh), 53, 48) | bits(uint64(c.RTOMin), 63, 57)
	// +136
	q[17] = bits(uint64(c.SendCQ), 24, 0) | bits(uint64(c.RecvCQ), 56, 32)
	// +144
	q[18] = bits(uint64(c.StatsIdx), 6, 0)
	// +152
	q[19] = macU64(c.MAC) << 16
	// +160
	q[20] = bits(uint64(c.ORDSize), 7, 0) | bits(encodedIRDSize(c.IRDSize), 18, 16) |
		b2u(c.WrRdRespEn)<<20 | b2u(c.RdEn)<<21 | b2u(c.StatsIdxValid)<<26 |
		b2u(c.BindEn)<<23 | b2u(c.FastRegEn)<<24 | b2u(c.DCQCNEn)<<22 |
		b2u(c.RcvNoICRC)<<31 | b2u(c.FWCCEn)<<28 | b2u(c.UDPrivCQEn)<<19 |
		b2u(c.PrivModeEn)<<25 | b2u(c.TimelyEn)<<27 | b2u(c.RemoteAtomicsEn)<<18
	// +168
	q[21] = c.QPComplCtx
	// +176
	q[22] = bits(uint64(c.SQTPHVal), 7, 0) | bits(uint64(c.RQTPHVal), 15, 8) | bits(uint64(c.QSHandle), 25, 16)
	// +184, +192: LOCAL_IPADDR3 [31:0] | 2 [63:32]; 1 [31:0] | 0 [63:32]
	q[23] = uint64(c.LocalIP[2])<<32 | uint64(c.LocalIP[3])
	q[24] = uint64(c.LocalIP[0])<<32 | uint64(c.LocalIP[1])
	// +200
	q[25] = bits(uint64(c.THigh), 63, 52) | bits(uint64(c.TLow), 39, 32) | bits(uint64(c.SRQID), 15, 0)
	// +208
	q[26] = bits(uint64(c.RemEndpointIdx), 16, 0)
	return q
}

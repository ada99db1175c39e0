package uk

// SQ WQE builders, as the kernel's irdma_uk_* functions write them
// (docs/hw-datapath.md "SQ WQE body", "Valid bit and NOP padding"): body
// qwords first, then the header (qword3 of the first quantum) with one atomic
// 64-bit store carrying the valid bit.

// SGE is one scatter/gather element (struct ib_sge, irdma_sge).
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// PostSQInfo is irdma_post_sq_info with its per-operation union
// flattened: each builder reads the fields its operation has.
type PostSQInfo struct {
	WrID       uint64
	OpType     uint8 // hardware opcode of SEND/WRITE variants (OpSend, OpSendSol, …)
	Signaled   bool  // SIGCOMPL
	ReadFence  bool  // READFENCE (IB_SEND_FENCE)
	LocalFence bool  // LOCALFENCE
	ImmValid   bool  // IMMDATAFLAG: SEND/WRITE with immediate
	ImmData    uint32
	STagToInv  uint32 // SEND_INV: the remote STag to invalidate

	// SGList are the local SGEs of SEND, WRITE and READ (the READ sink).
	SGList []SGE
	// InlineData is the payload of an inline SEND/WRITE: the bytes the
	// SGEs point at, gathered in order. A Go caller has no kernel virtual
	// addresses to hand over, so it passes the bytes; SGList, if given,
	// only counts against max_send_sge, as irdma_uk_inline_send checks.
	InlineData []byte

	RemoteAddr uint64 // WRITE/READ/atomics: remote VA
	RemoteSTag uint32 // WRITE/READ/atomics: R_Key

	AHID    uint32 // UD send: address-handle index
	DestQPN uint32 // UD send: remote QPN (24 bits)
	QKey    uint32 // UD send: Q_Key

	AtomicLocal SGE    // atomics: where the original value lands (Addr, LKey)
	SwapOrAdd   uint64 // FETCH_ADD add value, COMPARE_SWAP swap value
	Compare     uint64 // COMPARE_SWAP compare value

	TargetSTag uint32 // LOCAL_INV: the STag to invalidate

	Bind BindWindow // BIND_MW
}

// BindWindow is irdma_bind_window.
type BindWindow struct {
	MRSTag        uint32 // the parent MR's STag
	MWSTag        uint32 // the window's new STag
	VA            uint64 // window start (ignored when zero-based)
	Len           uint64
	VABased       bool // IRDMA_ADDR_TYPE_VA_BASED
	Type1         bool // mem_window_type_1
	EnaReads      bool
	EnaWrites     bool
	RemoteAtomics bool // only when the device has atomics
}

// FastRegInfo is irdma_fast_reg_stag_info as irdma_post_send fills it
// for IB_WR_REG_MR.
type FastRegInfo struct {
	WrID            uint64
	Signaled        bool
	ReadFence       bool
	LocalFence      bool
	STagKey         uint8  // key & 0xff
	STagIndex       uint32 // key >> 8
	AccessRights    uint8  // irdma_get_mr_access result (STAGRIGHTS)
	VABased         bool   // addr_type (verbs always VA-based)
	VA              uint64 // VA when VA-based, else first-byte offset
	TotalLen        uint64
	PBLAddr         uint64 // reg_addr_pa
	FirstPMPBLIndex uint32
	ChunkSize       uint8  // LPBLSIZE: 1 when the MR has more than one page
	PageSize        uint64 // MR page size in bytes: 4K, 2M or 1G
}

// fragCntToQuantaSQ is irdma_fragcnt_to_quanta_sq (docs/hw-datapath.md
// "Quanta and ADDFRAGCNT").
func fragCntToQuantaSQ(n int) (uint16, bool) {
	if n < 0 || n > 15 {
		return 0, false
	}
	if n <= 1 {
		return 1, true
	}
	return uint16(1 + n/2), true
}

// inlineQuanta is irdma_inline_data_size_to_quanta (GEN_2/3).
func inlineQuanta(n int) uint16 {
	if n <= 8 {
		return 1
	}
	return uint16(min(1+(n-8+30)/31, 8))
}

func b64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// sqWQE is the ring slice of a WQE of quanta quanta at idx.
func (q *QP) sqWQE(idx uint32, quanta uint16) []byte {
	return q.sqBuf[idx*QuantumSize : (idx+uint32(quanta))*QuantumSize]
}

// validBit is VALID at the current SQ polarity.
func (q *QP) validBit() uint64 { return uint64(q.swqePol) << sqValidShift }

// nextSendWQE is irdma_qp_get_next_send_wqe (kernel: no push pad). If the WQE
// does not fit before the next max_hw_sq_chunk boundary, the rest of the
// chunk is filled with single-quantum NOPs first, so no WQE ever straddles
// one; both need free quanta (IRDMA_SQ_RING_FREE_QUANTA). The polarity flips
// when a WQE lands at index 0, so the first lap is written with VALID=1. The
// tracking entry records what the completion needs. The pre-clear of
// irdma_clr_wqes is done here for every WQE, as the out-of-tree driver does:
// upstream calls it from each builder except the atomics (docs/hw-datapath.md
// "Version differences"); doing it for atomics too only changes memory one
// stride ahead of the head that no valid WQE uses.
func (q *QP) nextSendWQE(quanta uint16, totalLen uint32, wrID uint64, signaled bool) (uint32, bool) {
	chunk := q.lim.MaxSQChunk
	avail := chunk - q.sq.head.Load()%chunk
	if uint32(quanta) <= avail {
		if uint32(quanta) > q.sq.sqFree() {
			return 0, false
		}
	} else {
		if uint32(quanta)+avail > q.sq.sqFree() {
			return 0, false
		}
		for range avail {
			q.nop1()
			q.sq.head.Store((q.sq.head.Load() + 1) % q.sq.size)
		}
	}
	idx := q.sq.head.Load()
	if idx == 0 {
		q.swqePol ^= 1
	}
	q.sq.head.Store((q.sq.head.Load() + uint32(quanta)) % q.sq.size)
	q.sqTrk[idx] = SQTrack{WrID: wrID, WrLen: totalLen, Quanta: quanta, Signaled: signaled}
	q.clrWQEs(idx)
	return idx, true
}

// nop1 is irdma_nop_1: an unsignaled padding NOP at the head, tracked as
// one quantum so a completion's tail walk steps over it.
func (q *QP) nop1() {
	idx := q.sq.head.Load()
	q.sqTrk[idx] = SQTrack{Quanta: 1}
	w := q.sqWQE(idx, 1)
	put64(w, 0, 0)
	put64(w, 8, 0)
	put64(w, 16, 0)
	store64(w, 24, uint64(OpNOP)<<sqOpcodeShift|q.validBit())
}

// clrWQEs is irdma_clr_wqes: at every 128th index, the 128 quanta one
// stride ahead are filled so they read as not valid for the polarity the
// hardware will expect there: 0x00 on a VALID=1 lap, 0xff on a VALID=0
// lap, inverted when the stride is the next lap's index 0.
func (q *QP) clrWQEs(idx uint32) {
	if idx%clrStride != 0 {
		return
	}
	target := (idx + clrStride) % q.sq.size
	fill := byte(0)
	if (q.swqePol == 1) == (target == 0) {
		fill = 0xff
	}
	// Qword stores, atomic like every store to a header position the
	// device may poll (mem.go); 512 of them every 128 WQEs.
	start := int(target) * QuantumSize
	end := min(start+clrStride*QuantumSize, len(q.sqBuf))
	v := uint64(0)
	if fill != 0 {
		v = ^v
	}
	for off := start; off+8 <= end; off += 8 {
		store64(q.sqBuf, off, v)
	}
}

// setFragment is irdma_set_fragment (GEN_2): address, then VALID |
// FRAG_LEN | FRAG_STAG; a nil sge writes an empty slot with only VALID.
func setFragment(w []byte, off int, sge *SGE, valid uint8) {
	v := uint64(valid) << sqValidShift
	if sge == nil {
		put64(w, off, 0)
		put64(w, off+8, v)
		return
	}
	put64(w, off, sge.Addr)
	put64(w, off+8, v|uint64(sge.Length&fragLenMask)<<fragLenShift|uint64(sge.LKey))
}

// writeFragments lays out SGEs as irdma_uk_send/rdma_write/rdma_read do:
// slot 0 unless it holds the immediate, then slots of 16 bytes from byte
// 32; on GEN_2 an even, non-zero fragment count (the immediate counts)
// gets an empty pad slot after the last one, and ADDFRAGCNT counts it.
// It returns ADDFRAGCNT.
func (q *QP) writeFragments(w []byte, sges []SGE, imm bool) uint64 {
	fragCnt := len(sges)
	i := 0
	if imm {
		fragCnt++
	} else {
		var first *SGE
		if len(sges) > 0 {
			first = &sges[0]
		}
		setFragment(w, 0, first, q.swqePol)
		i = 1
	}
	addl := uint64(0)
	if fragCnt > 1 {
		addl = uint64(fragCnt - 1)
	}
	off := QuantumSize
	for ; i < len(sges); i++ {
		setFragment(w, off, &sges[i], q.swqePol)
		off += 16
	}
	if fragCnt != 0 && fragCnt%2 == 0 {
		setFragment(w, off, nil, q.swqePol)
		if !q.lim.PadFragUncounted { // GEN_2 counts the pad slot
			addl++
		}
	}
	return addl
}

func sgeTotal(sges []SGE) uint32 {
	var t uint32
	for _, s := range sges {
		t += s.Length
	}
	return t
}

func (info *PostSQInfo) fenceBits() uint64 {
	return b64(info.ReadFence)*sqReadFence | b64(info.LocalFence)*sqLocalFence | b64(info.Signaled)*sqSigCompl
}

// fragWQE reserves the quanta of a SEND or WRITE that carries its payload
// in fragments — the SGEs, plus one slot for the immediate, counted as
// irdma_fragcnt_to_quanta_sq counts them — and writes the immediate and the
// fragments; the caller writes qword2 and the header. It returns the WQE
// and its ADDFRAGCNT.
func (q *QP) fragWQE(info *PostSQInfo) (w []byte, addl uint64, err error) {
	if len(info.SGList) > q.maxSQFrag {
		return nil, 0, ErrInvalid
	}
	fragCnt := len(info.SGList)
	if info.ImmValid {
		fragCnt++
	}
	quanta, ok := fragCntToQuantaSQ(fragCnt)
	if !ok {
		return nil, 0, ErrInvalid
	}
	idx, ok := q.nextSendWQE(quanta, sgeTotal(info.SGList), info.WrID, info.Signaled)
	if !ok {
		return nil, 0, ErrNoMem
	}
	w = q.sqWQE(idx, quanta)
	if info.ImmValid {
		put64(w, 0, uint64(info.ImmData))
	}
	return w, q.writeFragments(w, info.SGList, info.ImmValid), nil
}

// Send is irdma_uk_send: SEND, SEND_INV, SEND_SOL, SEND_SOL_INV (info.
// OpType), with or without immediate; qword2 carries the UD Q_Key and
// destination QPN (0 on RC), the header REMSTAG the STag to invalidate
// and AHID the UD address handle.
func (q *QP) Send(info *PostSQInfo) error {
	w, addl, err := q.fragWQE(info)
	if err != nil {
		return err
	}
	put64(w, 16, uint64(info.QKey)|uint64(info.DestQPN&destQPNMask)<<destQPNShift)
	hdr := uint64(info.STagToInv) | uint64(info.AHID&sqAHIDMask) |
		b64(info.ImmValid)*sqImmDataFlag |
		uint64(info.OpType&0x3f)<<sqOpcodeShift |
		addl<<sqAddFragCntShift |
		info.fenceBits() | q.validBit()
	store64(w, 24, hdr)
	return nil
}

// RDMAWrite is irdma_uk_rdma_write: WRITE or WRITE_SOL (info.OpType),
// with or without immediate; qword2 is the remote VA, REMSTAG the R_Key.
func (q *QP) RDMAWrite(info *PostSQInfo) error {
	w, addl, err := q.fragWQE(info)
	if err != nil {
		return err
	}
	put64(w, 16, info.RemoteAddr)
	hdr := uint64(info.RemoteSTag) |
		uint64(info.OpType&0x3f)<<sqOpcodeShift |
		b64(info.ImmValid)*sqImmDataFlag |
		addl<<sqAddFragCntShift |
		info.fenceBits() | q.validBit()
	store64(w, 24, hdr)
	return nil
}

// RDMARead is irdma_uk_rdma_read: READ, or READ with local invalidate
// (opcode 0x0b) when invSTag; the SGEs are the local sink.
func (q *QP) RDMARead(info *PostSQInfo, invSTag bool) error {
	if len(info.SGList) > q.maxSQFrag {
		return ErrInvalid
	}
	quanta, ok := fragCntToQuantaSQ(len(info.SGList))
	if !ok {
		return ErrInvalid
	}
	idx, ok := q.nextSendWQE(quanta, sgeTotal(info.SGList), info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, quanta)
	addl := q.writeFragments(w, info.SGList, false)
	put64(w, 16, info.RemoteAddr)
	op := OpRDMARead
	if invSTag {
		op = OpRDMAReadInvSTag
	}
	hdr := uint64(info.RemoteSTag) |
		addl<<sqAddFragCntShift |
		uint64(op)<<sqOpcodeShift |
		info.fenceBits() | q.validBit()
	store64(w, 24, hdr)
	return nil
}

// copyInline is irdma_copy_inline_data (GEN_2/3): 8 bytes at WQE byte 8,
// then 31 bytes per further quantum, each full quantum closed by the
// inline valid byte (polarity << 7) at its byte 31, and a partial last
// quantum's valid byte at its byte 31 too.
func copyInline(w []byte, data []byte, pol uint8) {
	valid := pol << inlineValidShift
	off, rem, first := 8, 8, true
	for len(data) > 0 {
		n := copy(w[off:off+min(rem, len(data))], data)
		off += n
		data = data[n:]
		rem -= n
		if rem == 0 {
			rem = 31
			if first {
				first = false
				off += 16 // past qword2 and the header
			} else {
				w[off] = valid
				off++
			}
		}
	}
	if !first && rem < 31 {
		w[off+rem] = valid
	}
}

func (q *QP) inlineCheck(info *PostSQInfo) (uint16, bool) {
	if len(info.SGList) > q.maxSQFrag || len(info.InlineData) > q.maxInline {
		return 0, false
	}
	return inlineQuanta(len(info.InlineData)), true
}

// InlineSend is irdma_uk_inline_send: SEND variants with the payload in
// the WQE (INLINEDATAFLAG, INLINEDATALEN, ADDFRAGCNT 0).
func (q *QP) InlineSend(info *PostSQInfo) error {
	quanta, ok := q.inlineCheck(info)
	if !ok {
		return ErrInvalid
	}
	n := len(info.InlineData)
	idx, ok := q.nextSendWQE(quanta, uint32(n), info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, quanta)
	put64(w, 16, uint64(info.QKey)|uint64(info.DestQPN&destQPNMask)<<destQPNShift)
	hdr := uint64(info.STagToInv) | uint64(info.AHID&sqAHIDMask) |
		uint64(info.OpType&0x3f)<<sqOpcodeShift |
		uint64(n)<<sqInlineLenShift |
		b64(info.ImmValid)*sqImmDataFlag |
		sqInlineDataFlag |
		info.fenceBits() | q.validBit()
	if info.ImmValid {
		put64(w, 0, uint64(info.ImmData))
	}
	copyInline(w, info.InlineData, q.swqePol)
	store64(w, 24, hdr)
	return nil
}

// InlineRDMAWrite is irdma_uk_inline_rdma_write.
func (q *QP) InlineRDMAWrite(info *PostSQInfo) error {
	quanta, ok := q.inlineCheck(info)
	if !ok {
		return ErrInvalid
	}
	n := len(info.InlineData)
	idx, ok := q.nextSendWQE(quanta, uint32(n), info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, quanta)
	put64(w, 16, info.RemoteAddr)
	hdr := uint64(info.RemoteSTag) |
		uint64(info.OpType&0x3f)<<sqOpcodeShift |
		uint64(n)<<sqInlineLenShift |
		sqInlineDataFlag |
		b64(info.ImmValid)*sqImmDataFlag |
		info.fenceBits() | q.validBit()
	if info.ImmValid {
		put64(w, 0, uint64(info.ImmData))
	}
	copyInline(w, info.InlineData, q.swqePol)
	store64(w, 24, hdr)
	return nil
}

// atomic is irdma_uk_atomic_fetch_add / irdma_uk_atomic_compare_swap
// (docs/hw-datapath.md "Atomic WQEs"): two quanta, ADDFRAGCNT 1, the local
// result buffer in qwords 0–1, the remote VA in qword2, the operands at bytes
// 32 and 40, and the second quantum's valid bit alone at byte 56.
func (q *QP) atomic(info *PostSQInfo, op uint8) error {
	const quanta = 2
	idx, ok := q.nextSendWQE(quanta, 0, info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, quanta)
	put64(w, 0, info.AtomicLocal.Addr)
	put64(w, 8, uint64(info.AtomicLocal.LKey))
	put64(w, 16, info.RemoteAddr)
	put64(w, 32, info.SwapOrAdd)
	if op == OpAtomicCompareSwap {
		put64(w, 40, info.Compare)
	} else {
		put64(w, 40, 0)
	}
	put64(w, 48, 0)
	put64(w, 56, q.validBit())
	hdr := uint64(1)<<sqAddFragCntShift |
		uint64(info.RemoteSTag) |
		uint64(op)<<sqOpcodeShift |
		info.fenceBits() | q.validBit()
	store64(w, 24, hdr)
	return nil
}

// AtomicFetchAdd is irdma_uk_atomic_fetch_add.
func (q *QP) AtomicFetchAdd(info *PostSQInfo) error { return q.atomic(info, OpAtomicFetchAdd) }

// AtomicCompareSwap is irdma_uk_atomic_compare_swap.
func (q *QP) AtomicCompareSwap(info *PostSQInfo) error { return q.atomic(info, OpAtomicCompareSwap) }

// LocalInvalidate is irdma_uk_stag_local_invalidate: the target STag in
// the FRAG_STAG of slot 0 with length 0 and, unlike every other
// fragment, VALID 0 (docs/hw-datapath.md "Memory and NOP WQEs").
func (q *QP) LocalInvalidate(info *PostSQInfo) error {
	idx, ok := q.nextSendWQE(1, 0, info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, 1)
	setFragment(w, 0, &SGE{LKey: info.TargetSTag}, 0)
	put64(w, 16, 0)
	hdr := uint64(OpInvSTag)<<sqOpcodeShift | info.fenceBits() | q.validBit()
	store64(w, 24, hdr)
	return nil
}

// MWBind is irdma_uk_mw_bind with the GEN_2 irdma_set_mw_bind_wqe
// layout. Only user space posts it (irdma_upost_send); the kernel's
// irdma_post_send refuses IB_WR_BIND_MW, so PostSend never calls this.
// It is here for completeness of the hardware format and for tests.
func (q *QP) MWBind(info *PostSQInfo) error {
	idx, ok := q.nextSendWQE(1, 0, info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, 1)
	b := &info.Bind
	put64(w, 0, b.VA)
	put64(w, 8, uint64(b.MRSTag)<<32|uint64(b.MWSTag))
	put64(w, 16, b.Len)
	rights := b64(b.EnaReads)<<2 | b64(b.EnaWrites)<<3
	hdr := uint64(OpBindMW)<<sqOpcodeShift |
		rights<<sqSTagRightsShift |
		b64(b.VABased)*sqVABasedTO |
		b64(b.Type1)*sqMemWindowType1 |
		info.fenceBits() |
		b64(b.RemoteAtomics)*sqRemoteAtomicsEn |
		q.validBit()
	store64(w, 24, hdr)
	return nil
}

// FastRegister is irdma_sc_mr_fast_register (kernel only, docs/hw-datapath.md
// "Memory and NOP WQEs"). The PBL address goes in bits [63:12] of qword1 as
// the out-of-tree driver writes it (upstream's form gives the same bits for a
// page-aligned address below 2^52, docs/hw-datapath.md "Version
// differences").
func (q *QP) FastRegister(info *FastRegInfo) error {
	var ps uint64 // IRDMA_PAGE_SIZE_4K
	switch info.PageSize {
	case 1 << 30:
		ps = 2 // IRDMA_PAGE_SIZE_1G
	case 1 << 21:
		ps = 1 // IRDMA_PAGE_SIZE_2M
	}
	idx, ok := q.nextSendWQE(1, 0, info.WrID, info.Signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, 1)
	put64(w, 0, info.VA)
	put64(w, 8, uint64(info.FirstPMPBLIndex>>16&0xfff)|info.PBLAddr&^0xfff)
	put64(w, 16, info.TotalLen&stagLenMask|uint64(info.FirstPMPBLIndex&0xffff)<<firstPBLIdxLoShift)
	hdr := uint64(info.STagKey) |
		uint64(info.STagIndex&0xff_ffff)<<sqSTagIndexShift |
		uint64(OpFastRegNSMR)<<sqOpcodeShift |
		uint64(info.ChunkSize&3)<<sqLPBLSizeShift |
		ps<<sqHPageSizeShift |
		uint64(info.AccessRights&0x1f)<<sqSTagRightsShift |
		b64(info.VABased)*sqVABasedTO |
		b64(info.ReadFence)*sqReadFence |
		b64(info.LocalFence)*sqLocalFence |
		b64(info.Signaled)*sqSigCompl |
		q.validBit()
	store64(w, 24, hdr)
	return nil
}

// NOP is irdma_nop: a one-quantum NOP, signaled if asked.
func (q *QP) NOP(wrID uint64, signaled bool) error {
	idx, ok := q.nextSendWQE(1, 0, wrID, signaled)
	if !ok {
		return ErrNoMem
	}
	w := q.sqWQE(idx, 1)
	put64(w, 0, 0)
	put64(w, 8, 0)
	put64(w, 16, 0)
	store64(w, 24, uint64(OpNOP)<<sqOpcodeShift|b64(signaled)*sqSigCompl|q.validBit())
	return nil
}

// SQDoorbell is the kernel's irdma_uk_qp_post_wr decision, made once
// after a batch of posts: it reads the hardware SQ tail from the QP
// shadow area and reports whether to write the QP id to the doorbell
// (WQEALLOC). It rings only for new WQEs (head moved since the last
// decision) that hardware has not already reached: when the head moved
// forward, if the hardware tail lies in [initial head, head); on a wrap,
// if it is ≥ the initial head or < the head (Linux uk.c:irdma_uk_qp_post_wr;
// docs/hw-datapath.md "Doorbells"). Otherwise
// the hardware is still busy behind the initial head and will find the
// new WQEs by their valid bits. User space (libirdma) always rings.
func (q *QP) SQDoorbell() bool {
	hwTail := uint32(load64(q.shadow, 0) & qpShadowHWSQTailMask)
	head, init := q.sq.head.Load(), q.initialHead
	ring := false
	if head != init && head != hwTail {
		if head > init {
			ring = hwTail >= init && hwTail < head
		} else {
			ring = hwTail >= init || hwTail < head
		}
	}
	q.initialHead = head
	return ring
}

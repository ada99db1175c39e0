package uk

// WROpcode is ib_wr_opcode (values of enum ib_wr_opcode, include/rdma/
// ib_verbs.h, which shares them with ib_uverbs_wr_opcode).
type WROpcode uint8

// Work request opcodes irdma_post_send knows, and BIND_MW, which it
// refuses.
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	WRRDMAReadWithInv   WROpcode = 11
	WRRegMR             WROpcode = 0x20
)

// SendFlags are ib_send_flags.
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1 // IB_SEND_FENCE
	SendSignaled  SendFlags = 2 // IB_SEND_SIGNALED
	SendSolicited SendFlags = 4 // IB_SEND_SOLICITED
	SendInline    SendFlags = 8 // IB_SEND_INLINE
)

// IB access flags (ib_access_flags) irdma_get_mr_access reads.
const (
	AccessLocalWrite  uint32 = 1
	AccessRemoteWrite uint32 = 2
	AccessRemoteRead  uint32 = 4
	AccessMWBind      uint32 = 16
	AccessZeroBased   uint32 = 32
)

// RegMRWR are the fields of an IB_WR_REG_MR request irdma_post_send
// reads (reg_wr(wr) and the MR it names).
type RegMRWR struct {
	Key             uint32 // the new STag: index << 8 | key
	Access          uint32 // IB access flags
	PageSize        uint64 // mr->page_size in bytes
	IOVA            uint64 // mr->iova
	Length          uint64 // mr->length
	PBLAddr         uint64 // *palloc->level1.addr
	FirstPMPBLIndex uint32 // palloc->level1.idx
	NPages          uint32 // iwmr->npages
}

// SendWR is a send work request (ib_send_wr with its rdma/atomic/ud/reg
// extensions flattened).
type SendWR struct {
	WrID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGList []SGE
	// InlineData is the payload of an IB_SEND_INLINE SEND/WRITE, the
	// SGEs' bytes gathered (see PostSQInfo.InlineData).
	InlineData []byte
	// ImmData is the immediate in host order: ntohl(wr->ex.imm_data).
	ImmData        uint32
	InvalidateRKey uint32 // SEND_WITH_INV, LOCAL_INV
	RemoteAddr     uint64 // RDMA and atomic
	RKey           uint32
	CompareAdd     uint64 // atomic: compare (CAS) or add (FETCH_ADD) value
	Swap           uint64 // atomic: swap value (CAS)
	AHID           uint32 // UD: ah->sc_ah.ah_info.ah_idx
	RemoteQPN      uint32
	RemoteQKey     uint32
	RegMR          RegMRWR
}

// MRAccessRights is irdma_get_mr_access for GEN_2: LOCALREAD always;
// LOCALWRITE 0x02, REMOTEWRITE 0x0a, REMOTEREAD 0x05 (each implies the
// local right); BIND_WINDOW only from GEN_3; ZERO_BASED (0x20) does not
// fit the 5-bit STAGRIGHTS and is dropped by FIELD_PREP.
func MRAccessRights(access uint32) uint8 {
	r := uint8(0x01)
	if access&AccessLocalWrite != 0 {
		r |= 0x02
	}
	if access&AccessRemoteWrite != 0 {
		r |= 0x0a
	}
	if access&AccessRemoteRead != 0 {
		r |= 0x05
	}
	return r
}

// PostSend is irdma_post_send's loop for a kernel QP (docs/hw-datapath.md
// "Posting from the kernel"): each work request is mapped to its uk builder
// in order; the first one that fails stops the loop and its index is returned
// with the error, the ones before it stay posted. posted == len(wrs) means
// all were.
//
// Errors are those irdma_post_send returns: ErrInvalid for an opcode it
// does not post (BIND_MW among them), an immediate the QP's caps lack,
// atomics on a device without IRDMA_FEATURE_ATOMIC_OPS, too many SGEs
// (max_send_sge, or max_hw_read_sges for READ), inline data over
// max_inline_data; ErrNoMem for a full SQ.
//
// The doorbell is not rung here: irdma_post_send calls
// irdma_uk_qp_post_wr once after the loop, even when a request failed,
// if no flush was issued and the QP is at most RTS — the caller, which
// knows that state, calls SQDoorbell.
func (q *QP) PostSend(wrs []SendWR) (posted int, err error) {
	for i := range wrs {
		if err := q.postOne(&wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

func (q *QP) postOne(wr *SendWR) error {
	info := PostSQInfo{
		WrID:      wr.WrID,
		Signaled:  wr.Flags&SendSignaled != 0 || q.sigAll,
		ReadFence: wr.Flags&SendFence != 0,
	}
	sol := wr.Flags&SendSolicited != 0
	inline := wr.Flags&SendInline != 0
	switch wr.Opcode {
	case WRSend, WRSendWithImm, WRSendWithInv:
		switch {
		case wr.Opcode == WRSendWithImm:
			if q.caps&CapSendWithImm == 0 {
				return ErrInvalid
			}
			info.ImmValid, info.ImmData = true, wr.ImmData
			fallthrough
		case wr.Opcode == WRSend:
			info.OpType = OpSend
			if sol {
				info.OpType = OpSendSol
			}
		default:
			info.OpType = OpSendInv
			if sol {
				info.OpType = OpSendSolInv
			}
			info.STagToInv = wr.InvalidateRKey
		}
		if q.typ == QPTypeUD {
			info.AHID, info.QKey, info.DestQPN = wr.AHID, wr.RemoteQKey, wr.RemoteQPN
		}
		info.SGList = wr.SGList
		if inline {
			info.InlineData = wr.InlineData
			return q.InlineSend(&info)
		}
		return q.Send(&info)

	case WRRDMAWriteWithImm, WRRDMAWrite:
		if wr.Opcode == WRRDMAWriteWithImm {
			if q.caps&CapWriteWithImm == 0 {
				return ErrInvalid
			}
			info.ImmValid, info.ImmData = true, wr.ImmData
		}
		info.OpType = OpRDMAWrite
		if sol {
			info.OpType = OpRDMAWriteSol
		}
		info.RemoteAddr, info.RemoteSTag = wr.RemoteAddr, wr.RKey
		info.SGList = wr.SGList
		if inline {
			info.InlineData = wr.InlineData
			return q.InlineRDMAWrite(&info)
		}
		return q.RDMAWrite(&info)

	case WRRDMARead, WRRDMAReadWithInv:
		if len(wr.SGList) > q.lim.MaxReadSGEs {
			return ErrInvalid
		}
		// READ has no inline form; IB_SEND_INLINE is ignored, as it is by
		// libirdma (golden rc_read_with_inline_flag). READ_WITH_INV's
		// invalidate_rkey is not passed to the hardware (docs/hw-datapath.md
		// "Version differences").
		info.OpType = OpRDMARead
		info.RemoteAddr, info.RemoteSTag = wr.RemoteAddr, wr.RKey
		info.SGList = wr.SGList
		return q.RDMARead(&info, wr.Opcode == WRRDMAReadWithInv)

	case WRLocalInv:
		// The kernel forces the local fence (docs/hw-datapath.md "Posting
		// from the kernel").
		info.OpType = OpInvSTag
		info.LocalFence = true
		info.TargetSTag = wr.InvalidateRKey
		return q.LocalInvalidate(&info)

	case WRRegMR:
		m := &wr.RegMR
		fr := FastRegInfo{
			WrID:            wr.WrID,
			Signaled:        info.Signaled,
			ReadFence:       info.ReadFence,
			LocalFence:      wr.Flags&SendFence != 0,
			STagKey:         uint8(m.Key),
			STagIndex:       m.Key >> 8,
			AccessRights:    MRAccessRights(m.Access),
			VABased:         true,
			VA:              m.IOVA,
			TotalLen:        m.Length,
			PBLAddr:         m.PBLAddr,
			FirstPMPBLIndex: m.FirstPMPBLIndex,
			PageSize:        m.PageSize,
		}
		if m.NPages > 1 { // IRDMA_MIN_PAGES_PER_FMR
			fr.ChunkSize = 1
		}
		return q.FastRegister(&fr)

	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		if !q.lim.AtomicsOK || len(wr.SGList) == 0 {
			return ErrInvalid
		}
		info.AtomicLocal = wr.SGList[0]
		info.RemoteAddr, info.RemoteSTag = wr.RemoteAddr, wr.RKey
		if wr.Opcode == WRAtomicCmpAndSwp {
			info.OpType = OpAtomicCompareSwap
			info.SwapOrAdd, info.Compare = wr.Swap, wr.CompareAdd
			return q.AtomicCompareSwap(&info)
		}
		info.OpType = OpAtomicFetchAdd
		info.SwapOrAdd = wr.CompareAdd
		return q.AtomicFetchAdd(&info)
	}
	// Anything else, IB_WR_BIND_MW included.
	return ErrInvalid
}

package qp

import "github.com/irdma-emu/irdma-emu/emu/mr"

// Validation: what the hardware checks of a fetched SQ WQE before it
// sends anything. A failure is the WQE's error CQE and the QP's AE
// (completion.go, sqFatal).

// maxMsgSize is IBTA's 2^31 message limit (rxe check_length, irdma
// IRDMA_MAX_OUTBOUND_MSG_SIZE).
const maxMsgSize = 1 << 31

// validate classifies the WQE and checks what the hardware checks before
// it sends: the decoder's layout violations (their reactions), the
// opcode against the QP type and the device's features, the QP's
// permissions, and every local SGE against the STag table (PD, rights,
// bounds). It returns the AE of the first failure, 0 if none.
func (r *requester) validate(t *Transport, ctx *Ctx, w *SQWQE, e *sqEntry) uint16 {
	if !w.OK() {
		for _, v := range w.Violations() {
			if re := v.Code.Reaction(); re.AE != 0 {
				return re.AE
			}
		}
		return AEWQEInvalidParameter
	}
	op := w.Opcode
	ud := t.isUD()
	switch {
	case op == OpNOP, op == OpLocalInvalidate:
		e.kind = kindLocal
	case op == OpFastRegister:
		e.kind = kindLocal
		if !t.attrs.FastRegEn {
			return AEPrivOperationDenied
		}
	case op == OpBindMW:
		e.kind = kindLocal
		if ud {
			return AEWQEUnexpectedOpcode
		}
		if !t.attrs.BindEn {
			return AEPrivOperationDenied
		}
	case op.IsSend():
		if ud {
			if op.Invalidates() {
				return AEWQEUnexpectedOpcode
			}
			e.kind = kindUD
		} else {
			e.kind = kindSendWr
		}
	case op.IsWrite():
		if ud {
			return AEWQEUnexpectedOpcode
		}
		e.kind = kindSendWr
	case op.IsRead():
		if ud {
			return AEWQEUnexpectedOpcode
		}
		if t.attrs.ORD == 0 {
			return AERDMAReadWhileORDZero
		}
		e.kind = kindRead
	case op.IsAtomic():
		// Without IRDMA_FEATURE_ATOMIC_OPS the opcode is not one the device
		// executes (docs/hw-datapath.md "Generations", "GEN_2 capabilities").
		if ud || !t.dp.Profile.Atomics {
			return AEWQEUnexpectedOpcode
		}
		if t.attrs.ORD == 0 {
			return AERDMAReadWhileORDZero
		}
		e.kind = kindAtomic
	default:
		return AEWQEUnexpectedOpcode
	}
	if w.TotalLen > maxMsgSize {
		return AEWQEInvalidParameter
	}
	pd, qpn := t.pd(), t.q.ID
	switch e.kind {
	case kindUD, kindSendWr:
		if !w.Inline {
			for _, f := range w.Fragments() {
				if f.Len == 0 {
					continue
				}
				if ae := r.checkLocal(t, ctx, f.STag, pd, qpn, f.Addr, uint64(f.Len), mr.AccessLocalRead); ae != 0 {
					return ae
				}
			}
		}
		if e.kind == kindUD {
			a, _, ae, ok := t.dp.AHs.ResolveAH(w.UD.AHID)
			if !ok {
				return ae
			}
			if a.PD != pd {
				return AEUDAXmitBadPD
			}
		}
	case kindRead:
		for _, f := range w.Fragments() {
			if f.Len == 0 {
				continue
			}
			if ae := r.checkLocal(t, ctx, f.STag, pd, qpn, f.Addr, uint64(f.Len), mr.AccessLocalWrite); ae != 0 {
				return ae
			}
		}
		if frs := w.Fragments(); len(frs) > 0 {
			e.sinkSTag = frs[0].STag
		}
	case kindAtomic:
		if ae := r.checkLocal(t, ctx, w.Atomic.LocalSTag, pd, qpn, w.Atomic.LocalVA, 8, mr.AccessLocalWrite); ae != 0 {
			return ae
		}
	}
	if e.kind != kindLocal && e.kind != kindUD {
		e.npkts = 1
		if e.kind != kindAtomic && e.length > uint64(t.mtu) {
			e.npkts = uint32((e.length + uint64(t.mtu) - 1) / uint64(t.mtu))
		}
	}
	return 0
}

// checkLocal translates an L_Key range and returns the AE on failure.
func (r *requester) checkLocal(t *Transport, ctx *Ctx, stag, pd, qpn uint32, va, n uint64, need mr.Access) uint16 {
	var err error
	ctx.spans, err = t.dp.MRs.Translate(stag, pd, qpn, va, n, need, false, ctx.spans[:0])
	if err != nil {
		if ae, ok := mr.AEOf(err); ok {
			return uint16(ae)
		}
		return AELCEQPCatastrophic
	}
	return 0
}

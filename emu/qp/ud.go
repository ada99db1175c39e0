package qp

import (
	"errors"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// UD: the datagram service (IBTA §9.8). Sending is one packet per WQE
// through an address handle; receiving puts the GRH area and the payload
// into the next receive WQE and completes it. No ACKs, no retries.

// udGRHSize is the 40-byte area at the head of a UD receive buffer (IBTA
// §11.4.1.1): rxe and irdma put the IPv6 header there, or 20 zero bytes and
// the IPv4 header (rxe_resp.c; docs/roce.md "rxe as responder").
const udGRHSize = 40

// sendUD sends a UD SEND through its address handle (IBTA §9.8.3;
// rxe_req.c init_req_packet): framing from the AH (destination MAC from
// its ARP entry, IPs, traffic class, flow label, hop limit, VLAN), DETH
// with the Q_Key and our QPN. A message longer than the port MTU is not
// sent and completes successfully (IBA C10-93.1.1, as rxe).
func (r *requester) sendUD(t *Transport, ctx *Ctx, e *sqEntry, w *SQWQE) bool {
	a, dmac, ae, ok := t.dp.AHs.ResolveAH(w.UD.AHID)
	if !ok {
		t.sqFatal(ctx, e, ae)
		return false
	}
	if a.PD != t.pd() {
		t.sqFatal(ctx, e, AEUDAXmitBadPD)
		return false
	}
	mtu := t.dp.PortMTU
	if t.attrs.MTU != 0 && t.mtu < mtu {
		mtu = t.mtu
	}
	if e.length > uint64(mtu) {
		return true
	}
	p := t.newPacket(ctx)
	if p == nil {
		return false
	}
	ff := &ctx.ff
	*ff = wire.FrameFields{Dst: dmac, Src: wire.MAC(a.SrcMAC), SrcIP: a.Src(), DstIP: a.Dest(),
		TrafficClass: a.TC, HopLimit: a.HopLimit, FlowLabel: a.FlowLabel, SrcPort: t.srcPort(a.Src())}
	if ff.Src == (wire.MAC{}) {
		ff.Src = ctx.MAC
	}
	if a.InsertVLAN {
		ctx.vlan = wire.VLANFields{Priority: uint8(a.VLANTag >> 13), ID: a.VLANTag & 0xfff}
		ff.VLAN = &ctx.vlan
	}
	qkey := w.UD.QKey
	switch {
	case t.attrs.IsQP1 || t.q.ID == 1:
		qkey = wire.GSIQKey
	case qkey&0x8000_0000 != 0:
		// IBTA C10-15: a Q_Key with the high-order bit set selects the
		// QP's own Q_Key.
		qkey = t.attrs.QKey
	}
	bop := wire.UDSendOnly
	if w.ImmFlag {
		bop = wire.UDSendOnlyWithImm
	}
	psn := r.nextPSN
	pf := &ctx.pf
	*pf = wire.PacketFields{}
	pf.BTH = wire.BTHFields{Opcode: bop, PKey: t.pkey(), DestQP: w.UD.DestQPN, PSN: psn, SE: w.Solicited}
	pf.DETH = wire.DETHFields{QKey: qkey, SrcQP: t.q.ID}
	pf.ImmDt = wire.ImmDtFields{Imm: w.ImmData}
	m, err := wire.EncodeFrame(p.Buf(), ff, pf, int(e.length), &ctx.frame)
	if err != nil {
		p.Release()
		t.sqFatal(ctx, e, AEInvalidAHEntry)
		return false
	}
	p.Data = p.Buf()[:m]
	if ae := t.readPayload(ctx, w, 0, nil, ctx.frame.Packet.Payload); ae != 0 {
		p.Release()
		t.sqFatal(ctx, e, ae)
		return false
	}
	r.nextPSN = psn.Next()
	t.hw(StatRDMATxSnds, 1)
	t.transmit(ctx, p)
	return true
}

// handleUD delivers a UD datagram into the next receive WQE.
func (r *responder) handleUD(t *Transport, ctx *Ctx, f *wire.Frame) {
	p := &f.Packet
	if p.Opcode().Transport() != wire.TransportUD {
		t.drop(ctx, DropTransport)
		return
	}
	ok, err := t.recv.Peek(t.dp.Mem, t.meter(ctx), t.dp.limits, &r.wqe)
	if err != nil {
		ae := AELCEQPCatastrophic
		if errors.Is(err, ErrSRQDestroyed) {
			ae = AESRQCatastrophic
		}
		t.enterError(ctx, ae, cq.AESourceRQ, t.recv.State().Cons)
		return
	}
	if !ok {
		t.drop(ctx, DropNoRecvWQE) // UD has no RNR: the datagram is lost
		return
	}
	if !r.wqe.OK() {
		ae := AEWQEInvalidFragData
		for _, v := range r.wqe.Violations() {
			if re := v.Code.Reaction(); re.AE != 0 {
				ae = re.AE
				break
			}
		}
		idx := r.rqError(t, ctx, ae)
		t.enterError(ctx, ae, cq.AESourceRQ, idx)
		return
	}
	n := len(p.Payload)
	if uint64(udGRHSize+n) > r.wqe.TotalLen {
		t.drop(ctx, DropUDTooLong)
		return
	}
	var grh [udGRHSize]byte
	if f.IPv4 != nil {
		copy(grh[20:], f.IPv4[:min(len(f.IPv4), 20)])
	} else {
		copy(grh[:], f.IPv6)
	}
	frags := r.wqe.Fragments()
	if ae := t.writePayload(ctx, frags, 0, grh[:], false); ae != 0 {
		idx := r.rqError(t, ctx, ae)
		t.enterError(ctx, ae, cq.AESourceRQ, idx)
		return
	}
	if ae := t.writePayload(ctx, frags, udGRHSize, p.Payload, true); ae != 0 {
		idx := r.rqError(t, ctx, ae)
		t.enterError(ctx, ae, cq.AESourceRQ, idx)
		return
	}
	t.count(ctx, CntRQWQEs, 1)
	t.completeUD(ctx, f, udGRHSize+n)
	t.hw(StatRDMARxSnds, 1)
}

package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The receive stage, per QP. The port's gate (emu/engine port.receive,
// timing.Receive) parsed the frame once into link.Packet.Frame, checked the
// ICRC, the destination GID, the QPN and the transport, and queued it in
// the QP's inbox; the QP's worker takes it from there.

// receive runs the per-QP checks of rxe's hdr_check / check_addr
// (docs/roce.md "rxe receive checks", 8–11) and hands the packet to the
// responder or the completer. The packet is released here.
func (t *Transport) receive(ctx *Ctx, p *link.Packet) {
	defer p.Release()
	f := &p.Frame // the gate's parse (Deliver)
	if f.Packet.BTH == nil {
		t.drop(ctx, DropParse) // delivered without passing the gate
		return
	}
	if b := p.Lent(); b != nil {
		// A frame the device kept for itself, its payload still where the
		// sender's buffer holds it (dma.go, "Lending"): the payload write
		// copies it from there.
		if len(b) != len(f.Packet.Payload) {
			t.drop(ctx, DropParse)
			return
		}
		f.Packet.Payload = b
	}
	op := f.Packet.Opcode()
	st := t.q.State()
	req := op.IsRequest()
	// State: requests need the responder side ready (RTR, RTS, SQD),
	// responses the requester side (RTS, SQD). rxe check_type_state.
	switch {
	case req && st != StateRTR && st != StateRTS && st != StateClosing:
		t.drop(ctx, DropQPState)
		return
	case !req && st != StateRTS && st != StateClosing:
		t.drop(ctx, DropQPState)
		return
	}
	if !t.pkeyOK(f.Packet.BTH.PKey()) {
		t.drop(ctx, DropPKey)
		return
	}
	if !t.isUD() {
		// rxe check_addr: the packet must come from the QP's peer to the
		// QP's own address.
		src, dst := f.Src().Addr().Unmap(), f.Dst().Addr().Unmap()
		if src != t.destIP.Unmap() || dst != t.localIP.Unmap() {
			t.drop(ctx, DropAddress)
			return
		}
	} else if f.Packet.DETH != nil {
		// IBTA C10-116 / rxe check_keys: the Q_Key must be the QP's, or
		// the GSI Q_Key on QP1.
		want := t.attrs.QKey
		if t.attrs.IsQP1 || t.q.ID == 1 {
			want = wire.GSIQKey
		}
		if f.Packet.DETH.QKey() != want {
			t.drop(ctx, DropQKey)
			return
		}
	}
	n := len(f.Packet.Raw)
	t.count(ctx, CntRxPackets, 1)
	t.count(ctx, CntRxBytes, uint64(n))
	t.countRxIP(f, p)
	if req {
		t.resp.handle(t, ctx, f)
	} else {
		t.req.handleResponse(t, ctx, f)
	}
}

// pkeyOK is the IBTA P_Key match (§10.9.3): the low 15 bits equal and at
// least one of the two a full member. rxe check_keys compares with the
// port's table; a GEN_2 QP carries one P_Key (0xFFFF from irdma).
func (t *Transport) pkeyOK(k uint16) bool {
	mine := t.attrs.PKey
	if mine == 0 {
		mine = wire.DefaultPKey
	}
	return k&0x7fff == mine&0x7fff && (k|mine)&0x8000 != 0
}

// countRxIP adds a received frame to the IP/UDP counters of the QP's
// statistics instance, the block GATHER_STATS reports to the driver (the
// port counted it into the function's block before demultiplexing, when
// the QP was not known yet).
func (t *Transport) countRxIP(f *wire.Frame, p *link.Packet) {
	if t.stats == nil {
		return
	}
	ipLen := uint64(len(p.Data) - wire.EthernetSize)
	if f.VLAN != nil {
		ipLen -= wire.VLANSize
	}
	if f.IPv4 != nil {
		t.stats.Add(StatIP4RxPkts, 1)
		t.stats.Add(StatIP4RxOcts, ipLen)
	} else {
		t.stats.Add(StatIP6RxPkts, 1)
		t.stats.Add(StatIP6RxOcts, ipLen)
	}
	t.stats.Add(StatUDPRxPkts, 1)
}

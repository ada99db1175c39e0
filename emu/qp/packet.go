package qp

import (
	"net/netip"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Packet build and the transmit stage: every packet the QP sends — requests,
// ACKs, READ responses, UD datagrams — takes a buffer from the worker's
// pool (newPacket), gets its framing (rcPacket for the connected peer, the
// AH for UD), is encoded (encode) and handed to the worker (transmit,
// timing.PacketBuild and timing.Serialise). The worker batches it to the
// link or, for an own GID, to the port's receive gate (emu/engine).

func (t *Transport) pkey() uint16 {
	if t.attrs.PKey == 0 {
		return wire.DefaultPKey
	}
	return t.attrs.PKey
}

// newPacket takes a packet buffer; nil when the pool is exhausted (the
// caller stops and the stall timer retries).
func (t *Transport) newPacket(ctx *Ctx) *link.Packet {
	p := ctx.Pool.Get()
	if p == nil {
		t.stalled = true
		t.count(ctx, CntTxStalls, 1)
		if !t.stall.armed {
			t.stall.arm(t.dp.Clock, ctx.now, 20*time.Microsecond)
		}
	}
	return p
}

// srcPort is the UDP source port of the QP's frames from address src: the
// QP's (SRCPORTNUM), unless the link sends every frame from src with a
// port of its own (DataPlane.SrcPorts), which the frame then carries as
// the wire will: the ICRC is computed once, here.
func (t *Transport) srcPort(src netip.Addr) uint16 {
	if sp := t.dp.SrcPorts; sp != nil {
		if p, ok := sp.SourcePort(src); ok {
			return p
		}
	}
	return t.attrs.SrcPort
}

// rcFrame prepares ctx.ff for a packet to the connected peer; false (and
// the QP in error) when the destination MAC cannot be resolved.
func (t *Transport) rcFrame(ctx *Ctx) bool {
	mac, ok := t.dp.AHs.ARP(uint32(t.attrs.ARPIdx))
	if !ok {
		t.sqFatal(ctx, nil, AEInvalidARPEntry)
		return false
	}
	ctx.ff = t.ff
	ctx.ff.Dst = mac
	ctx.ff.Src = t.srcMAC
	if ctx.ff.Src == (wire.MAC{}) {
		ctx.ff.Src = ctx.MAC
	}
	if t.hasVLAN {
		ctx.vlan = t.vlan
		ctx.ff.VLAN = &ctx.vlan
	}
	return true
}

// rcPacket is the prologue of every RC packet, requests and responses
// alike: a buffer from the pool, the framing to the connected peer in
// ctx.ff, and ctx.pf cleared for the caller's headers. nil when there is no
// buffer (the stall timer retries) or the peer's MAC cannot be resolved
// (the QP is in error).
func (t *Transport) rcPacket(ctx *Ctx) *link.Packet {
	p := t.newPacket(ctx)
	if p == nil {
		return nil
	}
	if !t.rcFrame(ctx) {
		p.Release()
		return nil
	}
	ctx.pf = wire.PacketFields{}
	return p
}

// encode builds the frame of ctx.ff and ctx.pf into p with room for n
// payload bytes; the payload goes into ctx.frame.Packet.Payload. The
// framing below the transport headers is encoded once for as long as it
// stays the same (wire.Framing): an RC QP's packets to its peer share it,
// a UD QP's share it while they go to one address.
func (t *Transport) encode(ctx *Ctx, p *link.Packet, n int) bool {
	fr := &t.framing
	var err error
	if !fr.Matches(&ctx.ff) {
		err = fr.Set(&ctx.ff)
	}
	m := 0
	if err == nil {
		m, err = fr.Encode(p.Buf(), &ctx.pf, n, &ctx.frame)
	}
	if err != nil {
		p.Release()
		t.sqFatal(ctx, nil, AELCEQPCatastrophic)
		return false
	}
	p.Data = p.Buf()[:m]
	return true
}

// transmit seals the frame in ctx.frame — or, with ctx.SealAtWire, leaves
// that to the worker, which knows whether the frame leaves the device —
// and hands p to the worker.
func (t *Transport) transmit(ctx *Ctx, p *link.Packet) {
	f := &ctx.frame
	if ctx.SealAtWire {
		p.Frame, p.Unsealed = *f, true
	} else {
		f.Seal()
	}
	n := len(f.Packet.Raw)
	t.charge(ctx, timing.PacketBuild, n)
	t.charge(ctx, timing.Serialise, n)
	t.count(ctx, CntTxPackets, 1)
	t.count(ctx, CntTxBytes, uint64(n))
	ipLen := uint64(len(p.Data) - wire.EthernetSize)
	if f.VLAN != nil {
		ipLen -= wire.VLANSize
	}
	if f.IPv4 != nil {
		t.hw(StatIP4TxPkts, 1)
		t.hw(StatIP4TxOcts, ipLen)
	} else {
		t.hw(StatIP6TxPkts, 1)
		t.hw(StatIP6TxOcts, ipLen)
	}
	t.hw(StatUDPTxPkts, 1)
	ctx.Send(p)
}

package engine

import (
	"net/netip"
	"runtime"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// port is the device's port: the link.Receiver its link pushes frames to.
// A link never calls Receive from two goroutines at once, so the parse
// scratch is the port's own.
type port struct {
	e        *Engine
	l        link.Link
	f        wire.Frame
	c        qp.Counters
	gids     atomic.Pointer[[]netip.Addr]
	state    atomic.Uint32
	closed   atomic.Bool
	inflight atomic.Int32
	members  []uint32
	// delivered counts the frames queued to a QP (a multicast frame once
	// per member); every frame received is delivered or dropped here.
	delivered atomic.Uint64
}

var _ link.Receiver = (*port)(nil)

// Receive implements link.Receiver: each frame passes the gate and goes to
// its QP's inbox, or is dropped and counted.
func (p *port) Receive(pkts []*link.Packet) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	if p.closed.Load() {
		for _, pk := range pkts {
			pk.Release()
		}
		return
	}
	for _, pk := range pkts {
		p.receive(pk)
	}
}

// LinkStateChanged implements link.Receiver: the port state (ibv_query_port;
// port events are the daemon's).
func (p *port) LinkStateChanged(s link.State) { p.state.Store(uint32(s)) }

// close detaches the port and waits for a delivery in progress.
func (p *port) close() {
	p.closed.Store(true)
	if p.l != nil {
		p.l.Attach(nil)
	}
	for p.inflight.Load() != 0 {
		runtime.Gosched()
	}
}

func (p *port) drop(pk *link.Packet, r qp.DropReason) {
	p.c.Drops[r].Add(1)
	pk.Release()
}

// receive is the gate, in rxe's order (rxe_recv.c rxe_rcv and hdr_check,
// docs/roce.md "rxe receive checks"): parse, ICRC, destination GID, QPN,
// transport.
func (p *port) receive(pk *link.Packet) {
	e := p.e
	f := &p.f
	if err := wire.ParseFrame(pk.Data, f); err != nil {
		p.drop(pk, qp.DropParse)
		return
	}
	n := len(f.Packet.Raw)
	e.dp.Meter.Charge(timing.Receive, n)
	p.countIP(f, pk)
	switch pk.ICRC {
	case link.ICRCUnchecked:
		// A link that carries whole frames leaves the check to us
		// (rxe_icrc_check).
		if f.VerifyICRC() != nil {
			p.c.ICRCFailed.Add(1)
			p.drop(pk, qp.DropICRC)
			return
		}
		p.c.ICRCVerified.Add(1)
	case link.ICRCGood:
		p.c.ICRCLinkGood.Add(1)
	case link.ICRCBad:
		p.c.ICRCFailed.Add(1)
		p.drop(pk, qp.DropICRC)
		return
	case link.ICRCUnverifiable:
		// An IPv4 packet from a UDP socket whose IP ID is unknown: accepted
		// and counted (emu/link's UDP link).
		p.c.ICRCUnverifiable.Add(1)
	}
	dst := f.Dst().Addr().Unmap()
	qpn := f.Packet.BTH.DestQP()
	if qpn == wire.QPNMask {
		p.multicast(pk, f, dst)
		return
	}
	if !p.ourGID(dst) {
		p.drop(pk, qp.DropNotOurGID)
		return
	}
	if qpn == 0 {
		p.drop(pk, qp.DropQPNZero)
		return
	}
	q := e.dev.QPs().Get(qpn) // QPN 1 is the GSI QP's id (irdma)
	if q == nil {
		p.drop(pk, qp.DropUnknownQPN)
		return
	}
	if !transportOK(f.Packet.Opcode(), q.Type) {
		p.drop(pk, qp.DropTransport)
		return
	}
	p.deliver(q, pk)
}

// deliver queues pk on q's transport and wakes its worker.
func (p *port) deliver(q *qp.QP, pk *link.Packet) {
	en := p.e.entryFor(q)
	if en == nil || !en.tr.Deliver(pk) {
		p.drop(pk, qp.DropInboxFull)
		return
	}
	p.delivered.Add(1)
	en.wake()
}

// transportOK is rxe's check_type_state opcode/QP-type match: RC opcodes to
// RC QPs, UD opcodes to UD (and GSI) QPs; UC, RD, CNP and the rest are
// not ours.
func transportOK(op wire.Opcode, t qp.Type) bool {
	switch op.Transport() {
	case wire.TransportRC:
		return t == qp.TypeRoCERC
	case wire.TransportUD:
		return t == qp.TypeRoCEUD
	}
	return false
}

// ourGID reports whether dst is one of the port's addresses (or the port
// has none configured).
func (p *port) ourGID(dst netip.Addr) bool {
	g := p.gids.Load()
	if g == nil || len(*g) == 0 {
		return true
	}
	for _, a := range *g {
		if a == dst {
			return true
		}
	}
	return false
}

// multicast delivers a datagram to DestQP 0xFFFFFF to every UD QP of the
// multicast group of its destination address (IBTA §10.5; irdma's
// CREATE_MCAST_GRP groups): the last member takes the frame, the others a
// copy.
func (p *port) multicast(pk *link.Packet, f *wire.Frame, dst netip.Addr) {
	e := p.e
	if !dst.IsMulticast() || f.Packet.Opcode().Transport() != wire.TransportUD {
		p.drop(pk, qp.DropMcastNoGroup)
		return
	}
	words, v4 := ah.AddrToWords(dst)
	_, g, ok := e.dev.AHs().LookupMG(words, v4)
	if !ok {
		p.drop(pk, qp.DropMcastNoGroup)
		return
	}
	p.members = g.QPs(p.members[:0])
	var qps [ah.MGEntries]*qp.QP
	k := 0
	for _, id := range p.members {
		if q := e.dev.QPs().Get(id); q != nil && q.Type == qp.TypeRoCEUD {
			qps[k] = q
			k++
		}
	}
	if k == 0 {
		p.drop(pk, qp.DropMcastNoGroup)
		return
	}
	for i := 0; i < k-1; i++ {
		c := p.clone(pk)
		if c == nil {
			p.c.Drops[qp.DropInboxFull].Add(1)
			continue
		}
		p.deliver(qps[i], c)
	}
	p.deliver(qps[k-1], pk)
}

// countIP adds the received frame to the function's IP/UDP counters.
func (p *port) countIP(f *wire.Frame, pk *link.Packet) {
	st := p.e.dp.Stats
	if st == nil {
		return
	}
	ipLen := uint64(len(pk.Data) - wire.EthernetSize)
	if f.VLAN != nil {
		ipLen -= wire.VLANSize
	}
	if f.IPv4 != nil {
		st.Function.Add(qp.StatIP4RxPkts, 1)
		st.Function.Add(qp.StatIP4RxOcts, ipLen)
	} else {
		st.Function.Add(qp.StatIP6RxPkts, 1)
		st.Function.Add(qp.StatIP6RxOcts, ipLen)
	}
	st.Function.Add(qp.StatUDPRxPkts, 1)
}

// clone copies pk into a packet of the link's pool; nil when it is empty.
func (p *port) clone(pk *link.Packet) *link.Packet {
	if p.l == nil {
		return nil
	}
	c := p.l.Pool().Get()
	if c == nil {
		return nil
	}
	n := copy(c.Buf(), pk.Data)
	c.Data = c.Buf()[:n]
	c.Time, c.ICRC = pk.Time, pk.ICRC
	return c
}

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
// A link never calls Receive from two goroutines at once, so rx, the parse
// scratch of frames from the link, is the port's own; frames the device
// sends to itself pass the same gate from the worker that built them, with
// the worker's scratch (loop). The counters are atomic.
type port struct {
	e        *Engine
	l        link.Link
	looper   link.Looper // l, if it wants to see looped-back frames
	rx       rxScratch
	c        qp.Counters
	lb       loopStats
	gids     atomic.Pointer[[]netip.Addr]
	state    atomic.Uint32
	closed   atomic.Bool
	inflight atomic.Int32
	// delivered counts the frames queued to a QP (a multicast frame once
	// per member); every frame received is delivered or dropped here.
	delivered atomic.Uint64
}

var _ link.Receiver = (*port)(nil)

// rxScratch is what one goroutine's pass through the gate writes besides
// the packet's own parse (link.Packet.Frame): the member list of a
// multicast group.
type rxScratch struct {
	members []uint32
	pend    pending       // the link's goroutine: QPs to run after the batch (inline.go)
	meter   *timing.Meter // the goroutine's shard of the device's meter
}

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
	if p.rx.pend.on {
		p.e.beginBatch() // polling while the batch is delivered (park.go)
	}
	for _, pk := range pkts {
		p.receive(&p.rx, pk)
	}
	p.rx.meter.Publish()
	// Run to completion (inline.go): each QP that got packets runs here,
	// once, if its worker is parked.
	p.e.runPending(&p.rx.pend)
	if p.rx.pend.on {
		p.e.endBatch(&p.rx.pend)
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
// transport. This is the only parse of a received frame: it goes into
// pk.Frame, which the QP's worker reads (qp.Transport.receive). s is the
// calling goroutine's scratch.
func (p *port) receive(s *rxScratch, pk *link.Packet) {
	e := p.e
	f := &pk.Frame
	if err := wire.ParseFrame(pk.Data, f); err != nil {
		p.drop(pk, qp.DropParse)
		return
	}
	n := len(f.Packet.Raw)
	s.meter.Charge(timing.Receive, n)
	p.countIP(f, pk)
	switch pk.ICRC {
	case link.ICRCUnchecked:
		// A link that carries whole frames leaves the check to us
		// (rxe_icrc_check).
		if f.VerifyICRC() != nil {
			p.c.Add(qp.CntICRCFailed, 1)
			p.drop(pk, qp.DropICRC)
			return
		}
		p.c.Add(qp.CntICRCVerified, 1)
	case link.ICRCGood:
		p.c.Add(qp.CntICRCLinkGood, 1)
	case link.ICRCBad:
		p.c.Add(qp.CntICRCFailed, 1)
		p.drop(pk, qp.DropICRC)
		return
	case link.ICRCInDevice:
		// Delivered inside the device (loopback.go): no wire, no ICRC.
		p.c.Add(qp.CntICRCInDevice, 1)
	case link.ICRCUnverifiable:
		// An IPv4 packet from a UDP socket whose IP ID is unknown: accepted
		// and counted (emu/link's UDP link).
		p.c.Add(qp.CntICRCUnverifiable, 1)
	}
	dst := f.Dst().Addr().Unmap()
	qpn := f.Packet.BTH.DestQP()
	if qpn == wire.QPNMask {
		p.multicast(s, pk, dst)
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
	p.deliver(s, q, pk)
}

// deliver queues pk on q's transport and wakes its worker, or, on the
// link's goroutine with run to completion, notes the QP to run after the
// batch.
func (p *port) deliver(s *rxScratch, q *qp.QP, pk *link.Packet) {
	tr := p.e.transportFor(q)
	if !tr.Deliver(pk) {
		p.drop(pk, qp.DropInboxFull)
		return
	}
	p.delivered.Add(1)
	if s.pend.on {
		s.pend.add(tr.Scheduler().(*entry))
		return
	}
	tr.Wake()
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
func (p *port) multicast(s *rxScratch, pk *link.Packet, dst netip.Addr) {
	e := p.e
	f := &pk.Frame
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
	s.members = g.QPs(s.members[:0])
	var qps [ah.MGEntries]*qp.QP
	k := 0
	for _, id := range s.members {
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
		c := clone(p.pool(), pk)
		if c == nil {
			p.c.Drops[qp.DropInboxFull].Add(1)
			continue
		}
		// The copy's views must alias its own buffer: parse it (bytes the
		// gate has accepted; only the extra members of a group pay this).
		_ = wire.ParseFrame(c.Data, &c.Frame)
		p.deliver(s, qps[i], c)
	}
	p.deliver(s, qps[k-1], pk)
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

// pool is the link's packet pool (nil without a link).
func (p *port) pool() *link.Pool {
	if p.l == nil {
		return nil
	}
	return p.l.Pool()
}

// clone copies pk into a packet of pool; nil when it is empty (or nil).
func clone(pool *link.Pool, pk *link.Packet) *link.Packet {
	if pool == nil {
		return nil
	}
	c := pool.Get()
	if c == nil {
		return nil
	}
	n := copy(c.Buf(), pk.Data)
	c.Data = c.Buf()[:n]
	c.Time, c.ICRC = pk.Time, pk.ICRC
	return c
}

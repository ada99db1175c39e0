package sim

import (
	"math"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The data path of one device as timed resources, at the stage boundaries
// of emu/qp (docs/dataplane.md; docs/timing.md "The pipeline model"):
//
//	post → doorbell (posted MMIO) → WQE fetch (PCIe read)
//	     → payload read (PCIe reads of ≤ MRRS, a window per QP and per device)
//	     → transmit scheduler (round robin over QPs with a packet ready)
//	     → packet engine (segmentation, headers, ICRC) → MAC + wire
//	     → propagation → receive parser → payload write, CQE write (PCIe)
//
// The functional code runs first and the model decides when its effects
// happen: the requester builds its packets when it is run, but each one
// leaves the device only when the model has read its payload and
// serialised it, and reaches the peer's receive path only after the
// link's delay; a CQE the completer wrote is shown to the program only
// when its PCIe write completes.

// Resource indexes a NIC's resources (Resources, the utilisation table).
type Resource int

// The resources of a NIC.
const (
	ResDoorbell  Resource = iota // MMIO doorbells and WQE fetch requests
	ResPCIeRead                  // DMA read completions, device ← host
	ResTxEngine                  // transmit scheduler + packet engine
	ResWire                      // MAC and wire serialisation
	ResRxParser                  // receive parser
	ResPCIeWrite                 // posted DMA writes, device → host (payload, CQEs)
	ResHost                      // the program's CPU (posting, polling)
	NumResources
)

var resourceNames = [NumResources]string{"doorbell", "pcie-read", "tx-engine", "wire", "rx-parser", "pcie-write", "host-cpu"}

func (r Resource) String() string { return resourceNames[r] }

// NIC is one simulated device's data path: the link its engine sends to
// (it implements link.Link) and the resources its packets go through.
type NIC struct {
	s    *Sim
	idx  int
	p    *timing.Pipeline
	mac  wire.MAC
	mtu  int
	pool *link.Pool
	rx   link.Receiver
	out  *Wire
	// meter is the device's cycle meter: the payload bytes the real code
	// wrote while a frame was received are read from it.
	meter *timing.Meter

	Res [NumResources]timing.Server

	qps      []*QPModel
	byRemote map[uint32]*QPModel // the destination QPN of frames this NIC sends
	misc     *QPModel            // frames of no known QP
	rr       int
	sched    Event
	// tags are the completion times of the device's outstanding read
	// requests, oldest first (the read bus serves in order, so they are
	// monotonic).
	tags ring
	cqs  []*CQWatch

	frame wire.Frame
	rxb   [1]*link.Packet
	free  []*flight

	txFrames, rxFrames, lost uint64
	txBytes, rxBytes         uint64
}

// flight is one frame in the model, from its build to its delivery.
type flight struct {
	home    *NIC // whose free list it returns to
	n       *NIC
	q       *QPModel
	pk      *link.Packet
	op      wire.Opcode
	psn     wire.PSN
	udp     int // UDP payload bytes (BTH … ICRC)
	payload int
	read    int // payload bytes still to request from host memory
	needWQE bool
	hadWQE  bool
	retx    bool

	built, wqeAt, readAt timing.Ps // built by the real code; WQE fetched; payload read
	peEnd                timing.Ps
	wireAt, arrived      timing.Ps
	ev                   Event
	stage                uint8
}

const (
	stageArrive uint8 = iota
	stageRxDone
)

func newNIC(s *Sim, idx int, p *timing.Pipeline, mac wire.MAC, mtu int, meter *timing.Meter) *NIC {
	n := &NIC{s: s, idx: idx, p: p, mac: mac, mtu: mtu, pool: link.NewPool(1 << 15), meter: meter,
		byRemote: map[uint32]*QPModel{}}
	n.sched.Init(n.schedule)
	n.misc = n.newQP(0, 0, false)
	return n
}

func (n *NIC) newQP(qpn, remote uint32, inline bool) *QPModel {
	q := &QPModel{n: n, QPN: qpn, Remote: remote, Inline: inline}
	q.pump.Init(q.run)
	q.dbEv.Init(q.doorbell)
	q.dataEv.Init(q.dataVisible)
	n.qps = append(n.qps, q)
	return q
}

// AddQP models local QP qpn connected to remote QPN remote.
func (n *NIC) AddQP(qpn, remote uint32, inline bool) *QPModel {
	q := n.newQP(qpn, remote, inline)
	n.byRemote[remote] = q
	return q
}

// Send implements link.Link: the frames the engine built enter the model.
func (n *NIC) Send(pkts []*link.Packet) error {
	for _, pk := range pkts {
		n.transmit(pk)
	}
	return nil
}

func (n *NIC) getFlight() *flight {
	if k := len(n.free); k > 0 {
		f := n.free[k-1]
		n.free = n.free[:k-1]
		return f
	}
	f := &flight{n: n, home: n}
	f.ev.Init(f.fire)
	return f
}

// putFlight returns f to the free list of the NIC that made it (flights
// cross the wire; without this the sender would allocate one per packet
// and the receiver hoard them).
func (n *NIC) putFlight(f *flight) {
	h := f.home
	*f = flight{n: h, home: h, ev: f.ev}
	h.free = append(h.free, f)
}

// transmit classifies a frame the real code built and queues it on its
// QP's model.
func (n *NIC) transmit(pk *link.Packet) {
	now := n.s.loop.now
	f := n.getFlight()
	f.pk, f.built, f.wqeAt = pk, now, now
	q := n.misc
	if err := wire.ParseFrame(pk.Data, &n.frame); err == nil {
		pkt := &n.frame.Packet
		f.op, f.psn = pkt.Opcode(), pkt.BTH.PSN()
		f.udp, f.payload = len(pkt.Raw), len(pkt.Payload)
		if m := n.byRemote[pkt.BTH.DestQP()]; m != nil {
			q = m
		}
		switch f.op.Operation() {
		case wire.OpSend, wire.OpRDMAWrite, wire.OpRDMAReadRequest, wire.OpCompareSwap, wire.OpFetchAdd:
			if !q.haveReq || q.lastReq.LessThan(f.psn) {
				f.needWQE = f.op.IsStart()
				q.lastReq, q.haveReq = f.psn, true
			} else {
				f.retx = true
				q.Retransmits++
			}
			if !q.Inline && f.op.Operation() != wire.OpRDMAReadRequest {
				f.read = f.payload
			}
		case wire.OpRDMAReadResponse:
			f.read = f.payload
		}
	}
	f.q = q
	q.fl = append(q.fl, f)
	q.TxPackets++
	q.run()
}

// kick makes the transmit scheduler look again at t.
func (n *NIC) kick(t timing.Ps) { n.s.loop.AtEarliest(&n.sched, t) }

// schedule is the transmit scheduler: when the packet engine is free it
// takes the next packet, round robin over the QPs whose oldest packet has
// its payload, through the packet engine onto the wire. It keeps one
// packet in the engine while the previous one serialises.
func (n *NIC) schedule() {
	now := n.s.loop.now
	pe := &n.Res[ResTxEngine]
	if pe.Free > now {
		n.s.loop.At(&n.sched, pe.Free)
		return
	}
	var pick *QPModel
	next := timing.Ps(math.MaxInt64)
	for i := range n.qps {
		q := n.qps[(n.rr+i)%len(n.qps)]
		if q.head >= q.issue {
			continue
		}
		if at := q.fl[q.head].readAt; at <= now {
			pick = q
			n.rr = (n.rr + i + 1) % len(n.qps)
			break
		} else if at < next {
			next = at
		}
	}
	if pick == nil {
		if next != math.MaxInt64 {
			n.s.loop.At(&n.sched, next)
		}
		return
	}
	q := pick
	f := q.fl[q.head]
	q.fl[q.head] = nil
	q.head++
	if q.head > 256 && q.head*2 > len(q.fl) {
		k := copy(q.fl, q.fl[q.head:])
		clear(q.fl[k:])
		q.fl = q.fl[:k]
		q.issue -= q.head
		q.head = 0
	}
	p := n.p
	peStart, peEnd := pe.Serve(now, p.Tx(f.udp), f.udp)
	w := &n.Res[ResWire]
	wStart, wEnd := w.Serve(peEnd, p.Wire(len(f.pk.Data)), len(f.pk.Data)+p.FrameOverhead)
	f.wireAt, f.peEnd = wEnd, peEnd
	n.txFrames++
	n.txBytes += uint64(len(f.pk.Data))
	tr := n.s.tr
	if tr.on() {
		tr.span(n.idx, trackTxEngine, "build", peStart, peEnd, q.QPN)
		tr.packet(n.idx, trackWire, f, wStart, wEnd)
		tr.packet(n.idx, qpTrack(q.QPN), f, f.built, wEnd)
	}
	n.out.carry(f, wEnd)
	if more := q.head < q.issue || n.anyIssued(); more {
		n.s.loop.At(&n.sched, max(peEnd, wStart))
	}
}

func (n *NIC) anyIssued() bool {
	for _, q := range n.qps {
		if q.head < q.issue {
			return true
		}
	}
	return false
}

// fire advances a flight at the receiving NIC.
func (f *flight) fire() {
	switch f.stage {
	case stageArrive:
		f.n.arrive(f)
	case stageRxDone:
		f.n.rxDone(f)
	}
}

// arrive is a frame reaching the NIC's MAC: the receive parser takes it in
// order.
func (n *NIC) arrive(f *flight) {
	now := n.s.loop.now
	f.n, f.arrived = n, now
	_, end := n.Res[ResRxParser].Serve(now, n.p.Rx(f.udp), f.udp)
	n.s.tr.span(n.idx, trackRxParser, f.op.String(), now, end, f.q.Remote)
	f.stage = stageRxDone
	n.s.loop.At(&f.ev, end)
}

// rxDone hands the parsed frame to the real receive path (the engine's
// port gate, then the responder or completer), and schedules the PCIe
// writes it made: the RQ WQE a SEND consumed (a read), its payload, the
// CQEs, each visible when its write completes.
func (n *NIC) rxDone(f *flight) {
	now := n.s.loop.now
	n.rxFrames++
	n.rxBytes += uint64(len(f.pk.Data))
	op, local := f.op, n.byRemoteQP(f)
	if o := op.Operation(); o != wire.OpAcknowledge && (op.IsLast() || op.IsOnly()) {
		local.lastRx = legTimes{built: f.built, wqeAt: f.wqeAt, readAt: f.readAt, peEnd: f.peEnd, wireEnd: f.wireAt,
			arrived: f.arrived, rxEnd: now, needWQE: f.hadWQE}
	}
	before := n.meter.Stage(timing.PayloadDMAWrite).Bytes
	pk := f.pk
	f.pk = nil
	n.putFlight(f)
	if n.rx != nil {
		n.rxb[0] = pk
		n.rx.Receive(n.rxb[:])
		n.rxb[0] = nil
	} else {
		pk.Release()
	}
	// Only this device's engine can have work from the frame.
	for eng := n.s.nodes[n.idx].Eng; eng.Poll(); {
	}
	p := n.p
	at := now
	if op.Operation() == wire.OpSend && op.IsStart() {
		// The receive WQE the SEND consumed. The device prefetches RQ
		// WQEs (an assumption, docs/timing.md): the read costs bus time
		// but its round trip is not on the SEND's path.
		n.Res[ResPCIeRead].Serve(now, p.PCIe(p.WQEBytes), p.WQEBytes)
	}
	if w := int(n.meter.Stage(timing.PayloadDMAWrite).Bytes - before); w > 0 {
		start, end := n.Res[ResPCIeWrite].Serve(at, p.PCIe(w), w)
		n.s.tr.span(n.idx, trackPCIeWrite, "payload-write", start, end+p.PCIeWrite, local.QPN)
		at = end
		if local.OnData != nil && op.Operation() == wire.OpRDMAWrite && (op.IsLast() || op.IsOnly()) {
			local.dataAt.push(end + p.PCIeWrite)
			if _, ok := local.dataEv.Pending(); !ok {
				n.s.loop.At(&local.dataEv, local.dataAt.front())
			}
		}
	}
	n.checkCQs(at)
}

// byRemoteQP returns the local QP a received frame is for (its BTH
// destination QP is local; the flight knows the sender's model).
func (n *NIC) byRemoteQP(f *flight) *QPModel {
	if q := n.byRemote[f.q.QPN]; q != nil {
		return q
	}
	return n.misc
}

// Attach implements link.Link.
func (n *NIC) Attach(r link.Receiver) { n.rx = r }

// State implements link.Link: always up.
func (n *NIC) State() link.State { return link.StateUp }

// MTU implements link.Link.
func (n *NIC) MTU() int { return n.mtu }

// MAC implements link.Link.
func (n *NIC) MAC() wire.MAC { return n.mac }

// BatchSize implements link.Link.
func (n *NIC) BatchSize() int { return link.DefaultBatchSize }

// Pool implements link.Link.
func (n *NIC) Pool() *link.Pool { return n.pool }

// Stats implements link.Link.
func (n *NIC) Stats() link.Stats {
	return link.Stats{TxFrames: n.txFrames, TxBytes: n.txBytes, RxFrames: n.rxFrames, RxBytes: n.rxBytes,
		Faults: link.FaultStats{Lost: n.lost}}
}

// Close implements link.Link: the frames still in the model are released.
func (n *NIC) Close() error {
	for _, q := range n.qps {
		for _, f := range q.fl[q.head:] {
			f.pk.Release()
		}
		q.fl = q.fl[:0]
		q.head, q.issue = 0, 0
	}
	return nil
}

package sim

import (
	"math"

	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// QPModel is the model's side of one QP of a NIC: the packets the real
// requester and responder built, in order, waiting for their WQE, their
// payload reads, and the transmit scheduler.
type QPModel struct {
	n      *NIC
	QPN    uint32
	Remote uint32
	// Inline: the QP's SEND and WRITE payloads are in the WQE (no payload
	// read).
	Inline bool

	fl    []*flight // [head, issue): payload read, waiting for the scheduler; [issue, len): waiting to read
	head  int
	issue int
	reads ring // completion times of this QP's outstanding read requests
	pump  Event

	// The WQE fetches of the posts, in order: each batch is fetched by one
	// read after its doorbell; a request packet that starts a new message
	// takes one WQE of the oldest.
	batches   []wqeBatch
	bhead     int
	doorbells ring // doorbell arrival times not yet turned into fetches
	dbEv      Event
	lastReq   wire.PSN
	haveReq   bool

	// OnData, when set, is called when the last packet of a WRITE to this
	// QP is visible in host memory (the latency tests poll memory).
	OnData func(at timing.Ps)
	dataEv Event
	dataAt ring
	// lastRx is the last message-ending request or response received.
	lastRx legTimes

	TxPackets, Retransmits uint64
}

type wqeBatch struct {
	n       int
	readyAt timing.Ps
}

// Post records that the program posted k work requests to q with one
// doorbell store, leaving the host CPU at t: the doorbell reaches the
// device a posted-write latency later, then the device fetches the k
// WQEs with one read.
func (q *QPModel) Post(k int, t timing.Ps) {
	q.batches = append(q.batches, wqeBatch{n: k, readyAt: math.MaxInt64})
	at := t + q.n.p.PCIeWrite
	q.doorbells.push(at)
	if _, ok := q.dbEv.Pending(); !ok {
		q.n.s.loop.At(&q.dbEv, q.doorbells.front())
	}
}

// doorbell turns the oldest doorbell into its WQE fetch.
func (q *QPModel) doorbell() {
	n := q.n
	now := n.s.loop.now
	q.doorbells.pop()
	// The oldest batch not yet fetched.
	i := q.bhead
	for i < len(q.batches) && q.batches[i].readyAt != math.MaxInt64 {
		i++
	}
	if i < len(q.batches) {
		b := &q.batches[i]
		// The doorbell's TLP (a 4-byte MMIO write) on its way in; then one
		// read of the batch's WQEs.
		n.Res[ResDoorbell].Serve(now, n.p.PCIe(4), 4)
		_, end := n.Res[ResPCIeRead].Serve(now+n.p.PCIeRead, n.p.PCIe(b.n*n.p.WQEBytes), b.n*n.p.WQEBytes)
		b.readyAt = end
		n.s.tr.span(n.idx, trackDoorbell, "wqe-fetch", now, end, q.QPN)
		n.s.loop.AtEarliest(&q.pump, end)
	}
	if q.doorbells.len() > 0 {
		n.s.loop.At(&q.dbEv, q.doorbells.front())
	}
}

// run is the QP's transmit engine at the current time: it takes WQEs for
// new messages and issues the payload reads its window allows, in order;
// blocked, it waits for the WQE fetch or the oldest read to complete.
func (q *QPModel) run() {
	n := q.n
	now := n.s.loop.now
	p := n.p
	for q.issue < len(q.fl) {
		f := q.fl[q.issue]
		if f.needWQE {
			if q.bhead < len(q.batches) {
				b := &q.batches[q.bhead]
				if b.readyAt > now {
					if b.readyAt != math.MaxInt64 {
						n.s.loop.AtEarliest(&q.pump, b.readyAt)
					}
					return // wait for the fetch (or its doorbell)
				}
				f.readAt = max(f.readAt, b.readyAt)
				f.wqeAt, f.hadWQE = b.readyAt, true
				if b.n--; b.n == 0 {
					q.bhead++
					if q.bhead > 64 && q.bhead*2 > len(q.batches) {
						q.batches = append(q.batches[:0], q.batches[q.bhead:]...)
						q.bhead = 0
					}
				}
			}
			// A request the program did not post through the model (none
			// in the scenarios) is treated as fetched.
			f.needWQE = false
		}
		for f.read > 0 {
			for q.reads.len() > 0 && q.reads.front() <= now {
				q.reads.pop()
			}
			for n.tags.len() > 0 && n.tags.front() <= now {
				n.tags.pop()
			}
			if q.reads.len() >= p.QPReadRequests {
				n.s.loop.AtEarliest(&q.pump, q.reads.front())
				return
			}
			if n.tags.len() >= p.DeviceReadTags {
				n.s.loop.AtEarliest(&q.pump, n.tags.front())
				return
			}
			sz := min(f.read, p.MaxReadRequest)
			_, end := n.Res[ResPCIeRead].Serve(now+p.PCIeRead, p.PCIe(sz), sz)
			q.reads.push(end)
			n.tags.push(end)
			f.read -= sz
			f.readAt = max(f.readAt, end)
		}
		f.readAt = max(f.readAt, now)
		if f.payload > 0 && !q.Inline || f.op.Operation() == wire.OpRDMAReadResponse {
			n.s.tr.span(n.idx, trackPCIeRead, "payload-read", f.built, f.readAt, q.QPN)
		}
		q.issue++
		n.kick(f.readAt)
	}
}

func (q *QPModel) dataVisible() {
	now := q.n.s.loop.now
	q.dataAt.pop()
	if q.dataAt.len() > 0 {
		q.n.s.loop.At(&q.dataEv, q.dataAt.front())
	}
	if q.OnData != nil {
		q.OnData(now)
	}
}

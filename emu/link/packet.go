package link

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Packet is one frame in a fixed-size pooled buffer, with the metadata a
// link attaches on receive. A Packet has exactly one owner at a time (see
// the package documentation for who that is when); only the owner may
// touch it.
type Packet struct {
	// Data is the frame, from the destination MAC to the ICRC, without
	// FCS. It should be a sub-slice of Buf (a builder writes into Buf and
	// sets Data = Buf()[:n]); the links never copy it.
	Data []byte
	// Time is when the frame arrived, on the link's clock. Set on
	// receive; ignored by Send.
	Time time.Duration
	// ICRC is what the link knows about the frame's ICRC. Set on
	// receive; ignored by Send.
	ICRC ICRCStatus
	// Frame is the receiver's parse of Data: the device's receive gate
	// (emu/engine) fills it once, and the QP that takes the packet reads
	// its headers from it instead of parsing the frame again. Its views
	// alias the packet's buffer; it is meaningful from the gate to Release,
	// which clears it. Before that, on the sending side, it is the
	// builder's encoding of an Unsealed frame.
	Frame wire.Frame
	// Unsealed is set by a builder that left the frame's ICRC (and the UDP
	// checksum, if it carries one) to be written when the frame leaves the
	// device: Frame then holds the builder's encoding of Data, and Seal
	// writes them. A NIC computes the ICRC at the wire, so a frame the
	// device delivers to itself needs none (docs/dataplane.md "Loopback").
	// A link never sees an unsealed frame: the device seals every frame it
	// hands to Send.
	Unsealed bool

	// lent is the payload of an unsealed frame where it lies in the
	// sender's memory: the builder lent it (Lend) instead of copying it
	// into Data, whose payload bytes are then not yet written. Seal copies
	// it in; a frame the device keeps for itself never needs it there
	// (Lent).
	lent   []byte
	lender Lender

	pool *Pool
	// free is set while the packet sits in its pool, so a second Release
	// is caught instead of handing one buffer to two owners.
	free atomic.Bool
	buf  [BufferSize]byte
}

// Buf returns the packet's whole buffer (BufferSize bytes) to build a frame
// into. Its contents are whatever the previous owner left.
func (p *Packet) Buf() []byte { return p.buf[:] }

// Seal writes the ICRC (and a UDP checksum) of an unsealed frame from the
// builder's encoding in Frame (wire.Frame.Seal); a sealed frame is left as
// it is.
func (p *Packet) Seal() {
	p.fill()
	if p.Unsealed {
		p.Frame.Seal()
		p.Unsealed = false
	}
}

// Lender is what lent a frame's payload (hostmem.Region): Return ends the
// loan, once.
type Lender interface{ Return() }

// Lend makes b, which l lent, the payload of the unsealed frame being
// built, in place of Frame.Packet.Payload (the same length), whose bytes
// are left unwritten: Seal copies b in when the frame leaves the device;
// a frame the device delivers to itself is read from b by the receiving
// QP (Lent), one copy instead of two. The loan ends at Seal or Release.
func (p *Packet) Lend(b []byte, l Lender) {
	p.endLoan()
	p.lent, p.lender = b, l
}

// Lent returns the payload lent for the frame (nil for none): what the
// frame's payload bytes in Data will be once sealed.
func (p *Packet) Lent() []byte { return p.lent }

// fill copies a lent payload into the frame and ends the loan.
func (p *Packet) fill() {
	if p.lent == nil {
		return
	}
	copy(p.Frame.Packet.Payload, p.lent)
	p.endLoan()
}

func (p *Packet) endLoan() {
	if l := p.lender; l != nil {
		l.Return()
	}
	p.lent, p.lender = nil, nil
}

// Release returns the packet to its pool. The caller must be its owner and
// must not use it afterwards. Releasing a nil packet does nothing;
// releasing a packet that is already in its pool is counted
// (PoolStats.DoubleReleases) and otherwise ignored. The check is
// best-effort: a stale Release after the packet has been handed out again
// cannot be told from a legitimate one.
func (p *Packet) Release() {
	if p == nil {
		return
	}
	pool := p.pool
	if pool == nil {
		// Not from a pool (a zero Packet): nothing to return it to.
		p.reset()
		return
	}
	if !p.free.CompareAndSwap(false, true) {
		pool.doubleReleases.Add(1)
		return
	}
	p.reset()
	pool.outstanding.Add(-1)
	pool.free.Put(p)
}

// reset clears the metadata, drops the pointers a packet can hold into
// foreign memory (Data) and ends a loan (Lend), so a pooled packet keeps
// nothing alive.
func (p *Packet) reset() {
	p.endLoan()
	p.Data = nil
	p.Time = 0
	p.ICRC = ICRCUnchecked
	p.Frame = wire.Frame{}
	p.Unsealed = false
}

// releaseAll releases every packet of pkts.
func releaseAll(pkts []*Packet) {
	for _, p := range pkts {
		p.Release()
	}
}

// Pool hands out Packets, each with a BufferSize buffer, and takes them
// back. Like wireguard-go's WaitPool it bounds how many are outstanding;
// unlike it, Get never blocks: it returns nil when the bound is reached.
// A device worker serves many QPs, so it must not sleep on one QP's
// behalf; a requester that gets nil stops building packets and retries
// later, as a NIC with a full transmit ring does. The zero Pool is usable
// and unbounded. Packets are recycled through a sync.Pool, so the steady
// state allocates nothing.
type Pool struct {
	max int64 // ≤ 0: unbounded

	outstanding    atomic.Int64
	allocated      atomic.Uint64
	exhausted      atomic.Uint64
	doubleReleases atomic.Uint64

	free sync.Pool
}

// DefaultPoolSize is the bound of the pool a Pair creates when its
// configuration names none: 4096 buffers, about 17 MB when all are out.
const DefaultPoolSize = 4096

// NewPool returns a pool that hands out at most max packets at a time
// (max ≤ 0: no bound). Buffers are allocated on demand, not up front.
func NewPool(max int) *Pool {
	return &Pool{max: int64(max)}
}

// Get returns a packet owned by the caller, with empty Data, or nil if
// max packets are already outstanding.
func (q *Pool) Get() *Packet {
	if q.max > 0 {
		for {
			n := q.outstanding.Load()
			if n >= q.max {
				q.exhausted.Add(1)
				return nil
			}
			if q.outstanding.CompareAndSwap(n, n+1) {
				break
			}
		}
	} else {
		q.outstanding.Add(1)
	}
	p, _ := q.free.Get().(*Packet)
	if p == nil {
		p = &Packet{pool: q}
		q.allocated.Add(1)
	}
	p.free.Store(false)
	return p
}

// PoolStats are a pool's counters.
type PoolStats struct {
	// Outstanding is the number of packets handed out and not yet
	// released.
	Outstanding int64
	// Allocated counts the packets ever created (more than the bound when
	// the garbage collector has emptied the free list).
	Allocated uint64
	// Exhausted counts the Gets that returned nil.
	Exhausted uint64
	// DoubleReleases counts Releases of packets already in the pool.
	DoubleReleases uint64
}

// Stats returns the pool's counters.
func (q *Pool) Stats() PoolStats {
	return PoolStats{
		Outstanding:    q.outstanding.Load(),
		Allocated:      q.allocated.Load(),
		Exhausted:      q.exhausted.Load(),
		DoubleReleases: q.doubleReleases.Load(),
	}
}

// Outstanding returns the number of packets handed out and not yet
// released; a test's leak check wants it back at its starting value.
func (q *Pool) Outstanding() int64 { return q.outstanding.Load() }

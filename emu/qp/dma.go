package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The payload read and payload write stages: message bytes move between
// host memory and a packet through the SGEs of a WQE (their L_Keys) or the
// spans of an R_Key. Every transfer is charged here, once per packet:
// timing.PayloadDMARead for SEND/WRITE/UD sources and READ responses,
// timing.PayloadDMAWrite for receive buffers, WRITE targets, READ sinks and
// atomic results (the responder's atomic execution charges its own, where
// it touches memory).
//
// A program's own buffers (registered outside the shared arena) are a
// MapIO region: each access is a system call on its /proc/<pid>/mem. There
// a message's bytes move in as few calls as the stage's rules allow — the
// send side reads a message's next packets ahead (readAhead), the receive
// side gathers a WRITE's packets (writeBehindBuf) — while the charges stay
// per packet.

// readPayload is the payload read of a send: it copies n = len(dst)
// message bytes from offset off of w's payload (inline bytes, which the WQE
// fetch already read, or the SGEs translated through their L_Keys) into dst
// — or lends them to p, dst's packet, where they lie in one span of
// mapped memory (lendSGE; nil p: always a copy). w is the requester's
// current decode (r.cur). The stage is charged per packet whatever
// readAhead served, and whether lent or copied.
func (t *Transport) readPayload(ctx *Ctx, w *SQWQE, off uint64, p *link.Packet, dst []byte) uint16 {
	if len(dst) == 0 {
		return 0
	}
	if w.Inline {
		src := w.InlineData()
		if off+uint64(len(dst)) > uint64(len(src)) {
			return AEWQEInvalidParameter
		}
		copy(dst, src[off:])
		return 0
	}
	t.charge(ctx, timing.PayloadDMARead, len(dst))
	if t.lendSGE(ctx, p, w.Fragments(), off, len(dst)) {
		return 0
	}
	ra := ctx.ra
	if ra != nil && ra.holds(ctx.run, t.req.curSeq, off, len(dst)) {
		copy(dst, ra.buf[off-ra.off:])
		return 0
	}
	ae, left := copySGEs(t, ctx, w.Fragments(), off, dst, false, false)
	if ae != 0 {
		return ae
	}
	if left != 0 {
		return AEWQEInvalidParameter // the SGEs hold less than the message
	}
	// The packet came through a program's /proc/<pid>/mem (ctx.spans is
	// what copySGEs translated last): read what the next packets of the
	// message need in one call.
	if next := off + uint64(len(dst)); next < w.TotalLen && len(ctx.spans) > 0 {
		if _, ok := t.dp.Mem.Indirect(ctx.spans[0].IOVA); ok {
			t.fillReadAhead(ctx, w, next)
		}
	}
	return 0
}

// Lending: a payload that lies in one span of the device's mapped memory
// is not copied into the frame when it is built; the packet borrows it
// (hostmem.Memory.Borrow, link.Packet.Lend). A frame that leaves the
// device gets its bytes when the worker seals it at the wire, one copy as
// before; a frame the device keeps for itself (an own GID, the engine's
// loopback) is read by the receiving QP straight from the sender's buffer
// (Transport.receive), one copy where there were two: what moves a
// one-daemon WRITE at memory speed (docs/performance.md "Lent
// payloads"). The bytes are read later than a copy would read them — at
// the wire or at the receiver, before the ACK that completes the WQE — as
// a NIC's DMA may; verbs leave a buffer the program's again only at its
// completion. Only a worker that seals at the wire lends (Ctx.SealAtWire):
// a frame sealed when built needs its payload then.

// lend makes the n bytes at iova p's lent payload, if that memory lends;
// false leaves the copy to the caller.
func (t *Transport) lend(ctx *Ctx, p *link.Packet, iova hostmem.IOVA, n int) bool {
	if p == nil || !ctx.SealAtWire {
		return false
	}
	b, r, ok := t.dp.Mem.Borrow(iova, n)
	if !ok {
		return false
	}
	p.Lend(b, r)
	return true
}

// lendSGE lends the n message bytes at offset off of the SGE list frags,
// translated through their L_Key with local read access, when they lie
// in one SGE and one span. Anything else — two SGEs, two spans, a
// translation that fails — is left to copySGEs, which reports the fault.
func (t *Transport) lendSGE(ctx *Ctx, p *link.Packet, frags []Fragment, off uint64, n int) bool {
	if p == nil || !ctx.SealAtWire {
		return false
	}
	i, in := fragmentAt(frags, off)
	if i < 0 || uint64(n) > uint64(frags[i].Len)-in {
		return false
	}
	f := frags[i]
	var err error
	ctx.spans, err = t.dp.MRs.Translate(f.STag, t.pd(), t.q.ID, f.Addr+in, uint64(n), mr.AccessLocalRead, false, ctx.spans[:0])
	if err != nil || len(ctx.spans) != 1 {
		return false
	}
	return t.lend(ctx, p, ctx.spans[0].IOVA, n)
}

// fragmentAt returns the index of the SGE of frags that holds message
// offset off and the offset within it; -1 when off is past the last byte.
// An SGE of length zero holds nothing.
func fragmentAt(frags []Fragment, off uint64) (i int, in uint64) {
	for i, f := range frags {
		if off < uint64(f.Len) {
			return i, off
		}
		off -= uint64(f.Len)
	}
	return -1, 0
}

// readAheadSize bounds what one read ahead holds: a 64 KiB message's
// packets after its first.
const readAheadSize = 64 << 10

// readAhead is a worker's copy of the payload bytes a message's next
// packets will send, read from a program's memory in one call where each
// packet would make one (docs/performance.md). It is valid only in the
// Transport.Run it was read in (Ctx.run), for the WQE it was read for
// (fetch sequence), so a retransmission or a later message reads memory
// again, as the hardware's DMA would.
type readAhead struct {
	run, seq uint64
	off      uint64 // message offset of buf[0]
	n        int
	buf      [readAheadSize]byte
}

func (ra *readAhead) holds(run, seq, off uint64, n int) bool {
	return ra.n > 0 && ra.run == run && ra.seq == seq && off >= ra.off && off+uint64(n) <= ra.off+uint64(ra.n)
}

// fillReadAhead reads message bytes from offset off of w (up to
// readAheadSize) into the worker's read ahead. A failure leaves it empty:
// each packet then reads for itself, and the one that meets the fault
// reports it.
func (t *Transport) fillReadAhead(ctx *Ctx, w *SQWQE, off uint64) {
	if ctx.ra == nil {
		ctx.ra = new(readAhead)
	}
	ra := ctx.ra
	ra.n = 0
	n := int(min(w.TotalLen-off, readAheadSize))
	if ae, left := copySGEs(t, ctx, w.Fragments(), off, ra.buf[:n], false, false); ae != 0 || left != 0 {
		return
	}
	ra.run, ra.seq, ra.off, ra.n = ctx.run, t.req.curSeq, off, n
}

// writePayload is the payload write of a receive: it writes src at offset
// off of the SGE list frags (receive buffers, READ sinks) through their
// L_Keys, with local write access. last says src ends the message: only
// then is its final cache line stored last (store).
func (t *Transport) writePayload(ctx *Ctx, frags []Fragment, off uint64, src []byte, last bool) uint16 {
	if len(src) == 0 {
		return 0
	}
	if !t.settleWrites(ctx) { // stores keep their order
		return AELCEQPCatastrophic
	}
	t.charge(ctx, timing.PayloadDMAWrite, len(src))
	if ae, left := copySGEs(t, ctx, frags, off, src, true, last); ae != 0 || left == 0 {
		return ae
	}
	return AEMsgTooLongForBuffer
}

// readSpans is the payload read of a READ response: dst from the host
// memory spans an R_Key translated to (ctx.spans), in order, or lent to p
// when there is one span (lend). It reports a failed access.
func (t *Transport) readSpans(ctx *Ctx, spans []mr.Span, p *link.Packet, dst []byte) bool {
	t.charge(ctx, timing.PayloadDMARead, len(dst))
	if len(spans) == 1 && t.lend(ctx, p, spans[0].IOVA, len(dst)) {
		return true
	}
	for _, s := range spans {
		if t.dp.Mem.Read(s.IOVA, dst[:s.Len]) != nil {
			return false
		}
		dst = dst[s.Len:]
	}
	return true
}

// writeSpans is the payload write of a WRITE packet (psn) or an atomic's
// original value: src into the host memory spans its key translated to,
// in order; last as for writePayload. Bytes bound for a program's memory
// go through the worker's write behind. It reports a failed access.
func (t *Transport) writeSpans(ctx *Ctx, spans []mr.Span, src []byte, last bool, psn wire.PSN) bool {
	t.charge(ctx, timing.PayloadDMAWrite, len(src))
	for _, s := range spans {
		if !t.writeBehind(ctx, s.IOVA, src[:s.Len], last && int(s.Len) == len(src), psn) {
			return false
		}
		src = src[s.Len:]
	}
	return true
}

// writeBehindSize bounds the bytes a worker's write behind holds.
const writeBehindSize = 64 << 10

// writeBehindBuf is a worker's run of consecutive payload bytes bound for
// a program's memory (a MapIO region: one system call per store), stored
// with one call when the run ends — at the end of the message, at a gap,
// when it is full — instead of one per packet (docs/performance.md). It
// only ever holds bytes of the QP being run, and never past the end of
// its receive loop (Transport.Run), nor past anything inside it that
// could let someone observe the bytes: a CQE, a fatal NAK, another store
// or an atomic of the QP store it first (settleWrites, flushWrites).
type writeBehindBuf struct {
	r    *hostmem.Region // the MapIO region all of it lies in
	iova hostmem.IOVA
	n    int
	psn  wire.PSN // the last packet it holds bytes of
	buf  [writeBehindSize]byte
}

// writeBehind stores p at iova, end saying p ends a message: directly for
// mapped memory, through the write behind for a program's memory. It
// reports a failed store (of p, or of the held bytes it had to store).
func (t *Transport) writeBehind(ctx *Ctx, iova hostmem.IOVA, p []byte, end bool, psn wire.PSN) bool {
	r, indirect := t.dp.Mem.Indirect(iova)
	if indirect && (len(p) > writeBehindSize || uint64(iova-r.IOVA())+uint64(len(p)) > uint64(r.Len())) {
		indirect = false // not one store's worth of one region: as it comes
	}
	wb := ctx.wb
	if wb != nil && wb.n > 0 && (!indirect || r != wb.r || wb.iova+hostmem.IOVA(wb.n) != iova || wb.n+len(p) > len(wb.buf)) {
		// Stores keep their order: what is held goes first.
		if _, err := t.flushWrites(ctx); err != nil {
			return false
		}
	}
	if !indirect {
		return t.store(iova, p, end) == nil
	}
	if wb == nil {
		wb = new(writeBehindBuf)
		ctx.wb = wb
	}
	if wb.n == 0 {
		wb.r, wb.iova = r, iova
	}
	wb.n += copy(wb.buf[wb.n:], p)
	wb.psn = psn
	if end {
		_, err := t.flushWrites(ctx)
		return err == nil
	}
	return true
}

// flushWrites stores what the write behind holds, its final cache line
// last (the end of a message, if it holds one). On failure it returns the
// PSN of the last packet whose bytes it held.
func (t *Transport) flushWrites(ctx *Ctx) (wire.PSN, error) {
	wb := ctx.wb
	if wb == nil || wb.n == 0 {
		return 0, nil
	}
	n := wb.n
	wb.n = 0
	return wb.psn, t.dp.Mem.Write(wb.iova, wb.buf[:n])
}

// settleWrites stores the write behind before something that lets the
// bytes be observed; a failed store fails the QP as a failed WRITE
// placement does (a remote operational error NAK for the last packet
// held, irdma's catastrophic AE). It reports whether the QP is still
// good.
func (t *Transport) settleWrites(ctx *Ctx) bool {
	psn, err := t.flushWrites(ctx)
	if err == nil {
		return true
	}
	if t.q.State() != StateError {
		t.resp.nakFatal(t, ctx, wire.NAKRemoteOperationalError, psn, AELCEQPCatastrophic, cq.AESourceInRR, false)
	}
	return false
}

// store writes p at iova. Only the bytes that end a message are stored
// with their final cache line last (hostmem.Memory.Write), for programs
// that spin on a buffer's last byte; the rest of a message needs no such
// order, since its end comes later, and on a program's /proc/<pid>/mem
// the order costs a second system call (hostmem.Memory.WriteUnordered).
func (t *Transport) store(iova hostmem.IOVA, p []byte, ordered bool) error {
	if ordered {
		return t.dp.Mem.Write(iova, p)
	}
	return t.dp.Mem.WriteUnordered(iova, p)
}

// copySGEs moves buf between memory and offset off of the SGE list frags,
// each SGE translated through its L_Key: from memory into buf (readPayload,
// local read access) or from buf into memory (writePayload, local write
// access; last as for writePayload). It returns the AE of the first
// failure, or how many bytes of buf the SGEs had no room for.
func copySGEs(t *Transport, ctx *Ctx, frags []Fragment, off uint64, buf []byte, write, last bool) (ae uint16, left int) {
	need := mr.AccessLocalRead
	if write {
		need = mr.AccessLocalWrite
	}
	pd, qpn := t.pd(), t.q.ID
	first, in := fragmentAt(frags, off)
	if first < 0 {
		return 0, len(buf)
	}
	for _, f := range frags[first:] {
		if f.Len == 0 {
			continue
		}
		k := min(uint64(f.Len)-in, uint64(len(buf)))
		var err error
		ctx.spans, err = t.dp.MRs.Translate(f.STag, pd, qpn, f.Addr+in, k, need, false, ctx.spans[:0])
		in = 0 // the SGEs after the first from their start
		if err != nil {
			return aeOf(err), len(buf)
		}
		for _, s := range ctx.spans {
			if write {
				err = t.store(s.IOVA, buf[:s.Len], last && int(s.Len) == len(buf))
			} else {
				err = t.dp.Mem.Read(s.IOVA, buf[:s.Len])
			}
			if err != nil {
				return AELCEQPCatastrophic, len(buf)
			}
			buf = buf[s.Len:]
		}
		if len(buf) == 0 {
			return 0, 0
		}
	}
	return 0, len(buf)
}

func aeOf(err error) uint16 {
	if ae, ok := mr.AEOf(err); ok {
		return uint16(ae)
	}
	return AELCEQPCatastrophic
}

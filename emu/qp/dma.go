package qp

import (
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// The payload read and payload write stages: message bytes move between
// host memory and a packet through the SGEs of a WQE (their L_Keys) or the
// spans of an R_Key. Every transfer is charged here, once per packet:
// timing.PayloadDMARead for SEND/WRITE/UD sources and READ responses,
// timing.PayloadDMAWrite for receive buffers, WRITE targets, READ sinks and
// atomic results (the responder's atomic execution charges its own, where
// it touches memory).

// readPayload is the payload read of a send: it copies n = len(dst)
// message bytes from offset off of w's payload (inline bytes, which the WQE
// fetch already read, or the SGEs translated through their L_Keys) into dst.
func (t *Transport) readPayload(ctx *Ctx, w *SQWQE, off uint64, dst []byte) uint16 {
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
	t.dp.charge(timing.PayloadDMARead, len(dst))
	if ae, left := copySGEs(t, ctx, w.Fragments(), off, dst, false, false); ae != 0 || left == 0 {
		return ae
	}
	return AEWQEInvalidParameter // the SGEs hold less than the message
}

// writePayload is the payload write of a receive: it writes src at offset
// off of the SGE list frags (receive buffers, READ sinks) through their
// L_Keys, with local write access. last says src ends the message: only
// then is its final cache line stored last (store).
func (t *Transport) writePayload(ctx *Ctx, frags []Fragment, off uint64, src []byte, last bool) uint16 {
	if len(src) == 0 {
		return 0
	}
	t.dp.charge(timing.PayloadDMAWrite, len(src))
	if ae, left := copySGEs(t, ctx, frags, off, src, true, last); ae != 0 || left == 0 {
		return ae
	}
	return AEMsgTooLongForBuffer
}

// readSpans is the payload read of a READ response: dst from the host
// memory spans an R_Key translated to (ctx.spans), in order. It reports a
// failed access.
func (t *Transport) readSpans(spans []mr.Span, dst []byte) bool {
	t.dp.charge(timing.PayloadDMARead, len(dst))
	for _, s := range spans {
		if t.dp.Mem.Read(s.IOVA, dst[:s.Len]) != nil {
			return false
		}
		dst = dst[s.Len:]
	}
	return true
}

// writeSpans is the payload write of a WRITE packet or an atomic's
// original value: src into the host memory spans its key translated to,
// in order; last as for writePayload. It reports a failed access.
func (t *Transport) writeSpans(spans []mr.Span, src []byte, last bool) bool {
	t.dp.charge(timing.PayloadDMAWrite, len(src))
	for _, s := range spans {
		if t.store(s.IOVA, src[:s.Len], last && int(s.Len) == len(src)) != nil {
			return false
		}
		src = src[s.Len:]
	}
	return true
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
	pos := uint64(0)
	for _, f := range frags {
		fl := uint64(f.Len)
		if off >= pos+fl {
			pos += fl
			continue
		}
		in := off - pos
		k := min(fl-in, uint64(len(buf)))
		var err error
		ctx.spans, err = t.dp.MRs.Translate(f.STag, pd, qpn, f.Addr+in, k, need, false, ctx.spans[:0])
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
		off += k
		pos += fl
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

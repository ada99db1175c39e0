package qp

import (
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
	if ae, left := copySGEs(t, ctx, w.Fragments(), off, dst, false); ae != 0 || left == 0 {
		return ae
	}
	return AEWQEInvalidParameter // the SGEs hold less than the message
}

// writePayload is the payload write of a receive: it writes src at offset
// off of the SGE list frags (receive buffers, READ sinks) through their
// L_Keys, with local write access.
func (t *Transport) writePayload(ctx *Ctx, frags []Fragment, off uint64, src []byte) uint16 {
	if len(src) == 0 {
		return 0
	}
	t.dp.charge(timing.PayloadDMAWrite, len(src))
	if ae, left := copySGEs(t, ctx, frags, off, src, true); ae != 0 || left == 0 {
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
// in order. It reports a failed access.
func (t *Transport) writeSpans(spans []mr.Span, src []byte) bool {
	t.dp.charge(timing.PayloadDMAWrite, len(src))
	for _, s := range spans {
		if t.dp.Mem.Write(s.IOVA, src[:s.Len]) != nil {
			return false
		}
		src = src[s.Len:]
	}
	return true
}

// copySGEs moves buf between memory and offset off of the SGE list frags,
// each SGE translated through its L_Key: from memory into buf (readPayload,
// local read access) or from buf into memory (writePayload, local write
// access). It returns the AE of the first failure, or how many bytes of
// buf the SGEs had no room for.
func copySGEs(t *Transport, ctx *Ctx, frags []Fragment, off uint64, buf []byte, write bool) (ae uint16, left int) {
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
				err = t.dp.Mem.Write(s.IOVA, buf[:s.Len])
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

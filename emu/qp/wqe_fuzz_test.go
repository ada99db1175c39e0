package qp_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// The fuzz targets assert invariants, not outputs (wireguard-go's
// Fuzz_handleGRO style): no panic on any bytes; a decoded WQE occupies
// 1..8 quanta that lie inside the input; every fragment and inline byte
// it reports is read from inside those quanta, at the offset the layout
// gives it. The seed corpus is the golden WQEs (testdata/fuzz holds them
// as files; f.Add repeats them so a fresh checkout fuzzes from them too).
//
// polarity's bit 1 selects IgnoreValid, so both decoder modes are fuzzed.

func FuzzDecodeSQWQE(f *testing.F) {
	for _, g := range loadGolden(f) {
		if g.Ring != nil && *g.Ring == "SQ" && g.PostRC == 0 {
			f.Add(wqeBytes(f, g.Qwords), *g.Index, g.Polarity)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, index uint32, polarity uint8) {
		var w qp.SQWQE
		err := qp.DecodeSQ(&w, b, qp.DecodeParams{Index: index, Polarity: polarity, Limits: qp.GEN2WQELimits, IgnoreValid: polarity&2 != 0})
		if checkDecodeErr(t, err, b, polarity) {
			return
		}
		if w.Quanta < 1 || w.Quanta > qp.MaxWQEQuanta {
			t.Fatalf("quanta %d outside 1..8", w.Quanta)
		}
		end := w.Quanta * qp.QuantumSize
		if end > len(b) {
			t.Fatalf("WQE of %d bytes decoded from %d", end, len(b))
		}
		checkFrags(t, b, end, w.Fragments())
		if pad, ok := w.PadSlot(); ok {
			checkFrags(t, b, end, []qp.Fragment{pad})
		}
		in := w.InlineData()
		if len(in) > w.InlineLen {
			t.Fatalf("%d inline bytes for INLINEDATALEN %d", len(in), w.InlineLen)
		}
		for i, c := range in {
			off := qp.InlineByteOffset(i)
			if off >= end || b[off] != c {
				t.Fatalf("inline byte %d = %#x, input offset %d (WQE end %d)", i, c, off, end)
			}
		}
	})
}

func FuzzDecodeRQWQE(f *testing.F) {
	for _, g := range loadGolden(f) {
		if g.Ring != nil && *g.Ring == "RQ" && g.PostRC == 0 {
			b := wqeBytes(f, g.Qwords)
			f.Add(b, uint8(len(b)/qp.QuantumSize), g.Polarity)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, wqeQuanta uint8, polarity uint8) {
		var w qp.RQWQE
		err := qp.DecodeRQ(&w, b, qp.DecodeParams{WQEQuanta: int(wqeQuanta % 9), Polarity: polarity, Limits: qp.GEN2WQELimits, IgnoreValid: polarity&2 != 0})
		if checkDecodeErr(t, err, b, polarity) {
			return
		}
		if w.Quanta < 1 || w.Quanta > qp.MaxWQEQuanta || w.Quanta > w.WQEQuanta {
			t.Fatalf("quanta %d (WQE %d) outside 1..8", w.Quanta, w.WQEQuanta)
		}
		end := w.Quanta * qp.QuantumSize
		if end > len(b) {
			t.Fatalf("WQE of %d bytes decoded from %d", end, len(b))
		}
		checkFrags(t, b, end, w.Fragments())
	})
}

// checkDecodeErr checks an error's own invariants and reports whether
// there was one.
func checkDecodeErr(t *testing.T, err error, b []byte, polarity uint8) bool {
	t.Helper()
	var se *qp.ShortError
	switch {
	case err == nil:
		return false
	case errors.As(err, &se):
		if se.Have != len(b) || se.Need <= se.Have || se.Need%qp.QuantumSize != 0 || se.Need > qp.MaxWQEQuanta*qp.QuantumSize {
			t.Fatalf("bad ShortError %+v for %d bytes", se, len(b))
		}
	case errors.Is(err, qp.ErrNotValid):
		if polarity&2 != 0 || b[31]>>7 == polarity&1 {
			t.Fatalf("ErrNotValid with header byte %#x, polarity %d", b[31], polarity)
		}
	default:
		t.Fatalf("unexpected error %v", err)
	}
	return true
}

// checkFrags re-reads every fragment from the input at its slot offset.
func checkFrags(t *testing.T, b []byte, end int, frags []qp.Fragment) {
	t.Helper()
	for _, f := range frags {
		off := qp.FragSlotOffset(int(f.Slot))
		if off+qp.FragSlotSize > end {
			t.Fatalf("slot %d at %d..%d outside the WQE (%d bytes)", f.Slot, off, off+16, end)
		}
		q1 := binary.LittleEndian.Uint64(b[off+8:])
		if f.Addr != binary.LittleEndian.Uint64(b[off:]) || f.STag != uint32(q1) || f.Len != uint32(q1>>32)&0x7fffffff || f.Valid != (q1>>63 == 1) {
			t.Fatalf("slot %d decoded %+v from %x", f.Slot, f, b[off:off+16])
		}
	}
}

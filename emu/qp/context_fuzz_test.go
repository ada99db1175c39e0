package qp_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// FuzzDecodeAttrs: any 256-byte host context decodes under either
// generation's reading: IRD is one of IRDSIZE's sizes (or 0 for an
// encoding the driver never writes), GEN_3 reads IRDSIZE from [17:16]
// only and takes b18 as REMOTE_ATOMIC_EN, GEN_2 never grants it.
func FuzzDecodeAttrs(f *testing.F) {
	f.Add(make([]byte, qp.ContextSize))
	b := make([]byte, qp.ContextSize)
	b[160+2] = 0x07 // IRDSIZE 7 on GEN_2; REMOTE_ATOMIC_EN and IRDSIZE 3 on GEN_3
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := qp.NewContext(b)
		if !ok {
			return
		}
		sizes := map[uint32]bool{0: true, 4: true, 16: true, 64: true, 128: true, 256: true}
		g2, g3 := qp.DecodeAttrs(c, false), qp.DecodeAttrs(c, true)
		if !sizes[g2.IRD] || g3.IRD == 0 || g3.IRD > 128 || !sizes[g3.IRD] {
			t.Fatalf("IRD %d (GEN_2), %d (GEN_3) from %#x", g2.IRD, g3.IRD, c.Qword(160))
		}
		if g2.RemoteAtomic || g3.RemoteAtomic != (c.Qword(160)>>18&1 == 1) {
			t.Fatalf("REMOTE_ATOMIC_EN %v (GEN_2), %v (GEN_3) from %#x", g2.RemoteAtomic, g3.RemoteAtomic, c.Qword(160))
		}
		g3.IRD, g3.RemoteAtomic = g2.IRD, false
		if g2 != g3 {
			t.Fatalf("the generations differ beyond IRDSIZE and REMOTE_ATOMIC_EN:\n%+v\n%+v", g2, g3)
		}
	})
}

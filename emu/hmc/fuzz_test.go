package hmc_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hmc/hmctest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// FuzzCommit feeds arbitrary COMMIT_FPM_VAL buffers. Invariants: no panic;
// a failed Commit changes nothing; a successful one writes back exactly the
// counts it was given (APBVT 1), 512-aligned bases, disjoint objects inside
// the SD table, and nothing past byte 175.
func FuzzCommit(f *testing.F) {
	f.Add(hmctest.CommitBuffer(hmctest.DefaultCounts))
	q := hmc.GEN2Query(profile.GEN2())
	var maxc [hmc.NumObjTypes]uint32
	for ty := range maxc {
		maxc[ty] = q.Objects[ty].Max
	}
	f.Add(hmctest.CommitBuffer(maxc))
	f.Add(make([]byte, 176))
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, buf []byte) {
		mem := hostmem.New()
		defer mem.Close()
		h := hmc.New(mem, profile.GEN2())
		in := append([]byte{}, buf...)
		err := h.Commit(buf)
		if err != nil {
			if !bytes.Equal(in, buf) || h.Committed() {
				t.Fatalf("failed Commit (%v) changed the buffer or the state", err)
			}
			return
		}
		if !bytes.Equal(in[176:], buf[176:]) {
			t.Fatalf("Commit wrote past byte 175")
		}
		type span struct{ s, e uint64 }
		var spans []span
		for ty := hmc.ObjType(0); ty < hmc.NumObjTypes; ty++ {
			off := hmc.CommitSlot(ty)
			inCount := uint32(binary.LittleEndian.Uint64(in[off:]))
			out := binary.LittleEndian.Uint64(buf[off:])
			want := inCount
			if ty == hmc.APBVT {
				want = 1
			}
			if uint32(out) != want || h.Count(ty) != want {
				t.Fatalf("%v: wrote count %d, Count %d, want %d", ty, uint32(out), h.Count(ty), want)
			}
			base := (out >> 32) * 512
			if base != h.Base(ty) {
				t.Fatalf("%v: wrote base %#x, Base %#x", ty, base, h.Base(ty))
			}
			if want > 0 {
				spans = append(spans, span{base, base + uint64(want)*uint64(h.Size(ty))})
			}
		}
		for i, a := range spans {
			if a.e > uint64(h.SDCount())*hmc.DirectBPSize {
				t.Fatalf("object beyond SD table")
			}
			for _, b := range spans[i+1:] {
				if a.s < b.e && b.s < a.e {
					t.Fatalf("objects overlap")
				}
			}
		}
	})
}

// FuzzSDLookup programs an arbitrary UPDATE_PE_SDS entry into a committed
// HMC whose SD 0 is backed, then resolves an arbitrary object. Invariants:
// no panic; a resolved object in a direct SD lies inside mapped memory;
// errors are *hmc.Error.
func FuzzSDLookup(f *testing.F) {
	f.Add(uint64(0x8000_8000), uint64(0x803), uint8(0), uint32(5), false)
	f.Add(uint64(0x8000_8000), uint64(0x801), uint8(14), uint32(100), true)
	f.Add(uint64(0x8000_8000), uint64(0x802), uint8(6), uint32(3), false)
	f.Add(uint64(0x0), uint64(0), uint8(5), uint32(0), true)
	f.Fuzz(func(t *testing.T, cmd, data uint64, ty uint8, idx uint32, paged bool) {
		e := hmctest.New(t, hmctest.Options{Paged: paged})
		h := e.HMC
		// Point the entry's address at something real half of the time.
		if data&(1<<12) != 0 {
			data = data&0xfff | uint64(e.Backing[0].IOVA())
		}
		ent := hmc.DecodeSDEntry(cmd, data)
		_ = h.SetSD(ent)
		a, err := h.ObjectIOVA(hmc.ObjType(ty), idx)
		if err != nil {
			var he *hmc.Error
			if !asHMC(err, &he) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		sd, _ := h.SD(uint32((h.Base(hmc.ObjType(ty)) + uint64(idx)*uint64(h.Size(hmc.ObjType(ty)))) / hmc.DirectBPSize))
		if sd.Type == hmc.SDDirect {
			r, ok := e.Mem.Lookup(a)
			if !ok || uint64(a)+uint64(h.Size(hmc.ObjType(ty))) > uint64(r.End()) {
				t.Fatalf("object %v[%d] at %#x outside mapped memory", hmc.ObjType(ty), idx, a)
			}
		}
	})
}

func asHMC(err error, he **hmc.Error) bool {
	e, ok := err.(*hmc.Error)
	*he = e
	return ok
}

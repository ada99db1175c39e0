package mr_test

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
)

// TestTranslateConcurrentDereg translates through an MR from several
// goroutines while another deregisters and re-registers it with a new key
// and a new page list. Every translation must either succeed with spans of
// one of the two registrations or fail cleanly with one of the AEs a
// changing STag produces. Run under -race.
func TestTranslateConcurrentDereg(t *testing.T) {
	f := setup(t, false)
	for k := uint32(0); k < 8; k++ {
		f.pble(t, 100+k, 0x2_0000_0000+uint64(k)*0x10000) // registration 1
		f.pble(t, 200+k, 0x3_0000_0000+uint64(k)*0x10000) // registration 2
	}
	reg := func(key uint8, first uint32) mr.RegArgs {
		return mr.RegArgs{STagIndex: 17, Key: key, PD: 3, VA: 0x100000, VABased: true, Length: 8 * 4096,
			Access: lr | lw | rr | rw, RemoteAccess: true, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: first}
	}
	f.reg(t, reg(1, 100))

	var stop atomic.Bool
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for g := 0; g < runtime.GOMAXPROCS(0)+1; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			out := make([]mr.Span, 0, 16)
			for n := 0; !stop.Load(); n++ {
				key := uint8(1 + n%2)
				spans, err := f.tab.Translate(stag(17, key), 3, 0, 0x100000+uint64(g)*0x800, 0x2000, rw, true, out[:0])
				if err != nil {
					ae, _ := mr.AEOf(err)
					switch ae {
					case mr.AEUnallocatedSTag, mr.AEBadSTagKey:
						failed.Add(1)
						continue
					}
					t.Errorf("unexpected error %v", err)
					return
				}
				base := uint64(0x2_0000_0000)
				if key == 2 {
					base = 0x3_0000_0000
				}
				for _, s := range spans {
					if uint64(s.IOVA) < base || uint64(s.IOVA)+s.Len > base+8*0x10000 {
						t.Errorf("key %d: span %v outside its registration", key, s)
						return
					}
				}
				ok.Add(1)
			}
		}(g)
	}
	// Keep re-registering until a reader has succeeded at least once (on a
	// loaded machine they may not even have started after 2000 rounds),
	// within a bound.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 2000 || (ok.Load() == 0 && time.Now().Before(deadline)); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
		key, first := uint8(1), uint32(100)
		if i%2 == 0 {
			key, first = 2, 200
		}
		if err := f.tab.Dealloc(17, 3, true); err != nil {
			t.Fatal(err)
		}
		if err := f.tab.RegisterNonShared(reg(key, first)); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d translations succeeded, %d failed cleanly", ok.Load(), failed.Load())
	if ok.Load() == 0 {
		t.Errorf("no translation succeeded")
	}
}

func TestTranslateAllocs(t *testing.T) {
	f := world(t)
	out := make([]mr.Span, 0, 8)
	A := stag(idx(3, 5), 0x42)
	cases := []struct {
		name string
		run  func()
	}{
		{"level 0", func() { _, _ = f.tab.Translate(A, 7, 0, 0x10000, 0x1000, lr, false, out[:0]) }},
		{"level 1", func() { _, _ = f.tab.Translate(stag(11, 3), 7, 0, 0x5ff0, 0x20, lr, false, out[:0]) }},
		{"window", func() { _, _ = f.tab.Translate(stag(10, 0x20), 7, 9, 0, 0x100, rw, true, out[:0]) }},
		{"bad key", func() { _, _ = f.tab.Translate(A+1, 7, 0, 0x10000, 1, lr, false, out[:0]) }},
		{"bounds", func() { _, _ = f.tab.Translate(A, 7, 0, 0x9000, 1, lr, false, out[:0]) }},
		{"unallocated", func() { _, _ = f.tab.Translate(stag(99, 1), 7, 0, 0, 1, lr, false, out[:0]) }},
	}
	for _, c := range cases {
		if n := testing.AllocsPerRun(200, c.run); n != 0 {
			t.Errorf("%s: %v allocations per Translate", c.name, n)
		}
	}
}

func BenchmarkTranslate(b *testing.B) {
	f := setup(b, false)
	for k := uint32(0); k < 16; k++ {
		f.pble(b, 100+k, 0x2_0000_0000+uint64(k)*0x2000)
	}
	f.reg(b, mr.RegArgs{STagIndex: 5, Key: 1, PD: 3, VA: 0x100000, VABased: true, Length: 16 * 4096,
		Access: lr | lw | rr | rw, RemoteAccess: true, PageSize: mr.PageSize4K, LPBLSize: 1, FirstPBLE: 100})
	f.reg(b, mr.RegArgs{STagIndex: 6, Key: 1, PD: 3, VA: 0x100000, VABased: true, Length: 1 << 20,
		Access: lr | lw | rr | rw, RemoteAccess: true, PageSize: mr.PageSize4K, RegAddr: 0x5_0000_0000})
	out := make([]mr.Span, 0, 8)
	b.Run("level1-4KiB", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			va := 0x100000 + uint64(i%15)*4096 + 0x800
			if _, err := f.tab.Translate(stag(5, 1), 3, 0, va, 4096, rw, true, out[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("level0-4KiB", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := f.tab.Translate(stag(6, 1), 3, 0, 0x100000+uint64(i%255)*4096, 4096, lr, false, out[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzRegisterTranslate registers an arbitrary region over PBLEs whose
// contents the test knows, translates an arbitrary range, and compares with
// a page-by-page reference. Invariants: no panic; on success the spans are
// exactly the reference's (so they lie in the pages the MR's PBLEs name,
// or in [RegAddr, RegAddr+FBO+Length) at level 0) and cover length bytes.
func FuzzRegisterTranslate(f *testing.F) {
	f.Add(uint64(0x1000_0800), true, uint64(0x3400), uint8(0), uint8(1), uint16(10), uint64(0x1000_0800), uint64(0x3400), uint8(0x0f))
	f.Add(uint64(0x800), false, uint64(0x3400), uint8(0), uint8(3), uint16(100), uint64(0x100), uint64(0x3000), uint8(0x0f))
	f.Add(uint64(0x70_001f_f000), true, uint64(0x400000), uint8(1), uint8(1), uint16(20), uint64(0x70_001f_f000), uint64(0x300000), uint8(0x0f))
	f.Add(uint64(5), false, uint64(1<<31), uint8(2), uint8(0), uint16(0), uint64(3), uint64(1<<20), uint8(0x03))
	f.Fuzz(func(t *testing.T, va uint64, vaBased bool, length uint64, ps uint8, lpbl uint8, first uint16, tva, tlen uint64, acc uint8) {
		fx := setup(t, false)
		const npble = 4096
		// PBLE i holds page address entry(i); level-2 roots hold indexes
		// of leaves that all start at PBLE 2048.
		entry := func(i uint64) uint64 { return 0x10_0000_0000 + (i*7919%4093)<<30 }
		img := make([]byte, 8*npble)
		for i := uint64(0); i < npble; i++ {
			v := entry(i)
			if lpbl == 3 && i < 2048 {
				v = 2048 + i%4*512
			}
			binary.LittleEndian.PutUint64(img[8*i:], v)
		}
		// The PBLE object is contiguous in hmctest's direct SD.
		base, err := fx.env.HMC.ObjectIOVA(hmc.PBLE, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := fx.env.Mem.Write(base, img); err != nil {
			t.Fatal(err)
		}
		a := mr.RegArgs{STagIndex: 5, Key: 1, PD: 1, VA: va, VABased: vaBased, Length: length,
			Access: mr.Access(acc), RemoteAccess: true, PageSize: mr.PageSize(ps % 4), LPBLSize: lpbl % 4,
			FirstPBLE: uint32(first), RegAddr: 0x20_0000_0000}
		if err := fx.tab.RegisterNonShared(a); err != nil {
			return
		}
		tlen %= 1 << 22 // bound the walk
		spans, err := fx.tab.Translate(stag(5, 1), 1, 0, tva, tlen, mr.AccessLocalRead, false, nil)
		if err != nil {
			if _, ok := mr.AEOf(err); !ok {
				t.Fatalf("error without AE: %v", err)
			}
			return
		}
		// Reference.
		shift := mr.PageSize(ps % 4).Shift()
		psz := uint64(1) << shift
		var fbo, off uint64
		if vaBased {
			fbo, off = va&(psz-1), tva-va
		} else {
			fbo, off = va, tva
		}
		if tlen == 0 {
			if len(spans) != 0 {
				t.Fatalf("zero length gave spans")
			}
			return
		}
		if off+tlen > length {
			t.Fatalf("Translate accepted [%#x,+%#x) outside length %#x", off, tlen, length)
		}
		o := fbo + off
		var want []mr.Span
		add := func(a, n uint64) {
			if k := len(want) - 1; k >= 0 && uint64(want[k].IOVA)+want[k].Len == a {
				want[k].Len += n
				return
			}
			want = append(want, mr.Span{IOVA: hostmem.IOVA(a), Len: n})
		}
		lvl, _ := mr.LevelFromLPBLSize(lpbl % 4)
		if lvl == mr.Level0 {
			add(0x20_0000_0000+o, tlen)
		}
		for n := tlen; lvl != mr.Level0 && n > 0; {
			p := o >> shift
			in := o & (psz - 1)
			c := min(psz-in, n)
			i := uint64(first) + p
			if lvl == mr.Level2 {
				i = 2048 + uint64((uint64(first)+p/512)%4)*512 + p%512
			}
			add(entry(i)+in, c)
			o += c
			n -= c
		}
		if len(spans) != len(want) {
			t.Fatalf("spans %v, want %v", spans, want)
		}
		var total uint64
		for k := range spans {
			if spans[k] != want[k] {
				t.Fatalf("span %d = %v, want %v", k, spans[k], want[k])
			}
			total += spans[k].Len
		}
		if total != tlen {
			t.Fatalf("spans cover %d bytes, want %d", total, tlen)
		}
	})
}

package hostmem_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// model is the reference the fuzzer checks Memory against: a list of live
// regions with a shadow copy of their contents.
type model struct {
	live []*modelRegion
	dead []hostmem.IOVA // first IOVA of every unmapped region
}

type modelRegion struct {
	r      *hostmem.Region
	shadow []byte
	io     bool
}

// expect reports whether [iova, iova+n) lies in one live region, and which.
func (md *model) expect(iova hostmem.IOVA, n uint64) (*modelRegion, uint64, bool) {
	for _, mr := range md.live {
		if iova >= mr.r.IOVA() && iova < mr.r.End() {
			off := uint64(iova - mr.r.IOVA())
			return mr, off, n <= uint64(len(mr.shadow))-off
		}
	}
	return nil, 0, false
}

// opReader decodes the fuzz input into operation parameters.
type opReader struct{ b []byte }

func (o *opReader) u8() uint8 {
	if len(o.b) == 0 {
		return 0
	}
	v := o.b[0]
	o.b = o.b[1:]
	return v
}

func (o *opReader) u16() uint16 { return uint16(o.u8()) | uint16(o.u8())<<8 }

func (o *opReader) u64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = o.u8()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// FuzzAccess runs random map/unmap/read/write/atomic/slice sequences against
// a shadow model: no panic, faults exactly where the model says the access
// leaves a live region, and data reads back as written.
func FuzzAccess(f *testing.F) {
	f.Add([]byte{0, 10, 0, 3, 0, 0, 0, 0, 0, 20, 0, 4, 0, 0, 0, 0, 0, 100, 0})
	f.Add([]byte{1, 0, 16, 4, 0, 5, 0, 0, 0, 0, 2, 0, 3, 0, 5, 0, 0, 0, 0})
	f.Add([]byte{0, 255, 255, 5, 0, 8, 0, 0, 0, 6, 0, 0, 255, 255, 255, 255, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := hostmem.New()
		defer m.Close()
		md := &model{}
		in := &opReader{b: data}
		for steps := 0; len(in.b) > 0 && steps < 64; steps++ {
			switch op := in.u8() % 9; op {
			case 0, 1: // Alloc or MapIO
				if len(md.live) >= 6 {
					continue
				}
				size := 1 + int(in.u16())%20000
				var r *hostmem.Region
				var err error
				io := op == 1
				if io {
					backing := newRW(size)
					r, err = m.MapIO(backing, backing, 0, size, "io")
				} else {
					r, err = m.Alloc(size, 0, "mem")
				}
				if err != nil {
					t.Fatalf("map %d bytes: %v", size, err)
				}
				for _, mr := range md.live {
					if r.IOVA() < mr.r.End()+hostmem.GuardSize && mr.r.IOVA() < r.End()+hostmem.GuardSize {
						t.Fatalf("new region [%#x,%#x) overlaps or abuts [%#x,%#x)", r.IOVA(), r.End(), mr.r.IOVA(), mr.r.End())
					}
				}
				if r.IOVA() < hostmem.BaseIOVA || uint64(r.IOVA())%hostmem.PageSize != 0 {
					t.Fatalf("bad IOVA %#x", r.IOVA())
				}
				md.live = append(md.live, &modelRegion{r: r, shadow: make([]byte, size), io: io})
			case 2: // Unmap
				if len(md.live) == 0 {
					continue
				}
				i := int(in.u8()) % len(md.live)
				if err := m.Unmap(md.live[i].r); err != nil {
					t.Fatalf("Unmap: %v", err)
				}
				md.dead = append(md.dead, md.live[i].r.IOVA())
				md.live = append(md.live[:i], md.live[i+1:]...)
			case 3, 4, 5, 6, 7: // accesses at an address near a region, or anywhere
				iova := pickIOVA(in, md)
				n := int(in.u16()) % 9000
				checkAccess(t, m, md, op, iova, n, in.u8())
			case 8: // Unmap everything
				for _, mr := range md.live {
					if err := m.Unmap(mr.r); err != nil {
						t.Fatalf("Unmap: %v", err)
					}
					md.dead = append(md.dead, mr.r.IOVA())
				}
				md.live = nil
			}
		}
		for _, iova := range md.dead {
			if err := m.Read(iova, make([]byte, 1)); !errors.Is(err, hostmem.ErrFault) {
				t.Fatalf("read of unmapped %#x: %v", iova, err)
			}
		}
	})
}

// pickIOVA chooses an address relative to a live or dead region (offsets
// may run past it) or a raw 64-bit value.
func pickIOVA(in *opReader, md *model) hostmem.IOVA {
	switch sel := in.u8(); {
	case sel < 160 && len(md.live) > 0:
		mr := md.live[int(sel)%len(md.live)]
		return mr.r.IOVA() + hostmem.IOVA(in.u16()) - 8
	case sel < 200 && len(md.dead) > 0:
		return md.dead[int(sel)%len(md.dead)] + hostmem.IOVA(in.u16()%64)
	default:
		return hostmem.IOVA(in.u64())
	}
}

func checkAccess(t *testing.T, m *hostmem.Memory, md *model, op uint8, iova hostmem.IOVA, n int, val uint8) {
	t.Helper()
	var err error
	size := uint64(n)
	switch op {
	case 5, 6:
		size = 8
	}
	mr, off, ok := md.expect(iova, size)
	if size == 0 {
		ok = true
	}
	switch op {
	case 3: // Read
		p := make([]byte, n)
		err = m.Read(iova, p)
		if err == nil && mr != nil && !bytes.Equal(p, mr.shadow[off:off+size]) {
			t.Fatalf("Read(%#x, %d) returned data that differs from the model", iova, n)
		}
	case 4: // Write
		p := bytes.Repeat([]byte{val}, n)
		err = m.Write(iova, p)
		if err == nil && mr != nil {
			copy(mr.shadow[off:], p)
		}
	case 5: // Load64
		var v uint64
		v, err = m.Load64(iova)
		if iova%8 != 0 {
			ok = false
		}
		if err == nil && binary.LittleEndian.Uint64(mr.shadow[off:]) != v {
			t.Fatalf("Load64(%#x) = %#x, model differs", iova, v)
		}
	case 6: // Store64
		v := uint64(val) * 0x0101010101010101
		err = m.Store64(iova, v)
		if iova%8 != 0 {
			ok = false
		}
		if err == nil {
			binary.LittleEndian.PutUint64(mr.shadow[off:], v)
		}
	case 7: // Slice
		var s []byte
		s, err = m.Slice(iova, n)
		if ok && mr != nil && mr.io && n > 0 {
			ok = false // no mapping behind MapIO regions
		}
		if err == nil && n > 0 && !bytes.Equal(s, mr.shadow[off:off+size]) {
			t.Fatalf("Slice(%#x, %d) differs from the model", iova, n)
		}
	}
	if ok != (err == nil) {
		t.Fatalf("op %d at %#x len %d: model ok=%v, got err %v", op, iova, n, ok, err)
	}
	if err != nil && !errors.Is(err, hostmem.ErrFault) {
		t.Fatalf("op %d: error %v is not a fault", op, err)
	}
}

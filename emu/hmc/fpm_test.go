package hmc_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hmc/hmctest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// unhex decodes a hex dump written one qword (8 bytes, memory order) per
// line; spaces are ignored and "|" starts a comment.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "|")
		sb.WriteString(strings.NewReplacer(" ", "", "\t", "").Replace(line))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

func newHMC(t *testing.T) (*hostmem.Memory, *hmc.HMC) {
	t.Helper()
	mem := hostmem.New()
	t.Cleanup(func() { mem.Close() })
	return mem, hmc.New(mem, profile.GEN2())
}

// TestEncodeQuery pins the QUERY_FPM_VAL buffer byte for byte. The expected
// bytes are written from the docs/hw-controlpath.md "QUERY_FPM_VAL buffer"
// table and the choices in docs/hmc.md, one little-endian qword per line.
func TestEncodeQuery(t *testing.T) {
	want := unhex(t, `
		00000000 40000000 | +0   FIRST_PE_SD_INDEX 0, MAX_PE_SDS 64 [44:32]
		00400000 09000000 | +8   QP max 16384, size 2^9
		00800000 07000000 | +16  CQ max 32768, size 2^7
		00000000 00000000 | +24  SRQ none
		00800000 00000000 | +32  HTE max 32768, size 2^0
		00080000 03000000 | +40  ARP max 2048, size 2^3
		00000100 06000000 | +48  MR max 65536, size 2^6
		00000400 00000000 | +56  XF max 262144, size 2^0
		00000100 04000000 | +64  XFFL max 65536, XF block 4
		00004000 00000000 | +72  Q1 max 4194304, size 2^0
		00000100 40000000 | +80  Q1FL max 65536, Q1 block 64
		40080000 00000000 | +88  TIMER max 2112, size 2^0
		00100000 07000000 | +96  FSIMC max 4096, size 2^7
		00000100 06000000 | +104 FSIAV max 65536, size 2^6
		00008000 00000000 | +112 PBLE max 8388608
		00010100 40000000 | +120 MAX_CEQS 256, HTMULTIPLIER 1, TIMERBUCKET 64
		00000800 00000000 | +128 RRF max 524288, size 2^0
		00200000 40000000 | +136 RRFFL max 8192, RRF block 64
		00400000 00000000 | +144 HDR max 16384, size 2^0
		00000000 00000000 | +152 MD none
		00000000 00000000 | +160 OOISC none
		00000000 00000000 | +168 OOISCFFL none`)
	if len(want) != hmc.FPMBufMinSize {
		t.Fatalf("test table has %d bytes", len(want))
	}
	_, h := newHMC(t)
	for _, size := range []int{176, 192, 200, 208} {
		buf := bytes.Repeat([]byte{0xff}, size)
		if n := h.EncodeQuery(buf); n != 176 {
			t.Fatalf("EncodeQuery(%d bytes) = %d, want 176", size, n)
		}
		if diff := cmp.Diff(want, buf[:176]); diff != "" {
			t.Errorf("query buffer (-want +got):\n%s", diff)
		}
		// A GEN_2 device writes nothing past 175 (docs/hw-controlpath.md "FPM
		// WQEs").
		if !bytes.Equal(buf[176:], bytes.Repeat([]byte{0xff}, size-176)) {
			t.Errorf("EncodeQuery(%d bytes) wrote past byte 175: % x", size, buf[176:])
		}
	}
	short := bytes.Repeat([]byte{0xff}, 20)
	if n := h.EncodeQuery(short); n != 16 {
		t.Errorf("EncodeQuery(20 bytes) = %d, want 16 (whole qwords)", n)
	}
	if !bytes.Equal(short[:16], want[:16]) || short[16] != 0xff {
		t.Errorf("short query buffer % x", short)
	}
}

// TestCommitRoundTrip commits hmctest's default counts and pins the bytes the
// device writes back (docs/hw-controlpath.md "COMMIT_FPM_VAL buffer":
// base/512 in [63:32], count in the low bits; APBVT at +40 with count 1).
func TestCommitRoundTrip(t *testing.T) {
	in := unhex(t, `
		40000000 00000000 | +0   QP 64
		80000000 00000000 | +8   CQ 128
		00000000 00000000 | +16  SRQ 0
		00000000 00000000 | +24  HTE 0
		40000000 00000000 | +32  ARP 64
		00000000 00000000 | +40  APBVT (reserved, 0 from the driver)
		00010000 00000000 | +48  MR 256
		00000000 00000000 | +56
		00000000 00000000 | +64
		00000000 00000000 | +72
		00000000 00000000 | +80
		00000000 00000000 | +88
		10000000 00000000 | +96  FSIMC 16
		40000000 00000000 | +104 FSIAV 64
		00100000 00000000 | +112 PBLE 4096
		00000000 00000000 | +120 reserved
		00000000 00000000 | +128
		00000000 00000000 | +136
		00000000 00000000 | +144
		00000000 00000000 | +152
		00000000 00000000 | +160
		00000000 00000000 | +168`)
	// Layout: APBVT [0, 8K); QP 64×512 at 0x2000; CQ 128×128 at 0xa000;
	// ARP 64×8 at 0xe000; MR 256×64 at 0xe200; FSIMC 16×128 at 0x12200;
	// FSIAV 64×64 at 0x12a00; PBLE 4096×8 at the next 4 KB, 0x14000.
	want := unhex(t, `
		40000000 10000000 | +0   QP base 0x2000/512=0x10, count 64
		80000000 50000000 | +8   CQ base 0xa000/512=0x50, count 128
		00000000 00000000 | +16
		00000000 00000000 | +24
		40000000 70000000 | +32  ARP base 0xe000/512=0x70
		01000000 00000000 | +40  APBVT base 0, count 1
		00010000 71000000 | +48  MR base 0xe200/512=0x71
		00000000 00000000 | +56
		00000000 00000000 | +64
		00000000 00000000 | +72
		00000000 00000000 | +80
		00000000 00000000 | +88
		10000000 91000000 | +96  FSIMC base 0x12200/512=0x91
		40000000 95000000 | +104 FSIAV base 0x12a00/512=0x95
		00100000 a0000000 | +112 PBLE base 0x14000/512=0xa0
		00000000 00000000 | +120
		00000000 00000000 | +128
		00000000 00000000 | +136
		00000000 00000000 | +144
		00000000 00000000 | +152
		00000000 00000000 | +160
		00000000 00000000 | +168`)
	for _, size := range []int{176, 192, 208} { // the kernels' BUFSIZE values (user.h)
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			_, h := newHMC(t)
			buf := append(append([]byte{}, in...), bytes.Repeat([]byte{0xee}, size-176)...)
			if err := h.Commit(buf); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if diff := cmp.Diff(want, buf[:176]); diff != "" {
				t.Errorf("write-back (-want +got):\n%s", diff)
			}
			if !bytes.Equal(buf[176:], bytes.Repeat([]byte{0xee}, size-176)) {
				t.Errorf("Commit wrote past byte 175")
			}
			if !h.Committed() || h.SDCount() != 1 || h.FPMSize() != 0x1c000 {
				t.Errorf("Committed %v SDCount %d FPMSize %#x, want true 1 0x1c000",
					h.Committed(), h.SDCount(), h.FPMSize())
			}
			wantCount := map[hmc.ObjType]uint32{hmc.QP: 64, hmc.CQ: 128, hmc.ARP: 64,
				hmc.APBVT: 1, hmc.MR: 256, hmc.FSIMC: 16, hmc.FSIAV: 64, hmc.PBLE: 4096}
			for ty := hmc.ObjType(0); ty < hmc.NumObjTypes; ty++ {
				if got := h.Count(ty); got != wantCount[ty] {
					t.Errorf("Count(%v) = %d, want %d", ty, got, wantCount[ty])
				}
			}
			if h.Base(hmc.PBLE) != 0x14000 || h.Base(hmc.MR) != 0xe200 {
				t.Errorf("Base(PBLE) %#x Base(MR) %#x", h.Base(hmc.PBLE), h.Base(hmc.MR))
			}
		})
	}
}

func TestCommitErrors(t *testing.T) {
	max := hmc.GEN2Query(profile.GEN2()).Objects
	tests := []struct {
		name  string
		buf   func() []byte
		err   error
		typ   hmc.ObjType
		count uint32
	}{
		{"buffer 175 bytes", func() []byte { return make([]byte, 175) }, hmc.ErrBufSize, 0, 0},
		{"empty buffer", func() []byte { return nil }, hmc.ErrBufSize, 0, 0},
		{"QP over max", countBuf(hmc.QP, max[hmc.QP].Max+1), hmc.ErrCountOverMax, hmc.QP, max[hmc.QP].Max + 1},
		{"CQ over max", countBuf(hmc.CQ, max[hmc.CQ].Max+1), hmc.ErrCountOverMax, hmc.CQ, max[hmc.CQ].Max + 1},
		{"SRQ on GEN_2", countBuf(hmc.SRQ, 1), hmc.ErrCountOverMax, hmc.SRQ, 1},
		{"MR over max", countBuf(hmc.MR, max[hmc.MR].Max+1), hmc.ErrCountOverMax, hmc.MR, max[hmc.MR].Max + 1},
		{"PBLE over max", countBuf(hmc.PBLE, max[hmc.PBLE].Max+1), hmc.ErrCountOverMax, hmc.PBLE, max[hmc.PBLE].Max + 1},
		{"HTE over max", countBuf(hmc.HTE, max[hmc.HTE].Max+1), hmc.ErrCountOverMax, hmc.HTE, max[hmc.HTE].Max + 1},
		{"OOISC iWARP only", countBuf(hmc.OOISC, 32), hmc.ErrCountOverMax, hmc.OOISC, 32},
		{"MD not offered", countBuf(hmc.MD, 1), hmc.ErrCountOverMax, hmc.MD, 1},
		{"count in high bits ignored, low over max", func() []byte {
			b := make([]byte, 176)
			binary.LittleEndian.PutUint64(b[0:], 0xffff_ffff_ffff_ffff)
			return b
		}, hmc.ErrCountOverMax, hmc.QP, 0xffffffff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, h := newHMC(t)
			buf := tc.buf()
			orig := append([]byte{}, buf...)
			err := h.Commit(buf)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Commit: %v, want %v", err, tc.err)
			}
			var he *hmc.Error
			if !errors.As(err, &he) {
				t.Fatalf("error %T is not *hmc.Error", err)
			}
			if tc.err == hmc.ErrCountOverMax && (he.Type != tc.typ || he.Count != tc.count || he.Max != max[tc.typ].Max) {
				t.Errorf("error fields %+v, want type %v count %d", he, tc.typ, tc.count)
			}
			if h.Committed() || !bytes.Equal(buf, orig) {
				t.Errorf("failed Commit changed state (committed %v) or buffer", h.Committed())
			}
		})
	}
}

func countBuf(ty hmc.ObjType, n uint32) func() []byte {
	return func() []byte {
		var c [hmc.NumObjTypes]uint32
		c[ty] = n
		return hmctest.CommitBuffer(c)
	}
}

// TestCommitMaxLayout commits every maximum at once: the layout must stay
// within MAX_PE_SDS, objects must not overlap, bases must be aligned to the
// object size (so no object straddles a 4 KB backing page).
func TestCommitMaxLayout(t *testing.T) {
	_, h := newHMC(t)
	q := h.Query()
	var c [hmc.NumObjTypes]uint32
	for ty := range c {
		c[ty] = q.Objects[ty].Max
	}
	if err := h.Commit(hmctest.CommitBuffer(c)); err != nil {
		t.Fatalf("Commit of every maximum: %v", err)
	}
	if h.SDCount() > q.MaxPESDs {
		t.Errorf("SDCount %d > MAX_PE_SDS %d", h.SDCount(), q.MaxPESDs)
	}
	t.Logf("all-maximum layout: %d SDs, FPM end %#x", h.SDCount(), h.FPMSize())
	type span struct {
		ty         hmc.ObjType
		start, end uint64
	}
	var spans []span
	for ty := hmc.ObjType(0); ty < hmc.NumObjTypes; ty++ {
		n := h.Count(ty)
		if n == 0 {
			continue
		}
		size := uint64(h.Size(ty))
		base := h.Base(ty)
		align := min(max(size, 512), 4096)
		if base%align != 0 || base%512 != 0 {
			t.Errorf("%v base %#x not aligned to %d", ty, base, align)
		}
		spans = append(spans, span{ty, base, base + uint64(n)*size})
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.start < b.end && b.start < a.end {
				t.Errorf("%v [%#x,%#x) overlaps %v [%#x,%#x)", a.ty, a.start, a.end, b.ty, b.start, b.end)
			}
		}
		if a.end > uint64(h.SDCount())*hmc.DirectBPSize {
			t.Errorf("%v ends at %#x beyond %d SDs", a.ty, a.end, h.SDCount())
		}
	}
}

func TestRecommitResetsSDs(t *testing.T) {
	e := hmctest.New(t, hmctest.Options{})
	if _, err := e.HMC.ObjectIOVA(hmc.QP, 0); err != nil {
		t.Fatalf("ObjectIOVA before recommit: %v", err)
	}
	gen := e.HMC.Generation()
	if err := e.HMC.Commit(hmctest.CommitBuffer(hmctest.DefaultCounts)); err != nil {
		t.Fatal(err)
	}
	if e.HMC.Generation() != gen+1 {
		t.Errorf("Generation %d, want %d", e.HMC.Generation(), gen+1)
	}
	if _, err := e.HMC.ObjectIOVA(hmc.QP, 0); !errors.Is(err, hmc.ErrSDInvalid) {
		t.Errorf("ObjectIOVA after recommit: %v, want ErrSDInvalid", err)
	}
}

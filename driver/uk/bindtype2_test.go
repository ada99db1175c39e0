package uk

import (
	"encoding/binary"
	"testing"
)

// TestMWBindType2Golden: the BIND_MW WQE libirdma 65 writes for a type-2
// window (providers/irdma uverbs.c irdma_upost_send, IBV_WR_BIND_MW on an
// IBV_MW_TYPE_2 window; uk.c irdma_uk_mw_bind, irdma_set_mw_bind_wqe), on
// the GEN_3 profile, written out by hand from the layout: qword0 the VA (0
// when zero-based), qword1 PARENTMRSTAG [63:32] | MWSTAG [31:0], qword2
// the length, header VALID 63, SIGCOMPL 62, MEMWINDOWTYPE 54 = 0,
// VABASEDTO 53, STAGRIGHTS [52:48] = read << 2 | write << 3, OPCODE
// [37:32] = 0x08. The window's new STag is calc_type2_mw_stag: the
// requested key's low byte over the window's index bits, here 0x77 over
// 0x00abcd12.
func TestMWBindType2Golden(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    BindWindow
		want [4]uint64
	}{
		{"VA-based, remote read and write",
			BindWindow{MRSTag: 0x4321, MWSTag: 0xabcd77, VA: 0x7f00_1234_5000, Len: 0x3000, VABased: true, EnaReads: true, EnaWrites: true},
			[4]uint64{0x0000_7f00_1234_5000, 0x0000_4321_00ab_cd77, 0x3000, 0xc02c_0008_0000_0000}},
		{"zero-based, remote read",
			BindWindow{MRSTag: 0x4321, MWSTag: 0xabcd78, Len: 0x800, EnaReads: true},
			[4]uint64{0, 0x0000_4321_00ab_cd78, 0x800, 0xc004_0008_0000_0000}},
	} {
		q := goldenQP(t, QPTypeRC, gen3)
		if err := q.MWBind(&PostSQInfo{WrID: 1, Signaled: true, Bind: tc.b}); err != nil {
			t.Fatal(err)
		}
		got := q.sqWQE(0, 1)
		for i, w := range tc.want {
			if g := binary.LittleEndian.Uint64(got[8*i:]); g != w {
				t.Errorf("%s: qword%d %#016x, want %#016x", tc.name, i, g, w)
			}
		}
	}
}

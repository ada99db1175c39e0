package cqp_test

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
)

// TestDecodeSRQWQEGolden decodes CREATE_SRQ WQEs written by hand from
// defs.h IRDMA_CQPSQ_SRQ_* and ctrl.c:irdma_sc_srq_create.
func TestDecodeSRQWQEGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    [8]uint64
		want cqp.SRQCreate
	}{
		{"physical", [8]uint64{
			0x0000_0010_0000_0012, // SRQ_LIMIT 0x10, RQ_WQE_SIZE 1, RQSIZE 2
			0x5e00_0000_0000_0140, // context
			0x0000_0000_0003_0000, // PD 3
			0xa000_0006_0000_0005, // WQEVALID, ARM_LIMIT_EVENT, OP 6, id 5
			0x0000_0000_1234_56ff, // ring: bits [7:0] are not part of the address
			0x0000_0000_abcd_ef7f, // shadow: bits [5:0] neither
			0xffff_ffff_f000_0077, // FIRST_PM_PBL_IDX is [27:0]
			0,
		}, cqp.SRQCreate{ID: 5, PD: 3, Ctx: 0x5e00_0000_0000_0140, Quanta: 32, WQEShift: 1, Limit: 0x10, Armed: true,
			RingPA: 0x1234_5600, ShadowPA: 0xabcd_ef40, FirstPBLE: 0x0000_0077}},
		{"virtual, not armed, largest", [8]uint64{0x0000_0fff_0000_003f, 0, 0x00ff_ffff_ff00_0000,
			0x8000_9006_0000_ffff, 0, 0x40, 0x0fff_ffff, 0},
			cqp.SRQCreate{ID: 0xffff, PD: 0xffff00, Quanta: 1 << 18, WQEShift: 3, Limit: 0xfff, ShadowPA: 0x40,
				FirstPBLE: 0x0fff_ffff, Virtual: true}},
	} {
		w := cqp.WQE{W: tc.w}
		if diff := cmp.Diff(tc.want, cqp.DecodeSRQWQE(&w)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// FuzzDecodeSRQWQE: any 64 bytes decode, within the fields' widths.
func FuzzDecodeSRQWQE(f *testing.F) {
	f.Add(make([]byte, 64))
	b := make([]byte, 64)
	binary.LittleEndian.PutUint64(b[24:], 0xa000_0006_0000_0005)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 64 {
			return
		}
		w := cqp.ParseWQE(b)
		d := cqp.DecodeSRQWQE(&w)
		if d.ID > 0xffff || d.PD > 0xffffff || d.Limit > 0xfff || d.WQEShift > 3 || d.Quanta < 8 || d.Quanta > 1<<18 ||
			d.RingPA&0xff != 0 || d.ShadowPA&0x3f != 0 || d.FirstPBLE > 0x0fff_ffff {
			t.Fatalf("out of range: %+v", d)
		}
	})
}

package driver

import "testing"

// Golden SRQ CQP WQEs and QP-context fields, written by hand from defs.h
// (IRDMA_CQPSQ_SRQ_*, IRDMAQPC_USE_SRQ, IRDMAQPC_SRQ_ID) and
// ctrl.c:irdma_sc_srq_create / _modify / _destroy, not from the builders.
func TestSRQWQEGolden(t *testing.T) {
	base := srqWQEInfo{ID: 5, PD: 3, Ctx: 0x5e00_0000_0000_0140, HWSize: 2, WQESize: 1, Limit: 0x10, Arm: true,
		RingPA: 0x1234_5600, ShadowPA: 0xabcd_ef40}
	virt := base
	virt.Virtual, virt.LeafPBL, virt.FirstPBL, virt.RingPA = true, 1, 0x77, 0
	mod := base
	mod.ModifyCtx = true
	for _, tc := range []struct {
		name string
		got  cqpWQE
		want cqpWQE
	}{
		{"CREATE_SRQ", buildSRQ(cqpOpCreateSRQ, base), cqpWQE{
			0x0000_0010_0000_0012, // SRQ_LIMIT [43:32] 0x10, RQ_WQE_SIZE [5:4] 1, RQSIZE [3:0] 2
			0x5e00_0000_0000_0140, // the context
			0x0000_0000_0003_0000, // PD_ID [39:16] 3
			0x2000_0006_0000_0005, // ARM_LIMIT_EVENT b61, OP 0x06 [37:32], SRQ id 5
			0x0000_0000_1234_5600, // PHYSICAL_BUFFER_ADDR [63:8]
			0x0000_0000_abcd_ef40, // DB_SHADOW_ADDR [63:6]
			0, 0,
		}},
		{"CREATE_SRQ virtual", buildSRQ(cqpOpCreateSRQ, virt), cqpWQE{
			0x0000_0010_0000_0012,
			0x5e00_0000_0000_0140,
			0x0000_0000_0003_0000,
			0x2000_9006_0000_0005, // + VIRTMAP b47, LEAF_PBL_SIZE [45:44] 1
			0,
			0x0000_0000_abcd_ef40,
			0x77, // FIRST_PM_PBL_IDX [27:0]
			0,
		}},
		{"MODIFY_SRQ", buildSRQ(cqpOpModifySRQ, mod), cqpWQE{
			0x0000_0010_0000_0012,
			0x0000_0000_0000_0140, // SRQCTX [63:6] = id 5
			0x0000_0000_0003_0000,
			0x2000_0007_0000_0005, // OP 0x07
			0x0000_0000_1234_5600,
			0x0000_0000_abcd_ef40,
			0, 0,
		}},
		{"DESTROY_SRQ", buildDestroySRQ(5, 0x5e00_0000_0000_0140), cqpWQE{
			0, 0x5e00_0000_0000_0140, 0, 0x0000_0008_0000_0005, 0, 0, 0, 0,
		}},
	} {
		checkWQE(t, tc.name, tc.got, tc.want)
	}
	// irdma_get_encoded_wqe_size(IRDMA_QUEUE_TYPE_SRQ): ilog2(quanta) − 3.
	for q, want := range map[uint32]uint8{8: 0, 16: 1, 64: 3, 262144: 15} {
		if got := encodedSRQSize(q); got != want {
			t.Errorf("encodedSRQSize(%d) = %d, want %d", q, got, want)
		}
	}
	if srqCtxValue(5)&0x3f != 0 || srqCtxValue(5) != 0x5e00_0000_0000_0140 {
		t.Errorf("SRQ context %#x: the id must sit above bit 6", srqCtxValue(5))
	}
	// QP context: USE_SRQ qword0 b10, SRQ_ID +200 [15:0].
	q := encodeRoCECtx(&roceCtx{UseSRQ: true, SRQID: 0x1234, PushIdx: invalidPushIdx})
	if q[0] != 1<<10 || q[25] != 0x1234 {
		t.Errorf("SRQ context fields qw0 %#x qw25 %#x", q[0], q[25])
	}
}

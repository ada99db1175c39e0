package uverbs_test

import (
	"syscall"
	"testing"
)

// The SRQ commands, written from ib_user_verbs.h and irdma-abi.h.

// createSRQCmd: ib_uverbs_create_srq {response, user_handle, pd_handle,
// max_wr, max_sge, srq_limit} + irdma_create_srq_req {user_srq_buf,
// user_shadow_area}; response room ib_uverbs_create_srq_resp (16) +
// irdma_create_srq_resp (8) — the 48 and 24 bytes libibverbs 65 sends.
func createSRQCmd(userHandle uint64, pd, maxWR, maxSGE, limit uint32, ring, shadow uint64) []byte {
	b := make([]byte, 32+16)
	le.PutUint64(b[0:], fakeResp)
	le.PutUint64(b[8:], userHandle)
	le.PutUint32(b[16:], pd)
	le.PutUint32(b[20:], maxWR)
	le.PutUint32(b[24:], maxSGE)
	le.PutUint32(b[28:], limit)
	le.PutUint64(b[32:], ring)
	le.PutUint64(b[40:], shadow)
	return legacy(32, 16+8, b)
}

// createXSRQCmd: ib_uverbs_create_xsrq {response, user_handle, srq_type,
// pd_handle, max_wr, max_sge, srq_limit, max_num_tags, xrcd_handle,
// cq_handle} + irdma_create_srq_req.
func createXSRQCmd(srqType, pd, maxWR, maxSGE, cq uint32, ring, shadow uint64) []byte {
	b := make([]byte, 48+16)
	le.PutUint64(b[0:], fakeResp)
	le.PutUint64(b[8:], 0x99)
	le.PutUint32(b[16:], srqType)
	le.PutUint32(b[20:], pd)
	le.PutUint32(b[24:], maxWR)
	le.PutUint32(b[28:], maxSGE)
	le.PutUint32(b[36:], 8) // max_num_tags
	le.PutUint32(b[44:], cq)
	le.PutUint64(b[48:], ring)
	le.PutUint64(b[56:], shadow)
	return legacy(39, 16+8, b)
}

// modifySRQCmd: ib_uverbs_modify_srq {srq_handle, attr_mask, max_wr,
// srq_limit}, no response (ibv_cmd_modify_srq's 24 bytes).
func modifySRQCmd(srq, mask, maxWR, limit uint32) []byte {
	b := make([]byte, 16)
	le.PutUint32(b[0:], srq)
	le.PutUint32(b[4:], mask)
	le.PutUint32(b[8:], maxWR)
	le.PutUint32(b[12:], limit)
	return legacy(33, 0, b)
}

// querySRQCmd: ib_uverbs_query_srq {response, srq_handle, reserved};
// response ib_uverbs_query_srq_resp (16).
func querySRQCmd(srq uint32) []byte {
	b := make([]byte, 16)
	le.PutUint64(b, fakeResp)
	le.PutUint32(b[8:], srq)
	return legacy(34, 16, b)
}

// postSRQRecvCmd: ib_uverbs_post_srq_recv {response, srq_handle,
// wr_count, sge_count, wqe_size} and one ib_uverbs_recv_wr with one SGE.
func postSRQRecvCmd(srq uint32) []byte {
	b := make([]byte, 24+16+16)
	le.PutUint64(b, fakeResp)
	le.PutUint32(b[8:], srq)
	le.PutUint32(b[12:], 1)  // wr_count
	le.PutUint32(b[16:], 1)  // sge_count
	le.PutUint32(b[20:], 16) // wqe_size
	le.PutUint32(b[24+8:], 1)
	return legacy(36, 4, b)
}

// createQPOnSRQCmd is createQPCmd with is_srq and srq_handle set.
func createQPOnSRQCmd(pd, cq, srq uint32, wqeBufs uint64) []byte {
	b := createQPCmd(0x51, pd, cq, cq, 64, 1, 1, 1, 0, 2, wqeBufs, 1)
	le.PutUint32(b[8+28:], srq)
	b[8+54] = 1 // is_srq
	return b
}

// TestSRQOnGEN2: an E810 has no SRQ. The kernel registers the SRQ verbs
// for GEN_3 only (irdma_gen3_dev_ops), so every SRQ command is the uapi's
// notsupp method — EOPNOTSUPP for any well-formed header, whatever the
// body — and the kernels an E810 runs know no reg_type SRQ (EINVAL) nor an
// SRQ to bind a QP to (EINVAL); GET_CONTEXT says nothing of SRQs. This is
// what libirdma 44's ibv_create_srq never gets to: it has no create_srq
// and fails in libibverbs with EOPNOTSUPP (tests/programs
// TestSRQPingpongGEN2).
func TestSRQOnGEN2(t *testing.T) {
	f := newFixture(t)
	ctxc := func(f *fixture) *client { return f.c }
	cases := []struct {
		name string
		c    func(*fixture) *client
		cmd  []byte
		want syscall.Errno
	}{
		{"CREATE_SRQ", ctxc, createSRQCmd(1, 0, 64, 1, 0, f.a.addr+0x30000, f.a.addr+0x31000), syscall.EOPNOTSUPP},
		{"CREATE_SRQ without a context", func(f *fixture) *client { return f.bare }, createSRQCmd(1, 0, 64, 1, 0, 0, 0), syscall.EOPNOTSUPP},
		{"CREATE_SRQ, short body", ctxc, legacy(32, 24, withResp(8)), syscall.EOPNOTSUPP},
		{"CREATE_SRQ, in_words wrong", ctxc, with(createSRQCmd(1, 0, 64, 1, 0, 0, 0), func(b []byte) { b[4]++ }), syscall.EINVAL},
		{"CREATE_XSRQ", ctxc, createXSRQCmd(0, 0, 64, 1, 3, 0, 0), syscall.EOPNOTSUPP},
		{"MODIFY_SRQ", ctxc, modifySRQCmd(0, 2, 0, 4), syscall.EOPNOTSUPP},
		{"QUERY_SRQ", ctxc, querySRQCmd(0), syscall.EOPNOTSUPP},
		{"DESTROY_SRQ", ctxc, destroyCmd(35, 0, 4), syscall.EOPNOTSUPP},
		{"POST_SRQ_RECV", ctxc, postSRQRecvCmd(0), syscall.EOPNOTSUPP},
		{"REG_MR reg_type SRQ", ctxc, regMRCmd(f.a.addr+0x30000, 8192, 0, 1, 3, 0, 1, 0), syscall.EINVAL},
		{"CREATE_QP on an SRQ", ctxc, createQPOnSRQCmd(0, 3, 0, f.a.addr+offQP), syscall.EINVAL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c(f).raw(tc.cmd)
			if r.errno() != tc.want {
				t.Errorf("got status %d (%v), want %v", r.status, r.errno(), tc.want)
			}
			if r.status < 0 && (r.resp != nil || len(r.fds) != 0) {
				t.Errorf("a failed command answered %d bytes and %d descriptors", len(r.resp), len(r.fds))
			}
		})
	}
	// GET_CONTEXT as today: comp_mask USE_RAW_ATTR | MIN_HW_WQ_SIZE, no
	// max_hw_srq_quanta, no IRDMA_FEATURE_SRQ (0x80) — and a provider
	// that says it writes the GEN_3 WQE format is welcome too.
	c := f.e.open(t)
	r := c.ok(c.raw(getContextCmd(5, 1|8)), "GET_CONTEXT")
	u := r.resp[8:]
	if got := u64(u, 64); got != 3 {
		t.Errorf("comp_mask %#x, want 0x3", got)
	}
	if got := u32(u, 76); got != 0 {
		t.Errorf("max_hw_srq_quanta %d, want 0", got)
	}
	if u[62] != 2 || u64(u, 16)&0x80 != 0 {
		t.Errorf("hw_rev %d feature_flags %#x", u[62], u64(u, 16))
	}
	// QUERY_DEVICE: max_srq, max_srq_wr, max_srq_sge 0.
	r = c.ok(c.raw(legacy(1, 176, withResp(8))), "QUERY_DEVICE")
	if u32(r.resp, 156) != 0 || u32(r.resp, 160) != 0 || u32(r.resp, 164) != 0 {
		t.Errorf("max_srq %d max_srq_wr %d max_srq_sge %d", u32(r.resp, 156), u32(r.resp, 160), u32(r.resp, 164))
	}
}

package uverbs_test

import (
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Layout of the GEN_3 test arena: CQ ring (8 pages: 256 64-byte CQEs need
// 4), CQ shadow, SRQ ring (1 page) + shadow, QP SQ (4 pages) + RQ (1
// page) + shadow, a second SRQ ring (2 pages) + shadow, a second QP's
// rings.
const (
	g3CQ       = 0x0000
	g3CQShadow = 0x8000
	g3SRQ      = 0x9000
	g3QP       = 0xb000
	g3SRQ2     = 0x11000
	g3QP2      = 0x14000
	g3Arena    = 0x20000
)

// gen3Ctx is a GEN_3 context with a PD (0), the CQ's ring and shadow
// registrations (1, 2) and a CQ (3).
func gen3Ctx(t *testing.T) (*env, *client, *arena) {
	t.Helper()
	e := newEnvProfile(t, profile.GEN3(), nil)
	c := e.open(t)
	c.ok(c.raw(getContextCmd(5, 1|8)), "GET_CONTEXT")
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(g3Arena)
	c.ok(c.raw(regMRCmd(a.addr+g3CQ, 8*4096, 0, 1, 2, 8, 0, 0)), "REG_MR CQ")
	c.ok(c.raw(regMRCmd(a.addr+g3CQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ shadow")
	c.ok(c.raw(createCQCmd(1, 256, 0, -1, a.addr+g3CQ, a.addr+g3CQShadow)), "CREATE_CQ")
	return e, c, a
}

// TestSRQGEN3 drives an SRQ through the commands libirdma 65 sends
// (providers/irdma/uverbs.c irdma_ucreate_srq, irdma_ucreate_qp with an
// SRQ), checking every field against values worked out by hand from
// irdma's sizing rules for the GEN_3 limits (min_hw_wq_size 16,
// max_hw_wq_frags 14, max_hw_srq_quanta 262144, IRDMA_RQ_RSVD 1).
func TestSRQGEN3(t *testing.T) {
	e := newEnvProfile(t, profile.GEN3(), nil)

	// GET_CONTEXT: a provider without IRDMA_SUPPORT_WQE_FORMAT_V2
	// (libirdma 44, which retries with userspace_ver 4) is refused.
	old := e.open(t)
	for _, ver := range []uint8{5, 4} {
		if r := old.raw(getContextCmd(ver, 0)); r.errno() != syscall.EOPNOTSUPP {
			t.Errorf("GET_CONTEXT v%d without WQE format 2: %v, want EOPNOTSUPP", ver, r.errno())
		}
	}
	c := e.open(t)
	r := c.ok(c.raw(getContextCmd(5, 1|8)), "GET_CONTEXT")
	u := r.resp[8:]
	if got := u64(u, 64); got != 1|2|4 {
		t.Errorf("comp_mask %#x, want USE_RAW_ATTR|MIN_HW_WQ_SIZE|MAX_HW_SRQ_QUANTA (0x7)", got)
	}
	if u32(u, 76) != 262144 || u[62] != 3 || u64(u, 16)&0x80 == 0 || u16(u, 72) != 16 {
		t.Errorf("max_hw_srq_quanta %d hw_rev %d feature_flags %#x min_hw_wq_size %d", u32(u, 76), u[62], u64(u, 16), u16(u, 72))
	}
	// QUERY_DEVICE (ib_device.attrs as registered): irdma_query_device's
	// max_srq (what the driver has free), max_srq_wr IRDMA_MAX_SRQ_WRS =
	// (262144 − 1) / 8, max_srq_sge max_hw_wq_frags.
	at, err := e.d.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	r = c.ok(c.raw(legacy(1, 176, withResp(8))), "QUERY_DEVICE")
	if u32(r.resp, 156) != at.MaxSRQ || at.MaxSRQ == 0 || u32(r.resp, 160) != 32767 || u32(r.resp, 164) != 14 {
		t.Errorf("max_srq %d (driver %d) max_srq_wr %d max_srq_sge %d, want 32767, 14", u32(r.resp, 156), at.MaxSRQ,
			u32(r.resp, 160), u32(r.resp, 164))
	}
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(g3Arena)
	c.ok(c.raw(regMRCmd(a.addr+g3CQ, 8*4096, 0, 1, 2, 8, 0, 0)), "REG_MR CQ")
	c.ok(c.raw(regMRCmd(a.addr+g3CQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ shadow")
	c.ok(c.raw(createCQCmd(1, 256, 0, -1, a.addr+g3CQ, a.addr+g3CQShadow)), "CREATE_CQ")

	// max_wr 64 of 1 SGE: shift 0, depth roundup_pow2(64 + 1) = 128
	// quanta (one page of 32-byte quanta), then the 64-byte shadow area.
	r = c.ok(c.raw(regMRCmd(a.addr+g3SRQ, 4096+64, 0, 1, 3, 0, 1, 0)), "REG_MR reg_type SRQ")
	if h := u32(r.resp, 0); h != 4 || u32(r.resp, 4) != 0 || u32(r.resp, 8) != 0 {
		t.Errorf("REG_MR SRQ: handle %d lkey %#x rkey %#x, want 4, 0, 0", h, u32(r.resp, 4), u32(r.resp, 8))
	}
	r = c.ok(c.raw(createSRQCmd(0xabcd, 0, 64, 1, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096)), "CREATE_SRQ")
	if len(r.resp) != 16+8 || r.addr != fakeResp {
		t.Fatalf("CREATE_SRQ answered %d bytes at %#x", len(r.resp), r.addr)
	}
	srqh, srqID := u32(r.resp, 0), u32(r.resp, 16)
	// max_wr (128 − 1) >> 0, max_sge 1, srqn 0; srq_size 128 >> 0.
	if srqh != 5 || u32(r.resp, 4) != 127 || u32(r.resp, 8) != 1 || u32(r.resp, 12) != 0 || u32(r.resp, 20) != 128 {
		t.Errorf("CREATE_SRQ response % x", r.resp)
	}
	r = c.ok(c.raw(querySRQCmd(srqh)), "QUERY_SRQ")
	if u32(r.resp, 0) != 127 || u32(r.resp, 4) != 1 || u32(r.resp, 8) != 0 {
		t.Errorf("QUERY_SRQ % x, want max_wr 127, max_sge 1, limit 0", r.resp)
	}
	c.ok(c.raw(modifySRQCmd(srqh, 2, 0, 10)), "MODIFY_SRQ limit 10")
	r = c.ok(c.raw(querySRQCmd(srqh)), "QUERY_SRQ")
	if u32(r.resp, 8) != 10 {
		t.Errorf("srq_limit %d after MODIFY_SRQ, want 10", u32(r.resp, 8))
	}
	c.ok(c.raw(modifySRQCmd(srqh, 0, 0, 0)), "MODIFY_SRQ without attributes")

	// max_wr 100 of 2 SGEs: shift 1, depth roundup_pow2(200 + 1) = 256
	// quanta (two pages): max_wr (256 − 1) >> 1 = 127, srq_size 128.
	c.ok(c.raw(regMRCmd(a.addr+g3SRQ2, 8192+64, 0, 1, 3, 0, 2, 0)), "REG_MR reg_type SRQ (2 pages)")
	r = c.ok(c.raw(createSRQCmd(0xef, 0, 100, 2, 0, a.addr+g3SRQ2, a.addr+g3SRQ2+8192)), "CREATE_SRQ 2")
	srq2 := u32(r.resp, 0)
	if u32(r.resp, 4) != 127 || u32(r.resp, 8) != 2 || u32(r.resp, 20) != 128 || u32(r.resp, 16) == srqID {
		t.Errorf("CREATE_SRQ 2 response % x", r.resp)
	}

	// An RC QP on the SRQ (raw attributes): SQ of 64 WRs of 1 SGE (+1
	// for the immediate: shift 1) is roundup_pow2(128 + 258) = 512
	// quanta; irdma gives the RQ max_recv_wr 4 of 14 SGEs (shift 3):
	// max(roundup_pow2(32 + 1), 16 << 3) = 128 quanta, one page.
	c.ok(c.raw(regMRCmd(a.addr+g3QP, 5*4096+64, 0, 1, 1, 0, 1, 4)), "REG_MR QP")
	r = c.ok(c.raw(createQPOnSRQCmd(0, 3, srqh, a.addr+g3QP)), "CREATE_QP on the SRQ")
	qph := u32(r.resp, 0)
	// caps: max_send_wr 64, max_recv_wr 4, max_send_sge 1, max_recv_sge 14.
	if u32(r.resp, 8) != 64 || u32(r.resp, 12) != 4 || u32(r.resp, 16) != 1 || u32(r.resp, 20) != 14 {
		t.Errorf("CREATE_QP caps % x", r.resp[8:28])
	}
	// irdma_create_qp_resp: actual_sq_size 512 >> 1, actual_rq_size 128 >> 3.
	if u32(r.resp, 32+4) != 256 || u32(r.resp, 32+8) != 16 {
		t.Errorf("actual_sq_size %d actual_rq_size %d, want 256, 16", u32(r.resp, 36), u32(r.resp, 40))
	}

	// The same through EX_CREATE_QP (ib_uverbs_ex_create_qp: srq_handle
	// at 20, is_srq at 46), on the second SRQ.
	c.ok(c.raw(regMRCmd(a.addr+g3QP2, 5*4096+64, 0, 1, 1, 0, 1, 4)), "REG_MR QP 2")
	core := make([]byte, 64)
	le.PutUint64(core, 0x78)
	le.PutUint32(core[12:], 3)
	le.PutUint32(core[16:], 3)
	le.PutUint32(core[20:], srq2)
	le.PutUint32(core[24:], 64)
	le.PutUint32(core[32:], 1)
	core[45], core[46] = 2, 1 // RC, is_srq
	prov := make([]byte, 16)
	le.PutUint64(prov, a.addr+g3QP2)
	le.PutUint64(prov[8:], 1)
	r = c.ok(c.raw(extended(24, fakeResp, core, 40, prov, 24)), "EX_CREATE_QP on SRQ 2")
	qp2 := u32(r.resp, 0)
	if u32(r.resp, 12) != 4 || u32(r.resp, 20) != 14 || u32(r.resp, 36) != 40 || u32(r.resp, 40+8) != 16 {
		t.Errorf("EX_CREATE_QP response % x", r.resp)
	}

	bad := []struct {
		name string
		cmd  []byte
		want syscall.Errno
	}{
		{"CREATE_SRQ bad PD", createSRQCmd(1, 7, 64, 1, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096), syscall.EINVAL},
		{"CREATE_SRQ with a CQ handle as PD", createSRQCmd(1, 3, 64, 1, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096), syscall.EINVAL},
		{"CREATE_SRQ max_sge 15", createSRQCmd(1, 0, 64, 15, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096), syscall.EINVAL},
		{"CREATE_SRQ max_wr beyond max_hw_srq_quanta", createSRQCmd(1, 0, 262144, 1, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096), syscall.EINVAL},
		// irdma_setup_umode_srq: no SRQ registration at user_srq_buf is
		// -EPROTO (a QP's unregistered rings are -ENODATA).
		{"CREATE_SRQ ring not registered", createSRQCmd(1, 0, 64, 1, 0, 0xdead0000, 0xdead1000), syscall.EPROTO},
		{"CREATE_SRQ udata of 8 bytes", with(createSRQCmd(1, 0, 64, 1, 0, 0, 0)[:8+40], func(b []byte) { b[4] = 48 / 4 }), syscall.EINVAL},
		{"CREATE_SRQ response room too small", with(createSRQCmd(1, 0, 64, 1, 0, 0, 0), func(b []byte) { b[6] = 12 / 4 }), syscall.ENOSPC},
		{"CREATE_SRQ NULL response", with(createSRQCmd(1, 0, 64, 1, 0, 0, 0), func(b []byte) { le.PutUint64(b[8:], 0) }), syscall.EFAULT},
		{"CREATE_XSRQ XRC (no XRC domain)", createXSRQCmd(1, 0, 64, 1, 3, 0, 0), syscall.EINVAL},
		{"CREATE_XSRQ tag matching, bad CQ", createXSRQCmd(2, 0, 64, 1, 9, 0, 0), syscall.EINVAL},
		{"CREATE_XSRQ tag matching", createXSRQCmd(2, 0, 64, 1, 3, 0, 0), syscall.EOPNOTSUPP},
		{"CREATE_XSRQ unknown type", createXSRQCmd(7, 0, 64, 1, 3, 0, 0), syscall.EOPNOTSUPP},
		{"MODIFY_SRQ bad handle", modifySRQCmd(99, 2, 0, 1), syscall.EINVAL},
		{"MODIFY_SRQ with a QP handle", modifySRQCmd(qph, 2, 0, 1), syscall.EINVAL},
		{"MODIFY_SRQ max_wr (no resize)", modifySRQCmd(srqh, 1, 256, 0), syscall.EINVAL},
		{"MODIFY_SRQ limit above the size", modifySRQCmd(srqh, 2, 0, 129), syscall.EINVAL},
		{"QUERY_SRQ bad handle", querySRQCmd(99), syscall.EINVAL},
		{"QUERY_SRQ trailing bytes", legacy(34, 16, with(make([]byte, 24), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[8:], srqh); b[20] = 1 })), syscall.EOPNOTSUPP},
		{"DESTROY_SRQ unknown handle", destroyCmd(35, 99, 4), syscall.ENOENT},
		{"DESTROY_SRQ with a PD handle", destroyCmd(35, 0, 4), syscall.EINVAL},
		{"DESTROY_SRQ in use", destroyCmd(35, srqh, 4), syscall.EBUSY},
		{"POST_SRQ_RECV (libirdma posts itself)", postSRQRecvCmd(srqh), syscall.EOPNOTSUPP},
		{"POST_SRQ_RECV bad handle", postSRQRecvCmd(qph), syscall.EINVAL},
		{"POST_SRQ_RECV short WR", with(postSRQRecvCmd(srqh), func(b []byte) { le.PutUint32(b[8+20:], 8) }), syscall.EINVAL},
		{"CREATE_QP on a bad SRQ", createQPOnSRQCmd(0, 3, 99, a.addr+g3QP), syscall.EINVAL},
		{"CREATE_QP with a CQ handle as SRQ", createQPOnSRQCmd(0, 3, 3, a.addr+g3QP), syscall.EINVAL},
		{"REG_MR SRQ ring pages beyond the region", regMRCmd(a.addr+0x1e000, 4096, 0, 1, 3, 0, 1, 0), syscall.EINVAL},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := c.raw(tc.cmd)
			if r.errno() != tc.want {
				t.Errorf("got status %d (%v), want %v", r.status, r.errno(), tc.want)
			}
			if r.status < 0 && (r.resp != nil || len(r.fds) != 0) {
				t.Errorf("a failed command answered %d bytes and %d descriptors", len(r.resp), len(r.fds))
			}
		})
	}
	// A file without a context.
	bare := e.open(t)
	if r := bare.raw(createSRQCmd(1, 0, 64, 1, 0, 0, 0)); r.errno() != syscall.EINVAL {
		t.Errorf("CREATE_SRQ without a context: %v, want EINVAL", r.errno())
	}

	// The limit still armed, the SRQ still usable; teardown in
	// libirdma's order.
	r = c.ok(c.raw(querySRQCmd(srqh)), "QUERY_SRQ after the bad commands")
	if u32(r.resp, 8) != 10 {
		t.Errorf("srq_limit %d after the bad commands, want 10", u32(r.resp, 8))
	}
	c.ok(c.raw(destroyCmd(27, qph, 4)), "DESTROY_QP")
	r = c.ok(c.raw(destroyCmd(35, srqh, 4)), "DESTROY_SRQ")
	if u32(r.resp, 0) != 0 {
		t.Errorf("events_reported %d, want 0", u32(r.resp, 0))
	}
	c.ok(c.raw(handleCmd(13, 4)), "DEREG_MR of the SRQ ring")
	c.ok(c.raw(destroyCmd(27, qp2, 4)), "DESTROY_QP 2")
	c.ok(c.raw(destroyCmd(35, srq2, 4)), "DESTROY_SRQ 2")
	if r := c.raw(querySRQCmd(srqh)); r.errno() != syscall.EINVAL {
		t.Errorf("QUERY_SRQ of a destroyed SRQ: %v", r.errno())
	}
}

// gen3SRQCtx is gen3Ctx with an SRQ ring registration (4), an SRQ (5),
// QP rings (6) and an RC QP on the SRQ (7).
func gen3SRQCtx(t *testing.T) (*env, *client, *arena) {
	t.Helper()
	e, c, a := gen3Ctx(t)
	c.ok(c.raw(regMRCmd(a.addr+g3SRQ, 4096+64, 0, 1, 3, 0, 1, 0)), "REG_MR reg_type SRQ")
	c.ok(c.raw(createSRQCmd(0xabcd, 0, 64, 1, 0, a.addr+g3SRQ, a.addr+g3SRQ+4096)), "CREATE_SRQ")
	c.ok(c.raw(regMRCmd(a.addr+g3QP, 5*4096+64, 0, 1, 1, 0, 1, 4)), "REG_MR QP")
	c.ok(c.raw(createQPOnSRQCmd(0, 3, 5, a.addr+g3QP)), "CREATE_QP on the SRQ")
	return e, c, a
}

// srqSeeds are valid SRQ commands of gen3SRQCtx's context.
func srqSeeds(a *arena) [][]byte {
	return [][]byte{
		createSRQCmd(1, 0, 64, 1, 0, a.addr+g3SRQ2, a.addr+g3SRQ2+4096), createXSRQCmd(0, 0, 64, 1, 3, a.addr+g3SRQ2, 0),
		createXSRQCmd(2, 0, 64, 1, 3, 0, 0), modifySRQCmd(5, 2, 0, 8), querySRQCmd(5), destroyCmd(35, 5, 4),
		postSRQRecvCmd(5), regMRCmd(a.addr+g3SRQ2, 8192+64, 0, 1, 3, 0, 2, 0), createQPOnSRQCmd(0, 3, 5, a.addr+g3QP),
		destroyCmd(27, 7, 4),
	}
}

// TestRandomSRQCommands: mutated SRQ commands on a live GEN_3 context
// get answers, never a panic, and leave the context working; closing it
// leaves the device as it was.
func TestRandomSRQCommands(t *testing.T) {
	e, c, a := gen3SRQCtx(t)
	before := e.dev.Mem().NumRegions()
	storm(t, e, c, srqSeeds(a), 10000)
	c.close()
	if n := e.dev.Mem().NumRegions(); n >= before {
		t.Errorf("%d bus regions after the context closed, %d while it was open", n, before)
	}
}

// FuzzSRQCommand: go test -fuzz=FuzzSRQCommand ./uverbs/ — each input on
// a fresh GEN_3 context with an SRQ and a QP on it.
func FuzzSRQCommand(fz *testing.F) {
	fz.Add(createSRQCmd(1, 0, 64, 1, 0, 0, 0))
	fz.Add(modifySRQCmd(5, 2, 0, 8))
	fz.Add(createXSRQCmd(2, 0, 64, 1, 3, 0, 0))
	fz.Fuzz(func(t *testing.T, b []byte) {
		e, c, _ := gen3SRQCtx(t)
		c.raw(b)
		if p := e.p.Stats().Panics; p != 0 {
			t.Fatalf("%d commands panicked", p)
		}
	})
}

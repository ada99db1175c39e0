package uverbs_test

import (
	"bytes"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// TestDeviceQueries: QUERY_DEVICE (the attributes cached at
// registration), EX_QUERY_DEVICE (a fresh query, response_length) and
// QUERY_PORT, field by field, with the kernel's zero fill and truncation.
func TestDeviceQueries(t *testing.T) {
	e := newEnv(t)
	reg, err := e.d.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	c := e.open(t)
	c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	// An object in use: the legacy query still shows the registration's
	// counts, the extended one the current ones.
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")

	r := c.ok(c.raw(legacy(1, 176+8, withResp(8))), "QUERY_DEVICE")
	if len(r.resp) != 184 || !bytes.Equal(r.resp[176:], make([]byte, 8)) {
		t.Fatalf("QUERY_DEVICE: %d bytes, tail %x: want 176 and zero fill", len(r.resp), r.resp[176:])
	}
	d := r.resp
	type field struct {
		name      string
		got, want uint64
	}
	fields := func(d []byte, maxPD uint32) []field {
		return []field{
			{"fw_ver", u64(d, 0), reg.FWVer},
			{"node_guid", u64(d, 8), le.Uint64(reg.NodeGUID[:])},
			{"sys_image_guid", u64(d, 16), le.Uint64(reg.SysImageGUID[:])},
			{"max_mr_size", u64(d, 24), reg.MaxMRSize},
			{"page_size_cap", u64(d, 32), reg.PageSizeCap},
			{"vendor_id", uint64(u32(d, 40)), 0x8086},
			{"vendor_part_id", uint64(u32(d, 44)), 0x1592},
			{"hw_ver", uint64(u32(d, 48)), uint64(reg.HWVer)},
			{"max_qp", uint64(u32(d, 52)), uint64(reg.MaxQP)},
			{"max_qp_wr", uint64(u32(d, 56)), 4063},
			{"device_cap_flags", uint64(u32(d, 60)), 1<<12 | 1<<17 | 1<<21},
			{"max_sge", uint64(u32(d, 64)), 13},
			{"max_sge_rd", uint64(u32(d, 68)), 13},
			{"max_cq", uint64(u32(d, 72)), uint64(reg.MaxCQ)},
			{"max_cqe", uint64(u32(d, 76)), uint64(reg.MaxCQE)},
			{"max_mr", uint64(u32(d, 80)), uint64(reg.MaxMR)},
			{"max_pd", uint64(u32(d, 84)), uint64(maxPD)},
			{"max_qp_rd_atom", uint64(u32(d, 88)), 127},
			{"max_qp_init_rd_atom", uint64(u32(d, 100)), 255},
			{"atomic_cap", uint64(u32(d, 108)), 0},
			{"max_mw", uint64(u32(d, 120)), uint64(reg.MaxMW)},
			{"max_mcast_grp", uint64(u32(d, 132)), uint64(reg.MaxMcastGrp)},
			{"max_mcast_qp_attach", uint64(u32(d, 136)), 8},
			{"max_total_mcast_qp_attach", uint64(u32(d, 140)), uint64(reg.MaxTotalMcastQPAttach)},
			{"max_ah", uint64(u32(d, 144)), uint64(reg.MaxAH)},
			{"max_srq", uint64(u32(d, 156)), 0},
			{"max_pkeys", uint64(u16(d, 168)), 1},
			{"local_ca_ack_delay", uint64(d[170]), 0},
			{"phys_port_cnt", uint64(d[171]), 1},
		}
	}
	for _, f := range fields(d, reg.MaxPD) {
		if f.got != f.want {
			t.Errorf("QUERY_DEVICE %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}

	r = c.ok(c.raw(exQueryDeviceCmd(0, nil)), "EX_QUERY_DEVICE")
	if len(r.resp) != 304 {
		t.Fatalf("EX_QUERY_DEVICE: %d bytes", len(r.resp))
	}
	d = r.resp
	for _, f := range append(fields(d, reg.MaxPD-1), []field{
		{"comp_mask", uint64(u32(d, 176)), 0},
		{"response_length", uint64(u32(d, 180)), 304},
		{"timestamp_mask", u64(d, 208), 0x1ffff},
		{"hca_core_clock", u64(d, 216), 0},
		{"device_cap_flags_ex", u64(d, 224), 1<<12 | 1<<17 | 1<<21},
		{"max_dm_size", u64(d, 288), 0},
	}...) {
		if f.got != f.want {
			t.Errorf("EX_QUERY_DEVICE %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}
	// An older library with a shorter response: truncated, and
	// response_length says so.
	r = c.ok(c.raw(extended(1, fakeResp, make([]byte, 8), 184, nil, 0)), "EX_QUERY_DEVICE (184)")
	if len(r.resp) != 184 || u32(r.resp, 180) != 184 {
		t.Errorf("EX_QUERY_DEVICE into 184 bytes: %d bytes, response_length %d", len(r.resp), u32(r.resp, 180))
	}

	r = c.ok(c.raw(queryPortCmd(1, 48)), "QUERY_PORT")
	if len(r.resp) != 48 || !bytes.Equal(r.resp[40:], make([]byte, 8)) {
		t.Fatalf("QUERY_PORT: %d bytes, want 40 and zero fill", len(r.resp))
	}
	pa, err := e.d.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	p := r.resp
	for _, f := range []field{
		{"port_cap_flags", uint64(u32(p, 0)), uint64(pa.PortCapFlags | 1<<26)}, // + IP_BASED_GIDS
		{"max_msg_sz", uint64(u32(p, 4)), 0x7fffffff},
		{"gid_tbl_len", uint64(u32(p, 16)), 32},
		{"pkey_tbl_len", uint64(u16(p, 20)), 1},
		{"lid", uint64(u16(p, 22)), 1},
		{"sm_lid", uint64(u16(p, 24)), 0},
		{"state", uint64(p[26]), 4},
		{"max_mtu", uint64(p[27]), 5},
		{"active_mtu", uint64(p[28]), 3},
		{"active_width", uint64(p[34]), uint64(pa.ActiveWidth)},
		{"active_speed", uint64(p[35]), uint64(pa.ActiveSpeed)},
		{"phys_state", uint64(p[36]), 5},
		{"link_layer", uint64(p[37]), 2},
		{"flags", uint64(p[38]), 0},
	} {
		if f.got != f.want {
			t.Errorf("QUERY_PORT %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}
}

// TestExtendedCreates: EX_CREATE_CQ and EX_CREATE_QP answer the extended
// responses (response_length) with irdma's response after the core's
// room; RESIZE_CQ moves a CQ to a new registration; ALLOC_MW/DEALLOC_MW.
func TestExtendedCreates(t *testing.T) {
	e := newEnv(t)
	c := e.open(t)
	c.ok(c.raw(getContextCmd(5, 1)), "GET_CONTEXT")
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(0x40000)
	c.ok(c.raw(regMRCmd(a.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ")
	c.ok(c.raw(regMRCmd(a.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR shadow")
	// ib_uverbs_ex_create_cq {user_handle, cqe, comp_vector,
	// comp_channel, comp_mask, flags, reserved}; 24 bytes of room for the
	// 16-byte response: response_length 16, irdma's data at +24.
	core := make([]byte, 32)
	le.PutUint64(core, 0x99)
	le.PutUint32(core[8:], 100)
	le.PutUint32(core[16:], ^uint32(0))
	le.PutUint32(core[24:], 1) // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	prov := make([]byte, 16)
	le.PutUint64(prov, a.addr+offCQ)
	le.PutUint64(prov[8:], a.addr+offCQShadow)
	r := c.ok(c.raw(extended(18, fakeResp, core, 24, prov, 8)), "EX_CREATE_CQ")
	if len(r.resp) != 24+8 {
		t.Fatalf("EX_CREATE_CQ: %d bytes", len(r.resp))
	}
	if u32(r.resp, 0) != 3 || u32(r.resp, 4) != 100 || u32(r.resp, 8) != 0 || u32(r.resp, 12) != 16 ||
		!bytes.Equal(r.resp[16:24], make([]byte, 8)) || u32(r.resp, 28) != 100 {
		t.Errorf("EX_CREATE_CQ response %x", r.resp)
	}
	cqh, cqID := u32(r.resp, 0), u32(r.resp, 24)

	// RESIZE_CQ to a new ring registration.
	c.ok(c.raw(regMRCmd(a.addr+0x20000, 16384, 0, 1, 2, 4, 0, 0)), "REG_MR new ring")
	b := withResp(16 + 8)
	le.PutUint32(b[8:], cqh)
	le.PutUint32(b[12:], 400)
	le.PutUint64(b[16:], a.addr+0x20000)
	r = c.ok(c.raw(legacy(19, 8, b)), "RESIZE_CQ")
	if len(r.resp) != 8 || u32(r.resp, 0) != 399 {
		t.Errorf("RESIZE_CQ response %x: want cqe 399 (cq_size − 1)", r.resp)
	}
	if got := e.dev.CQs().Get(cqID).Config().Ring.Size; got != 400 {
		t.Errorf("device CQ ring after resize: %d entries", got)
	}

	// EX_CREATE_QP with raw attributes: actual sizes from the WR counts.
	c.ok(c.raw(regMRCmd(a.addr+offQP, 32768+64, 0, 1, 1, 0, 4, 4)), "REG_MR QP")
	core = make([]byte, 64)
	le.PutUint64(core, 0x77)
	le.PutUint32(core[12:], cqh)
	le.PutUint32(core[16:], cqh)
	le.PutUint32(core[24:], 1)
	le.PutUint32(core[28:], 500)
	le.PutUint32(core[32:], 1)
	le.PutUint32(core[36:], 1)
	core[45] = 4 // UD
	prov = make([]byte, 16)
	le.PutUint64(prov, a.addr+offQP)
	r = c.ok(c.raw(extended(24, fakeResp, core, 40, prov, 24)), "EX_CREATE_QP")
	if len(r.resp) != 40+24 {
		t.Fatalf("EX_CREATE_QP: %d bytes", len(r.resp))
	}
	if u32(r.resp, 36) != 40 || u32(r.resp, 8) != 1 || u32(r.resp, 12) != 500 {
		t.Errorf("EX_CREATE_QP core response %x", r.resp[:40])
	}
	if u32(r.resp, 40) != u32(r.resp, 4) || u32(r.resp, 44) != 256 || u32(r.resp, 48) != 512 ||
		u32(r.resp, 60) != 2|4|8 {
		t.Errorf("EX_CREATE_QP irdma response %x (UD: SEND_IMM | ROCE | PUSH_MODE)", r.resp[40:])
	}

	// ALLOC_MW / DEALLOC_MW
	r = c.ok(c.raw(legacy(14, 8, with(withResp(16), func(b []byte) { b[12] = 2 }))), "ALLOC_MW")
	if len(r.resp) != 8 || u32(r.resp, 4) == 0 {
		t.Errorf("ALLOC_MW response %x", r.resp)
	}
	c.ok(c.raw(handleCmd(16, u32(r.resp, 0))), "DEALLOC_MW")
	if r := c.raw(handleCmd(16, u32(r.resp, 0))); r.errno() == 0 {
		t.Errorf("second DEALLOC_MW succeeded")
	}
}

// TestDeviceQueriesGEN3: what irdma_query_device adds for GEN_3 (the
// GEN_3 series' "Restrict Memory Window and CQE Timestamping to GEN3"):
// MEM_WINDOW_TYPE_2B in device_cap_flags, max_mw = max_mr, a 32-bit
// timestamp_mask and hca_core_clock HCA_CORE_CLOCK_KHZ (1 GHz). The legacy
// QUERY_DEVICE response has no hca_core_clock field.
func TestDeviceQueriesGEN3(t *testing.T) {
	e := newEnvProfile(t, profile.GEN3(), nil)
	c := e.open(t)
	c.ok(c.raw(getContextCmd(5, 1|8)), "GET_CONTEXT")
	const caps = 1<<12 | 1<<17 | 1<<21 | 1<<24 // RC_RNR_NAK_GEN, MEM_WINDOW, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B
	r := c.ok(c.raw(legacy(1, 176, withResp(8))), "QUERY_DEVICE")
	d := r.resp
	if u32(d, 60) != caps || u32(d, 120) != u32(d, 80) || u32(d, 120) == 0 {
		t.Errorf("QUERY_DEVICE device_cap_flags %#x max_mw %d max_mr %d, want %#x and max_mw = max_mr", u32(d, 60), u32(d, 120), u32(d, 80), caps)
	}
	r = c.ok(c.raw(exQueryDeviceCmd(0, nil)), "EX_QUERY_DEVICE")
	d = r.resp
	for _, f := range []struct {
		name      string
		got, want uint64
	}{
		{"device_cap_flags", uint64(u32(d, 60)), caps},
		{"timestamp_mask", u64(d, 208), 0xffffffff},
		{"hca_core_clock", u64(d, 216), 1000000},
		{"device_cap_flags_ex", u64(d, 224), caps},
	} {
		if f.got != f.want {
			t.Errorf("EX_QUERY_DEVICE %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}
}

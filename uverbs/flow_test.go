package uverbs_test

import (
	"bytes"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// Command buffers, written from the ABI layouts (offsets into the body,
// i.e. after the 8-byte ib_uverbs_cmd_hdr).

// getContextCmd: ib_uverbs_get_context {response} + irdma_alloc_ucontext_req
// {rsvd32, userspace_ver, rsvd8[3], comp_mask}; the response room is
// ib_uverbs_get_context_resp (8) + irdma_alloc_ucontext_resp (80).
func getContextCmd(ver uint8, compMask uint64) []byte {
	b := make([]byte, 8+16)
	le.PutUint64(b[0:], fakeResp)
	b[8+4] = ver
	le.PutUint64(b[8+8:], compMask)
	return legacy(0, 8+80, b)
}

func allocPDCmd() []byte {
	b := make([]byte, 8)
	le.PutUint64(b, fakeResp)
	return legacy(3, 4+8, b)
}

// regMRCmd: ib_uverbs_reg_mr {response, start, length, hca_va, pd_handle,
// access_flags} + irdma_mem_reg_req {reg_type, cq_pages, rq_pages, sq_pages}.
func regMRCmd(start, length uint64, pd, access uint32, regType, cqPages, rqPages, sqPages uint16) []byte {
	b := make([]byte, 40+8)
	le.PutUint64(b[0:], fakeResp)
	le.PutUint64(b[8:], start)
	le.PutUint64(b[16:], length)
	le.PutUint64(b[24:], start) // hca_va
	le.PutUint32(b[32:], pd)
	le.PutUint32(b[36:], access)
	le.PutUint16(b[40:], regType)
	le.PutUint16(b[42:], cqPages)
	le.PutUint16(b[44:], rqPages)
	le.PutUint16(b[46:], sqPages)
	return legacy(9, 12, b)
}

func compChannelCmd() []byte {
	b := make([]byte, 8)
	le.PutUint64(b, fakeResp)
	return legacy(17, 4, b)
}

// createCQCmd: ib_uverbs_create_cq {response, user_handle, cqe,
// comp_vector, comp_channel, reserved} + irdma_create_cq_req
// {user_cq_buf, user_shadow_area}; response room 8 + irdma_create_cq_resp 8.
func createCQCmd(userHandle uint64, cqe, vector uint32, channel int32, ring, shadow uint64) []byte {
	b := make([]byte, 32+16)
	le.PutUint64(b[0:], fakeResp)
	le.PutUint64(b[8:], userHandle)
	le.PutUint32(b[16:], cqe)
	le.PutUint32(b[20:], vector)
	le.PutUint32(b[24:], uint32(channel))
	le.PutUint64(b[32:], ring)
	le.PutUint64(b[40:], shadow)
	return legacy(18, 8+8, b)
}

// createQPCmd: ib_uverbs_create_qp + irdma_create_qp_req {user_wqe_bufs,
// user_compl_ctx}; response room 32 + irdma_create_qp_resp 24.
func createQPCmd(userHandle uint64, pd, scq, rcq, sendWR, recvWR, sendSGE, recvSGE, inline uint32, qpType uint8,
	wqeBufs, complCtx uint64) []byte {
	b := make([]byte, 56+16)
	le.PutUint64(b[0:], fakeResp)
	le.PutUint64(b[8:], userHandle)
	le.PutUint32(b[16:], pd)
	le.PutUint32(b[20:], scq)
	le.PutUint32(b[24:], rcq)
	le.PutUint32(b[32:], sendWR)
	le.PutUint32(b[36:], recvWR)
	le.PutUint32(b[40:], sendSGE)
	le.PutUint32(b[44:], recvSGE)
	le.PutUint32(b[48:], inline)
	b[53] = qpType
	le.PutUint64(b[56:], wqeBufs)
	le.PutUint64(b[64:], complCtx)
	return legacy(24, 32+24, b)
}

// modifyQP is struct ib_uverbs_modify_qp (112 bytes) under construction.
type modifyQP []byte

func newModify(qpHandle, mask uint32) modifyQP {
	b := make(modifyQP, 112)
	le.PutUint32(b[64:], qpHandle)
	le.PutUint32(b[68:], mask)
	return b
}

func (m modifyQP) dest(dgid [16]byte, sgidIndex, hopLimit, port uint8) modifyQP {
	copy(m[0:16], dgid[:])
	m[24] = sgidIndex
	m[25] = hopLimit
	m[30] = 1 // is_global
	m[31] = port
	return m
}

func (m modifyQP) legacy() []byte { return legacy(26, 0, m) }

// ex wraps it as EX_MODIFY_QP: ib_uverbs_ex_modify_qp {base, rate_limit,
// reserved}, irdma_modify_qp_req in, room for the 8-byte core response
// and irdma_modify_qp_resp (24).
func (m modifyQP) ex(sqFlush, rqFlush uint8) []byte {
	core := make([]byte, 120)
	copy(core, m)
	prov := []byte{sqFlush, rqFlush, 0, 0, 0, 0, 0, 0}
	return extended(26, fakeResp, core, 8, prov, 24)
}

func destroyCmd(command uint32, handle uint32, outBytes int) []byte {
	b := make([]byte, 16)
	le.PutUint64(b, fakeResp)
	le.PutUint32(b[8:], handle)
	return legacy(command, outBytes, b)
}

func handleCmd(command uint32, handle uint32) []byte {
	b := make([]byte, 4)
	le.PutUint32(b, handle)
	return legacy(command, 0, b)
}

func queryQPCmd(handle, mask uint32) []byte {
	b := make([]byte, 16)
	le.PutUint64(b, fakeResp)
	le.PutUint32(b[8:], handle)
	le.PutUint32(b[12:], mask)
	return legacy(25, 128, b)
}

func gid4(a netip.Addr) [16]byte { return netip.AddrFrom16(a.As16()).As16() }

// Layout of the test arena: CQ ring (256 CQEs, 2 pages), CQ shadow area
// (its own page), QP SQ (4 pages) + RQ (4 pages) + shadow.
const (
	offCQ       = 0x0000
	offCQShadow = 0x4000
	offQP       = 0x8000
	arenaSize   = 0x20000
)

// TestContextToTeardown drives one context through the whole life of an
// RC QP with hand-written commands — GET_CONTEXT, ALLOC_PD, REG_MR of the
// CQ ring and shadow area (in a MEM range), CREATE_COMP_CHANNEL,
// CREATE_CQ, REG_MR of the QP rings, CREATE_QP, MODIFY_QP to INIT (legacy),
// RTR (extended) and RTS, QUERY_QP, the doorbell page, the destroys —
// checking every response field, and the device's view, in the older ABI
// libirdma 44 speaks (ring sizes in max_send_wr) and with raw attributes.
func TestContextToTeardown(t *testing.T) {
	for _, tc := range []struct {
		name             string
		raw              bool
		sendWR, recvWR   uint32 // what the provider passes
		wantSQ, wantRQ   uint32 // actual_sq_size, actual_rq_size
		wantCapS, wantCR uint32 // QUERY_QP max_send_wr, max_recv_wr
	}{
		// libirdma 44: max_send_wr/max_recv_wr are the ring sizes in
		// WQEs (SQ 256 × 2 quanta = 512 quanta, RQ 512), echoed back.
		{name: "legacy", sendWR: 256, recvWR: 512, wantSQ: 256, wantRQ: 512, wantCapS: 256, wantCR: 512},
		// USE_RAW_ATTR: the kernel sizes the rings from the WR counts
		// (1 → roundup(2+258) = 512 quanta, 500 → 512) and reports
		// (depth − reserve) >> shift.
		{name: "raw", raw: true, sendWR: 1, recvWR: 500, wantSQ: 256, wantRQ: 512, wantCapS: 127, wantCR: 511},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.open(t)
			var mask uint64
			if tc.raw {
				mask = 1
			}
			// GET_CONTEXT
			cmd := getContextCmd(5, mask)
			r := c.ok(c.raw(cmd), "GET_CONTEXT")
			if r.status != int32(len(cmd)) || r.addr != fakeResp || len(r.resp) != 88 {
				t.Fatalf("GET_CONTEXT: status %d addr %#x resp %d bytes", r.status, r.addr, len(r.resp))
			}
			if len(r.fds) != 1 || r.fds[0].Offset != 0 {
				t.Fatalf("GET_CONTEXT: descriptors %+v, want the async fd at offset 0", r.fds)
			}
			u := r.resp[8:]
			at := e.d.UKAttrs()
			for _, f := range []struct {
				name      string
				got, want uint64
			}{
				{"num_comp_vectors", uint64(u32(r.resp, 4)), uint64(e.d.NumCompVectors())},
				{"max_pds", uint64(u32(u, 0)), 0},
				{"kernel_ver", uint64(u[12]), 5},
				{"feature_flags", u64(u, 16), 3}, // RTS_AE | CQ_RESIZE
				{"db_mmap_key", u64(u, 24), 0},
				{"max_hw_wq_frags", uint64(u32(u, 32)), 13},
				{"max_hw_read_sges", uint64(u32(u, 36)), 13},
				{"max_hw_inline", uint64(u32(u, 40)), 101},
				{"max_hw_rq_quanta", uint64(u32(u, 44)), 32768},
				{"max_hw_wq_quanta", uint64(u32(u, 48)), 32768},
				{"min_hw_cq_size", uint64(u32(u, 52)), 1},
				{"max_hw_cq_size", uint64(u32(u, 56)), 1048575},
				{"max_hw_sq_chunk", uint64(u16(u, 60)), 8},
				{"hw_rev", uint64(u[62]), 2},
				{"comp_mask", u64(u, 64), 3}, // USE_RAW_ATTR | MIN_HW_WQ_SIZE
				{"min_hw_wq_size", uint64(u16(u, 72)), 8},
				{"max_hw_srq_quanta", uint64(u32(u, 76)), 0},
				{"uk feature flags", uint64(at.FeatureFlags), 3},
			} {
				if f.got != f.want {
					t.Errorf("GET_CONTEXT %s = %d, want %d", f.name, f.got, f.want)
				}
			}
			// The doorbell page.
			dbf, off, err := c.s.Mmap(attach.MmapRequest{Offset: 0, Length: 4096, Prot: unix.PROT_READ | unix.PROT_WRITE,
				Flags: unix.MAP_SHARED})
			if err != nil || off != 0 {
				t.Fatalf("MMAP doorbell: %v (offset %d)", err, off)
			}
			db, err := unix.Mmap(int(dbf.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			dbf.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(db)

			// Two PDs, as libirdma's context and the program allocate them.
			r = c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
			if len(r.resp) != 12 || u32(r.resp, 0) != 0 {
				t.Fatalf("ALLOC_PD: resp %x", r.resp)
			}
			pdID := u32(r.resp, 4)
			r = c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
			if u32(r.resp, 0) != 1 || u32(r.resp, 4) == pdID {
				t.Fatalf("second ALLOC_PD: handle %d pd_id %d (first pd_id %d)", u32(r.resp, 0), u32(r.resp, 4), pdID)
			}

			a := c.arena(arenaSize)
			r = c.ok(c.raw(regMRCmd(a.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ ring")
			if len(r.resp) != 12 || u32(r.resp, 0) != 2 || u32(r.resp, 4) != 0 || u32(r.resp, 8) != 0 {
				t.Fatalf("REG_MR CQ ring: resp %x (want handle 2, lkey = rkey = 0)", r.resp)
			}
			r = c.ok(c.raw(regMRCmd(a.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ shadow")
			if u32(r.resp, 0) != 3 {
				t.Fatalf("REG_MR CQ shadow: handle %d", u32(r.resp, 0))
			}
			r = c.ok(c.raw(compChannelCmd()), "CREATE_COMP_CHANNEL")
			if len(r.resp) != 4 || len(r.fds) != 1 || r.fds[0].Offset != 0 {
				t.Fatalf("CREATE_COMP_CHANNEL: resp %x fds %+v", r.resp, r.fds)
			}
			chFD := int32(r.fds[0].File.Fd())
			r = c.ok(c.raw(createCQCmd(0xcafe0001, 256, 0, chFD, a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
			if len(r.resp) != 16 || u32(r.resp, 0) != 4 || u32(r.resp, 4) != 256 || u32(r.resp, 12) != 256 {
				t.Fatalf("CREATE_CQ: resp %x (want handle 4, cqe 256, cq_size 256)", r.resp)
			}
			cqID := u32(r.resp, 8)
			if dc := e.dev.CQs().Get(cqID); dc == nil || dc.Config().Ring.Size != 256 {
				t.Fatalf("device CQ %d: %+v", cqID, dc)
			}
			r = c.ok(c.raw(regMRCmd(a.addr+offQP, 32768+64, 1, 1, 1, 0, 4, 4)), "REG_MR QP rings")
			if u32(r.resp, 0) != 5 {
				t.Fatalf("REG_MR QP: handle %d", u32(r.resp, 0))
			}
			cmd = createQPCmd(0xcafe0002, 1, 4, 4, tc.sendWR, tc.recvWR, 1, 1, 0, 2, a.addr+offQP, 0xc0ffee)
			r = c.ok(c.raw(cmd), "CREATE_QP")
			if len(r.resp) != 56 {
				t.Fatalf("CREATE_QP: %d response bytes", len(r.resp))
			}
			qpn := u32(r.resp, 4)
			for _, f := range []struct {
				name      string
				got, want uint32
			}{
				{"qp_handle", u32(r.resp, 0), 6},
				{"max_send_wr", u32(r.resp, 8), tc.sendWR},
				{"max_recv_wr", u32(r.resp, 12), tc.recvWR},
				{"max_send_sge", u32(r.resp, 16), 1},
				{"max_recv_sge", u32(r.resp, 20), 1},
				{"max_inline_data", u32(r.resp, 24), 0},
				{"qp_id", u32(r.resp, 32), qpn},
				{"actual_sq_size", u32(r.resp, 36), tc.wantSQ},
				{"actual_rq_size", u32(r.resp, 40), tc.wantRQ},
				{"irdma_drv_opt", u32(r.resp, 44), 0},
				{"push_idx", uint32(u16(r.resp, 48)), 0},
				{"lsmm", uint32(r.resp[50]), 0},
				{"qp_caps", u32(r.resp, 52), 1 | 2 | 4 | 8}, // WRITE_IMM, SEND_IMM, ROCE, PUSH_MODE
			} {
				if f.got != f.want {
					t.Errorf("CREATE_QP %s = %d, want %d", f.name, f.got, f.want)
				}
			}
			dq := e.dev.QPs().Get(qpn)
			if dq == nil {
				t.Fatalf("QP %d not in the device", qpn)
			}
			if sq := dq.SQ(); sq.Mem.Size != 512 {
				t.Errorf("device SQ: %d quanta, want 512 (the provider's ring)", sq.Mem.Size)
			}
			if rq := dq.RQ(); rq.Mem.Size != 512 {
				t.Errorf("device RQ: %d quanta, want 512", rq.Mem.Size)
			}
			raw := dq.Context()
			if ctx, ok := qp.NewContext(raw[:]); !ok || ctx.CompletionCtx() != 0xc0ffee {
				t.Errorf("device QP completion context %#x, want the user_compl_ctx", ctx.CompletionCtx())
			}

			// INIT (legacy MODIFY_QP: no response).
			m := newModify(6, 1|1<<3|1<<4|1<<5)
			m[96] = 1               // INIT
			m[104] = 1              // port
			le.PutUint32(m[88:], 7) // LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
			cmd = m.legacy()
			r = c.ok(c.raw(cmd), "MODIFY_QP INIT")
			if r.status != int32(len(cmd)) || r.resp != nil || r.addr != 0 {
				t.Fatalf("MODIFY_QP: %+v", r)
			}
			// RTR (extended, as libirdma does when qp_caps has PUSH_MODE).
			m = newModify(6, 0x129181).dest(gid4(peerIP), 1, 1, 1)
			m[96] = 2
			m[98] = 3 // path_mtu 1024
			le.PutUint32(m[84:], 0x11)
			le.PutUint32(m[76:], 0x123456)
			m[102] = 1  // max_dest_rd_atomic
			m[103] = 12 // min_rnr_timer
			cmd = m.ex(0, 0)
			r = c.ok(c.raw(cmd), "EX_MODIFY_QP RTR")
			if r.status != int32(len(cmd)) || len(r.resp) != 8+24 || r.addr != fakeResp {
				t.Fatalf("EX_MODIFY_QP: status %d resp %x", r.status, r.resp)
			}
			if u32(r.resp, 0) != 0 || u32(r.resp, 4) != 8 || !bytes.Equal(r.resp[8:], make([]byte, 24)) {
				t.Errorf("EX_MODIFY_QP response %x: want comp_mask 0, response_length 8, push_valid 0", r.resp)
			}
			raw = dq.Context()
			ctx, _ := qp.NewContext(raw[:])
			if mac, ok := e.dev.AHs().ARP(uint32(ctx.ARPIdx())); !ok || !bytes.Equal(mac[:], peerMAC) {
				t.Errorf("ARP entry %d: %x, want the resolved neighbour %s", ctx.ARPIdx(), mac, peerMAC)
			}
			if ctx.TTL() != 64 {
				t.Errorf("TTL %d: the route's hop limit (64) replaces the AV's", ctx.TTL())
			}
			if ctx.DestQP() != 0x11 || ctx.EPSN() != 0x123456 || ctx.DestIP() != peerIP {
				t.Errorf("context: dest qp %#x epsn %#x dest ip %v", ctx.DestQP(), ctx.EPSN(), ctx.DestIP())
			}
			// RTS
			m = newModify(6, 0x12e01)
			m[96] = 3
			m[105], m[106], m[107], m[101] = 14, 7, 7, 1
			le.PutUint32(m[80:], 0x654321)
			c.ok(c.raw(m.legacy()), "MODIFY_QP RTS")

			r = c.ok(c.raw(queryQPCmd(6, 1<<19)), "QUERY_QP")
			if len(r.resp) != 128 {
				t.Fatalf("QUERY_QP: %d bytes", len(r.resp))
			}
			if !bytes.Equal(r.resp[:64], make([]byte, 64)) {
				t.Errorf("QUERY_QP dest/alt_dest %x: irdma reports no address vector", r.resp[:64])
			}
			for _, f := range []struct {
				name      string
				got, want uint32
			}{
				{"max_send_wr", u32(r.resp, 64), tc.wantCapS},
				{"max_recv_wr", u32(r.resp, 68), tc.wantCR},
				{"max_send_sge", u32(r.resp, 72), 1},
				{"max_recv_sge", u32(r.resp, 76), 1},
				{"max_inline_data", u32(r.resp, 80), 0},
				{"rq_psn", u32(r.resp, 88), 0x123456},
				{"sq_psn", u32(r.resp, 92), 0x654321},
				{"dest_qp_num", u32(r.resp, 96), 0x11},
				{"qp_access_flags", u32(r.resp, 100), 0x17}, // irdma: LW|RW|RR|MW_BIND
				{"pkey_index", uint32(u16(r.resp, 104)), 0xffff},
				{"qp_state", uint32(r.resp[108]), 3},
				{"cur_qp_state", uint32(r.resp[109]), 3},
				{"path_mtu", uint32(r.resp[110]), 3},
				{"max_rd_atomic", uint32(r.resp[113]), 1},
				{"max_dest_rd_atomic", uint32(r.resp[114]), 1},
				{"min_rnr_timer", uint32(r.resp[115]), 0}, // GEN_2: irdma_modify_qp_roce does not store the 12
				{"port_num", uint32(r.resp[116]), 1},
				{"retry_cnt", uint32(r.resp[118]), 7},
				{"rnr_retry", uint32(r.resp[119]), 7},
				{"sq_sig_all", uint32(r.resp[122]), 1}, // irdma leaves sq_sig_type 0 (ALL_WR)
			} {
				if f.got != f.want {
					t.Errorf("QUERY_QP %s = %#x, want %#x", f.name, f.got, f.want)
				}
			}

			// Doorbells: the QP id stored at +0 reaches the data plane
			// once; a QP id of no QP of the context does not.
			var rung []uint32
			ring := func(id uint32) { rung = append(rung, id) }
			storeDB(db, 0, qpn)
			storeDB(db, 64, cqID)
			e.p.Poll(ring)
			e.p.Poll(ring)
			storeDB(db, 0, qpn+1000)
			e.p.Poll(ring)
			if len(rung) != 1 || rung[0] != qpn {
				t.Errorf("doorbells rung %v, want [%d]", rung, qpn)
			}
			if st := e.p.Stats(); st.Doorbells != 1 || st.ForeignDoorbells != 1 {
				t.Errorf("provider stats %+v", st)
			}

			// Teardown in libibverbs' order.
			r = c.ok(c.raw(destroyCmd(27, 6, 4)), "DESTROY_QP")
			if len(r.resp) != 4 || u32(r.resp, 0) != 0 {
				t.Errorf("DESTROY_QP: resp %x", r.resp)
			}
			if e.dev.QPs().Get(qpn) != nil {
				t.Errorf("QP %d still in the device", qpn)
			}
			c.ok(c.raw(handleCmd(13, 5)), "DEREG_MR QP")
			r = c.ok(c.raw(destroyCmd(20, 4, 8)), "DESTROY_CQ")
			if len(r.resp) != 8 || u32(r.resp, 0) != 0 || u32(r.resp, 4) != 0 {
				t.Errorf("DESTROY_CQ: resp %x", r.resp)
			}
			for _, h := range []uint32{2, 3} {
				c.ok(c.raw(handleCmd(13, h)), "DEREG_MR CQ")
			}
			c.ok(c.raw(handleCmd(4, 1)), "DEALLOC_PD")
			c.ok(c.raw(handleCmd(4, 0)), "DEALLOC_PD")
			// Every handle is free again: the next object gets 0.
			r = c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
			if u32(r.resp, 0) != 0 {
				t.Errorf("handle after teardown: %d, want 0", u32(r.resp, 0))
			}
		})
	}
}

func storeDB(page []byte, off int, v uint32) {
	*(*uint32)(unsafe.Pointer(&page[off])) = v
}

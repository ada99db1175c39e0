package uverbs_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// TestAtomicsABI: what libirdma 65 sees of atomics through the commands,
// per generation. GEN_3 (firmware sets IRDMA_ATOMICS_ALLOWED_BIT):
// GET_CONTEXT's feature_flags carry IRDMA_FEATURE_ATOMIC_OPS (0x40, which
// irdma_upost_send checks), QUERY_DEVICE and EX_QUERY_DEVICE answer
// atomic_cap IB_ATOMIC_HCA (1) (verbs.c irdma_query_device), REG_MR with
// IBV_ACCESS_REMOTE_ATOMIC gives the STag the remote-atomic right
// (irdma_hwreg_mr: REMOTE_ATOMIC_EN) and MODIFY_QP with it sets the QP
// context's REMOTE_ATOMIC_EN (irdma_modify_qp_roce). GEN_2: none of it.
func TestAtomicsABI(t *testing.T) {
	for _, tc := range []struct {
		name string
		prof profile.Profile
		on   bool
	}{
		{"GEN_2", profile.GEN2(), false},
		{"GEN_3", profile.GEN3(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvProfile(t, tc.prof, nil)
			c := e.open(t)
			r := c.ok(c.raw(getContextCmd(5, 1|8)), "GET_CONTEXT")
			if got := u64(r.resp[8:], 16)&0x40 != 0; got != tc.on {
				t.Errorf("feature_flags %#x: ATOMIC_OPS %v, want %v", u64(r.resp[8:], 16), got, tc.on)
			}
			wantCap := uint32(0)
			if tc.on {
				wantCap = 1
			}
			r = c.ok(c.raw(legacy(1, 176, withResp(8))), "QUERY_DEVICE")
			if got := u32(r.resp, 108); got != wantCap {
				t.Errorf("QUERY_DEVICE atomic_cap %d, want %d", got, wantCap)
			}
			r = c.ok(c.raw(exQueryDeviceCmd(0, nil)), "EX_QUERY_DEVICE")
			if got := u32(r.resp, 108); got != wantCap {
				t.Errorf("EX_QUERY_DEVICE atomic_cap %d, want %d", got, wantCap)
			}

			c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
			buf := make([]byte, 4096)
			// IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, as rdma-core's
			// test_atomic registers.
			r = c.ok(c.raw(regMRCmd(addrOf(buf), uint64(len(buf)), 0, 1|8, 0, 0, 0, 0)), "REG_MR atomic")
			rec, ok := e.dev.MRs().Get(u32(r.resp, 4) >> 8)
			if !ok {
				t.Fatalf("MR %#x not in the device", u32(r.resp, 4))
			}
			if got := rec.Access&mr.AccessRemoteAtomic != 0; got != tc.on || rec.Access&(mr.AccessRemoteRead|mr.AccessRemoteWrite) != 0 {
				t.Errorf("MR rights %v (REMACCENABLED %v): remote atomic %v, want %v", rec.Access, rec.RemoteAccess, got, tc.on)
			}

			a := c.arena(g3Arena)
			c.ok(c.raw(regMRCmd(a.addr+g3CQ, 8*4096, 0, 1, 2, 8, 0, 0)), "REG_MR CQ")
			c.ok(c.raw(regMRCmd(a.addr+g3CQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ shadow")
			r = c.ok(c.raw(createCQCmd(1, 256, 0, -1, a.addr+g3CQ, a.addr+g3CQShadow)), "CREATE_CQ")
			cqh := u32(r.resp, 0)
			c.ok(c.raw(regMRCmd(a.addr+g3QP, 5*4096+64, 0, 1, 1, 0, 1, 4)), "REG_MR QP")
			r = c.ok(c.raw(createQPCmd(0x51, 0, cqh, cqh, 64, 1, 1, 1, 0, 2, a.addr+g3QP, 1)), "CREATE_QP")
			qph, qpn := u32(r.resp, 0), u32(r.resp, 4)
			m := newModify(qph, 1|1<<3|1<<4|1<<5) // STATE | ACCESS_FLAGS | PKEY_INDEX | PORT
			m[96], m[104] = 1, 1                  // INIT, port 1
			le.PutUint32(m[88:], 1|8)             // LOCAL_WRITE | REMOTE_ATOMIC
			c.ok(c.raw(m.legacy()), "MODIFY_QP INIT")
			q := e.dev.QPs().Get(qpn)
			if q == nil {
				t.Fatalf("QP %d not in the device", qpn)
			}
			if got := q.Attrs().RemoteAtomic; got != tc.on {
				t.Errorf("QP context REMOTE_ATOMIC_EN %v, want %v", got, tc.on)
			}
			// RTR with min_rnr_timer 12: GEN_3's irdma_modify_qp_roce keeps
			// it and irdma_query_qp reports it (ib_uverbs_query_qp_resp +115);
			// GEN_2's driver does not keep it.
			m = newModify(qph, 0x129181).dest(gid4(peerIP), 1, 1, 1)
			m[96], m[98], m[102], m[103] = 2, 3, 1, 12
			le.PutUint32(m[84:], 0x11)
			c.ok(c.raw(m.ex(0, 0)), "EX_MODIFY_QP RTR")
			wantRNR := uint8(0)
			if tc.on {
				wantRNR = 12
			}
			if r = c.ok(c.raw(queryQPCmd(qph, 1<<15)), "QUERY_QP"); r.resp[115] != wantRNR {
				t.Errorf("QUERY_QP min_rnr_timer %d, want %d", r.resp[115], wantRNR)
			}
		})
	}
}

package dataplane_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// Codes of the hardware contract, written by hand from the Linux driver
// (drivers/infiniband/hw/irdma) so that the device's own constants are
// checked rather than trusted: the CQE major of an error or flushed WQE
// (IRDMA_FLUSH_MAJOR_ERR, user.h), its minors (enum irdma_flush_opcode,
// user.h; irdma_ae_to_qp_err_code picks one per AE and
// irdma_flush_err_to_ib_wc_status in verbs.c turns it into the
// ib_wc_status) and the AEQE sources (IRDMA_AE_SOURCE_*, defs.h).
const (
	majorFlush = 1 // IRDMA_FLUSH_MAJOR_ERR

	flushGeneral   = 1  // FLUSH_GENERAL_ERR → IB_WC_WR_FLUSH_ERR
	flushProt      = 2  // FLUSH_PROT_ERR → IB_WC_LOC_PROT_ERR
	flushRemAccess = 3  // FLUSH_REM_ACCESS_ERR → IB_WC_REM_ACCESS_ERR
	flushLocQPOp   = 4  // FLUSH_LOC_QP_OP_ERR → IB_WC_LOC_QP_OP_ERR
	flushRemOp     = 5  // FLUSH_REM_OP_ERR → IB_WC_REM_OP_ERR
	flushLocLen    = 6  // FLUSH_LOC_LEN_ERR → IB_WC_LOC_LEN_ERR
	flushRetryExc  = 8  // FLUSH_RETRY_EXC_ERR → IB_WC_RETRY_EXC_ERR
	flushRemInvReq = 10 // FLUSH_REM_INV_REQ_ERR → IB_WC_REM_INV_REQ_ERR

	aeSourceRQ    = 0x1 // IRDMA_AE_SOURCE_RQ
	aeSourceSQ    = 0x5 // IRDMA_AE_SOURCE_SQ
	aeSourceInRR  = 0x9 // IRDMA_AE_SOURCE_IN_RR_WR
	aeSourceOutRR = 0xd // IRDMA_AE_SOURCE_OUT_RR
)

// aes drains node n's AEQ.
func (n *node) aes() []cq.AEQE {
	var out []cq.AEQE
	for {
		q0, q1, ok := n.env.PollAEQ()
		if !ok {
			return out
		}
		out = append(out, cq.DecodeAEQE(q0, q1))
	}
}

// wantAE checks that n raised exactly one AE, with code and source, for
// QP id.
func wantAE(t *testing.T, n *node, id uint32, code uint16, src uint8) {
	t.Helper()
	got := n.aes()
	if len(got) != 1 || got[0].ID != id || got[0].Code != code || got[0].Source != src {
		t.Fatalf("node %d AEs %+v, want one %#x from source %#x for QP %d", n.idx, got, code, src, id)
	}
}

func (e *ep) state() qp.State { return e.n.env.Dev.QPs().Get(e.q.Spec.ID).State() }

// driverFlush does what irdma does after a QP AE (hw.c irdma_process_aeq,
// verbs.c irdma_modify_qp_roce): MODIFY_QP to ERROR, then FLUSH_WQES of
// both queues (hw.c irdma_flush_wqes): FLUSH_GENERAL_ERR, except the AE's
// flush code for the queue the AE named. The caller passes both codes,
// written by hand.
func (e *ep) driverFlush(t *testing.T, sqMinor, rqMinor uint16) devtest.Completion {
	t.Helper()
	e.n.env.MustOK(e.n.env.ModifyQP(e.q, devtest.StateError), "MODIFY_QP ERROR")
	return e.n.env.FlushWQEs(e.q, true, true, sqMinor, rqMinor)
}

// TestRetryExceeded: the link goes down; the requester retries
// REXMIT_THRESH times, then its WQE completes with RETRY_EXC_ERR, AE
// LLP_TOO_MANY_RETRIES goes up, the QP is in ERROR, and the WQE behind it
// is flushed. The responder saw nothing; its receive WQE is flushed when
// its QP is taken down.
func TestRetryExceeded(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	a, b := w.connectRC(func(s *devtest.QPSpec) { s.RetryCnt = 3 }, nil)
	src := a.n.newMR(4096, devtest.RightsAll, a.pd)
	dst := b.n.newMR(4096, devtest.RightsAll, b.pd)
	b.recv(uk.RecvWR{WrID: 50, SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag}}})
	w.pair.SetUp(false)
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 100, LKey: src.stag}}},
		uk.SendWR{WrID: 2, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 100, LKey: src.stag}},
			RemoteAddr: dst.va, RKey: dst.stag})
	wcs := a.waitSend(2)
	if wcs[0].WrID != 1 || wcs[0].Status != uk.WCRetryExcErr || wcs[1].WrID != 2 || wcs[1].Status != uk.WCWRFlushErr {
		t.Fatalf("completions %+v", wcs)
	}
	if s, _ := a.n.eng.QPStats(a.q.Spec.ID); s.Timeouts != 4 || s.Retransmits == 0 {
		t.Fatalf("timeouts %d (want REXMIT_THRESH+1 = 4), retransmits %d", s.Timeouts, s.Retransmits)
	}
	wantAE(t, a.n, a.q.Spec.ID, 0x050a /* LLP_TOO_MANY_RETRIES */, aeSourceSQ)
	if a.state() != qp.StateError || b.state() != qp.StateRTS {
		t.Fatalf("states %v %v", a.state(), b.state())
	}
	// The driver's flush finds the WRITE the device had not completed; its
	// flush CQE is consumed by software, which already reported it.
	a.n.env.MustOK(a.driverFlush(t, flushRetryExc, flushGeneral), "FLUSH_WQES")
	if got := poll(t, a.us, nil); len(got) != 0 {
		t.Fatalf("after flush: %+v", got)
	}
	w.pair.SetUp(true)
	b.n.env.MustOK(b.driverFlush(t, flushGeneral, flushGeneral), "FLUSH_WQES B")
	rc := poll(t, b.ur, nil)
	if len(rc) != 1 || rc[0].WrID != 50 || rc[0].Status != uk.WCWRFlushErr {
		t.Fatalf("B receive after flush: %+v", rc)
	}
	if len(b.n.aes()) != 0 {
		t.Fatalf("B raised an AE")
	}
}

// TestRNR: a SEND finds no receive WQE: the responder NAKs RNR with its
// timer code; with RNRNAK_THRESH 2 the requester gives up after three
// NAKs (RNR_RETRY_EXC_ERR, AE LLP_TOO_MANY_RNRS); with 7 (infinite) it
// keeps waiting until a receive is posted, then both sides succeed.
func TestRNR(t *testing.T) {
	t.Run("exhausted", func(t *testing.T) {
		w := newWorld(t, opts{stepped: true})
		a, b := w.connectRC(func(s *devtest.QPSpec) { s.RNRRetry = 2 }, nil)
		src := a.n.newMR(4096, devtest.RightsAll, a.pd)
		a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 2000, LKey: src.stag}}})
		wc := a.waitSend(1)[0]
		if wc.Status != uk.WCRNRRetryExcErr {
			t.Fatalf("wc %+v", wc)
		}
		sb, _ := b.n.eng.QPStats(b.q.Spec.ID)
		sa, _ := a.n.eng.QPStats(a.q.Spec.ID)
		if sb.NAKsSent[qp.NAKRNR] != 3 || sa.NAKsRcvd[qp.NAKRNR] != 3 || sa.RNRWaits != 2 {
			t.Fatalf("RNR NAKs sent %d received %d waits %d", sb.NAKsSent[qp.NAKRNR], sa.NAKsRcvd[qp.NAKRNR], sa.RNRWaits)
		}
		// Two waits of the responder's timer code 12 (640 µs).
		if now := w.man.Now(); now < 1280e3 {
			t.Fatalf("gave up after %v", now)
		}
		wantAE(t, a.n, a.q.Spec.ID, 0x050f /* LLP_TOO_MANY_RNRS */, aeSourceSQ)
		if a.state() != qp.StateError || b.state() != qp.StateRTS || len(b.n.aes()) != 0 {
			t.Fatalf("states %v %v", a.state(), b.state())
		}
		if got := poll(t, b.ur, nil); len(got) != 0 {
			t.Fatalf("responder completions %+v", got)
		}
	})
	t.Run("infinite", func(t *testing.T) {
		w := newWorld(t, opts{stepped: true})
		a, b := w.connectRC(nil, nil) // RNRNAK_THRESH 7
		src := a.n.newMR(4096, devtest.RightsAll, a.pd)
		dst := b.n.newMR(4096, devtest.RightsAll, b.pd)
		pattern(src.bytes(), 3)
		a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 3000, LKey: src.stag}}})
		w.until("ten RNR NAKs", func() bool {
			s, _ := b.n.eng.QPStats(b.q.Spec.ID)
			return s.NAKsSent[qp.NAKRNR] >= 10
		})
		b.recv(uk.RecvWR{WrID: 9, SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag}}})
		wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, 3000, "SEND after RNR")
		wantWC(t, b.waitRecv(1)[0], uk.WCSuccess, uk.WCRecv, 3000, "recv after RNR")
		mustEqual(t, dst.bytes()[:3000], src.bytes()[:3000], "payload after RNR")
	})
}

// TestRemoteErrors: the responder finds a request it cannot execute,
// NAKs it, raises its AE and goes to ERROR; the requester's WQE completes
// with the matching remote error and its AE.
func TestRemoteErrors(t *testing.T) {
	cases := []struct {
		name string
		// run posts the failing request; it may post a receive on b.
		run func(a, b *ep, src, dst *buf)
		// requester side
		aStatus uk.WCStatus
		aAE     uint16
		aMinor  uint16 // irdma_ae_to_qp_err_code(aAE), by hand
		// responder side
		bAE     uint16
		bMinor  uint16 // irdma_ae_to_qp_err_code(bAE), by hand
		bSrc    uint8
		bStatus uk.WCStatus // the receive WQE's status, 0 when none completes
		nak     qp.NAKKind
	}{
		{
			name: "remote access (bad R_Key)",
			run: func(a, b *ep, src, dst *buf) {
				a.post(uk.SendWR{WrID: 1, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: src.va, Length: 64, LKey: src.stag}}, RemoteAddr: dst.va, RKey: dst.stag ^ 0x01})
			},
			aStatus: uk.WCRemAccessErr, aAE: 0x020d /* IB_REMOTE_ACCESS_ERROR */, aMinor: flushRemAccess,
			bAE: 0x0106 /* AMP_BAD_STAG_KEY */, bMinor: flushProt, bSrc: aeSourceInRR, nak: qp.NAKRemAccess,
		},
		{
			name: "remote access (READ beyond the MR)",
			run: func(a, b *ep, src, dst *buf) {
				a.post(uk.SendWR{WrID: 1, Opcode: uk.WRRDMARead, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: src.va, Length: 64, LKey: src.stag}}, RemoteAddr: dst.va + 4090, RKey: dst.stag})
			},
			aStatus: uk.WCRemAccessErr, aAE: 0x020d /* IB_REMOTE_ACCESS_ERROR */, aMinor: flushRemAccess,
			bAE: 0x0108 /* AMP_BOUNDS_VIOLATION */, bMinor: flushProt, bSrc: aeSourceInRR, nak: qp.NAKRemAccess,
		},
		{
			name: "invalid request (message longer than the receive buffer)",
			run: func(a, b *ep, src, dst *buf) {
				b.recv(uk.RecvWR{WrID: 7, SGList: []uk.SGE{{Addr: dst.va, Length: 100, LKey: dst.stag}}})
				a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: src.va, Length: 2000, LKey: src.stag}}})
			},
			aStatus: uk.WCRemInvReqErr, aAE: 0x0208 /* IB_INVALID_REQUEST */, aMinor: flushRemInvReq,
			bAE: 0x0303 /* DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER */, bMinor: flushLocLen,
			bSrc: aeSourceRQ, bStatus: uk.WCLocLenErr, nak: qp.NAKInvReq,
		},
		{
			name: "remote operational (receive SGE with a bad L_Key)",
			run: func(a, b *ep, src, dst *buf) {
				b.recv(uk.RecvWR{WrID: 7, SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag + 0x100}}})
				a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: src.va, Length: 64, LKey: src.stag}}})
			},
			aStatus: uk.WCRemOpErr, aAE: 0x020e /* IB_REMOTE_OP_ERROR */, aMinor: flushRemOp,
			bAE: 0x0102 /* AMP_UNALLOCATED_STAG */, bMinor: flushProt, bSrc: aeSourceRQ, bStatus: uk.WCLocProtErr, nak: qp.NAKRemOp,
		},
		{
			name: "invalid request (WRITE to a QP without remote write)",
			run: func(a, b *ep, src, dst *buf) {
				b.q.Spec.WrOK = false
				b.n.env.MustOK(b.n.env.ModifyQP(b.q, devtest.StateRTS), "MODIFY_QP RTS")
				a.post(uk.SendWR{WrID: 1, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: src.va, Length: 64, LKey: src.stag}}, RemoteAddr: dst.va, RKey: dst.stag})
			},
			aStatus: uk.WCRemInvReqErr, aAE: 0x0208 /* IB_INVALID_REQUEST */, aMinor: flushRemInvReq,
			bAE: 0x0223 /* INVALID_REQUEST: not among irdma_ae_to_qp_err_code's cases */, bMinor: flushGeneral,
			bSrc: aeSourceRQ, nak: qp.NAKInvReq,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, opts{stepped: true})
			a, b := w.connectRC(nil, nil)
			src := a.n.newMR(4096, devtest.RightsAll, a.pd)
			dst := b.n.newMR(4096, devtest.RightsAll, b.pd)
			c.run(a, b, src, dst)
			wc := a.waitSend(1)[0]
			if wc.Status != c.aStatus || wc.WrID != 1 || wc.VendorErr != majorFlush<<16|uint32(c.aMinor) {
				t.Fatalf("requester wc %+v, want status %v, vendor error %#x", wc, c.aStatus, majorFlush<<16|uint32(c.aMinor))
			}
			wantAE(t, a.n, a.q.Spec.ID, c.aAE, aeSourceSQ)
			wantAE(t, b.n, b.q.Spec.ID, c.bAE, c.bSrc)
			if a.state() != qp.StateError || b.state() != qp.StateError {
				t.Fatalf("states %v %v", a.state(), b.state())
			}
			if c.bStatus != 0 {
				rc := b.waitRecv(1)[0]
				if rc.Status != c.bStatus || rc.WrID != 7 || rc.VendorErr != majorFlush<<16|uint32(c.bMinor) {
					t.Fatalf("responder wc %+v, want %v, vendor error %#x", rc, c.bStatus, majorFlush<<16|uint32(c.bMinor))
				}
			}
			if s, _ := b.n.eng.QPStats(b.q.Spec.ID); s.NAKsSent[c.nak] != 1 {
				t.Fatalf("NAKs sent %v", s.NAKsSent)
			}
			// The driver's flush after the AE is accepted on both sides.
			a.driverFlush(t, c.aMinor, flushGeneral)
			b.driverFlush(t, flushGeneral, c.bMinor)
			if got := poll(t, a.us, nil); len(got) != 0 {
				t.Fatalf("A after flush %+v", got)
			}
		})
	}
}

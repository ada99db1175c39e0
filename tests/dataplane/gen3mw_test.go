package dataplane_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// TestGEN3TypeTwoWindows: on the GEN_3 profile (an E2100, whose
// irdma_query_device reports IB_DEVICE_MEM_WINDOW_TYPE_2B) a type-2 window
// is bound through the SQ (BIND_MW with MEMWINDOWTYPE 0, as libirdma 65's
// irdma_upost_send posts IBV_WR_BIND_MW for IBV_MW_TYPE_2) to an MR with
// the bind right; the peer's WRITE through the window's R_Key lands inside
// the window and nowhere else; remote (SEND_WITH_INV) and local
// (LOCAL_INV) invalidation end it; a bad bind completes with
// FLUSH_MW_BIND_ERR (hw.c irdma_ae_to_qp_err_code) and raises its AE. Every
// CQE carries the device clock: the manual clock's nanoseconds at the
// moment the CQE is written (1 GHz, 32 bits).
func TestGEN3TypeTwoWindows(t *testing.T) {
	const (
		winOff  = 4096 // the window: parent bytes [4096, 8192)
		winLen  = 4096
		mwIdx   = 201
		mwKey   = 0x33
		ahead   = 1_000_003 // ns the clock moves before the bind
		aeMWVld = 0x0114    // IRDMA_AE_AMP_MWBIND_VALID_STAG
		aeMWBds = 0x0119    // IRDMA_AE_AMP_MWBIND_INVALID_BOUNDS
		aeMWDis = 0x011b    // IRDMA_AE_AMP_MWBIND_BIND_DISABLED
		aeBound = 0x0108    // IRDMA_AE_AMP_BOUNDS_VIOLATION
		aeInv   = 0x0103    // IRDMA_AE_AMP_INVALID_STAG
	)
	mwSTag := uint32(mwIdx<<8 | mwKey)
	tests := []struct {
		name      string
		noBind    bool   // the parent MR lacks IBV_ACCESS_MW_BIND
		bindOff   uint64 // window start in the parent, if not winOff
		bindLen   uint64 // window length, if not winLen
		rebind    bool   // bind the bound window again
		bindAE    uint16 // the bind fails with this AE (FLUSH_MW_BIND_ERR)
		remoteInv bool   // the peer's SEND_WITH_INV of the window first
		localInv  bool   // LOCAL_INV of the window first
		wrOff     uint64 // the peer's WRITE: offset in the parent, length
		wrLen     uint32
		wrStatus  uk.WCStatus
		wrAE      uint16 // the AE at the window's side for a refused WRITE
	}{
		{name: "write inside the window", wrOff: winOff + 50, wrLen: 100, wrStatus: uk.WCSuccess},
		{name: "write of the window's last byte", wrOff: winOff + winLen - 1, wrLen: 1, wrStatus: uk.WCSuccess},
		{name: "write before the window", wrOff: winOff - 1, wrLen: 2, wrStatus: uk.WCRemAccessErr, wrAE: aeBound},
		{name: "write past the window's end", wrOff: winOff + winLen - 50, wrLen: 100, wrStatus: uk.WCRemAccessErr, wrAE: aeBound},
		{name: "remote invalidate, then write", remoteInv: true, wrOff: winOff, wrLen: 8, wrStatus: uk.WCRemAccessErr, wrAE: aeInv},
		{name: "local invalidate, then write", localInv: true, wrOff: winOff, wrLen: 8, wrStatus: uk.WCRemAccessErr, wrAE: aeInv},
		{name: "bind to an MR without the bind right", noBind: true, bindAE: aeMWDis},
		{name: "bind past the MR's end", bindOff: 12288, bindLen: 8192, bindAE: aeMWBds},
		{name: "bind of a bound type-2 window", rebind: true, bindAE: aeMWVld},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, opts{stepped: true, gen3: true})
			a, b := w.connectRC(nil, nil)
			rights := uint8(devtest.RightsAll | devtest.RightsBind)
			if tc.noBind {
				rights = devtest.RightsAll
			}
			parent := a.n.newMR(16384, rights, a.pd)
			a.n.env.AllocSTag(mwIdx, a.pd, 0, false, 0, 0) // ALLOC_STAG, MW form, MWTYPE 0: type 2
			off, ln := uint64(winOff), uint64(winLen)
			if tc.bindLen != 0 {
				off, ln = tc.bindOff, tc.bindLen
			}
			bind := func(wrID uint64, key uint32) uk.CQPollInfo {
				t.Helper()
				if err := a.uq.MWBind(&uk.PostSQInfo{WrID: wrID, Signaled: true, Bind: uk.BindWindow{MRSTag: parent.stag, MWSTag: key,
					VA: parent.va + off, Len: ln, VABased: true, EnaReads: true, EnaWrites: true}}); err != nil {
					t.Fatal(err)
				}
				if a.uq.SQDoorbell() {
					a.n.env.Doorbell(a.q)
				}
				return a.pollInfo("BIND_MW")
			}
			w.man.Advance(ahead)
			info := bind(1, mwSTag)
			if info.StatRaw != uint32(w.man.Now().Nanoseconds()) || w.man.Now() < ahead {
				t.Errorf("BIND_MW CQE timestamp %d, the clock at its write %d ns", info.StatRaw, w.man.Now().Nanoseconds())
			}
			if tc.rebind && !info.Error {
				info = bind(2, mwSTag+1)
			}
			if tc.bindAE != 0 {
				if !info.Error || info.OpType != uint8(qp.OpBindMW) || info.MajorErr != 1 || info.MinorErr != uint16(uk.FlushMWBindErr) {
					t.Fatalf("bind completion %+v, want an error with FLUSH_MW_BIND_ERR", info)
				}
				wantAE(t, a.n, a.q.Spec.ID, tc.bindAE, aeSourceSQ)
				return
			}
			if info.Error || info.OpType != uint8(qp.OpBindMW) || info.WrID != 1 {
				t.Fatalf("BIND_MW completion %+v", info)
			}

			src := b.n.newMR(8192, devtest.RightsAll, b.pd)
			pattern(src.bytes(), 9)
			if tc.remoteInv {
				a.recv(uk.RecvWR{WrID: 10})
				b.post(uk.SendWR{WrID: 10, Opcode: uk.WRSendWithInv, Flags: uk.SendSignaled, InvalidateRKey: mwSTag})
				wantWC(t, b.waitSend(1)[0], uk.WCSuccess, uk.WCSend, 0, "SEND_WITH_INV")
				rc := a.waitRecv(1)[0]
				if rc.Status != uk.WCSuccess || rc.Flags&uk.WCWithInvalidate == 0 || rc.InvRKey != mwSTag {
					t.Fatalf("receive of SEND_WITH_INV: %+v, want the window's R_Key %#x invalidated", rc, mwSTag)
				}
			}
			if tc.localInv {
				a.post(uk.SendWR{WrID: 11, Opcode: uk.WRLocalInv, Flags: uk.SendSignaled, InvalidateRKey: mwSTag})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCLocalInv, 0, "LOCAL_INV of the window")
			}
			b.post(uk.SendWR{WrID: 12, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
				SGList: []uk.SGE{{Addr: src.va, Length: tc.wrLen, LKey: src.stag}}, RemoteAddr: parent.va + tc.wrOff, RKey: mwSTag})
			wc := b.waitSend(1)[0]
			if wc.Status != tc.wrStatus {
				t.Fatalf("WRITE through the window: %+v, want status %v", wc, tc.wrStatus)
			}
			if tc.wrStatus == uk.WCSuccess {
				mustEqual(t, parent.bytes()[tc.wrOff:tc.wrOff+uint64(tc.wrLen)], src.bytes()[:tc.wrLen], "window contents")
			} else {
				mustEqual(t, parent.bytes(), make([]byte, len(parent.bytes())), "the parent MR after a refused WRITE")
				wantAE(t, a.n, a.q.Spec.ID, tc.wrAE, aeSourceInRR)
			}
		})
	}
}

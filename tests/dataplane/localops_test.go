package dataplane_test

import (
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// pollInfo returns the next completion as the uk layer reports it, before
// the kernel's opcode mapping (which has no entry for NOP or BIND_MW).
func (e *ep) pollInfo(what string) uk.CQPollInfo {
	e.n.w.t.Helper()
	var info uk.CQPollInfo
	e.n.w.until(what, func() bool {
		err := e.us.PollCmpl(&info)
		if errors.Is(err, uk.ErrCQEmpty) {
			return false
		}
		if err != nil {
			e.n.w.t.Fatalf("%s: PollCmpl: %v", what, err)
		}
		return true
	})
	return info
}

// TestLocalOperations: FAST_REG makes an MR valid for a peer's WRITE,
// BIND_MW binds a type-2 window the peer writes through, READ with local
// invalidate invalidates its sink, a signaled NOP completes, LOCAL_INV
// invalidates the fast-registered MR, and the peer's next WRITE to it
// fails with a remote access error (AE INVALID_STAG at the responder).
func TestLocalOperations(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	a, b := w.connectRC(nil, nil)
	an := a.n
	page := an.env.Alloc(8192, "fastreg")
	const frIdx, frKey = 200, 0x5a
	an.env.AllocSTag(frIdx, a.pd, 8192, true, 0, 0)
	frSTag := uint32(frIdx<<8 | frKey)
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRRegMR, Flags: uk.SendSignaled, RegMR: uk.RegMRWR{
		Key: frSTag, Access: uk.AccessLocalWrite | uk.AccessRemoteWrite | uk.AccessRemoteRead, PageSize: 4096,
		IOVA: uint64(page.IOVA()), Length: 4096, PBLAddr: uint64(page.IOVA()), NPages: 1}})
	wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRegMR, 0, "FAST_REG")
	if r, ok := an.env.Dev.MRs().Get(frIdx); !ok || r.State != mr.StateValid || r.STag != frSTag {
		t.Fatalf("fast-registered MR %+v", r)
	}

	src := b.n.newMR(8192, devtest.RightsAll, b.pd)
	pattern(src.bytes(), 5)
	b.post(uk.SendWR{WrID: 2, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 4096, LKey: src.stag}},
		RemoteAddr: uint64(page.IOVA()), RKey: frSTag})
	wantWC(t, b.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, 4096, "WRITE to the fast-registered MR")
	mustEqual(t, page.Bytes()[:4096], src.bytes()[:4096], "fast-registered MR contents")

	// BIND_MW (user-space verb, posted through the uk builder).
	parent := an.newMR(16384, devtest.RightsAll|devtest.RightsBind, a.pd)
	const mwIdx, mwKey = 201, 0x33
	an.env.AllocSTag(mwIdx, a.pd, 0, false, 0, 0)
	mwSTag := uint32(mwIdx<<8 | mwKey)
	if err := a.uq.MWBind(&uk.PostSQInfo{WrID: 3, Signaled: true, Bind: uk.BindWindow{MRSTag: parent.stag, MWSTag: mwSTag,
		VA: parent.va + 4096, Len: 4096, VABased: true, EnaReads: true, EnaWrites: true}}); err != nil {
		t.Fatal(err)
	}
	if a.uq.SQDoorbell() {
		an.env.Doorbell(a.q)
	}
	if info := a.pollInfo("BIND_MW"); info.Error || info.OpType != uint8(qp.OpBindMW) || info.WrID != 3 {
		t.Fatalf("BIND_MW completion %+v", info)
	}
	b.post(uk.SendWR{WrID: 4, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 100, LKey: src.stag}},
		RemoteAddr: parent.va + 4096 + 50, RKey: mwSTag})
	wantWC(t, b.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, 100, "WRITE through the window")
	mustEqual(t, parent.bytes()[4096+50:4096+150], src.bytes()[:100], "window contents")

	// READ with local invalidate: the sink STag goes invalid once the
	// data is in place.
	sinkReg := an.env.Alloc(4096, "sink")
	const skIdx, skKey = 202, 0x11
	an.env.AllocSTag(skIdx, a.pd, 4096, true, 0, 0)
	sinkSTag := uint32(skIdx<<8 | skKey)
	a.post(uk.SendWR{WrID: 5, Opcode: uk.WRRegMR, Flags: 0, RegMR: uk.RegMRWR{Key: sinkSTag,
		Access: uk.AccessLocalWrite, PageSize: 4096, IOVA: uint64(sinkReg.IOVA()), Length: 4096, PBLAddr: uint64(sinkReg.IOVA()), NPages: 1}},
		uk.SendWR{WrID: 6, Opcode: uk.WRRDMAReadWithInv, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: uint64(sinkReg.IOVA()),
			Length: 512, LKey: sinkSTag}}, RemoteAddr: src.va, RKey: src.stag})
	wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMARead, 512, "READ with invalidate")
	mustEqual(t, sinkReg.Bytes()[:512], src.bytes()[:512], "READ with invalidate data")
	if r, _ := an.env.Dev.MRs().Get(skIdx); r.State != mr.StateInvalid {
		t.Fatalf("sink after READ_INV: %v", r.State)
	}

	// A signaled NOP completes as a NOP.
	if err := a.uq.NOP(7, true); err != nil {
		t.Fatal(err)
	}
	a.n.env.Doorbell(a.q)
	if info := a.pollInfo("NOP"); info.Error || info.OpType != uint8(qp.OpNOP) || info.WrID != 7 {
		t.Fatalf("NOP completion %+v", info)
	}

	// LOCAL_INV, then the peer's WRITE to the MR fails.
	a.post(uk.SendWR{WrID: 8, Opcode: uk.WRLocalInv, Flags: uk.SendSignaled, InvalidateRKey: frSTag})
	wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCLocalInv, 0, "LOCAL_INV")
	b.post(uk.SendWR{WrID: 9, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 64, LKey: src.stag}},
		RemoteAddr: uint64(page.IOVA()), RKey: frSTag})
	if wc := b.waitSend(1)[0]; wc.Status != uk.WCRemAccessErr {
		t.Fatalf("WRITE after LOCAL_INV: %+v", wc)
	}
	wantAE(t, an, a.q.Spec.ID, 0x0103 /* AMP_INVALID_STAG */, aeSourceInRR)
}

package dataplane_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

func TestSmokeSend(t *testing.T) {
	for _, stepped := range []bool{false, true} {
		w := newWorld(t, opts{stepped: stepped})
		a, b := w.connectRC(nil, nil)
		src := a.n.newMR(4096, devtest.RightsAll, a.pd)
		dst := b.n.newMR(4096, devtest.RightsAll, b.pd)
		pattern(src.bytes()[:3000], 1)
		b.recv(uk.RecvWR{WrID: 7, SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag}}})
		a.post(uk.SendWR{WrID: 9, Opcode: uk.WRSend, Flags: uk.SendSignaled,
			SGList: []uk.SGE{{Addr: src.va, Length: 3000, LKey: src.stag}}})
		sc := a.waitSend(1)
		rc := b.waitRecv(1)
		wantWC(t, sc[0], uk.WCSuccess, uk.WCSend, 3000, "send")
		wantWC(t, rc[0], uk.WCSuccess, uk.WCRecv, 3000, "recv")
		if sc[0].WrID != 9 || rc[0].WrID != 7 {
			t.Fatalf("wr ids %d %d", sc[0].WrID, rc[0].WrID)
		}
		mustEqual(t, dst.bytes()[:3000], src.bytes()[:3000], "payload")
		t.Logf("stepped=%v A %+v", stepped, a.n.eng.Stats().Port)
	}
}

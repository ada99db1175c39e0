package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestWireICRC: frames that cross a link carry an ICRC and the receiver
// checks it — the in-device path skips both (TestLoopback), the wire path
// must not. RC WRITEs between two devices over a link that corrupts a byte
// of the RoCEv2 packet now and then (CorruptRoCE: a byte the ICRC covers
// and does not mask): every frame the capture saw intact has a correct
// ICRC, every corrupted one is dropped by the gate and counted as an ICRC
// failure, and go-back-N still delivers the data byte for byte.
func TestWireICRC(t *testing.T) {
	f := link.Faults{Corrupt: 0.03, CorruptScope: link.CorruptRoCE, Seed: 20261202}
	w := newWorld(t, opts{stepped: true, faults: f, capture: true})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	src := a.n.newMR(256<<10, devtest.RightsAll, a.pd)
	dst := b.n.newMR(256<<10, devtest.RightsAll, b.pd)
	pattern(src.bytes(), 3)
	for i := range 4 {
		off := uint64(i) * 64 << 10
		a.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
			SGList: []uk.SGE{{Addr: src.va + off, Length: 64 << 10, LKey: src.stag}}, RemoteAddr: dst.va + off, RKey: dst.stag})
		wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, 64<<10, fmt.Sprintf("WRITE %d", i))
	}
	w.quiesce("the WRITEs")
	mustEqual(t, dst.bytes(), src.bytes(), "the WRITEs over a corrupting link")

	var corrupted, failed, dropped, verified, inDevice, rx uint64
	for _, n := range w.nodes {
		s := n.eng.Stats()
		corrupted += s.Link.Faults.Corrupted
		failed += s.Gate.ICRCFailed
		dropped += s.Gate.Drops[qp.DropICRC]
		verified += s.Gate.ICRCVerified
		inDevice += s.Gate.ICRCInDevice
		rx += s.Link.RxFrames
	}
	if corrupted == 0 {
		t.Fatalf("the link corrupted nothing: the test proved nothing")
	}
	if failed != corrupted || dropped != corrupted {
		t.Errorf("%d frames corrupted on the link; the gates counted %d ICRC failures and %d ICRC drops", corrupted, failed, dropped)
	}
	if verified+failed != rx || inDevice != 0 {
		t.Errorf("received %d frames from the link: ICRC verified %d, failed %d, in-device %d; want every one checked",
			rx, verified, failed, inDevice)
	}

	if err := w.pair.Close(); err != nil {
		t.Fatal(err)
	}
	frames := readPcap(t, w.pcap)
	var fr wire.Frame
	var bad uint64
	for i, b := range frames {
		if err := wire.ParseFrame(b, &fr); err != nil {
			t.Fatalf("captured frame %d: %v", i, err)
		}
		if fr.VerifyICRC() != nil {
			bad++
		}
	}
	if uint64(len(frames)) != rx || bad != corrupted {
		t.Errorf("capture: %d frames, %d with a bad ICRC; want the %d delivered, %d corrupted", len(frames), bad, rx, corrupted)
	}
}

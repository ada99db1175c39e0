package dataplane_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// parked waits until every worker of n's engine sleeps.
func (n *node) parked(what string) {
	n.w.until(what, func() bool { return n.eng.Stats().Sched.Pollers == 0 })
}

// TestRunToCompletion: a packet for a QP whose worker is parked is run by
// the goroutine that delivered it (the pair's delivery goroutine here, the
// UDP link's receive goroutine in the daemon), and a post notification
// (Engine.Notify) for a QP whose worker is parked is run by the notifier;
// every message arrives byte for byte, in order, with its completions;
// with Config.HandOff nothing runs outside the workers. A notification
// rings only the QP with a WQE at its SQ head: a connected QP with
// nothing posted is skipped.
//
// Whether a given message runs inline depends on the worker being asleep
// when it comes (a worker woken by a stale kick takes it instead), so the
// test asks that some of the messages do, not each.
func TestRunToCompletion(t *testing.T) {
	for _, handOff := range []bool{false, true} {
		w := newWorld(t, opts{handOff: handOff})
		a, b := w.connectRC(nil, nil)
		idle, _ := w.connectRC(nil, nil)
		src := a.n.newMR(1<<16, devtest.RightsAll, a.pd)
		dst := b.n.newMR(1<<16, devtest.RightsAll, b.pd)
		const msgs = 8
		for i := range msgs {
			pattern(src.bytes()[i*4096:(i+1)*4096], i+1)
			b.recv(uk.RecvWR{WrID: uint64(100 + i), SGList: []uk.SGE{{Addr: dst.va + uint64(i*4096), Length: 4096, LKey: dst.stag}}})
		}
		rx0 := b.n.eng.Stats().Sched
		for i := range msgs {
			b.n.parked("the receiver's workers park")
			a.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRSend, Flags: uk.SendSignaled,
				SGList: []uk.SGE{{Addr: src.va + uint64(i*4096), Length: 3000 + uint32(i), LKey: src.stag}}})
			sc := a.waitSend(1)
			rc := b.waitRecv(1)
			wantWC(t, sc[0], uk.WCSuccess, uk.WCSend, 3000+uint32(i), "send")
			wantWC(t, rc[0], uk.WCSuccess, uk.WCRecv, 3000+uint32(i), "recv")
			if sc[0].WrID != uint64(i) || rc[0].WrID != uint64(100+i) {
				t.Fatalf("message %d: wr ids %d %d", i, sc[0].WrID, rc[0].WrID)
			}
		}
		for i := range msgs {
			n := 3000 + i
			mustEqual(t, dst.bytes()[i*4096:i*4096+n], src.bytes()[i*4096:i*4096+n], "payload")
		}
		rx1 := b.n.eng.Stats().Sched
		if inline := rx1.Inline - rx0.Inline; handOff && inline != 0 || !handOff && inline == 0 {
			t.Fatalf("handOff=%v: %d of %d messages' QP runs on the delivering goroutine", handOff, inline, msgs)
		}

		// Post notifications instead of WQEALLOC: the posted QP is run,
		// the idle one skipped.
		tx0 := a.n.eng.Stats().Sched
		for i := range msgs {
			a.n.parked("the sender's workers park")
			if _, err := a.uq.PostSend([]uk.SendWR{{WrID: uint64(50 + i), Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
				SGList:     []uk.SGE{{Addr: src.va + uint64(i*64), Length: 64, LKey: src.stag}},
				RemoteAddr: dst.va + 40000 + uint64(i*64), RKey: dst.stag}}); err != nil {
				t.Fatal(err)
			}
			a.n.eng.Notify(idle.q.Spec.ID)
			a.n.eng.Notify(a.q.Spec.ID)
			sc := a.waitSend(1)
			wantWC(t, sc[0], uk.WCSuccess, uk.WCRDMAWrite, 64, "notified write")
			if sc[0].WrID != uint64(50+i) {
				t.Fatalf("notified write %d: wr id %d", i, sc[0].WrID)
			}
		}
		mustEqual(t, dst.bytes()[40000:40000+msgs*64], src.bytes()[:msgs*64], "notified writes' payload")
		tx1 := a.n.eng.Stats().Sched
		if n := tx1.NotifySkipped - tx0.NotifySkipped; n != msgs {
			t.Fatalf("notifications skipped %d QPs, want %d (the idle one each time)", n, msgs)
		}
		if inline := tx1.Inline - tx0.Inline; handOff && inline != 0 || !handOff && inline == 0 {
			t.Fatalf("handOff=%v: %d QP runs by the notifier", handOff, inline)
		}
	}
}

package dataplane_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// waitWall polls c until n completions arrived (wall-clock worlds, where
// the engines run on their own goroutines). It may run on any goroutine:
// a poll error is reported with Errorf and ends the wait.
func waitWall(t *testing.T, c *uk.CQ, n int, what string) []uk.WorkCompletion {
	var got []uk.WorkCompletion
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n {
		var err error
		if got, err = pollCQ(c, got); err != nil {
			t.Errorf("%s: PollCmpl after %d of %d completions: %v", what, len(got), n, err)
			return got
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d of %d completions", what, len(got), n)
			return got
		}
		time.Sleep(10 * time.Microsecond)
	}
	return got
}

// TestConcurrentQPs runs eight RC QP pairs at once on engines with two
// worker goroutines each and the wall clock, over a link that loses and
// reorders a little, every pair driven by its own goroutines; under -race
// this checks the claim, the ready queues and the inboxes.
func TestConcurrentQPs(t *testing.T) {
	w := newWorld(t, opts{workers: 2, faults: link.Faults{Loss: 0.01, Reorder: 0.02, Seed: 9},
		tun: qp.Tunables{RTO: 5 * time.Millisecond, InfiniteRetry7: true}})
	const pairs, ops = 8, 150
	type pr struct {
		a, b     *ep
		src, dst *buf
	}
	var ps []pr
	for range pairs {
		a, b := w.connectRC(withMTU(1024), withMTU(1024))
		ps = append(ps, pr{a, b, a.n.newMR(64<<10, devtest.RightsAll, a.pd), b.n.newMR(64<<10, devtest.RightsAll, b.pd)})
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pattern(p.src.bytes(), i)
			for j := range ops {
				off := uint64(j%8) * 8192
				size := uint32((j*977 + i*131) % 8192)
				p.b.recv(uk.RecvWR{WrID: uint64(j), SGList: []uk.SGE{{Addr: p.dst.va + off, Length: 8192, LKey: p.dst.stag}}})
				p.a.post(uk.SendWR{WrID: uint64(j), Opcode: uk.WRSend, Flags: uk.SendSignaled,
					SGList: []uk.SGE{{Addr: p.src.va + off, Length: size, LKey: p.src.stag}}})
				sc := waitWall(t, p.a.us, 1, fmt.Sprint("pair ", i, " send ", j))
				rc := waitWall(t, p.b.ur, 1, fmt.Sprint("pair ", i, " recv ", j))
				if len(sc) != 1 || len(rc) != 1 || sc[0].Status != uk.WCSuccess || rc[0].Status != uk.WCSuccess ||
					rc[0].ByteLen != size || rc[0].WrID != uint64(j) {
					t.Errorf("pair %d op %d: %+v %+v", i, j, sc, rc)
					return
				}
				// Compare while nothing else writes the slot.
				if got, want := p.dst.bytes()[off:off+uint64(size)], p.src.bytes()[off:off+uint64(size)]; string(got) != string(want) {
					t.Errorf("pair %d op %d: payload differs", i, j)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := w.nodes[0].eng.Stats()
	ab, ba := w.pair.A().Stats().Faults, w.pair.B().Stats().Faults
	t.Logf("A: %d packets, %d retransmitted, %d timeouts; link A→B %+v, B→A %+v", s.Port.TxPackets, s.Port.Retransmits,
		s.Port.Timeouts, ab, ba)
	// The faults must have happened, or the run proved nothing about
	// recovery: with 1% loss and 2% reordering of several thousand data
	// frames, none lost or none reordered means the injector was not in
	// the path. A lost data frame can only be recovered by retransmission.
	if ab.Lost == 0 || ab.Reordered == 0 {
		t.Errorf("link A→B: %d frames lost, %d reordered of %d; want both > 0", ab.Lost, ab.Reordered, ab.Offered)
	}
	if s.Port.Retransmits == 0 {
		t.Errorf("A retransmitted nothing although the link lost %d of its frames", ab.Lost)
	}
}

// TestControlDuringTraffic moves a QP to ERROR and flushes it while its
// worker is sending a large WRITE and the peer keeps it busy: the flush
// must find the WQEs in flight, complete, and leave the data plane quiet.
func TestControlDuringTraffic(t *testing.T) {
	w := newWorld(t, opts{workers: 2})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	src := a.n.newMR(4<<20, devtest.RightsAll, a.pd)
	dst := b.n.newMR(4<<20, devtest.RightsAll, b.pd)
	sent := w.nodes[0].eng.Stats().Port.TxPackets
	for i := range 8 {
		a.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled,
			SGList: []uk.SGE{{Addr: src.va, Length: 4 << 20, LKey: src.stag}}, RemoteAddr: dst.va, RKey: dst.stag})
	}
	// Move to ERROR once the WRITEs are on the wire (32 MiB take far
	// longer than this to complete), not after a guessed sleep.
	for deadline := time.Now().Add(10 * time.Second); w.nodes[0].eng.Stats().Port.TxPackets == sent; {
		if time.Now().After(deadline) {
			t.Fatal("the WRITEs never started")
		}
		runtime.Gosched()
	}
	a.n.env.MustOK(a.n.env.ModifyQP(a.q, devtest.StateError), "MODIFY_QP ERROR")
	c := a.n.env.FlushWQEs(a.q, true, true, 0, 0)
	if c.Error && c.Minor != 0x8006 { // "no WQE" only if everything had completed
		t.Fatalf("FLUSH_WQES: %+v", c)
	}
	got := waitWall(t, a.us, 8, "completions after the flush")
	ok, flushed := 0, 0
	for i, wc := range got {
		if wc.WrID != uint64(i) {
			t.Fatalf("completion %d: %+v", i, wc)
		}
		switch wc.Status {
		case uk.WCSuccess:
			if flushed > 0 {
				t.Fatalf("a success after a flushed completion: %+v", got)
			}
			ok++
		case uk.WCWRFlushErr:
			flushed++
		default:
			t.Fatalf("completion %+v", wc)
		}
	}
	t.Logf("%d completed, %d flushed", ok, flushed)
	if flushed == 0 {
		t.Fatalf("nothing was in flight")
	}
	// An absence check needs a window: any packet of the flushed QP in it
	// fails the test; a quiet window cannot make it fail wrongly.
	before := w.nodes[0].eng.Stats().Port.TxPackets
	time.Sleep(5 * time.Millisecond)
	if after := w.nodes[0].eng.Stats().Port.TxPackets; after != before {
		t.Fatalf("the flushed QP still sends: %d → %d packets", before, after)
	}
	a.n.env.MustOK(a.n.env.DestroyQP(a.q), "DESTROY_QP")
}

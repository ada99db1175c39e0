package dataplane_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// BenchmarkRCWrite measures RC WRITE bandwidth and message rate between
// two in-process devices over link.NewPair on the wall clock, the engines
// running their worker goroutines: up to 64 WRITEs outstanding, every one
// signaled, path MTU 4096.
func BenchmarkRCWrite(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			w := newWorld(b, opts{})
			a, peer := w.connectRC(withMTU(4096), withMTU(4096))
			src := a.n.newMR(64*size, devtest.RightsAll, a.pd)
			dst := peer.n.newMR(64*size, devtest.RightsAll, peer.pd)
			const window = 64
			wr := []uk.SendWR{{Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, RKey: dst.stag,
				SGList: []uk.SGE{{Length: uint32(size), LKey: src.stag}}}}
			var wcs []uk.WorkCompletion
			posted, done := 0, 0
			b.SetBytes(int64(size))
			b.ResetTimer()
			start := time.Now()
			for done < b.N {
				for posted < b.N && posted-done < window {
					off := uint64(posted%64) * uint64(size)
					wr[0].WrID = uint64(posted)
					wr[0].SGList[0].Addr = src.va + off
					wr[0].RemoteAddr = dst.va + off
					if _, err := a.uq.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					posted++
				}
				if a.uq.SQDoorbell() {
					a.n.env.Doorbell(a.q)
				}
				wcs = poll(b, a.us, wcs[:0])
				for _, wc := range wcs {
					if wc.Status != uk.WCSuccess {
						w.dump()
						b.Fatalf("completion %+v", wc)
					}
				}
				done += len(wcs)
				if len(wcs) == 0 {
					runtime.Gosched()
				}
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
			s := w.nodes[0].eng.Stats()
			b.ReportMetric(float64(s.Port.TxPackets)/float64(b.N), "pkts/op")
			if s.Port.Retransmits > 0 {
				b.ReportMetric(float64(s.Port.Retransmits), "retransmits")
				for _, n := range w.nodes {
					st := n.eng.Stats()
					b.Logf("node %d: timeouts %d NAKs rcvd %v sent %v drops %v stalls %d link drops %v", n.idx, st.Port.Timeouts,
						st.Port.NAKsRcvd, st.Port.NAKsSent, st.Port.Drops, st.Port.TxStalls, st.Link.Drops)
				}
			}
		})
	}
}

var hook func(bool)

// allocsPerPacket runs ops WRITEs of size bytes through a stepped world
// and returns the heap allocations made while the requester side ran
// (sending data, taking ACKs) and while the responder side ran with the
// link delivering (the link, both ports' receive gates, taking data,
// sending ACKs), counted separately, and the packets A sent meanwhile.
//
// In a stepped world the whole data path runs on this goroutine, inside
// the engines' Poll and the manual clock's Advance (the link delivers in
// its timer functions); nothing else in the process is woken while the
// window runs (the devices' CQP goroutines wait for CQP doorbells). The
// counter is the process-wide runtime.MemStats.Mallocs, read around each
// of those calls. Two effects of the runtime, not of the data path, would
// show up as allocations on it, both in link.Pool's free list, a
// sync.Pool, whose caches are per P:
//   - the goroutine moving to another P: Release there allocates that P's
//     first ring (sync.(*poolChain).pushHead, 2 objects) and Get there
//     finds nothing it may take (another P's private slot cannot be
//     stolen) and makes a packet (1 object);
//   - a garbage collection, which empties every sync.Pool, so the Gets
//     after it make packets again.
//
// So the warm-up and the window run, as testing.AllocsPerRun does, with
// GOMAXPROCS 1, and with the collector off; neither hides an allocation
// (Mallocs counts every object, collected or not).
//
// With loop both QPs are on the first device, connected through its own
// address (docs/dataplane.md "Loopback"): the whole exchange runs in that
// device's Poll, its receive gate included, so it all counts as send.
func allocsPerPacket(t testing.TB, ops, size int, loop bool) (send, recv, pkts, looped uint64) {
	w := newWorld(t, opts{stepped: true})
	var a, peer *ep
	if loop {
		a, peer = w.nodes[0].loopRC(withMTU(1024))
	} else {
		a, peer = w.connectRC(withMTU(1024), withMTU(1024))
	}
	src := a.n.newMR(16*size, devtest.RightsAll, a.pd)
	dst := peer.n.newMR(16*size, devtest.RightsAll, peer.pd)
	wr := []uk.SendWR{{Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, RKey: dst.stag,
		SGList: []uk.SGE{{Length: uint32(size), LKey: src.stag}}}}
	wcs := make([]uk.WorkCompletion, 0, 16)
	var ms runtime.MemStats
	mallocs := func() uint64 {
		runtime.ReadMemStats(&ms)
		return ms.Mallocs
	}
	pollA, pollB := w.nodes[0].eng.Poll, w.nodes[1].eng.Poll
	advance := func() {
		if next, ok := w.man.Next(); ok {
			w.man.Advance(max(next-w.man.Now(), 0))
		}
	}
	run := func(n int, count bool) {
		for i := 0; i < n; i++ {
			wr[0].WrID = uint64(i)
			wr[0].SGList[0].Addr = src.va + uint64(i%16)*uint64(size)
			wr[0].RemoteAddr = dst.va + uint64(i%16)*uint64(size)
			if _, err := a.uq.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			a.n.env.Doorbell(a.q)
			for got := 0; got < 1; {
				m0 := mallocs()
				pollA()
				m1 := mallocs()
				pollB()
				m2 := mallocs()
				advance()
				m3 := mallocs()
				if count {
					send += m1 - m0
					recv += m2 - m1 + m3 - m2
				}
				wcs = poll(t, a.us, wcs[:0])
				for _, wc := range wcs {
					if wc.Status != uk.WCSuccess || wc.WrID != uint64(i) {
						t.Fatalf("completion %+v, want wr %d", wc, i)
					}
				}
				got += len(wcs)
			}
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	run(200, false) // warm up pools, slices, timers on the one P
	s0 := w.nodes[0].eng.Stats()
	run(ops, true)
	s1 := w.nodes[0].eng.Stats()
	pkts = s1.Port.TxPackets - s0.Port.TxPackets
	looped = s1.Loopback.Frames - s0.Loopback.Frames
	return send, recv, pkts, looped
}

// TestAllocsPerPacket checks that the steady-state send and receive paths
// allocate nothing at all, between two devices over the link and between
// two QPs of one device through its loopback: docs/dataplane.md claims 0
// per packet, so the count over the whole window must be exactly zero.
func TestAllocsPerPacket(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct {
		name string
		loop bool
	}{{"link", false}, {"loopback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			send, recv, pkts, looped := allocsPerPacket(t, 500, 4096, tc.loop)
			t.Logf("%d packets (%d looped back): %d allocations sending, %d receiving", pkts, looped, send, recv)
			if pkts < 500*4 {
				t.Fatalf("%d packets for 500 WRITEs of 4 KiB at MTU 1024, want at least 2000", pkts)
			}
			if send != 0 || recv != 0 {
				t.Errorf("%d allocations sending and %d receiving over %d packets, want none", send, recv, pkts)
			}
			if want := map[bool]uint64{false: 0, true: pkts}[tc.loop]; looped != want {
				t.Errorf("%d of %d packets looped back, want %d", looped, pkts, want)
			}
		})
	}
}

// BenchmarkAllocsPerPacket reports the same figures as metrics.
func BenchmarkAllocsPerPacket(b *testing.B) {
	for _, tc := range []struct {
		name string
		loop bool
	}{{"link", false}, {"loopback", true}} {
		b.Run(tc.name, func(b *testing.B) {
			send, recv, pkts, _ := allocsPerPacket(b, max(b.N, 100), 4096, tc.loop)
			b.ReportMetric(float64(send)/float64(pkts), "send-allocs/pkt")
			b.ReportMetric(float64(recv)/float64(pkts), "recv-allocs/pkt")
		})
	}
}

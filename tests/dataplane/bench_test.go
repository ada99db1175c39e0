package dataplane_test

import (
	"fmt"
	"runtime"
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

// allocsPerPacket runs ops WRITEs of size bytes through a stepped world
// and returns the heap allocations per packet made while the requester
// side ran (sending data, taking ACKs) and while the responder side ran
// with the link delivering (the link, both ports' receive gates, taking
// data, sending ACKs), counted separately.
func allocsPerPacket(t testing.TB, ops, size int) (send, recv float64, pkts uint64) {
	w := newWorld(t, opts{stepped: true})
	a, peer := w.connectRC(withMTU(1024), withMTU(1024))
	src := a.n.newMR(16*size, devtest.RightsAll, a.pd)
	dst := peer.n.newMR(16*size, devtest.RightsAll, peer.pd)
	wr := []uk.SendWR{{Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, RKey: dst.stag,
		SGList: []uk.SGE{{Length: uint32(size), LKey: src.stag}}}}
	var wcs []uk.WorkCompletion
	var ms runtime.MemStats
	var sendA, recvA uint64
	measure := func(f func() bool) (bool, uint64) {
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		r := f()
		runtime.ReadMemStats(&ms)
		return r, ms.Mallocs - before
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
				_, da := measure(a.n.eng.Poll)
				_, db := measure(peer.n.eng.Poll)
				if count {
					sendA += da
					recvA += db
				}
				// The clock delivers frames: the link and the ports' receive
				// gates run inside Advance.
				_, dl := measure(func() bool {
					if next, ok := w.man.Next(); ok {
						w.man.Advance(max(next-w.man.Now(), 0))
					}
					return true
				})
				if count {
					recvA += dl
				}
				wcs = poll(t, a.us, wcs[:0])
				got += len(wcs)
			}
		}
	}
	run(200, false) // warm up pools, slices, timers
	before := w.nodes[0].eng.Stats().Port.TxPackets
	run(ops, true)
	pkts = w.nodes[0].eng.Stats().Port.TxPackets - before
	return float64(sendA) / float64(pkts), float64(recvA) / float64(pkts), pkts
}

// TestAllocsPerPacket checks the steady-state send and receive paths
// allocate nothing per packet (measured around the engines' Poll only).
func TestAllocsPerPacket(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	send, recv, pkts := allocsPerPacket(t, 500, 4096)
	t.Logf("%d packets: %.4f allocations per packet sending, %.4f receiving", pkts, send, recv)
	if send > 0.01 || recv > 0.01 {
		t.Errorf("allocations per packet: send %.4f, receive %.4f", send, recv)
	}
}

// BenchmarkAllocsPerPacket reports the same figures as metrics.
func BenchmarkAllocsPerPacket(b *testing.B) {
	send, recv, _ := allocsPerPacket(b, max(b.N, 100), 4096)
	b.ReportMetric(send, "send-allocs/pkt")
	b.ReportMetric(recv, "recv-allocs/pkt")
}

package link_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// benchSizes are RoCEv2 payload sizes: a small SEND and a full 4096-byte
// path MTU.
var benchSizes = []struct {
	name    string
	payload int
}{{"64B", 64}, {"4KiB", 4096}}

// BenchmarkPairManual measures the cost per frame of the pair's machinery
// on a manual clock: pool Get, copying the frame in (the sender's DMA),
// Send in batches of 32, Advance, delivery, Release. One op is one frame.
func BenchmarkPairManual(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			clock := timing.NewManual()
			pool := link.NewPool(0)
			p, err := link.NewPair(link.PairConfig{Clock: clock, Pool: pool})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			p.B().Attach(releaser{})
			tmpl := newFrame(b, pool, 1, frameOpts{payload: sz.payload})
			defer tmpl.Release()
			b.SetBytes(int64(len(tmpl.Data)))
			batch := make([]*link.Packet, 32)
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				n := min(len(batch), b.N-sent)
				for i := range n {
					q := pool.Get()
					q.Data = q.Buf()[:copy(q.Buf(), tmpl.Data)]
					batch[i] = q
				}
				_ = p.A().Send(batch[:n])
				clock.Advance(0)
				sent += n
			}
			b.StopTimer()
			if got := p.B().Stats().RxFrames; got != uint64(b.N) {
				b.Fatalf("delivered %d of %d", got, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// countingReceiver releases what it gets and returns credits to the
// sender, one per full batch of 32 frames.
type countingReceiver struct {
	got     atomic.Int64
	pending int // frames not yet credited; only the delivery goroutine touches it
	credits chan struct{}
}

func (r *countingReceiver) Receive(pkts []*link.Packet) {
	for _, p := range pkts {
		p.Release()
	}
	r.got.Add(int64(len(pkts)))
	r.pending += len(pkts)
	for r.pending >= 32 {
		r.pending -= 32
		<-r.credits
	}
}

func (r *countingReceiver) LinkStateChanged(link.State) {}

// BenchmarkPairWall measures throughput through the wall-clock pair: the
// benchmark goroutine sends batches of 32 while the delivery goroutine
// hands them to a receiver, with at most 16 batches in flight (credits),
// so the bounded queue never overflows. One op is one frame.
func BenchmarkPairWall(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			pool := link.NewPool(0)
			p, err := link.NewPair(link.PairConfig{Pool: pool})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			r := &countingReceiver{credits: make(chan struct{}, 16)}
			p.B().Attach(r)
			tmpl := newFrame(b, pool, 1, frameOpts{payload: sz.payload})
			defer tmpl.Release()
			b.SetBytes(int64(len(tmpl.Data)))
			batch := make([]*link.Packet, 32)
			run := func(frames int) {
				for sent := 0; sent < frames; sent += 32 {
					r.credits <- struct{}{}
					for i := range batch {
						q := pool.Get()
						q.Data = q.Buf()[:copy(q.Buf(), tmpl.Data)]
						batch[i] = q
					}
					_ = p.A().Send(batch)
				}
				for r.got.Load() < int64(frames) {
					time.Sleep(10 * time.Microsecond)
				}
				r.got.Store(0)
			}
			// Warm up: fill the pool with as many buffers as the credits
			// let be in flight, so that the timed part allocates nothing.
			run(64 * 32)
			// Whole batches only, so that every credit is returned.
			total := (b.N + 31) / 32 * 32
			b.ReportAllocs()
			b.ResetTimer()
			run(total)
			b.StopTimer()
			if d := p.A().Stats().Dropped(); d != 0 {
				b.Fatalf("%d frames dropped", d)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

package udp_test

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

var benchSizes = []struct {
	name    string
	payload int
}{{"64B", 64}, {"1KiB", 1024}, {"4KiB", 4096}}

// counter is a Receiver that releases what it gets and counts it.
type counter struct{ n atomic.Int64 }

func (c *counter) Receive(pkts []*link.Packet) {
	for _, p := range pkts {
		p.Release()
	}
	c.n.Add(int64(len(pkts)))
}

func (c *counter) LinkStateChanged(link.State) {}

// BenchmarkLoopback measures send and receive through the kernel over
// loopback: one link on 127.0.0.2 sends RC SEND Only frames in batches of
// 64 (one sendmmsg each) to one on 127.0.0.3, which reads them with
// recvmmsg, rebuilds the headers, verifies the ICRC and delivers them. One
// op is one frame, sent and received; the sender keeps at most about 1 MiB
// ahead of the receiver so that no socket buffer overflows. allocs/op is
// the steady state of both paths (the frames come from the pool).
func BenchmarkLoopback(b *testing.B) {
	for _, mode := range []udp.Mode{{Send: udp.IOUDP, Recv: udp.IOUDP}, {Send: udp.IOUDP, Recv: udp.IOPacket}} {
		for _, sz := range benchSizes {
			b.Run(mode.String()+"/"+sz.name, func(b *testing.B) {
				if mode.Recv == udp.IOPacket {
					testenv.Root(b) // AF_PACKET receiving needs CAP_NET_RAW
				}
				pool := link.NewPool(0)
				tx := newLink(b, udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode, Pool: pool})
				rx := newLink(b, udp.Config{Addrs: []netip.Addr{lo3}, Mode: mode, Pool: pool})
				var c counter
				rx.Attach(&c)
				tmpl := build(b, pool, frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: sz.payload})
				defer tmpl.Release()
				// Within about 1 MiB of datagrams (a 4 MiB receive
				// buffer also pays for each skb's overhead).
				const batch = 64
				window := int64(min(1024, (1<<20)/len(tmpl.Data)))
				pkts := make([]*link.Packet, batch)
				b.SetBytes(int64(len(tmpl.Data)))
				b.ReportAllocs()
				b.ResetTimer()
				for sent := 0; sent < b.N; {
					for int64(sent)-c.n.Load() > window {
						time.Sleep(10 * time.Microsecond)
					}
					k := min(batch, b.N-sent)
					for i := range k {
						p := pool.Get()
						p.Data = p.Buf()[:copy(p.Buf(), tmpl.Data)]
						pkts[i] = p
					}
					_ = tx.Send(pkts[:k])
					sent += k
				}
				deadline := time.Now().Add(10 * time.Second)
				for c.n.Load() < int64(b.N) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Microsecond)
				}
				b.StopTimer()
				if got := c.n.Load(); got != int64(b.N) {
					b.Fatalf("received %d of %d: tx %+v rx %+v", got, b.N, tx.Counters(), rx.Counters())
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
				ct, cr := tx.Counters(), rx.Counters()
				b.ReportMetric(float64(ct.TxFrames)/float64(max(ct.SendCalls, 1)), "frames/sendmmsg")
				b.ReportMetric(float64(cr.RxFrames)/float64(max(cr.RecvCalls, 1)), "frames/recvmmsg")
			})
		}
	}
}

// BenchmarkReadBatchXNet is the reference for the receive path: x/net's
// ReadBatch (recvmmsg) on a plain socket allocates a net.UDPAddr and its
// IP for every datagram, which is why the link issues recvmmsg itself.
// One op is one datagram.
func BenchmarkReadBatchXNet(b *testing.B) {
	rc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo3, 0)))
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	sc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo2, 0)))
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	_ = rc.SetReadBuffer(4 << 20)
	rp, sp := ipv4.NewPacketConn(rc), ipv4.NewPacketConn(sc)
	const batch = 64
	dst := rc.LocalAddr()
	out := make([]ipv4.Message, batch)
	in := make([]ipv4.Message, batch)
	payload := make([]byte, 64)
	for i := range out {
		out[i] = ipv4.Message{Buffers: [][]byte{payload}, Addr: dst}
		in[i] = ipv4.Message{Buffers: [][]byte{make([]byte, 2048)}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for got := 0; got < b.N; {
		k := min(batch, b.N-got)
		if _, err := sp.WriteBatch(out[:k], 0); err != nil {
			b.Fatal(err)
		}
		for r := 0; r < k; {
			n, err := rp.ReadBatch(in[:k-r], 0)
			if err != nil {
				b.Fatal(err)
			}
			r += n
		}
		got += k
	}
}

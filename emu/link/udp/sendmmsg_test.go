package udp

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// TestPutSockaddr: destinations as the kernel reads them — sockaddr_in
// and sockaddr_in6 with the port in network order, the scope only for a
// zoned (link-local) IPv6 destination. Golden bytes, little-endian family
// (amd64, arm64).
func TestPutSockaddr(t *testing.T) {
	tests := []struct {
		name string
		addr net.UDPAddr
		v4   bool
		want []byte
	}{
		{"IPv4", net.UDPAddr{IP: net.IPv4(10, 1, 2, 3).To4(), Port: 4791}, true,
			[]byte{2, 0, 0x12, 0xb7, 10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"IPv4 given as 16 bytes", net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 4791}, true,
			[]byte{2, 0, 0x12, 0xb7, 127, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"IPv6", net.UDPAddr{IP: net.ParseIP("fd00::3"), Port: 4791}, false,
			[]byte{10, 0, 0x12, 0xb7, 0, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0}},
		{"IPv6 link-local", net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: 4791, Zone: "7"}, false,
			[]byte{10, 0, 0x12, 0xb7, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 7, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sa unix.RawSockaddrInet6
			for i := range sa.Addr {
				sa.Addr[i] = 0xee // left over from an earlier datagram
			}
			sa.Scope_id = 99
			n := putSockaddr(&sa, &tc.addr, tc.v4, 7)
			got := unsafe.Slice((*byte)(unsafe.Pointer(&sa)), n)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("sockaddr\n% x\nwant\n% x", got, tc.want)
			}
		})
	}
}

// TestMmsghdrs: each message header points at its own buffers, control
// messages and destination, messages of several buffers (GSO sends)
// included, and building them again reuses the arrays.
func TestMmsghdrs(t *testing.T) {
	bufs := [][]byte{[]byte("one"), []byte("two-a"), []byte("two-bb"), []byte("two-ccc"), []byte("three")}
	oob := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	addrs := []net.UDPAddr{
		{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 4791},
		{IP: net.IPv4(10, 0, 0, 2).To4(), Port: 4791},
		{IP: net.IPv4(10, 0, 0, 3).To4(), Port: 4791},
	}
	msgs := []ipv4.Message{
		{Buffers: bufs[0:1], Addr: &addrs[0]},
		{Buffers: bufs[1:4], OOB: oob, Addr: &addrs[1]},
		{Buffers: bufs[4:5], OOB: oob[:4], Addr: &addrs[2]},
	}
	var g txGroup
	check := func() {
		t.Helper()
		hdrs := g.mmsghdrs(msgs, true, 0)
		if len(hdrs) != len(msgs) {
			t.Fatalf("%d headers for %d messages", len(hdrs), len(msgs))
		}
		for i, m := range msgs {
			h := &hdrs[i].Hdr
			iov := unsafe.Slice(h.Iov, h.Iovlen)
			if len(iov) != len(m.Buffers) {
				t.Fatalf("message %d: %d iovecs, want %d", i, len(iov), len(m.Buffers))
			}
			for j, b := range m.Buffers {
				if iov[j].Base != &b[0] || int(iov[j].Len) != len(b) {
					t.Errorf("message %d iovec %d does not point at its buffer", i, j)
				}
			}
			if int(h.Controllen) != len(m.OOB) || (len(m.OOB) > 0) != (h.Control != nil) {
				t.Errorf("message %d: control %d bytes, want %d", i, h.Controllen, len(m.OOB))
			}
			sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(h.Name))
			if h.Namelen != unix.SizeofSockaddrInet4 || sa.Addr != [4]byte(addrs[i].IP.To4()) {
				t.Errorf("message %d: destination %v (%d bytes)", i, sa.Addr, h.Namelen)
			}
		}
		g.clearMmsghdrs()
	}
	check()
	if n := testing.AllocsPerRun(100, check); n != 0 {
		t.Errorf("building the headers again: %v allocations", n)
	}
}

// TestConcurrentSends: goroutines sending through one link at once — a
// device's receive threads sending ACKs while its notifications send
// requests — share its socket without a lock of the link's: every frame
// arrives, and the race detector watches the send path.
func TestConcurrentSends(t *testing.T) {
	pair := testaddr.MustPick(2)
	mode := Mode{Send: IOUDP, Recv: IOUDP}
	a, err := New(Config{Addrs: []netip.Addr{pair[0]}, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(Config{Addrs: []netip.Addr{pair[1]}, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rc := &collect{}
	b.Attach(rc)
	// 800 frames of 300 bytes: well inside the sockets' buffers.
	const senders, rounds, batch = 4, 50, 4
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for r := range rounds {
				var pkts []*link.Packet
				for i := range batch {
					p := a.Pool().Get()
					if p == nil {
						t.Error("pool dry")
						return
					}
					ff := wire.FrameFields{SrcIP: pair[0], DstIP: pair[1], HopLimit: 64, SrcPort: wire.RoCEv2Port}
					pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey,
						DestQP: uint32(0x10 + s), PSN: wire.PSN(r*batch + i)}}
					n, err := wire.BuildFrame(p.Buf(), &ff, &pf, make([]byte, 256))
					if err != nil {
						t.Error(err)
						return
					}
					p.Data = p.Buf()[:n]
					pkts = append(pkts, p)
				}
				if err := a.Send(pkts); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := senders * rounds * batch
	deadline := time.Now().Add(5 * time.Second)
	for rc.n() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := rc.n(); got != want {
		t.Fatalf("received %d frames, want %d; sender %+v", got, want, a.Counters())
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, s := range rc.icrc {
		if s != link.ICRCGood {
			t.Fatalf("frame %d: ICRC %v", i, s)
		}
	}
	if c := a.Counters(); c.TxDropped() != 0 || c.TxFrames != uint64(want) {
		t.Errorf("drops %v, frames %d; want none, %d", c.TxDrops, c.TxFrames, want)
	}
}

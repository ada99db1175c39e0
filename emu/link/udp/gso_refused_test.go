package udp

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// collect is a Receiver that keeps the ICRC status and PSN of each frame.
type collect struct {
	mu   sync.Mutex
	icrc []link.ICRCStatus
	psn  []wire.PSN
}

func (c *collect) Receive(pkts []*link.Packet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pkts {
		c.icrc = append(c.icrc, p.ICRC)
		var f wire.Frame
		if err := wire.ParseFrame(p.Data, &f); err == nil {
			c.psn = append(c.psn, f.Packet.BTH.PSN())
		}
		p.Release()
	}
}

func (c *collect) LinkStateChanged(link.State) {}

func (c *collect) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.icrc)
}

// TestGSORefused: the kernel refuses a GSO send from a socket with
// SO_NO_CHECK (udp_send_skb: EINVAL, a segmented datagram must carry a
// checksum), as it does on routes through IPsec or with UDP-Lite (EIO),
// where a datagram sent alone still goes. The link sends that run again
// one datagram at a time, with the ICRCs moved back to ID 0, and sends
// no GSO from that socket after: every frame arrives, in order, with a
// good ICRC, and nothing is counted lost. (SO_NO_CHECK is set by the test
// on the link's socket; the refusal is the kernel's.)
func TestGSORefused(t *testing.T) {
	// Two loopback addresses of this test's own (internal/testaddr):
	// other packages' tests bind UDP 4791 on loopback at the same time.
	pair := testaddr.MustPick(2)
	addr := func(i int) []netip.Addr { return []netip.Addr{pair[i]} }
	mode := Mode{Send: IOUDP, Recv: IOUDP}
	a, err := New(Config{Addrs: addr(0), Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(Config{Addrs: addr(1), Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rc := &collect{}
	b.Attach(rc)
	sock := a.table.Load().socks[0]
	var serr error
	if err := sock.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_NO_CHECK: %v %v", err, serr)
	}
	const run = 10
	for round := range 2 {
		var pkts []*link.Packet
		for i := range run {
			p := a.Pool().Get()
			ff := wire.FrameFields{SrcIP: pair[0], DstIP: pair[1], HopLimit: 64, SrcPort: wire.RoCEv2Port}
			pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: wire.PSN(round*run + i)}}
			n, err := wire.BuildFrame(p.Buf(), &ff, &pf, make([]byte, 512))
			if err != nil {
				t.Fatal(err)
			}
			p.Data = p.Buf()[:n]
			pkts = append(pkts, p)
		}
		if err := a.Send(pkts); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for rc.n() < 2*run && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.icrc) != 2*run {
		t.Fatalf("received %d frames, want %d; sender %+v", len(rc.icrc), 2*run, a.Counters())
	}
	for i := range rc.icrc {
		if rc.icrc[i] != link.ICRCGood || rc.psn[i] != wire.PSN(i) {
			t.Errorf("frame %d: ICRC %v, PSN %d", i, rc.icrc[i], rc.psn[i])
		}
	}
	c := a.Counters()
	if c.GSORefused != 1 || c.GSOSends != 0 || c.TxDropped() != 0 || c.TxFrames != 2*run {
		t.Errorf("refused %d, GSO sends %d, drops %v, frames %d; want 1, 0, none, %d", c.GSORefused, c.GSOSends, c.TxDrops, c.TxFrames, 2*run)
	}
	if !sock.noGSO.Load() {
		t.Error("the socket still tries GSO")
	}
}

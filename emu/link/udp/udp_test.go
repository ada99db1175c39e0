package udp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
)

// opcodeCases are the frames the exchange tests send: RC and UD, with and
// without extension headers, payloads from 0 to the 4096-byte path MTU.
var opcodeCases = []struct {
	op      wire.Opcode
	payload int
}{
	{wire.RCSendOnly, 0},
	{wire.RCSendOnly, 1},
	{wire.RCSendOnly, 61},
	{wire.RCSendFirst, 1024},
	{wire.RCSendMiddle, 2048},
	{wire.RCSendLast, 1023},
	{wire.RCSendOnlyWithImm, 64},
	{wire.RCRDMAWriteFirst, 4096},
	{wire.RCRDMAWriteOnlyWithImm, 4096},
	{wire.RCRDMAReadRequest, 0},
	{wire.RCRDMAReadResponseOnly, 333},
	{wire.RCAcknowledge, 0},
	{wire.UDSendOnly, 1024},
	{wire.UDSendOnlyWithImm, 4096},
}

// modes are the transport modes the exchange runs in; packet ones need
// root.
var modes = []struct {
	mode udp.Mode
	root bool
}{
	{udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}, false},
	{udp.Mode{Send: udp.IOUDP, Recv: udp.IOPacket}, true},
	{udp.Mode{Send: udp.IOPacket, Recv: udp.IOPacket}, true},
	{udp.Mode{Send: udp.IOPacket, Recv: udp.IOUDP}, true},
	// The receive rings' other way of waiting (mmsg_linux.go).
	{udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP, WaitInPoller: true}, false},
	{udp.Mode{Send: udp.IOUDP, Recv: udp.IOPacket, WaitInPoller: true}, true},
}

// TestCloseWaitingRing: Close ends a receive ring that waits for datagrams
// — in ppoll, woken by its eventfd, or in the Go poller — also one that
// never received anything and one that just did, and leaves no descriptor
// behind. A ring that is not woken would keep Close waiting forever (the
// socket's Close waits for the ppoll's hold on it): the test would hang.
func TestCloseWaitingRing(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	for _, poller := range []bool{false, true} {
		mode := udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP, WaitInPoller: poller}
		before := fds()
		for i := range 10 {
			a, err := udp.New(udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode, Pool: link.NewPool(0)})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			a.Attach(rec)
			if i%2 == 1 {
				b, err := udp.New(udp.Config{Addrs: []netip.Addr{lo3}, Mode: mode, Pool: link.NewPool(0)})
				if err != nil {
					t.Fatal(err)
				}
				p := build(t, b.Pool(), frameSpec{op: wire.RCSendOnly, src: lo3, dst: lo2, payload: 16})
				if err := b.Send([]*link.Packet{p}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the frame", func() bool { return rec.n() == 1 })
				b.Close()
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if after := fds(); after != before {
			t.Errorf("wait in poller %v: %d descriptors open after 10 links came and went, %d before", poller, after, before)
		}
	}
}

// TestLoopbackExchange: two links on 127.0.0.2 and 127.0.0.3 exchange
// frames of every kind in both directions, byte-exact in the RoCEv2 part,
// with the ICRC good for our own IPv4 senders, in every mode.
//
// Packet sending runs in a namespace of its own with route_localnet set on
// its loopback: a frame injected on lo at layer 2 takes the input route,
// and Linux treats 127.0.0.0/8 there as martian unless route_localnet is
// set (ip_route_input_slow); frames that UDP sockets send on lo never take
// that path. The AF_PACKET receiver sees them either way.
func TestLoopbackExchange(t *testing.T) {
	for _, m := range modes {
		t.Run(m.mode.String(), func(t *testing.T) {
			var nsPath string
			if m.root {
				nstest.NeedRoot(t)
			}
			if m.mode.Send == udp.IOPacket {
				ns := nstest.New(t)
				ns.Sysctl(t, "net.ipv4.conf.lo.route_localnet", "1")
				nsPath = ns.Path()
			}
			a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: m.mode, NetNS: nsPath})
			b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: m.mode, NetNS: nsPath})
			if a.Mode() != m.mode || a.MTU() != link.MaxMTU || a.MAC() != (wire.MAC{}) {
				t.Fatalf("mode %v MTU %d MAC %v; want %v, %d (loopback capped), zero", a.Mode(), a.MTU(), a.MAC(), m.mode, link.MaxMTU)
			}
			ra, rb := newRecorder(), newRecorder()
			a.Attach(ra)
			b.Attach(rb)
			for dir, ends := range [][2]*udp.Link{{a, b}, {b, a}} {
				from, to := ends[0], ends[1]
				rec := []*recorder{rb, ra}[dir]
				src, dst := from.Addrs()[0], to.Addrs()[0]
				var sent [][]byte
				var pkts []*link.Packet
				for i, c := range opcodeCases {
					p := build(t, from.Pool(), frameSpec{op: c.op, src: src, dst: dst, payload: c.payload,
						seq: uint32(i), tclass: uint8(i * 4), hop: uint8(1 + i)})
					_, roce := roceOf(t, p.Data)
					sent = append(sent, bytes.Clone(roce))
					pkts = append(pkts, p)
				}
				if err := from.Send(pkts); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "frames", func() bool { return rec.n() == len(sent) })
				got := rec.got()
				for i, g := range got {
					f, roce := roceOf(t, g.data)
					name := fmt.Sprintf("%v→%v frame %d (%v %dB)", src, dst, i, opcodeCases[i].op, opcodeCases[i].payload)
					if !bytes.Equal(roce, sent[i]) {
						t.Errorf("%s: RoCEv2 part differs:\nsent % x\ngot  % x", name, sent[i], roce)
					}
					if g.icrc != link.ICRCGood || f.VerifyICRC() != nil {
						t.Errorf("%s: ICRC status %v, VerifyICRC %v; want good", name, g.icrc, f.VerifyICRC())
					}
					if s, d := f.Src(), f.Dst(); s.Addr() != src || d.Addr() != dst || d.Port() != wire.RoCEv2Port || s.Port() != wire.RoCEv2Port {
						t.Errorf("%s: rebuilt %v → %v", name, s, d)
					}
					if f.IPv4.TOS() != uint8(i*4) || f.IPv4.TTL() != uint8(1+i) || f.IPv4.ID() != 0 || !f.IPv4.DF() || !f.IPv4.IsChecksumValid() {
						t.Errorf("%s: IPv4 TOS %#x TTL %d ID %d DF %v checksum ok %v; want %#x %d 0 true true",
							name, f.IPv4.TOS(), f.IPv4.TTL(), f.IPv4.ID(), f.IPv4.DF(), f.IPv4.IsChecksumValid(), i*4, 1+i)
					}
					if g.time <= 0 {
						t.Errorf("%s: no arrival time", name)
					}
				}
				rec.mu.Lock()
				rec.frames, rec.count = nil, 0
				rec.mu.Unlock()
			}
			ca, cb := a.Counters(), b.Counters()
			n := uint64(len(opcodeCases))
			if ca.TxFrames != n || cb.RxFrames != n || cb.ICRCGood != n || ca.TxDropped() != 0 || cb.RxDropped() != 0 || ca.Resealed != 0 {
				t.Errorf("counters A %+v\nB %+v", ca, cb)
			}
			if ca.SendCalls != 1 {
				t.Errorf("A sent %d frames in %d sendmmsg calls; want one call", ca.TxFrames, ca.SendCalls)
			}
		})
	}
}

// TestResealForSocketPort: a frame built with a per-QP source port and a
// non-zero IP ID (as rxe would send) leaves a UDP socket from port 4791
// with ID 0, so the link recomputes its ICRC; the receiver finds it good
// and the rest of the RoCEv2 packet unchanged. In packet sending the frame
// goes out as built and the UDP receiver cannot verify it.
func TestResealForSocketPort(t *testing.T) {
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	rb := newRecorder()
	b.Attach(rb)
	if port, ok := a.SourcePort(lo2); !ok || port != wire.RoCEv2Port {
		t.Fatalf("SourcePort = %d, %v; want 4791, true", port, ok)
	}
	p := build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 100, srcPort: 0xc123, ipID: 0x1234})
	_, roce := roceOf(t, p.Data)
	sent := bytes.Clone(roce)
	if err := a.Send([]*link.Packet{p}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frame", func() bool { return rb.n() == 1 })
	g := rb.got()[0]
	f, got := roceOf(t, g.data)
	if g.icrc != link.ICRCGood || f.UDP.SourcePort() != wire.RoCEv2Port {
		t.Errorf("ICRC %v, source port %d; want good, 4791", g.icrc, f.UDP.SourcePort())
	}
	n := len(sent) - wire.ICRCSize
	if !bytes.Equal(got[:n], sent[:n]) || bytes.Equal(got[n:], sent[n:]) {
		t.Errorf("want the packet unchanged but for a new ICRC:\nsent % x\ngot  % x", sent, got)
	}
	if c := a.Counters(); c.Resealed != 1 {
		t.Errorf("Resealed = %d, want 1", c.Resealed)
	}
}

// TestPerPacketTOSTTL: one sendmmsg batch whose datagrams each carry their
// own TOS and TTL (IP_TOS/IP_TTL control messages); the receiver reads
// them back from IP_RECVTOS/IP_RECVTTL. TTL 1 is what ibv_rc_pingpong
// asks for; a TOS with ECN bits set keeps them on a UDP socket.
func TestPerPacketTOSTTL(t *testing.T) {
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	rb := newRecorder()
	b.Attach(rb)
	vals := []struct{ tos, ttl uint8 }{{0, 64}, {0xb8, 1}, {0xb9, 255}, {0x03, 2}, {0x20, 0}}
	var pkts []*link.Packet
	for i, v := range vals {
		pkts = append(pkts, build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 8, seq: uint32(i), tclass: v.tos, hop: v.ttl}))
	}
	// build turns hop 0 into 64; make the last one really 0.
	last := pkts[len(pkts)-1]
	var f wire.Frame
	if err := wire.ParseFrame(last.Data, &f); err != nil {
		t.Fatal(err)
	}
	f.IPv4.SetTTL(0)
	if err := a.Send(pkts); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frames", func() bool { return rb.n() == len(vals) })
	for i, g := range rb.got() {
		f, _ := roceOf(t, g.data)
		want := vals[i]
		if want.ttl == 0 {
			want.ttl = 64 // no IP_TTL message: the socket's default
		}
		if f.IPv4.TOS() != want.tos || f.IPv4.TTL() != want.ttl {
			t.Errorf("frame %d: TOS %#x TTL %d; sent %#x %d", i, f.IPv4.TOS(), f.IPv4.TTL(), want.tos, want.ttl)
		}
	}
	if c := a.Counters(); c.SendCalls != 1 {
		t.Errorf("%d sendmmsg calls, want 1", c.SendCalls)
	}
}

// TestIPv6Loopback: a link on ::1 sends to itself (loopback has one IPv6
// address); traffic class and hop limit arrive per packet and the ICRC is
// verified.
func TestIPv6Loopback(t *testing.T) {
	l := newLink(t, udp.Config{Addrs: []netip.Addr{lo6}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	r := newRecorder()
	l.Attach(r)
	var sent [][]byte
	var pkts []*link.Packet
	for i, c := range opcodeCases {
		p := build(t, l.Pool(), frameSpec{op: c.op, src: lo6, dst: lo6, payload: c.payload, seq: uint32(i), tclass: uint8(i), hop: uint8(10 + i)})
		_, roce := roceOf(t, p.Data)
		sent = append(sent, bytes.Clone(roce))
		pkts = append(pkts, p)
	}
	if err := l.Send(pkts); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frames", func() bool { return r.n() == len(sent) })
	for i, g := range r.got() {
		f, roce := roceOf(t, g.data)
		if f.IPv6 == nil || !bytes.Equal(roce, sent[i]) || g.icrc != link.ICRCGood {
			t.Errorf("frame %d: IPv6 %v, same %v, ICRC %v", i, f.IPv6 != nil, bytes.Equal(roce, sent[i]), g.icrc)
			continue
		}
		if f.IPv6.TrafficClass() != uint8(i) || f.IPv6.HopLimit() != uint8(10+i) {
			t.Errorf("frame %d: traffic class %d hop limit %d; sent %d %d", i, f.IPv6.TrafficClass(), f.IPv6.HopLimit(), i, 10+i)
		}
	}
}

// TestCorruptionICRCStatus: corruption injected on the send side shows as
// ICRCBad over IPv6 and, over IPv4 through a UDP socket, as unverifiable
// (a mismatch cannot be told from a non-zero IP ID there).
func TestCorruptionICRCStatus(t *testing.T) {
	f, err := link.ParseFaults("corrupt=1,corrupt_scope=payload,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	mode := udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}
	v6 := newLink(t, udp.Config{Addrs: []netip.Addr{lo6}, Mode: mode, Faults: f})
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode, Faults: f})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: mode})
	r6, rb := newRecorder(), newRecorder()
	v6.Attach(r6)
	b.Attach(rb)
	const n = 20
	for i := range n {
		_ = v6.Send([]*link.Packet{build(t, v6.Pool(), frameSpec{op: wire.RCSendOnly, src: lo6, dst: lo6, payload: 64, seq: uint32(i)})})
		_ = a.Send([]*link.Packet{build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 64, seq: uint32(i)})})
	}
	waitFor(t, "frames", func() bool { return r6.n() == n && rb.n() == n })
	if c := v6.Counters(); c.ICRCBad != n || c.Faults.Corrupted != n {
		t.Errorf("IPv6: %d bad ICRCs, %d corrupted; want %d", c.ICRCBad, c.Faults.Corrupted, n)
	}
	if c := b.Counters(); c.ICRCUnverifiable != n || c.ICRCGood != 0 {
		t.Errorf("IPv4: %d unverifiable, %d good; want %d, 0", c.ICRCUnverifiable, c.ICRCGood, n)
	}
}

// TestSendChecks: frames the link cannot send are counted by reason and
// released; nothing panics, Send returns nil.
func TestSendChecks(t *testing.T) {
	pool := link.NewPool(0)
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}, MTU: 1500, Pool: pool})
	raw := func(b []byte) *link.Packet {
		p := pool.Get()
		p.Data = p.Buf()[:copy(p.Buf(), b)]
		return p
	}
	good := build(t, pool, frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 16})
	tooBig := build(t, pool, frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 4096})
	foreign := build(t, pool, frameSpec{op: wire.RCSendOnly, src: netip.MustParseAddr("127.0.0.9"), dst: lo3, payload: 16})
	otherPort := raw(good.Data)
	binary.BigEndian.PutUint16(otherPort.Data[wire.EthernetSize+wire.IPv4MinimumSize+2:], 9999)
	options := raw(good.Data)
	options.Data[wire.EthernetSize] = 0x46 // IHL 6: one option word, lengths now inconsistent
	short := raw(good.Data[:wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize+4])
	arp := raw(append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x06}, make([]byte, 28)...))
	pkts := []*link.Packet{raw([]byte{1, 2, 3}), tooBig, foreign, otherPort, options, short, arp, nil, good}
	if err := a.Send(pkts); err != nil {
		t.Fatal(err)
	}
	c := a.Counters()
	want := map[udp.Reason]uint64{
		udp.Reason(link.DropRunt):     1,
		udp.Reason(link.DropTooBig):   1,
		udp.ReasonNoSocket:            1,
		udp.ReasonMalformed:           4,
		udp.Reason(link.DropLinkDown): 0,
	}
	for r, n := range want {
		if c.TxDrops[r] != n {
			t.Errorf("TxDrops[%v] = %d, want %d", r, c.TxDrops[r], n)
		}
	}
	if c.TxFrames != 1 || c.SendCalls != 1 {
		t.Errorf("TxFrames %d SendCalls %d; want 1 1", c.TxFrames, c.SendCalls)
	}
	// Every packet is back but those the receive goroutine keeps posted.
	waitFor(t, "only receive buffers outstanding", func() bool { return pool.Outstanding() == int64(a.BatchSize()) })
}

// TestReceiveMalformed: datagrams that are not RoCEv2 packets (empty,
// shorter than a BTH and ICRC, longer than a buffer) are counted and
// dropped, and the link keeps receiving.
func TestReceiveMalformed(t *testing.T) {
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	rb := newRecorder()
	b.Attach(rb)
	c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo2, 0)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo3, wire.RoCEv2Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range [][]byte{{}, {1, 2, 3}, make([]byte, 15), make([]byte, 8000)} {
		if _, err := c.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	// Then a frame of ours, which must arrive.
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}})
	if err := a.Send([]*link.Packet{build(t, a.Pool(), frameSpec{op: wire.RCAcknowledge, src: lo2, dst: lo3})}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frame", func() bool { return rb.n() == 1 })
	cb := b.Counters()
	if cb.RxDrops[udp.ReasonMalformed] != 3 || cb.RxDrops[udp.ReasonTruncated] != 1 || cb.RxFrames != 1 {
		t.Errorf("malformed %d truncated %d received %d; want 3 1 1", cb.RxDrops[udp.ReasonMalformed], cb.RxDrops[udp.ReasonTruncated], cb.RxFrames)
	}
}

// TestLinkDownUp: while a link is down its Send drops, what arrives for it
// is dropped, its Receiver hears of both changes; up again, it carries.
func TestLinkDownUp(t *testing.T) {
	mode := udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: mode})
	ra, rb := newRecorder(), newRecorder()
	a.Attach(ra)
	b.Attach(rb)
	send := func(from *udp.Link, src, dst netip.Addr) {
		t.Helper()
		if err := from.Send([]*link.Packet{build(t, from.Pool(), frameSpec{op: wire.RCSendOnly, src: src, dst: dst, payload: 32})}); err != nil {
			t.Fatal(err)
		}
	}
	a.SetUp(false)
	a.SetUp(false) // no second notification
	if a.State() != link.StateDown {
		t.Fatal("not down")
	}
	send(a, lo2, lo3)
	if c := a.Counters(); c.TxDrops[link.DropLinkDown] != 1 || c.TxFrames != 0 {
		t.Errorf("down: TxDrops[link down] %d TxFrames %d; want 1 0", c.TxDrops[link.DropLinkDown], c.TxFrames)
	}
	send(b, lo3, lo2) // arrives at a down link
	waitFor(t, "receive-side drop", func() bool { return a.Counters().RxDrops[link.DropLinkDown] == 1 })
	a.SetUp(true)
	send(a, lo2, lo3)
	send(b, lo3, lo2)
	waitFor(t, "frames after up", func() bool { return rb.n() == 1 && ra.n() == 1 })
	if got := ra.stateLog(); len(got) != 2 || got[0] != link.StateDown || got[1] != link.StateUp {
		t.Errorf("state changes %v; want [down up]", got)
	}
}

// TestCloseSend: after Close, Send releases what it is given and returns
// net.ErrClosed; the cleanup checks goroutines and buffers.
func TestCloseSend(t *testing.T) {
	pool := link.NewPool(0)
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}, Pool: pool})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	p := build(t, pool, frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3})
	if err := a.Send([]*link.Packet{p}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v, want net.ErrClosed", err)
	}
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets outstanding after Close and Send", n)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSetAddrs: a GID added at run time gets its socket (frames from it go
// out with that source), a GID removed loses it (frames from it are
// dropped, ReasonNoSocket), and the port stops answering for it.
func TestSetAddrs(t *testing.T) {
	mode := udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: mode})
	rb := newRecorder()
	b.Attach(rb)
	if err := a.SetAddrs([]netip.Addr{lo2, lo4}); err != nil {
		t.Fatal(err)
	}
	if got := a.Addrs(); len(got) != 2 || got[1] != lo4 {
		t.Fatalf("Addrs = %v", got)
	}
	_ = a.Send([]*link.Packet{build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo4, dst: lo3, payload: 4})})
	waitFor(t, "frame from the new address", func() bool { return rb.n() == 1 })
	if f, _ := roceOf(t, rb.got()[0].data); f.Src().Addr() != lo4 {
		t.Errorf("source %v, want %v", f.Src(), lo4)
	}
	if err := a.SetAddrs([]netip.Addr{lo4}); err != nil {
		t.Fatal(err)
	}
	_ = a.Send([]*link.Packet{build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: 4})})
	if c := a.Counters(); c.TxDrops[udp.ReasonNoSocket] != 1 {
		t.Errorf("TxDrops[no socket] = %d, want 1", c.TxDrops[udp.ReasonNoSocket])
	}
	// lo2:4791 is free again.
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo2, wire.RoCEv2Port)))
	if err != nil {
		t.Fatalf("%v:4791 still bound: %v", lo2, err)
	}
	c.Close()
}

// TestDefaultMode: the automatic mode sends through UDP and receives
// through AF_PACKET when the process may open one, else through UDP.
func TestDefaultMode(t *testing.T) {
	l := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}})
	want := udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}
	if fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0); err == nil {
		unix.Close(fd) // CAP_NET_RAW
		want.Recv = udp.IOPacket
	}
	if l.Mode() != want {
		t.Errorf("Mode %v, want %v", l.Mode(), want)
	}
	t.Logf("default mode here: %v (%v)", l.Mode(), l)
}

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want udp.Mode
		err  bool
	}{
		{"auto", udp.Mode{}, false},
		{"udp", udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}, false},
		{"packet", udp.Mode{Send: udp.IOPacket, Recv: udp.IOPacket}, false},
		{"send=udp,recv=packet", udp.Mode{Send: udp.IOUDP, Recv: udp.IOPacket}, false},
		{" recv = packet ", udp.Mode{Recv: udp.IOPacket}, false},
		{"send=raw", udp.Mode{}, true},
		{"send=udp,send=udp", udp.Mode{}, true},
		{"", udp.Mode{}, true},
		{"udp,gso=off", udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP, NoGSO: true}, false},
		{"send=udp,recv=packet,gso=off", udp.Mode{Send: udp.IOUDP, Recv: udp.IOPacket, NoGSO: true}, false},
		{"auto, gso = off", udp.Mode{NoGSO: true}, false},
		{"packet,gso=on", udp.Mode{Send: udp.IOPacket, Recv: udp.IOPacket}, false},
		{"gso=off", udp.Mode{}, true},
		{"udp,gso=maybe", udp.Mode{}, true},
		{"udp,gso=off,gso=off", udp.Mode{}, true},
		{"udp,wait=poller", udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP, WaitInPoller: true}, false},
		{"send=udp,recv=packet,wait=poller,gso=off", udp.Mode{Send: udp.IOUDP, Recv: udp.IOPacket, NoGSO: true, WaitInPoller: true}, false},
		{"auto,gso=off, wait = thread", udp.Mode{NoGSO: true}, false},
		{"udp,wait=poller,wait=thread", udp.Mode{}, true},
		{"udp,wait=sometimes", udp.Mode{}, true},
		{"wait=poller", udp.Mode{}, true},
	} {
		got, err := udp.ParseMode(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err == nil {
			if back, err := udp.ParseMode(got.String()); err != nil || back != got {
				t.Errorf("ParseMode(%q) = %v, %v; want round trip", got.String(), back, err)
			}
		}
	}
}

// blocker is a Receiver that holds the first batch until released, so that
// the socket's receive buffer fills up.
type blocker struct {
	recorder
	gate chan struct{}
}

func (b *blocker) Receive(pkts []*link.Packet) {
	<-b.gate
	b.recorder.Receive(pkts)
}

// TestReceiveOverflow: datagrams the kernel drops because the link did not
// read them in time are counted (SO_RXQ_OVFL), so that sent = received +
// overflow. The sender sends one datagram per frame: the kernel counts
// dropped datagrams, and a GSO send is one datagram of many frames.
func TestReceiveOverflow(t *testing.T) {
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP, NoGSO: true}})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udpMode, SocketBuffer: 64 << 10})
	rb := &blocker{recorder: recorder{}, gate: make(chan struct{})}
	b.Attach(rb)
	const n = 400
	sendSeq(t, a, 0, n, 50)
	time.Sleep(50 * time.Millisecond)
	close(rb.gate)
	// Once the queue is drained, one more carries the final count.
	for last := -1; rb.n() != last; {
		last = rb.n()
		time.Sleep(50 * time.Millisecond)
	}
	sendSeq(t, a, n, 1, 1)
	deadline := time.Now().Add(10 * time.Second)
	for uint64(rb.n())+b.Counters().RxDrops[udp.ReasonOverflow] != n+1 {
		if time.Now().After(deadline) {
			t.Fatalf("received %d, counters %+v\nsender %+v", rb.n(), b.Counters(), a.Counters())
		}
		time.Sleep(time.Millisecond)
	}
	c := b.Counters()
	if c.RxDrops[udp.ReasonOverflow] == 0 {
		t.Errorf("no overflow with a 64 KiB buffer and %d frames", n)
	}
	t.Logf("%d sent: %d received, %d dropped by the kernel for a full buffer", n+1, rb.n(), c.RxDrops[udp.ReasonOverflow])
}

// keeper is a Receiver that keeps what it receives until told to let go.
type keeper struct {
	mu   sync.Mutex
	kept []*link.Packet
}

func (k *keeper) Receive(pkts []*link.Packet) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, pkts...)
}

func (k *keeper) LinkStateChanged(link.State) {}

func (k *keeper) n() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.kept)
}

func (k *keeper) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.kept {
		p.Release()
	}
	k.kept = nil
}

// TestReceiveNoBuffer: when the device holds every buffer of a bounded
// pool, datagrams land in a scratch buffer and are counted as dropped for
// want of a buffer (a NIC with no free receive descriptor); once buffers
// come back, receiving resumes.
func TestReceiveNoBuffer(t *testing.T) {
	const batch, spare = 8, 4
	pool := link.NewPool(batch + spare)
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: udpMode})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udpMode, Pool: pool, BatchSize: batch})
	k := &keeper{}
	b.Attach(k)
	defer k.release()
	const n = 40
	for i := range n {
		sendSeq(t, a, i, 1, 1)
		waitFor(t, "frame accounted for", func() bool {
			return uint64(k.n())+b.Counters().RxDrops[link.DropNoBuffer] == uint64(i+1)
		})
	}
	c := b.Counters()
	if k.n() > batch+spare || c.RxDrops[link.DropNoBuffer] < n-batch-spare {
		t.Errorf("kept %d, dropped for no buffer %d", k.n(), c.RxDrops[link.DropNoBuffer])
	}
	k.release()
	sendSeq(t, a, n, 1, 1)
	waitFor(t, "receiving again", func() bool { return k.n() == 1 })
}

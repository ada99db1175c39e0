package daemon_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// lbSide is what one side of a loopback exchange owns: a PD with a
// registered buffer, a CQ, an RC QP and a UD QP, all in ctx.
type lbSide struct {
	ctx *client.Context
	pd  *client.PD
	buf []byte
	mr  *client.MR
	cq  *client.CQ
	rc  *client.QP
	ud  *client.QP
	psn uint32
}

const lbQKey = 0x51515151

func newLBSide(t *testing.T, ctx *client.Context, psn uint32) *lbSide {
	t.Helper()
	s := &lbSide{ctx: ctx, psn: psn}
	var err error
	if s.pd, err = ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.pd.Dealloc() })
	if s.buf, err = ctx.AllocBuffer(256 << 10); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(s.buf, client.AccessLocalWrite|client.AccessRemoteWrite|client.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.mr.Dereg() })
	if s.cq, err = ctx.CreateCQ(256, nil, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cq.Destroy() })
	caps := client.QPCapabilities{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}
	for _, q := range []struct {
		qp  **client.QP
		typ client.QPType
	}{{&s.rc, client.QPTypeRC}, {&s.ud, client.QPTypeUD}} {
		if *q.qp, err = s.pd.CreateQP(client.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Type: q.typ, Cap: caps}); err != nil {
			t.Fatal(err)
		}
		qp := *q.qp
		t.Cleanup(func() { qp.Destroy() })
	}
	if err := s.rc.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1,
		AccessFlags: client.AccessRemoteWrite | client.AccessRemoteRead},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := s.ud.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, QKey: lbQKey},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrQKey); err != nil {
		t.Fatal(err)
	}
	if err := s.ud.Modify(&client.QPAttr{State: client.QPSRTR}, client.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := s.ud.Modify(&client.QPAttr{State: client.QPSRTS, SQPSN: psn}, client.AttrState|client.AttrSQPSN); err != nil {
		t.Fatal(err)
	}
	return s
}

// connect moves s's RC QP to RTS towards peer's, both addressed by GID
// index gidx (so the destination is the device's own GID of that index).
func (s *lbSide) connect(t *testing.T, peer *lbSide, gidx int, gid client.GID) {
	t.Helper()
	a := &client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: peer.rc.QPN(), RQPSN: peer.psn,
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AH: client.AHAttr{IsGlobal: true, DGID: gid, SGIDIndex: uint8(gidx), HopLimit: 1, PortNum: 1}}
	if err := s.rc.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
		client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		t.Fatalf("RTR: %v", err)
	}
	a.State, a.Timeout, a.RetryCnt, a.RNRRetry, a.SQPSN, a.MaxRdAtomic = client.QPSRTS, 14, 7, 7, s.psn, 16
	if err := s.rc.Modify(a, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
		client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
		t.Fatalf("RTS: %v", err)
	}
}

// portGIDs returns the used entries of port 1's GID table by index.
func portGIDs(t *testing.T, c *client.Context) map[int]client.GID {
	t.Helper()
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]client.GID{}
	for i := range int(pa.GIDTableLen) {
		if g, err := c.QueryGID(1, i); err == nil && !g.IsZero() {
			out[i] = g
		}
	}
	return out
}

// TestLoopbackGIDs is Done-when item 4 of issue 11 through the Go client:
// on one daemon, two RC QPs and two UD QPs — of one context, and of two
// contexts (two programs) — exchange SEND, WRITE and READ (RC) and SEND
// (UD) byte for byte through every GID index of the port: 0, the fe80::
// default GID, which no interface of lo has, and 1, ::ffff:<addr>. Every
// frame stays inside the device (docs/dataplane.md "Loopback"): the port's
// loopback counter takes them all, the UDP link sees none, and the
// capture (--pcap) has each of them once.
func TestLoopbackGIDs(t *testing.T) {
	var pcap syncBuf
	n := startNode(t, "ietl", testaddr.Loopback(t, 1)[0].String(), func(c *daemon.Config) { c.PcapWriter = &pcap })
	c0 := n.open(t)
	gids := portGIDs(t, c0)
	if g, ok := gids[0]; !ok || !netip.AddrFrom16(g).IsLinkLocalUnicast() {
		t.Fatalf("GID 0 is %v, want the fe80:: default GID (table %v)", g, gids)
	}
	if g, ok := gids[1]; !ok || netip.AddrFrom16(g).Unmap() != n.addr {
		t.Fatalf("GID 1 is %v, want ::ffff:%v (table %v)", g, n.addr, gids)
	}
	for gidx := range len(gids) + 1 { // every used entry; the one after them is checked to be unused
		gid, ok := gids[gidx]
		if !ok {
			if gidx != len(gids) {
				t.Fatalf("GID table has a hole at %d: %v", gidx, gids)
			}
			continue
		}
		for _, tc := range []struct {
			name     string
			contexts int
		}{{"one-context", 1}, {"two-contexts", 2}} {
			t.Run(fmt.Sprintf("gid%d-%s/%s", gidx, gid, tc.name), func(t *testing.T) {
				ca, cb := c0, c0
				if tc.contexts == 2 {
					ca, cb = n.open(t), n.open(t)
				}
				before, err := n.d.Stats(-1)
				if err != nil {
					t.Fatal(err)
				}
				a, b := newLBSide(t, ca, 0x1000), newLBSide(t, cb, 0x2000)
				a.connect(t, b, gidx, gid)
				b.connect(t, a, gidx, gid)
				lbExchange(t, a, b, gidx, gid)
				lbCounters(t, n, before)
			})
		}
	}
	// The capture, complete once the daemon is closed: every looped-back
	// frame once, between two of the port's GIDs, its ICRC good.
	s, err := n.d.Stats(-1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.d.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(strings.NewReader(pcap.String()))
	if err != nil {
		t.Fatal(err)
	}
	own := map[netip.Addr]bool{}
	for _, g := range gids {
		own[netip.AddrFrom16(g).Unmap()] = true
	}
	var f wire.Frame
	k := uint64(0)
	for ; ; k++ {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.ParseFrame(data, &f); err != nil {
			t.Fatalf("captured frame %d: %v", k, err)
		}
		if err := f.VerifyICRC(); err != nil {
			t.Fatalf("captured frame %d: %v", k, err)
		}
		if !own[f.Src().Addr().Unmap()] || !own[f.Dst().Addr().Unmap()] {
			t.Fatalf("captured frame %d: %v → %v, not between the port's GIDs", k, f.Src(), f.Dst())
		}
	}
	if lb := s.Port.Loopback.Frames; k != lb || lb == 0 || s.Port.Link.TxFrames != 0 {
		t.Fatalf("capture has %d frames; the daemon looped back %d and sent %d on the link", k, lb, s.Port.Link.TxFrames)
	}
}

// lbExchange runs the operations and checks every byte.
func lbExchange(t *testing.T, a, b *lbSide, gidx int, gid client.GID) {
	t.Helper()
	const d = 10 * time.Second
	fill(a.buf, uint64(gidx)+1)
	// RC SEND a → b, at sizes around the MTU.
	for i, size := range []int{0, 1, 1024, 1025, 40000} {
		clear(b.buf)
		if _, err := b.rc.PostRecv([]client.RecvWR{{WrID: uint64(i), SGList: []client.SGE{b.mr.SGE(0, 64<<10)}}}); err != nil {
			t.Fatal(err)
		}
		var sge []client.SGE
		if size > 0 {
			sge = []client.SGE{a.mr.SGE(0, size)}
		}
		if _, err := a.rc.PostSend([]client.SendWR{{WrID: uint64(i), Opcode: client.WRSend, Flags: client.SendSignaled, SGList: sge}}); err != nil {
			t.Fatal(err)
		}
		ws := poll(t, a.cq, 1, d)
		wantOK(t, ws)
		wr := poll(t, b.cq, 1, d)
		wantOK(t, wr)
		if wr[0].Opcode != client.WCRecv || wr[0].ByteLen != uint32(size) || wr[0].QPNum != b.rc.QPN() {
			t.Fatalf("SEND of %d: receive completion %+v", size, wr[0])
		}
		if !bytes.Equal(b.buf[:size], a.buf[:size]) {
			t.Fatalf("SEND of %d bytes: payload differs", size)
		}
	}
	// RC WRITE a → b, READ it back from b into a's second half.
	const n = 100 << 10
	clear(b.buf)
	if _, err := a.rc.PostSend([]client.SendWR{{WrID: 10, Opcode: client.WRRDMAWrite, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr + 3, RKey: b.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	ws := poll(t, a.cq, 1, d)
	wantOK(t, ws)
	if !bytes.Equal(b.buf[3:3+n], a.buf[:n]) {
		t.Fatal("WRITE payload differs")
	}
	clear(a.buf[128<<10:])
	if _, err := a.rc.PostSend([]client.SendWR{{WrID: 11, Opcode: client.WRRDMARead, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(128<<10, n)}, RemoteAddr: b.mr.Addr + 3, RKey: b.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	ws = poll(t, a.cq, 1, d)
	wantOK(t, ws)
	if ws[0].Opcode != client.WCRDMARead || ws[0].ByteLen != n || !bytes.Equal(a.buf[128<<10:128<<10+n], a.buf[:n]) {
		t.Fatalf("READ %+v: payload differs", ws[0])
	}
	// UD SEND a → b through an AH to the GID, and b → a.
	for i, dir := range []struct{ from, to *lbSide }{{a, b}, {b, a}} {
		ah, err := dir.from.pd.CreateAH(client.AHAttr{IsGlobal: true, DGID: gid, SGIDIndex: uint8(gidx), HopLimit: 64, PortNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		const size = 1000
		fill(dir.from.buf[:size], uint64(10*gidx+i))
		clear(dir.to.buf[:size+40])
		if _, err := dir.to.ud.PostRecv([]client.RecvWR{{WrID: 20, SGList: []client.SGE{dir.to.mr.SGE(0, size+40)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := dir.from.ud.PostSend([]client.SendWR{{WrID: 21, Opcode: client.WRSendWithImm, Flags: client.SendSignaled,
			ImmData: uint32(i), SGList: []client.SGE{dir.from.mr.SGE(0, size)}, AH: ah, RemoteQPN: dir.to.ud.QPN(),
			RemoteQKey: lbQKey}}); err != nil {
			t.Fatal(err)
		}
		wantOK(t, poll(t, dir.from.cq, 1, d))
		wr := poll(t, dir.to.cq, 1, d)
		wantOK(t, wr)
		w := wr[0]
		if w.ByteLen != size+40 || w.SrcQP != dir.from.ud.QPN() || w.Flags&client.WCFlagGRH == 0 || w.ImmData != uint32(i) {
			t.Fatalf("UD receive %+v", w)
		}
		if !bytes.Equal(dir.to.buf[40:40+size], dir.from.buf[:size]) {
			t.Fatal("UD payload differs")
		}
		// The GRH area holds the IP header as received: its source is
		// the GID of this index (IPv4: the header in the last 20 bytes).
		grh := dir.to.buf[:40]
		src := netip.AddrFrom16([16]byte(grh[8:24]))
		if a := netip.AddrFrom16(gid); a.Is4In6() {
			src = netip.AddrFrom4([4]byte(grh[32:36]))
			if src != a.Unmap() {
				t.Fatalf("GRH source %v, want %v", src, a.Unmap())
			}
		} else if src != a {
			t.Fatalf("GRH source %v, want %v", src, a)
		}
	}
}

// lbCounters checks that everything the device sent since before went
// to its own receive path and nothing to the UDP socket.
func lbCounters(t *testing.T, n *node, before daemon.Stats) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := n.d.Stats(-1)
		if err != nil {
			t.Fatal(err)
		}
		p, q := s.Port, before.Port
		sent, looped := p.TxPackets-q.TxPackets, p.Loopback.Frames-q.Loopback.Frames
		// Wait out an ACK still being flushed.
		if sent == looped || time.Now().After(deadline) {
			if sent == 0 || looped != sent || p.Link.TxFrames != q.Link.TxFrames || p.Link.RxFrames != q.Link.RxFrames {
				t.Fatalf("sent %d packets, looped back %d; link frames tx %d→%d, rx %d→%d: want all looped back, none on the link",
					sent, looped, q.Link.TxFrames, p.Link.TxFrames, q.Link.RxFrames, p.Link.RxFrames)
			}
			if got := p.RxPackets - q.RxPackets; got != looped {
				t.Fatalf("the gate accepted %d of %d looped-back packets", got, looped)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
}

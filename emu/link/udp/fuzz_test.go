package udp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// seedFrame is a valid RoCEv2 frame for the fuzz corpora.
func seedFrame(tb testing.TB, v6 bool) []byte {
	ff := wire.FrameFields{SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), HopLimit: 64, SrcPort: 0xc001}
	if v6 {
		ff.SrcIP, ff.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 3}}
	b := make([]byte, link.BufferSize)
	n, err := wire.BuildFrame(b, &ff, &pf, []byte("payload!"))
	if err != nil {
		tb.Fatal(err)
	}
	return b[:n]
}

// FuzzLocate: the send-side parser and header rewriting never read or
// write outside the frame, whatever it holds, and a frame they accept
// keeps its offsets inside it.
func FuzzLocate(f *testing.F) {
	f.Add(seedFrame(f, false))
	f.Add(seedFrame(f, true))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		loc, ok := locate(b)
		if !ok {
			return
		}
		if loc.payload+loc.payloadLen() > len(b) || loc.end > len(b) || loc.udp+wire.UDPSize > loc.end || loc.payloadLen() < wire.MinPacketSize {
			t.Fatalf("offsets out of the frame: %+v len %d", loc, len(b))
		}
		_ = loc.icrc(b)
		_ = loc.storedICRC(b)
		_, _, _, _ = loc.srcAddr(b), loc.dstAddr(b), loc.trafficClass(b), loc.hopLimit(b)
		src := netip.MustParseAddr("10.0.0.9")
		if loc.v6 {
			src = netip.MustParseAddr("fd00::9")
		}
		if resealed, ok := loc.kernelHeaders(b, src, wire.RoCEv2Port); ok && resealed {
			again, ok := locate(b)
			if !ok || again.storedICRC(b) != again.icrc(b) {
				t.Fatalf("resealed frame does not verify")
			}
		}
	})
}

// FuzzReceive: whatever a datagram, its sockaddr, its control messages
// and its virtio header hold, rebuilding frames from them — one, or many
// cut from a GSO or GRO datagram whose tail lands in the overflow area —
// stays in bounds, releases every packet it does not hand on, and every
// rebuilt frame is one the device's gate can split (or rejects cleanly).
func FuzzReceive(f *testing.F) {
	f.Add(seedFrame(f, false)[42:], []byte{}, []byte{}, []byte{}, uint8(0))
	f.Add(seedFrame(f, true)[62:], []byte{}, []byte{}, []byte{}, uint8(1))
	f.Add(seedFrame(f, false), []byte{}, []byte{}, []byte{}, uint8(2))
	gro := make([]byte, unix.CmsgSpace(4))
	putCmsgInt(gro, unix.IPPROTO_UDP, unix.UDP_GRO, 40)
	f.Add(bytes.Repeat(seedFrame(f, false)[42:], 3), []byte{}, gro, []byte{}, uint8(0))
	vh := make([]byte, vnetHdrSize)
	vh[1] = vnetGSOUDPL4
	binary.NativeEndian.PutUint16(vh[4:], 100)
	f.Add(seedFrame(f, false), []byte{}, []byte{}, vh, uint8(2))
	f.Fuzz(func(t *testing.T, data, name, oob, vnet []byte, kind uint8) {
		pool := link.NewPool(0)
		l := &Link{pool: pool, batch: 1}
		sock := &udpSock{addr: netip.MustParseAddr("10.0.0.2"), port: wire.RoCEv2Port}
		l.table.Store(&sockTable{socks: []*udpSock{sock}})
		r := newRxRing(l, rxKind(kind%3), sock, nil)
		copy(r.names[2:rxNameSize], name)
		switch r.kind {
		case rxUDP4:
			binary.NativeEndian.PutUint16(r.names[0:], unix.AF_INET)
		case rxUDP6:
			binary.NativeEndian.PutUint16(r.names[0:], unix.AF_INET6)
			sock.addr = netip.MustParseAddr("fd00::2")
		case rxPacket:
			binary.NativeEndian.PutUint16(r.names[0:], unix.AF_PACKET)
			if len(name) < 8 {
				binary.NativeEndian.PutUint16(r.names[8:], arphrdLoopback)
			}
			copy(r.vnet, vnet)
		}
		p := pool.Get()
		n := copy(p.Buf()[r.iovOff:], data)
		if n < len(data) {
			n += copy(r.over, data[n:])
		}
		r.hdrs[0].Len = uint32(n)
		if r.kind == rxPacket {
			r.hdrs[0].Len += vnetHdrSize
		}
		r.hdrs[0].Hdr.SetControllen(copy(r.oob, oob))
		var out []*link.Packet
		if r.build(0, p) {
			out = append(out, p)
		} else {
			p.Release()
		}
		out = append(out, r.extra...)
		for _, q := range out {
			if len(q.Data) > link.BufferSize {
				t.Fatalf("frame of %d bytes", len(q.Data))
			}
			var fr wire.Frame
			_ = wire.ParseFrame(q.Data, &fr)
			q.Release()
		}
		if st := pool.Stats(); st.Outstanding != 0 {
			t.Fatalf("%d packets not released", st.Outstanding)
		}
	})
}

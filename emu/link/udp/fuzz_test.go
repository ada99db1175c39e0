package udp

import (
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

// FuzzReceive: whatever a datagram, its sockaddr and its control messages
// hold, rebuilding a frame from them stays in bounds, and a rebuilt frame
// is one the device's gate can split (or rejects cleanly).
func FuzzReceive(f *testing.F) {
	f.Add(seedFrame(f, false)[42:], []byte{}, []byte{}, uint8(0))
	f.Add(seedFrame(f, true)[62:], []byte{}, []byte{}, uint8(1))
	f.Add(seedFrame(f, false)[14:], []byte{}, []byte{}, uint8(2))
	f.Fuzz(func(t *testing.T, data, name, oob []byte, kind uint8) {
		l := &Link{pool: link.NewPool(0)}
		sock := &udpSock{addr: netip.MustParseAddr("10.0.0.2"), port: wire.RoCEv2Port}
		l.table.Store(&sockTable{socks: []*udpSock{sock}})
		r := &rxRing{l: l, sock: sock, kind: rxKind(kind % 3), headroom: udpHeadroom}
		var nm [rxNameSize]byte
		copy(nm[:], name)
		switch r.kind {
		case rxUDP4:
			binary.NativeEndian.PutUint16(nm[0:], unix.AF_INET)
		case rxUDP6:
			binary.NativeEndian.PutUint16(nm[0:], unix.AF_INET6)
			sock.addr = netip.MustParseAddr("fd00::2")
		case rxPacket:
			binary.NativeEndian.PutUint16(nm[0:], unix.AF_PACKET)
			r.headroom = packetHeadroom
		}
		p := l.pool.Get()
		defer p.Release()
		n := copy(p.Buf()[r.headroom:], data)
		var m rxMeta
		parseCmsgs(oob, r.kind == rxUDP6, &m)
		var ok bool
		switch r.kind {
		case rxUDP4:
			ok = r.buildUDP4(p, n, nm[:], oob)
		case rxUDP6:
			ok = r.buildUDP6(p, n, nm[:], oob)
		default:
			ok = r.buildPacket(p, n, nm[:])
		}
		if !ok {
			return
		}
		var fr wire.Frame
		_ = wire.ParseFrame(p.Data, &fr)
	})
}

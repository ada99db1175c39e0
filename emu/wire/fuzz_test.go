package wire_test

import (
	"bytes"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// FuzzParse feeds arbitrary bytes to the gate, as an Ethernet frame
// (frame=true: ParseFrame) or as a UDP payload (frame=false: Parse), and
// checks invariants rather than outputs: no panic; on success every view
// lies inside the input, the views tile the packet in order and their
// lengths add up, the opcode's header set is exactly what is present, and
// re-encoding the decoded headers reproduces the input bytes; Seal then
// VerifyICRC agree. The seed corpus in testdata/fuzz/FuzzParse holds one
// frame and one UDP payload of every opcode in the rxe capture, frames of
// every opcode built here, and the golden ICRC vectors.
func FuzzParse(f *testing.F) {
	for _, s := range opcodeSpecs {
		pf := testFields(s.op)
		n := payloadLens(s.payload)[0]
		ff := testFrameFields(false, false)
		buf := make([]byte, wire.FrameLen(&ff, s.op, n))
		if _, err := wire.BuildFrame(buf, &ff, &pf, make([]byte, n)); err != nil {
			f.Fatal(err)
		}
		f.Add(true, buf)
		f.Add(false, buf[wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize:])
	}
	f.Fuzz(func(t *testing.T, frame bool, data []byte) {
		if frame {
			var fr wire.Frame
			if err := wire.ParseFrame(data, &fr); err != nil {
				if wire.ReasonOf(err) == 0 || err.Error() == "" {
					t.Fatalf("error without a reason: %v", err)
				}
				return
			}
			checkFrame(t, data, &fr)
			return
		}
		var p wire.Packet
		if err := wire.Parse(data, &p); err != nil {
			if wire.ReasonOf(err) == 0 || err.Error() == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		checkPacket(t, data, &p)
	})
}

// checkFrame checks the invariants of a successfully parsed frame.
func checkFrame(t *testing.T, data []byte, f *wire.Frame) {
	t.Helper()
	off := 0
	if offsetIn(data, f.Ethernet) != 0 || len(f.Ethernet) != wire.EthernetSize {
		t.Fatalf("Ethernet view at %d len %d", offsetIn(data, f.Ethernet), len(f.Ethernet))
	}
	off = wire.EthernetSize
	if f.VLAN != nil {
		if offsetIn(data, f.VLAN) != off || len(f.VLAN) != wire.VLANSize {
			t.Fatalf("VLAN view misplaced")
		}
		off += wire.VLANSize
	}
	ip := []byte(f.IPv4)
	if (f.IPv4 == nil) == (f.IPv6 == nil) {
		t.Fatalf("IPv4 %v and IPv6 %v: exactly one must be set", f.IPv4 != nil, f.IPv6 != nil)
	}
	if f.IPv6 != nil {
		ip = f.IPv6
	}
	if offsetIn(data, ip) != off {
		t.Fatalf("IP header at %d, want %d", offsetIn(data, ip), off)
	}
	off += len(ip)
	if offsetIn(data, f.UDP) != off || len(f.UDP) != wire.UDPSize {
		t.Fatalf("UDP header misplaced")
	}
	off += wire.UDPSize
	if offsetIn(data, f.Packet.Raw) != off || int(f.UDP.Length()) != wire.UDPSize+len(f.Packet.Raw) {
		t.Fatalf("packet at %d len %d, UDP length %d", offsetIn(data, f.Packet.Raw), len(f.Packet.Raw), f.UDP.Length())
	}
	if f.IPv4 != nil && int(f.IPv4.TotalLength()) < len(ip)+int(f.UDP.Length()) {
		t.Fatalf("IPv4 total length %d < %d", f.IPv4.TotalLength(), len(ip)+int(f.UDP.Length()))
	}
	if f.IPv6 != nil && int(f.IPv6.PayloadLength()) < int(f.UDP.Length()) {
		t.Fatalf("IPv6 payload length %d < UDP length %d", f.IPv6.PayloadLength(), f.UDP.Length())
	}
	checkPacket(t, data, &f.Packet)

	// Sealing a copy makes the ICRC (and UDP checksum) right.
	c := append([]byte(nil), data...)
	var g wire.Frame
	if err := wire.ParseFrame(c, &g); err != nil {
		t.Fatalf("copy does not parse: %v", err)
	}
	g.Seal()
	if err := g.VerifyICRC(); err != nil {
		t.Fatalf("after Seal: %v", err)
	}
	if err := wire.ParseFrame(c, &g); err != nil {
		t.Fatalf("sealed copy does not parse: %v", err)
	}
}

// checkPacket checks the invariants of a successfully parsed packet that
// starts at offset base of data (or is data itself).
func checkPacket(t *testing.T, data []byte, p *wire.Packet) {
	t.Helper()
	raw := p.Raw
	base := offsetIn(data, raw)
	if base < 0 {
		t.Fatalf("Raw not inside the input")
	}
	op := p.Opcode()
	if !op.IsValid() || p.BTH.TVer() != 0 {
		t.Fatalf("accepted opcode %#x TVer %d", uint8(op), p.BTH.TVer())
	}
	if offsetIn(raw, p.BTH) != 0 || len(p.BTH) != wire.BTHSize {
		t.Fatalf("BTH view misplaced")
	}
	// The extension headers tile the bytes after the BTH in wire order,
	// and exactly the opcode's set is present.
	off := wire.BTHSize
	views := []struct {
		h    wire.Headers
		v    []byte
		size int
	}{
		{wire.HdrRDETH, p.RDETH, wire.RDETHSize},
		{wire.HdrDETH, p.DETH, wire.DETHSize},
		{wire.HdrFETH, p.FETH, wire.FETHSize},
		{wire.HdrRETH, p.RETH, wire.RETHSize},
		{wire.HdrAtomicETH, p.AtomicETH, wire.AtomicETHSize},
		{wire.HdrAETH, p.AETH, wire.AETHSize},
		{wire.HdrAtomicAckETH, p.AtomicAckETH, wire.AtomicAckETHSize},
		{wire.HdrImmDt, p.ImmDt, wire.ImmDtSize},
		{wire.HdrIETH, p.IETH, wire.IETHSize},
	}
	for _, v := range views {
		if op.Headers().Has(v.h) != (v.v != nil) {
			t.Fatalf("%v: header %v present=%v", op, v.h, v.v != nil)
		}
		if v.v == nil {
			continue
		}
		if offsetIn(raw, v.v) != off || len(v.v) != v.size {
			t.Fatalf("%v: %v at %d len %d, want %d len %d", op, v.h, offsetIn(raw, v.v), len(v.v), off, v.size)
		}
		off += v.size
	}
	if off != op.HeaderLen() {
		t.Fatalf("%v: headers end at %d, HeaderLen %d", op, off, op.HeaderLen())
	}
	n, pad := len(p.Payload), len(p.Pad)
	if len(p.Payload) > 0 && offsetIn(raw, p.Payload) != off {
		t.Fatalf("payload misplaced")
	}
	if len(p.Pad) > 0 && offsetIn(raw, p.Pad) != off+n {
		t.Fatalf("pad misplaced")
	}
	if offsetIn(raw, p.ICRCBytes) != off+n+pad || len(p.ICRCBytes) != wire.ICRCSize || off+n+pad+wire.ICRCSize != len(raw) {
		t.Fatalf("lengths do not add up: hdr %d + payload %d + pad %d + 4 != %d", off, n, pad, len(raw))
	}
	if pad != int(p.BTH.PadCount()) || pad != wire.PadLen(n) {
		t.Fatalf("pad %d, PadCnt %d, PadLen(%d) %d", pad, p.BTH.PadCount(), n, wire.PadLen(n))
	}
	if n > wire.MaxPMTU {
		t.Fatalf("payload %d > %d", n, wire.MaxPMTU)
	}
	// Re-encoding the decoded headers reproduces them byte for byte.
	fields := p.Fields()
	out := bytes.Repeat([]byte{0xa5}, len(raw))
	var q wire.Packet
	m, err := wire.EncodePacket(out, &fields, n, &q)
	if err != nil {
		t.Fatalf("re-encode %v: %v", op, err)
	}
	if m != len(raw) || !bytes.Equal(out[:off], raw[:off]) {
		t.Fatalf("re-encoded headers differ:\n got % x\nwant % x", out[:off], raw[:off])
	}
	// And the re-encoded packet passes the gate again.
	copy(q.Payload, p.Payload)
	if err := wire.Parse(out[:m], &q); err != nil {
		t.Fatalf("re-encoded packet rejected: %v", err)
	}
}

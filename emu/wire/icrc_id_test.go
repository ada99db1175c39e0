package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestICRCIDDeltas moves ICRCs between IPv4 IDs and compares each with the
// reference ICRC computed over the packet carrying the new ID: the segment
// IDs UDP segmentation gives (0 → 1..63), arbitrary pairs, IPv4 options,
// and packet lengths from the smallest to a 4 KiB MTU's largest.
func TestICRCIDDeltas(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	cases := []struct {
		name     string
		ihl      int
		pktLen   int
		from, to uint16
	}{
		{"segment 1 of a 4 KiB send", 5, 4096 + 28 + 4, 0, 1},
		{"segment 63", 5, 4096 + 28 + 4, 0, 63},
		{"64-byte SEND", 5, 64 + 12 + 4, 0, 5},
		{"smallest packet", 5, wire.MinPacketSize, 0, 2},
		{"back to 0", 5, 1024 + 12 + 4, 9, 0},
		{"all bits", 5, 300, 0x0000, 0xffff},
		{"arbitrary pair", 5, 777, 0xbeef, 0x1234},
		{"options", 9, 2048 + 16, 0, 17},
		{"largest header", 15, 4200, 3, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d wire.ICRCIDDeltas
			if !d.Reset(c.ihl*4, c.pktLen) {
				t.Fatal("Reset refused the shape")
			}
			for range 20 {
				ip := make([]byte, c.ihl*4)
				fill(ip)
				ip[0] = 0x40 | byte(c.ihl)
				udp := make([]byte, wire.UDPSize)
				fill(udp)
				pkt := make([]byte, c.pktLen)
				fill(pkt)
				wire.IPv4(ip).SetID(c.from)
				before := wire.ReferenceICRC(ip, udp, pkt)
				wire.IPv4(ip).SetID(c.to)
				want := wire.ReferenceICRC(ip, udp, pkt)
				if got := before ^ d.Delta(c.from, c.to); got != want {
					t.Fatalf("moved ICRC %#08x, reference for ID %d %#08x", got, c.to, want)
				}
			}
		})
	}
}

func TestICRCIDDeltasShapes(t *testing.T) {
	var d wire.ICRCIDDeltas
	for _, s := range [][2]int{{19, 100}, {64, 100}, {20, wire.MinPacketSize - 1}, {20, 1 << 20}} {
		if d.Reset(s[0], s[1]) {
			t.Errorf("Reset(%d, %d) took a shape no ICRC has", s[0], s[1])
		}
		if hl, n := d.Shape(); hl != 0 || n != 0 || d.Delta(0, 1) != 0 {
			t.Errorf("Reset(%d, %d) left a shape (%d, %d)", s[0], s[1], hl, n)
		}
	}
	if !d.Reset(20, 100) {
		t.Fatal("Reset(20, 100) refused")
	}
	if hl, n := d.Shape(); hl != 20 || n != 100 || d.Delta(7, 7) != 0 {
		t.Errorf("shape (%d, %d), Delta(7, 7) %#x", hl, n, d.Delta(7, 7))
	}
}

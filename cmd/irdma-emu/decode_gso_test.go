package main

import (
	"net/netip"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// FuzzCutGSO: whatever a captured frame holds, cutting it as a
// segmentation offload send stays in bounds; a cut gives at least two
// frames that together carry the datagram's UDP payload, in order, each
// one the gate parses or refuses cleanly, every one but the last of one
// length and each starting a BTH with the first one's P_Key.
func FuzzCutGSO(f *testing.F) {
	seed := func(n, size int) []byte {
		var out []byte
		for k := range n {
			buf := make([]byte, 8192)
			ff := wire.FrameFields{SrcIP: netip.MustParseAddr("192.0.2.1"), DstIP: netip.MustParseAddr("192.0.2.2"), HopLimit: 64, SrcPort: wire.RoCEv2Port, IPID: uint16(k)}
			pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 1, PSN: wire.PSN(k)}}
			m, err := wire.BuildFrame(buf, &ff, &pf, make([]byte, size))
			if err != nil {
				f.Fatal(err)
			}
			if out == nil {
				out = buf[:m]
			} else {
				out = append(out, buf[wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize:m]...)
			}
		}
		return out
	}
	f.Add(seed(3, 100), uint8(0))
	f.Add(seed(1, 100), uint8(0))
	f.Add(seed(4, 64)[wire.EthernetSize:], uint8(3))
	types := []linkType{linkTypeEthernet, linkTypeLinuxSLL, linkTypeLinuxSLL2, linkTypeRaw}
	f.Fuzz(func(t *testing.T, data []byte, lt uint8) {
		typ := types[int(lt)%len(types)]
		frames, ok := cutGSO(typ, data)
		if !ok {
			return
		}
		if len(frames) < 2 {
			t.Fatalf("a cut of %d frames", len(frames))
		}
		size := -1
		for i, fr := range frames {
			var pf wire.Frame
			_ = wire.ParseFrame(fr, &pf)
			var hl int
			if fr[wire.EthernetSize]>>4 == 6 {
				hl = wire.EthernetSize + wire.IPv6Size + wire.UDPSize
			} else {
				hl = wire.EthernetSize + int(fr[wire.EthernetSize]&0x0f)*4 + wire.UDPSize
			}
			n := len(fr) - hl
			if i == 0 {
				size = n
			}
			if n > size || (i < len(frames)-1 && n != size) || n < wire.MinPacketSize {
				t.Fatalf("frame %d: %d bytes of payload, the first %d", i, n, size)
			}
			if fr[hl+2] != frames[0][hl+2] || fr[hl+3] != frames[0][hl+3] {
				t.Fatalf("frame %d: another P_Key", i)
			}
		}
	})
}

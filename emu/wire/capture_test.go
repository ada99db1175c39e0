package wire_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// captureFile is real rdma_rxe traffic (testdata/captures/README.md).
const captureFile = "../../testdata/captures/rxe-rc-uc-ud-ipv4-mtu1024.pcap"

// readCapture returns the frames of a pcap file.
func readCapture(t testing.TB, name string) [][]byte {
	t.Helper()
	fh, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != ci.Length {
			t.Fatalf("frame %d truncated by the capture", len(frames)+1)
		}
		frames = append(frames, data)
	}
	return frames
}

// TestCaptureGolden decodes the rxe capture: every RoCEv2 packet passes the
// gate with a good ICRC, the opcode counts are the README's, every other
// frame is ErrNotRoCEv2, and rebuilding each packet from its decoded fields
// reproduces the captured frame byte for byte.
func TestCaptureGolden(t *testing.T) {
	frames := readCapture(t, captureFile)
	if len(frames) != 1568 {
		t.Fatalf("%d frames, want 1568", len(frames))
	}
	counts := map[wire.Opcode]int{}
	other := 0
	for i, b := range frames {
		var f wire.Frame
		err := wire.ParseFrame(b, &f)
		if errors.Is(err, wire.ErrNotRoCEv2) {
			other++
			continue
		}
		if err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		if err := f.VerifyICRC(); err != nil {
			t.Errorf("frame %d (%v): %v", i+1, f.Packet.Opcode(), err)
		}
		counts[f.Packet.Opcode()]++

		// Rebuild from the decoded fields.
		ff := wire.FrameFields{
			Dst: f.Ethernet.Dst(), Src: f.Ethernet.Src(),
			SrcIP: f.IPv4.SourceAddress(), DstIP: f.IPv4.DestinationAddress(),
			TrafficClass: f.IPv4.TOS(), HopLimit: f.IPv4.TTL(), IPID: f.IPv4.ID(),
			SrcPort: f.UDP.SourcePort(), UDPChecksum: f.UDP.Checksum() != 0,
		}
		pf := f.Packet.Fields()
		out := make([]byte, len(b))
		n, err := wire.BuildFrame(out, &ff, &pf, f.Packet.Payload)
		if err != nil {
			t.Fatalf("frame %d: BuildFrame: %v", i+1, err)
		}
		if !bytes.Equal(out[:n], b[:n]) || n != len(b) {
			t.Fatalf("frame %d (%v) rebuilt differently:\n got % x\nwant % x", i+1, f.Packet.Opcode(), out[:n], b)
		}
	}
	want := map[wire.Opcode]int{
		wire.RCSendFirst: 10, wire.RCSendMiddle: 20, wire.RCSendLast: 10, wire.RCSendOnly: 22,
		wire.RCRDMAWriteFirst: 25, wire.RCRDMAWriteMiddle: 1250, wire.RCRDMAWriteLast: 25, wire.RCRDMAWriteOnly: 13,
		wire.RCRDMAReadRequest: 13, wire.RCRDMAReadResponseFirst: 5, wire.RCRDMAReadResponseMiddle: 10,
		wire.RCRDMAReadResponseLast: 5, wire.RCRDMAReadResponseOnly: 8, wire.RCAcknowledge: 70,
		wire.RCAtomicAcknowledge: 10, wire.RCCompareSwap: 5, wire.RCFetchAdd: 5,
		wire.UCSendOnly: 10, wire.UDSendOnly: 15,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("opcode counts (-README +decoded):\n%s", diff)
	}
	if other != 1568-1531 {
		t.Errorf("%d non-RoCEv2 frames, want %d", other, 1568-1531)
	}
}

// TestCaptureSamples spot-checks decoded fields of a few captured packets
// against tshark's reading of the same frames.
func TestCaptureSamples(t *testing.T) {
	frames := readCapture(t, captureFile)
	find := func(op wire.Opcode) *wire.Frame {
		for _, b := range frames {
			f := new(wire.Frame)
			if wire.ParseFrame(b, f) == nil && f.Packet.Opcode() == op {
				return f
			}
		}
		t.Fatalf("no %v in the capture", op)
		return nil
	}
	ack := find(wire.RCAcknowledge)
	if s := ack.Packet.AETH.Syndrome(); !s.IsACK() || s.CreditCode() != wire.CreditsInvalid {
		t.Errorf("rxe ACK syndrome %v, want ACK with invalid credits (0x1f)", s)
	}
	ud := find(wire.UDSendOnly)
	if ud.Packet.DETH == nil || ud.Packet.BTH.PKey() != wire.DefaultPKey {
		t.Errorf("UD packet: DETH %v, P_Key %#x", ud.Packet.DETH, ud.Packet.BTH.PKey())
	}
	fa := find(wire.RCFetchAdd)
	if fa.Packet.AtomicETH.VA()%8 != 0 {
		t.Errorf("FetchAdd VA %#x not 8-byte aligned", fa.Packet.AtomicETH.VA())
	}
	if ud.Src().Port() < 0xc000 || ud.Dst().Port() != wire.RoCEv2Port {
		t.Errorf("UD ports %v → %v", ud.Src(), ud.Dst())
	}
}

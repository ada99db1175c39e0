package layers_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/emu/wire/layers"
)

const captureFile = "../../../testdata/captures/rxe-rc-uc-ud-ipv4-mtu1024.pcap"

func readCapture(t testing.TB) [][]byte {
	t.Helper()
	fh, err := os.Open(captureFile)
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
		data, _, err := r.ReadPacketData()
		if err != nil {
			return frames
		}
		frames = append(frames, data)
	}
}

// extLayerTypes lists, in wire order, the layer types of the extension
// headers op carries.
func extLayerTypes(op wire.Opcode) []gopacket.LayerType {
	byHeader := []struct {
		h  wire.Headers
		lt gopacket.LayerType
	}{
		{wire.HdrRDETH, layers.LayerTypeRDETH}, {wire.HdrDETH, layers.LayerTypeDETH},
		{wire.HdrFETH, layers.LayerTypeFETH}, {wire.HdrRETH, layers.LayerTypeRETH},
		{wire.HdrAtomicETH, layers.LayerTypeAtomicETH}, {wire.HdrAETH, layers.LayerTypeAETH},
		{wire.HdrAtomicAckETH, layers.LayerTypeAtomicAckETH}, {wire.HdrImmDt, layers.LayerTypeImmDt},
		{wire.HdrIETH, layers.LayerTypeIETH},
	}
	var out []gopacket.LayerType
	for _, b := range byHeader {
		if op.Headers().Has(b.h) {
			out = append(out, b.lt)
		}
	}
	return out
}

// TestNewPacketCapture decodes every frame of the rxe capture with
// gopacket.NewPacket and checks that RoCEv2 frames yield BTH and extension
// layers in wire order with the fields package wire decodes.
func TestNewPacketCapture(t *testing.T) {
	roce := 0
	for i, b := range readCapture(t) {
		pkt := gopacket.NewPacket(b, gplayers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true, SkipDecodeRecovery: true})
		var f wire.Frame
		if err := wire.ParseFrame(b, &f); err != nil {
			if pkt.Layer(layers.LayerTypeBTH) != nil {
				t.Errorf("frame %d: gopacket found a BTH in a non-RoCEv2 frame", i+1)
			}
			continue
		}
		roce++
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("frame %d: %v", i+1, el.Error())
		}
		op := f.Packet.Opcode()
		want := []gopacket.LayerType{gplayers.LayerTypeEthernet, gplayers.LayerTypeIPv4, gplayers.LayerTypeUDP, layers.LayerTypeBTH}
		want = append(want, extLayerTypes(op)...)
		if len(f.Packet.Payload) > 0 {
			want = append(want, gopacket.LayerTypePayload)
		}
		var got []gopacket.LayerType
		for _, l := range pkt.Layers() {
			got = append(got, l.LayerType())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("frame %d (%v) layers (-want +got):\n%s", i+1, op, diff)
		}
		bth := pkt.Layer(layers.LayerTypeBTH).(*layers.BTH)
		if diff := cmp.Diff(f.Packet.BTH.Fields(), bth.BTHFields); diff != "" {
			t.Fatalf("frame %d BTH (-wire +layer):\n%s", i+1, diff)
		}
		if bth.ICRC != f.Packet.ICRC() || !bytes.Equal(bth.Pad, f.Packet.Pad) {
			t.Fatalf("frame %d: ICRC %#x pad %x, want %#x %x", i+1, bth.ICRC, bth.Pad, f.Packet.ICRC(), f.Packet.Pad)
		}
		pf := f.Packet.Fields()
		for _, l := range pkt.Layers() {
			var diff string
			switch l := l.(type) {
			case *layers.DETH:
				diff = cmp.Diff(pf.DETH, l.DETHFields)
			case *layers.RETH:
				diff = cmp.Diff(pf.RETH, l.RETHFields)
			case *layers.AtomicETH:
				diff = cmp.Diff(pf.AtomicETH, l.AtomicETHFields)
			case *layers.AETH:
				diff = cmp.Diff(pf.AETH, l.AETHFields)
			case *layers.AtomicAckETH:
				diff = cmp.Diff(pf.AtomicAckETH, l.AtomicAckETHFields)
			case *layers.ImmDt:
				diff = cmp.Diff(pf.ImmDt, l.ImmDtFields)
			case *layers.IETH:
				diff = cmp.Diff(pf.IETH, l.IETHFields)
			}
			if diff != "" {
				t.Fatalf("frame %d %v (-wire +layer):\n%s", i+1, l.LayerType(), diff)
			}
		}
		if app := pkt.ApplicationLayer(); len(f.Packet.Payload) > 0 && (app == nil || !bytes.Equal(app.Payload(), f.Packet.Payload)) {
			t.Fatalf("frame %d: application payload differs", i+1)
		}
	}
	if roce != 1531 {
		t.Errorf("%d RoCEv2 frames, want 1531", roce)
	}
}

// TestDecodingLayerParser decodes the capture zero-copy with a Stack and
// checks the decoded layer sequence, including extension headers that
// follow another one (ImmDt after RETH, AtomicAckETH after AETH).
func TestDecodingLayerParser(t *testing.T) {
	var (
		eth gplayers.Ethernet
		ip4 gplayers.IPv4
		ip6 gplayers.IPv6
		udp gplayers.UDP
		pl  gopacket.Payload
	)
	s := layers.NewStack()
	dl := append([]gopacket.DecodingLayer{&eth, &ip4, &ip6, &udp, &pl}, s.DecodingLayers()...)
	parser := gopacket.NewDecodingLayerParser(gplayers.LayerTypeEthernet, dl...)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 16)

	frames := readCapture(t)
	// Add frames of the opcodes with two extension headers, which the
	// capture lacks.
	for _, op := range []wire.Opcode{wire.RCRDMAWriteOnlyWithImm, wire.UDSendOnlyWithImm, wire.RCFlush} {
		frames = append(frames, buildFrame(t, op, 8, false))
	}
	// The capture has Atomic Acknowledges (AETH then AtomicAckETH).
	for i, b := range frames {
		if err := parser.DecodeLayers(b, &decoded); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		var f wire.Frame
		if wire.ParseFrame(b, &f) != nil {
			continue
		}
		op := f.Packet.Opcode()
		want := append([]gopacket.LayerType{gplayers.LayerTypeEthernet, gplayers.LayerTypeIPv4, gplayers.LayerTypeUDP, layers.LayerTypeBTH}, extLayerTypes(op)...)
		if len(f.Packet.Payload) > 0 {
			want = append(want, gopacket.LayerTypePayload)
		}
		if diff := cmp.Diff(want, decoded); diff != "" {
			t.Fatalf("frame %d (%v) decoded (-want +got):\n%s", i+1, op, diff)
		}
		if s.BTH.Opcode != op || s.BTH.PSN != f.Packet.BTH.PSN() {
			t.Fatalf("frame %d: stack BTH %v PSN %#x", i+1, s.BTH.Opcode, s.BTH.PSN)
		}
		if op == wire.RCRDMAWriteOnlyWithImm && (s.ImmDt.Imm != 0xdeadbeef || s.RETH.RKey != 0x0a0b0c0d) {
			t.Errorf("WRITE Only with Imm: ImmDt %#x RETH %+v", s.ImmDt.Imm, s.RETH.RETHFields)
		}
	}

	b := frames[len(frames)-3]
	if n := testing.AllocsPerRun(100, func() {
		if err := parser.DecodeLayers(b, &decoded); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("DecodingLayerParser with a Stack allocates %v times per packet", n)
	}
}

func testPacketFields(op wire.Opcode) wire.PacketFields {
	return wire.PacketFields{
		BTH:          wire.BTHFields{Opcode: op, SE: true, PKey: 0xffff, DestQP: 0x123456, AckReq: true, PSN: 0xfedcba},
		DETH:         wire.DETHFields{QKey: 0x11111111, SrcQP: 0x13},
		FETH:         wire.FETHFields{SelectivityLevel: 1, PlacementType: 2},
		RETH:         wire.RETHFields{VA: 0x1000, RKey: 0x0a0b0c0d, DMALen: 8},
		AtomicETH:    wire.AtomicETHFields{VA: 0x2000, RKey: 0x77, SwapAdd: 5, Compare: 6},
		AETH:         wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid), MSN: 9},
		AtomicAckETH: wire.AtomicAckETHFields{OrigRemoteData: 0x1234},
		ImmDt:        wire.ImmDtFields{Imm: 0xdeadbeef},
		IETH:         wire.IETHFields{RKey: 0x99},
	}
}

var (
	srcMAC = net.HardwareAddr{0x52, 0x54, 0, 0x99, 0, 2}
	dstMAC = net.HardwareAddr{0x52, 0x54, 0, 0x99, 0, 3}
)

func frameFields(v6 bool) wire.FrameFields {
	ff := wire.FrameFields{
		Dst: wire.MAC(dstMAC), Src: wire.MAC(srcMAC), TrafficClass: 0x10, HopLimit: 64, IPID: 77, SrcPort: 0xc001,
	}
	if v6 {
		ff.SrcIP, ff.DstIP, ff.FlowLabel = mustAddr("fd00::2"), mustAddr("fd00::3"), 0x12345
	} else {
		ff.SrcIP, ff.DstIP = mustAddr("10.99.0.2"), mustAddr("10.99.0.3")
	}
	return ff
}

func buildFrame(t *testing.T, op wire.Opcode, n int, v6 bool) []byte {
	t.Helper()
	ff := frameFields(v6)
	ff.UDPChecksum = true
	pf := testPacketFields(op)
	if !op.HasPayload() {
		n = 0
	}
	if op == wire.RCAtomicWrite {
		n = 8
	}
	if op == wire.CNP {
		n = 16
	}
	if op.PayloadRule() == wire.PayloadPMTU {
		n = 256
	}
	payload := bytes.Repeat([]byte{0x5a}, n)
	b := make([]byte, wire.FrameLen(&ff, op, n))
	if _, err := wire.BuildFrame(b, &ff, &pf, payload); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSerializeEveryOpcode builds each opcode's frame with package wire
// (with a UDP checksum), decodes it with gopacket, serializes the decoded
// layers back with FixLengths and ComputeChecksums (ICRC computed from the
// IP and UDP layers; IPv4 and UDP checksums by gopacket), and requires the
// identical bytes, over IPv4 and IPv6.
func TestSerializeEveryOpcode(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, op := range wire.Opcodes() {
			b := buildFrame(t, op, 13, v6)
			pkt := gopacket.NewPacket(b, gplayers.LayerTypeEthernet, gopacket.DecodeOptions{SkipDecodeRecovery: true})
			if el := pkt.ErrorLayer(); el != nil {
				t.Fatalf("%v: %v", op, el.Error())
			}
			var sl []gopacket.SerializableLayer
			for _, l := range pkt.Layers() {
				sl = append(sl, l.(gopacket.SerializableLayer))
			}
			bth := pkt.Layer(layers.LayerTypeBTH).(*layers.BTH)
			bth.ICRC = 0 // must be recomputed
			bth.PadCount = 0
			udp := pkt.Layer(gplayers.LayerTypeUDP).(*gplayers.UDP)
			if err := udp.SetNetworkLayerForChecksum(pkt.NetworkLayer()); err != nil {
				t.Fatal(err)
			}
			if err := bth.SetICRCLayers(pkt.NetworkLayer(), udp); err != nil {
				t.Fatal(err)
			}
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, sl...); err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			if !bytes.Equal(buf.Bytes(), b) {
				t.Errorf("v6=%v %v: gopacket serialization differs:\n got % x\nwant % x", v6, op, buf.Bytes(), b)
			}
		}
	}
}

// TestSerializeFromScratch builds a frame from hand-made gopacket layers
// and checks it with package wire: the ICRC verifies and the fields are
// what was asked for.
func TestSerializeFromScratch(t *testing.T) {
	eth := &gplayers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: gplayers.EthernetTypeIPv4}
	ip := &gplayers.IPv4{Version: 4, TTL: 1, TOS: 0x02, Id: 5, Flags: gplayers.IPv4DontFragment, Protocol: gplayers.IPProtocolUDP,
		SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
	udp := &gplayers.UDP{SrcPort: 0xc000, DstPort: wire.RoCEv2Port}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	bth := &layers.BTH{BTHFields: wire.BTHFields{Opcode: wire.RCRDMAWriteOnlyWithImm, PKey: 0xffff, DestQP: 0x11, AckReq: true, PSN: 42}}
	if err := bth.SetICRCLayers(ip, udp); err != nil {
		t.Fatal(err)
	}
	reth := &layers.RETH{RETHFields: wire.RETHFields{VA: 0xdead0000, RKey: 0x1234, DMALen: 5}}
	imm := &layers.ImmDt{ImmDtFields: wire.ImmDtFields{Imm: 7}}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, bth, reth, imm, gopacket.Payload("hello"))
	if err != nil {
		t.Fatal(err)
	}
	var f wire.Frame
	if err := wire.ParseFrame(buf.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if err := f.VerifyICRC(); err != nil {
		t.Fatalf("ICRC: %v", err)
	}
	if f.Packet.BTH.PadCount() != 3 || string(f.Packet.Payload) != "hello" || f.Packet.ImmDt.Imm() != 7 ||
		f.Packet.RETH.VA() != 0xdead0000 || f.UDP.Checksum() == 0 {
		t.Errorf("decoded %+v payload %q", f.Packet.Fields(), f.Packet.Payload)
	}
	if want := f.UDP.CalculateChecksum(f.IPv4.SourceAddress(), f.IPv4.DestinationAddress(), f.Packet.Raw); f.UDP.Checksum() != want {
		t.Errorf("UDP checksum %#x, want %#x (it must cover the ICRC)", f.UDP.Checksum(), want)
	}

	// Missing extension layers are refused rather than mislabelled.
	buf = gopacket.NewSerializeBuffer()
	err = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, bth)
	if err == nil {
		t.Errorf("WRITE Only with Imm serialized without its RETH and ImmDt")
	}
	if err := bth.SetICRCLayers(ip, nil); err == nil {
		t.Errorf("SetICRCLayers accepted a missing UDP layer")
	}
}

// TestDecodeErrors: malformed RoCEv2 becomes a gopacket error layer with
// the wire reason, truncation is flagged.
func TestDecodeErrors(t *testing.T) {
	b := buildFrame(t, wire.RCRDMAReadRequest, 0, false)
	b[14+20+8] = 0x15 // reserved RC opcode
	pkt := gopacket.NewPacket(b, gplayers.LayerTypeEthernet, gopacket.DecodeOptions{SkipDecodeRecovery: true})
	el := pkt.ErrorLayer()
	if el == nil || !errors.Is(el.Error(), wire.ErrInvalidOpcode) {
		t.Errorf("reserved opcode: error layer %v", el)
	}
	var bth layers.BTH
	df := &feedback{}
	if err := bth.DecodeFromBytes(make([]byte, 10), df); !errors.Is(err, wire.ErrTruncated) || !df.truncated {
		t.Errorf("short BTH: %v, truncated=%v", err, df.truncated)
	}
	var reth layers.RETH
	df = &feedback{}
	if err := reth.DecodeFromBytes(make([]byte, 15), df); err == nil || !df.truncated {
		t.Errorf("short RETH: %v, truncated=%v", err, df.truncated)
	}
}

type feedback struct{ truncated bool }

func (f *feedback) SetTruncated() { f.truncated = true }

package wire_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestNoAllocs requires the data-path operations to allocate nothing:
// parse + verify of a received frame, and build + ICRC of a sent one, for
// IPv4 and IPv6.
func TestNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, v6 := range []bool{false, true} {
		ff := testFrameFields(v6, true)
		ff.UDPChecksum = v6
		pf := testFields(wire.RCRDMAWriteOnlyWithImm)
		payload := make([]byte, 1024)
		buf := make([]byte, wire.FrameLen(&ff, pf.BTH.Opcode, len(payload)))
		if _, err := wire.BuildFrame(buf, &ff, &pf, payload); err != nil {
			t.Fatal(err)
		}
		var f wire.Frame
		if n := testing.AllocsPerRun(100, func() {
			if err := wire.ParseFrame(buf, &f); err != nil {
				t.Fatal(err)
			}
			if err := f.VerifyICRC(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("v6=%v: ParseFrame+VerifyICRC allocates %v times", v6, n)
		}
		var p wire.Packet
		if n := testing.AllocsPerRun(100, func() {
			if err := wire.Parse(f.Packet.Raw, &p); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("v6=%v: Parse allocates %v times", v6, n)
		}
		if n := testing.AllocsPerRun(100, func() {
			var g wire.Frame
			if _, err := wire.EncodeFrame(buf, &ff, &pf, len(payload), &g); err != nil {
				t.Fatal(err)
			}
			copy(g.Packet.Payload, payload)
			g.Seal()
		}); n != 0 {
			t.Errorf("v6=%v: EncodeFrame+Seal allocates %v times", v6, n)
		}
		if n := testing.AllocsPerRun(100, func() {
			if _, err := wire.BuildFrame(buf, &ff, &pf, payload); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("v6=%v: BuildFrame allocates %v times", v6, n)
		}
		// A bad ICRC is reported without allocating either: a data path
		// counts such drops.
		f.Packet.Payload[0] ^= 1
		if n := testing.AllocsPerRun(100, func() {
			if wire.ReasonOf(f.VerifyICRC()) != wire.ErrICRCMismatch {
				t.Fatal("corruption not detected")
			}
		}); n != 0 {
			t.Errorf("v6=%v: failing VerifyICRC allocates %v times", v6, n)
		}
	}
}

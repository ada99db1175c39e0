package wire_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func TestSyndromeDecode(t *testing.T) {
	for _, c := range []struct {
		s       wire.Syndrome
		typ     wire.SyndromeType
		str     string
		credits int
		ok      bool
	}{
		{0x1f, wire.SyndromeACK, "ACK credits=invalid", 0, false}, // what rxe always sends
		{0x00, wire.SyndromeACK, "ACK credits=0", 0, true},
		{0x05, wire.SyndromeACK, "ACK credits=6", 6, true},
		{0x1e, wire.SyndromeACK, "ACK credits=32768", 32768, true},
		{0x2c, wire.SyndromeRNRNAK, "RNR NAK timer=12 (640µs)", 0, false}, // ibv_rc_pingpong's min_rnr_timer
		{0x20, wire.SyndromeRNRNAK, "RNR NAK timer=0 (655.36ms)", 0, false},
		{0x60, wire.SyndromeNAK, "NAK PSN sequence error", 0, false},
		{0x61, wire.SyndromeNAK, "NAK invalid request", 0, false},
		{0x62, wire.SyndromeNAK, "NAK remote access error", 0, false},
		{0x63, wire.SyndromeNAK, "NAK remote operational error", 0, false},
		{0x64, wire.SyndromeNAK, "NAK invalid RD request", 0, false},
		{0x65, wire.SyndromeNAK, "NAK reserved code 5", 0, false},
		{0x41, wire.SyndromeReserved, "reserved syndrome 0x41", 0, false},
		{0x9f, wire.SyndromeReserved4, "reserved syndrome 0x9f", 0, false},
	} {
		if c.s.Type() != c.typ {
			t.Errorf("%#02x Type = %v, want %v", uint8(c.s), c.s.Type(), c.typ)
		}
		if got := c.s.String(); got != c.str {
			t.Errorf("%#02x String = %q, want %q", uint8(c.s), got, c.str)
		}
		if c.typ == wire.SyndromeACK {
			n, ok := c.s.CreditCode().Credits()
			if n != c.credits || ok != c.ok {
				t.Errorf("%#02x Credits = %d, %v; want %d, %v", uint8(c.s), n, ok, c.credits, c.ok)
			}
		}
		if c.s.IsACK() != (c.typ == wire.SyndromeACK) || c.s.IsRNRNAK() != (c.typ == wire.SyndromeRNRNAK) ||
			c.s.IsNAK() != (c.typ == wire.SyndromeNAK) {
			t.Errorf("%#02x predicates disagree with %v", uint8(c.s), c.typ)
		}
	}
	if wire.ACKSyndrome(wire.CreditsInvalid) != 0x1f || wire.RNRNAKSyndrome(12) != 0x2c ||
		wire.NAKSyndrome(wire.NAKRemoteAccessError) != 0x62 {
		t.Errorf("syndrome constructors disagree with rxe's AETH_ACK_UNLIMITED / AETH_RNR_NAK|12 / AETH_NAK_REM_ACC_ERR")
	}
}

// TestRNRTimerTable pins IBTA Table 45 (µs), including code 25, which rxe
// mistypes as 61410.
func TestRNRTimerTable(t *testing.T) {
	want := []int{
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
		2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
		163840, 245760, 327680, 491520,
	}
	for code, us := range want {
		if got := wire.RNRTimer(code).Duration(); got != time.Duration(us)*time.Microsecond {
			t.Errorf("RNR timer %d = %v, want %dµs", code, got, us)
		}
	}
}

func TestAETHFields(t *testing.T) {
	b := make(wire.AETH, wire.AETHSize)
	b.Encode(&wire.AETHFields{Syndrome: wire.RNRNAKSyndrome(14), MSN: 0x1234567}) // MSN beyond 24 bits
	if b.Syndrome() != 0x2e || b.MSN() != 0x234567 {
		t.Errorf("AETH = % x: syndrome %#x MSN %#x", []byte(b), b.Syndrome(), b.MSN())
	}
	b.SetMSN(0xabcdef)
	b.SetSyndrome(wire.NAKSyndrome(wire.NAKPSNSequenceError))
	if string(b) != "\x60\xab\xcd\xef" {
		t.Errorf("AETH = % x", []byte(b))
	}
}

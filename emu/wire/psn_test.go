package wire_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func TestPSNArithmetic(t *testing.T) {
	const max = wire.PSNMask
	for _, c := range []struct {
		p       wire.PSN
		n       uint32
		add     wire.PSN
		sub     wire.PSN
		comment string
	}{
		{0, 1, 1, max, "zero"},
		{max, 1, 0, max - 1, "wrap forward"},
		{max - 2, 5, 2, max - 7, "wrap by more than one"},
		{0x123456, 0x1000000, 0x123456, 0x123456, "a full turn is no move"},
	} {
		if got := c.p.Add(c.n); got != c.add {
			t.Errorf("%s: %#x.Add(%#x) = %#x, want %#x", c.comment, c.p, c.n, got, c.add)
		}
		if got := c.p.Sub(c.n); got != c.sub {
			t.Errorf("%s: %#x.Sub(%#x) = %#x, want %#x", c.comment, c.p, c.n, got, c.sub)
		}
	}
	if wire.PSN(max).Next() != 0 {
		t.Errorf("Next does not wrap")
	}
	for _, c := range []struct {
		a, b wire.PSN
		diff int32
	}{
		{5, 3, 2},
		{3, 5, -2},
		{0, max, 1},              // 0 is one after 0xFFFFFF
		{max, 0, -1},             // and 0xFFFFFF one before 0
		{0x7fffff, 0, 0x7fffff},  // the largest forward distance
		{0x800000, 0, -0x800000}, // half a turn counts as behind (rxe psn_compare)
		{0x10, 0xfffff0, 0x20},   // across the wrap
		{0xfffff0, 0x10, -0x20},
	} {
		if got := c.a.Diff(c.b); got != c.diff {
			t.Errorf("%#x.Diff(%#x) = %d, want %d", c.a, c.b, got, c.diff)
		}
		if got := c.a.LessThan(c.b); got != (c.diff < 0) {
			t.Errorf("%#x.LessThan(%#x) = %v", c.a, c.b, got)
		}
		if got := c.a.LessThanEq(c.b); got != (c.diff <= 0) {
			t.Errorf("%#x.LessThanEq(%#x) = %v", c.a, c.b, got)
		}
	}
	if !wire.PSN(7).LessThanEq(7) || wire.PSN(7).LessThan(7) {
		t.Errorf("equality ordering wrong")
	}
}

func TestPSNWindow(t *testing.T) {
	const max = wire.PSNMask
	for _, c := range []struct {
		p, first wire.PSN
		size     uint32
		in       bool
	}{
		{10, 10, 1, true},
		{10, 10, 0, false},
		{11, 10, 1, false},
		{9, 10, 128, false},
		{137, 10, 128, true},
		{138, 10, 128, false},
		{2, max - 5, 128, true}, // window across the wrap
		{max - 6, max - 5, 128, false},
		{123, 456, 1 << 24, true},
	} {
		if got := c.p.InWindow(c.first, c.size); got != c.in {
			t.Errorf("%#x.InWindow(%#x, %d) = %v, want %v", c.p, c.first, c.size, got, c.in)
		}
		if c.size > 0 && c.size < 1<<24 {
			end := c.first.Add(c.size)
			if got := c.p.InRange(c.first, end); got != c.in {
				t.Errorf("%#x.InRange(%#x, %#x) = %v, want %v", c.p, c.first, end, got, c.in)
			}
		}
	}
	if !wire.PSN(max).Valid() || wire.PSN(max+1).Valid() {
		t.Errorf("Valid wrong at the 24-bit edge")
	}
}

package link_test

import (
	"errors"
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

func TestParseFaults(t *testing.T) {
	tests := []struct {
		spec string
		want link.Faults
	}{
		{"", link.Faults{}},
		{"   ", link.Faults{}},
		{"loss=0.03,reorder=0.05,dup=0.01,corrupt=0.001,seed=7",
			link.Faults{Loss: 0.03, Reorder: 0.05, Duplicate: 0.01, Corrupt: 0.001, Seed: 7}},
		{" loss = 1 , seed = 0x10 ", link.Faults{Loss: 1, Seed: 16}},
		{"loss=0", link.Faults{}},
		{"loss=-0", link.Faults{}},
		{"corrupt=1e-3,corrupt_scope=payload", link.Faults{Corrupt: 0.001, CorruptScope: link.CorruptPayload}},
		{"corrupt_scope=frame", link.Faults{CorruptScope: link.CorruptFrame}},
		{"corrupt_scope=roce", link.Faults{}},
		{"reorder=0.5,reorder_depth=4", link.Faults{Reorder: 0.5, ReorderDepth: 4}},
		{"reorder=0.5,reorder_delay=20us", link.Faults{Reorder: 0.5, ReorderDelay: 20 * time.Microsecond}},
		{"seed=18446744073709551615", link.Faults{Seed: math.MaxUint64}},
	}
	for _, tc := range tests {
		got, err := link.ParseFaults(tc.spec)
		if err != nil {
			t.Errorf("ParseFaults(%q): %v", tc.spec, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseFaults(%q) (-want +got):\n%s", tc.spec, d)
		}
		again, err := link.ParseFaults(got.String())
		if err != nil || again != got {
			t.Errorf("ParseFaults(%q.String() = %q) = %+v, %v", tc.spec, got.String(), again, err)
		}
	}
}

func TestParseFaultsErrors(t *testing.T) {
	tests := []struct {
		spec    string
		want    error
		message string // a substring of the message
	}{
		{"lose=0.1", link.ErrUnknownKey, `"lose=0.1": unknown key: want one of loss,`},
		{"Loss=0.1", link.ErrUnknownKey, "unknown key"},
		{"loss=1.5", link.ErrOutOfRange, `"loss=1.5": out of range: want a probability in [0, 1]`},
		{"loss=-0.1", link.ErrOutOfRange, "out of range"},
		{"dup=inf", link.ErrOutOfRange, "out of range"},
		{"dup=1e999", link.ErrOutOfRange, "out of range"},
		{"corrupt=NaN", link.ErrBadNumber, "bad number"},
		{"loss=abc", link.ErrBadNumber, `"loss=abc": bad number: want a probability`},
		{"loss=", link.ErrBadNumber, "bad number"},
		{"loss=3%", link.ErrBadNumber, "bad number"},
		{"seed=-1", link.ErrBadNumber, "bad number"},
		{"seed=18446744073709551616", link.ErrOutOfRange, "out of range"},
		{"seed=7x", link.ErrBadNumber, "bad number"},
		{"reorder_depth=1.5", link.ErrBadNumber, "bad number"},
		{"reorder_depth=-1", link.ErrOutOfRange, "out of range"},
		{"reorder_depth=99999999999999999999", link.ErrOutOfRange, "out of range"},
		{"reorder_depth=65537", link.ErrOutOfRange, "out of range"},
		{"reorder_delay=5", link.ErrBadNumber, "duration"},
		{"reorder_delay=-1ms", link.ErrOutOfRange, "out of range"},
		{"reorder_delay=2h", link.ErrOutOfRange, "out of range"},
		{"reorder_depth=2,reorder_delay=1ms", link.ErrConflict, "not both"},
		{"corrupt_scope=ip", link.ErrOutOfRange, "want roce, payload or frame"},
		{"loss", link.ErrSpecSyntax, `"loss": malformed element: want key=value`},
		{"=0.1", link.ErrSpecSyntax, "malformed"},
		{"loss=0.1,", link.ErrSpecSyntax, "empty element"},
		{",loss=0.1", link.ErrSpecSyntax, "empty element"},
		{"loss=0.1,,dup=0.1", link.ErrSpecSyntax, "empty element"},
		{"loss=0.1,loss=0.2", link.ErrDuplicateKey, `"loss=0.2": key given twice`},
		{"loss=0.1;dup=0.1", link.ErrBadNumber, "bad number"},
	}
	for _, tc := range tests {
		f, err := link.ParseFaults(tc.spec)
		if err == nil {
			t.Errorf("ParseFaults(%q) = %+v, want an error", tc.spec, f)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("ParseFaults(%q): %v, want %v", tc.spec, err, tc.want)
		}
		var se *link.SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParseFaults(%q): %T is not a *SpecError", tc.spec, err)
		}
		if !strings.Contains(err.Error(), tc.message) {
			t.Errorf("ParseFaults(%q): message %q does not contain %q", tc.spec, err, tc.message)
		}
		if f != (link.Faults{}) {
			t.Errorf("ParseFaults(%q) returned %+v with its error", tc.spec, f)
		}
	}
}

func TestFaultsValidate(t *testing.T) {
	bad := []link.Faults{
		{Loss: math.NaN()},
		{Duplicate: -1},
		{Corrupt: 2},
		{Reorder: math.Inf(1)},
		{ReorderDepth: -1},
		{ReorderDelay: -1},
		{ReorderDelay: 2 * link.MaxReorderDelay},
		{ReorderDepth: 1, ReorderDelay: 1},
		{CorruptScope: 9},
	}
	for _, f := range bad {
		if err := f.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", f)
		}
		if _, err := link.NewInjector(f, 0); err == nil {
			t.Errorf("NewInjector(%+v) succeeded", f)
		}
	}
	if err := (link.Faults{Loss: 1, Reorder: 0.5, ReorderDelay: time.Millisecond, CorruptScope: link.CorruptFrame}).Validate(); err != nil {
		t.Errorf("Validate of a good Faults: %v", err)
	}
}

// FuzzParseFaults asserts invariants of the parser on any input: it never
// panics; on success the result is valid and String reads back to the
// same value; on failure the error is a *SpecError wrapping one of the
// sentinels and the Faults is zero.
func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{
		"", "loss=0.03,reorder=0.05,dup=0.01,corrupt=0.001,seed=7", "loss=1", "seed=0xffffffffffffffff",
		"reorder=0.1,reorder_delay=1.5µs", "reorder=1,reorder_depth=65536", "corrupt_scope=payload,corrupt=0.5",
		"loss=,", "=", ",,", "loss=0x1p-4", "dup=1e-320", "seed=0b101", "loss=0.1,loss=0.1",
	} {
		f.Add(s)
	}
	sentinels := []error{link.ErrSpecSyntax, link.ErrUnknownKey, link.ErrBadNumber, link.ErrOutOfRange, link.ErrDuplicateKey, link.ErrConflict}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := link.ParseFaults(s)
		if err != nil {
			var se *link.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("ParseFaults(%q): %T %v is not a *SpecError", s, err, err)
			}
			known := false
			for _, e := range sentinels {
				known = known || errors.Is(err, e)
			}
			if !known {
				t.Fatalf("ParseFaults(%q): %v wraps no sentinel", s, err)
			}
			if got != (link.Faults{}) {
				t.Fatalf("ParseFaults(%q) returned %+v with an error", s, got)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("ParseFaults(%q) = %+v, which does not validate: %v", s, got, err)
		}
		again, err := link.ParseFaults(got.String())
		if err != nil || again != got {
			t.Fatalf("ParseFaults(%q) = %+v; String %q reads back as %+v, %v", s, got, got.String(), again, err)
		}
		if _, err := link.NewInjector(got, 0); err != nil {
			t.Fatalf("NewInjector(%+v): %v", got, err)
		}
	})
}

// TestFaultsFlag checks that *Faults works as a flag.Value.
func TestFaultsFlag(t *testing.T) {
	var f link.Faults
	fs := flag.NewFlagSet("irdma-emu", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&f, "faults", "fault injection")
	if err := fs.Parse([]string{"-faults", "loss=0.5,seed=3"}); err != nil {
		t.Fatal(err)
	}
	if f != (link.Faults{Loss: 0.5, Seed: 3}) {
		t.Errorf("flag set %+v", f)
	}
	if err := fs.Parse([]string{"-faults", "loss=5"}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("bad flag value: %v", err)
	}
	if f != (link.Faults{Loss: 0.5, Seed: 3}) {
		t.Errorf("a bad value changed the flag to %+v", f)
	}
}

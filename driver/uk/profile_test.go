package uk

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// TestLimitsFromGEN2Profile: the GEN2 limits this package was written
// with are the GEN_2 profile's, atomics following the feature flag.
func TestLimitsFromGEN2Profile(t *testing.T) {
	if got := LimitsFrom(profile.GEN2()); got != GEN2 {
		t.Errorf("LimitsFrom(GEN2 profile) = %+v\nwant GEN2 %+v", got, GEN2)
	}
	want := GEN2
	want.AtomicsOK = true
	if got := LimitsFrom(profile.GEN2().WithAtomics(true)); got != want {
		t.Errorf("with atomics: %+v", got)
	}
}

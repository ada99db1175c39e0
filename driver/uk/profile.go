package uk

import "github.com/irdma-emu/irdma-emu/emu/profile"

// LimitsFrom takes the uk limits from a device profile's uk_attrs (the
// only part of emu/ the driver may import). The feature flag
// IRDMA_FEATURE_ATOMIC_OPS decides AtomicsOK, as irdma_post_send does.
func LimitsFrom(p profile.Profile) Limits {
	u := p.UK
	return Limits{
		MaxWQFrags:  int(u.MaxHWWQFrags),
		MaxReadSGEs: int(u.MaxHWReadSGEs),
		MaxInline:   int(u.MaxHWInline),
		MaxSQChunk:  u.MaxHWSQChunk,
		MaxWQQuanta: u.MaxHWWQQuanta,
		MaxRQQuanta: u.MaxHWRQQuanta,
		MinWQSize:   u.MinHWWQSize,
		MinCQSize:   int(u.MinHWCQSize),
		MaxCQSize:   int(u.MaxHWCQSize),
		AtomicsOK:   u.FeatureFlags&profile.FeatureAtomicOps != 0,

		MaxSRQQuanta:     u.MaxHWSRQQuanta,
		PadFragUncounted: !p.Queues.PadFragCounted,
	}
}

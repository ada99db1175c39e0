package wire

// PSN is a 24-bit packet sequence number (IBTA Vol 1 §9.2: BTH bits 23:0 of
// the third word). All arithmetic and comparison is modulo 2^24, with the
// signed-difference rule that rxe uses (psn_compare in rxe_hdr.h shifts the
// 32-bit difference left by 8 and compares it as a signed value): a is
// "before" b when (a − b) mod 2^24 is in the upper half. Other packages must
// use these methods instead of writing PSN arithmetic by hand, as gVisor's
// tcp uses seqnum.Value.
type PSN uint32

// PSNMask covers the 24 bits of a PSN.
const PSNMask PSN = 1<<24 - 1

// MaxPSNWindow is the largest window for which PSN order is well defined:
// two PSNs further apart than this cannot be ordered (IBTA §9.7.1: the valid
// and duplicate regions are each half the PSN space).
const MaxPSNWindow = 1 << 23

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= PSNMask }

// Add returns p + n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return (p + PSN(n)) & PSNMask }

// Sub returns p − n modulo 2^24.
func (p PSN) Sub(n uint32) PSN { return (p - PSN(n)) & PSNMask }

// Next returns the PSN after p.
func (p PSN) Next() PSN { return p.Add(1) }

// Diff returns the signed distance p − q in the range [−2^23, 2^23).
func (p PSN) Diff(q PSN) int32 {
	return int32(uint32(p-q)<<8) >> 8
}

// LessThan reports whether p comes strictly before q.
func (p PSN) LessThan(q PSN) bool { return p.Diff(q) < 0 }

// LessThanEq reports whether p comes before q or equals it.
func (p PSN) LessThanEq(q PSN) bool { return p.Diff(q) <= 0 }

// InRange reports whether first <= p < end in modular order: p lies in the
// half-open interval that starts at first and ends at end.
func (p PSN) InRange(first, end PSN) bool {
	return uint32(p-first)&uint32(PSNMask) < uint32(end-first)&uint32(PSNMask)
}

// InWindow reports whether p lies in the size PSNs starting at first, i.e.
// first <= p < first+size. A size of 2^24 or more contains every PSN.
func (p PSN) InWindow(first PSN, size uint32) bool {
	return uint32(p-first)&uint32(PSNMask) < size
}

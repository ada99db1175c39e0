package link

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// FaultStats counts the faults an Injector decided.
type FaultStats struct {
	// Offered counts the frames the injector decided on.
	Offered uint64
	// Lost counts the frames it dropped.
	Lost uint64
	// Duplicated counts the frames it asked to deliver twice.
	Duplicated uint64
	// Corrupted counts the frames it changed a byte of.
	Corrupted uint64
	// Reordered counts the frames it held back.
	Reordered uint64
}

// The fault kinds; each has its own generator.
const (
	kindLoss = iota
	kindDup
	kindCorrupt
	kindReorder
	numFaultKinds
)

// Injector decides, frame by frame, which faults of a Faults to inject. It
// only decides and corrupts; carrying out a drop, a duplicate or a delay is
// the link's job, so the pair and the daemon's UDP link (on its send path)
// share it. Safe for concurrent use; the pattern is reproducible when the
// frames are offered in a reproducible order.
type Injector struct {
	faults                      Faults
	loss, dup, corrupt, reorder probability
	depth                       int

	mu  sync.Mutex
	rng [numFaultKinds]rand.PCG // guarded by mu
	// corruptRand draws bounded numbers from rng[kindCorrupt].
	corruptRand *rand.Rand // guarded by mu

	offered, lost, duplicated, corrupted, reordered atomic.Uint64
}

// probability is a probability as a threshold on a uniform uint64, so that
// a decision is one comparison.
type probability struct {
	threshold uint64
	always    bool
}

func newProbability(p float64) probability {
	if p >= 1 {
		return probability{always: true}
	}
	if !(p > 0) {
		return probability{}
	}
	// p < 1, so the product is below 2^64 and converts exactly enough.
	return probability{threshold: uint64(p * (1 << 64))}
}

func (p probability) hit(x uint64) bool { return p.always || x < p.threshold }

// NewInjector returns an injector for f. stream selects one of 2^56
// independent patterns for the same seed: the pair gives its two
// directions different streams so that they do not lose the same frames.
func NewInjector(f Faults, stream uint64) (*Injector, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	in := &Injector{
		faults:  f,
		loss:    newProbability(f.Loss),
		dup:     newProbability(f.Duplicate),
		corrupt: newProbability(f.Corrupt),
		reorder: newProbability(f.Reorder),
		depth:   f.ReorderDepth,
	}
	if in.depth == 0 && f.ReorderDelay == 0 {
		in.depth = 1
	}
	for k := range in.rng {
		in.rng[k].Seed(f.Seed, splitmix64(stream<<8|uint64(k)))
	}
	in.corruptRand = rand.New(&in.rng[kindCorrupt])
	return in, nil
}

// splitmix64 scrambles a stream number into a PCG sequence selector, so
// that neighbouring streams and kinds share no structure.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Faults returns the injector's configuration.
func (in *Injector) Faults() Faults { return in.faults }

// Verdict is the injector's decision for one frame. The zero Verdict
// delivers the frame untouched.
type Verdict struct {
	// Drop: lose the frame. Nothing else applies.
	Drop bool
	// Duplicate: deliver an unaltered copy of the frame as well, right
	// after it would have arrived without reordering.
	Duplicate bool
	// Reorder: hold the frame back, for HoldFrames later frames or for
	// HoldDelay (exactly one is non-zero).
	Reorder    bool
	HoldFrames int
	HoldDelay  time.Duration

	corruptAt  int // offset+1 of the byte to corrupt; 0: none
	corruptXOR byte
}

// Corrupts reports whether the verdict corrupts the frame, and where.
func (v *Verdict) Corrupts() (offset int, ok bool) {
	return v.corruptAt - 1, v.corruptAt > 0
}

// ApplyCorruption changes the frame's byte chosen by Decide, if any. Call
// it after taking the copy a Duplicate verdict asks for, so that the copy
// is intact.
func (v *Verdict) ApplyCorruption(frame []byte) {
	if i := v.corruptAt - 1; i >= 0 && i < len(frame) {
		frame[i] ^= v.corruptXOR
	}
}

// Decide draws the fate of one frame. It does not modify the frame (see
// ApplyCorruption). Every call draws once from each kind's generator, so
// the frames one kind hits do not depend on the other kinds' settings.
func (in *Injector) Decide(frame []byte) Verdict {
	in.mu.Lock()
	defer in.mu.Unlock()
	xl := in.rng[kindLoss].Uint64()
	xd := in.rng[kindDup].Uint64()
	xc := in.rng[kindCorrupt].Uint64()
	xr := in.rng[kindReorder].Uint64()
	in.offered.Add(1)

	var v Verdict
	if in.loss.hit(xl) {
		in.lost.Add(1)
		v.Drop = true
		return v
	}
	if in.dup.hit(xd) {
		in.duplicated.Add(1)
		v.Duplicate = true
	}
	if in.corrupt.hit(xc) {
		if off, ok := in.corruptionSiteLocked(frame); ok {
			in.corrupted.Add(1)
			v.corruptAt = off + 1
			// A non-zero XOR always changes the byte.
			v.corruptXOR = byte(1 + in.corruptRand.Uint64N(255))
		}
	}
	if in.reorder.hit(xr) {
		in.reordered.Add(1)
		v.Reorder = true
		if in.faults.ReorderDelay > 0 {
			v.HoldDelay = in.faults.ReorderDelay
		} else {
			v.HoldFrames = in.depth
		}
	}
	return v
}

// corruptionSiteLocked picks the offset of the byte to corrupt within the
// scope, drawing from the corruption generator; false if the frame is
// empty.
func (in *Injector) corruptionSiteLocked(frame []byte) (int, bool) {
	lo, hi := 0, len(frame) // the range to pick from
	skip := -1              // an offset within it never to pick
	if in.faults.CorruptScope != CorruptFrame {
		var f wire.Frame
		if wire.ParseFrame(frame, &f) == nil {
			// The views are exact header slices, so their lengths give
			// the offset of the UDP payload.
			off := len(f.Ethernet) + len(f.VLAN) + len(f.IPv4) + len(f.IPv6) + len(f.UDP)
			lo, hi = off, off+len(f.Packet.Raw)
			if in.faults.CorruptScope == CorruptPayload {
				lo += f.Packet.HeaderLen()
			} else {
				// BTH byte 4 (FECN, BECN, Resv6a) is masked to ones in
				// the ICRC: changing it would go unnoticed.
				skip = off + wire.BTHECNOffset
			}
		}
	}
	n := hi - lo
	if skip >= 0 {
		n--
	}
	if n <= 0 {
		return 0, false
	}
	i := lo + int(in.corruptRand.Uint64N(uint64(n)))
	if skip >= 0 && i >= skip {
		i++
	}
	return i, true
}

// Stats returns the injector's counters.
func (in *Injector) Stats() FaultStats {
	return FaultStats{
		Offered:    in.offered.Load(),
		Lost:       in.lost.Load(),
		Duplicated: in.duplicated.Load(),
		Corrupted:  in.corrupted.Load(),
		Reordered:  in.reordered.Load(),
	}
}

package link

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Faults configures the faults injected into one direction of a link. The
// zero value injects nothing. The compact form, for a daemon flag, is a
// comma-separated list of key=value elements (ParseFaults, String):
//
//	loss=0.03,reorder=0.05,dup=0.01,corrupt=0.001,seed=7
//
//	loss=P            drop a frame with probability P
//	dup=P             deliver a frame twice (the copy right after it)
//	corrupt=P         XOR one byte of the frame with a non-zero value
//	corrupt_scope=S   where: roce (default), payload or frame
//	reorder=P         hold a frame back so later frames overtake it
//	reorder_depth=N   ... by N frames (default 1)
//	reorder_delay=D   ... or by a delay D instead (Go duration: 20us)
//	seed=N            the random seed (uint64, decimal or 0x hex)
//
// Probabilities are in [0, 1]. The decisions are drawn from seeded
// generators, one per fault kind, so a seed reproduces the same pattern
// for the same sequence of frames, and enabling one kind of fault does not
// change which frames another kind hits.
type Faults struct {
	Loss      float64
	Duplicate float64
	Corrupt   float64
	Reorder   float64

	// ReorderDepth is how many later frames overtake a reordered frame
	// (0: 1 unless ReorderDelay is set). If fewer follow before the
	// direction goes idle, the frame arrives after those that did.
	ReorderDepth int
	// ReorderDelay, if set, delays a reordered frame by this much instead
	// of holding it for ReorderDepth frames; whatever arrives meanwhile
	// overtakes it. Exclusive with ReorderDepth.
	ReorderDelay time.Duration

	// CorruptScope says which bytes corruption may hit.
	CorruptScope CorruptScope

	// Seed seeds the generators.
	Seed uint64
}

// Limits of the integer and duration keys, generous but bounded so that a
// typo cannot hold a frame for a day.
const (
	MaxReorderDepth = 1 << 16
	MaxReorderDelay = time.Minute
)

// CorruptScope says which bytes of a frame corruption may change.
type CorruptScope uint8

// Corruption scopes.
const (
	// CorruptRoCE: a byte of the RoCEv2 packet (BTH through ICRC) other
	// than BTH byte 4 (FECN, BECN, reserved), which the ICRC masks. The
	// receiver always detects it: the gate (wire.ParseFrame) rejects a
	// damaged header, or the ICRC fails — CRC-32 catches every error
	// confined to one byte. Frames that are not RoCEv2 are hit anywhere.
	CorruptRoCE CorruptScope = iota
	// CorruptPayload: a byte after the transport headers (payload, pad or
	// the ICRC itself), so the frame still passes the gate and only the
	// ICRC check catches it.
	CorruptPayload
	// CorruptFrame: any byte of the frame, headers below RoCEv2 included
	// (a damaged MAC, IP or UDP header; some IP fields are masked from
	// the ICRC, so not every such frame is detectable by it).
	CorruptFrame

	numCorruptScopes
)

var corruptScopeText = [numCorruptScopes]string{
	CorruptRoCE:    "roce",
	CorruptPayload: "payload",
	CorruptFrame:   "frame",
}

// String returns the scope's name in the compact form.
func (s CorruptScope) String() string {
	if s < numCorruptScopes {
		return corruptScopeText[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// The keys of the compact form, in the order String writes them.
const (
	keyLoss         = "loss"
	keyReorder      = "reorder"
	keyReorderDepth = "reorder_depth"
	keyReorderDelay = "reorder_delay"
	keyDup          = "dup"
	keyCorrupt      = "corrupt"
	keyCorruptScope = "corrupt_scope"
	keySeed         = "seed"
)

var specKeys = []string{keyLoss, keyReorder, keyReorderDepth, keyReorderDelay, keyDup, keyCorrupt, keyCorruptScope, keySeed}

// Errors of the fault spec, wrapped in a *SpecError; test with errors.Is.
var (
	ErrSpecSyntax   = errors.New("malformed element")
	ErrUnknownKey   = errors.New("unknown key")
	ErrBadNumber    = errors.New("bad number")
	ErrOutOfRange   = errors.New("out of range")
	ErrDuplicateKey = errors.New("key given twice")
	ErrConflict     = errors.New("conflicting keys")
)

// SpecError is a problem with one element of a fault spec, or with one
// field of a Faults.
type SpecError struct {
	// Elem is the element as written (key=value); for a Faults, the
	// field in the compact form.
	Elem string
	// Key is the element's key, "" if it has none.
	Key string
	// Err is one of ErrSpecSyntax, ErrUnknownKey, ErrBadNumber,
	// ErrOutOfRange, ErrDuplicateKey, ErrConflict.
	Err error
	// Detail says what was expected.
	Detail string
}

// Error implements error.
func (e *SpecError) Error() string {
	s := fmt.Sprintf("link: fault spec %q: %v", e.Elem, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *SpecError) Unwrap() error { return e.Err }

// ParseFaults parses the compact form (see Faults). Spaces around elements,
// keys and values are ignored; an empty or all-space string is the zero
// Faults. Every key may appear once. The result is validated.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	if strings.TrimSpace(s) == "" {
		return f, nil
	}
	seen := make(map[string]bool, len(specKeys))
	for elem := range strings.SplitSeq(s, ",") {
		elem = strings.TrimSpace(elem)
		if elem == "" {
			return Faults{}, &SpecError{Elem: elem, Err: ErrSpecSyntax, Detail: "empty element (stray comma?)"}
		}
		k, v, ok := strings.Cut(elem, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return Faults{}, &SpecError{Elem: elem, Key: k, Err: ErrSpecSyntax, Detail: "want key=value"}
		}
		if seen[k] {
			return Faults{}, &SpecError{Elem: elem, Key: k, Err: ErrDuplicateKey}
		}
		seen[k] = true
		bad := func(err error, detail string) error {
			return &SpecError{Elem: elem, Key: k, Err: err, Detail: detail}
		}
		var err error
		switch k {
		case keyLoss:
			f.Loss, err = parseProbability(v, bad)
		case keyReorder:
			f.Reorder, err = parseProbability(v, bad)
		case keyDup:
			f.Duplicate, err = parseProbability(v, bad)
		case keyCorrupt:
			f.Corrupt, err = parseProbability(v, bad)
		case keyReorderDepth:
			n, perr := strconv.ParseInt(v, 10, 64)
			switch {
			case perr != nil && errors.Is(perr, strconv.ErrRange):
				err = bad(ErrOutOfRange, fmt.Sprintf("want 0..%d", MaxReorderDepth))
			case perr != nil:
				err = bad(ErrBadNumber, "want a whole number of frames")
			case n < 0 || n > MaxReorderDepth:
				err = bad(ErrOutOfRange, fmt.Sprintf("want 0..%d", MaxReorderDepth))
			default:
				f.ReorderDepth = int(n)
			}
		case keyReorderDelay:
			d, perr := time.ParseDuration(v)
			switch {
			case perr != nil:
				err = bad(ErrBadNumber, "want a duration such as 20us or 1ms")
			case d < 0 || d > MaxReorderDelay:
				err = bad(ErrOutOfRange, fmt.Sprintf("want 0..%v", MaxReorderDelay))
			default:
				f.ReorderDelay = d
			}
		case keyCorruptScope:
			sc, ok := parseCorruptScope(v)
			if !ok {
				err = bad(ErrOutOfRange, "want roce, payload or frame")
			}
			f.CorruptScope = sc
		case keySeed:
			n, perr := strconv.ParseUint(v, 0, 64)
			switch {
			case perr != nil && errors.Is(perr, strconv.ErrRange):
				err = bad(ErrOutOfRange, "want a uint64")
			case perr != nil:
				err = bad(ErrBadNumber, "want a uint64 (decimal or 0x hex)")
			default:
				f.Seed = n
			}
		default:
			err = bad(ErrUnknownKey, "want one of "+strings.Join(specKeys, ", "))
		}
		if err != nil {
			return Faults{}, err
		}
	}
	if err := f.Validate(); err != nil {
		return Faults{}, err
	}
	return f, nil
}

func parseProbability(v string, bad func(error, string) error) (float64, error) {
	p, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(p) {
		return 0, bad(ErrBadNumber, "want a probability such as 0.03")
	}
	if err != nil || p < 0 || p > 1 {
		return 0, bad(ErrOutOfRange, "want a probability in [0, 1]")
	}
	if p == 0 {
		p = 0 // -0 reads as 0, so that String and == agree
	}
	return p, nil
}

func parseCorruptScope(v string) (CorruptScope, bool) {
	for i, name := range corruptScopeText {
		if v == name {
			return CorruptScope(i), true
		}
	}
	return 0, false
}

// Validate checks the ranges of every field and that ReorderDepth and
// ReorderDelay are not both set.
func (f Faults) Validate() error {
	probs := []struct {
		key string
		p   float64
	}{{keyLoss, f.Loss}, {keyReorder, f.Reorder}, {keyDup, f.Duplicate}, {keyCorrupt, f.Corrupt}}
	for _, x := range probs {
		if !(x.p >= 0 && x.p <= 1) { // also catches NaN
			return &SpecError{Elem: x.key + "=" + formatProbability(x.p), Key: x.key, Err: ErrOutOfRange, Detail: "want a probability in [0, 1]"}
		}
	}
	if f.ReorderDepth < 0 || f.ReorderDepth > MaxReorderDepth {
		return &SpecError{Elem: keyReorderDepth + "=" + strconv.Itoa(f.ReorderDepth), Key: keyReorderDepth, Err: ErrOutOfRange, Detail: fmt.Sprintf("want 0..%d", MaxReorderDepth)}
	}
	if f.ReorderDelay < 0 || f.ReorderDelay > MaxReorderDelay {
		return &SpecError{Elem: keyReorderDelay + "=" + f.ReorderDelay.String(), Key: keyReorderDelay, Err: ErrOutOfRange, Detail: fmt.Sprintf("want 0..%v", MaxReorderDelay)}
	}
	if f.ReorderDepth > 0 && f.ReorderDelay > 0 {
		return &SpecError{Elem: keyReorderDepth + "," + keyReorderDelay, Key: keyReorderDelay, Err: ErrConflict, Detail: "a reordered frame is held for a number of frames or for a delay, not both"}
	}
	if f.CorruptScope >= numCorruptScopes {
		return &SpecError{Elem: keyCorruptScope + "=" + f.CorruptScope.String(), Key: keyCorruptScope, Err: ErrOutOfRange, Detail: "want roce, payload or frame"}
	}
	return nil
}

// Set parses the compact form into f, so that a *Faults is a flag.Value
// (flag.Var(&faults, "faults", ...)); on error f is unchanged.
func (f *Faults) Set(s string) error {
	v, err := ParseFaults(s)
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// Enabled reports whether any fault has a non-zero probability.
func (f Faults) Enabled() bool {
	return f.Loss > 0 || f.Duplicate > 0 || f.Corrupt > 0 || f.Reorder > 0
}

// String returns the compact form, with only the keys that differ from
// the zero value, in a fixed order; ParseFaults reads it back to the same
// Faults.
func (f Faults) String() string {
	var b strings.Builder
	add := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	if f.Loss != 0 {
		add(keyLoss, formatProbability(f.Loss))
	}
	if f.Reorder != 0 {
		add(keyReorder, formatProbability(f.Reorder))
	}
	if f.ReorderDepth != 0 {
		add(keyReorderDepth, strconv.Itoa(f.ReorderDepth))
	}
	if f.ReorderDelay != 0 {
		add(keyReorderDelay, f.ReorderDelay.String())
	}
	if f.Duplicate != 0 {
		add(keyDup, formatProbability(f.Duplicate))
	}
	if f.Corrupt != 0 {
		add(keyCorrupt, formatProbability(f.Corrupt))
	}
	if f.CorruptScope != CorruptRoCE {
		add(keyCorruptScope, f.CorruptScope.String())
	}
	if f.Seed != 0 {
		add(keySeed, strconv.FormatUint(f.Seed, 10))
	}
	return b.String()
}

// formatProbability writes the shortest decimal that parses back to p.
func formatProbability(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

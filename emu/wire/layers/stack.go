package layers

import "github.com/google/gopacket"

// Stack is one set of RoCEv2 decoding layers for a
// gopacket.DecodingLayerParser: a BTH and every extension header layer,
// wired so that each extension layer asks this BTH what follows it. Reuse a
// Stack across packets; decoding allocates nothing.
type Stack struct {
	BTH          BTH
	RDETH        RDETH
	DETH         DETH
	FETH         FETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
}

// NewStack returns a wired Stack.
func NewStack() *Stack {
	s := &Stack{}
	for _, l := range []extLayer{&s.RDETH, &s.DETH, &s.FETH, &s.RETH, &s.AtomicETH,
		&s.AETH, &s.AtomicAckETH, &s.ImmDt, &s.IETH} {
		l.setBTH(&s.BTH)
	}
	return s
}

// DecodingLayers returns the Stack's layers for NewDecodingLayerParser or
// DecodingLayerParser.AddDecodingLayer.
func (s *Stack) DecodingLayers() []gopacket.DecodingLayer {
	return []gopacket.DecodingLayer{&s.BTH, &s.RDETH, &s.DETH, &s.FETH, &s.RETH,
		&s.AtomicETH, &s.AETH, &s.AtomicAckETH, &s.ImmDt, &s.IETH}
}

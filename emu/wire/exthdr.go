package wire

import "strings"

// Headers is a set of extension headers, the ones an opcode carries after
// its BTH. The bits are in wire order (IBTA Vol 1 §9.2, "header order":
// RDETH, DETH, RETH or AtomicETH, AETH, AtomicAckETH, ImmDt, IETH; rxe puts
// the FETH of FLUSH between the BTH and the RETH, rxe_opcode.c), so walking
// the set from the lowest bit visits the headers in the order they appear.
type Headers uint16

// The extension headers.
const (
	HdrRDETH Headers = 1 << iota
	HdrDETH
	HdrFETH
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH

	numHeaderKinds = iota
)

// headerSize and headerName are indexed by bit number.
var (
	headerSize = [numHeaderKinds]uint8{
		RDETHSize, DETHSize, FETHSize, RETHSize, AtomicETHSize,
		AETHSize, AtomicAckETHSize, ImmDtSize, IETHSize,
	}
	headerName = [numHeaderKinds]string{
		"RDETH", "DETH", "FETH", "RETH", "AtomicETH",
		"AETH", "AtomicAckETH", "ImmDt", "IETH",
	}
)

// Has reports whether every header of x is in h.
func (h Headers) Has(x Headers) bool { return h&x == x }

// Len returns the total size of the headers in h.
func (h Headers) Len() int {
	n := 0
	for i := 0; i < numHeaderKinds; i++ {
		if h&(1<<i) != 0 {
			n += int(headerSize[i])
		}
	}
	return n
}

// Offset returns where header x (a single header) starts within a packet
// carrying h, counted from the start of the BTH, or -1 if h lacks x.
func (h Headers) Offset(x Headers) int {
	if h&x == 0 || x&(x-1) != 0 {
		return -1
	}
	return BTHSize + (h & (x - 1)).Len()
}

// First returns the first header of h in wire order, or 0.
func (h Headers) First() Headers { return h & -h }

// After returns the header that follows x in h, or 0 if x is the last.
func (h Headers) After(x Headers) Headers {
	rest := h &^ (x | (x - 1))
	return rest & -rest
}

// Count returns the number of headers in h.
func (h Headers) Count() int {
	n := 0
	for ; h != 0; h &= h - 1 {
		n++
	}
	return n
}

// String lists the headers in wire order, e.g. "RETH+ImmDt", or "none".
func (h Headers) String() string {
	if h == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < numHeaderKinds; i++ {
		if h&(1<<i) != 0 {
			parts = append(parts, headerName[i])
		}
	}
	if rest := h &^ (1<<numHeaderKinds - 1); rest != 0 {
		parts = append(parts, "unknown")
	}
	return strings.Join(parts, "+")
}

// name returns the name of the single header h.
func (h Headers) name() string {
	for i := 0; i < numHeaderKinds; i++ {
		if h == 1<<i {
			return headerName[i]
		}
	}
	return "header"
}

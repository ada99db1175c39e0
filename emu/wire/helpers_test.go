package wire_test

import "unsafe"

// offsetIn returns where view s starts inside b, or -1 if s does not lie
// entirely within b. Views carry capped capacities, so this uses the data
// pointers.
func offsetIn(b, s []byte) int {
	if len(b) == 0 || s == nil {
		return -1
	}
	bp := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	sp := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if sp < bp || sp+uintptr(len(s)) > bp+uintptr(len(b)) {
		return -1
	}
	return int(sp - bp)
}

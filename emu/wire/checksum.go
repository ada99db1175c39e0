package wire

// checksumAdd adds b to the 16-bit ones' complement sum (RFC 1071 §4.1),
// treating b as big-endian 16-bit words and padding an odd tail with zero.
func checksumAdd(sum uint32, b []byte) uint32 {
	n := len(b)
	i := 0
	for ; i+1 < n; i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if i < n {
		sum += uint32(b[i]) << 8
	}
	return sum
}

// checksumFold folds the 32-bit accumulator to 16 bits (RFC 1071 §4.1);
// the Internet checksum is its complement.
func checksumFold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

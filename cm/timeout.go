package cm

import "time"

// convertToDuration is cm.c:cm_convert_to_ms: an IBTA time exponent t
// stands for 4.096 µs × 2^t; the kernel rounds it to 2^(t-8) ms (t ≤ 8:
// 1 ms), and so do we, so that both ends of a connection agree on how
// long to wait.
func convertToDuration(t uint8) time.Duration {
	if t > 31 {
		t = 31
	}
	shift := int(t) - 8
	if shift < 0 {
		shift = 0
	}
	return time.Duration(1<<shift) * time.Millisecond
}

// ackTimeout is cm.c:cm_ack_timeout: the local ACK timeout exponent for a
// path of packetLifeTime, given the CA's ACK delay (irdma reports a
// local_ca_ack_delay of 0): twice the packet lifetime plus the ACK delay,
// in exponent arithmetic, at most 31.
func ackTimeout(caACKDelay, packetLifeTime uint8) uint8 {
	t := int(packetLifeTime) + 1
	d := int(caACKDelay)
	if t >= d {
		if d >= t-1 {
			t++
		}
	} else {
		t0 := t
		t = d
		if t0 >= d-1 {
			t++
		}
	}
	return uint8(min(31, t))
}

package qp

import "testing"

// TestFragmentAt: the SGE that holds a message offset, and the offset in
// it, across SGEs of length zero and past the end.
func TestFragmentAt(t *testing.T) {
	frags := []Fragment{{Len: 0}, {Len: 10}, {Len: 0}, {Len: 5}}
	for _, c := range []struct {
		off    uint64
		i      int
		inFrag uint64
	}{
		{0, 1, 0}, {9, 1, 9}, {10, 3, 0}, {14, 3, 4}, {15, -1, 0}, {1 << 40, -1, 0},
	} {
		if i, in := fragmentAt(frags, c.off); i != c.i || in != c.inFrag {
			t.Errorf("fragmentAt(%d) = %d, %d; want %d, %d", c.off, i, in, c.i, c.inFrag)
		}
	}
	if i, _ := fragmentAt(nil, 0); i != -1 {
		t.Errorf("fragmentAt(no SGEs, 0) = %d, want -1", i)
	}
}

package regs

import "testing"

// TestLayoutDisjoint checks the static table: blocks sorted, non-empty and
// non-overlapping, every register 4-byte aligned.
func TestLayoutDisjoint(t *testing.T) {
	f := New()
	for i, b := range f.blocks {
		if len(b.regs) == 0 || b.base&3 != 0 {
			t.Errorf("block %s: %d registers at %#x", b.name, len(b.regs), uint32(b.base))
		}
		if i > 0 {
			prev := f.blocks[i-1]
			if end := prev.base + 4*Offset(len(prev.regs)); end > b.base {
				t.Errorf("blocks %s and %s overlap", prev.name, b.name)
			}
		}
	}
}

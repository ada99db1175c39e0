package timing

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type dlItem struct {
	Deadline
	name int
}

// TestDeadlinesOrder: items pop by due time, ties in the order they were
// (last) armed; re-arming moves an item and makes it the latest armed;
// removed items never pop. The expected order is computed independently:
// a list of (due, arm count) sorted.
func TestDeadlinesOrder(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		var q Deadlines[*dlItem]
		items := make([]*dlItem, 40)
		type want struct {
			due   int64
			armed int
			name  int
		}
		armedAt := map[int]want{}
		arms := 0
		for i := range items {
			items[i] = &dlItem{name: i}
		}
		for op := 0; op < 300; op++ {
			x := items[r.IntN(len(items))]
			switch r.IntN(4) {
			case 0:
				_, was := armedAt[x.name]
				if q.Remove(x) != was {
					t.Fatalf("seed %d: Remove of item %d reported %v, armed %v", seed, x.name, !was, was)
				}
				delete(armedAt, x.name)
				if x.Armed() {
					t.Fatalf("seed %d: item %d armed after Remove", seed, x.name)
				}
			default:
				due := int64(r.IntN(10)) // many ties
				arms++
				q.Arm(x, due)
				armedAt[x.name] = want{due, arms, x.name}
			}
			if q.Len() != len(armedAt) {
				t.Fatalf("seed %d: Len %d, %d armed", seed, q.Len(), len(armedAt))
			}
		}
		var exp []want
		for _, w := range armedAt {
			exp = append(exp, w)
		}
		slices.SortFunc(exp, func(a, b want) int {
			if a.due != b.due {
				return int(a.due - b.due)
			}
			return a.armed - b.armed
		})
		for i, w := range exp {
			f, ok := q.First()
			if !ok || f.name != w.name {
				t.Fatalf("seed %d: First at %d is %v, want item %d", seed, i, f, w.name)
			}
			x := q.Pop()
			if x.name != w.name || x.Due() != w.due || x.Armed() {
				t.Fatalf("seed %d: pop %d gave item %d due %d (armed %v), want item %d due %d", seed, i, x.name, x.Due(), x.Armed(), w.name, w.due)
			}
		}
		if _, ok := q.First(); ok || q.Len() != 0 {
			t.Fatalf("seed %d: items left", seed)
		}
	}
}

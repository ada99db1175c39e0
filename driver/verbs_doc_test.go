package driver_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestVerbsDocSummary: docs/verbs.md's summary line counts what its table
// says — one row per function of irdma's verb family, each mapped,
// internal or n/a — so that the line cannot drift from the rows.
func TestVerbsDocSummary(t *testing.T) {
	b, err := os.ReadFile("../docs/verbs.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	row := regexp.MustCompile(`(?m)^\| (\d+) \| \w+ \| [^|]* \| (mapped|internal|n/a) \|`)
	counts := map[string]int{}
	seen := map[int]bool{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[1])
		if seen[n] {
			t.Errorf("row %d twice", n)
		}
		seen[n] = true
		counts[m[2]]++
	}
	sum := regexp.MustCompile(`Summary: (\d+) functions — (\d+) mapped, (\d+) internal, (\d+) not applicable`).FindStringSubmatch(doc)
	if sum == nil {
		t.Fatal("docs/verbs.md has no summary line")
	}
	want := map[string]string{"total": sum[1], "mapped": sum[2], "internal": sum[3], "n/a": sum[4]}
	got := map[string]int{"total": len(seen), "mapped": counts["mapped"], "internal": counts["internal"], "n/a": counts["n/a"]}
	for k, w := range want {
		if strconv.Itoa(got[k]) != w {
			t.Errorf("summary says %s %s, the table has %d", w, k, got[k])
		}
	}
	for n := 1; n <= len(seen); n++ {
		if !seen[n] {
			t.Errorf("no row %d", n)
		}
	}
	// Every n/a row gives its reason in the notes column.
	for _, l := range regexp.MustCompile(`(?m)^\|.*\| n/a \|\s*\|\s*$`).FindAllString(doc, -1) {
		t.Errorf("n/a without a reason: %s", l)
	}
}

package conformance_test

import (
	"strings"
	"testing"
)

// TestClassify: unittest -v outputs written by hand in the forms
// Python 3.11's unittest prints them (TextTestResult: "... ok", the
// verdict on its own line after output, "skipped 'reason'", tracebacks).
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name, out       string
		timedOut        bool
		verdict, reason string
	}{
		{"ok", "test_a (tests.x.A.test_a) ... ok\n\n---\nRan 1 test in 0.1s\n\nOK\n", false, "OK", ""},
		{"ok-after-output", "test_a (tests.x.A.test_a) ... some print\nok\n\nRan 1 test\n\nOK\n", false, "OK", ""},
		{"skip", "test_a (tests.x.A.test_a) ... skipped 'Not supported'\n\nOK (skipped=1)\n", false, "SKIP", "Not supported"},
		{"error", "test_a (tests.x.A.test_a) ... ERROR\n\n====\nERROR: test_a\n----\nTraceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\npyverbs.pyverbs_error.PyverbsRDMAError: Failed. Errno: 95, Operation not supported\n\n----\nRan 1 test\n\nFAILED (errors=1)\n",
			false, "ERROR", "pyverbs.pyverbs_error.PyverbsRDMAError: Failed. Errno: 95, Operation not supported"},
		{"fail", "test_a (tests.x.A.test_a) ... FAIL\n\nTraceback (most recent call last):\n  File \"x.py\", line 2\nAssertionError: 1 != 2\n\nFAILED (failures=1)\n", false, "FAIL", "AssertionError: 1 != 2"},
		{"timeout", "test_a (tests.x.A.test_a) ... ", true, "TIMEOUT", "test_a (tests.x.A.test_a) ..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, r := classify(c.out, nil, c.timedOut)
			if v != c.verdict || r != c.reason {
				t.Errorf("got %s %q, want %s %q", v, r, c.verdict, c.reason)
			}
		})
	}
}

// TestJudge: which verdicts fail the Go test, with and without an entry
// in the known list.
func TestJudge(t *testing.T) {
	kn := map[string]string{"listed.fail": "E810: …", "listed.ok": "E810: …", "listed.timeout": "E810: …"}
	rows := []result{
		{id: "ok", verdict: "OK"},
		{id: "skip", verdict: "SKIP"},
		{id: "listed.fail", verdict: "FAIL"},
		{id: "listed.ok", verdict: "OK"},
		{id: "listed.timeout", verdict: "TIMEOUT"},
		{id: "error", verdict: "ERROR"},
		{id: "crash", verdict: "CRASH"},
		{id: "notrun", verdict: "NOT RUN"},
	}
	j := judge(rows, kn)
	var failing []string
	for _, u := range j.unlisted {
		id, _, _ := strings.Cut(u, " ")
		failing = append(failing, id)
	}
	if got, want := strings.Join(failing, ","), "listed.timeout,error,crash,notrun"; got != want {
		t.Errorf("failing %s, want %s", got, want)
	}
	if got := strings.Join(j.fixed, ","); got != "listed.ok" {
		t.Errorf("fixed %s, want listed.ok", got)
	}
	if j.listed != 1 || j.total != 8 || j.counts["OK"] != 2 || j.counts["SKIP"] != 1 {
		t.Errorf("listed %d, total %d, counts %v", j.listed, j.total, j.counts)
	}
}

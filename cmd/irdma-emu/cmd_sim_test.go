package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wallKeys matches the wall-clock figures, the only part of the output
// that may differ between runs.
var wallKeys = regexp.MustCompile(`"wall_[a-z_]*":[^,}]*|wall_[a-z_]* [0-9.]+`)

func runSimOut(t *testing.T, args ...string) (string, []byte) {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace.json")
	var out, errb bytes.Buffer
	if rc := runSim(append(args, "--trace", trace), &out, &errb); rc != 0 {
		t.Fatalf("sim %v: exit %d: %s", args, rc, errb.String())
	}
	tr, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), tr
}

// TestSimDeterministic runs the same scenarios twice, as a script would:
// the output (text and --json) and the trace are byte-identical once the
// wall_ figures are taken out, with 1 % loss as well.
func TestSimDeterministic(t *testing.T) {
	for _, args := range [][]string{
		{"write", "--qps", "2", "--size", "65536", "--iters", "100", "--json"},
		{"send", "--size", "4096", "--iters", "200", "--loss", "0.01", "--seed", "3"},
		{"read", "--lat", "--size", "8", "--iters", "20", "--json"},
	} {
		o1, t1 := runSimOut(t, args...)
		o2, t2 := runSimOut(t, args...)
		s1, s2 := wallKeys.ReplaceAllString(o1, "wall"), wallKeys.ReplaceAllString(o2, "wall")
		if s1 != s2 {
			t.Errorf("%v: outputs differ:\n%s\n---\n%s", args, o1, o2)
		}
		if !bytes.Equal(t1, t2) {
			t.Errorf("%v: traces differ (%d and %d bytes)", args, len(t1), len(t2))
		}
		if !strings.Contains(o1, "wall_") {
			t.Errorf("%v: no wall_ figure (the simulator's speed):\n%s", args, o1)
		}
		if strings.Contains(strings.Join(args, " "), "--json") {
			for _, line := range strings.Split(strings.TrimSpace(o1), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("%v: line %q: %v", args, line, err)
				}
				for _, k := range []string{"size", "qps", "gbps", "mpps", "lat_us", "sim_seconds"} {
					if _, ok := m[k]; !ok {
						t.Errorf("%v: no %q in %s", args, k, line)
					}
				}
			}
		}
	}
}

// TestSimBadArgs: bad input gets a clear error and a usage exit, never a
// crash.
func TestSimBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{}, {"atomic"}, {"write", "--mtu", "1000"}, {"write", "--loss", "1.5"}, {"write", "--size", "0"},
		{"write", "-a", "--size", "8"}, {"send", "--inline", "500"}, {"write", "--delay", "-1us"}, {"write", "extra"},
		{"write", "--link-gbps", "-3"}, {"write", "--lat", "--bidir"},
	} {
		var out, errb bytes.Buffer
		rc := runSim(args, &out, &errb)
		if rc == 0 || errb.Len() == 0 {
			t.Errorf("sim %v: exit %d, stderr %q", args, rc, errb.String())
		}
	}
}

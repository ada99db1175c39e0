package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// recorder is a TB that records whether it was failed or skipped.
type recorder struct {
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "TestSomething" }
func (r *recorder) Fatal(a ...any) {
	r.failed, r.msg = true, fmt.Sprint(a...)
}
func (r *recorder) Skip(a ...any) {
	r.skipped, r.msg = true, fmt.Sprint(a...)
}

func TestMissingFailsWhereRequired(t *testing.T) {
	for _, c := range []struct {
		ci, installed string
		fail          bool
	}{
		{"", "", false},
		{"true", "", true},
		{"1", "", true},
		{"false", "", false},
		{"0", "", false},
		{"", "1", true},
		{"", "0", false},
		{"false", "1", true},
	} {
		t.Run(fmt.Sprintf("CI=%q,installed=%q", c.ci, c.installed), func(t *testing.T) {
			t.Setenv("CI", c.ci)
			t.Setenv(EnvInstalled, c.installed)
			var r recorder
			if p := Program(&r, "irdma-emu-no-such-program", "some-package"); p != "" {
				t.Fatalf("Program found %q", p)
			}
			if r.failed != c.fail || r.skipped == c.fail {
				t.Fatalf("failed %v skipped %v, want failed %v", r.failed, r.skipped, c.fail)
			}
			for _, want := range []string{Marker, "TestSomething", "irdma-emu-no-such-program", "some-package"} {
				if !strings.Contains(r.msg, want) {
					t.Errorf("message %q lacks %q", r.msg, want)
				}
			}
		})
	}
}

func TestPresentDependencyPasses(t *testing.T) {
	t.Setenv("CI", "true")
	var r recorder
	if p := Program(&r, "sh", "dash"); p == "" || r.failed || r.skipped {
		t.Fatalf("sh: %q failed %v skipped %v (%s)", p, r.failed, r.skipped, r.msg)
	}
	Check(&r, nil, "nothing", "")
	Glob(&r, "/proc/self/stat*", "procfs", "")
	if r.failed || r.skipped {
		t.Fatalf("present dependency stopped the test: %s", r.msg)
	}
	Check(&r, os.ErrNotExist, "/dev/irdma-emu-none", "kernel")
	if !r.failed {
		t.Fatal("Check with an error under CI did not fail")
	}
}

// TestGoTestOutput runs a test that misses a program in a child `go test`
// process, as CI does: under CI=true the run prints --- FAIL naming the
// program and no --- SKIP; without CI it prints --- SKIP with the reason.
func TestGoTestOutput(t *testing.T) {
	if os.Getenv("IRDMA_EMU_TESTENV_CHILD") == "1" {
		return
	}
	for _, c := range []struct {
		ci       string
		wantFail bool
	}{{"true", true}, {"", false}} {
		t.Run("CI="+c.ci, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildMissesProgram$", "-test.v")
			cmd.Env = append(os.Environ(), "IRDMA_EMU_TESTENV_CHILD=1", "CI="+c.ci, EnvInstalled+"=",
				"PATH="+t.TempDir()) // perftest and everything else hidden
			out, err := cmd.CombinedOutput()
			fail := bytes.Contains(out, []byte("--- FAIL: TestChildMissesProgram"))
			skip := bytes.Contains(out, []byte("--- SKIP: TestChildMissesProgram"))
			if fail != c.wantFail || skip == c.wantFail || (err != nil) != c.wantFail {
				t.Fatalf("fail %v skip %v err %v, want fail %v:\n%s", fail, skip, err, c.wantFail, out)
			}
			if !bytes.Contains(out, []byte("ib_write_bw is not installed (Debian package perftest")) {
				t.Fatalf("the output does not name the missing program:\n%s", out)
			}
		})
	}
}

func TestChildMissesProgram(t *testing.T) {
	if os.Getenv("IRDMA_EMU_TESTENV_CHILD") != "1" {
		t.Skip("run by TestGoTestOutput")
	}
	Program(t, "ib_write_bw", "perftest")
	t.Log("reached past a missing program")
}

// rawSkip finds a skip whose reason says a dependency is missing: those
// must go through this package, so that CI fails instead of skipping.
var rawSkip = regexp.MustCompile(`\.Skip(f)?\([^)]*(not installed|is missing|missing|not found|needs|cannot|refused|does not build|"(SKIP: |NOT RUN: )?no )`)

// TestNoRawDependencySkip reads every Go file of the module: no test skips
// by hand for a missing dependency.
func TestNoRawDependencySkip(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	var bad []string
	n := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "cache") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasPrefix(p, filepath.Join(root, "internal", "testenv")) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for i, line := range strings.Split(string(b), "\n") {
			if rawSkip.MatchString(line) {
				bad = append(bad, fmt.Sprintf("%s:%d: %s", p, i+1, strings.TrimSpace(line)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read only %d Go files under %s", n, root)
	}
	if len(bad) > 0 {
		t.Errorf("skips for a missing dependency that bypass internal/testenv:\n%s", strings.Join(bad, "\n"))
	}
}

// Package conformance runs rdma-core's own test suite (its tests/ folder,
// pyverbs) against an irdma-emu daemon with upstream rdma-core's libibverbs,
// libirdma and pyverbs (built by rdma-core.sh, cached), one test at a time
// through `irdma-emu exec`, each with a time limit, and writes the table
// docs/conformance.md describes: test, verdict, seconds, reason.
//
//	IRDMA_EMU_CONFORMANCE=1 go test -count=1 -v -timeout 60m ./tests/conformance/
//	IRDMA_EMU_CONFORMANCE_RUN='test_device|test_pd' …   only the tests whose id matches
//	IRDMA_EMU_CONFORMANCE_TIMEOUT=60s …                 the limit per test (default 60s)
//	IRDMA_EMU_CONFORMANCE_BUDGET=30m …                  the limit for all tests together (default 30m)
//	IRDMA_EMU_CONFORMANCE_PROFILE=gen2 …                the daemon's profile, known-<profile>.txt
//	IRDMA_EMU_CONFORMANCE_OUT=DIR …                     where the table goes (default: the cache)
//
// The verdicts are the suite's own (unittest: ok, skipped, FAIL, ERROR)
// plus TIMEOUT (the test outlived its limit and was killed: on hardware no
// test waits forever, so a TIMEOUT is a bug of the emulator) and CRASH (the
// process died of a signal), NOT RUN (the suite's budget was spent). Every
// test that is not OK or skipped must be listed in known-<profile>.txt
// with its reason (TIMEOUT and NOT RUN never pass); a listed test that now
// passes is reported, so that the list only shrinks.
package conformance_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

// rdmaCore is a cached build (rdma-core.sh's directory).
type rdmaCore struct {
	dir, version string
}

func (r rdmaCore) build() string { return filepath.Join(r.dir, "build") }

// buildRdmaCore runs rdma-core.sh (fetch and build, or the cached build).
func buildRdmaCore(t *testing.T) rdmaCore {
	t.Helper()
	script, err := filepath.Abs("rdma-core.sh")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	t.Logf("rdma-core.sh (%v):\n%s", time.Since(start).Round(time.Second), errb.String())
	testenv.Check(t, err, "rdma-core 65 built by tests/conformance/rdma-core.sh: "+lastLine(errb.String()),
		"needs the sid deb-src of deb.debian.org and the Debian packages cmake ninja-build cython3 python3-dev libnl-3-dev libnl-route-3-dev pkg-config")
	return readBuilt(t, lastLine(out.String()))
}

// readBuilt reads the BUILT stamp of the build directory rdma-core.sh
// printed.
func readBuilt(t *testing.T, dir string) rdmaCore {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "BUILT"))
	if err != nil {
		t.Fatalf("rdma-core.sh printed %q: %v", dir, err)
	}
	r := rdmaCore{dir: dir}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "version "); ok {
			r.version = v
		}
	}
	return r
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// result is one row of the table.
type result struct {
	id      string
	verdict string // OK, SKIP, FAIL, ERROR, TIMEOUT, CRASH
	secs    float64
	reason  string
}

var (
	// unittest -v: "test_x (tests.test_y.Class.test_x) ... ok" and its
	// variants; the verdict may follow on a later line when the test
	// printed something.
	reVerdict = regexp.MustCompile(`\.\.\. (ok|FAIL|ERROR|skipped (.*)|expected failure|unexpected success)\s*$`)
	reSkipped = regexp.MustCompile(`^skipped (.*)$`)
	reAlone   = regexp.MustCompile(`^(ok|FAIL|ERROR|skipped (.*)|expected failure|unexpected success)\s*$`)
)

// classify reads a test's output.
func classify(out string, runErr error, timedOut bool) (verdict, reason string) {
	if timedOut {
		return "TIMEOUT", lastMeaningful(out)
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) && ee.ExitCode() < 0 {
		return "CRASH", ee.String() + ": " + lastMeaningful(out)
	}
	for _, l := range strings.Split(out, "\n") {
		m := reVerdict.FindStringSubmatch(l)
		if m == nil {
			// A test that printed after "... " gets its verdict on a
			// line of its own.
			m = reAlone.FindStringSubmatch(l)
		}
		if m == nil {
			continue
		}
		switch {
		case m[1] == "ok" || m[1] == "expected failure":
			return "OK", ""
		case reSkipped.MatchString(m[1]):
			return "SKIP", strings.Trim(m[2], `'"`)
		case m[1] == "FAIL":
			return "FAIL", failReason(out)
		case m[1] == "unexpected success":
			return "FAIL", "unexpected success"
		default:
			return "ERROR", failReason(out)
		}
	}
	if runErr == nil {
		return "ERROR", "no verdict in the output: " + lastMeaningful(out)
	}
	return "ERROR", failReason(out)
}

// failReason is the exception line of a traceback (the last line of the
// first "Traceback" block), else the last meaningful line.
func failReason(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "Traceback") {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if s := strings.TrimSpace(lines[j]); s != "" && !strings.HasPrefix(lines[j], " ") {
				return s
			}
		}
	}
	return lastMeaningful(out)
}

func lastMeaningful(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		s := strings.TrimSpace(lines[i])
		if s == "" || strings.HasPrefix(s, "---") || strings.HasPrefix(s, "Ran ") || s == "OK" || strings.HasPrefix(s, "FAILED") || strings.HasPrefix(s, "===") {
			continue
		}
		return s
	}
	return ""
}

// known reads known-<profile>.txt: "test-id<TAB>reason" lines, # comments.
func known(t *testing.T, name string) map[string]string {
	t.Helper()
	m := map[string]string{}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return m
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		id, reason, _ := strings.Cut(l, "\t")
		m[strings.TrimSpace(id)] = strings.TrimSpace(reason)
	}
	return m
}

func TestRdmaCoreSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("rdma-core's suite takes minutes: not in -short")
	}
	// Opt-in: tests/run.sh runs it when IRDMA_EMU_CONFORMANCE_CI=1
	// (docs/conformance.md "In CI").
	if os.Getenv("IRDMA_EMU_CONFORMANCE") != "1" {
		t.Skip("rdma-core's suite runs with IRDMA_EMU_CONFORMANCE=1 (docs/conformance.md)")
	}
	o := suiteOptions(t)
	testenv.Root(t)
	testenv.Tools(t, "rdma", "ip")
	testenv.Program(t, "python3", "python3")
	rc := buildRdmaCore(t)
	bld := rc.build()
	runner := filepath.Join(bld, "bin", "run_tests.py")

	addr := suiteAddr(t)
	d := daemontest.Run(t, daemontest.Options{}, append(o.daemonArgs(), "--addr", addr.String())...)
	bin := daemontest.Binary(t)
	env := append(os.Environ(),
		"IRDMA_EMU_RUN_DIR="+d.RunDir,
		// The build's libibverbs, librdmacm and providers (IN_PLACE: its
		// libibverbs.d names the build's provider libraries).
		"LD_LIBRARY_PATH="+filepath.Join(bld, "lib"),
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	)

	// The list of tests, as the suite itself loads them (every module
	// imported once: a limit of its own, not a test's).
	lo, _, err, timedOut := runOne([]string{bin, "exec", "--", runner, "--list-tests"}, env, max(o.limit, listLimit))
	if err != nil || timedOut {
		t.Fatalf("run_tests.py --list-tests: %v (timed out: %v)\n%s", err, timedOut, lo)
	}
	var ids []string
	for _, l := range strings.Split(string(lo), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "tests.") {
			if o.filter == nil || o.filter.MatchString(l) {
				ids = append(ids, l)
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no tests listed:\n%s", lo)
	}
	suiteStart := time.Now()
	deadline := o.deadline(suiteStart)
	t.Logf("rdma-core %s on %s: %d tests, %v each at most, all within %v",
		rc.version, o.profile, len(ids), o.limit, time.Until(deadline).Round(time.Second))

	outDir := os.Getenv("IRDMA_EMU_CONFORMANCE_OUT")
	if outDir == "" {
		outDir = rc.dir
	}
	// Every test's output, for the reasons the table abbreviates.
	logDir := filepath.Join(outDir, "logs-"+o.profile)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		logDir = ""
	}
	var rows []result
	for i, id := range ids {
		// The whole suite has a budget too: the last tests get what is
		// left of it, and a test cut short by it is a TIMEOUT.
		limit := min(o.limit, time.Until(deadline))
		if limit <= 0 {
			for _, rest := range ids[i:] {
				rows = append(rows, result{id: rest, verdict: "NOT RUN", reason: "the suite's time budget was spent"})
			}
			t.Errorf("the suite's time budget (IRDMA_EMU_CONFORMANCE_BUDGET, go test -timeout) was spent after %d of %d tests", i, len(ids))
			break
		}
		v, reason, secs, out := runSuiteTest(bin, env, runner, d.Name, id, limit)
		if logDir != "" {
			_ = os.WriteFile(filepath.Join(logDir, id+".log"), out, 0o644)
		}
		rows = append(rows, result{id: id, verdict: v, secs: secs, reason: reason})
		if v != "OK" && v != "SKIP" && testing.Verbose() {
			t.Logf("[%d/%d] %s %s (%.1fs): %s", i+1, len(ids), v, id, secs, reason)
		}
		if v == "TIMEOUT" || v == "CRASH" {
			// The daemon must still be there for the next test.
			d.WaitReady(t, 10*time.Second)
		}
	}
	wall := time.Since(suiteStart)

	// Judge against the list of known non-passing tests.
	j := judge(rows, known(t, "known-"+o.profile+".txt"))
	table := writeTable(t, outDir, o.profile, rc, rows, j.summary(wall))
	t.Logf("table: %s", table)
	fmt.Printf("\n== rdma-core %s suite on irdma-emu %s: %s\n", rc.version, o.profile, j.summary(wall))
	for _, f := range j.fixed {
		t.Logf("now passes, remove it from known-%s.txt: %s", o.profile, f)
	}
	for _, u := range j.unlisted {
		t.Errorf("not listed in known-%s.txt: %s", o.profile, u)
	}
}

// verdicts is the judgement of a table against known-<profile>.txt.
type verdicts struct {
	total, listed int
	counts        map[string]int // by verdict
	unlisted      []string       // tests that fail the Go test
	fixed         []string       // listed tests that passed or were skipped
}

// judge: OK and SKIP pass; FAIL, ERROR and CRASH pass when listed;
// TIMEOUT (no test may hang) and NOT RUN never do.
func judge(rows []result, kn map[string]string) verdicts {
	j := verdicts{total: len(rows), counts: map[string]int{}}
	for _, r := range rows {
		j.counts[r.verdict]++
		_, isKnown := kn[r.id]
		switch {
		case r.verdict == "OK" || r.verdict == "SKIP":
			if isKnown {
				j.fixed = append(j.fixed, r.id)
			}
		case r.verdict == "TIMEOUT":
			j.unlisted = append(j.unlisted, fmt.Sprintf("%s TIMEOUT (no test may hang): %s", r.id, r.reason))
		case r.verdict == "NOT RUN":
			j.unlisted = append(j.unlisted, fmt.Sprintf("%s NOT RUN: %s", r.id, r.reason))
		case isKnown:
			j.listed++
		default:
			j.unlisted = append(j.unlisted, fmt.Sprintf("%s %s: %s", r.id, r.verdict, r.reason))
		}
	}
	sort.Strings(j.fixed)
	return j
}

func (j verdicts) summary(wall time.Duration) string {
	c := j.counts
	return fmt.Sprintf("%d tests in %v: %d OK, %d skipped by the suite, %d listed (%d FAIL, %d ERROR, %d CRASH in all), %d TIMEOUT, %d NOT RUN, %d failing",
		j.total, wall.Round(time.Second), c["OK"], c["SKIP"], j.listed, c["FAIL"], c["ERROR"], c["CRASH"], c["TIMEOUT"], c["NOT RUN"], len(j.unlisted))
}

// writeTable writes the table as Markdown and as tab-separated text.
func writeTable(t *testing.T, dir, profile string, rc rdmaCore, rows []result, summary string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, fmt.Sprintf("conformance-%s-%s.md", profile, rc.version))
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "# rdma-core %s tests on irdma-emu (%s), %s\n\n%s\n\n| test | verdict | seconds | reason |\n|---|---|---|---|\n",
		rc.version, profile, time.Now().UTC().Format(time.RFC3339), summary)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %.1f | %s |\n", r.id, r.verdict, r.secs, strings.ReplaceAll(r.reason, "|", `\|`))
	}
	w.Flush()
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var tsv bytes.Buffer
	for _, r := range rows {
		fmt.Fprintf(&tsv, "%s\t%s\t%.1f\t%s\n", r.id, r.verdict, r.secs, r.reason)
	}
	if err := os.WriteFile(strings.TrimSuffix(name, ".md")+".tsv", tsv.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// lo1 is lo's first address, the one `ip -j addr show lo` lists first.
var lo1 = netip.MustParseAddr("127.0.0.1")

// suiteAddr is the address the suite's daemon takes. The suite finds the
// device's IP address the way a user's scripts do (tests/base.py
// get_ip_mac_address: the first addr_info of `ip -j addr show` on the
// netdev `rdma link` names), and its RDMA CM tests bind and connect to it:
// on a real E810 that is the first address of its own netdev, one of its
// GIDs. The daemon's netdev is lo, whose first address is 127.0.0.1, so
// the daemon must have that address; on another, rdma_bind_addr of
// 127.0.0.1 fails ENODEV as Linux fails it for an address of a netdev
// with no RDMA device (cma.c rdma_bind_addr → cma_acquire_dev_by_src_ip).
// When 127.0.0.1 is taken on UDP 4791 (a daemon run by hand), the daemon
// gets a test address and the RDMA CM tests fail, which the log says.
func suiteAddr(t *testing.T) netip.Addr {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo1, testaddr.RoCEv2Port)))
	if err == nil {
		c.Close()
		return lo1
	}
	a := testaddr.Loopback(t, 1)[0]
	t.Logf("%v:%d is taken (%v): the daemon runs on %v, and the suite's RDMA CM tests, which use lo's first address, will fail", lo1, testaddr.RoCEv2Port, err, a)
	return a
}

package conformance_test

import (
	"os"
	"regexp"
	"testing"
	"time"
)

// options are the suite's settings from the environment
// (docs/conformance.md "Running the suite").
type options struct {
	profile string         // IRDMA_EMU_CONFORMANCE_PROFILE: gen2 (default) or another `irdma-emu run --profile`
	limit   time.Duration  // IRDMA_EMU_CONFORMANCE_TIMEOUT: the limit per test
	budget  time.Duration  // IRDMA_EMU_CONFORMANCE_BUDGET: the limit for all tests together
	testEnd time.Time      // go test -timeout's deadline less tableMargin; zero without one
	filter  *regexp.Regexp // IRDMA_EMU_CONFORMANCE_RUN: only the tests whose id matches
}

const (
	defaultLimit  = 60 * time.Second
	defaultBudget = 30 * time.Minute
	listLimit     = 2 * time.Minute // run_tests.py --list-tests
	// tableMargin is kept from go test's own deadline for writing the
	// table and stopping the daemon: a suite cut by the budget still
	// leaves its table, where a go test timeout would leave only a panic.
	tableMargin = time.Minute
)

var reProfile = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

func suiteOptions(t *testing.T) options {
	t.Helper()
	o := options{profile: "gen2", limit: defaultLimit}
	if v := os.Getenv("IRDMA_EMU_CONFORMANCE_PROFILE"); v != "" {
		if !reProfile.MatchString(v) {
			t.Fatalf("IRDMA_EMU_CONFORMANCE_PROFILE=%q: want a profile name such as gen2 or gen3", v)
		}
		o.profile = v
	}
	o.limit = duration(t, "IRDMA_EMU_CONFORMANCE_TIMEOUT", defaultLimit)
	o.budget = duration(t, "IRDMA_EMU_CONFORMANCE_BUDGET", defaultBudget)
	if d, ok := t.Deadline(); ok {
		o.testEnd = d.Add(-tableMargin)
	}
	if v := os.Getenv("IRDMA_EMU_CONFORMANCE_RUN"); v != "" {
		re, err := regexp.Compile(v)
		if err != nil {
			t.Fatalf("IRDMA_EMU_CONFORMANCE_RUN: %v", err)
		}
		o.filter = re
	}
	return o
}

// deadline is when the suite's tests, started at start, must be done: the
// budget after start (the build and the listing of the tests have limits
// of their own), and no later than go test -timeout allows.
func (o options) deadline(start time.Time) time.Time {
	d := start.Add(o.budget)
	if !o.testEnd.IsZero() && o.testEnd.Before(d) {
		d = o.testEnd
	}
	return d
}

func duration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 60s", name, v)
	}
	return d
}

// daemonArgs selects the profile: GEN_2 is the daemon's default, so it
// needs no flag (and runs on a daemon that knows no other).
func (o options) daemonArgs() []string {
	if o.profile == "gen2" {
		return nil
	}
	return []string{"--profile", o.profile}
}

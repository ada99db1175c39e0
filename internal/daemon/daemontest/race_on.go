//go:build race

package daemontest

// raceEnabled builds the binary with -race when the tests run with it.
const raceEnabled = true

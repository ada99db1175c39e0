//go:build race

package link_test

// raceEnabled: the race detector makes sync.Pool drop a quarter of what
// is put into it, so allocation counts are meaningless.
const raceEnabled = true

//go:build !race

package link_test

const raceEnabled = false

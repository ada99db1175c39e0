// Package testaddr hands tests loopback addresses of their own.
//
// Linux routes all of 127.0.0.0/8 to lo, so every test can bind UDP 4791
// (RoCEv2) and TCP 18515 (the pingpong exchange) on addresses nobody else
// uses. `go test ./...` runs several test binaries at once: tests that all
// used 127.0.0.2 and 127.0.0.3 would fail with EADDRINUSE whenever two
// packages ran together. Pick chooses a random 127.x.y.0/24 block outside
// 127.0.0.0/24 and checks that each address is free on the RoCEv2 port
// before handing it out.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// RoCEv2Port is the UDP port a probe binds to check an address is free.
const RoCEv2Port = 4791

var (
	mu   sync.Mutex
	used = map[netip.Addr]bool{}
)

// Pick returns n distinct loopback addresses, each free on UDP 4791 at the
// time of the call and never handed out twice by this process.
func Pick(n int) ([]netip.Addr, error) {
	mu.Lock()
	defer mu.Unlock()
	out := make([]netip.Addr, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 64*n {
			return nil, fmt.Errorf("testaddr: no free loopback address after %d tries", tries)
		}
		// 127.1.0.0 – 127.254.255.254: away from 127.0.0.0/24, where
		// people and examples run daemons by hand.
		a := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		if used[a] || !free(a) {
			continue
		}
		used[a] = true
		out = append(out, a)
	}
	return out, nil
}

// free reports whether a can bind UDP 4791 right now.
func free(a netip.Addr) bool {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, RoCEv2Port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Loopback is Pick for tests: it fails the test when no address is free.
func Loopback(tb testing.TB, n int) []netip.Addr {
	tb.Helper()
	a, err := Pick(n)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// MustPick is Pick for package-level test variables.
func MustPick(n int) []netip.Addr {
	a, err := Pick(n)
	if err != nil {
		panic(err)
	}
	return a
}

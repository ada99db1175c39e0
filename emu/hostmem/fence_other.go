//go:build !amd64

package hostmem

import "sync/atomic"

// storeFence orders the stores before it before the stores after it. Go has
// no fence primitive; an atomic read-modify-write is sequentially consistent
// (acquire and release), which on weakly ordered CPUs keeps earlier stores
// before it and later stores after it.
func storeFence() {
	var x atomic.Uint32
	x.Add(1)
}

package hostmem

// storeFence orders the stores before it before the stores after it. On
// amd64 (TSO) stores are never reordered with other stores, so nothing is
// needed beyond keeping the two copies in separate calls.
func storeFence() {}

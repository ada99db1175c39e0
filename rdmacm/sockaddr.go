package rdmacm

import (
	"net/netip"
	"syscall"
)

// Address families of a struct sockaddr.
const (
	afInet  = 2  // AF_INET
	afInet6 = 10 // AF_INET6
	afIB    = 27 // AF_IB: refused, docs/cm.md "AF_IB"
)

// sockAddr is an IP endpoint as a struct sockaddr_in or sockaddr_in6
// carries it: the family is kept because an IPv4 id answers with a
// sockaddr_in even for the wildcard.
type sockAddr struct {
	v6   bool
	addr netip.Addr // unmapped for IPv4; the zero Addr never appears once parsed
	port uint16
}

// addrSize is rdma_addr_size: the sockaddr length of a family, 0 for an
// unknown one.
func addrSize(family uint16) int {
	switch family {
	case afInet:
		return 16
	case afInet6:
		return 28
	case afIB:
		return 48
	}
	return 0
}

// parseSockaddr reads a sockaddr_in or sockaddr_in6 from b. AF_IB gets
// EAFNOSUPPORT (we do not serve it); anything else EINVAL, as
// rdma_bind_addr's cma_check_linklocal / family checks do.
func parseSockaddr(b []byte) (sockAddr, error) {
	if len(b) < 2 {
		return sockAddr{}, syscall.EINVAL
	}
	switch le.Uint16(b) {
	case afInet:
		if len(b) < 16 {
			return sockAddr{}, syscall.EINVAL
		}
		return sockAddr{addr: netip.AddrFrom4([4]byte(b[4:8])), port: be.Uint16(b[2:])}, nil
	case afInet6:
		if len(b) < 28 {
			return sockAddr{}, syscall.EINVAL
		}
		return sockAddr{v6: true, addr: netip.AddrFrom16([16]byte(b[8:24])), port: be.Uint16(b[2:])}, nil
	case afIB:
		return sockAddr{}, syscall.EAFNOSUPPORT
	}
	return sockAddr{}, syscall.EAFNOSUPPORT
}

// put writes the sockaddr into b (16 or 28 bytes) and returns its length.
func (a sockAddr) put(b []byte) int {
	if !a.v6 {
		le.PutUint16(b, afInet)
		be.PutUint16(b[2:], a.port)
		ip := a.addr.Unmap()
		if ip.Is4() {
			v := ip.As4()
			copy(b[4:8], v[:])
		}
		return 16
	}
	le.PutUint16(b, afInet6)
	be.PutUint16(b[2:], a.port)
	v := a.addr.As16()
	copy(b[8:24], v[:])
	return 28
}

// isAny reports the wildcard address (INADDR_ANY, in6addr_any).
func (a sockAddr) isAny() bool { return !a.addr.IsValid() || a.addr.IsUnspecified() }

// ip is the address as the device's GID table and the neighbour table
// know it (IPv4-mapped IPv6 is unmapped).
func (a sockAddr) ip() netip.Addr { return a.addr.Unmap() }

// gid is the RoCE v2 GID of the address (rdma_ip2gid): the IPv6 address,
// or the IPv4-mapped IPv6 address.
func (a sockAddr) gid() [16]byte {
	if !a.addr.IsValid() {
		return [16]byte{}
	}
	return a.addr.Unmap().As16() // IPv4 as ::ffff:a.b.c.d
}

var anyV4 = netip.IPv4Unspecified()

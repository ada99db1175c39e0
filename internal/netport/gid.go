package netport

import (
	"fmt"
	"net/netip"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// GID is a 16-byte RoCE global identifier (union ib_gid): an IPv6 address,
// IPv4 ones mapped (::ffff:a.b.c.d).
type GID [16]byte

// GIDOf returns the GID of an IP address (ipv6_addr_set_v4mapped for
// IPv4, the address itself for IPv6).
func GIDOf(a netip.Addr) GID { return GID(a.Unmap().As16()) }

// Addr returns the IP address the GID stands for (rdma_gid2ip), IPv4
// unmapped.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsZero reports whether g is the all-zero GID, which a free table slot
// reads as (ibv_query_gid on an empty index).
func (g GID) IsZero() bool { return g == GID{} }

// String formats the GID as an IPv6 address, IPv4-mapped ones as
// ::ffff:a.b.c.d, the way sysfs and `ibv_devinfo -v` show them.
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// DefaultGID is the port's default GID, index 0: fe80::/64 with the
// EUI-64 interface identifier of the MAC (addrconf_ifid_eui48: U/L bit
// flipped, ff:fe in the middle), as ib_core's default GID for a RoCE port.
func DefaultGID(mac wire.MAC) GID {
	var g GID
	g[0], g[1] = 0xfe, 0x80
	g[8], g[9], g[10] = mac[0]^0x02, mac[1], mac[2]
	g[11], g[12] = 0xff, 0xfe
	g[13], g[14], g[15] = mac[3], mac[4], mac[5]
	return g
}

// GIDType is the RoCE type of a GID-table entry (enum ib_gid_type).
type GIDType uint8

// GID types. irdma (and rxe) are RoCE v2 only: every entry is
// GIDTypeRoCEv2 ("RoCE v2" in sysfs gid_attrs/types).
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// String returns the name sysfs gid_attrs/types uses.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB, GIDTypeRoCEv1:
		return "IB/RoCE v1" // sysfs names both so
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("gidtype(%d)", uint8(t))
}

// GIDEntry is one used slot of the GID table.
type GIDEntry struct {
	Index int
	GID   GID
	Type  GIDType
	// Addr is the interface address the entry stands for; for the
	// default GID it is the fe80:: address, whether or not the interface
	// has it.
	Addr netip.Addr
	// Default marks index 0, the MAC-derived GID.
	Default bool
}

// DefaultGIDTableLen is irdma's GID table size (32 per port; rxe has 1024).
const DefaultGIDTableLen = 32

// gidTable keeps the slots of a GID table stable the way ib_core's GID
// cache does: a removed address frees its slot and leaves a hole (the
// slot reads as the zero GID), the other entries keep their indices, and a
// new address takes the lowest free slot (roce_gid_mgmt.c and cache.c:
// find_gid with an empty slot). Slot 0 is the default GID.
type gidTable struct {
	slots []netip.Addr // index ≥ 1: the address in the slot, zero Addr if free
	def   GID
}

func newGIDTable(n int) *gidTable {
	return &gidTable{slots: make([]netip.Addr, n)}
}

// update makes the table hold addrs (in the order ib_core enumerates them:
// IPv4 first, then IPv6), keeping the slots of addresses already present.
// It reports which addresses did not fit.
func (t *gidTable) update(def GID, addrs []netip.Addr) (dropped []netip.Addr) {
	t.def = def
	want := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		want[a] = true
	}
	have := make(map[netip.Addr]bool, len(addrs))
	for i := 1; i < len(t.slots); i++ {
		a := t.slots[i]
		if !a.IsValid() {
			continue
		}
		if !want[a] {
			t.slots[i] = netip.Addr{}
			continue
		}
		have[a] = true
	}
	for _, a := range addrs {
		if have[a] || GIDOf(a) == def {
			// The EUI-64 link-local address is the default GID
			// already; ib_core does not add a duplicate.
			continue
		}
		placed := false
		for i := 1; i < len(t.slots); i++ {
			if !t.slots[i].IsValid() {
				t.slots[i] = a
				placed = true
				break
			}
		}
		if !placed {
			dropped = append(dropped, a)
		}
		have[a] = true
	}
	return dropped
}

// entries returns the used slots in index order.
func (t *gidTable) entries() []GIDEntry {
	out := []GIDEntry{{Index: 0, GID: t.def, Type: GIDTypeRoCEv2, Addr: t.def.Addr(), Default: true}}
	for i := 1; i < len(t.slots); i++ {
		if a := t.slots[i]; a.IsValid() {
			out = append(out, GIDEntry{Index: i, GID: GIDOf(a), Type: GIDTypeRoCEv2, Addr: a})
		}
	}
	return out
}

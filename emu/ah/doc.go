// Package ah holds the device's address resolution state: the ARP cache
// (MANAGE_ARP), the address handles of UD QPs (CREATE/DESTROY_ADDR_HANDLE)
// and the multicast groups (CREATE/MODIFY/DESTROY_MCAST_GRP) (uda.c;
// docs/hw-controlpath.md "ARP, AH and multicast WQEs", "MAC and IP byte
// order").
//
// The destination MAC of a RoCE QP or AH comes only from the ARP cache:
// QP contexts and AHs carry an ARP index (hw.c:irdma_manage_arp_cache).
// Entry indexes are bounded by the committed HMC counts: ARP for the cache,
// FSIAV for address handles, FSIMC for multicast groups. Each entry is
// also written to its HMC object (ARP 8 bytes, FSIAV 64, FSIMC 128; the
// layouts are documented beside the encoders and in docs/hmc.md), as the
// hardware keeps them in HMC memory.
//
// IP addresses are kept in the driver's word order: four 32-bit words, each
// the host-order value of a big-endian address word, IPv4 in word 3
// (irdma_copy_ip_ntohl). AddrToWords and AH.Dest convert to and from
// netip.Addr.
//
// Changes are serialised by a mutex. Lookups (ARP, AH, ResolveAH, MG,
// LookupMG) are on the data path: they take no lock and do not allocate —
// the ARP cache is one atomic word per entry, AHs and groups are immutable
// values behind atomic pointers, and the address index of the groups is an
// immutable map replaced on every change.
package ah

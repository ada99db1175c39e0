package driver

import (
	"net/netip"
	"syscall"
)

// GID is a 16-byte global identifier (union ib_gid).
type GID [16]byte

// GIDType is the GID's RoCE type (enum ib_gid_type).
type GIDType uint8

const (
	GIDTypeRoCE   GIDType = 1 // IB_GID_TYPE_ROCE (v1)
	GIDTypeRoCEv2 GIDType = 2 // IB_GID_TYPE_ROCE_UDP_ENCAP
)

// GIDEntry is one entry of the port's GID table (ib_gid_attr).
type GIDEntry struct {
	GID  GID
	Type GIDType
	Addr netip.Addr // the IP address the GID stands for
	IPv4 bool       // network type RDMA_NETWORK_IPV4 (else IPV6)
}

// AHAttr is rdma_ah_attr for RoCE.
type AHAttr struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	GRH          bool // IB_AH_GRH (always set for RoCE)
	DMAC         [6]byte
	PortNum      uint8
}

// gidFromAddr is the RoCE GID of an IP address: IPv4-mapped for IPv4
// (ipv6_addr_set_v4mapped), the address itself for IPv6.
func gidFromAddr(a netip.Addr) GID {
	return GID(netip.AddrFrom16(a.As16()).As16())
}

// Addr returns the IP address a GID stands for (rdma_gid2ip).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// eui48LinkLocal is the default GID: fe80::/64 with the MAC's EUI-64
// interface id (addrconf_ifid_eui48: U/L bit flipped, ff:fe inserted).
func eui48LinkLocal(mac [6]byte) GID {
	var g GID
	g[0], g[1] = 0xfe, 0x80
	g[8], g[9], g[10] = mac[0]^0x02, mac[1], mac[2]
	g[11], g[12] = 0xff, 0xfe
	g[13], g[14], g[15] = mac[3], mac[4], mac[5]
	return g
}

// GIDTable is the port's GID table as the RoCE GID cache builds it for a
// RoCE v2-only device (irdma's port immutable core_cap_flags
// RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP): index 0 the MAC-derived fe80::
// default GID, then one entry per interface address (IPv4 as
// IPv4-mapped), duplicates dropped, at most gid_tbl_len (32) entries.
func (d *Device) GIDTable() []GIDEntry {
	def := eui48LinkLocal(d.mac())
	out := []GIDEntry{{GID: def, Type: GIDTypeRoCEv2, Addr: def.Addr()}}
	seen := map[GID]bool{def: true}
	for _, a := range d.netdev.Addrs() {
		if !a.IsValid() {
			continue
		}
		a = a.Unmap()
		g := gidFromAddr(a)
		if seen[g] {
			continue
		}
		seen[g] = true
		out = append(out, GIDEntry{GID: g, Type: GIDTypeRoCEv2, Addr: a, IPv4: a.Is4()})
		if len(out) == int(d.prof.Limits.GIDTableLen) {
			break
		}
	}
	return out
}

// QueryGID is the GID cache lookup a RoCE device's query_gid resolves to
// (irdma registers no query_gid for RoCE; ib core serves the cache).
func (d *Device) QueryGID(port uint8, index int) (GIDEntry, error) {
	if port != 1 {
		return GIDEntry{}, syscall.EINVAL
	}
	t := d.GIDTable()
	if index < 0 || index >= len(t) {
		return GIDEntry{}, syscall.EINVAL
	}
	return t[index], nil
}

// sgidAttr is rdma_fill_sgid_attr: the GID-table entry an AH names.
func (d *Device) sgidAttr(index uint8) (GIDEntry, error) {
	t := d.GIDTable()
	if int(index) >= len(t) {
		return GIDEntry{}, syscall.EINVAL
	}
	return t[index], nil
}

// QueryPKey is verbs.c:irdma_query_pkey: one entry, 0xFFFF.
func (d *Device) QueryPKey(port uint8, index uint16) (uint16, error) {
	if uint32(index) >= d.prof.Limits.MaxPKeys {
		return 0, syscall.EINVAL
	}
	return defaultPKey, nil
}

// udpSrcPort is rdma_get_udp_sport: with no flow label, one is computed
// from the QP numbers (rdma_calc_flow_label), then folded into
// 0xC000..0xFFFF (rdma_flow_label_to_udp_sport).
func udpSrcPort(fl, lqpn, rqpn uint32) uint16 {
	if fl == 0 {
		v := uint64(lqpn) * uint64(rqpn)
		v ^= v >> 20
		v ^= v >> 40
		fl = uint32(v & 0xfffff)
	}
	low := fl & 0x03fff
	high := fl & 0xfc000
	low ^= high >> 14
	return uint16(low | roceSrcPortMin)
}

// tos2Priority is rt_tos2priority: ip_tos2prio[IPTOS_TOS(tos) >> 1].
func tos2Priority(tos uint8) uint8 {
	table := [16]uint8{0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4}
	return table[(tos&0x1e)>>1]
}

// applyAV is the IB_QP_AV part of irdma_modify_qp_roce: GRH fields (TTL, flow
// label, TOS, the UDP source port, a new user priority with its
// work-scheduler leaf), the source MAC and VLAN of the SGID's netdev, the IP
// addresses in driver word order (docs/hw-controlpath.md "MAC and IP byte
// order"), and the destination MAC into the ARP table (irdma_add_arp), whose
// index goes in the context.
func (d *Device) applyAV(q *QP, ah *AHAttr) error {
	sg, err := d.sgidAttr(ah.SGIDIndex)
	if err != nil {
		return err
	}
	q.mu.Lock()
	c := &q.ctx
	q.av, q.avValid = *ah, true
	newPri := q.userPri
	if ah.GRH {
		c.TTL = ah.HopLimit
		c.FlowLabel = ah.FlowLabel
		c.TOS = ah.TrafficClass
		c.SrcPort = udpSrcPort(c.FlowLabel, q.id, c.DestQP)
		newPri = tos2Priority(c.TOS)
	}
	q.mu.Unlock()
	if ah.GRH {
		// irdma_qp_rem_qos; ws_remove(old); ws_add(new); irdma_qp_add_qos.
		d.qpLeaveQoS(q)
		q.mu.Lock()
		q.userPri = newPri
		q.mu.Unlock()
		if err := d.qpJoinQoS(q); err != nil {
			return syscall.ENOMEM
		}
	}
	dst := ah.DGID.Addr()
	dw, _ := ipWords(dst)
	sw, _ := ipWords(sg.Addr)
	q.mu.Lock()
	c.MAC = d.mac()
	c.InsertVLANTag = false // no VLAN on the netdev (rdma_read_gid_l2_fields: 0xffff)
	c.VLANTag = 0
	var key [4]uint32
	if !sg.IPv4 {
		c.DestIP, c.LocalIP = dw, sw
		c.IPv4 = false
		key = dw
	} else {
		c.IPv4 = true
		c.DestIP = [4]uint32{0, 0, 0, dw[0]}
		c.LocalIP = [4]uint32{0, 0, 0, sw[0]}
		key = [4]uint32{dw[0]}
	}
	ipv4 := c.IPv4
	q.mu.Unlock()
	idx, err := d.addARP(key, ipv4, ah.DMAC)
	if err != nil {
		return err
	}
	q.mu.Lock()
	c.ARPIdx = uint16(idx)
	q.mu.Unlock()
	return nil
}

// arpKey identifies an ARP-table entry by destination IP (driver word
// order) and family.
type arpKey struct {
	ip   [4]uint32
	ipv4 bool
}

type arpEntry struct {
	idx uint16
	mac [6]byte
}

// addARP is utils.c:irdma_add_arp: resolve the IP in the driver's ARP
// table; same MAC → its index; different MAC → delete the old entry
// (MANAGE_ARP delete) and add again; not present → allocate an index and
// MANAGE_ARP add (permanent).
func (d *Device) addARP(ip [4]uint32, ipv4 bool, mac [6]byte) (uint16, error) {
	d.arpMu.Lock()
	defer d.arpMu.Unlock()
	k := arpKey{ip, ipv4}
	if e, ok := d.arp[k]; ok {
		if e.mac == mac {
			return e.idx, nil
		}
		if err := d.manageARP(e.idx, mac, false); err != nil {
			d.log.Warn("MANAGE_ARP delete failed", errField(err))
		}
		delete(d.arp, k)
		d.arpIDs.free(uint32(e.idx))
	}
	id, err := d.arpIDs.alloc(-1)
	if err != nil {
		return 0, syscall.ENOMEM
	}
	if err := d.manageARP(uint16(id), mac, true); err != nil {
		d.arpIDs.free(id)
		return 0, err
	}
	d.arp[k] = &arpEntry{idx: uint16(id), mac: mac}
	return uint16(id), nil
}

// manageARP is hw.c:irdma_manage_arp_cache's CQP half.
func (d *Device) manageARP(idx uint16, mac [6]byte, add bool) error {
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		if add {
			return buildAddARP(idx, mac, true), nil
		}
		return buildDelARP(idx), nil
	})
	return err
}

// DelARP removes the ARP entry of an IP address (irdma_manage_arp_cache
// with IRDMA_ARP_DELETE, as a neighbour going away triggers). The daemon
// calls it on netlink neighbour deletions.
func (d *Device) DelARP(addr netip.Addr) error {
	w, ipv4 := ipWords(addr)
	k := arpKey{w, ipv4}
	if ipv4 {
		k = arpKey{[4]uint32{w[0]}, true}
	}
	d.arpMu.Lock()
	defer d.arpMu.Unlock()
	e, ok := d.arp[k]
	if !ok {
		return syscall.ENOENT
	}
	delete(d.arp, k)
	d.arpIDs.free(uint32(e.idx))
	return d.manageARP(e.idx, e.mac, false)
}

package driver

import (
	"net/netip"
	"syscall"
)

// AH is an address handle (irdma_ah).
type AH struct {
	d         *Device
	pd        *PD
	info      ahInfo
	attr      AHAttr
	sgidIndex uint8
	parent    *AH // user AHs: the shared hardware AH (irdma_ah_exists)
	refs      int
	dead      bool
}

// ID is the AH index (ah_idx of irdma_create_ah_resp, the AHID user
// space puts in UD WQEs).
func (a *AH) ID() uint32 { return a.info.AHIdx }

// ahKey is the hash key of irdma_ah_exists: the whole irdma_ah_info minus
// the index.
type ahKey struct {
	info ahInfo
}

// mcastMAC is verbs.c:irdma_mcast_mac: 01:00:5e + the low 23 bits of an
// IPv4 group, 33:33 + the low 32 bits of an IPv6 group (ip is the
// driver's host-order word array).
func mcastMAC(ip [4]uint32, ipv4 bool) [6]byte {
	if ipv4 {
		a := ip[0]
		return [6]byte{0x01, 0x00, 0x5e, byte(a>>16) & 0x7f, byte(a >> 8), byte(a)}
	}
	a := ip[3]
	return [6]byte{0x33, 0x33, byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}
}

// setupAH is verbs.c:irdma_setup_ah: PD, GRH fields, addresses (IPv4 in
// word 0), loopback when source and destination match or the destination
// is loopback or multicast (multicast also rewrites the destination MAC),
// the SGID netdev's MAC, and the destination MAC in the ARP table.
func (d *Device) setupAH(pd *PD, attr *AHAttr) (ahInfo, error) {
	var info ahInfo
	sg, err := d.sgidAttr(attr.SGIDIndex)
	if err != nil {
		return info, err
	}
	info.PDIdx = pd.id
	if attr.GRH {
		info.FlowLabel = attr.FlowLabel
		info.HopTTL = attr.HopLimit
		info.TCTOS = attr.TrafficClass
	}
	dmac := attr.DMAC
	dst := attr.DGID.Addr()
	dw, _ := ipWords(dst)
	sw, _ := ipWords(sg.Addr)
	if sg.IPv4 {
		info.IPv4 = true
		info.DestIP = [4]uint32{dw[0]}
		info.SrcIP = [4]uint32{sw[0]}
		info.DoLoopback = dst.IsLoopback() || sw[0] == dw[0]
		if dst.Is4() && dst.IsMulticast() {
			info.DoLoopback = true
			dmac = mcastMAC(info.DestIP, true)
		}
	} else {
		info.DestIP, info.SrcIP = dw, sw
		info.DoLoopback = dst == netip.IPv6Loopback() || dw == sw
		if dst.IsMulticast() {
			info.DoLoopback = true
			dmac = mcastMAC(info.DestIP, false)
		}
	}
	info.SrcMAC = d.mac()
	idx, err := d.addARP(info.DestIP, info.IPv4, dmac)
	if err != nil {
		return info, syscall.EINVAL
	}
	info.DstARPIdx = idx
	// No VLAN (vlan_tag 0xffff ≥ VLAN_N_VID): no insert.
	return info, nil
}

// CreateAH is verbs.c:irdma_create_ah (kernel) and irdma_create_user_ah
// (user): an AH index from the FSIAV range and CREATE_ADDR_HANDLE. A user
// AH identical to an existing one shares it (irdma_ah_exists).
func (d *Device) CreateAH(pd *PD, attr AHAttr, user bool) (*AH, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	if pd == nil || pd.d != d || pd.dead.Load() {
		return nil, syscall.EINVAL
	}
	info, err := d.setupAH(pd, &attr)
	if err != nil {
		return nil, err
	}
	ah := &AH{d: d, pd: pd, info: info, attr: attr, sgidIndex: attr.SGIDIndex}
	if user {
		d.ahMu.Lock()
		defer d.ahMu.Unlock()
		if p, ok := d.ahHash[ahKey{info}]; ok {
			p.refs++
			ah.parent = p
			ah.info.AHIdx = p.info.AHIdx
			pd.users.Add(1)
			return ah, nil
		}
	}
	if err := d.createHWAH(ah); err != nil {
		return nil, err
	}
	if user {
		parent := &AH{d: d, pd: pd, info: ah.info, refs: 1}
		d.ahHash[ahKey{info}] = parent
		ah.parent = parent
	}
	pd.users.Add(1)
	return ah, nil
}

// createHWAH is verbs.c:irdma_create_hw_ah.
func (d *Device) createHWAH(ah *AH) error {
	id, err := d.ahIDs.alloc(-1)
	if err != nil {
		return err
	}
	ah.info.AHIdx = id
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildAccessAH(cqpOpCreateAddrHandle, ah.info), nil
	}); err != nil {
		d.ahIDs.free(id)
		return err
	}
	return nil
}

// DestroyAH is verbs.c:irdma_destroy_ah: a shared user AH is destroyed in
// hardware only with its last user; DESTROY_ADDR_HANDLE, then the index
// is freed.
func (d *Device) DestroyAH(ah *AH) error {
	if ah == nil || ah.d != d || ah.dead {
		return syscall.EINVAL
	}
	ah.dead = true
	ah.pd.users.Add(-1)
	if ah.parent != nil {
		d.ahMu.Lock()
		ah.parent.refs--
		last := ah.parent.refs == 0
		if last {
			delete(d.ahHash, ahKey{ah.parent.info})
		}
		d.ahMu.Unlock()
		if !last {
			return nil
		}
	}
	if d.alive() == nil {
		_, _ = d.cqp.exec(func(uint32) (cqpWQE, error) {
			return buildAccessAH(cqpOpDestroyAddrHandle, ah.info), nil
		})
	}
	d.ahIDs.free(ah.info.AHIdx)
	return nil
}

// QueryAH is verbs.c:irdma_query_ah: the GRH fields as the hardware AH
// holds them.
func (d *Device) QueryAH(ah *AH) AHAttr {
	var a AHAttr
	if ah.attr.GRH {
		a.GRH = true
		a.FlowLabel = ah.info.FlowLabel
		a.TrafficClass = ah.info.TCTOS
		a.HopLimit = ah.info.HopTTL
		a.SGIDIndex = ah.sgidIndex
		a.DGID = ah.attr.DGID
	}
	return a
}

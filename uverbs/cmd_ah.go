package uverbs

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/driver"
)

// sgid is rdma_get_gid_attr for port 1 (rdma_fill_sgid_attr): an index
// beyond the table is -EINVAL, an empty entry -ENODATA.
func (s *Session) sgid(index uint8) (driver.GIDEntry, error) {
	pa, err := s.p.d.QueryPort(1)
	if err != nil {
		return driver.GIDEntry{}, err
	}
	if uint32(index) >= pa.GIDTblLen {
		return driver.GIDEntry{}, eINVAL
	}
	t := s.p.d.GIDTable()
	if int(index) >= len(t) {
		return driver.GIDEntry{}, eNODATA
	}
	return t[index], nil
}

// isMulticastGID is rdma_is_multicast_addr.
func isMulticastGID(g [16]byte) bool {
	if g[0] == 0xff {
		return true
	}
	a := netip.AddrFrom16(g)
	return a.Is4In6() && a.Unmap().IsMulticast()
}

// resolveDMAC is ib_resolve_eth_dmac: a multicast GID maps to its
// Ethernet group address (ip_eth_mc_map, ipv6_eth_mc_map), a unicast one
// is resolved like rdma_addr_find_l2_eth_by_grh — the device's own
// addresses through the loopback route to its own MAC, others through the
// Resolver — which also yields the route's hop limit (setHop).
func (s *Session) resolveDMAC(sg driver.GIDEntry, dgid [16]byte) (mac [6]byte, hop uint8, setHop bool, err error) {
	if isMulticastGID(dgid) {
		if a := netip.AddrFrom16(dgid); a.Is4In6() {
			v := a.Unmap().As4()
			return [6]byte{0x01, 0x00, 0x5e, v[1] & 0x7f, v[2], v[3]}, 0, false, nil
		}
		return [6]byte{0x33, 0x33, dgid[12], dgid[13], dgid[14], dgid[15]}, 0, false, nil
	}
	dst := driver.GID(dgid).Addr()
	t := s.p.d.GIDTable()
	local := dst.IsLoopback()
	for _, e := range t {
		local = local || e.Addr == dst
	}
	if local {
		return ownMAC(t), defaultHopLimit, true, nil
	}
	r := s.p.cfg.Resolver
	if r == nil {
		s.log.Warn("uverbs: no neighbour resolver: destination unreachable", zap.Stringer("dst", dst))
		return mac, 0, false, eTIMEDOUT
	}
	m, hl, err := r.Resolve(sg.Addr, dst)
	if err != nil {
		s.log.Debug("uverbs: neighbour resolution failed", zap.Stringer("dst", dst), zap.Error(err))
		return mac, 0, false, err
	}
	if len(m) != 6 {
		return mac, 0, false, eNODATA
	}
	copy(mac[:], m)
	return mac, hl, true, nil
}

// ownMAC recovers the netdev's MAC from GID 0, the EUI-64 link-local GID
// the GID cache derives from it (addrconf_addr_eui48).
func ownMAC(t []driver.GIDEntry) [6]byte {
	if len(t) == 0 {
		return [6]byte{}
	}
	g := t[0].GID
	return [6]byte{g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]}
}

// createAH is ib_uverbs_create_ah → rdma_create_user_ah (the SGID, the
// destination MAC) → irdma_create_user_ah, whose response carries the
// AH index user space puts in UD WQEs.
func (s *Session) createAH(a *bundle) error {
	req, err := a.request(szCreateAH)
	if err != nil {
		return err
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	port := get8(req, 54)
	if port != 1 {
		return eINVAL
	}
	pd, err := s.readPD(get32(req, 16))
	if err != nil {
		return err
	}
	var dgid [16]byte
	copy(dgid[:], req[24:40])
	attr := driver.AHAttr{DGID: driver.GID(dgid), SL: get8(req, 50), PortNum: port}
	if get8(req, 53) == 0 {
		return eINVAL // rdma_check_ah_attr: RoCE needs the GRH
	}
	attr.GRH = true
	attr.FlowLabel, attr.SGIDIndex = get32(req, 40), get8(req, 44)
	attr.HopLimit, attr.TrafficClass = get8(req, 45), get8(req, 46)
	sg, err := s.sgid(attr.SGIDIndex)
	if err != nil {
		return err
	}
	mac, hop, setHop, err := s.resolveDMAC(sg, dgid)
	if err != nil {
		return err
	}
	attr.DMAC = mac
	if setHop {
		attr.HopLimit = hop
	}
	if a.udOutLen < szAHResp { // IRDMA_CREATE_AH_MIN_RESP_LEN
		return eINVAL
	}
	ah, err := s.p.d.CreateAH(pd.pd, attr, true)
	if err != nil {
		return err
	}
	h := s.h.alloc(object{kindAH, &ahObj{ah: ah, pd: pd, userHandle: get64(req, 8)}})
	resp := make([]byte, szCreateAHResp)
	put32(resp, 0, h)
	a.respond(resp)
	u := make([]byte, szAHResp)
	put32(u, 0, ah.ID())
	a.udataOut(u)
	return nil
}

// destroyAH is ib_uverbs_destroy_ah.
func (s *Session) destroyAH(a *bundle) error {
	req, err := a.request(szDestroyAH)
	if err != nil {
		return err
	}
	h := get32(req, 0)
	v, err := s.h.lookup(h, kindAH)
	if err != nil {
		return err
	}
	if err := s.p.d.DestroyAH(v.(*ahObj).ah); err != nil {
		return err
	}
	s.h.remove(h)
	return nil
}

// mcastOK is ib_attach_mcast / ib_detach_mcast's check: a multicast GID
// on a UD QP (any multicast LID on an Ethernet port).
func mcastOK(qo *qpObj, gid [16]byte) bool {
	return isMulticastGID(gid) && qo.qpType == ibQPTUD
}

// attachMcast is ib_uverbs_attach_mcast: attaching twice is a no-op.
func (s *Session) attachMcast(a *bundle) error {
	req, err := a.request(szAttachMcast)
	if err != nil {
		return err
	}
	qo, err := s.readQP(get32(req, 16))
	if err != nil {
		return err
	}
	var e mcastEntry
	copy(e.gid[:], req[:16])
	e.mlid = get16(req, 20)
	for _, m := range qo.mcast {
		if m == e {
			return nil
		}
	}
	if !mcastOK(qo, e.gid) {
		return eINVAL
	}
	if err := s.p.d.AttachMcast(qo.qp, driver.GID(e.gid)); err != nil {
		return err
	}
	qo.mcast = append(qo.mcast, e)
	return nil
}

// detachMcast is ib_uverbs_detach_mcast: the attachment must exist; it
// leaves the QP's list before ib_detach_mcast runs.
func (s *Session) detachMcast(a *bundle) error {
	req, err := a.request(szAttachMcast)
	if err != nil {
		return err
	}
	qo, err := s.readQP(get32(req, 16))
	if err != nil {
		return err
	}
	var e mcastEntry
	copy(e.gid[:], req[:16])
	e.mlid = get16(req, 20)
	found := -1
	for i, m := range qo.mcast {
		if m == e {
			found = i
			break
		}
	}
	if found < 0 {
		return eINVAL
	}
	qo.mcast = append(qo.mcast[:found], qo.mcast[found+1:]...)
	if !mcastOK(qo, e.gid) {
		return eINVAL
	}
	return s.p.d.DetachMcast(qo.qp, driver.GID(e.gid))
}

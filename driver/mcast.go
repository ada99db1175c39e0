package driver

import "syscall"

// mcGroup is mc_table_list: one multicast group, its MG context in host
// memory and the QPs attached (irdma_mcast_grp_info).
type mcGroup struct {
	ip      [4]uint32
	ipv4    bool
	mgID    uint16
	dmac    [6]byte
	qs      uint16
	ctx     dmaMem
	entries [maxMgsPerCtx]mgCtxEntry
	noMgs   int
}

// mcastListLookupIP is verbs.c:mcast_list_lookup_ip.
func (d *Device) mcastListLookupIP(ip [4]uint32) *mcGroup {
	for _, g := range d.mcList {
		if g.ip == ip {
			return g
		}
	}
	return nil
}

// addMcastGrp is uda.c:irdma_sc_add_mcast_grp: an identical entry only
// gains a use; otherwise the first free slot.
func (g *mcGroup) add(qpID uint32) bool {
	free := -1
	for i := range g.entries {
		e := &g.entries[i]
		if e.Valid {
			if e.QPID == qpID && e.DestPort == 0 {
				e.UseCnt++
				return true
			}
			continue
		}
		if free < 0 {
			free = i
		}
	}
	if free < 0 {
		return false
	}
	g.entries[free] = mgCtxEntry{QPID: qpID, Valid: true, UseCnt: 1}
	g.noMgs++
	return true
}

// del is uda.c:irdma_sc_del_mcast_grp, gap removal included.
func (g *mcGroup) del(qpID uint32) bool {
	for i := range g.entries {
		e := &g.entries[i]
		if !e.Valid || e.QPID != qpID || e.DestPort != 0 {
			continue
		}
		e.UseCnt--
		if e.UseCnt == 0 {
			e.Valid = false
			g.noMgs--
			if i != g.noMgs && g.noMgs > 0 {
				g.entries[i] = g.entries[g.noMgs-1]
				g.entries[g.noMgs-1].Valid = false
			}
		}
		return true
	}
	return false
}

func (g *mcGroup) info() mcastGrpInfo {
	return mcastGrpInfo{MGID: g.mgID, DestMAC: g.dmac, VLANID: 0xffff, QSHandle: g.qs, IPv4: g.ipv4,
		DestIP: g.ip, CtxPA: g.ctx.pa}
}

// mcastCQPOp is verbs.c:irdma_mcast_cqp_op over uda.c:irdma_access_mcast_grp:
// the MG context is rewritten from the entries, then the WQE posted.
func (d *Device) mcastCQPOp(g *mcGroup, op uint8) error {
	words := encodeMgCtx(&g.entries)
	for i, w := range words {
		d.store64(g.ctx.at(8*i), w)
	}
	info := g.info()
	info.HMCFcnID = d.cfg.HMCFnID
	_, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildMcastGrp(op, info) })
	return err
}

// AttachMcast is verbs.c:irdma_attach_mcast: find or create the group of
// the GID's IP (a group id from the bitmap, a page for the 8-entry MG
// context, the multicast MAC, the QP's QS handle), add the QP
// (-ENOMEM when 8 are attached), then CREATE_MCAST_GRP for the first QP
// or MODIFY_MCAST_GRP when the membership changed; re-attaching a member
// changes nothing.
func (d *Device) AttachMcast(q *QP, gid GID) error {
	if err := d.alive(); err != nil {
		return err
	}
	if q == nil || q.d != d {
		return syscall.EINVAL
	}
	ip, ipv4 := ipWords(gid.Addr())
	if ipv4 {
		ip = [4]uint32{ip[0]}
	}
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	g := d.mcastListLookupIP(ip)
	if g == nil {
		id, err := d.mcgIDs.alloc(-1)
		if err != nil {
			return syscall.ENOMEM
		}
		ctx, err := d.allocDMA(4096, 0, "mcast-ctx")
		if err != nil {
			d.mcgIDs.free(id)
			return syscall.ENOMEM
		}
		q.mu.Lock()
		qs := q.ctx.QSHandle
		q.mu.Unlock()
		g = &mcGroup{ip: ip, ipv4: ipv4, mgID: uint16(id), dmac: mcastMAC(ip, ipv4), qs: qs, ctx: ctx}
		d.mcList = append(d.mcList, g)
	} else if g.noMgs == maxMgsPerCtx {
		return syscall.ENOMEM
	}
	before := g.noMgs
	if !g.add(q.id) {
		return syscall.ENOMEM
	}
	var err error
	switch {
	case before == 0:
		err = d.mcastCQPOp(g, cqpOpCreateMcastGrp)
	case before != g.noMgs:
		err = d.mcastCQPOp(g, cqpOpModifyMcastGrp)
	default:
		return nil
	}
	if err != nil {
		g.del(q.id)
		if g.noMgs == 0 {
			d.mcastDrop(g)
		}
		return err
	}
	return nil
}

func (d *Device) mcastDrop(g *mcGroup) {
	for i, x := range d.mcList {
		if x == g {
			d.mcList = append(d.mcList[:i], d.mcList[i+1:]...)
			break
		}
	}
	d.freeDMA(&g.ctx)
	d.mcgIDs.free(uint32(g.mgID))
}

// DetachMcast is verbs.c:irdma_detach_mcast: remove the QP; the last one
// destroys the group (DESTROY_MCAST_GRP; -EAGAIN if that fails), others
// MODIFY_MCAST_GRP. An unknown group is not an error.
func (d *Device) DetachMcast(q *QP, gid GID) error {
	if q == nil || q.d != d {
		return syscall.EINVAL
	}
	ip, ipv4 := ipWords(gid.Addr())
	if ipv4 {
		ip = [4]uint32{ip[0]}
	}
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	return d.detachLocked(q, ip)
}

func (d *Device) detachLocked(q *QP, ip [4]uint32) error {
	g := d.mcastListLookupIP(ip)
	if g == nil {
		return nil
	}
	g.del(q.id)
	if g.noMgs == 0 {
		if err := d.mcastCQPOp(g, cqpOpDestroyMcastGrp); err != nil && d.alive() == nil {
			return syscall.EAGAIN
		}
		d.mcastDrop(g)
		return nil
	}
	return d.mcastCQPOp(g, cqpOpModifyMcastGrp)
}

// mcastDetachAll drops a destroyed QP from every group (the RDMA core
// detaches a QP's groups before destroying it).
func (d *Device) mcastDetachAll(q *QP) {
	d.mcMu.Lock()
	defer d.mcMu.Unlock()
	for _, g := range append([]*mcGroup(nil), d.mcList...) {
		for i := range g.entries {
			if g.entries[i].Valid && g.entries[i].QPID == q.id {
				g.entries[i].UseCnt = 1
				_ = d.detachLocked(q, g.ip)
				break
			}
		}
	}
}

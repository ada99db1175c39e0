package driver

import "sync"

// wsTree is the GEN_2 work-scheduler tree (ws.c): a root node, one node
// for our VSI, and a leaf per traffic class whose QS handle QPs use. With
// no DCB every user priority maps to traffic class 0, so one leaf serves
// them all (irdma_set_qos_info with a single TC).
type wsTree struct {
	// mu is dev->ws_mutex and the per-priority qos_mutex in one: it
	// guards every field below, the QoS table included. Nothing reads
	// qos[].qsHandle without it (a QP takes its handle in qpJoinQoS).
	mu      sync.Mutex
	root    *wsNode
	vsiNode *wsNode
	leaf    *wsNode
	qos     [maxUserPriority]qosEntry
	ids     [maxWSNodes/64 + 1]uint64
}

type wsNode struct {
	info wsNodeInfo
}

// qosEntry is irdma_qos: per user priority.
type qosEntry struct {
	valid    bool
	qsHandle uint16
	tc       uint8
	qps      int // qplist length
}

// allocWSNodeID is irdma_alloc_ws_node_id (0 is the root's).
func (t *wsTree) allocWSNodeID() (uint16, bool) {
	for id := 1; id < maxWSNodes; id++ {
		if t.ids[id/64]&(1<<(id%64)) == 0 {
			t.ids[id/64] |= 1 << (id % 64)
			return uint16(id), true
		}
	}
	return 0, false
}

func (t *wsTree) freeWSNodeID(id uint16) {
	if id != 0 {
		t.ids[id/64] &^= 1 << (id % 64)
	}
}

// wsCmd is utils.c:irdma_ws_cqp_cmd: WORK_SCHED_NODE; an added leaf takes its
// QS handle from OP_RETVAL.
func (d *Device) wsCmd(n *wsNode, op uint8) (uint32, error) {
	compl, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildWSNode(n.info, op), nil })
	return compl.OpRetVal, err
}

// wsAddLocked is ws.c:irdma_ws_add (dev->ws_add on GEN_2) with
// dev->ws_mutex (t.mu) held: the first use of a user priority builds root
// (id 0, its own parent), VSI node and TC leaf (added disabled, then
// modified to enabled), and records the leaf's QS handle for every user
// priority of that traffic class.
func (d *Device) wsAddLocked(up uint8) error {
	t := &d.ws
	if t.qos[up].valid {
		return nil
	}
	vsi := d.cfg.VSINum
	if t.root == nil {
		n := &wsNode{info: wsNodeInfo{ID: 0, VSI: vsi, ParentID: 0, Weight: 1, PrioType: 1, Enable: true}}
		if _, err := d.wsCmd(n, wsAddNode); err != nil {
			return err
		}
		t.root = n
	}
	if t.vsiNode == nil {
		id, ok := t.allocWSNodeID()
		if !ok {
			return errNoWSNode
		}
		n := &wsNode{info: wsNodeInfo{ID: id, VSI: vsi, ParentID: t.root.info.ID, Weight: 1, PrioType: 1, Enable: true}}
		if _, err := d.wsCmd(n, wsAddNode); err != nil {
			t.freeWSNodeID(id)
			d.wsDropEmpty()
			return err
		}
		t.vsiNode = n
	}
	tc := t.qos[up].tc
	if t.leaf == nil {
		id, ok := t.allocWSNodeID()
		if !ok {
			d.wsDropEmpty()
			return errNoWSNode
		}
		n := &wsNode{info: wsNodeInfo{ID: id, VSI: vsi, ParentID: t.vsiNode.info.ID, Weight: 1, TC: tc, PrioType: 1, Leaf: true}}
		qs, err := d.wsCmd(n, wsAddNode)
		if err != nil {
			t.freeWSNodeID(id)
			d.wsDropEmpty()
			return err
		}
		n.info.Enable = true
		if _, err := d.wsCmd(n, wsModifyNode); err != nil {
			_, _ = d.wsCmd(n, wsDelNode)
			t.freeWSNodeID(id)
			d.wsDropEmpty()
			return err
		}
		t.leaf = n
		for i := range t.qos {
			if t.qos[i].tc == tc {
				t.qos[i].qsHandle = uint16(qs)
			}
		}
	}
	for i := range t.qos {
		if t.qos[i].tc == tc {
			t.qos[i].valid = true
		}
	}
	return nil
}

// wsDropEmpty deletes the VSI node and root when nothing hangs below
// them (the error unwinding of irdma_ws_add, irdma_remove_leaf). Called
// with t.mu held.
func (d *Device) wsDropEmpty() {
	t := &d.ws
	if t.leaf == nil && t.vsiNode != nil {
		_, _ = d.wsCmd(t.vsiNode, wsDelNode)
		t.freeWSNodeID(t.vsiNode.info.ID)
		t.vsiNode = nil
	}
	if t.vsiNode == nil && t.root != nil {
		_, _ = d.wsCmd(t.root, wsDelNode)
		t.root = nil
	}
}

// wsRemoveLocked is ws.c:irdma_ws_remove with t.mu held: when no QP uses
// the traffic class any more (irdma_tc_in_use), delete its leaf, then the
// VSI node and root (irdma_remove_leaf).
func (d *Device) wsRemoveLocked(up uint8) {
	t := &d.ws
	tc := t.qos[up].tc
	for i := range t.qos {
		if t.qos[i].tc == tc && t.qos[i].qps > 0 {
			return // irdma_tc_in_use
		}
	}
	for i := range t.qos {
		if t.qos[i].tc == tc {
			t.qos[i].valid = false
		}
	}
	if t.leaf != nil {
		_, _ = d.wsCmd(t.leaf, wsDelNode)
		t.freeWSNodeID(t.leaf.info.ID)
		t.leaf = nil
	}
	d.wsDropEmpty()
}

// qpJoinQoS is dev->ws_add for the QP's user priority followed by
// utils.c:irdma_qp_add_qos: the QP joins its priority's list and takes the
// priority's QS handle into its context. The QoS table (valid, qs_handle,
// the qplist counts) is written by irdma_ws_add under dev->ws_mutex and
// read by irdma_qp_add_qos under the priority's qos_mutex; t.mu is both
// here. irdma releases ws_mutex between the two calls, which lets a
// concurrent irdma_ws_remove of the last other QP delete the leaf in
// between, leaving the new QP with the handle of a deleted queue set; one
// hold of t.mu closes that window. Lock order: t.mu, then q.mu.
func (d *Device) qpJoinQoS(q *QP) error {
	t := &d.ws
	t.mu.Lock()
	defer t.mu.Unlock()
	q.mu.Lock()
	up := q.userPri
	q.mu.Unlock()
	if err := d.wsAddLocked(up); err != nil {
		return err
	}
	q.mu.Lock()
	if !q.onQoS {
		t.qos[up].qps++
		q.onQoS = true
	}
	q.ctx.QSHandle = t.qos[up].qsHandle
	q.mu.Unlock()
	return nil
}

// qpLeaveQoS is utils.c:irdma_qp_rem_qos followed by dev->ws_remove for
// the priority the QP was on (irdma_free_qp_rsrc, and the IB_QP_AV part of
// irdma_modify_qp_roce before a new priority is joined). A QP not on a
// list changes nothing.
func (d *Device) qpLeaveQoS(q *QP) {
	t := &d.ws
	t.mu.Lock()
	defer t.mu.Unlock()
	q.mu.Lock()
	on, up := q.onQoS, q.userPri
	if on {
		t.qos[up].qps--
		q.onQoS = false
	}
	q.mu.Unlock()
	if on {
		d.wsRemoveLocked(up)
	}
}

type wsError string

func (e wsError) Error() string { return string(e) }

const errNoWSNode = wsError("irdma: no free work-scheduler node id")

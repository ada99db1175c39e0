package driver

import "sync"

// wsTree is the GEN_2 work-scheduler tree (ws.c): a root node, one node
// for our VSI, and a leaf per traffic class whose QS handle QPs use. With
// no DCB every user priority maps to traffic class 0, so one leaf serves
// them all (irdma_set_qos_info with a single TC).
type wsTree struct {
	mu      sync.Mutex // dev->ws_mutex
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

// wsAdd is ws.c:irdma_ws_add (dev->ws_add on GEN_2): the first use of a
// user priority builds root (id 0, its own parent), VSI node and TC leaf
// (added disabled, then modified to enabled), and records the leaf's QS
// handle for every user priority of that traffic class.
func (d *Device) wsAdd(up uint8) error {
	t := &d.ws
	t.mu.Lock()
	defer t.mu.Unlock()
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
// them (the error unwinding of irdma_ws_add, irdma_remove_leaf).
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

// wsRemove is ws.c:irdma_ws_remove: when no QP uses the traffic class
// any more, delete its leaf, then the VSI node and root.
func (d *Device) wsRemove(up uint8) {
	t := &d.ws
	t.mu.Lock()
	defer t.mu.Unlock()
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

// qpAddQoS is utils.c:irdma_qp_add_qos: the QP joins its user priority's
// list and takes its QS handle.
func (d *Device) qpAddQoS(q *QP) {
	t := &d.ws
	t.mu.Lock()
	q.mu.Lock()
	if !q.onQoS {
		t.qos[q.userPri].qps++
		q.onQoS = true
	}
	q.ctx.QSHandle = t.qos[q.userPri].qsHandle
	q.mu.Unlock()
	t.mu.Unlock()
}

// qpRemQoS is utils.c:irdma_qp_rem_qos.
func (d *Device) qpRemQoS(q *QP) {
	t := &d.ws
	t.mu.Lock()
	q.mu.Lock()
	if q.onQoS {
		t.qos[q.userPri].qps--
		q.onQoS = false
	}
	q.mu.Unlock()
	t.mu.Unlock()
}

type wsError string

func (e wsError) Error() string { return string(e) }

const errNoWSNode = wsError("irdma: no free work-scheduler node id")

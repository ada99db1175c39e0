package driver

import (
	"net/netip"
	"sync"
	"testing"
)

// TestConcurrentQPChurn: goroutines standing for programs create, modify
// and destroy QPs, AHs and multicast attachments on one device (the
// emu/device model) at the same time, over and over. With few QPs alive
// at any moment the work-scheduler tree is built and torn down again and
// again (the bare phase makes that nearly every CREATE_QP) while other
// goroutines join and leave the QoS lists, move QPs to other user
// priorities (an address vector's traffic class) and share a multicast
// group and user AHs. Under -race this is the driver-level test of the
// locking docs/verbs.md ("Concurrency") tabulates; the daemon's
// TestConcurrentControlPath runs the same through attach sessions. At the
// end nothing is left: no QP, AH or multicast group allocated, no QP on a
// QoS list, no work-scheduler node.
func TestConcurrentQPChurn(t *testing.T) {
	d := openReal(t, Config{}).d
	const (
		workers = 4
		bare    = 40 // QPs created and destroyed at once, per worker
		iters   = 20 // churnOnce rounds, per worker
	)
	group := gidFromAddr(netip.MustParseAddr("239.1.1.1"))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pd, err := d.AllocPD(false, 0)
			if err != nil {
				t.Errorf("worker %d: AllocPD: %v", w, err)
				return
			}
			cq, err := d.CreateCQ(CQAttr{CQE: 64})
			if err != nil {
				t.Errorf("worker %d: CreateCQ: %v", w, err)
				return
			}
			// Bare creates and destroys first: with every worker here,
			// the QP count keeps falling to zero, and each next
			// CREATE_QP builds the tree while the others' read the QoS
			// table.
			for i := range bare {
				q, _, err := d.CreateQP(pd, QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq,
					Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
				if err == nil {
					err = d.DestroyQP(q)
				}
				if err != nil {
					t.Errorf("worker %d, bare QP %d: %v", w, i, err)
					return
				}
			}
			for i := range iters {
				if err := churnOnce(d, pd, cq, uint8(8*((w+i)%4)), group); err != nil {
					t.Errorf("worker %d, iteration %d: %v", w, i, err)
					return
				}
			}
			if _, _, err := d.DestroyCQ(cq); err != nil {
				t.Errorf("worker %d: DestroyCQ: %v", w, err)
			}
			if err := d.DeallocPD(pd); err != nil {
				t.Errorf("worker %d: DeallocPD: %v", w, err)
			}
		}()
	}
	wg.Wait()
	if r := d.Resources(); r != (Resources{}) {
		t.Errorf("resources left: %+v", r)
	}
	ws := &d.ws
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.root != nil || ws.vsiNode != nil || ws.leaf != nil {
		t.Errorf("work-scheduler nodes left: root %v, VSI %v, leaf %v", ws.root, ws.vsiNode, ws.leaf)
	}
	for up, q := range ws.qos {
		if q.qps != 0 || q.valid {
			t.Errorf("user priority %d: %d QPs on its list, valid %v; want none", up, q.qps, q.valid)
		}
	}
}

// churnOnce is one iteration of TestConcurrentQPChurn: an RC QP walked
// RESET → INIT → RTR (its AV's traffic class tc picks the user priority)
// → RTS and destroyed from RTS; a UD QP attached to group and destroyed
// attached; two identical user AHs (one hardware AH) created and destroyed.
func churnOnce(d *Device, pd *PD, cq *CQ, tc uint8, group GID) error {
	attr := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	rc, _, err := d.CreateQP(pd, attr)
	if err != nil {
		return err
	}
	cur := QPSReset
	for _, next := range pathTo[QPSRTS] {
		a := fullAttr(next)
		a.AH.TrafficClass = tc
		if err := d.ModifyQP(rc, a, kernelTable[transKey(cur, next)][0][0]|QPAttrState); err != nil {
			return err
		}
		cur = next
	}
	attr.Type = QPTypeUD
	ud, _, err := d.CreateQP(pd, attr)
	if err != nil {
		return err
	}
	if err := d.AttachMcast(ud, group); err != nil {
		return err
	}
	ah1, err := d.CreateAH(pd, fullAttr(0).AH, true)
	if err != nil {
		return err
	}
	ah2, err := d.CreateAH(pd, fullAttr(0).AH, true)
	if err != nil {
		return err
	}
	for _, ah := range []*AH{ah1, ah2} {
		if err := d.DestroyAH(ah); err != nil {
			return err
		}
	}
	if err := d.DestroyQP(ud); err != nil { // detaches it (mcastDetachAll)
		return err
	}
	return d.DestroyQP(rc)
}

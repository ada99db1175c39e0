package daemon_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/client"
)

// TestDoorbellTwoQPs: two QPs of one context post their first WQEs at the
// same moment. They share the context's doorbell word (libirdma stores the
// QP id at offset 0 of the one doorbell page), so the second store can
// overwrite the first before the daemon reads it; both QPs must still be
// served.
//
// One doorbell per post, as libirdma rings: uverbs.Provider.Poll rings
// every QP of the context when its doorbell word changes, so the QP whose
// id was overwritten is served too.
func TestDoorbellTwoQPs(t *testing.T) {
	doorbellTwoQPs(t, 0)
}

func doorbellTwoQPs(t *testing.T, retry time.Duration) {
	na, nb := twoNodes(t, nil)
	for round := range 20 {
		ca, cb := na.open(t), nb.open(t)
		ca.SetDoorbellRetry(retry)
		cb.SetDoorbellRetry(retry)
		var qs [2][2]*end
		for i := range 2 {
			qs[i][0] = endOn(t, ca, na)
			qs[i][1] = endOn(t, cb, nb)
			qs[i][0].connectRC(t, qs[i][1])
			qs[i][1].connectRC(t, qs[i][0])
		}
		for i := range 2 {
			a, b := qs[i][0], qs[i][1]
			if _, err := a.qp.PostSend([]client.SendWR{{WrID: 1, Opcode: client.WRRDMAWrite, Flags: client.SendSignaled,
				SGList: []client.SGE{a.mr.SGE(0, 4096)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			wantOK(t, pollRound(t, qs[i][0].cq, round, i))
		}
		ca.Close()
		cb.Close()
	}
}

func pollRound(t *testing.T, cq *client.CQ, round, qp int) []client.WorkCompletion {
	t.Helper()
	wc := make([]client.WorkCompletion, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: QP %d of the context never completed its first WRITE", round, qp)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// endOn makes an end on an open context.
func endOn(t *testing.T, c *client.Context, n *node) *end {
	t.Helper()
	e := &end{n: n, ctx: c, psn: 1}
	var err error
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = c.AllocBuffer(8192); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, client.AccessLocalWrite|client.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(16, nil, 0); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = e.pd.CreateQP(client.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: client.QPTypeRC,
		Cap: client.QPCapabilities{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	e.gidx = gidIndex(t, c, n.addr)
	if e.gid, err = c.QueryGID(1, e.gidx); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, AccessFlags: client.AccessRemoteWrite},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	return e
}

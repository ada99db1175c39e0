package daemon_test

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// TestConcurrentControlPath is the stress test of the control path's
// locking (docs/verbs.md, "Concurrency"): several programs — client
// contexts, each its own attach session — work against one daemon at the
// same time, round after round. Each creates a PD, an MR and a CQ, a few
// QPs it destroys at once, then an RC and a UD QP; it walks the RC QP
// RESET → INIT → RTR → RTS (with an address vector whose traffic class
// moves it to another user priority: the work-scheduler tree and QoS
// lists), sends one message through it to itself, walks the UD QP to RTS
// and attaches it to a multicast group the other programs share, creates
// AHs (two identical ones, which share the hardware AH), moves the RC QP
// to ERR, and then either destroys everything in order or just closes its
// context and leaves the cleanup to the daemon. A control client reads the
// statistics all the while (GATHER_STATS on the CQP, the engine's per-QP
// counters). Every command must succeed, and at the end the resources
// section — sessions, PDs, CQs, QPs, MRs, AHs, multicast groups, bus
// regions, live transports — must be exactly the idle daemon's. Each round
// starts all programs together, after the previous round's have gone:
// their first CREATE_QPs then build the work-scheduler tree concurrently,
// the interleaving that raced in issue 10.
func TestConcurrentControlPath(t *testing.T) {
	const (
		programs = 8
		rounds   = 6
	)
	addr := testaddr.Loopback(t, 1)[0]
	d := daemontest.Start(t, "cc0", addr.String(), nil)
	ctl := dial(t, d)
	resources := func() (daemon.Resources, error) {
		s, err := ctl.Stats(-1)
		return s.Resources, err
	}
	base, err := resources()
	if err != nil {
		t.Fatal(err)
	}
	if base.Sessions != 0 || base.PDs != 0 || base.CQs != 0 || base.QPs != 0 || base.MRs != 0 || base.AHs != 0 ||
		base.McastGroups != 0 || base.Transports != 0 {
		t.Fatalf("an idle daemon: %+v", base)
	}

	// The statistics reader: its own control connection, so that its
	// requests interleave with the programs' commands.
	stop := make(chan struct{})
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		c, err := daemon.Dial(d.Paths().Control)
		if err != nil {
			t.Errorf("stats reader: %v", err)
			return
		}
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Stats(-1); err != nil {
				t.Errorf("stats while programs run: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	groups := []client.GID{
		client.GID(netip.MustParseAddr("::ffff:239.10.0.1").As16()),
		client.GID(netip.MustParseAddr("::ffff:239.10.0.2").As16()),
	}
	for r := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for p := range programs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				explicit := (p+r)%2 == 0
				if err := controlPathProgram(d, addr, p, groups[p%len(groups)], explicit); err != nil {
					t.Errorf("round %d, program %d (explicit teardown %v): %v", r, p, explicit, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			break
		}
		// The next round starts once this one's sessions are gone, so
		// that it builds the work-scheduler tree again.
		if err := waitResources(resources, func(got daemon.Resources) bool { return got.Sessions == 0 && got.QPs == 0 }); err != nil {
			t.Errorf("after round %d: %v", r, err)
			break
		}
	}
	close(stop)
	readerWG.Wait()
	if err := waitResources(resources, func(got daemon.Resources) bool { return got == base }); err != nil {
		t.Errorf("resources after %d rounds of %d programs, want the idle daemon's %+v: %v", rounds, programs, base, err)
	}
}

// waitResources polls the resources until ok accepts them (10 s at most);
// the error names the last ones seen.
func waitResources(get func() (daemon.Resources, error), ok func(daemon.Resources) bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := get()
		if err != nil {
			return err
		}
		if ok(got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bareQPs is how many QPs each program of TestConcurrentControlPath
// creates and destroys straight away before its real ones.
const bareQPs = 4

// controlPathProgram is one program of TestConcurrentControlPath: one
// context's objects created, driven and released (explicitly, or by
// closing the context).
func controlPathProgram(d *daemon.Daemon, addr netip.Addr, p int, group client.GID, explicit bool) (err error) {
	ctx, err := client.Open(d.Paths().Socket)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := ctx.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return step("ALLOC_PD", err)
	}
	buf, err := ctx.AllocBuffer(16 << 10)
	if err != nil {
		return step("buffer", err)
	}
	mr, err := pd.RegMR(buf, client.AccessLocalWrite)
	if err != nil {
		return step("REG_MR", err)
	}
	cq, err := ctx.CreateCQ(32, nil, 0)
	if err != nil {
		return step("CREATE_CQ", err)
	}
	caps := client.QPCapabilities{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
	// A few QPs created and destroyed at once: with every program here
	// the device's QP count keeps falling to zero, and each next
	// CREATE_QP builds the work-scheduler tree again while the other
	// programs' CREATE_QPs read the QoS table.
	for range bareQPs {
		q, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeUD, Cap: caps})
		if err != nil {
			return step("CREATE_QP (bare)", err)
		}
		if err := q.Destroy(); err != nil {
			return step("DESTROY_QP (bare)", err)
		}
	}
	rc, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeRC, Cap: caps})
	if err != nil {
		return step("CREATE_QP RC", err)
	}
	ud, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeUD, Cap: caps})
	if err != nil {
		return step("CREATE_QP UD", err)
	}
	gidx, err := ctx.FindGID(1, client.GID(addr.As16()))
	if err != nil {
		return step("GID", err)
	}
	gid, err := ctx.QueryGID(1, gidx)
	if err != nil {
		return step("GID", err)
	}

	// RC: RESET → INIT → RTR → RTS, connected to itself. The traffic
	// class picks user priority 0, 2, 6 or 4 (rt_tos2priority).
	tc := uint8(8 * (p % 4))
	if err := rc.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, AccessFlags: client.AccessLocalWrite},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags); err != nil {
		return step("RC → INIT", err)
	}
	av := client.AHAttr{IsGlobal: true, DGID: gid, SGIDIndex: uint8(gidx), HopLimit: 1, TrafficClass: tc, PortNum: 1}
	if err := rc.Modify(&client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: rc.QPN(), RQPSN: 1,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: av},
		client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
			client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		return step("RC → RTR", err)
	}
	if err := rc.Modify(&client.QPAttr{State: client.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 1, MaxRdAtomic: 1},
		client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|client.AttrSQPSN|
			client.AttrMaxQPRdAtomic); err != nil {
		return step("RC → RTS", err)
	}
	if a, err := rc.Query(client.AttrState); err != nil || a.State != client.QPSRTS {
		return fmt.Errorf("QUERY_QP after RTS: state %v, %v", a.State, err)
	}

	// UD: INIT → RTR → RTS, and a multicast group shared with other programs.
	if err := ud.Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, QKey: 0x11111111},
		client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrQKey); err != nil {
		return step("UD → INIT", err)
	}
	if err := ud.Modify(&client.QPAttr{State: client.QPSRTR}, client.AttrState); err != nil {
		return step("UD → RTR", err)
	}
	if err := ud.Modify(&client.QPAttr{State: client.QPSRTS, SQPSN: 1}, client.AttrState|client.AttrSQPSN); err != nil {
		return step("UD → RTS", err)
	}
	if err := ud.AttachMcast(group, 0); err != nil {
		return step("ATTACH_MCAST", err)
	}

	// AHs: two identical ones (one hardware AH, irdma_ah_exists) and one
	// of another traffic class.
	ahAttr := client.AHAttr{IsGlobal: true, DGID: gid, SGIDIndex: uint8(gidx), HopLimit: 64, PortNum: 1}
	var ahs []*client.AH
	for i := range 3 {
		a := ahAttr
		if i == 2 {
			a.TrafficClass = 16
		}
		ah, err := pd.CreateAH(a)
		if err != nil {
			return step("CREATE_AH", err)
		}
		ahs = append(ahs, ah)
	}
	if ahs[0].ID() != ahs[1].ID() || ahs[0].ID() == ahs[2].ID() {
		return fmt.Errorf("AH ids %d %d %d: identical AHs of one PD share the hardware AH, a different one does not",
			ahs[0].ID(), ahs[1].ID(), ahs[2].ID())
	}

	// One message through the RC QP to itself: the data plane runs
	// while the other programs' commands execute.
	if _, err := rc.PostRecv([]client.RecvWR{{WrID: 1, SGList: []client.SGE{mr.SGE(0, 64)}}}); err != nil {
		return step("post recv", err)
	}
	if _, err := rc.PostSend([]client.SendWR{{WrID: 2, Opcode: client.WRSend, Flags: client.SendSignaled,
		SGList: []client.SGE{mr.SGE(64, 64)}}}); err != nil {
		return step("post send", err)
	}
	wcs, err := pollN(cq, 2, 20*time.Second)
	if err != nil {
		return err
	}
	for _, wc := range wcs {
		if wc.Status != client.WCSuccess {
			return fmt.Errorf("completion %+v", wc)
		}
	}
	if err := rc.Modify(&client.QPAttr{State: client.QPSErr}, client.AttrState); err != nil {
		return step("RC → ERR", err)
	}
	if !explicit {
		return nil // the context's close releases the rest
	}
	if err := ud.DetachMcast(group, 0); err != nil {
		return step("DETACH_MCAST", err)
	}
	for _, ah := range ahs {
		if err := ah.Destroy(); err != nil {
			return step("DESTROY_AH", err)
		}
	}
	for _, q := range []*client.QP{rc, ud} {
		if err := q.Destroy(); err != nil {
			return step("DESTROY_QP", err)
		}
	}
	if err := cq.Destroy(); err != nil {
		return step("DESTROY_CQ", err)
	}
	if err := mr.Dereg(); err != nil {
		return step("DEREG_MR", err)
	}
	return step("DEALLOC_PD", pd.Dealloc())
}

// pollN waits for n completions on cq.
func pollN(cq *client.CQ, n int, within time.Duration) ([]client.WorkCompletion, error) {
	wcs := make([]client.WorkCompletion, 16)
	var got []client.WorkCompletion
	deadline := time.Now().Add(within)
	for len(got) < n {
		k, err := cq.Poll(wcs)
		if err != nil {
			return got, err
		}
		got = append(got, wcs[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				return got, fmt.Errorf("%d of %d completions after %v: %+v", len(got), n, within, got)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got, nil
}

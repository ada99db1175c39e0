// Package dataplane_test runs two emulated devices joined by an in-process
// link (emu/link.NewPair), each brought up through hand-written CQP WQEs
// (emu/device/devtest) with its data plane (emu/engine). Work requests are
// posted with the driver half's uk layer (driver/uk: irdma's WQE builders
// and CQE poller), so the WQEs the device consumes and the CQEs it writes
// are checked against the driver's side of the hardware contract.
package dataplane_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// opts configure a world.
type opts struct {
	stepped  bool // timing.Manual clock, engines driven by world.step
	faults   link.Faults
	atomics  bool
	tun      qp.Tunables
	ipv6     bool
	linkMTU  int
	workers  int
	scan     engine.ScanConfig
	capture  bool // the pair writes a pcap into world.pcap
	queueLen int
	handOff  bool // engine.Config.HandOff: no run to completion
	gen3     bool // the GEN_3 profile (E2100) instead of GEN_2
}

// world is two devices on one link.
type world struct {
	t     testing.TB
	clk   timing.Clock
	man   *timing.Manual
	pair  *link.Pair
	nodes [2]*node
	o     opts
	pcap  *bytes.Buffer // with opts.capture; complete once the pair is closed
}

// node is one device with its engine.
type node struct {
	w      *world
	idx    int
	env    *devtest.Env
	eng    *engine.Engine
	ip     netip.Addr
	mac    wire.MAC
	lim    uk.Limits
	nextID uint32
	nextMR uint32
}

func newWorld(t testing.TB, o opts) *world {
	t.Helper()
	w := &world{t: t, o: o}
	if o.stepped {
		w.man = timing.NewManual()
		w.clk = w.man
	} else {
		w.clk = timing.NewWall()
	}
	prof := profile.GEN2()
	if o.gen3 {
		prof = profile.GEN3()
	}
	if o.atomics {
		prof = prof.WithAtomics(true)
	}
	ql := o.queueLen
	if ql == 0 {
		ql = 1 << 16
	}
	pc := link.PairConfig{Clock: w.clk, AtoB: o.faults, BtoA: o.faults, QueueLen: ql, MTU: o.linkMTU}
	if o.stepped {
		// Frames take wire time, so a burst arrives spread out, as on a
		// real link, and the receiver keeps up with the sender.
		pc.Rate, pc.Delay = 25e9, time.Microsecond
	}
	if o.faults.Seed != 0 {
		pc.BtoA.Seed = o.faults.Seed + 1
	}
	pc.Pool = link.NewPool(1 << 16)
	if o.capture {
		w.pcap = &bytes.Buffer{}
		pc.Capture = w.pcap
	}
	var err error
	w.pair, err = link.NewPair(pc)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the engines (registered below) stop
	// before the link and before their devices (registered by Bringup).
	t.Cleanup(func() { w.pair.Close() })
	ends := [2]*link.End{w.pair.A(), w.pair.B()}
	for i := range w.nodes {
		env := devtest.Bringup(t, devtest.Options{Config: device.Config{Clock: w.clk, Profile: prof}})
		n := &node{w: w, idx: i, env: env, mac: ends[i].MAC(), lim: uk.LimitsFrom(prof), nextID: 2, nextMR: 1}
		if o.ipv6 {
			n.ip = netip.MustParseAddr(fmt.Sprintf("fd00::%d", i+1))
		} else {
			n.ip = netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", i+1))
		}
		eng, err := engine.New(env.Dev, engine.Config{Stepped: o.stepped, Tunables: o.tun, GIDs: []netip.Addr{n.ip},
			Workers: o.workers, Scan: o.scan, HandOff: o.handOff})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.AttachLink(ends[i]); err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(); err != nil {
			t.Fatal(err)
		}
		n.eng = eng
		t.Cleanup(func() { eng.Close() })
		w.nodes[i] = n
	}
	return w
}

// step makes progress in a stepped world: it polls the engines until
// they are idle, else advances the clock to the next timer (a frame's
// arrival, a retransmission, an RNR wait). It reports false when nothing
// at all is pending.
func (w *world) step() bool {
	if !w.o.stepped {
		runtime.Gosched()
		time.Sleep(20 * time.Microsecond)
		return true
	}
	progressed := false
	for range 10000 {
		p := false
		for _, n := range w.nodes {
			if n.eng.Poll() {
				p = true
			}
		}
		if !p {
			break
		}
		progressed = true
	}
	if progressed {
		return true
	}
	next, ok := w.man.Next()
	if !ok {
		return false
	}
	w.man.Advance(max(next-w.man.Now(), 0))
	return true
}

// until steps the world until cond holds.
func (w *world) until(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if !w.step() {
			w.dump()
			w.t.Fatalf("%s: the world went idle (nothing pending)", what)
		}
		if time.Now().After(deadline) {
			w.dump()
			w.t.Fatalf("%s: timed out", what)
		}
	}
}

// quiesce steps a stepped world until nothing at all is pending: no
// engine has work, no frame is in flight and no timer is armed.
func (w *world) quiesce(what string) {
	w.t.Helper()
	if !w.o.stepped {
		w.t.Fatalf("%s: quiesce needs a stepped world", what)
	}
	for i := 0; w.step(); i++ {
		if i == 1_000_000 {
			w.dump()
			w.t.Fatalf("%s: still busy after %d steps", what, i)
		}
	}
}

// ep is one QP with its CQs and the driver's view of them.
type ep struct {
	n        *node
	q        *devtest.QP
	scq, rcq *devtest.CQ
	uq       *uk.QP
	us, ur   *uk.CQ
	pd       uint32
}

// qpOpt adjusts a QP spec before creation.
type qpOpt func(*devtest.QPSpec)

func (n *node) newEP(ud bool, peer *node, mods ...qpOpt) *ep {
	t := n.w.t
	t.Helper()
	e := n.env
	id := n.nextID
	n.nextID++
	scq := e.CreateCQ(2*id, 4096)
	rcq := e.CreateCQ(2*id+1, 4096)
	spec := devtest.QPSpec{
		ID: id, UD: ud, SQQuanta: 4096, RQWQEs: 512, RQShift: 3, SendCQ: scq.ID, RecvCQ: rcq.ID,
		PD: 7, MTU: 1024, LocalIP: n.ip, ARPIdx: 1, RetryCnt: 7, RNRRetry: 7, ORD: 16, IRDEnc: 3,
		RdOK: true, WrOK: true, FastReg: true, Bind: true, Priv: true, MAC: n.mac,
		CompCtx: 0xc0de_0000_0000_0000 | uint64(n.idx)<<32 | uint64(id), QKey: 0x1111_1111,
	}
	if peer != nil {
		spec.DestIP = peer.ip
	}
	for _, m := range mods {
		m(&spec)
	}
	q := e.CreateQP(spec)
	typ := uk.QPTypeRC
	if ud {
		typ = uk.QPTypeUD
	}
	uq, err := uk.NewQP(uk.QPConfig{Limits: n.lim, ID: id, Type: typ, SQ: q.SQ, SQShift: 3, RQ: q.RQ,
		RQShift: spec.RQShift, Shadow: q.Shadow, MaxSQFragCnt: 13, MaxRQFragCnt: 13, MaxInlineData: 101})
	if err != nil {
		t.Fatal(err)
	}
	us, err := uk.NewCQ(uk.CQConfig{ID: scq.ID, Ring: scq.Ring.Bytes()[:scq.Size*32], Shadow: scq.Shadow.Bytes()[:64]})
	if err != nil {
		t.Fatal(err)
	}
	ur, err := uk.NewCQ(uk.CQConfig{ID: rcq.ID, Ring: rcq.Ring.Bytes()[:rcq.Size*32], Shadow: rcq.Shadow.Bytes()[:64]})
	if err != nil {
		t.Fatal(err)
	}
	us.BindQP(spec.CompCtx, uq)
	ur.BindQP(spec.CompCtx, uq)
	return &ep{n: n, q: q, scq: scq, rcq: rcq, uq: uq, us: us, ur: ur, pd: spec.PD}
}

// connectRC creates an RC QP on each node, connected to each other, in
// RTS.
func (w *world) connectRC(modA, modB qpOpt) (*ep, *ep) {
	a, b := w.nodes[0], w.nodes[1]
	for _, n := range w.nodes {
		peer := w.nodes[1-n.idx]
		n.env.SetARP(1, peer.mac)
	}
	mods := func(m qpOpt) []qpOpt {
		if m == nil {
			return nil
		}
		return []qpOpt{m}
	}
	ea := a.newEP(false, b, mods(modA)...)
	eb := b.newEP(false, a, mods(modB)...)
	ea.q.Spec.DestQP, eb.q.Spec.DestQP = eb.q.Spec.ID, ea.q.Spec.ID
	ea.q.Spec.RQPSN, eb.q.Spec.RQPSN = eb.q.Spec.SQPSN, ea.q.Spec.SQPSN
	a.env.Connect(ea.q)
	b.env.Connect(eb.q)
	return ea, eb
}

// loopRC creates two RC QPs on n connected to each other through n's own
// address, in RTS: their traffic never leaves the device (docs/dataplane.md
// "Loopback"). The ARP entry the QPs use is n's own MAC, as the uverbs
// layer resolves a local destination.
func (n *node) loopRC(mods ...qpOpt) (*ep, *ep) {
	n.env.SetARP(1, n.mac)
	a := n.newEP(false, n, mods...)
	b := n.newEP(false, n, mods...)
	a.q.Spec.DestQP, b.q.Spec.DestQP = b.q.Spec.ID, a.q.Spec.ID
	a.q.Spec.RQPSN, b.q.Spec.RQPSN = b.q.Spec.SQPSN, a.q.Spec.SQPSN
	n.env.Connect(a.q)
	n.env.Connect(b.q)
	return a, b
}

// mr is a registered buffer.
type buf struct {
	reg  *hostmem.Region
	stag uint32
	va   uint64
}

func (m *buf) bytes() []byte { return m.reg.Bytes()[:m.reg.Len()] }

// newMR registers a zeroed buffer of size bytes with rights.
func (n *node) newMR(size int, rights uint8, pd uint32) *buf {
	n.w.t.Helper()
	r := n.env.Alloc(max(size, 1), "buf")
	idx := n.nextMR
	n.nextMR++
	stag := n.env.RegMR(idx, uint8(0x40+idx), pd, r, rights)
	return &buf{reg: r, stag: stag, va: uint64(r.IOVA())}
}

// post posts wrs and rings the doorbell when irdma would.
func (e *ep) post(wrs ...uk.SendWR) {
	e.n.w.t.Helper()
	if n, err := e.uq.PostSend(wrs); err != nil {
		e.n.w.t.Fatalf("PostSend: posted %d of %d: %v", n, len(wrs), err)
	}
	if e.uq.SQDoorbell() {
		e.n.env.Doorbell(e.q)
	}
}

// recv posts receive WQEs.
func (e *ep) recv(wrs ...uk.RecvWR) {
	e.n.w.t.Helper()
	if n, err := e.uq.PostRecv(wrs); err != nil {
		e.n.w.t.Fatalf("PostRecv: posted %d of %d: %v", n, len(wrs), err)
	}
}

// pollCQ returns the completions available on c, stopping at the first
// error PollCmpl reports other than an empty CQ: a CQE the driver cannot
// match to a QP (a wrong QP context, a destroyed QP) or to a WQE is a
// device bug, never something to skip.
func pollCQ(c *uk.CQ, out []uk.WorkCompletion) ([]uk.WorkCompletion, error) {
	for {
		var info uk.CQPollInfo
		err := c.PollCmpl(&info)
		if errors.Is(err, uk.ErrCQEmpty) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, uk.ProcessCQE(&info))
	}
}

// poll returns the completions available on c; any PollCmpl error fails
// the test. Only for the test's own goroutine (it calls Fatalf); other
// goroutines use pollCQ.
func poll(t testing.TB, c *uk.CQ, out []uk.WorkCompletion) []uk.WorkCompletion {
	t.Helper()
	out, err := pollCQ(c, out)
	if err != nil {
		t.Fatalf("PollCmpl on CQ after %d completions: %v", len(out), err)
	}
	return out
}

// wait steps the world until n completions arrived on c.
func (e *ep) wait(c *uk.CQ, n int, what string) []uk.WorkCompletion {
	e.n.w.t.Helper()
	var got []uk.WorkCompletion
	e.n.w.until(what, func() bool {
		got = poll(e.n.w.t, c, got)
		return len(got) >= n
	})
	return got
}

func (e *ep) waitSend(n int) []uk.WorkCompletion { return e.wait(e.us, n, "send completions") }
func (e *ep) waitRecv(n int) []uk.WorkCompletion { return e.wait(e.ur, n, "receive completions") }

// pattern fills b with bytes derived from seed.
func pattern(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func wantWC(t testing.TB, wc uk.WorkCompletion, status uk.WCStatus, op uk.WCOpcode, n uint32, what string) {
	t.Helper()
	if wc.Status != status || wc.Opcode != op || (status == uk.WCSuccess && wc.ByteLen != n) {
		t.Fatalf("%s: wc %+v, want status %v op %v len %d", what, wc, status, op, n)
	}
}

func mustEqual(t testing.TB, got, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from byte %d (len %d/%d)", what, len(want), i, len(got), len(want))
	}
}

// dump logs every node's statistics and QP states.
func (w *world) dump() {
	if !w.o.stepped {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "emu/engine.") || strings.Contains(g, "emu/link.") {
				w.t.Logf("%s", g)
			}
		}
	}
	for _, n := range w.nodes {
		w.t.Logf("node %d: %+v", n.idx, n.eng.Stats().Port)
		for id := uint32(2); id < n.nextID; id++ {
			w.t.Logf("node %d: %s", n.idx, n.eng.Debug(id))
		}
	}
}

package daemon_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// end is one side of a connection: a context with a PD, an MR over a
// shared buffer, a CQ and a QP.
type end struct {
	n    *node
	ctx  *client.Context
	pd   *client.PD
	buf  []byte
	mr   *client.MR
	ch   *client.CompChannel
	cq   *client.CQ
	qp   *client.QP
	gidx int
	gid  client.GID
	psn  uint32
}

type endOpts struct {
	typ     client.QPType
	size    int
	access  client.AccessFlags
	events  bool
	sendWR  uint32
	recvWR  uint32
	inline  uint32
	sendSGE uint32
}

func newEnd(t testing.TB, n *node, o endOpts) *end {
	t.Helper()
	if o.typ == 0 {
		o.typ = client.QPTypeRC
	}
	if o.size == 0 {
		o.size = 64 << 10
	}
	if o.sendWR == 0 {
		o.sendWR = 64
	}
	if o.recvWR == 0 {
		o.recvWR = 64
	}
	if o.sendSGE == 0 {
		o.sendSGE = 2
	}
	e := &end{n: n, ctx: n.open(t), psn: rand.Uint32() & 0xffffff}
	var err error
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = e.ctx.AllocBuffer(o.size); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, o.access|client.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if o.events {
		if e.ch, err = e.ctx.CreateCompChannel(); err != nil {
			t.Fatal(err)
		}
	}
	if e.cq, err = e.ctx.CreateCQ(int(o.sendWR+o.recvWR), e.ch, 0); err != nil {
		t.Fatal(err)
	}
	e.qp, err = e.pd.CreateQP(client.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: o.typ,
		Cap: client.QPCapabilities{MaxSendWR: o.sendWR, MaxRecvWR: o.recvWR, MaxSendSGE: o.sendSGE, MaxRecvSGE: 2, MaxInlineData: o.inline}})
	if err != nil {
		t.Fatal(err)
	}
	e.gidx = gidIndex(t, e.ctx, n.addr)
	if e.gid, err = e.ctx.QueryGID(1, e.gidx); err != nil {
		t.Fatal(err)
	}
	init := &client.QPAttr{State: client.QPSInit, PortNum: 1, AccessFlags: o.access}
	mask := client.AttrState | client.AttrPKeyIndex | client.AttrPort
	if o.typ == client.QPTypeUD {
		init.QKey = 0x11111111
		mask |= client.AttrQKey
	} else {
		mask |= client.AttrAccessFlags
	}
	if err := e.qp.Modify(init, mask); err != nil {
		t.Fatal(err)
	}
	return e
}

// connectRC moves e to RTR and RTS towards peer, as ibv_rc_pingpong does
// (with max_rd_atomic 16 so READs and atomics can pipeline).
func (e *end) connectRC(t testing.TB, peer *end) {
	t.Helper()
	a := &client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn,
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AH: client.AHAttr{IsGlobal: true, DGID: peer.gid, SGIDIndex: uint8(e.gidx), HopLimit: 1, PortNum: 1}}
	if err := e.qp.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
		client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		t.Fatalf("RTR: %v", err)
	}
	a.State, a.Timeout, a.RetryCnt, a.RNRRetry, a.SQPSN, a.MaxRdAtomic = client.QPSRTS, 14, 7, 7, e.psn, 16
	if err := e.qp.Modify(a, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
		client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
		t.Fatalf("RTS: %v", err)
	}
}

func rcPair(t testing.TB, o endOpts) (*end, *end) {
	t.Helper()
	a, b := twoNodes(t, nil)
	ea, eb := newEnd(t, a, o), newEnd(t, b, o)
	ea.connectRC(t, eb)
	eb.connectRC(t, ea)
	return ea, eb
}

// poll waits for n completions on cq.
func poll(t testing.TB, cq *client.CQ, n int, d time.Duration) []client.WorkCompletion {
	t.Helper()
	var out []client.WorkCompletion
	wc := make([]client.WorkCompletion, 16)
	deadline := time.Now().Add(d)
	for len(out) < n {
		k, err := cq.Poll(wc[:min(len(wc), n-len(out))])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		out = append(out, wc[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after %v", len(out), n, d)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return out
}

func wantOK(t testing.TB, wcs []client.WorkCompletion) {
	t.Helper()
	for _, w := range wcs {
		if err := w.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func TestClientSendRecv(t *testing.T) {
	a, b := rcPair(t, endOpts{})
	const n = 40000 // several packets at MTU 1024
	fill(a.buf[:n], 1)
	if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: 7, SGList: []client.SGE{b.mr.SGE(0, n)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]client.SendWR{{WrID: 9, Opcode: client.WRSend, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(0, n)}}}); err != nil {
		t.Fatal(err)
	}
	ws := poll(t, a.cq, 1, 10*time.Second)
	wantOK(t, ws)
	if ws[0].WrID != 9 || ws[0].Opcode != client.WCSend || ws[0].ByteLen != n {
		t.Errorf("send completion %+v", ws[0])
	}
	wr := poll(t, b.cq, 1, 10*time.Second)
	wantOK(t, wr)
	if wr[0].WrID != 7 || wr[0].Opcode != client.WCRecv || wr[0].ByteLen != n || wr[0].QPNum != b.qp.QPN() {
		t.Errorf("recv completion %+v", wr[0])
	}
	if !bytes.Equal(a.buf[:n], b.buf[:n]) {
		t.Fatal("payload differs")
	}
}

func TestClientWriteReadImm(t *testing.T) {
	a, b := rcPair(t, endOpts{access: client.AccessRemoteWrite | client.AccessRemoteRead})
	const n = 20000
	fill(a.buf[:n], 2)
	// WRITE a → b, then WRITE_WITH_IMM of 0 bytes to signal b.
	if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := a.qp.PostSend([]client.SendWR{
		{WrID: 1, Opcode: client.WRRDMAWrite, SGList: []client.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr + 100, RKey: b.mr.RKey},
		{WrID: 2, Opcode: client.WRRDMAWriteWithImm, Flags: client.SendSignaled, ImmData: 0xdeadbeef, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := poll(t, a.cq, 1, 10*time.Second)
	wantOK(t, ws)
	if ws[0].WrID != 2 || ws[0].Opcode != client.WCRDMAWrite {
		t.Errorf("write completion %+v", ws[0])
	}
	wr := poll(t, b.cq, 1, 10*time.Second)
	wantOK(t, wr)
	if wr[0].Opcode != client.WCRecvRDMAWithImm || wr[0].ImmData != 0xdeadbeef || wr[0].Flags&client.WCFlagWithImm == 0 {
		t.Errorf("write-with-imm completion %+v", wr[0])
	}
	if !bytes.Equal(a.buf[:n], b.buf[100:100+n]) {
		t.Fatal("WRITE payload differs")
	}
	// READ it back from b into a's buffer at 32 KiB.
	clear(a.buf[32<<10:])
	if _, err := a.qp.PostSend([]client.SendWR{{WrID: 3, Opcode: client.WRRDMARead, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(32<<10, n)}, RemoteAddr: b.mr.Addr + 100, RKey: b.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	ws = poll(t, a.cq, 1, 10*time.Second)
	wantOK(t, ws)
	if ws[0].Opcode != client.WCRDMARead || ws[0].ByteLen != n {
		t.Errorf("read completion %+v", ws[0])
	}
	if !bytes.Equal(a.buf[:n], a.buf[32<<10:32<<10+n]) {
		t.Fatal("READ payload differs")
	}
}

func TestClientRemoteAccessError(t *testing.T) {
	// b's MR allows no remote write: a's WRITE completes with
	// REM_ACCESS_ERR, and the QP goes to error (later work flushes).
	a, b := rcPair(t, endOpts{})
	_, err := a.qp.PostSend([]client.SendWR{
		{WrID: 1, Opcode: client.WRRDMAWrite, Flags: client.SendSignaled, SGList: []client.SGE{a.mr.SGE(0, 100)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey},
		{WrID: 2, Opcode: client.WRSend, Flags: client.SendSignaled, SGList: []client.SGE{a.mr.SGE(0, 10)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := poll(t, a.cq, 2, 10*time.Second)
	if ws[0].WrID != 1 || ws[0].Status != client.WCRemAccessErr {
		t.Errorf("first completion %+v (%v), want remote access error", ws[0], ws[0].Status)
	}
	var wce *client.WCError
	if err := ws[0].Err(); !errors.As(err, &wce) || wce.Status != client.WCRemAccessErr {
		t.Errorf("Err() = %v", err)
	}
	if ws[1].WrID != 2 || ws[1].Status != client.WCWRFlushErr {
		t.Errorf("second completion %+v (%v), want flush", ws[1], ws[1].Status)
	}
}

func TestClientUD(t *testing.T) {
	na, nb := twoNodes(t, nil)
	a := newEnd(t, na, endOpts{typ: client.QPTypeUD, size: 8192})
	b := newEnd(t, nb, endOpts{typ: client.QPTypeUD, size: 8192})
	for _, e := range []*end{a, b} {
		if err := e.qp.Modify(&client.QPAttr{State: client.QPSRTR}, client.AttrState); err != nil {
			t.Fatal(err)
		}
		if err := e.qp.Modify(&client.QPAttr{State: client.QPSRTS, SQPSN: e.psn}, client.AttrState|client.AttrSQPSN); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := a.pd.CreateAH(client.AHAttr{IsGlobal: true, DGID: b.gid, SGIDIndex: uint8(a.gidx), HopLimit: 64, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Destroy()
	const n = 1000
	fill(a.buf[:n], 3)
	if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: 5, SGList: []client.SGE{b.mr.SGE(0, n+40)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]client.SendWR{{WrID: 6, Opcode: client.WRSendWithImm, Flags: client.SendSignaled, ImmData: 77,
		SGList: []client.SGE{a.mr.SGE(0, n)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11111111}}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, a.cq, 1, 10*time.Second))
	wr := poll(t, b.cq, 1, 10*time.Second)
	wantOK(t, wr)
	w := wr[0]
	if w.ByteLen != n+40 || w.SrcQP != a.qp.QPN() || w.Flags&client.WCFlagGRH == 0 || w.ImmData != 77 {
		t.Errorf("UD receive %+v", w)
	}
	if !bytes.Equal(a.buf[:n], b.buf[40:40+n]) {
		t.Fatal("UD payload differs")
	}
	// A wrong Q_Key is dropped silently: no receive completion.
	if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: 8, SGList: []client.SGE{b.mr.SGE(0, n+40)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend([]client.SendWR{{WrID: 9, Opcode: client.WRSend, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(0, 10)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x22222222}}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, a.cq, 1, 10*time.Second))
	time.Sleep(200 * time.Millisecond)
	var wc [1]client.WorkCompletion
	if k, _ := b.cq.Poll(wc[:]); k != 0 {
		t.Errorf("receive completed for a wrong Q_Key: %+v", wc[0])
	}
}

func TestClientEventsInline(t *testing.T) {
	a, b := rcPair(t, endOpts{events: true, inline: 64})
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		msg := []byte(fmt.Sprintf("inline message %d", i))
		copy(a.buf, msg)
		if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: uint64(i), SGList: []client.SGE{b.mr.SGE(0, 100)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.qp.PostSend([]client.SendWR{{WrID: uint64(i), Opcode: client.WRSend, Flags: client.SendSignaled | client.SendInline,
			SGList: []client.SGE{a.mr.SGE(0, len(msg))}}}); err != nil {
			t.Fatal(err)
		}
		if err := b.cq.WaitEvent(10 * time.Second); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if err := b.cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		wr := poll(t, b.cq, 1, 10*time.Second)
		wantOK(t, wr)
		if wr[0].WrID != uint64(i) || !bytes.Equal(b.buf[:len(msg)], msg) {
			t.Fatalf("message %d: %+v %q", i, wr[0], b.buf[:len(msg)])
		}
		wantOK(t, poll(t, a.cq, 1, 10*time.Second))
	}
	if got := b.cq.Events(); got != 20 {
		t.Errorf("%d events, want 20", got)
	}
	// No completion, no event.
	if err := b.cq.WaitEvent(100 * time.Millisecond); !errors.Is(err, client.ErrTimeout) {
		t.Errorf("WaitEvent with nothing pending: %v", err)
	}
}

func TestClientAtomics(t *testing.T) {
	na, nb := twoNodes(t, atomicsOn)
	o := endOpts{access: client.AccessRemoteAtomic | client.AccessRemoteWrite}
	a, b := newEnd(t, na, o), newEnd(t, nb, o)
	a.connectRC(t, b)
	b.connectRC(t, a)
	if !a.ctx.AtomicsSupported() {
		t.Fatal("atomics not advertised")
	}
	binary.LittleEndian.PutUint64(b.buf, 100)
	_, err := a.qp.PostSend([]client.SendWR{
		{WrID: 1, Opcode: client.WRAtomicFetchAndAdd, Flags: client.SendSignaled, SGList: []client.SGE{a.mr.SGE(0, 8)},
			RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, CompareAdd: 5},
		{WrID: 2, Opcode: client.WRAtomicCmpAndSwp, Flags: client.SendSignaled, SGList: []client.SGE{a.mr.SGE(8, 8)},
			RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, CompareAdd: 105, Swap: 7},
		{WrID: 3, Opcode: client.WRAtomicCmpAndSwp, Flags: client.SendSignaled, SGList: []client.SGE{a.mr.SGE(16, 8)},
			RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, CompareAdd: 999, Swap: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := poll(t, a.cq, 3, 10*time.Second)
	wantOK(t, ws)
	if ws[0].Opcode != client.WCFetchAdd || ws[1].Opcode != client.WCCompSwap {
		t.Errorf("opcodes %v %v", ws[0].Opcode, ws[1].Opcode)
	}
	got := []uint64{binary.LittleEndian.Uint64(a.buf), binary.LittleEndian.Uint64(a.buf[8:]), binary.LittleEndian.Uint64(a.buf[16:])}
	if got[0] != 100 || got[1] != 105 || got[2] != 7 || binary.LittleEndian.Uint64(b.buf) != 7 {
		t.Errorf("atomic results %v, remote %d; want [100 105 7], 7", got, binary.LittleEndian.Uint64(b.buf))
	}
}

func TestClientQueries(t *testing.T) {
	a, b := rcPair(t, endOpts{})
	da, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.VendorID != 0x8086 || da.VendorPartID != 0x1592 || da.MaxQP == 0 || da.PhysPortCnt != 1 {
		t.Errorf("device %+v", da)
	}
	pa, err := a.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != client.PortActive || pa.LinkLayer != client.LinkLayerEthernet || pa.ActiveMTU == 0 || pa.GIDTableLen == 0 {
		t.Errorf("port %+v", pa)
	}
	if typ, err := a.ctx.GIDType(1, a.gidx); err != nil || typ != "RoCE v2" {
		t.Errorf("GID type %q %v", typ, err)
	}
	qa, err := a.qp.Query(client.AttrState | client.AttrDestQPN | client.AttrSQPSN | client.AttrRQPSN | client.AttrCap | client.AttrPathMTU)
	if err != nil {
		t.Fatal(err)
	}
	if qa.State != client.QPSRTS || qa.DestQPN != b.qp.QPN() || qa.SQPSN != a.psn || qa.RQPSN != b.psn || qa.PathMTU != client.MTU1024 {
		t.Errorf("QP attributes %+v", qa)
	}
	if qa.Cap.MaxSendWR < 64 || qa.Cap.MaxRecvWR < 64 {
		t.Errorf("QP caps %+v", qa.Cap)
	}
	if c := a.qp.Cap(); c.MaxSendWR < 64 || c.MaxRecvWR < 64 {
		t.Errorf("QP.Cap %+v", c)
	}
}

func TestClientErrors(t *testing.T) {
	n := startNode(t, "ieta", testaddr.Loopback(t, 1)[0].String(), nil)
	c := n.open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	// Memory the daemon was not handed cannot be registered.
	if _, err := pd.RegMR(make([]byte, 4096), client.AccessLocalWrite); !errors.Is(err, syscall.EFAULT) {
		t.Errorf("REG_MR of Go heap memory: %v, want EFAULT", err)
	}
	cq, err := c.CreateCQ(16, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCQ(0, nil, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CQ of 0 entries: %v", err)
	}
	if _, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeRC,
		Cap: client.QPCapabilities{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 99}}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("QP with 99 SGEs: %v", err)
	}
	if _, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeUC}); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("UC QP: %v", err)
	}
	qp, err := pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeRC,
		Cap: client.QPCapabilities{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// RESET → RTS is not a legal transition: the daemon answers EINVAL.
	var ce *client.CmdError
	if err := qp.Modify(&client.QPAttr{State: client.QPSRTS}, client.AttrState); !errors.As(err, &ce) || ce.Errno != syscall.EINVAL {
		t.Errorf("RESET→RTS: %v", err)
	}
	// Destroying a CQ that a QP uses is refused.
	if err := cq.Destroy(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("destroy of a CQ in use: %v", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	// A deallocated PD is gone: the handle lookup fails with ENOENT, as
	// the kernel's uobject lookup does.
	if err := pd.Dealloc(); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("second DEALLOC_PD: %v", err)
	}
}

// TestClientAsyncEvent: a WRITE to an MR without remote write access puts
// both QPs in error, each with an IB_EVENT_QP_ACCESS_ERR on its context's
// asynchronous event descriptor.
func TestClientAsyncEvent(t *testing.T) {
	a, b := rcPair(t, endOpts{})
	if _, err := a.qp.PostSend([]client.SendWR{{WrID: 1, Opcode: client.WRRDMAWrite, Flags: client.SendSignaled,
		SGList: []client.SGE{a.mr.SGE(0, 100)}, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}}); err != nil {
		t.Fatal(err)
	}
	poll(t, a.cq, 1, 10*time.Second)
	// Both ends: the responder for the violation, the requester for the
	// remote access NAK (AE IB_REMOTE_ACCESS_ERROR).
	for _, e := range []*end{b, a} {
		ev, err := e.ctx.GetAsyncEvent(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no async event: %v", e.n.d.Name(), err)
		}
		if ev.Type != client.EventQPAccessErr || ev.QP != e.qp || e.qp.AsyncEvents() != 1 {
			t.Errorf("%s: event %v (%d) for %+v", e.n.d.Name(), ev.Type, ev.Type, ev)
		}
	}
	if _, err := a.ctx.GetAsyncEvent(100 * time.Millisecond); !errors.Is(err, client.ErrTimeout) {
		t.Errorf("a second event: %v", err)
	}
}

package driver

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// The SRQ tests run kernel-mode SRQs and QPs through the driver on the
// real device model with its data plane (emu/engine), two QPs of one
// device connected through the device's own GID (in-device loopback).

// srqWorld is one GEN_3 device with its driver and engine.
type srqWorld struct {
	t    *testing.T
	dev  *device.Device
	d    *Device
	pd   *PD
	cq   *CQ
	sgid uint8
	mac  [6]byte
	buf  []uint64 // 16 pages
	mr   *MR
	va   uint64

	mu     sync.Mutex
	events []AsyncEvent
}

const srqTestVA = 0x6000_0000

func newSRQWorld(t *testing.T) *srqWorld {
	t.Helper()
	p := profile.GEN3()
	dev, err := device.New(device.Config{Profile: p})
	if err != nil {
		t.Fatal(err)
	}
	nd := testNetdev()
	d, err := Open(dev, Config{Profile: p, Netdev: nd, CQPTimeout: 5 * time.Second})
	if err != nil {
		_ = dev.Close()
		t.Fatal(err)
	}
	pair, err := link.NewPair(link.PairConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	startEngine(t, dev, d, nd, pair.A())
	w := &srqWorld{t: t, dev: dev, d: d, pd: mustPD(t, d), va: srqTestVA, sgid: roceV2GID(t, d, nd.IPs[0])}
	copy(w.mac[:], nd.MAC())
	if w.cq, err = d.CreateCQ(CQAttr{CQE: 64}); err != nil {
		t.Fatal(err)
	}
	w.buf = allocPages(t, dev.Mem(), 16, 0, false)
	if w.mr, err = d.RegUserMR(w.pd, nil, w.va, 16*4096, w.va, AccessLocalWrite|AccessRemoteWrite, w.buf, MemReg{}); err != nil {
		t.Fatal(err)
	}
	return w
}

// sge is 64 bytes at page i of the buffer.
// startEngine runs dev's data plane on end; at cleanup the engine, the
// driver and the device close in that order.
func startEngine(t *testing.T, dev *device.Device, d *Device, nd *StaticNetdev, end *link.End) {
	t.Helper()
	eng, err := engine.New(dev, engine.Config{GIDs: nd.IPs})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.AttachLink(end); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		if err := d.Close(); err != nil {
			t.Errorf("driver Close: %v", err)
		}
		_ = dev.Close()
	})
}

// roceV2GID is the GID table index of ip's RoCEv2 GID.
func roceV2GID(t *testing.T, d *Device, ip netip.Addr) uint8 {
	t.Helper()
	own := gidFromAddr(ip)
	for i, g := range d.GIDTable() {
		if g.GID == own && g.Type == GIDTypeRoCEv2 {
			return uint8(i)
		}
	}
	t.Fatalf("no RoCEv2 GID for %v", ip)
	return 0
}

func (w *srqWorld) sge(i int, n uint32) SGE {
	return SGE{Addr: w.va + uint64(i)*4096, Length: n, LKey: w.mr.LKey()}
}

func (w *srqWorld) page(i int) []byte {
	b := make([]byte, 64)
	if err := w.dev.Mem().Read(hostmem.IOVA(w.buf[i]), b); err != nil {
		w.t.Fatal(err)
	}
	return b
}

func (w *srqWorld) fill(i int, b []byte) {
	if err := w.dev.Mem().Write(hostmem.IOVA(w.buf[i]), b); err != nil {
		w.t.Fatal(err)
	}
}

func (w *srqWorld) newSRQ(maxWR, maxSGE, limit uint32) *SRQ {
	w.t.Helper()
	s, resp, err := w.d.CreateSRQ(w.pd, SRQInitAttr{Attr: SRQAttr{MaxWR: maxWR, MaxSGE: maxSGE, SRQLimit: limit},
		EventHandler: func(_ *SRQ, e AsyncEvent) { w.mu.Lock(); w.events = append(w.events, e); w.mu.Unlock() }})
	if err != nil {
		w.t.Fatalf("CreateSRQ: %v", err)
	}
	if resp.SRQID != s.ID() || resp.SRQSize != s.Size() || s.Size() < maxWR {
		w.t.Fatalf("CreateSRQ resp %+v, SRQ %d size %d", resp, s.ID(), s.Size())
	}
	return s
}

func (w *srqWorld) limitEvents() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.events {
		if e.Type == EventSRQLimitReached && e.AECode == aeSRQLimit {
			n++
		}
	}
	return n
}

// qp creates an RC QP (bound to srq when given).
func (w *srqWorld) qp(srq *SRQ) *QP {
	w.t.Helper()
	q, _, err := w.d.CreateQP(w.pd, QPInitAttr{Type: QPTypeRC, SendCQ: w.cq, RecvCQ: w.cq, SRQ: srq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}})
	if err != nil {
		w.t.Fatalf("CreateQP: %v", err)
	}
	return q
}

// connect moves a and b to RTS, each aimed at the other, RNR retry rnr.
func (w *srqWorld) connect(a, b *QP, rnr uint8) {
	w.t.Helper()
	for _, p := range [][2]*QP{{a, b}, {b, a}} {
		q, peer := p[0], p[1]
		rcToRTS(w.t, w.d, q, rcPath{access: AccessRemoteWrite, peer: peer.ID(), psn: 0x100, rdAtomic: 1, rnr: rnr,
			sgid: w.sgid, dgid: netip.MustParseAddr("192.0.2.1"), dmac: w.mac})
	}
}

// rcPath is what the RC QPs of the driver tests differ in on their way to
// RTS.
type rcPath struct {
	access   uint32 // INIT: qp_access_flags
	peer     uint32 // RTR: dest QP
	psn      uint32 // RTR: RQ PSN; RTS: SQ PSN
	rdAtomic uint8  // RTR: max_dest_rd_atomic; RTS: max_rd_atomic
	rnr      uint8  // RTS: RNR retry
	sgid     uint8
	dgid     netip.Addr
	dmac     [6]byte
}

// rcToRTS moves q through INIT and RTR to RTS along p (MTU 1024, timeout
// 14, retry count 7).
func rcToRTS(t *testing.T, d *Device, q *QP, p rcPath) {
	t.Helper()
	steps := []struct {
		attr QPAttr
		mask QPAttrMask
	}{
		{QPAttr{QPState: QPSInit, QPAccessFlags: p.access, PortNum: 1},
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPAttr{QPState: QPSRTR, PathMTU: MTU1024, DestQPNum: p.peer, RQPSN: p.psn, MaxDestRdAtomic: p.rdAtomic,
			MinRNRTimer: 1, AH: AHAttr{GRH: true, SGIDIndex: p.sgid, HopLimit: 64, DGID: gidFromAddr(p.dgid), DMAC: p.dmac}},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		{QPAttr{QPState: QPSRTS, SQPSN: p.psn, Timeout: 14, RetryCnt: 7, RNRRetry: p.rnr, MaxRdAtomic: p.rdAtomic},
			QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := d.ModifyQP(q, &s.attr, s.mask); err != nil {
			t.Fatalf("QP %d → %v: %v", q.ID(), s.attr.QPState, err)
		}
	}
}

func (w *srqWorld) send(q *QP, id uint64, page int, n uint32) {
	w.t.Helper()
	if k, err := w.d.PostSend(q, []SendWR{{WrID: id, Opcode: uk.WRSend, Flags: uk.SendSignaled,
		SGList: []SGE{w.sge(page, n)}}}); k != 1 || err != nil {
		w.t.Fatalf("PostSend: %d %v", k, err)
	}
}

// poll collects n completions (or fails after 3 s).
func (w *srqWorld) poll(n int) []WorkCompletion {
	w.t.Helper()
	return pollCQ(w.t, w.d, w.cq, n, 3*time.Second)
}

// pollCQ collects n completions of cq (or fails after limit).
func pollCQ(t *testing.T, d *Device, cq *CQ, n int, limit time.Duration) []WorkCompletion {
	t.Helper()
	var out []WorkCompletion
	deadline := time.Now().Add(limit)
	for len(out) < n {
		got, err := d.PollCQ(cq, n-len(out))
		if err != nil {
			t.Fatalf("PollCQ: %v", err)
		}
		out = append(out, got...)
		if len(got) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions: %+v", len(out), n, out)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// split sorts completions into receives and sends.
func split(wcs []WorkCompletion) (recv, send []WorkCompletion) {
	for _, wc := range wcs {
		if wc.Opcode&uk.WCRecv != 0 {
			recv = append(recv, wc)
		} else {
			send = append(send, wc)
		}
	}
	return recv, send
}

// TestSRQ is the SRQ table test: receives taken from one SRQ by every QP
// bound to it, the limit event, and the hardware's reaction to bad input
// (each case names its source).
func TestSRQ(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, w *srqWorld)
	}{
		{"two QPs share one SRQ", func(t *testing.T, w *srqWorld) {
			s := w.newSRQ(8, 1, 0)
			for i := range 4 {
				if n, err := w.d.PostSRQRecv(s, []RecvWR{{WrID: 0x500 + uint64(i), SGList: []SGE{w.sge(8+i, 256)}}}); n != 1 || err != nil {
					t.Fatalf("PostSRQRecv: %d %v", n, err)
				}
			}
			a1, a2, b1, b2 := w.qp(nil), w.qp(nil), w.qp(s), w.qp(s)
			w.connect(a1, b1, 7)
			w.connect(a2, b2, 7)
			// A QP bound to an SRQ takes no receives of its own.
			if n, err := w.d.PostRecv(b1, []RecvWR{{WrID: 1}}); n != 0 || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("PostRecv on an SRQ QP: %d %v", n, err)
			}
			w.fill(0, bytes.Repeat([]byte{0xa1}, 64))
			w.fill(1, bytes.Repeat([]byte{0xa2}, 64))
			w.send(a1, 0x11, 0, 64)
			recv, send := split(w.poll(2))
			w.send(a2, 0x12, 1, 48)
			r2, s2 := split(w.poll(2))
			recv, send = append(recv, r2...), append(send, s2...)
			if len(send) != 2 || send[0].Status != uk.WCSuccess || send[1].Status != uk.WCSuccess {
				t.Fatalf("send completions %+v", send)
			}
			// The SRQ's WQEs in posting order, whichever QP took them; the
			// wr_id comes from the WQE (SRQ CQE qword1), the QP from the
			// CQE's QP context (qword5).
			want := []struct {
				wrID uint64
				qp   uint32
				n    uint32
			}{{0x500, b1.ID(), 64}, {0x501, b2.ID(), 48}}
			for i, wc := range recv {
				if wc.Status != uk.WCSuccess || wc.WrID != want[i].wrID || wc.QPNum != want[i].qp || wc.ByteLen != want[i].n {
					t.Errorf("receive %d: %+v, want %+v", i, wc, want[i])
				}
			}
			if !bytes.Equal(w.page(8), bytes.Repeat([]byte{0xa1}, 64)) || !bytes.Equal(w.page(9)[:48], bytes.Repeat([]byte{0xa2}, 48)) {
				t.Errorf("payloads %x / %x", w.page(8), w.page(9))
			}
			if got := w.dev.SRQs().Get(s.ID()).State().Taken; got != 2 {
				t.Errorf("device took %d SRQ WQEs, want 2", got)
			}
			// The RDMA core's usecnt: a bound SRQ cannot be destroyed.
			if err := w.d.DestroySRQ(s); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("DestroySRQ with QPs bound: %v", err)
			}
			for _, q := range []*QP{a1, a2, b1, b2} {
				if err := w.d.DestroyQP(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.d.DestroySRQ(s); err != nil {
				t.Errorf("DestroySRQ: %v", err)
			}
		}},
		{"limit event fires once when crossed", func(t *testing.T, w *srqWorld) {
			s := w.newSRQ(8, 1, 0)
			for i := range 4 {
				if n, err := w.d.PostSRQRecv(s, []RecvWR{{WrID: uint64(i), SGList: []SGE{w.sge(8+i, 256)}}}); n != 1 || err != nil {
					t.Fatalf("PostSRQRecv: %d %v", n, err)
				}
			}
			// irdma_modify_srq: IB_SRQ_MAX_WR is refused, a limit above the
			// size too; IB_SRQ_LIMIT 3 arms the limit.
			if err := w.d.ModifySRQ(s, SRQAttr{MaxWR: 16}, SRQAttrMaxWR); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("resize: %v", err)
			}
			if err := w.d.ModifySRQ(s, SRQAttr{SRQLimit: s.Size() + 1}, SRQAttrLimit); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("limit above size: %v", err)
			}
			if err := w.d.ModifySRQ(s, SRQAttr{SRQLimit: 3}, SRQAttrLimit); err != nil {
				t.Fatal(err)
			}
			if a, err := w.d.QuerySRQ(s); err != nil || a.SRQLimit != 3 || a.MaxSGE != 1 || a.MaxWR < 8 {
				t.Errorf("QuerySRQ %+v %v", a, err)
			}
			a, b := w.qp(nil), w.qp(s)
			w.connect(a, b, 7)
			w.send(a, 1, 0, 8) // 3 left: not below 3
			w.poll(2)
			if n := w.limitEvents(); n != 0 {
				t.Fatalf("%d limit events with 3 WQEs posted", n)
			}
			w.send(a, 2, 0, 8) // 2 left: below 3
			w.poll(2)
			waitFor(t, func() bool { return w.limitEvents() == 1 })
			w.send(a, 3, 0, 8) // 1 left: disarmed, no second event
			w.poll(2)
			time.Sleep(20 * time.Millisecond)
			if n := w.limitEvents(); n != 1 {
				t.Errorf("%d limit events, want exactly 1", n)
			}
			if q, _ := w.d.QuerySRQ(s); q.SRQLimit != 0 {
				t.Errorf("limit after the event %d, want 0 (irdma_srq_event)", q.SRQLimit)
			}
		}},
		{"too many SGEs", func(t *testing.T, w *srqWorld) {
			s := w.newSRQ(8, 1, 0)
			// Software: irdma_uk_srq_post_receive refuses more SGEs than
			// max_srq_frag_cnt (-EINVAL, nothing posted).
			if n, err := w.d.PostSRQRecv(s, []RecvWR{{WrID: 9, SGList: []SGE{w.sge(8, 8), w.sge(9, 8)}}}); n != 0 || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("2 SGEs on a 1-SGE SRQ: %d %v", n, err)
			}
			// Hardware: a WQE whose ADDFRAGCNT does not fit its one-quantum
			// slot. The receiver raises the WQE's AE
			// (IRDMA_AE_WQE_INVALID_FRAG_DATA), completes the WQE as an SRQ
			// error CQE (major IRDMA_SRQFLUSH_RSVD_MAJOR_ERR, minor the AE:
			// rdma-core uk.c converts it with irdma_ae_to_qp_err_code) and
			// NAKs remote operational error, which the requester reports
			// as IB_WC_REM_OP_ERR.
			if n, err := w.d.PostSRQRecv(s, []RecvWR{{WrID: 0x77, SGList: []SGE{w.sge(8, 64)}}}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			hdr := s.kmem.r.Bytes()[24:32]
			h := uint64(hdr[0]) | uint64(hdr[7])<<56 | 4<<38 // ADDFRAGCNT 4: three quanta
			for i := range 8 {
				hdr[i] = byte(h >> (8 * i))
			}
			a, b := w.qp(nil), w.qp(s)
			w.connect(a, b, 7)
			w.send(a, 0x31, 0, 16)
			recv, send := split(w.poll(2))
			// AE 0x020c converts to FLUSH_GENERAL_ERR: IB_WC_WR_FLUSH_ERR,
			// vendor_err major 0xfffe.
			if len(recv) != 1 || recv[0].WrID != 0x77 || recv[0].Status != uk.WCWRFlushErr ||
				recv[0].VendorErr != uint32(qp.MajorSRQFlushRsvd)<<16|uint32(uk.FlushGeneralErr) || recv[0].QPNum != b.ID() {
				t.Errorf("receive %+v", recv)
			}
			if len(send) != 1 || send[0].Status != uk.WCRemOpErr || send[0].WrID != 0x31 {
				t.Errorf("send %+v, want REM_OP_ERR", send)
			}
			waitFor(t, func() bool { return w.dev.QPs().Get(b.ID()).State() == qp.StateError })
		}},
		{"RNR on an empty SRQ", func(t *testing.T, w *srqWorld) {
			// IBTA 9.7.5.2.8: no receive WQE → RNR NAK; with rnr_retry 0
			// the requester gives up at once: IB_WC_RNR_RETRY_EXC_ERR and
			// IRDMA_AE_LLP_TOO_MANY_RNRS (hw.c: QP to error).
			s := w.newSRQ(8, 1, 0)
			a, b := w.qp(nil), w.qp(s)
			w.connect(a, b, 0)
			w.send(a, 0x41, 0, 8)
			_, send := split(w.poll(1))
			if len(send) != 1 || send[0].Status != uk.WCRNRRetryExcErr {
				t.Errorf("send %+v, want RNR_RETRY_EXC_ERR", send)
			}
			if st := w.dev.SRQs().Get(s.ID()).State(); st.Taken != 0 {
				t.Errorf("empty SRQ gave %d WQEs", st.Taken)
			}
			waitFor(t, func() bool { return w.dev.QPs().Get(a.ID()).State() == qp.StateError })
			if w.dev.QPs().Get(b.ID()).State() == qp.StateError {
				t.Error("the responder's QP left RTS over an RNR")
			}
		}},
		{"QP bound to a destroyed SRQ", func(t *testing.T, w *srqWorld) {
			// The driver refuses (EBUSY above); a device whose SRQ is
			// destroyed under a bound QP (DESTROY_SRQ sent directly) fails
			// the QP's next receive: IRDMA_AE_SRQ_CATASTROPHIC_ERROR, the
			// QP to error, a remote operational error NAK; the requester
			// reports IB_WC_REM_OP_ERR.
			s := w.newSRQ(8, 1, 0)
			if n, err := w.d.PostSRQRecv(s, []RecvWR{{WrID: 1, SGList: []SGE{w.sge(8, 64)}}}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			a, b := w.qp(nil), w.qp(s)
			w.connect(a, b, 7)
			if _, err := w.d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDestroySRQ(s.id, srqCtxValue(s.id)), nil }); err != nil {
				t.Fatal(err)
			}
			if w.dev.SRQs().Get(s.ID()) != nil {
				t.Fatal("DESTROY_SRQ left the SRQ")
			}
			w.send(a, 0x51, 0, 8)
			_, send := split(w.poll(1))
			if len(send) != 1 || send[0].Status != uk.WCRemOpErr {
				t.Errorf("send %+v, want REM_OP_ERR", send)
			}
			waitFor(t, func() bool { return w.dev.QPs().Get(b.ID()).State() == qp.StateError })
			// CREATE_QP naming the destroyed SRQ: the CQP refuses it.
			if _, _, err := w.d.CreateQP(w.pd, QPInitAttr{Type: QPTypeRC, SendCQ: w.cq, RecvCQ: w.cq, SRQ: s,
				Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}}); err == nil {
				t.Error("CREATE_QP on a destroyed SRQ succeeded")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newSRQWorld(t)) })
	}
}

// TestSRQVerbsOnGEN2: every SRQ verb answers -EOPNOTSUPP without
// IRDMA_FEATURE_SRQ (GEN_2), before looking at its arguments.
func TestSRQVerbsOnGEN2(t *testing.T) {
	e := openReal(t, Config{})
	d := e.d
	pd := mustPD(t, d)
	if _, _, err := d.CreateSRQ(pd, SRQInitAttr{Attr: SRQAttr{MaxWR: 4, MaxSGE: 1}}); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("CreateSRQ: %v", err)
	}
	if err := d.ModifySRQ(nil, SRQAttr{}, SRQAttrLimit); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("ModifySRQ: %v", err)
	}
	if _, err := d.QuerySRQ(nil); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("QuerySRQ: %v", err)
	}
	if err := d.DestroySRQ(nil); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("DestroySRQ: %v", err)
	}
	if _, err := d.PostSRQRecv(nil, nil); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("PostSRQRecv: %v", err)
	}
	if a, _ := d.QueryDevice(); a.MaxSRQ != 0 {
		t.Errorf("max_srq %d on GEN_2", a.MaxSRQ)
	}
	// The CQP refuses the SRQ opcodes (a GEN_2 device has no SRQ objects).
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) { return buildDestroySRQ(1, 0), nil }); err == nil {
		t.Error("DESTROY_SRQ accepted on GEN_2")
	}
}

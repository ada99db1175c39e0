package qp_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// The transport's state machines, driven one Run at a time on a manual
// clock: packets are crafted with emu/wire and delivered to the QP, the
// packets the QP sends are captured and checked (gVisor's checker style).

var (
	ourIP    = netip.MustParseAddr("10.1.0.1")
	peerIP   = netip.MustParseAddr("10.1.0.2")
	ourMAC   = wire.MAC{2, 0, 0, 0, 1, 1}
	peerMAC  = wire.MAC{2, 0, 0, 0, 2, 2}
	peerQPN  = uint32(0x77)
	startPSN = wire.PSN(0xfffffe) // the first message crosses 2^24
	peerPSN  = wire.PSN(0x100)
)

// rig is one device with one RC QP in RTS whose transport the test runs
// by hand.
type rig struct {
	t     *testing.T
	env   *devtest.Env
	clk   *timing.Manual
	dp    *qp.DataPlane
	tr    *qp.Transport
	q     *devtest.QP
	ctx   qp.Ctx
	out   []*link.Packet
	pool  *link.Pool
	mr    hostmem.IOVA // a 64 KiB MR, all rights, STag stag
	stag  uint32
	sqPos uint32
	sqPol uint64
	rqPos uint32
	rqPol uint64
	cqH   uint32
	cqPol uint64
	woken int
}

func newRig(t *testing.T, tun qp.Tunables, mod func(*devtest.QPSpec)) *rig {
	t.Helper()
	return newRigOn(t, profile.GEN2().WithAtomics(true), devtest.RightsAll, tun, mod)
}

// newRigOn is newRig on profile prof with the MR's rights.
func newRigOn(t *testing.T, prof profile.Profile, rights uint8, tun qp.Tunables, mod func(*devtest.QPSpec)) *rig {
	t.Helper()
	clk := timing.NewManual()
	env := devtest.Bringup(t, devtest.Options{Config: device.Config{Clock: clk, Profile: prof}})
	env.SetARP(1, [6]byte(peerMAC))
	env.CreateCQ(2, 256)
	spec := devtest.QPSpec{ID: 3, SQQuanta: 256, RQWQEs: 64, RQShift: 1, SendCQ: 2, RecvCQ: 2, PD: 5, MTU: 1024,
		LocalIP: ourIP, DestIP: peerIP, DestQP: peerQPN, SQPSN: uint32(startPSN), RQPSN: uint32(peerPSN), ARPIdx: 1,
		RetryCnt: 2, RNRRetry: 1, ORD: 4, IRDEnc: 1, RdOK: true, WrOK: true, MAC: [6]byte(ourMAC), CompCtx: 0xabc}
	if mod != nil {
		mod(&spec)
	}
	q := env.CreateQP(spec)
	env.Connect(q)
	r := &rig{t: t, env: env, clk: clk, q: q, sqPol: 1, rqPol: 1, cqPol: 1}
	region := env.Alloc(64<<10, "mr")
	r.mr = region.IOVA()
	r.stag = env.RegMR(1, 0x42, spec.PD, region, rights)
	dev := env.Dev
	tun.RTO = max(tun.RTO, time.Millisecond)
	r.dp = &qp.DataPlane{QPs: dev.QPs(), Mem: dev.Mem(), MRs: dev.MRs(), AHs: dev.AHs(), Events: dev.Events(),
		Stats: dev.HWStats(), Meter: dev.Meter(), Clock: clk, Profile: dev.Profile(), Tun: tun}
	r.dp.Init()
	qq := dev.QPs().Get(spec.ID)
	r.tr = qp.NewTransport(qq, r.dp, qp.WakeFunc(func() { r.woken++ }))
	qq.Transport.Store(r.tr)
	r.pool = link.NewPool(0)
	r.ctx = qp.Ctx{Pool: r.pool, Send: func(p *link.Packet) { r.out = append(r.out, p) }, MAC: ourMAC, Port: &qp.Counters{}}
	t.Cleanup(func() {
		for _, p := range r.out {
			p.Release()
		}
	})
	return r
}

// run runs the transport once (under its claim).
func (r *rig) run() {
	r.t.Helper()
	if !r.tr.TryClaim() {
		r.t.Fatal("claim held")
	}
	for i := 0; i < 100 && r.tr.Run(&r.ctx); i++ {
	}
	r.tr.Unclaim()
}

// advance moves the clock and runs the QP.
func (r *rig) advance(d time.Duration) {
	r.clk.Advance(d)
	r.run()
}

// sent returns and forgets the packets the QP sent, parsed.
func (r *rig) sent() []wire.Frame {
	r.t.Helper()
	var fs []wire.Frame
	for _, p := range r.out {
		var f wire.Frame
		if err := wire.ParseFrame(p.Data, &f); err != nil {
			r.t.Fatalf("the QP sent a frame the gate refuses: %v", err)
		}
		if err := f.VerifyICRC(); err != nil {
			r.t.Fatalf("bad ICRC on %v", f.Packet.Opcode())
		}
		if f.UDP.SourcePort() == 0 || f.IPv4 == nil || f.IPv4.ID() != 0 || !f.IPv4.DF() || f.UDP.Checksum() != 0 {
			r.t.Fatalf("framing: %+v", f.IPv4.Fields())
		}
		fs = append(fs, f)
	}
	r.out = r.out[:0] // the frames still alias the packets; released at cleanup
	return fs
}

// pkt is what a check expects of a sent packet.
type pkt struct {
	op     wire.Opcode
	psn    wire.PSN
	ackReq bool
	syn    wire.Syndrome // checked for packets with an AETH
	n      int           // payload length; -1: not checked
}

// expect checks the QP sent exactly want.
func (r *rig) expect(what string, want ...pkt) []wire.Frame {
	r.t.Helper()
	got := r.sent()
	if len(got) != len(want) {
		var ops []string
		for _, f := range got {
			ops = append(ops, f.Packet.Opcode().String()+"@"+itoa(uint32(f.Packet.BTH.PSN())))
		}
		r.t.Fatalf("%s: sent %d packets %v, want %d", what, len(got), ops, len(want))
	}
	for i, w := range want {
		p := &got[i].Packet
		if p.Opcode() != w.op || p.BTH.PSN() != w.psn || p.BTH.AckReq() != w.ackReq || p.BTH.DestQP() != peerQPN {
			r.t.Fatalf("%s: packet %d is %v psn %#x ackreq %v, want %v psn %#x ackreq %v", what, i, p.Opcode(),
				uint32(p.BTH.PSN()), p.BTH.AckReq(), w.op, uint32(w.psn), w.ackReq)
		}
		if p.AETH != nil && p.AETH.Syndrome() != w.syn {
			r.t.Fatalf("%s: packet %d syndrome %v, want %v", what, i, p.AETH.Syndrome(), w.syn)
		}
		if w.n >= 0 && len(p.Payload) != w.n {
			r.t.Fatalf("%s: packet %d payload %d, want %d", what, i, len(p.Payload), w.n)
		}
	}
	return got
}

func itoa(v uint32) string {
	const hex = "0123456789abcdef"
	b := []byte{'0', 'x'}
	for s := 20; s >= 0; s -= 4 {
		b = append(b, hex[v>>uint(s)&0xf])
	}
	return string(b)
}

// inject delivers a packet from the peer.
func (r *rig) inject(pf wire.PacketFields, payload []byte) {
	r.t.Helper()
	pf.BTH.DestQP = r.q.Spec.ID
	if pf.BTH.PKey == 0 {
		pf.BTH.PKey = 0xffff
	}
	p := r.pool.Get()
	n, err := wire.BuildFrame(p.Buf(), &wire.FrameFields{Dst: ourMAC, Src: peerMAC, SrcIP: peerIP, DstIP: ourIP,
		HopLimit: 64, SrcPort: 0xc123}, &pf, payload)
	if err != nil {
		r.t.Fatal(err)
	}
	p.Data = p.Buf()[:n]
	if err := wire.ParseFrame(p.Data, &p.Frame); err != nil { // the port's gate parses
		r.t.Fatal(err)
	}
	if !r.tr.Deliver(p) {
		r.t.Fatal("inbox full")
	}
}

func ack(psn wire.PSN) wire.PacketFields {
	return wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAcknowledge, PSN: psn},
		AETH: wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid)}}
}

func nak(psn wire.PSN, s wire.Syndrome) wire.PacketFields {
	return wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAcknowledge, PSN: psn}, AETH: wire.AETHFields{Syndrome: s}}
}

var ackSyn = wire.ACKSyndrome(wire.CreditsInvalid)

// ---- SQ / RQ WQEs by hand (docs/hw-datapath.md, SQ and RQ WQE sections)
// --------------

func (r *rig) store(a hostmem.IOVA, v uint64) {
	if err := r.env.Mem.Store64(a, v); err != nil {
		r.t.Fatal(err)
	}
}

// postSQ writes a one- or two-quantum WQE at the SQ head (header last)
// and returns its index. fr is (addr, len) of one fragment, or nil.
func (r *rig) postSQ(op uint64, flags uint64, remoteVA uint64, rkey uint32, addr uint64, n uint32, extra ...uint64) uint32 {
	idx := r.sqPos
	at := r.q.SQIOVA + hostmem.IOVA(idx)*32
	r.store(at, addr)
	r.store(at+8, r.sqPol<<63|uint64(n)<<32|uint64(r.stag))
	r.store(at+16, remoteVA)
	quanta := uint32(1)
	for i, v := range extra {
		r.store(at+32+hostmem.IOVA(8*i), v)
		quanta = 2
	}
	if quanta == 2 {
		r.store(at+56, r.sqPol<<63)
	}
	r.store(at+24, op<<32|flags|uint64(rkey)|r.sqPol<<63|1<<62)
	r.sqPos += quanta
	return idx
}

// postRQ writes a one-SGE receive WQE at the RQ head.
func (r *rig) postRQ(addr uint64, n uint32) {
	at := r.q.RQIOVA + hostmem.IOVA(r.rqPos)*32*2 // RQShift 1: 2 quanta per WQE
	r.store(at, addr)
	r.store(at+8, r.rqPol<<63|uint64(n)<<32|uint64(r.stag))
	r.store(at+24, r.rqPol<<63)
	r.rqPos++
}

// cqe returns the next CQE, if any.
func (r *rig) cqe() (cq.CQE, bool) {
	c := r.env.Dev.CQs().Get(2).Config()
	a := c.Ring.Addr(r.cqH, 0)
	q3, _ := r.env.Mem.Load64(a + 24)
	if q3>>63 != r.cqPol {
		return cq.CQE{}, false
	}
	var b [4]uint64
	for i := range 3 {
		b[i], _ = r.env.Mem.Load64(a + hostmem.IOVA(8*i))
	}
	b[3] = q3
	var x [4]uint64
	if q3>>50&1 == 1 {
		r.cqH++
		xa := c.Ring.Addr(r.cqH, 0)
		for i := range 4 {
			x[i], _ = r.env.Mem.Load64(xa + hostmem.IOVA(8*i))
		}
	}
	r.cqH++
	return cq.DecodeCQE(b, x), true
}

func (r *rig) wantCQE(what string, check func(cq.CQE) bool) cq.CQE {
	r.t.Helper()
	c, ok := r.cqe()
	if !ok || !check(c) {
		r.t.Fatalf("%s: CQE %+v (%v)", what, c, ok)
	}
	return c
}

func (r *rig) noCQE(what string) {
	r.t.Helper()
	if c, ok := r.cqe(); ok {
		r.t.Fatalf("%s: unexpected CQE %+v", what, c)
	}
}

func (r *rig) mem(off uint64, n int) []byte {
	b := make([]byte, n)
	if err := r.env.Mem.Read(r.mr+hostmem.IOVA(off), b); err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *rig) setMem(off uint64, b []byte) {
	if err := r.env.Mem.Write(r.mr+hostmem.IOVA(off), b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) counters() qp.CounterSnapshot { return r.tr.C.Snapshot() }

var le = binary.LittleEndian

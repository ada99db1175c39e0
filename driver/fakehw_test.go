package driver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// fakeHW is a minimal stand-in for the device, written for these tests
// only (the real model is emu/device). It implements HW over a real
// hostmem bus: CQP create through CCQPHIGH/LOW, in-order WQE consumption
// on every CQPDB write (CQPTAIL advanced per WQE), CCQEs once the CCQ
// exists, the FPM query/commit buffers, SD bookkeeping, one CEQE per arm,
// and MSI-X signalling. Every consumed WQE is recorded.
type fakeHW struct {
	t    testing.TB
	mem  *hostmem.Memory
	mu   sync.Mutex
	reg  map[regs.Offset]uint32
	msix []chan struct{}

	cqpCtxPA uint64
	cqpRing  uint64
	cqpSize  uint32
	cqpTail  uint32
	cqpPol   uint8
	cqpCtx   uint64

	ccq  *fakeCQ
	cqs  map[uint32]*fakeCQ
	ceqs map[uint32]*fakeEQ
	aeq  *fakeEQ
	sds  map[uint32]uint64 // sd index → PA (0: cleared)

	wqes      []fakeWQE
	doorbells int

	// knobs
	featureCnt  uint16 // FEATURE_CNT reported (≥ 2)
	atomics     bool
	fail        map[uint8][2]uint16 // opcode → major, minor
	hang        map[uint8]bool      // opcode → never complete
	retval      map[uint8]uint32
	noCCQE      bool // complete by CQPTAIL only
	fpm         fakeFPM
	commitOrder []int // order of bases in FPM space
	peNotReady  bool
	lbarDBSize  uint32
	ccqpErr     bool
	queryBufLen int
	suspendAE   bool     // answer a MODIFY_QP to SQD with QP_SUSPEND_COMPLETE
	gather      []uint64 // what the next GATHER_STATS writes (qword i at 8·i)
	cqAcks      []uint32 // every CQACK write, in order
}

type fakeWQE struct {
	Idx uint32
	Op  uint8
	Q   [8]uint64
	Ovf []sdEntry // UPDATE_PE_SDS overflow entries
}

type fakeCQ struct {
	id      uint32
	ring    uint64
	size    uint32
	ctx     uint64
	shadow  uint64
	ceq     uint32
	head    uint32
	pol     uint8
	armed   bool
	lastSeq uint64
}

type fakeEQ struct {
	id   uint32
	ring uint64
	size uint32
	head uint32
	pol  uint8
	vec  int
}

// fakeFPM is what QUERY_FPM_VAL reports: per object max count and log2
// size, plus the misc words.
type fakeFPM struct {
	max    [hmcMax]uint32
	sizeLg [hmcMax]uint8
	maxSDs uint32
	misc   fpmMisc
}

func defaultFakeFPM() fakeFPM {
	var f fakeFPM
	set := func(t int, max uint32, lg uint8) { f.max[t], f.sizeLg[t] = max, lg }
	set(hmcQP, 1024, 9)
	set(hmcCQ, 2048, 6)
	set(hmcHTE, 8192, 4)
	set(hmcARP, 512, 6)
	set(hmcMR, 8192, 6)
	set(hmcXF, 1<<20, 6)
	set(hmcXFFL, 1<<20, 2)
	set(hmcQ1, 1<<20, 6)
	set(hmcQ1FL, 1<<20, 2)
	set(hmcTimer, 64, 12)
	set(hmcFSIMC, 256, 6)
	set(hmcFSIAV, 1024, 6)
	set(hmcPBLE, 1<<20, 3)
	set(hmcRRF, 1<<20, 6)
	set(hmcRRFFL, 1<<20, 2)
	set(hmcHDR, 1024, 9)
	set(hmcMD, 1024, 6)
	f.maxSDs = 512
	f.misc = fpmMisc{MaxCEQs: 8, XFBlockSize: 4, Q1BlockSize: 4, HTMultiplier: 2, TimerBucket: 4, RRFBlockSize: 4}
	return f
}

func newFakeHW(t testing.TB, vectors int) *fakeHW {
	f := &fakeHW{
		t: t, mem: hostmem.New(), reg: map[regs.Offset]uint32{},
		cqs: map[uint32]*fakeCQ{}, ceqs: map[uint32]*fakeEQ{}, sds: map[uint32]uint64{},
		featureCnt: 3, fail: map[uint8][2]uint16{}, hang: map[uint8]bool{}, retval: map[uint8]uint32{},
		fpm: defaultFakeFPM(), lbarDBSize: regs.PEDBSize8M, suspendAE: true,
	}
	for range vectors {
		f.msix = append(f.msix, make(chan struct{}, 1))
	}
	t.Cleanup(func() { _ = f.mem.Close() })
	return f
}

func (f *fakeHW) Mem() *hostmem.Memory { return f.mem }

func (f *fakeHW) MSIX(v int) <-chan struct{} {
	if v < 0 || v >= len(f.msix) {
		return nil
	}
	return f.msix[v]
}

func (f *fakeHW) Read32(off regs.Offset) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch off {
	case regs.GLPCI_LBARCTRL:
		return f.lbarDBSize << 4
	case regs.GLPE_CPUSTATUS0, regs.GLPE_CPUSTATUS1, regs.GLPE_CPUSTATUS2:
		if f.peNotReady {
			return 0
		}
		return regs.CPUStatusReady
	}
	return f.reg[off]
}

func (f *fakeHW) Write32(off regs.Offset, v uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reg[off] = v
	switch off {
	case regs.CCQPLOW:
		pa := uint64(f.reg[regs.CCQPHIGH])<<32 | uint64(v)
		if pa == 0 {
			f.reg[regs.CCQPSTATUS] = 0 // CQP destroyed: DONE clears
			return
		}
		if f.ccqpErr {
			f.reg[regs.CCQPSTATUS] = 1<<31 | 1
			f.reg[regs.CQPERRCODES] = 0xffff0001
			return
		}
		f.cqpCtxPA = pa
		q0 := f.ld(pa)
		f.cqpRing = f.ld(pa + 8)
		f.cqpCtx = f.ld(pa + 24)
		f.cqpSize = 1 << (((q0 >> 8) & 0xf) + 1)
		f.cqpTail, f.cqpPol = 0, 1
		f.reg[regs.CCQPSTATUS] = 1
	case regs.CQACK:
		f.cqAcks = append(f.cqAcks, v)
	case regs.CQPDB:
		f.doorbells++
		f.runCQP()
	case regs.CQARM:
		if c := f.cqByID(v); c != nil {
			seq := f.ld(c.shadow+32) >> 16 & 3
			c.armed = f.ld(c.shadow+32)&(3<<14) != 0
			c.lastSeq = seq
		}
	}
}

// acked reports whether CQACK was ever written with id (the last value
// alone races with CCQ events acknowledged by vector 0's goroutine).
func (f *fakeHW) acked(id uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.cqAcks {
		if v == id {
			return true
		}
	}
	return false
}

func (f *fakeHW) cqByID(id uint32) *fakeCQ {
	if id == 0 {
		return f.ccq
	}
	return f.cqs[id]
}

func (f *fakeHW) ld(a uint64) uint64 {
	v, err := f.mem.Load64(hostmem.IOVA(a))
	if err != nil {
		f.t.Errorf("fake: load %#x: %v", a, err)
	}
	return v
}

func (f *fakeHW) st(a, v uint64) {
	if err := f.mem.Store64(hostmem.IOVA(a), v); err != nil {
		f.t.Errorf("fake: store %#x: %v", a, err)
	}
}

// runCQP consumes every valid WQE at the tail (the device reads by valid
// bit, the doorbell is only a hint).
func (f *fakeHW) runCQP() {
	for f.cqpRing != 0 {
		base := f.cqpRing + uint64(f.cqpTail)*64
		hdr := f.ld(base + 24)
		if uint8(hdr>>63) != f.cqpPol {
			return
		}
		var w fakeWQE
		w.Idx = f.cqpTail
		for i := range 8 {
			w.Q[i] = f.ld(base + 8*uint64(i))
		}
		w.Q[3] &^= 1 << 63
		w.Op = uint8(hdr>>32) & 0x3f
		if f.hang[w.Op] {
			return
		}
		ret, major, minor, failed := f.exec(&w)
		f.wqes = append(f.wqes, w)
		idx := f.cqpTail
		f.cqpTail++
		if f.cqpTail == f.cqpSize {
			f.cqpTail, f.cqpPol = 0, f.cqpPol^1
		}
		tail := f.cqpTail
		if failed {
			tail |= regs.CQPTAIL_CQP_OP_ERR
			f.reg[regs.CQPERRCODES] = uint32(major)<<16 | uint32(minor)
		}
		f.reg[regs.CQPTAIL] = tail
		if f.ccq != nil && !f.noCCQE && !(w.Op == cqpOpDestroyCQ && w.Q[3]&0x7ffff == 0) {
			q3 := uint64(idx)<<32 | uint64(minor)
			if failed {
				q3 |= uint64(major)<<16 | 1<<55
			}
			f.writeCQE(f.ccq, [4]uint64{0, f.cqpCtx, uint64(ret), q3})
		}
	}
}

// writeCQE writes one CQE (valid last) and, if the CQ is armed, a CEQE.
func (f *fakeHW) writeCQE(c *fakeCQ, q [4]uint64) {
	a := c.ring + uint64(c.head)*32
	for i := range 3 {
		f.st(a+8*uint64(i), q[i])
	}
	f.st(a+24, q[3]|uint64(c.pol)<<63)
	c.head++
	if c.head == c.size {
		c.head, c.pol = 0, c.pol^1
	}
	if c.armed {
		c.armed = false
		f.postCEQE(c.ceq, c.ctx)
	}
}

func (f *fakeHW) postCEQE(ceqID uint32, ctx uint64) {
	e := f.ceqs[ceqID]
	if e == nil {
		return
	}
	f.st(e.ring+uint64(e.head)*8, ctx|uint64(e.pol)<<63)
	e.head++
	if e.head == e.size {
		e.head, e.pol = 0, e.pol^1
	}
	f.signal(e.vec)
}

func (f *fakeHW) signal(vec int) {
	if vec < len(f.msix) {
		select {
		case f.msix[vec] <- struct{}{}:
		default:
		}
	}
}

// exec runs one WQE's side effects and says how it completes.
func (f *fakeHW) exec(w *fakeWQE) (ret uint32, major, minor uint16, failed bool) {
	q := w.Q
	if c, ok := f.fail[w.Op]; ok {
		return 0, c[0], c[1], true
	}
	ret = f.retval[w.Op]
	switch w.Op {
	case cqpOpQueryRDMAFeatures:
		buf, n := q[4], int(q[3]&0xffffffff)
		cnt := int(f.featureCnt)
		ents := make([]uint64, cnt)
		ents[0] = uint64(featFWInfo)<<48 | uint64(cnt)<<32 | 1<<16 | 60
		if cnt > 1 {
			ents[1] = 1 << 48
		}
		if cnt > 2 {
			ftn := uint64(0)
			if f.atomics {
				ftn = ftnAtomicsAllowed
			}
			ents[2] = uint64(featFTNFlags)<<48 | ftn
		}
		for i := 3; i < cnt; i++ {
			ents[i] = uint64(40+i) << 48 // unknown feature types (≥ 34 are skipped)
		}
		for i, e := range ents {
			if 8*i+8 <= n {
				f.st(buf+8*uint64(i), e)
			}
		}
	case cqpOpQueryFPMVal:
		f.writeFPMQuery(q[4])
	case cqpOpCommitFPMVal:
		f.commitFPM(q[4])
	case cqpOpUpdatePESDs:
		ents := []sdEntry{{q[0], q[1]}}
		if q[4]>>63 != 0 {
			ents = append(ents, sdEntry{q[4] &^ (1 << 63), q[5]})
		}
		if q[6]>>63 != 0 {
			ents = append(ents, sdEntry{q[6] &^ (1 << 63), q[7]})
		}
		for i := range int(q[3] & 0xf) {
			a := (q[2] &^ 0x3f) + 16*uint64(i)
			e := sdEntry{f.ld(a), f.ld(a + 8)}
			w.Ovf = append(w.Ovf, e)
			ents = append(ents, e)
		}
		for _, e := range ents {
			idx := uint32(e.Cmd & 0xfff)
			if e.Data&1 != 0 {
				f.sds[idx] = e.Data &^ 0xfff
			} else {
				delete(f.sds, idx)
			}
		}
	case cqpOpCreateCQ:
		id := uint32(q[3] & 0x7ffff)
		c := &fakeCQ{id: id, ring: q[4], size: uint32(q[0] & 0x1fffff), ctx: q[1], shadow: q[5],
			ceq: uint32(q[3]>>22) & 0x3ff, pol: 1}
		if id == 0 {
			f.ccq = c
		} else {
			f.cqs[id] = c
		}
	case cqpOpModifyCQ:
		if c := f.cqs[uint32(q[3]&0x7ffff)]; c != nil && q[3]&(1<<43) != 0 {
			c.ring, c.size, c.head, c.pol = q[4], uint32(q[0]), 0, 1
		}
	case cqpOpDestroyCQ:
		id := uint32(q[3] & 0x7ffff)
		if id == 0 {
			f.ccq = nil
		} else {
			delete(f.cqs, id)
		}
	case cqpOpCreateCEQ:
		id := uint32(q[3] & 0x3ff)
		f.ceqs[id] = &fakeEQ{id: id, ring: q[4], size: uint32(q[2] & 0x3fffff), pol: 1, vec: int(id)}
	case cqpOpDestroyCEQ:
		delete(f.ceqs, uint32(q[3]&0x3ff))
	case cqpOpCreateAEQ:
		f.aeq = &fakeEQ{ring: q[4], size: uint32(q[2] & 0x7ffff), pol: 1}
	case cqpOpDestroyAEQ:
		f.aeq = nil
	case cqpOpManageStats:
		if _, ok := f.retval[w.Op]; !ok && q[3]&(1<<62) != 0 {
			ret = 5
		}
	case cqpOpWorkSchedNode:
		if _, ok := f.retval[w.Op]; !ok && q[3]&(1<<61) != 0 {
			ret = 7 // qs_handle of an added leaf
		}
	case cqpOpGatherStats:
		for i, v := range f.gather {
			f.st(q[4]+8*uint64(i), v)
		}
	case cqpOpModifyQP:
		if q[3]>>60&7 == uint64(qpHWStateClosing) && f.suspendAE && f.aeq != nil {
			f.injectAELocked(uint32(q[3]&0xffffff), aeQPSuspendComplete, 0, 0, 0)
		}
	case cqpOpManagePushPages:
		if _, ok := f.retval[w.Op]; !ok {
			ret = invalidPushIdx // decline (docs/hw-controlpath.md "Push pages")
		}
	}
	return ret, 0, 0, false
}

func (f *fakeHW) writeFPMQuery(pa uint64) {
	n := 176
	if f.queryBufLen != 0 {
		n = f.queryBufLen
	}
	buf := make([]byte, n)
	put := func(off int, v uint64) {
		if off+8 <= n {
			binary.LittleEndian.PutUint64(buf[off:], v)
		}
	}
	p := f.fpm
	put(0, uint64(p.maxSDs)<<32)
	for t := range hmcMax {
		off := fpmQueryOffset[t]
		if off < 0 {
			continue
		}
		put(off, uint64(p.sizeLg[t])<<32|uint64(p.max[t]))
	}
	put(64, uint64(p.misc.XFBlockSize)<<32|uint64(p.max[hmcXFFL]))
	put(80, uint64(p.misc.Q1BlockSize)<<32|uint64(p.max[hmcQ1FL]))
	put(112, uint64(p.max[hmcPBLE]))
	put(120, uint64(p.misc.MaxCEQs)|uint64(p.misc.HTMultiplier)<<16|uint64(p.misc.TimerBucket)<<32)
	put(136, uint64(p.misc.RRFBlockSize)<<32|uint64(p.max[hmcRRFFL]))
	if err := f.mem.Write(hostmem.IOVA(pa), buf); err != nil {
		f.t.Errorf("fake: FPM query write: %v", err)
	}
}

// commitFPM assigns 512-aligned bases in commitOrder (default: commit
// buffer order, PBLE last) and writes them back with the counts.
func (f *fakeHW) commitFPM(pa uint64) {
	order := f.commitOrder
	if order == nil {
		for t := range hmcMax {
			if t != hmcPBLE {
				order = append(order, t)
			}
		}
		order = append(order, hmcPBLE)
	}
	size := func(t int) uint64 {
		switch t {
		case hmcAPBVT:
			return 8192
		case hmcPBLE:
			return 8
		case hmcXFFL, hmcQ1FL, hmcRRFFL, hmcOOISCFFL:
			return 4
		}
		return 1 << f.fpm.sizeLg[t]
	}
	var next uint64
	for _, t := range order {
		off := fpmCommitOffset[t]
		cnt := f.ld(pa + uint64(off))
		if t == hmcAPBVT {
			cnt = 1
		}
		f.st(pa+uint64(off), (next/512)<<32|cnt)
		next = roundUp(next+cnt*size(t), 512)
	}
}

// injectAE writes an AEQE and signals vector 0.
func (f *fakeHW) injectAE(id uint32, code uint16, src uint8, wqeIdx uint32, ctx uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.injectAELocked(id, code, src, wqeIdx, ctx)
}

func (f *fakeHW) injectAELocked(id uint32, code uint16, src uint8, wqeIdx uint32, ctx uint64) {
	e := f.aeq
	if e == nil {
		f.t.Fatal("fake: no AEQ")
	}
	qw1 := uint64(id&0x3ffff) | uint64(id>>18&1)<<46 | uint64(wqeIdx&0x7fff)<<18 | uint64(code)<<34 |
		uint64(src)<<50 | uint64(e.pol)<<63
	a := e.ring + uint64(e.head)*16
	f.st(a, ctx)
	f.st(a+8, qw1)
	e.head++
	if e.head == e.size {
		e.head, e.pol = 0, e.pol^1
	}
	f.signal(0)
}

// completeOnCQ writes a CQE to a verbs CQ (and a CEQE if armed).
func (f *fakeHW) completeOnCQ(cqID uint32, q [4]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cqs[cqID]
	if c == nil {
		f.t.Fatalf("fake: no CQ %d", cqID)
	}
	// Arm state from the shadow area: armed when ARM_SEQ_NUM moved.
	seq := f.ld(c.shadow+32) >> 16 & 3
	if seq != c.lastSeq && f.ld(c.shadow+32)&(1<<14) != 0 {
		c.armed, c.lastSeq = true, seq
	}
	f.writeCQE(c, q)
}

func (f *fakeHW) wqesOp(op uint8) []fakeWQE {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeWQE
	for _, w := range f.wqes {
		if w.Op == op {
			out = append(out, w)
		}
	}
	return out
}

func (f *fakeHW) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.wqes)
}

func (f *fakeHW) since(n int) []fakeWQE {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeWQE(nil), f.wqes[n:]...)
}

func testNetdev() *StaticNetdev {
	return &StaticNetdev{
		HWAddr:  net.HardwareAddr{0x02, 0x11, 0x22, 0x33, 0x44, 0x55},
		MTUSize: 1500,
		IPs:     []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")},
	}
}

type devOpt func(*Config)

func withClock(c timing.Clock) devOpt { return func(cfg *Config) { cfg.Clock = c } }

// openFake brings a driver up on a fake device.
func openFake(t testing.TB, f *fakeHW, opts ...devOpt) *Device {
	t.Helper()
	cfg := Config{Netdev: testNetdev(), QPLimit: 256, MSIXVectors: len(f.msix), CQPTimeout: 2 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := Open(f, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// regv reads a register value as last written (under the fake's lock).
func (f *fakeHW) regv(off regs.Offset) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg[off]
}

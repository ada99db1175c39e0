package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// rawSQ writes SQ WQEs by hand (docs/hw-datapath.md "SQ WQE body", "Valid bit
// and NOP padding"): body first, header (qword3) last with the ring's
// polarity, as irdma's builders do.
type rawSQ struct {
	t    *testing.T
	mem  *hostmem.Memory
	base hostmem.IOVA
	size uint32
	head uint32
	pol  uint64 // 1 on the first lap
}

func newRawSQ(t *testing.T, e *ep) *rawSQ {
	return &rawSQ{t: t, mem: e.n.env.Mem, base: e.q.SQIOVA, size: e.q.Spec.SQQuanta, pol: 1}
}

// put writes a WQE of len(q)/4 quanta; q[3] is the header, to which the
// valid bit is added. Fragment valid bits are the caller's (fv gives the
// value to use). It returns the WQE index.
func (s *rawSQ) put(q []uint64) uint32 {
	idx := s.head
	at := s.base + hostmem.IOVA(idx)*32
	for i, v := range q {
		if i != 3 {
			if err := s.mem.Store64(at+hostmem.IOVA(8*i), v); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	if err := s.mem.Store64(at+24, q[3]|s.pol<<63); err != nil {
		s.t.Fatal(err)
	}
	s.head += uint32(len(q) / 4)
	if s.head >= s.size {
		s.head -= s.size
		s.pol ^= 1
	}
	return idx
}

// fv is the fragment valid bit for the current lap.
func (s *rawSQ) fv() uint64 { return s.pol << 63 }

// frag is a fragment's second qword: VALID | LEN [62:32] | STAG.
func (s *rawSQ) frag(n, stag uint32) uint64 { return s.fv() | uint64(n)<<32 | uint64(stag) }

func hdr(op uint64, flags uint64) uint64 { return op<<32 | flags }

const (
	sigCompl  = 1 << 62
	inlineBit = 1 << 57
	immBit    = 1 << 47
	streamBit = 1 << 58
)

// rawCQ reads CQEs by hand (valid bit first, polarity from 1).
type rawCQ struct {
	mem  *hostmem.Memory
	c    *devtest.CQ
	head uint32
	pol  uint64
}

func newRawCQ(n *node, c *devtest.CQ) *rawCQ { return &rawCQ{mem: n.env.Mem, c: c, pol: 1} }

func (r *rawCQ) poll() (cq.CQE, bool) {
	a := r.c.Ring.IOVA() + hostmem.IOVA(r.head)*32
	q3, _ := r.mem.Load64(a + 24)
	if q3>>63 != r.pol {
		return cq.CQE{}, false
	}
	var base [4]uint64
	for i := range 3 {
		base[i], _ = r.mem.Load64(a + hostmem.IOVA(8*i))
	}
	base[3] = q3
	r.head++
	if r.head == r.c.Size {
		r.head, r.pol = 0, r.pol^1
	}
	return cq.DecodeCQE(base, [4]uint64{}), true
}

// TestMalformedWQEs posts one malformed or forbidden WQE per case and
// checks the device's reaction: the error CQE (major 1, the minor
// irdma_ae_to_qp_err_code gives the AE, the WQE's opcode and index), the
// AE with the SQ as source, the QP in ERROR; then the driver's MODIFY_QP
// and FLUSH_WQES flush the WQE posted behind it.
func TestMalformedWQEs(t *testing.T) {
	type env struct {
		s      *rawSQ
		good   *buf // a valid MR of the QP's PD
		ro     *buf // an MR without local write
		other  *buf // an MR of another PD
		remote *buf
	}
	cases := []struct {
		name string
		ud   bool
		mods func(*devtest.QPSpec)
		post func(e *env) (idx uint32, op uint8)
		ae   uint16
	}{
		{"unknown opcode", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x02, sigCompl)}), 0x02
		}, qp.AEWQEUnexpectedOpcode},
		{"iWARP-only opcode GEN_RTS_AE", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x30, sigCompl)}), 0x30
		}, qp.AEWQEUnexpectedOpcode},
		{"iWARP LSMM STREAMMODE on a SEND", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, e.s.fv(), 0, hdr(0x03, sigCompl|streamBit)}), 0x03
		}, qp.AEWQEUnexpectedOpcode},
		{"atomics not enabled", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, uint64(e.good.stag), e.remote.va, hdr(0x0f, sigCompl|1<<38) | uint64(e.remote.stag),
				1, 0, 0, e.s.fv()}), 0x0f
		}, qp.AEWQEUnexpectedOpcode},
		{"too many fragments (14 SGEs + pad > 13)", false, nil, func(e *env) (uint32, uint8) {
			q := make([]uint64, 32)
			q[0], q[1] = e.good.va, e.s.frag(8, e.good.stag)
			for k := 1; k < 15; k++ {
				q[4+2*(k-1)], q[5+2*(k-1)] = e.good.va, e.s.frag(8, e.good.stag)
			}
			q[3] = hdr(0x03, sigCompl|14<<38) // ADDFRAGCNT 14: 15 slots, the last not empty
			return e.s.put(q), 0x03
		}, qp.AEWQEInvalidFragData},
		{"odd ADDFRAGCNT (GEN_2 pad rule)", false, nil, func(e *env) (uint32, uint8) {
			// 1 + 1/2 = 1 quantum as the device counts it.
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 0, hdr(0x03, sigCompl|1<<38)}), 0x03
		}, qp.AEWQEInvalidFragData},
		{"fragment valid bit of the wrong lap", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, 8<<32 | uint64(e.good.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, qp.AEWQEInvalidFragData},
		{"inline length over 101", false, nil, func(e *env) (uint32, uint8) {
			q := make([]uint64, 4*qp.InlineQuanta(120))
			for k := 1; k < len(q)/4; k++ {
				q[4*k+3] = e.s.fv() // the inline valid byte of each further quantum
			}
			q[3] = hdr(0x03, sigCompl|inlineBit|120<<48)
			return e.s.put(q), 0x03
		}, qp.AEWQEInvalidParameter},
		{"inline flag on a READ", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, e.remote.va, hdr(0x01, sigCompl|inlineBit|4<<48)}), 0x01
		}, qp.AEWQEInvalidParameter},
		{"immediate on a READ", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{7, 0, e.remote.va, hdr(0x01, sigCompl|immBit)}), 0x01
		}, qp.AEWQEInvalidParameter},
		{"ADDFRAGCNT on a NOP", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x0c, sigCompl|2<<38)}), 0x0c
		}, qp.AEWQEInvalidParameter},
		{"WQE crossing an 8-quanta chunk", false, nil, func(e *env) (uint32, uint8) {
			for range 7 {
				e.s.put([]uint64{0, 0, 0, hdr(0x0c, 0)})
			}
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 0, hdr(0x03, sigCompl|2<<38),
				e.good.va, e.s.frag(8, e.good.stag), 0, e.s.fv()}), 0x03
		}, qp.AEWQEInvalidParameter},
		{"FAST_REG with reserved page size", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 4096, hdr(0x09, sigCompl|3<<46|1<<53) | 0x2000}), 0x09
		}, qp.AEWQEInvalidParameter},
		{"FAST_REG without FASTREGEN", false, func(s *devtest.QPSpec) { s.FastReg = false }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 4096, hdr(0x09, sigCompl|1<<53) | 0x2000}), 0x09
		}, qp.AEPrivOperationDenied},
		{"BIND_MW without BINDEN", false, func(s *devtest.QPSpec) { s.Bind = false }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, uint64(e.good.stag) << 32, 64, hdr(0x08, sigCompl|1<<53) | 0x3000}), 0x08
		}, qp.AEPrivOperationDenied},
		{"READ with ORD 0", false, func(s *devtest.QPSpec) { s.ORD = 0 }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), e.remote.va, hdr(0x01, sigCompl) | uint64(e.remote.stag)}), 0x01
		}, qp.AERDMAReadWhileORDZero},
		{"SGE with an unallocated L_Key", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag+0x1000), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0102},
		{"SGE with a wrong key", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag^1), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0106},
		{"SGE with the L_Key of another PD", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.other.va, e.s.frag(8, e.other.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0105},
		{"SGE longer than its MR", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va + 4000, e.s.frag(200, e.good.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0108},
		{"READ sink without local write", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.ro.va, e.s.frag(8, e.ro.stag), e.remote.va, hdr(0x01, sigCompl) | uint64(e.remote.stag)}), 0x01
		}, 0x0109},
		{"STag zero", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, 0), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0206},
		{"LOCAL_INV of an unallocated STag", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, uint64(e.good.stag + 0x2000), 0, hdr(0x0a, sigCompl)}), 0x0a
		}, 0x0102},
		{"UD SEND through an address handle that does not exist", true, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 1<<32 | 0x1111, hdr(0x03, sigCompl) | 99}), 0x03
		}, qp.AEInvalidAHEntry},
		{"UD RDMA WRITE", true, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), e.remote.va, hdr(0x00, sigCompl)}), 0x00
		}, qp.AEWQEUnexpectedOpcode},
	}
	w := newWorld(t, opts{stepped: true})
	a, peer := w.nodes[0], w.nodes[1]
	a.env.SetARP(1, peer.mac)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mods := []qpOpt{func(s *devtest.QPSpec) { s.DestQP = 99 }}
			if c.mods != nil {
				mods = append(mods, c.mods)
			}
			e := a.newEP(c.ud, peer, mods...)
			a.env.Connect(e.q)
			en := &env{s: newRawSQ(t, e), good: a.newMR(4096, devtest.RightsAll, e.pd),
				ro: a.newMR(4096, devtest.RightsLocalRead, e.pd), other: a.newMR(4096, devtest.RightsAll, e.pd+1),
				remote: a.newMR(4096, devtest.RightsAll, e.pd)}
			idx, op := c.post(en)
			nop := en.s.put([]uint64{0, 0, 0, hdr(0x0c, sigCompl)}) // behind it, for the flush
			a.env.Doorbell(e.q)
			sc := newRawCQ(a, e.scq)
			var got cq.CQE
			w.until("error CQE", func() bool {
				var ok bool
				got, ok = sc.poll()
				return ok
			})
			minor := qp.FlushCodeForAE(c.ae)
			if !got.Error || got.Major != cq.MajorFlush || got.Minor != minor || !got.SQ || got.Op != op ||
				uint32(got.WQEIdx) != idx || got.QPCtx != e.q.Spec.CompCtx || got.QPID() != e.q.Spec.ID {
				t.Fatalf("CQE %+v, want error major 1 minor %d op %#x index %d", got, minor, op, idx)
			}
			wantAE(t, a, e.q.Spec.ID, c.ae, cq.AESourceSQ)
			if e.state() != qp.StateError {
				t.Fatalf("state %v", e.state())
			}
			// irdma's reaction: MODIFY_QP(ERROR), FLUSH_WQES with the flush
			// code; the NOP behind the bad WQE gets the flush CQE.
			a.env.MustOK(e.driverFlush(t, minor, cq.FlushGeneralErr), "FLUSH_WQES")
			f, ok := sc.poll()
			if !ok || !f.Error || f.Major != cq.MajorFlush || f.Minor != minor || uint32(f.WQEIdx) != nop {
				t.Fatalf("flush CQE %+v %v, want index %d minor %d", f, ok, nop, minor)
			}
			if x, ok := sc.poll(); ok {
				t.Fatalf("extra CQE %+v", x)
			}
		})
	}
}

// TestMalformedRQWQE: the responder finds a malformed receive WQE: it NAKs
// the SEND (remote operational error), completes the receive WQE in error,
// raises the decoder's AE with the RQ as source and goes to ERROR.
func TestMalformedRQWQE(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	a, b := w.connectRC(nil, nil)
	src := a.n.newMR(4096, devtest.RightsAll, a.pd)
	dst := b.n.newMR(4096, devtest.RightsAll, b.pd)
	// RQ WQE 0, first lap: ADDFRAGCNT 1 (odd: the GEN_2 pad rule is
	// broken).
	le := binary.LittleEndian
	rq := b.q.RQ
	le.PutUint64(rq[0:], dst.va)
	le.PutUint64(rq[8:], 1<<63|64<<32|uint64(dst.stag))
	le.PutUint64(rq[32:], dst.va)
	le.PutUint64(rq[40:], 1<<63|64<<32|uint64(dst.stag))
	b.n.env.Mem.Store64(b.q.RQIOVA+24, 1<<63|1<<38)
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: []uk.SGE{{Addr: src.va, Length: 16, LKey: src.stag}}})
	wc := a.waitSend(1)[0]
	if wc.Status != uk.WCRemOpErr {
		t.Fatalf("requester %+v", wc)
	}
	rc := newRawCQ(b.n, b.rcq)
	var got cq.CQE
	w.until("RQ error CQE", func() bool {
		var ok bool
		got, ok = rc.poll()
		return ok
	})
	if !got.Error || got.SQ || got.Major != cq.MajorFlush || got.Minor != cq.FlushGeneralErr || got.WQEIdx != 0 {
		t.Fatalf("RQ CQE %+v", got)
	}
	wantAE(t, b.n, b.q.Spec.ID, qp.AEWQEInvalidFragData, cq.AESourceRQ)
	wantAE(t, a.n, a.q.Spec.ID, qp.AEIBRemoteOpError, cq.AESourceSQ)
	if b.state() != qp.StateError {
		t.Fatalf("state %v", b.state())
	}
	_ = fmt.Sprint
}

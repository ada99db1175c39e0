package dataplane_test

import (
	"encoding/binary"
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
	t    testing.TB
	mem  *hostmem.Memory
	c    *devtest.CQ
	head uint32
	pol  uint64
}

func newRawCQ(t testing.TB, n *node, c *devtest.CQ) *rawCQ {
	return &rawCQ{t: t, mem: n.env.Mem, c: c, pol: 1}
}

// load reads one qword of the ring; a bus error fails the test.
func (r *rawCQ) load(a hostmem.IOVA) uint64 {
	r.t.Helper()
	v, err := r.mem.Load64(a)
	if err != nil {
		r.t.Fatalf("CQ ring at %#x: %v", a, err)
	}
	return v
}

func (r *rawCQ) poll() (cq.CQE, bool) {
	r.t.Helper()
	a := r.c.Ring.IOVA() + hostmem.IOVA(r.head)*32
	q3 := r.load(a + 24)
	if q3>>63 != r.pol {
		return cq.CQE{}, false
	}
	var base [4]uint64
	for i := range 3 {
		base[i] = r.load(a + hostmem.IOVA(8*i))
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
		// ae is the AE the device must raise (user.h "Async Events
		// codes"); minor the flush code irdma_ae_to_qp_err_code (user.h)
		// gives it, which the device writes into the error CQE; status
		// the ib_wc_status irdma_flush_err_to_ib_wc_status (verbs.c)
		// makes of that minor. All three written by hand.
		ae     uint16
		minor  uint16
		status uk.WCStatus
	}{
		{"unknown opcode", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x02, sigCompl)}), 0x02
		}, 0x020a /* WQE_UNEXPECTED_OPCODE */, flushLocQPOp, uk.WCLocQPOpErr},
		{"iWARP-only opcode GEN_RTS_AE", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x30, sigCompl)}), 0x30
		}, 0x020a /* WQE_UNEXPECTED_OPCODE */, flushLocQPOp, uk.WCLocQPOpErr},
		{"iWARP LSMM STREAMMODE on a SEND", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, e.s.fv(), 0, hdr(0x03, sigCompl|streamBit)}), 0x03
		}, 0x020a /* WQE_UNEXPECTED_OPCODE */, flushLocQPOp, uk.WCLocQPOpErr},
		{"atomics not enabled", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, uint64(e.good.stag), e.remote.va, hdr(0x0f, sigCompl|1<<38) | uint64(e.remote.stag),
				1, 0, 0, e.s.fv()}), 0x0f
		}, 0x020a /* WQE_UNEXPECTED_OPCODE */, flushLocQPOp, uk.WCLocQPOpErr},
		{"too many fragments (14 SGEs + pad > 13)", false, nil, func(e *env) (uint32, uint8) {
			q := make([]uint64, 32)
			q[0], q[1] = e.good.va, e.s.frag(8, e.good.stag)
			for k := 1; k < 15; k++ {
				q[4+2*(k-1)], q[5+2*(k-1)] = e.good.va, e.s.frag(8, e.good.stag)
			}
			q[3] = hdr(0x03, sigCompl|14<<38) // ADDFRAGCNT 14: 15 slots, the last not empty
			return e.s.put(q), 0x03
		}, 0x020c /* WQE_INVALID_FRAG_DATA */, flushGeneral, uk.WCWRFlushErr},
		{"odd ADDFRAGCNT (GEN_2 pad rule)", false, nil, func(e *env) (uint32, uint8) {
			// 1 + 1/2 = 1 quantum as the device counts it.
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 0, hdr(0x03, sigCompl|1<<38)}), 0x03
		}, 0x020c /* WQE_INVALID_FRAG_DATA */, flushGeneral, uk.WCWRFlushErr},
		{"fragment valid bit of the wrong lap", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, 8<<32 | uint64(e.good.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x020c /* WQE_INVALID_FRAG_DATA */, flushGeneral, uk.WCWRFlushErr},
		{"inline length over 101", false, nil, func(e *env) (uint32, uint8) {
			// 120 bytes: 8 in the first quantum, 31 in each further one
			// (GEN_2 irdma_inline_data_size_to_quanta): 5 quanta.
			q := make([]uint64, 4*5)
			for k := 1; k < len(q)/4; k++ {
				q[4*k+3] = e.s.fv() // the inline valid byte of each further quantum
			}
			q[3] = hdr(0x03, sigCompl|inlineBit|120<<48)
			return e.s.put(q), 0x03
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"inline flag on a READ", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, e.remote.va, hdr(0x01, sigCompl|inlineBit|4<<48)}), 0x01
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"immediate on a READ", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{7, 0, e.remote.va, hdr(0x01, sigCompl|immBit)}), 0x01
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"ADDFRAGCNT on a NOP", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 0, hdr(0x0c, sigCompl|2<<38)}), 0x0c
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"WQE crossing an 8-quanta chunk", false, nil, func(e *env) (uint32, uint8) {
			for range 7 {
				e.s.put([]uint64{0, 0, 0, hdr(0x0c, 0)})
			}
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 0, hdr(0x03, sigCompl|2<<38),
				e.good.va, e.s.frag(8, e.good.stag), 0, e.s.fv()}), 0x03
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"FAST_REG with reserved page size", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 4096, hdr(0x09, sigCompl|3<<46|1<<53) | 0x2000}), 0x09
		}, 0x020b /* WQE_INVALID_PARAMETER */, flushGeneral, uk.WCWRFlushErr},
		{"FAST_REG without FASTREGEN", false, func(s *devtest.QPSpec) { s.FastReg = false }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, 0, 4096, hdr(0x09, sigCompl|1<<53) | 0x2000}), 0x09
		}, 0x011c /* PRIV_OPERATION_DENIED */, flushProt, uk.WCLocProtErr},
		{"BIND_MW without BINDEN", false, func(s *devtest.QPSpec) { s.Bind = false }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, uint64(e.good.stag) << 32, 64, hdr(0x08, sigCompl|1<<53) | 0x3000}), 0x08
		}, 0x011c /* PRIV_OPERATION_DENIED */, flushProt, uk.WCLocProtErr},
		{"READ with ORD 0", false, func(s *devtest.QPSpec) { s.ORD = 0 }, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), e.remote.va, hdr(0x01, sigCompl) | uint64(e.remote.stag)}), 0x01
		}, 0x0205 /* RDMA_READ_WHILE_ORD_ZERO */, flushGeneral, uk.WCWRFlushErr},
		{"SGE with an unallocated L_Key", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag+0x1000), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0102 /* AMP_UNALLOCATED_STAG */, flushProt, uk.WCLocProtErr},
		{"SGE with a wrong key", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag^1), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0106 /* AMP_BAD_STAG_KEY */, flushProt, uk.WCLocProtErr},
		{"SGE with the L_Key of another PD", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.other.va, e.s.frag(8, e.other.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0105 /* AMP_BAD_PD */, flushProt, uk.WCLocProtErr},
		{"SGE longer than its MR", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va + 4000, e.s.frag(200, e.good.stag), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0108 /* AMP_BOUNDS_VIOLATION */, flushProt, uk.WCLocProtErr},
		{"READ sink without local write", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.ro.va, e.s.frag(8, e.ro.stag), e.remote.va, hdr(0x01, sigCompl) | uint64(e.remote.stag)}), 0x01
		}, 0x0109 /* AMP_RIGHTS_VIOLATION */, flushProt, uk.WCLocProtErr},
		{"STag zero", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, 0), 0, hdr(0x03, sigCompl)}), 0x03
		}, 0x0206 /* STAG_ZERO_INVALID */, flushGeneral, uk.WCWRFlushErr},
		{"LOCAL_INV of an unallocated STag", false, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{0, uint64(e.good.stag + 0x2000), 0, hdr(0x0a, sigCompl)}), 0x0a
		}, 0x0102 /* AMP_UNALLOCATED_STAG */, flushProt, uk.WCLocProtErr},
		{"UD SEND through an address handle that does not exist", true, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), 1<<32 | 0x1111, hdr(0x03, sigCompl) | 99}), 0x03
		}, 0x0406 /* INVALID_AH_ENTRY */, flushGeneral, uk.WCWRFlushErr},
		{"UD RDMA WRITE", true, nil, func(e *env) (uint32, uint8) {
			return e.s.put([]uint64{e.good.va, e.s.frag(8, e.good.stag), e.remote.va, hdr(0x00, sigCompl)}), 0x00
		}, 0x020a /* WQE_UNEXPECTED_OPCODE */, flushLocQPOp, uk.WCLocQPOpErr},
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
			sc := newRawCQ(t, a, e.scq)
			var got cq.CQE
			w.until("error CQE", func() bool {
				var ok bool
				got, ok = sc.poll()
				return ok
			})
			if !got.Error || got.Major != majorFlush || got.Minor != c.minor || !got.SQ || got.Op != op ||
				uint32(got.WQEIdx) != idx || got.QPCtx != e.q.Spec.CompCtx || got.QPID() != e.q.Spec.ID {
				t.Fatalf("CQE %+v, want error major %d minor %d op %#x index %d", got, majorFlush, c.minor, op, idx)
			}
			if st := uk.FlushErrToWCStatus(uk.FlushCode(got.Minor)); st != c.status {
				t.Fatalf("minor %d reads as %v, want %v", got.Minor, st, c.status)
			}
			wantAE(t, a, e.q.Spec.ID, c.ae, aeSourceSQ)
			if e.state() != qp.StateError {
				t.Fatalf("state %v", e.state())
			}
			// irdma's reaction (irdma_flush_wqes, hw.c): MODIFY_QP(ERROR),
			// then FLUSH_WQES with the AE's flush code for the queue the AE
			// named (the SQ) and FLUSH_GENERAL_ERR for the other. The NOP
			// behind the bad WQE gets the flush CQE, with the SQ's code.
			a.env.MustOK(e.driverFlush(t, c.minor, flushGeneral), "FLUSH_WQES")
			f, ok := sc.poll()
			if !ok || !f.Error || f.Major != majorFlush || f.Minor != c.minor || !f.SQ || uint32(f.WQEIdx) != nop {
				t.Fatalf("flush CQE %+v %v, want major %d minor %d index %d", f, ok, majorFlush, c.minor, nop)
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
	rc := newRawCQ(t, b.n, b.rcq)
	var got cq.CQE
	w.until("RQ error CQE", func() bool {
		var ok bool
		got, ok = rc.poll()
		return ok
	})
	// WQE_INVALID_FRAG_DATA is not among irdma_ae_to_qp_err_code's
	// cases: FLUSH_GENERAL_ERR.
	if !got.Error || got.SQ || got.Major != majorFlush || got.Minor != flushGeneral || got.WQEIdx != 0 {
		t.Fatalf("RQ CQE %+v, want error major %d minor %d index 0", got, majorFlush, flushGeneral)
	}
	wantAE(t, b.n, b.q.Spec.ID, 0x020c /* WQE_INVALID_FRAG_DATA */, aeSourceRQ)
	wantAE(t, a.n, a.q.Spec.ID, 0x020e /* IB_REMOTE_OP_ERROR */, aeSourceSQ)
	if b.state() != qp.StateError {
		t.Fatalf("state %v", b.state())
	}
}

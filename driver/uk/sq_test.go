package uk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func hdrAt(q *QP, idx uint32) uint64 {
	return binary.LittleEndian.Uint64(q.sqBuf[int(idx)*QuantumSize+24:])
}

func TestSQWrapPolarityAndNOPPadding(t *testing.T) {
	q := goldenQP(t, QPTypeRC, GEN2)
	sges := []SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}, {Addr: 7, Length: 8, LKey: 9}, {Addr: 10, Length: 11, LKey: 12}}
	// First lap, head 509: a 3-quanta WQE fits in 509..511? 509 % 8 = 5,
	// three quanta left in the chunk: yes.
	q.sq.head.Store(509)
	q.sq.tail.Store(509)
	q.swqePol = 1
	if n, err := q.PostSend([]SendWR{{WrID: 1, Opcode: WRSend, SGList: sges}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if q.SQHead() != 0 || hdrAt(q, 509)>>63 != 1 {
		t.Fatalf("head %d, header %#x", q.SQHead(), hdrAt(q, 509))
	}
	// Head 510: a 3-quanta WQE does not fit the 2 quanta left; two NOPs
	// (first-lap polarity) pad to the wrap, and the WQE starts the second
	// lap at index 0 with VALID=0.
	q.sq.head.Store(510)
	q.sq.tail.Store(510)
	q.swqePol = 1
	for i := range q.sqBuf {
		q.sqBuf[i] = 0xee
	}
	if n, err := q.PostSend([]SendWR{{WrID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: sges}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	for _, i := range []uint32{510, 511} {
		if h := hdrAt(q, i); h != 1<<63|uint64(OpNOP)<<32 || q.SQTrack(i).Quanta != 1 {
			t.Errorf("NOP at %d: header %#x track %+v", i, h, q.SQTrack(i))
		}
	}
	h := hdrAt(q, 0)
	if h>>63 != 0 || q.SQPolarity() != 0 || q.SQHead() != 3 {
		t.Errorf("second lap WQE: header %#x polarity %d head %d", h, q.SQPolarity(), q.SQHead())
	}
	// Every fragment slot (and the pad) carries the second lap's valid 0.
	for _, off := range []int{8, 40, 56, 72, 88} {
		if v := binary.LittleEndian.Uint64(q.sqBuf[off:]); v>>63 != 0 {
			t.Errorf("slot qword at %d = %#x has VALID 1", off, v)
		}
	}
	if q.SQTrack(0) != (SQTrack{WrID: 2, WrLen: 26, Quanta: 3, Signaled: true}) {
		t.Errorf("tracking %+v", q.SQTrack(0))
	}
}

func TestSQClrWQEs(t *testing.T) {
	tests := []struct {
		name        string
		head        uint32
		pol         uint8 // polarity before the post
		clearedFrom uint32
		fill        byte
	}{
		{"first lap index 0 clears 128..255 to 0x00", 0, 0, 128, 0x00},
		{"first lap index 128 clears 256..383", 128, 1, 256, 0x00},
		{"first lap index 384 clears the next lap's 0..127 to 0xff", 384, 1, 0, 0xff},
		{"second lap index 0 clears 128..255 to 0xff", 0, 1, 128, 0xff},
		{"second lap index 384 clears the third lap's 0..127 to 0x00", 384, 0, 0, 0x00},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := goldenQP(t, QPTypeRC, GEN2)
			for i := range q.sqBuf {
				q.sqBuf[i] = 0x5a
			}
			q.sq.head.Store(tc.head)
			q.sq.tail.Store(tc.head)
			q.swqePol = tc.pol
			if err := q.NOP(1, false); err != nil {
				t.Fatal(err)
			}
			lo, hi := int(tc.clearedFrom)*QuantumSize, int(tc.clearedFrom+128)*QuantumSize
			if !bytes.Equal(q.sqBuf[lo:hi], bytes.Repeat([]byte{tc.fill}, hi-lo)) {
				t.Errorf("quanta %d..%d not all %#x", tc.clearedFrom, tc.clearedFrom+127, tc.fill)
			}
			// Nothing else changed but the NOP.
			for i, b := range q.sqBuf {
				in := i >= lo && i < hi
				nop := i >= int(tc.head)*QuantumSize && i < int(tc.head+1)*QuantumSize
				if !in && !nop && b != 0x5a {
					t.Fatalf("byte %d changed to %#x", i, b)
				}
			}
		})
	}
	// Not a multiple of 128: nothing cleared.
	q := goldenQP(t, QPTypeRC, GEN2)
	q.sq.head.Store(5)
	q.sq.tail.Store(5)
	q.swqePol = 1
	for i := range q.sqBuf {
		q.sqBuf[i] = 0x5a
	}
	if err := q.NOP(1, true); err != nil {
		t.Fatal(err)
	}
	if bytes.Count(q.sqBuf, []byte{0x5a}) != len(q.sqBuf)-QuantumSize {
		t.Error("index 5 cleared something")
	}
	if hdrAt(q, 5) != 1<<63|1<<62|uint64(OpNOP)<<32 {
		t.Errorf("signaled NOP header %#x", hdrAt(q, 5))
	}
}

func TestSQDoorbell(t *testing.T) {
	tests := []struct {
		name               string
		initial, head, hwT uint32
		ring               bool
	}{
		{"nothing new", 10, 10, 3, false},
		{"hardware idle at the initial head", 10, 12, 10, true},
		{"hardware already caught up", 10, 12, 12, false},
		{"hardware still behind the initial head", 10, 12, 4, false},
		{"hardware in the new range", 10, 14, 12, true},
		{"wrapped: hardware idle at the initial head", 508, 4, 508, true},
		{"wrapped: hardware past the wrap", 508, 4, 1, true},
		{"wrapped: hardware behind", 508, 4, 200, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := goldenQP(t, QPTypeRC, GEN2)
			q.initialHead = tc.initial
			q.sq.head.Store(tc.head)
			// The hardware tail is [14:0] of shadow qword0; upper bits are
			// not part of it.
			binary.LittleEndian.PutUint64(q.shadow, 0xffff_0000_0000_0000|uint64(tc.hwT))
			if got := q.SQDoorbell(); got != tc.ring {
				t.Errorf("ring = %v, want %v", got, tc.ring)
			}
			if q.initialHead != tc.head {
				t.Errorf("initial head %d, want %d", q.initialHead, tc.head)
			}
		})
	}
}

func TestKernelQPSizes(t *testing.T) {
	tests := []struct {
		cap  QPCap
		want QPSizes
		err  bool
	}{
		// 1 SGE + imm slot = 2 fragments: shift 1.
		{QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, QPSizes{SQDepth: 512, SQShift: 1, RQDepth: 8, RQShift: 0, MaxSendWR: 127, MaxRecvWR: 7}, false},
		// The golden RC QP: 13 send SGEs (shift 3), 3 recv SGEs (shift 1).
		{QPCap{MaxSendWR: 31, MaxRecvWR: 31, MaxSendSGE: 13, MaxRecvSGE: 3, MaxInlineData: 101}, QPSizes{SQDepth: 512, SQShift: 3, RQDepth: 64, RQShift: 1, MaxSendWR: 31, MaxRecvWR: 31}, false},
		{QPCap{MaxSendWR: 32, MaxRecvWR: 100, MaxSendSGE: 2, MaxRecvSGE: 7, MaxInlineData: 64}, QPSizes{SQDepth: 512, SQShift: 2, RQDepth: 512, RQShift: 2, MaxSendWR: 63, MaxRecvWR: 127}, false},
		{QPCap{MaxSendWR: 4063, MaxSendSGE: 13, MaxRecvSGE: 1}, QPSizes{SQDepth: 32768, SQShift: 3, RQDepth: 8, MaxSendWR: 4063, MaxRecvWR: 7}, false},
		{QPCap{MaxSendWR: 4064, MaxSendSGE: 13}, QPSizes{}, true},
		{QPCap{MaxSendSGE: 14}, QPSizes{}, true},
		{QPCap{MaxInlineData: 102}, QPSizes{}, true},
	}
	for _, tc := range tests {
		got, err := KernelQPSizes(GEN2, tc.cap)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%+v: %+v %v, want %+v (err %v)", tc.cap, got, err, tc.want, tc.err)
		}
	}
}

// TestUserPathBuilders: the uk-level LOCAL_INV and BIND_MW builders, given
// what libirdma gives them (no forced local fence), write exactly the
// golden user-space WQEs; PostSend's LOCAL_INV differs from them only by
// the local fence the kernel forces.
func TestUserPathBuilders(t *testing.T) {
	for _, g := range loadGolden(t) {
		if g.Ring == nil || *g.Ring != "SQ" || g.PostRC != 0 {
			continue
		}
		var post func(q *QP) error
		wr := g.sendWR(t)
		switch g.WR.Opcode {
		case "IBV_WR_LOCAL_INV":
			post = func(q *QP) error {
				return q.LocalInvalidate(&PostSQInfo{WrID: wr.WrID, Signaled: true, ReadFence: wr.Flags&SendFence != 0, TargetSTag: wr.InvalidateRKey})
			}
		case "IBV_WR_BIND_MW":
			// The golden header and qwords, read back as irdma_upost_send
			// filled irdma_bind_window (see the golden wr.bind_mw).
			want := qwordBytes(t, g.Qwords)
			hdr := binary.LittleEndian.Uint64(want[24:])
			b := BindWindow{
				VA:        binary.LittleEndian.Uint64(want[0:]),
				MRSTag:    uint32(binary.LittleEndian.Uint64(want[8:]) >> 32),
				MWSTag:    uint32(binary.LittleEndian.Uint64(want[8:])),
				Len:       binary.LittleEndian.Uint64(want[16:]),
				VABased:   hdr>>53&1 == 1,
				Type1:     true,
				EnaReads:  hdr>>50&1 == 1,
				EnaWrites: hdr>>51&1 == 1,
			}
			post = func(q *QP) error { return q.MWBind(&PostSQInfo{WrID: wr.WrID, Signaled: true, Bind: b}) }
		default:
			continue
		}
		t.Run(g.Case, func(t *testing.T) {
			q := goldenQP(t, QPTypeRC, GEN2)
			q.sq.head.Store(*g.Index)
			q.sq.tail.Store(*g.Index)
			q.swqePol = g.Polarity
			if err := post(q); err != nil {
				t.Fatal(err)
			}
			if got, want := q.sqWQE(*g.Index, 1), qwordBytes(t, g.Qwords); !bytes.Equal(got, want) {
				t.Errorf("\n got  %x\n want %x", got, want)
			}
			if g.WR.Opcode != "IBV_WR_LOCAL_INV" {
				return
			}
			k := goldenQP(t, QPTypeRC, GEN2)
			k.sq.head.Store(*g.Index)
			k.sq.tail.Store(*g.Index)
			k.swqePol = g.Polarity
			if n, err := k.PostSend([]SendWR{wr}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			want := qwordBytes(t, g.Qwords)
			binary.LittleEndian.PutUint64(want[24:], binary.LittleEndian.Uint64(want[24:])|1<<61)
			if got := k.sqWQE(*g.Index, 1); !bytes.Equal(got, want) {
				t.Errorf("kernel LOCAL_INV\n got  %x\n want %x", got, want)
			}
		})
	}
}

// TestFastRegister checks IB_WR_REG_MR against the layout of
// ctrl.c:irdma_sc_mr_fast_register (docs/hw-datapath.md "Memory and NOP
// WQEs"), written out by hand.
func TestFastRegister(t *testing.T) {
	q := goldenQP(t, QPTypeRC, GEN2)
	wr := SendWR{WrID: 0x77, Opcode: WRRegMR, Flags: SendSignaled | SendFence, RegMR: RegMRWR{
		Key: 0x0012_3456, Access: AccessLocalWrite | AccessRemoteRead | AccessZeroBased, PageSize: 1 << 21,
		IOVA: 0x7f00_0020_0000, Length: 0x40_0000, PBLAddr: 0x1_2345_6000, FirstPMPBLIndex: 0x0abc_def0, NPages: 2,
	}}
	if n, err := q.PostSend([]SendWR{wr}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	want := []uint64{
		0x7f00_0020_0000,
		0x1_2345_6000 | 0xabc,
		0x40_0000 | 0xdef0<<48,
		1<<63 | 1<<62 | 1<<61 | 1<<60 | // VALID, SIGCOMPL, LOCALFENCE and READFENCE (IB_SEND_FENCE)
			1<<53 | 0x07<<48 | // VA-based; rights LOCALREAD|LOCALWRITE|REMOTEREAD (zero-based dropped)
			1<<46 | 1<<44 | // 2M pages, PBL level 1 (more than one page)
			uint64(OpFastRegNSMR)<<32 | 0x1234<<8 | 0x56,
	}
	for i, w := range want {
		if got := binary.LittleEndian.Uint64(q.sqBuf[8*i:]); got != w {
			t.Errorf("qword %d = %#x, want %#x", i, got, w)
		}
	}
	if q.SQTrack(0) != (SQTrack{WrID: 0x77, Quanta: 1, Signaled: true}) {
		t.Errorf("tracking %+v", q.SQTrack(0))
	}
}

func TestPostSendRefusals(t *testing.T) {
	sge := []SGE{{Addr: 1, Length: 1, LKey: 1}}
	fourteen := make([]SGE, 14)
	tests := []struct {
		name string
		typ  QPType
		caps QPCaps
		wr   SendWR
	}{
		{"bind MW", QPTypeRC, 0, SendWR{Opcode: WRBindMW}},
		{"unknown opcode", QPTypeRC, 0, SendWR{Opcode: 10}},
		{"write with imm on UD", QPTypeUD, 0, SendWR{Opcode: WRRDMAWriteWithImm, SGList: sge}},
		{"send with imm without the cap", QPTypeRC, CapWriteWithImm, SendWR{Opcode: WRSendWithImm, SGList: sge}},
		{"14 READ sink SGEs", QPTypeRC, 0, SendWR{Opcode: WRRDMARead, SGList: fourteen}},
		{"atomics without the feature", QPTypeRC, 0, SendWR{Opcode: WRAtomicFetchAndAdd, SGList: sge}},
		{"inline over max_inline_data", QPTypeRC, 0, SendWR{Opcode: WRRDMAWrite, Flags: SendInline, InlineData: make([]byte, 102)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := NewQP(QPConfig{Limits: GEN2, Type: tc.typ, Caps: tc.caps, SQ: make([]byte, 512*32), RQ: make([]byte, 64*32),
				Shadow: make([]byte, 64), MaxSQFragCnt: 13, MaxRQFragCnt: 1, MaxInlineData: 101})
			if err != nil {
				t.Fatal(err)
			}
			ok := SendWR{WrID: 1, Opcode: WRSend, SGList: sge}
			n, err := q.PostSend([]SendWR{ok, tc.wr, ok})
			if n != 1 || !errors.Is(err, ErrInvalid) {
				t.Errorf("posted %d, err %v; want 1, EINVAL", n, err)
			}
			if q.SQHead() != 1 {
				t.Errorf("head %d: the first WR should stay posted, nothing else", q.SQHead())
			}
		})
	}
}

func TestRQFullAndWrap(t *testing.T) {
	q := goldenQP(t, QPTypeUD, GEN2) // 32 one-quantum RQ WQEs
	for i := range 31 {
		if err := q.PostReceive(uint64(i), []SGE{{Addr: uint64(i), Length: 1, LKey: 1}}); err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
	}
	// Full at size − 1 (IRDMA_RING_FULL_ERR).
	if n, err := q.PostRecv([]RecvWR{{WrID: 99}}); n != 0 || !errors.Is(err, ErrNoMem) {
		t.Fatalf("full RQ: %d %v", n, err)
	}
	q.rq.tail.Store(31) // all completed
	if n, err := q.PostRecv([]RecvWR{{WrID: 31}, {WrID: 32, SGList: []SGE{{Addr: 5, Length: 6, LKey: 7}, {Addr: 8, Length: 9, LKey: 10}}}}); n != 1 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("2 SGEs on a max_recv_sge 1 QP: %d %v", n, err)
	}
	if err := q.PostReceive(32, nil); err != nil {
		t.Fatal(err)
	}
	// Index 0 of the second lap: VALID=0, an empty slot 0.
	want := make([]byte, 32)
	if got := q.rqBuf[:32]; !bytes.Equal(got, want) || q.RQPolarity() != 0 || q.RQWrID(0) != 32 {
		t.Errorf("second lap WQE %x polarity %d wr_id %d", got, q.RQPolarity(), q.RQWrID(0))
	}
}

func TestNoAllocs(t *testing.T) {
	f := newCQFixture(t, 64)
	wrs := []SendWR{{WrID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: 1, Length: 2, LKey: 3}}},
		{WrID: 2, Opcode: WRRDMAWrite, Flags: SendInline, InlineData: make([]byte, 40)}}
	var info CQPollInfo
	allocs := testing.AllocsPerRun(50, func() {
		f.rc.sq.tail.Store(f.rc.sq.head.Load())
		if _, err := f.rc.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		_ = f.rc.SQDoorbell()
		idx := (f.rc.sq.head.Load() + f.rc.sq.size - 4) % f.rc.sq.size
		f.cqe(int(f.cq.Head()), 0, ctxRC, 0, uint64(f.cq.Polarity())<<63|cSQ|cOp(OpSend)|cWQEIdx(idx))
		if err := f.cq.PollCmpl(&info); err != nil {
			t.Fatal(err)
		}
		_ = ProcessCQE(&info)
		_ = f.cq.RequestNotification(NotifyAny)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per post/poll round", allocs)
	}
}

func TestNewQPRefuses(t *testing.T) {
	good := func() QPConfig {
		return QPConfig{Limits: GEN2, Type: QPTypeRC, SQ: make([]byte, 512*32), RQ: make([]byte, 64*32), RQShift: 1,
			Shadow: make([]byte, 64), MaxSQFragCnt: 13, MaxRQFragCnt: 3, MaxInlineData: 101}
	}
	if q, err := NewQP(good()); err != nil || q.ID() != 0 || q.Type() != QPTypeRC || q.RQSize() != 32 {
		t.Fatalf("good config: %v", err)
	}
	for name, mod := range map[string]func(*QPConfig){
		"iWARP type":          func(c *QPConfig) { c.Type = 1 },
		"14 send SGEs":        func(c *QPConfig) { c.MaxSQFragCnt = 14 },
		"14 recv SGEs":        func(c *QPConfig) { c.MaxRQFragCnt = 14 },
		"102 inline bytes":    func(c *QPConfig) { c.MaxInlineData = 102 },
		"SQ not a power of 2": func(c *QPConfig) { c.SQ = make([]byte, 384*32) },
		"SQ below a chunk":    func(c *QPConfig) { c.SQ = make([]byte, 4*32) },
		"SQ not whole quanta": func(c *QPConfig) { c.SQ = make([]byte, 512*32+1) },
		"RQ one WQE":          func(c *QPConfig) { c.RQ = make([]byte, 2*32) },
		"RQ not whole WQEs":   func(c *QPConfig) { c.RQ = make([]byte, 65*32) },
		"RQ shift 4":          func(c *QPConfig) { c.RQShift = 4 },
		"no shadow":           func(c *QPConfig) { c.Shadow = nil },
	} {
		c := good()
		mod(&c)
		if _, err := NewQP(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want EINVAL", name, err)
		}
	}
	if _, err := NewCQ(CQConfig{Ring: make([]byte, 3*32), Shadow: make([]byte, 64)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("3-entry CQ: %v", err)
	}
}

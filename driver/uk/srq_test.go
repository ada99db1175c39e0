package uk

import (
	"errors"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

var gen3 = LimitsFrom(profile.GEN3())

func newTestSRQ(t *testing.T, lim Limits, quanta int, shift uint8, maxFrag int) (*SRQ, []byte, []byte) {
	t.Helper()
	ring, shadow := make([]byte, quanta*QuantumSize), make([]byte, ShadowAreaSize)
	s, err := NewSRQ(SRQConfig{Limits: lim, ID: 7, Ring: ring, Shift: shift, Shadow: shadow, MaxFragCnt: maxFrag})
	if err != nil {
		t.Fatal(err)
	}
	return s, ring, shadow
}

// TestSRQPostGolden: the SRQ WQE and shadow word, written by hand from
// rdma-core uk.c irdma_uk_srq_post_receive and defs.h (fragment slots as
// irdma_set_fragment, wr_id in qword2, ADDFRAGCNT [41:38], VALID b63; the
// pad slot of an even count counted only on GEN_2; shadow qword0 = (idx +
// 1) mod size).
func TestSRQPostGolden(t *testing.T) {
	sges := []SGE{{Addr: 0x1000, Length: 0x40, LKey: 0x11}, {Addr: 0x2000, Length: 0x80, LKey: 0x22}}
	for _, tc := range []struct {
		name string
		lim  Limits
		hdr  uint64
	}{
		{"GEN_3: pad not counted", gen3, 1<<38 | 1<<63},
		{"GEN_2 rule: pad counted", GEN2, 2<<38 | 1<<63},
	} {
		lim := tc.lim
		lim.MaxSRQQuanta = 262144
		s, ring, shadow := newTestSRQ(t, lim, 8, 1, 2)
		if s.Size() != 4 {
			t.Fatalf("size %d, want 4 WQEs of 2 quanta", s.Size())
		}
		if err := s.PostReceive(0xdead, sges); err != nil {
			t.Fatal(err)
		}
		want := []uint64{
			0x1000, 1<<63 | 0x40<<32 | 0x11, // slot 0
			0xdead,                          // wr_id
			tc.hdr,                          // header
			0x2000, 1<<63 | 0x80<<32 | 0x22, // slot 1
			0, 1 << 63, // pad slot: VALID only
		}
		for i, w := range want {
			if got := get64(ring, 8*i); got != w {
				t.Errorf("%s: qword %d = %#x, want %#x", tc.name, i, got, w)
			}
		}
		if got := get64(shadow, 0); got != 1 {
			t.Errorf("%s: shadow producer %d, want 1", tc.name, got)
		}
		// Three more fill the ring (size − 1 usable), the fifth is refused.
		for i := range 2 {
			if err := s.PostReceive(uint64(i), sges[:1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PostReceive(9, nil); !errors.Is(err, ErrNoMem) {
			t.Errorf("%s: full ring: %v", tc.name, err)
		}
		if err := s.PostReceive(9, make([]SGE, 3)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: 3 SGEs on a 2-SGE SRQ: %v", tc.name, err)
		}
		if got := get64(shadow, 0); got != 3 {
			t.Errorf("%s: shadow producer %d, want 3", tc.name, got)
		}
	}
	if d, err := SRQDepth(gen3, 8, 0); err != nil || d != 16 {
		t.Errorf("SRQDepth(8, 0) = %d %v, want min_hw_wq_size 16", d, err)
	}
	if d, err := SRQDepth(gen3, 100, 1); err != nil || d != 256 {
		t.Errorf("SRQDepth(100, 1) = %d %v, want 256", d, err)
	}
	if _, err := SRQDepth(GEN2, 8, 0); err == nil {
		t.Error("SRQDepth on GEN_2 limits succeeded")
	}
}

// wideCQ is a GEN_3 CQ of 64-byte CQEs with an RC QP bound to ctx 0x9f01
// and its SRQ.
func wideCQ(t *testing.T) (*CQ, []byte, *QP, *SRQ) {
	t.Helper()
	ring := make([]byte, 8*64)
	c, err := NewCQ(CQConfig{ID: 3, Ring: ring, Shadow: make([]byte, ShadowAreaSize), Wide: true, HWFlushPerWQE: true})
	if err != nil {
		t.Fatal(err)
	}
	lim := gen3
	s, _, _ := newTestSRQ(t, lim, 16, 0, 1)
	q, err := NewQP(QPConfig{Limits: lim, ID: 0x11, Type: QPTypeRC, SQ: make([]byte, 64*QuantumSize), SQShift: 0,
		RQ: make([]byte, 16*QuantumSize), Shadow: make([]byte, ShadowAreaSize), MaxSQFragCnt: 1, MaxRQFragCnt: 1, SRQ: s})
	if err != nil {
		t.Fatal(err)
	}
	c.BindQP(0x9f01, q)
	return c, ring, q, s
}

// TestWideSRQCQEGolden: a 64-byte SRQ CQE written by hand (rdma-core uk.c
// irdma_uk_cq_poll_cmpl with avoid_mem_cflct: IRDMA_CQ_SRQ b52, wr_id in
// qword1, the QP from qword5 at byte 40, the extension in bytes 32–63), and
// an SRQ error CQE (IRDMA_SRQFLUSH_RSVD_MAJOR_ERR with an AE minor).
func TestWideSRQCQEGolden(t *testing.T) {
	c, ring, q, s := wideCQ(t)
	for range 2 {
		if err := s.PostReceive(1, nil); err != nil {
			t.Fatal(err)
		}
	}
	cqe := [8]uint64{
		64,                            // PAYLDLEN
		0xdead,                        // wr_id
		0x11 << 32,                    // QPID
		1<<63 | 1<<52 | 1<<50 | 0<<62, // VALID, SRQ, EXTCQE, RQ
		0, 0x9f01, 0, 1 << 63,         // ext: QP context in qword5, VALID
	}
	cqe2 := [8]uint64{0, 0xbeef, 0x11 << 32,
		1<<63 | 1<<52 | 1<<50 | 1<<55 | 0xfffe<<16 | 0x020e, // ERROR, major 0xfffe, minor AE REMOTE_OP_ERROR
		0, 0x9f01, 0, 1 << 63}
	for i, v := range cqe {
		put64(ring, 8*i, v)
	}
	for i, v := range cqe2 {
		put64(ring, 64+8*i, v)
	}
	var info CQPollInfo
	if err := c.PollCmpl(&info); err != nil {
		t.Fatal(err)
	}
	if info.QP != q || info.WrID != 0xdead || info.BytesXfered != 64 || info.IsSQ || info.CompStatus != CompSuccess {
		t.Errorf("SRQ CQE: %+v", info)
	}
	if s.Posted() != 1 || c.Head() != 1 {
		t.Errorf("SRQ posted %d, CQ head %d after one SRQ CQE", s.Posted(), c.Head())
	}
	if err := c.PollCmpl(&info); err != nil {
		t.Fatal(err)
	}
	if info.WrID != 0xbeef || info.CompStatus != CompFlushed || FlushCode(info.MinorErr) != FlushRemOpErr {
		t.Errorf("SRQ error CQE: %+v", info)
	}
	if err := c.PollCmpl(&info); !errors.Is(err, ErrCQEmpty) {
		t.Errorf("third poll: %v", err)
	}
}

// FuzzPollWideCQE: any 64-byte CQE (SRQ or not) polls without panicking
// and never moves the head by more than one entry.
func FuzzPollWideCQE(f *testing.F) {
	f.Add(uint64(64), uint64(0xdead), uint64(0x11<<32), uint64(1<<63|1<<52|1<<50), uint64(0x9f01), uint64(1<<63))
	f.Add(uint64(0), uint64(0x9f01), uint64(0), uint64(1<<63|1<<55|1<<16|5), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, q0, q1, q2, q3, q5, q7 uint64) {
		c, ring, _, s := wideCQ(t)
		_ = s.PostReceive(1, nil)
		for i, v := range []uint64{q0, q1, q2, q3, 0, q5, 0, q7} {
			put64(ring, 8*i, v)
		}
		var info CQPollInfo
		_ = c.PollCmpl(&info)
		if h := c.Head(); h > 1 {
			t.Fatalf("head moved to %d", h)
		}
	})
}

package uk

import (
	"encoding/binary"
	"errors"
	"testing"
)

// CQE bits from defs.h (docs/hw-datapath.md "CQE layout", "CQE extension"),
// spelled out here so the tests do not reuse the parser's constants.
const (
	cValid   = uint64(1) << 63
	cSQ      = uint64(1) << 62
	cError   = uint64(1) << 55
	cSolEv   = uint64(1) << 54
	cSTag    = uint64(1) << 53 // invalidated STag valid, or IPv4 on UD
	cPshDrop = uint64(1) << 51
	cExt     = uint64(1) << 50
	xImm     = uint64(1) << 62 // extension qword7
	xSMAC    = uint64(1) << 61
	xVLAN    = uint64(1) << 60
)

func cOp(op uint8) uint64             { return uint64(op) << 56 }
func cWQEIdx(i uint32) uint64         { return uint64(i) << 32 }
func cErr(major, minor uint16) uint64 { return cError | uint64(major)<<16 | uint64(minor) }

const ctxRC, ctxUD = 0xffff_8880_0000_1000, 0xffff_8880_0000_2000

// cqFixture is a CQ of size entries with an RC and a UD QP bound to it.
type cqFixture struct {
	cq     *CQ
	ring   []byte
	shadow []byte
	rc, ud *QP
}

func newCQFixture(t *testing.T, size int) *cqFixture {
	t.Helper()
	f := &cqFixture{ring: make([]byte, size*CQESize), shadow: make([]byte, ShadowAreaSize)}
	var err error
	if f.cq, err = NewCQ(CQConfig{ID: 7, Ring: f.ring, Shadow: f.shadow}); err != nil {
		t.Fatal(err)
	}
	f.rc = goldenQP(t, QPTypeRC, GEN2)
	f.ud = goldenQP(t, QPTypeUD, GEN2)
	f.cq.BindQP(ctxRC, f.rc)
	f.cq.BindQP(ctxUD, f.ud)
	return f
}

// cqe writes a hand-written CQE (or extension) into slot i.
func (f *cqFixture) cqe(i int, q0, q1, q2, q3 uint64) {
	for k, v := range []uint64{q0, q1, q2, q3} {
		binary.LittleEndian.PutUint64(f.ring[i*CQESize+8*k:], v)
	}
}

func (f *cqFixture) shadowHead() uint64 { return binary.LittleEndian.Uint64(f.shadow) }

func TestPollCmpl(t *testing.T) {
	sge := []SGE{{Addr: 0x1000, Length: 100, LKey: 5}}
	type post func(f *cqFixture)
	sends := func(n int) post {
		return func(f *cqFixture) {
			for i := range n {
				wr := SendWR{WrID: uint64(0x100 + i), Opcode: WRSend, Flags: SendSignaled, SGList: sge}
				if i == 0 {
					wr.Flags = 0 // unsignaled: retired by a later CQE
				}
				if _, err := f.rc.PostSend([]SendWR{wr}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	recvs := func(q func(*cqFixture) *QP, n int) post {
		return func(f *cqFixture) {
			for i := range n {
				if err := q(f).PostReceive(uint64(0x200+i), sge); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	rcOf := func(f *cqFixture) *QP { return f.rc }
	udOf := func(f *cqFixture) *QP { return f.ud }

	tests := []struct {
		name   string
		setup  post
		cqes   func(f *cqFixture)
		want   CQPollInfo
		wc     WorkCompletion
		head   uint32 // CQ head after the poll
		sqTail uint32
		rqTail uint32
	}{
		{
			name:  "SQ success retires the unsignaled WQE before it",
			setup: sends(2),
			cqes: func(f *cqFixture) {
				f.cqe(0, 0x77<<32, ctxRC, 0x11<<32, cValid|cSQ|cOp(OpSend)|cWQEIdx(1))
			},
			want:   CQPollInfo{WrID: 0x101, QPCtx: ctxRC, BytesXfered: 100, OpType: OpSend, IsSQ: true, WQEIdx: 1, QPID: 0x11, StatRaw: 0x77},
			wc:     WorkCompletion{WrID: 0x101, Status: WCSuccess, Opcode: WCSend, ByteLen: 100, QPNum: 0x11, SrcQP: 0x11},
			head:   1,
			sqTail: 2,
		},
		{
			name:  "RQ success with immediate in the extension slot",
			setup: recvs(rcOf, 2),
			cqes: func(f *cqFixture) {
				// Second receive: WQE index in quanta = 1 × (1 << rq_shift).
				f.cqe(0, 42, ctxRC, 0x11<<32, cValid|cExt|cSolEv|cOp(0x0b)|cWQEIdx(2))
				f.cqe(1, 0xdeadbeef, 0, 0, cValid|xImm)
			},
			want: CQPollInfo{WrID: 0x201, QPCtx: ctxRC, BytesXfered: 42, OpType: 0x0b, WQEIdx: 2, QPID: 0x11,
				SolicitedEvent: true, ImmValid: true, ImmData: 0xdeadbeef},
			wc:     WorkCompletion{WrID: 0x201, Opcode: WCRecvRDMAWithImm, ByteLen: 42, QPNum: 0x11, SrcQP: 0x11, Flags: WCWithImm, ImmData: 0xdeadbeef},
			head:   2,
			rqTail: 2,
		},
		{
			name:  "RQ send with invalidate",
			setup: recvs(rcOf, 1),
			cqes: func(f *cqFixture) {
				f.cqe(0, 64, ctxRC, 0x11<<32|0xabcd01, cValid|cSTag|cOp(0x04))
			},
			want: CQPollInfo{WrID: 0x200, QPCtx: ctxRC, BytesXfered: 64, OpType: 0x04, QPID: 0x11, UDSrcQPN: 0xabcd01,
				StagInvalidSet: true, InvSTag: 0xabcd01, IPv4: true},
			wc:     WorkCompletion{WrID: 0x200, Opcode: WCRecv, ByteLen: 64, QPNum: 0x11, SrcQP: 0x11, Flags: WCWithInvalidate, InvRKey: 0xabcd01},
			head:   1,
			rqTail: 1,
		},
		{
			name:  "UD receive with SMAC, VLAN and IPv4",
			setup: recvs(udOf, 1),
			cqes: func(f *cqFixture) {
				f.cqe(0, 100, ctxUD, 0x12<<32|0x123456, cValid|cExt|cSTag|cOp(0x04))
				f.cqe(1, 0, 0, 0xa064<<48|0x0011_2233_4455, cValid|xSMAC|xVLAN)
			},
			want: CQPollInfo{WrID: 0x200, QPCtx: ctxUD, BytesXfered: 100, OpType: 0x04, QPID: 0x12, UDSrcQPN: 0x123456,
				StagInvalidSet: true, InvSTag: 0x123456, IPv4: true,
				UDSMACValid: true, UDSMAC: [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, UDVLANValid: true, UDVLAN: 0xa064},
			wc: WorkCompletion{WrID: 0x200, Opcode: WCRecv, ByteLen: 100, QPNum: 0x12, SrcQP: 0x123456,
				Flags: WCGRH | WCWithNetHdrType | WCWithSMAC | WCWithVLAN, SMAC: [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55},
				VLANID: 0x064, SL: 5, NetHdrIPv4: true},
			head:   2,
			rqTail: 1,
		},
		{
			name:  "SQ error that is not a flush",
			setup: sends(1),
			cqes: func(f *cqFixture) {
				f.cqe(0, 0, ctxRC, 0x11<<32, cValid|cSQ|cErr(0x0003, 0x8002)|cOp(OpSend)|cWQEIdx(0))
			},
			want: CQPollInfo{WrID: 0x100, QPCtx: ctxRC, OpType: OpSend, IsSQ: true, QPID: 0x11,
				Error: true, MajorErr: 3, MinorErr: 0x8002, CompStatus: CompUnknown},
			wc:   WorkCompletion{WrID: 0x100, Status: WCGeneralErr, Opcode: WCSend, VendorErr: 0x3_8002, QPNum: 0x11, SrcQP: 0x11},
			head: 1, sqTail: 1,
		},
		{
			name: "UD SQ CQE with the 0xE major signature is a success",
			setup: func(f *cqFixture) {
				if _, err := f.ud.PostSend([]SendWR{{WrID: 9, Opcode: WRSend, Flags: SendSignaled, SGList: sge}}); err != nil {
					t.Fatal(err)
				}
			},
			cqes: func(f *cqFixture) {
				f.cqe(0, 0, ctxUD, 0x12<<32, cValid|cSQ|cErr(0xe001, 7)|cOp(OpSend)|cWQEIdx(0))
			},
			want: CQPollInfo{WrID: 9, QPCtx: ctxUD, BytesXfered: 100, OpType: OpSend, IsSQ: true, QPID: 0x12},
			wc:   WorkCompletion{WrID: 9, Opcode: WCSend, ByteLen: 100, QPNum: 0x12, Flags: WCGRH | WCWithNetHdrType},
			head: 1, sqTail: 1,
		},
		{
			name:  "RQ flush with one receive outstanding: head moves",
			setup: recvs(rcOf, 1),
			cqes: func(f *cqFixture) {
				f.cqe(0, 0, ctxRC, 0x11<<32, cValid|cErr(0x0001, uint16(FlushRemAccessErr))|cWQEIdx(0x7ffe))
			},
			want: CQPollInfo{WrID: 0x200, QPCtx: ctxRC, WQEIdx: 0x7ffe, QPID: 0x11,
				Error: true, MajorErr: 1, MinorErr: uint16(FlushRemAccessErr), CompStatus: CompFlushed},
			wc:   WorkCompletion{WrID: 0x200, Status: WCRemAccessErr, Opcode: WCRecv, VendorErr: 0x1_0003, QPNum: 0x11, SrcQP: 0x11},
			head: 1, rqTail: 1,
		},
		{
			name:  "GEN_3 0xfffe flush carries an AE code as minor",
			setup: recvs(rcOf, 1),
			cqes: func(f *cqFixture) {
				f.cqe(0, 0, ctxRC, 0x11<<32, cValid|cErr(0xfffe, 0x050a))
			},
			want: CQPollInfo{WrID: 0x200, QPCtx: ctxRC, QPID: 0x11,
				Error: true, MajorErr: 0xfffe, MinorErr: uint16(FlushRetryExcErr), CompStatus: CompFlushed},
			wc:   WorkCompletion{WrID: 0x200, Status: WCRetryExcErr, Opcode: WCRecv, VendorErr: 0xfffe_0008, QPNum: 0x11, SrcQP: 0x11},
			head: 1, rqTail: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newCQFixture(t, 8)
			tc.setup(f)
			tc.cqes(f)
			var info CQPollInfo
			if err := f.cq.PollCmpl(&info); err != nil {
				t.Fatalf("PollCmpl: %v", err)
			}
			if info.QP == nil {
				t.Fatal("no QP handle")
			}
			tc.want.QP = info.QP
			if info != tc.want {
				t.Errorf("info\n got  %+v\n want %+v", info, tc.want)
			}
			if wc := ProcessCQE(&info); wc != tc.wc {
				t.Errorf("wc\n got  %+v\n want %+v", wc, tc.wc)
			}
			if f.cq.Head() != tc.head || f.shadowHead() != uint64(tc.head) {
				t.Errorf("head %d shadow %d, want %d", f.cq.Head(), f.shadowHead(), tc.head)
			}
			if info.IsSQ && info.QP.SQTail() != tc.sqTail {
				t.Errorf("SQ tail %d, want %d", info.QP.SQTail(), tc.sqTail)
			}
			if !info.IsSQ && info.QP.RQTail() != tc.rqTail {
				t.Errorf("RQ tail %d, want %d", info.QP.RQTail(), tc.rqTail)
			}
			if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrCQEmpty) {
				t.Errorf("second poll: %v, want ErrCQEmpty", err)
			}
		})
	}
}

// TestPollSQFlushParks: one flush CQE stands for every outstanding SQ
// WQE; the head stays on it, its minor becomes FLUSH_GENERAL_ERR after
// the first report and its WQE index follows the SQ tail; NOP padding is
// skipped; the last completion moves the head.
func TestPollSQFlushParks(t *testing.T) {
	f := newCQFixture(t, 8)
	one := []SGE{{Addr: 0x1000, Length: 10, LKey: 5}}
	many := make([]SGE, 13) // 7 quanta: forces NOP padding before it
	for i := range many {
		many[i] = SGE{Addr: 0x2000, Length: 1, LKey: 6}
	}
	three := []SGE{one[0], one[0], one[0]} // 2 quanta
	wrs := []SendWR{
		{WrID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: three},                            // index 0..1
		{WrID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: many},                             // NOPs 2..7, index 8..14
		{WrID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: one, RemoteAddr: 1, RKey: 2}, // index 15
	}
	if n, err := f.rc.PostSend(wrs); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	f.cqe(0, 0, ctxRC, 0x11<<32, cValid|cSQ|cErr(1, uint16(FlushProtErr))|cOp(OpSend)|cWQEIdx(0))
	want := []struct {
		wrID   uint64
		op     uint8
		status WCStatus
		bytes  uint32
		tail   uint32
		head   uint32
	}{
		{1, OpSend, WCLocProtErr, 30, 2, 0},
		{2, OpSend, WCWRFlushErr, 13, 15, 0},
		{3, OpRDMAWrite, WCWRFlushErr, 10, 16, 1},
	}
	for i, w := range want {
		var info CQPollInfo
		if err := f.cq.PollCmpl(&info); err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
		wc := ProcessCQE(&info)
		if info.WrID != w.wrID || info.OpType != w.op || wc.Status != w.status || info.BytesXfered != w.bytes {
			t.Errorf("poll %d: wr_id %d op %#x status %d bytes %d, want %+v", i, info.WrID, info.OpType, wc.Status, info.BytesXfered, w)
		}
		if f.rc.SQTail() != w.tail || f.cq.Head() != w.head {
			t.Errorf("poll %d: SQ tail %d CQ head %d, want %d %d", i, f.rc.SQTail(), f.cq.Head(), w.tail, w.head)
		}
		if q3 := binary.LittleEndian.Uint64(f.ring[24:]); w.head == 0 && (uint16(q3) != uint16(FlushGeneralErr) || uint32(q3>>32&0x7fff) != w.tail) {
			t.Errorf("poll %d: parked CQE qword3 %#x: minor should be 1, index %d", i, q3, w.tail)
		}
	}
}

// TestPollBindFlushIsMWBindErr: the kernel reports a flushed BIND_MW with
// FLUSH_PROT_ERR as FLUSH_MW_BIND_ERR.
func TestPollBindFlushIsMWBindErr(t *testing.T) {
	f := newCQFixture(t, 4)
	if err := f.rc.MWBind(&PostSQInfo{WrID: 5, Signaled: true, Bind: BindWindow{MRSTag: 1, MWSTag: 2, Type1: true}}); err != nil {
		t.Fatal(err)
	}
	f.cqe(0, 0, ctxRC, 0, cValid|cSQ|cErr(1, uint16(FlushProtErr))|cOp(OpBindMW))
	var info CQPollInfo
	if err := f.cq.PollCmpl(&info); err != nil || info.MinorErr != uint16(FlushMWBindErr) || FlushErrToWCStatus(FlushCode(info.MinorErr)) != WCMWBindErr {
		t.Errorf("err %v minor %d", err, info.MinorErr)
	}
	// irdma_process_cqe has no work-completion opcode for BIND_MW in the
	// kernel (it never posts one), so the completion reports GENERAL_ERR.
	if wc := ProcessCQE(&info); wc.Status != WCGeneralErr || wc.VendorErr != 1<<16|uint32(FlushMWBindErr) {
		t.Errorf("wc %+v", wc)
	}
}

func TestPollPolarityAndExtension(t *testing.T) {
	f := newCQFixture(t, 4)
	for i := range 6 {
		if err := f.rc.PostReceive(uint64(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	rq := func(i uint32, valid uint64) uint64 { return valid | cWQEIdx(i*2) }
	var info CQPollInfo

	if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrCQEmpty) || !f.cq.Empty() || f.cq.Size() != 4 {
		t.Fatalf("empty CQ: %v", err)
	}
	// First lap: VALID=1 in slots 0..2; slot 3 holds a CQE whose
	// extension is in slot 0 of the next lap, written with VALID=0.
	f.cqe(0, 0, ctxRC, 0, rq(0, cValid))
	f.cqe(1, 0, ctxRC, 0, rq(1, cValid))
	f.cqe(2, 0, ctxRC, 0, rq(2, cValid))
	f.cqe(3, 0, ctxRC, 0, rq(3, cValid|cExt))
	if f.cq.Empty() {
		t.Fatal("CQ with valid CQEs reads as empty")
	}
	for i := range 3 {
		if err := f.cq.PollCmpl(&info); err != nil || info.WrID != uint64(i) {
			t.Fatalf("poll %d: %v wr_id %d", i, err, info.WrID)
		}
	}
	// The extension slot (slot 0) still holds the first lap's VALID=1:
	// not yet written for the next lap, so nothing is consumed.
	if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrCQEmpty) || f.cq.Head() != 3 {
		t.Fatalf("extension not valid yet: %v head %d", err, f.cq.Head())
	}
	f.cqe(0, 0x55, 0, 0, xImm) // next lap: VALID=0
	if err := f.cq.PollCmpl(&info); err != nil || info.WrID != 3 || !info.ImmValid || info.ImmData != 0x55 {
		t.Fatalf("CQE with wrapped extension: %v %+v", err, info)
	}
	if f.cq.Head() != 1 || f.cq.Polarity() != 0 || f.shadowHead() != 1 {
		t.Fatalf("after wrap: head %d polarity %d shadow %d", f.cq.Head(), f.cq.Polarity(), f.shadowHead())
	}
	// Second lap: a stale VALID=1 CQE in slot 1 is not new.
	if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrCQEmpty) {
		t.Fatalf("stale first-lap CQE polled: %v", err)
	}
	f.cqe(1, 0, ctxRC, 0, rq(4, 0))
	if err := f.cq.PollCmpl(&info); err != nil || info.WrID != 4 {
		t.Fatalf("second-lap CQE: %v wr_id %d", err, info.WrID)
	}
	// A CQE of a destroyed QP (qword1 zeroed by Clean) is consumed and
	// skipped.
	f.cqe(2, 0, ctxRC, 0, rq(5, 0))
	f.cq.Clean(ctxRC)
	if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrQPDestroyed) || f.cq.Head() != 3 {
		t.Fatalf("destroyed QP's CQE: %v head %d", err, f.cq.Head())
	}
	// So is one whose QP was unbound (destroyed) after it was written.
	f.cqe(3, 0, ctxRC, 0, rq(5, 0))
	f.cq.UnbindQP(ctxRC)
	if err := f.cq.PollCmpl(&info); !errors.Is(err, ErrQPDestroyed) || f.cq.Head() != 0 || f.cq.Polarity() != 1 {
		t.Fatalf("unbound QP's CQE: %v head %d", err, f.cq.Head())
	}
}

func TestRequestNotification(t *testing.T) {
	f := newCQFixture(t, 4)
	arm := func() uint64 { return binary.LittleEndian.Uint64(f.shadow[32:]) }
	steps := []struct {
		do   func() uint32
		want uint64
	}{
		// ARM_SEQ_NUM [17:16] +1 each arm, ARM_NEXT_SE [15] always,
		// ARM_NEXT [14] only for "any completion" (uk.c
		// irdma_uk_cq_request_notification).
		{func() uint32 { return f.cq.RequestNotification(NotifyAny) }, 1<<16 | 1<<15 | 1<<14},
		{func() uint32 { return f.cq.RequestNotification(NotifySolicited) }, 2<<16 | 1<<15},
		{func() uint32 { f.cq.SetResizedCnt(3); return 7 }, 2<<16 | 1<<15 | 3},
		{func() uint32 { return f.cq.RequestNotification(NotifyAny) }, 3<<16 | 1<<15 | 1<<14 | 3},
		{func() uint32 { return f.cq.RequestNotification(NotifySolicited) }, 0<<16 | 1<<15 | 3},
	}
	for i, s := range steps {
		if db := s.do(); db != 7 {
			t.Errorf("step %d: doorbell value %d, want the CQ id 7", i, db)
		}
		if got := arm(); got != s.want {
			t.Errorf("step %d: arm word %#x, want %#x", i, got, s.want)
		}
	}
}

func TestKernelCQSize(t *testing.T) {
	for _, tc := range []struct {
		cqe, size int
		err       bool
	}{
		{1, 6, false},
		{61, 126, false},
		{62, 130, false}, // 128 × 32 bytes is exactly a page: +2
		{63, 130, false},
		{1048575, 2097154, false},
		{0, 0, true},
		{1048576, 0, true},
	} {
		size, err := KernelCQSize(GEN2, tc.cqe)
		if size != tc.size || (err != nil) != tc.err {
			t.Errorf("KernelCQSize(%d) = %d, %v; want %d (err %v)", tc.cqe, size, err, tc.size, tc.err)
		}
	}
}

func TestFlushErrToWCStatus(t *testing.T) {
	want := map[FlushCode]WCStatus{
		FlushProtErr: WCLocProtErr, FlushRemAccessErr: WCRemAccessErr, FlushLocQPOpErr: WCLocQPOpErr,
		FlushRemOpErr: WCRemOpErr, FlushLocLenErr: WCLocLenErr, FlushGeneralErr: WCWRFlushErr,
		FlushRetryExcErr: WCRetryExcErr, FlushMWBindErr: WCMWBindErr, FlushRemInvReqErr: WCRemInvReqErr,
		FlushRNRRetryExcErr: WCRNRRetryExcErr, FlushFatalErr: WCFatalErr, FlushInvalid: WCFatalErr, 99: WCFatalErr,
	}
	for c, s := range want {
		if got := FlushErrToWCStatus(c); got != s {
			t.Errorf("flush %d → %d, want %d", c, got, s)
		}
	}
	for ae, c := range map[uint16]FlushCode{0x0107: FlushProtErr, 0x020a: FlushLocQPOpErr, 0x0303: FlushLocLenErr,
		0x020d: FlushRemAccessErr, 0x0119: FlushMWBindErr, 0x0208: FlushRemInvReqErr, 0x020e: FlushRemOpErr,
		0x050f: FlushRNRRetryExcErr, 0x0704: FlushFatalErr, 0x0201: FlushGeneralErr} {
		if got := AEToFlushCode(ae); got != c {
			t.Errorf("AE %#04x → %d, want %d", ae, got, c)
		}
	}
}

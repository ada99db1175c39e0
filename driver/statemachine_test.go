package driver

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
)

const (
	mPKey   = QPAttrPKeyIndex
	mPort   = QPAttrPort
	mQKey   = QPAttrQKey
	mAcc    = QPAttrAccessFlags
	mCur    = QPAttrCurState
	mAV     = QPAttrAV
	mMTU    = QPAttrPathMTU
	mDQPN   = QPAttrDestQPN
	mRQPSN  = QPAttrRQPSN
	mSQPSN  = QPAttrSQPSN
	mDestRd = QPAttrMaxDestRdAtomic
	mRd     = QPAttrMaxQPRdAtomic
	mRNRT   = QPAttrMinRNRTimer
	mTO     = QPAttrTimeout
	mRetry  = QPAttrRetryCnt
	mRNR    = QPAttrRNRRetry
	mAlt    = QPAttrAltPath
	mMig    = QPAttrPathMigState
	mSQDN   = QPAttrEnSQDAsyncNotify
)

// kernelTable is drivers/infiniband/core/verbs.c qp_state_table for RC,
// UD and GSI, written out again by hand (independently of qpStateTable)
// as the oracle: "cur>next" → required, optional per type.
var kernelTable = map[string][3][2]QPAttrMask{
	"RESET>RESET": {},
	"RESET>INIT":  {{mPKey | mPort | mAcc, 0}, {mPKey | mPort | mQKey, 0}, {mPKey | mQKey, 0}},
	"INIT>RESET":  {}, "INIT>ERR": {},
	"INIT>INIT": {{0, mPKey | mPort | mAcc}, {0, mPKey | mPort | mQKey}, {0, mPKey | mQKey}},
	"INIT>RTR": {
		{mAV | mMTU | mDQPN | mRQPSN | mDestRd | mRNRT, mAlt | mAcc | mPKey},
		{0, mPKey | mQKey}, {0, mPKey | mQKey}},
	"RTR>RESET": {}, "RTR>ERR": {},
	"RTR>RTS": {
		{mTO | mRetry | mRNR | mSQPSN | mRd, mCur | mAlt | mAcc | mRNRT | mMig},
		{mSQPSN, mCur | mQKey}, {mSQPSN, mCur | mQKey}},
	"RTS>RESET": {}, "RTS>ERR": {},
	"RTS>RTS":   {{0, mCur | mAcc | mAlt | mMig | mRNRT}, {0, mCur | mQKey}, {0, mCur | mQKey}},
	"RTS>SQD":   {{0, mSQDN}, {0, mSQDN}, {0, mSQDN}},
	"SQD>RESET": {}, "SQD>ERR": {},
	"SQD>RTS": {{0, mCur | mAlt | mAcc | mRNRT | mMig}, {0, mCur | mQKey}, {0, mCur | mQKey}},
	"SQD>SQD": {
		{0, mPort | mAV | mTO | mRetry | mRNR | mRd | mDestRd | mAlt | mAcc | mPKey | mRNRT | mMig},
		{0, mPKey | mQKey}, {0, mPKey | mQKey}},
	"SQE>RESET": {}, "SQE>ERR": {},
	"SQE>RTS":   {{0, 0}, {0, mCur | mQKey}, {0, mCur | mQKey}},
	"ERR>RESET": {}, "ERR>ERR": {},
}

var allStates = []QPState{QPSReset, QPSInit, QPSRTR, QPSRTS, QPSSQD, QPSSQE, QPSErr}
var smTypes = []QPType{QPTypeRC, QPTypeUD, QPTypeGSI}

func transKey(cur, next QPState) string { return cur.String() + ">" + next.String() }

func eachBit(m QPAttrMask, f func(QPAttrMask)) {
	for m != 0 {
		b := m & -m
		f(b)
		m &^= b
	}
}

// maskCases lists, for one transition, the masks to try and whether
// ib_modify_qp_is_ok must accept them.
func maskCases(key string, col int) []struct {
	mask QPAttrMask
	ok   bool
} {
	var out []struct {
		mask QPAttrMask
		ok   bool
	}
	add := func(m QPAttrMask, ok bool) {
		out = append(out, struct {
			mask QPAttrMask
			ok   bool
		}{m | QPAttrState, ok})
	}
	e, valid := kernelTable[key]
	if !valid {
		add(0, false)
		add(mPKey|mPort|mAcc|mQKey, false)
		return out
	}
	req, opt := e[col][0], e[col][1]
	add(req, true)
	add(req|opt, true)
	eachBit(opt, func(b QPAttrMask) { add(req|b, true) })
	eachBit(req, func(b QPAttrMask) { add(req&^b, false) })
	// One attribute neither required nor optional.
	for b := QPAttrMask(1 << 1); b <= QPAttrDestQPN; b <<= 1 {
		if b&(req|opt) == 0 && b != QPAttrCap {
			add(req|b, false)
			break
		}
	}
	return out
}

// TestModifyQPIsOKTable checks ModifyQPIsOK against the hand-written
// kernel table for every (cur, next, mask) case of RC, UD and GSI.
func TestModifyQPIsOKTable(t *testing.T) {
	for col, ty := range smTypes {
		for _, cur := range allStates {
			for _, next := range allStates {
				key := transKey(cur, next)
				for _, c := range maskCases(key, col) {
					if got := ModifyQPIsOK(cur, next, ty, c.mask); got != c.ok {
						t.Errorf("type %d %s mask %#x: %v, want %v", ty, key, c.mask, got, c.ok)
					}
				}
			}
		}
	}
	// IB_QP_CUR_STATE is refused from RESET and INIT whatever the table.
	if ModifyQPIsOK(QPSInit, QPSInit, QPTypeUD, QPAttrState|mCur) {
		t.Error("CUR_STATE from INIT accepted")
	}
}

// wqeRecorder is what records the CQP WQEs a device consumed: the fake
// device, or recHW around the real one.
type wqeRecorder interface {
	count() int
	since(n int) []fakeWQE
}

// smEnv is one device with a PD and CQ for the state-machine cases.
type smEnv struct {
	t   *testing.T
	rec wqeRecorder
	d   *Device
	pd  *PD
	cq  *CQ
}

func newSMEnv(t *testing.T) *smEnv {
	f := newFakeHW(t, 2)
	return newSMEnvOn(t, openFake(t, f), f)
}

func newSMEnvOn(t *testing.T, d *Device, rec wqeRecorder) *smEnv {
	pd, err := d.AllocPD(false, 0)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := d.CreateCQ(CQAttr{CQE: 64})
	if err != nil {
		t.Fatal(err)
	}
	return &smEnv{t: t, rec: rec, d: d, pd: pd, cq: cq}
}

// fullAttr has a valid value for every attribute, targeting next.
func fullAttr(next QPState) *QPAttr {
	return &QPAttr{
		QPState: next, PathMTU: MTU1024, QKey: 0x11111111, RQPSN: 0x200, SQPSN: 0x100, DestQPNum: 0x34,
		QPAccessFlags: AccessRemoteWrite | AccessRemoteRead, PKeyIndex: 0, MaxRdAtomic: 16,
		MaxDestRdAtomic: 16, MinRNRTimer: 12, PortNum: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		AH: AHAttr{GRH: true, SGIDIndex: 1, HopLimit: 64, DGID: gidFromAddr(netip.MustParseAddr("192.0.2.2")),
			DMAC: [6]byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}},
	}
}

// pathTo are the modify steps that reach a state from RESET (SQE cannot
// be reached by a modify; it is set directly).
var pathTo = map[QPState][]QPState{
	QPSReset: nil,
	QPSInit:  {QPSInit},
	QPSRTR:   {QPSInit, QPSRTR},
	QPSRTS:   {QPSInit, QPSRTR, QPSRTS},
	QPSSQD:   {QPSInit, QPSRTR, QPSRTS, QPSSQD},
	QPSSQE:   {QPSInit, QPSRTR, QPSRTS},
	QPSErr:   {QPSInit, QPSErr},
}

func (e *smEnv) qpIn(ty QPType, col int, s QPState) *QP {
	e.t.Helper()
	q, _, err := e.d.CreateQP(e.pd, QPInitAttr{Type: ty, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}})
	if err != nil {
		e.t.Fatalf("CreateQP: %v", err)
	}
	cur := QPSReset
	for _, next := range pathTo[s] {
		req := kernelTable[transKey(cur, next)][col][0]
		if err := e.d.ModifyQP(q, fullAttr(next), req|QPAttrState); err != nil {
			e.t.Fatalf("driving %s→%s: %v", cur, next, err)
		}
		cur = next
	}
	if s == QPSSQE {
		q.mu.Lock()
		q.ibState = QPSSQE // reached only through a hardware error
		q.mu.Unlock()
	}
	if got := q.State(); got != s {
		e.t.Fatalf("QP in %s, want %s", got, s)
	}
	return q
}

// TestModifyQPStateMachine runs every case of the table through the
// driver: forbidden ones return -EINVAL with no CQP WQE; allowed ones
// issue exactly the MODIFY_QP (with NEXTIWSTATE and validity flags) and
// FLUSH_WQES irdma_modify_qp_roce issues, or nothing where it issues
// nothing.
func TestModifyQPStateMachine(t *testing.T) {
	runStateMachine(t, newSMEnv(t))
}

func runStateMachine(t *testing.T, e *smEnv) {
	for col, ty := range smTypes {
		for _, cur := range allStates {
			for _, next := range allStates {
				key := transKey(cur, next)
				for _, c := range maskCases(key, col) {
					name := fmt.Sprintf("type%d/%s/%#x", ty, key, c.mask)
					q := e.qpIn(ty, col, cur)
					q.mu.Lock()
					hw, flushed := q.hwState, q.flushIssued
					q.mu.Unlock()
					n := e.rec.count()
					err := e.d.ModifyQP(q, fullAttr(next), c.mask)
					got := e.rec.since(n)
					if !c.ok {
						if !errors.Is(err, syscall.EINVAL) || len(got) != 0 {
							t.Errorf("%s: err %v, %d WQEs; want EINVAL and none", name, err, len(got))
						}
					} else {
						checkAllowed(t, name, q, cur, next, hw, flushed, err, got)
					}
					if err := e.d.DestroyQP(q); err != nil {
						t.Fatalf("%s: DestroyQP: %v", name, err)
					}
				}
			}
		}
	}
}

func checkAllowed(t *testing.T, name string, q *QP, cur, next QPState, hw uint8, flushed bool, err error, got []fakeWQE) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	// What irdma_modify_qp_roce issues.
	wantNext, issue := uint8(0), true
	switch next {
	case QPSInit:
		issue, wantNext = hw == qpHWStateInvalid, qpHWStateIdle
	case QPSRTR:
		wantNext = qpHWStateRTR
	case QPSRTS:
		wantNext = qpHWStateRTS
	case QPSSQD:
		issue, wantNext = hw != qpHWStateClosing, qpHWStateClosing
	default:
		issue, wantNext = hw != qpHWStateError, qpHWStateError
	}
	wantFlush := issue && next > QPSRTS && !flushed
	var mods, flushes []fakeWQE
	for _, w := range got {
		switch w.Op {
		case cqpOpModifyQP:
			mods = append(mods, w)
		case cqpOpFlushWQEs:
			flushes = append(flushes, w)
		case cqpOpManageARP, cqpOpWorkSchedNode:
		default:
			t.Errorf("%s: unexpected op %#x", name, w.Op)
		}
	}
	if !issue {
		if len(mods)+len(flushes) != 0 {
			t.Errorf("%s: %d MODIFY, %d FLUSH; want none", name, len(mods), len(flushes))
		}
		wantState := next
		if hw == qpHWStateError {
			wantState = cur // irdma returns early and keeps ibqp_state
		}
		if s := q.State(); s != wantState {
			t.Errorf("%s: state %s, want %s", name, s, wantState)
		}
		return
	}
	if len(mods) != 1 {
		t.Fatalf("%s: %d MODIFY_QP", name, len(mods))
	}
	h := mods[0].Q[3]
	if s := uint8(h >> 60 & 7); s != wantNext {
		t.Errorf("%s: NEXTIWSTATE %d, want %d", name, s, wantNext)
	}
	if id := uint32(h & 0xffffff); id != q.id {
		t.Errorf("%s: qp id %d", name, id)
	}
	arp, cqn, ord := h>>59&1 == 1, h>>47&1 == 1, h>>42&1 == 1
	wantArpCQ := next == QPSRTR || next == QPSRTS
	if arp != wantArpCQ || cqn != wantArpCQ || ord != (next == QPSRTS) {
		t.Errorf("%s: ARPVALID %v CQNUMVALID %v ORDVALID %v", name, arp, cqn, ord)
	}
	if ty := uint8(h >> 48 & 7); ty != q.hwType {
		t.Errorf("%s: QPTYPE %d", name, ty)
	}
	if wantFlush != (len(flushes) == 1) || len(flushes) > 1 {
		t.Errorf("%s: %d FLUSH_WQES, want flush %v", name, len(flushes), wantFlush)
	}
	if len(flushes) == 1 && flushes[0].Q[3]>>61&3 != 3 {
		t.Errorf("%s: flush hdr %#x, want SQ and RQ", name, flushes[0].Q[3])
	}
	if s := q.State(); s != next {
		t.Errorf("%s: state %s, want %s", name, s, next)
	}
}

// TestModifyAfterDestroy: a modify that reaches a QP after DestroyQP —
// the provider's shutdown flush or an AE's move to error holding the QP
// while its program destroys it — is -EINVAL and issues nothing: the QP's
// host context is freed and its id may already be another program's QP.
// A second destroy is -EINVAL too. QPs that were in RTS, RTR and INIT at
// the destroy (DestroyQP itself moves only RTS to error).
func TestModifyAfterDestroy(t *testing.T) {
	e := newSMEnv(t)
	for _, s := range []QPState{QPSRTS, QPSRTR, QPSInit} {
		q := e.qpIn(QPTypeRC, 0, s)
		if err := e.d.DestroyQP(q); err != nil {
			t.Fatalf("%s: DestroyQP: %v", s, err)
		}
		n := e.rec.count()
		if err := e.d.ModifyQP(q, &QPAttr{QPState: QPSErr}, QPAttrState); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: modify of a destroyed QP: %v, want EINVAL", s, err)
		}
		if err := e.d.DestroyQP(q); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: second destroy: %v, want EINVAL", s, err)
		}
		if got := e.rec.since(n); len(got) != 0 {
			t.Errorf("%s: %d CQP WQEs after the destroy (opcodes %x)", s, len(got), opsOf(got))
		}
	}
}

package driver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// The atomics tests run kernel-mode RC QPs through the driver on two real
// devices (emu/device with emu/engine) joined by an in-process link: the
// requester on one, the responder on the other.

// atomNode is one device with its driver and engine, a PD, a CQ and a
// 4-page buffer.
type atomNode struct {
	t    *testing.T
	dev  *device.Device
	d    *Device
	pd   *PD
	cq   *CQ
	nd   *StaticNetdev
	sgid uint8
	buf  []uint64
	va   uint64
}

const atomVA = 0x7000_0000

func newAtomNode(t *testing.T, p profile.Profile, host byte, end *link.End) *atomNode {
	t.Helper()
	nd := &StaticNetdev{HWAddr: net.HardwareAddr{0x02, 0, 0, 0, 0, host}, MTUSize: 1500,
		IPs: []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, host})}}
	dev, err := device.New(device.Config{Profile: p})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(dev, Config{Profile: p, Netdev: nd, CQPTimeout: 5 * time.Second})
	if err != nil {
		_ = dev.Close()
		t.Fatal(err)
	}
	startEngine(t, dev, d, nd, end)
	n := &atomNode{t: t, dev: dev, d: d, pd: mustPD(t, d), nd: nd, va: atomVA, sgid: roceV2GID(t, d, nd.IPs[0])}
	if n.cq, err = d.CreateCQ(CQAttr{CQE: 256}); err != nil {
		t.Fatal(err)
	}
	n.buf = allocPages(t, dev.Mem(), 4, 0, false)
	return n
}

// atomPair returns two connected nodes of profile p.
func atomPair(t *testing.T, p profile.Profile) (a, b *atomNode) {
	t.Helper()
	pair, err := link.NewPair(link.PairConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	return newAtomNode(t, p, 1, pair.A()), newAtomNode(t, p, 2, pair.B())
}

// mr registers the node's buffer with access.
func (n *atomNode) mr(access uint32) *MR {
	n.t.Helper()
	m, err := n.d.RegUserMR(n.pd, nil, n.va, 4*4096, n.va, access, n.buf, MemReg{})
	if err != nil {
		n.t.Fatalf("RegUserMR: %v", err)
	}
	return m
}

// word reads the little-endian word at buffer offset off; setWord writes it.
func (n *atomNode) word(off uint64) uint64 {
	n.t.Helper()
	var b [8]byte
	if err := n.dev.Mem().Read(hostmem.IOVA(n.buf[off/4096]+off%4096), b[:]); err != nil {
		n.t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (n *atomNode) setWord(off, v uint64) {
	n.t.Helper()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	if err := n.dev.Mem().Write(hostmem.IOVA(n.buf[off/4096]+off%4096), b[:]); err != nil {
		n.t.Fatal(err)
	}
}

func (n *atomNode) qp() *QP {
	n.t.Helper()
	q, _, err := n.d.CreateQP(n.pd, QPInitAttr{Type: QPTypeRC, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		n.t.Fatalf("CreateQP: %v", err)
	}
	return q
}

// connectAtom moves q (on n) to RTS aimed at peer on pn, with access.
func connectAtom(t *testing.T, n *atomNode, q *QP, pn *atomNode, peer *QP, access uint32) {
	t.Helper()
	rcToRTS(t, n.d, q, rcPath{access: access, peer: peer.ID(), psn: 0x200, rdAtomic: 4, rnr: 7,
		sgid: n.sgid, dgid: pn.nd.IPs[0], dmac: [6]byte(pn.nd.MAC())})
}

// poll collects k completions of the node's CQ (or fails after 5 s).
func (n *atomNode) poll(k int) []WorkCompletion {
	n.t.Helper()
	return pollCQ(n.t, n.d, n.cq, k, 5*time.Second)
}

const (
	rcAll    = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead
	rcAtomic = AccessLocalWrite | AccessRemoteAtomic // what rdma-core's test_atomic registers
)

// TestAtomicsGen3 runs FETCH_ADD and CMP_SWAP between two GEN_3 devices
// through the driver: the original value lands in the local SGE and the
// completion carries IB_WC_FETCH_ADD / IB_WC_COMP_SWAP (verbs.h
// set_ib_wc_op_sq); without the right on the QP or on the MR, or at a
// misaligned address, the requester completes in error.
func TestAtomicsGen3(t *testing.T) {
	a, b := atomPair(t, profile.GEN3())
	if at, err := a.d.QueryDevice(); err != nil || at.AtomicCap != 1 {
		t.Fatalf("atomic_cap %d, %v; want IB_ATOMIC_HCA (1)", at.AtomicCap, err)
	}
	local := a.mr(AccessLocalWrite)
	tgt := b.mr(rcAtomic)
	noAtomic := b.mr(rcAll)
	post := func(q *QP, wr SendWR) {
		t.Helper()
		if k, err := a.d.PostSend(q, []SendWR{wr}); k != 1 || err != nil {
			t.Fatalf("PostSend: %d %v", k, err)
		}
	}
	fetchAdd := func(id, localOff uint64, rkey uint32, remoteOff, add uint64) SendWR {
		return SendWR{WrID: id, Opcode: uk.WRAtomicFetchAndAdd, Flags: uk.SendSignaled,
			SGList: []SGE{{Addr: a.va + localOff, Length: 8, LKey: local.LKey()}}, RemoteAddr: b.va + remoteOff,
			RKey: rkey, CompareAdd: add}
	}
	// pairQP connects a requester QP on a to a responder QP on b whose
	// access is access.
	pairQP := func(access uint32) (*QP, *QP) {
		qa, qb := a.qp(), b.qp()
		connectAtom(t, a, qa, b, qb, AccessLocalWrite)
		connectAtom(t, b, qb, a, qa, access)
		return qa, qb
	}

	t.Run("FETCH_ADD and CMP_SWAP", func(t *testing.T) {
		q, resp := pairQP(rcAtomic)
		b.setWord(8, 1000)
		post(q, fetchAdd(1, 0, tgt.RKey(), 8, 5))
		if wc := a.poll(1)[0]; wc.Status != uk.WCSuccess || wc.Opcode != uk.WCFetchAdd || wc.WrID != 1 {
			t.Fatalf("FETCH_ADD completion %+v", wc)
		}
		if got, rem := a.word(0), b.word(8); got != 1000 || rem != 1005 {
			t.Fatalf("FETCH_ADD: original %d, remote %d; want 1000, 1005", got, rem)
		}
		for i, c := range []struct{ cmp, swap, orig, after uint64 }{
			{1005, 77, 1005, 77}, // equal: swapped
			{1005, 99, 77, 77},   // not equal: unchanged
		} {
			post(q, SendWR{WrID: uint64(10 + i), Opcode: uk.WRAtomicCmpAndSwp, Flags: uk.SendSignaled,
				SGList: []SGE{{Addr: a.va + 16, Length: 8, LKey: local.LKey()}}, RemoteAddr: b.va + 8, RKey: tgt.RKey(),
				CompareAdd: c.cmp, Swap: c.swap})
			if wc := a.poll(1)[0]; wc.Status != uk.WCSuccess || wc.Opcode != uk.WCCompSwap {
				t.Fatalf("CMP_SWAP %d completion %+v", i, wc)
			}
			if got, rem := a.word(16), b.word(8); got != c.orig || rem != c.after {
				t.Fatalf("CMP_SWAP %d: original %d, remote %d; want %d, %d", i, got, rem, c.orig, c.after)
			}
		}
		if at, _ := b.d.QueryQP(resp); at.QPAccessFlags&AccessRemoteAtomic == 0 {
			t.Errorf("QUERY_QP access %#x lacks IB_ACCESS_REMOTE_ATOMIC", at.QPAccessFlags)
		}
	})

	t.Run("two QPs add to one word", func(t *testing.T) {
		// Two responder QPs run on the device's workers at once: each add
		// must see the other's (hostmem's 64-bit atomics on the mapped
		// memory), so the originals are 0..2n−1, each once.
		const n = 24
		q1, _ := pairQP(rcAtomic)
		q2, _ := pairQP(rcAtomic)
		b.setWord(64, 0)
		for i := range n {
			post(q1, fetchAdd(uint64(i), 4096+uint64(i)*8, tgt.RKey(), 64, 1))
			post(q2, fetchAdd(uint64(n+i), 8192+uint64(i)*8, tgt.RKey(), 64, 1))
			if i%8 == 7 {
				for _, wc := range a.poll(16) {
					if wc.Status != uk.WCSuccess {
						t.Fatalf("completion %+v", wc)
					}
				}
			}
		}
		if got := b.word(64); got != 2*n {
			t.Fatalf("word %d after %d adds", got, 2*n)
		}
		var orig []int
		for i := range n {
			orig = append(orig, int(a.word(4096+uint64(i)*8)), int(a.word(8192+uint64(i)*8)))
		}
		sort.Ints(orig)
		for i, v := range orig {
			if v != i {
				t.Fatalf("originals %v: not 0..%d each once", orig, 2*n-1)
			}
		}
	})

	for _, tc := range []struct {
		name      string
		qpAccess  uint32
		rkey      uint32
		remoteOff uint64
		status    uk.WCStatus
	}{
		// rxe_resp.c: check_op_valid (no IB_ACCESS_REMOTE_ATOMIC on the
		// QP) and RESPST_ERR_MISALIGNED_ATOMIC are invalid requests,
		// check_rkey's missing right a remote access error.
		{"QP without REMOTE_ATOMIC", rcAll, tgt.RKey(), 8, uk.WCRemInvReqErr},
		{"MR without REMOTE_ATOMIC", rcAtomic, noAtomic.RKey(), 8, uk.WCRemAccessErr},
		{"misaligned", rcAtomic, tgt.RKey(), 12, uk.WCRemInvReqErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := pairQP(tc.qpAccess)
			b.setWord(8, 42)
			post(q, fetchAdd(99, 0, tc.rkey, tc.remoteOff, 1))
			if wc := a.poll(1)[0]; wc.Status != tc.status || wc.WrID != 99 {
				t.Fatalf("completion %+v, want status %d", wc, tc.status)
			}
			if got := b.word(8); got != 42 {
				t.Fatalf("remote word %d after a refused atomic", got)
			}
		})
	}
}

// TestAtomicsGen2Refused: GEN_2 (E810, no IRDMA_FEATURE_ATOMIC_OPS)
// reports IB_ATOMIC_NONE, refuses an atomic work request with EINVAL
// before the ring (verbs.c:irdma_post_send has no atomic case without the
// feature), and neither its MR nor its QP context carries the right.
func TestAtomicsGen2Refused(t *testing.T) {
	a, b := atomPair(t, profile.GEN2())
	if at, err := a.d.QueryDevice(); err != nil || at.AtomicCap != 0 {
		t.Fatalf("atomic_cap %d, %v; want IB_ATOMIC_NONE", at.AtomicCap, err)
	}
	local := a.mr(AccessLocalWrite)
	tgt := b.mr(rcAtomic)
	qa, qb := a.qp(), b.qp()
	connectAtom(t, a, qa, b, qb, AccessLocalWrite|AccessRemoteAtomic)
	connectAtom(t, b, qb, a, qa, rcAtomic)
	if at, _ := a.d.QueryQP(qa); at.QPAccessFlags&AccessRemoteAtomic != 0 {
		t.Errorf("GEN_2 QUERY_QP reports IB_ACCESS_REMOTE_ATOMIC (%#x)", at.QPAccessFlags)
	}
	k, err := a.d.PostSend(qa, []SendWR{{WrID: 1, Opcode: uk.WRAtomicFetchAndAdd, Flags: uk.SendSignaled,
		SGList: []SGE{{Addr: a.va, Length: 8, LKey: local.LKey()}}, RemoteAddr: b.va, RKey: tgt.RKey(), CompareAdd: 1}})
	if k != 0 || err != syscall.EINVAL {
		t.Fatalf("PostSend FETCH_ADD on GEN_2: %d, %v; want 0, EINVAL", k, err)
	}
}

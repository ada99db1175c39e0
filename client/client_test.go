package client

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/attach/attachtest"
)

// The commands as libibverbs 44 and libirdma 44 build them for
// ibv_rc_pingpong (measured: docs/uverbs.md "What rdma-core 44 sends
// (measured)"): total write() lengths,
// in_words/out_words, the provider data, and the WQE bytes and doorbell the
// real provider wrote. A canned attach server answers with what the kernel
// answers and records every request.

const (
	cannedQPN   = 17
	cannedLKey  = 0x10012
	cannedDBKey = 0x7f0000
)

func u32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func u64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

func pipeFD(t testing.TB) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return r
}

func cannedServer(t *testing.T) *attachtest.Server {
	dir, err := os.MkdirTemp("", "ict")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	handles := uint32(0)
	return attachtest.Start(t, dir, "irdma0", attachtest.Config{OnCommand: func(s *attachtest.Session, cmd []byte) attach.CmdReply {
		outWords := int(binary.LittleEndian.Uint16(cmd[6:]))
		r := attach.CmdReply{Status: int32(len(cmd)), Resp: make([]byte, 4*outWords)}
		if outWords > 0 {
			r.RespAddr = u64(cmd, 8)
		}
		handles++
		resp := r.Resp
		switch u32(cmd, 0) {
		case cmdGetContext:
			binary.LittleEndian.PutUint32(resp[4:], 1) // num_comp_vectors
			o := 8
			binary.LittleEndian.PutUint64(resp[o+16:], FeatureRTSAE|FeatureCQResize)
			binary.LittleEndian.PutUint64(resp[o+24:], cannedDBKey)
			for i, v := range []uint32{13, 13, 101, 32768, 32768, 1, 1048575} {
				binary.LittleEndian.PutUint32(resp[o+32+4*i:], v)
			}
			binary.LittleEndian.PutUint16(resp[o+60:], 8) // max_hw_sq_chunk
			resp[o+62] = 2                                // hw_rev
			r.FDs = []attach.FD{{File: pipeFD(t), Offset: 0}}
		case cmdAllocPD, cmdDestroyQP:
			binary.LittleEndian.PutUint32(resp, handles)
		case cmdRegMR:
			binary.LittleEndian.PutUint32(resp, handles)
			binary.LittleEndian.PutUint32(resp[4:], cannedLKey)
			binary.LittleEndian.PutUint32(resp[8:], cannedLKey)
		case cmdCreateCompChannel:
			r.FDs = []attach.FD{{File: pipeFD(t), Offset: 0}}
		case cmdCreateCQ:
			binary.LittleEndian.PutUint32(resp, handles)
			binary.LittleEndian.PutUint32(resp[8:], 1) // cq_id
		case cmdCreateQP:
			binary.LittleEndian.PutUint32(resp, handles)
			binary.LittleEndian.PutUint32(resp[4:], cannedQPN)
			binary.LittleEndian.PutUint32(resp[32:], cannedQPN)
			binary.LittleEndian.PutUint32(resp[36:], u32(cmd, 40)) // actual_sq_size = asked
			binary.LittleEndian.PutUint32(resp[40:], u32(cmd, 44))
			binary.LittleEndian.PutUint32(resp[52:], 7)
		}
		return r
	}})
}

// TestCommandsAsLibibverbs opens the device and builds ibv_rc_pingpong's
// objects, checking every command against what the real libraries send.
func TestCommandsAsLibibverbs(t *testing.T) {
	srv := cannedServer(t)
	c, err := Open(srv.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ev := srv.Expect(t, attachtest.Open)
	if ev.HasMem || ev.Hello.Version != attach.Version {
		t.Errorf("HELLO %+v, /proc/self/mem %v: the client must hand over memory with MEM only", ev.Hello, ev.HasMem)
	}
	cmd := func(name string, size int, outWords int) []byte {
		t.Helper()
		e := srv.Expect(t, attachtest.Cmd)
		if len(e.Cmd) != size || int(binary.LittleEndian.Uint16(e.Cmd[4:]))*4 != size || int(binary.LittleEndian.Uint16(e.Cmd[6:])) != outWords {
			t.Fatalf("%s: %d bytes, in_words %d, out_words %d; want %d, %d, %d", name, len(e.Cmd),
				binary.LittleEndian.Uint16(e.Cmd[4:]), binary.LittleEndian.Uint16(e.Cmd[6:]), size, size/4, outWords)
		}
		return e.Cmd
	}
	// GET_CONTEXT(0) 24 B: the response pointer, then irdma_alloc_ucontext_req
	// with userspace_ver 5; the response is 8 + 64 bytes.
	gc := cmd("GET_CONTEXT", 24, 18)
	if u32(gc, 0) != cmdGetContext || gc[20] != 5 || u64(gc, 8) == 0 {
		t.Errorf("GET_CONTEXT % x", gc)
	}
	mm := srv.Expect(t, attachtest.Mmap)
	if mm.Mmap.Offset != cannedDBKey || mm.Mmap.Length != 4096 || mm.Mmap.Prot != 3 || mm.Mmap.Flags != 1 {
		t.Errorf("doorbell mmap %+v", mm.Mmap)
	}
	if pd := cmd("ALLOC_PD (provider's)", 16, 3); u32(pd, 0) != cmdAllocPD {
		t.Errorf("ALLOC_PD % x", pd)
	}

	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cmd("CREATE_COMP_CHANNEL", 16, 1)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cmd("ALLOC_PD", 16, 3)
	buf, err := c.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	if e := srv.Expect(t, attachtest.Mem); e.Mem.Addr != addrOf(buf) || e.Mem.Length < 4096 {
		t.Errorf("MEM %+v for the buffer at %#x", e.Mem, addrOf(buf))
	}
	mr, err := pd.RegMR(buf, AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	rm := cmd("REG_MR", 56, 3)
	if u64(rm, 16) != addrOf(buf) || u64(rm, 24) != 4096 || u64(rm, 32) != addrOf(buf) || u32(rm, 44) != 1 || u32(rm, 48) != memRegMem {
		t.Errorf("REG_MR % x", rm)
	}
	if mr.LKey != cannedLKey {
		t.Errorf("lkey %#x", mr.LKey)
	}

	// ibv_create_cq(rx_depth + 1 = 501): 1004 CQEs in 8 pages, the shadow
	// area registered apart (FEATURE_CQ_RESIZE), then CREATE_CQ.
	cq, err := c.CreateCQ(501, ch, 0)
	if err != nil {
		t.Fatal(err)
	}
	ring := cmd("REG_MR (CQ ring)", 56, 3)
	if u64(ring, 24) != 32768 || u32(ring, 48)&0xffff != memRegCQ || binary.LittleEndian.Uint16(ring[50:]) != 8 {
		t.Errorf("CQ ring REG_MR % x", ring)
	}
	sh := cmd("REG_MR (CQ shadow)", 56, 3)
	if u64(sh, 24) != 64 || binary.LittleEndian.Uint16(sh[48:]) != memRegCQ || binary.LittleEndian.Uint16(sh[50:]) != 1 {
		t.Errorf("CQ shadow REG_MR % x", sh)
	}
	cc := cmd("CREATE_CQ", 56, 4)
	if u32(cc, 24) != 1004 || int32(u32(cc, 32)) != ch.fd || u64(cc, 40) != u64(ring, 16) || u64(cc, 48) != u64(sh, 16) {
		t.Errorf("CREATE_CQ % x", cc)
	}

	// ibv_create_qp(max_send_wr 1, max_recv_wr 500, 1 SGE each): libirdma
	// asks for 256 / 512 (the ring sizes in WQEs); SQ and RQ 16 KiB each
	// plus the shadow area, registered with reg_type QP, 4 + 4 pages.
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC,
		Cap: QPCapabilities{MaxSendWR: 1, MaxRecvWR: 500, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	qm := cmd("REG_MR (QP rings)", 56, 3)
	if u64(qm, 24) != 32832 || binary.LittleEndian.Uint16(qm[48:]) != memRegQP ||
		binary.LittleEndian.Uint16(qm[52:]) != 4 || binary.LittleEndian.Uint16(qm[54:]) != 4 {
		t.Errorf("QP REG_MR % x", qm)
	}
	cqp := cmd("CREATE_QP", 80, 14)
	if u32(cqp, 40) != 256 || u32(cqp, 44) != 512 || u32(cqp, 48) != 1 || u32(cqp, 52) != 1 || cqp[61] != uint8(QPTypeRC) ||
		u64(cqp, 64) != u64(qm, 16) || u64(cqp, 72) == 0 {
		t.Errorf("CREATE_QP % x", cqp)
	}
	if got := qp.Cap(); got.MaxSendWR != 127 || got.MaxRecvWR != 511 {
		t.Errorf("reported caps %+v, want 127/511 as libirdma reports", got)
	}
	if _, err := qp.Query(AttrCap); err != nil {
		t.Fatal(err)
	}
	cmd("QUERY_QP", 24, 32)

	masks := []QPAttrMask{
		AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags,
		AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
		AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic,
	}
	want := []uint32{0x39, 0x129181, 0x12e01}
	states := []QPState{QPSInit, QPSRTR, QPSRTS}
	for i, m := range masks {
		a := &QPAttr{State: states[i], PortNum: 1, PathMTU: MTU1024, DestQPN: 0x11, RQPSN: 0x123, SQPSN: 0x456,
			MaxDestRdAtomic: 1, MinRNRTimer: 12, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1,
			AH: AHAttr{IsGlobal: true, HopLimit: 1, SGIDIndex: 1, PortNum: 1, DGID: GID{10: 0xff, 11: 0xff, 12: 127, 15: 3}}}
		if err := qp.Modify(a, m); err != nil {
			t.Fatal(err)
		}
		mq := cmd("MODIFY_QP", 120, 0)
		if u32(mq, 8+64) != qp.handle || u32(mq, 8+68) != want[i] || mq[8+96] != uint8(states[i]) {
			t.Errorf("MODIFY_QP %d: mask %#x state %d", i, u32(mq, 8+68), mq[8+96])
		}
		if i == 1 && (mq[8+30] != 1 || mq[8+25] != 1 || mq[8+24] != 1 || mq[8+15] != 3 || u32(mq, 8+84) != 0x11 || u32(mq, 8+76) != 0x123 || mq[8+98] != 3) {
			t.Errorf("MODIFY_QP RTR fields % x", mq[8:])
		}
	}

	// The first RQ WQE and the first SEND, as the real libirdma wrote them.
	if _, err := qp.PostRecv([]RecvWR{{WrID: 1, SGList: []SGE{mr.SGE(0, 4096)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := qp.PostSend([]SendWR{{WrID: 2, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{mr.SGE(0, 4096)}}}); err != nil {
		t.Fatal(err)
	}
	sess := srv.Sessions()[0]
	rq, _ := sess.ReadMem(u64(qm, 16)+16384, 32)
	if u64(rq, 0) != addrOf(buf) || u64(rq, 8) != 0x8000100000010012 || u64(rq, 16) != 0 || u64(rq, 24) != 0x8000000000000000 {
		t.Errorf("RQ WQE % x", rq)
	}
	sq, _ := sess.ReadMem(u64(qm, 16), 32)
	if u64(sq, 0) != addrOf(buf) || u64(sq, 8) != 0x8000100000010012 || u64(sq, 16) != 0 || u64(sq, 24) != 0xc000000300000000 {
		t.Errorf("SQ WQE % x", sq)
	}
	var db [4]byte
	if _, err := sess.Mapped(0).ReadAt(db[:], 0); err != nil || binary.LittleEndian.Uint32(db[:]) != cannedQPN {
		t.Errorf("doorbell %d (%v), want the QP id %d", binary.LittleEndian.Uint32(db[:]), err, cannedQPN)
	}
	// Arming: shadow qword4 with ARM_NEXT, ARM_NEXT_SE and sequence 1,
	// then the CQ id at doorbell page +64.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	arm, _ := sess.ReadMem(u64(sh, 16)+32, 8)
	if u64(arm, 0) != 1<<16|1<<15|1<<14 {
		t.Errorf("arm word %#x", u64(arm, 0))
	}
	if _, err := sess.Mapped(0).ReadAt(db[:], 64); err != nil || binary.LittleEndian.Uint32(db[:]) != 1 {
		t.Errorf("CQ doorbell %d (%v)", binary.LittleEndian.Uint32(db[:]), err)
	}

	// Teardown in ibv_rc_pingpong's order.
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	cmd("DESTROY_QP", 24, 1)
	cmd("DEREG_MR (QP rings)", 12, 0)
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	cmd("DESTROY_CQ", 24, 2)
	cmd("DEREG_MR (CQ ring)", 12, 0)
	cmd("DEREG_MR (CQ shadow)", 12, 0)
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	cmd("DEREG_MR", 12, 0)
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	cmd("DEALLOC_PD", 12, 0)
}

// TestErrnoFromDaemon: a negative status becomes a *CmdError with the errno.
func TestErrnoFromDaemon(t *testing.T) {
	dir := t.TempDir()
	var n atomic.Int32 // the server's goroutine counts
	srv := attachtest.Start(t, dir, "irdma0", attachtest.Config{OnCommand: func(s *attachtest.Session, cmd []byte) attach.CmdReply {
		if n.Add(1) == 1 {
			return attach.CmdReply{Status: -int32(syscall.EINVAL)}
		}
		return attach.CmdReply{Status: -int32(syscall.EOPNOTSUPP)}
	}})
	_, err := Open(srv.Path)
	ce, ok := err.(*CmdError)
	if !ok || ce.Errno != syscall.EOPNOTSUPP || ce.Cmd != "GET_CONTEXT" {
		t.Fatalf("Open: %v", err)
	}
	// Both GET_CONTEXT tries (userspace_ver 5, then 4) were made.
	if n.Load() != 2 {
		t.Errorf("%d GET_CONTEXT attempts, want 2", n.Load())
	}
}

// TestArena checks page allocation, reuse and coalescing.
func TestArena(t *testing.T) {
	srv := cannedServer(t)
	c, err := Open(srv.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var bufs [][]byte
	for _, n := range []int{1, 4096, 4097, 100000, 1 << 20, 3 << 20} {
		b, err := c.AllocBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n || addrOf(b)%pageSize != 0 {
			t.Fatalf("AllocBuffer(%d): len %d at %#x", n, len(b), addrOf(b))
		}
		for i := range b {
			b[i] = 0xaa
		}
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		if err := c.FreeBuffer(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.FreeBuffer(bufs[0]); err == nil {
		t.Error("double free accepted")
	}
	// Freed pages come back zeroed.
	b, err := c.AllocBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("byte %d of a reused buffer is %#x", i, x)
		}
	}
	if _, err := c.AllocBuffer(0); err == nil {
		t.Error("AllocBuffer(0) accepted")
	}
}

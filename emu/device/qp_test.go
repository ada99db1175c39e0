package device_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// qpCtx builds a GEN_2 RoCE RC host context by hand from
// docs/hw-controlpath.md "QP host context", one qword per line.
func qpCtx(sq, rq hostmem.IOVA, destQP, epsn uint32) []byte {
	ctx := make([]byte, 256)
	put := func(off int, v uint64) { binary.LittleEndian.PutUint64(ctx[off:], v) }
	put(0, 0<<8| // RQWQESIZE [9:8] = 0: one-quantum RQ WQEs
		1<<3) // IPV4
	put(8, uint64(sq))  // SQ address (PA)
	put(16, uint64(rq)) // RQ address (PA)
	put(24, 64|         // TTL [7:0]
		1<<8| // RQSIZE [11:8] = log2(8 quanta) − 2
		1<<12| // SQSIZE [15:12] = log2(8 quanta) − 2
		0xc000<<32| // SRCPORTNUM [47:32]
		4791<<48) // DESTPORTNUM [63:48]
	put(32, 0x0a00_0002)                  // DESTIPADDR3 [31:0] = 10.0.0.2 (host order)
	put(48, 1024<<16|7<<48)               // SNDMSS [29:16] = 1024, ARPIDX [63:48] = 7
	put(56, 0x1e<<20|0xffff<<32|9<<48)    // ACKCREDITS [24:20], PKEY [47:32], PDIDX [63:48] = 9
	put(64, uint64(destQP))               // DESTQP [23:0], QKEY [63:32] = 0
	put(80, 0x100|0xffff<<32)             // PSNNXT [23:0], LSN [55:32]
	put(88, uint64(epsn))                 // EPSN [23:0]
	put(96, 0x100|0x100<<32)              // PSNMAX [23:0], PSNUNA [55:32]
	put(112, 0x400<<32)                   // CWNDROCE [55:32]
	put(128, 2<<48|2<<54|5<<57)           // REXMIT_THRESH [53:48], RNRNAK_THRESH [56:54], RTOMIN [63:57]
	put(136, 3|4<<32)                     // TXCQNUM [24:0] = 3, RXCQNUM [56:32] = 4
	put(152, 0x0200_0000_0001<<16)        // MAC 02:00:00:00:00:01 in [63:16]
	put(160, 255|3<<16|1<<20|1<<21|1<<23) // ORDSIZE, IRDSIZE = 3 (128), WRRDRSPOK, RDOK, BINDEN
	put(168, 0xdead_beef_0000_0005)       // QP completion context
	put(176, 1<<16)                       // QSHANDLE [25:16] = 1
	put(184, 0x0a00_0001)                 // LOCAL_IPADDR3 = 10.0.0.1
	return ctx
}

// qpWQE builds CREATE/MODIFY_QP (opcode op) for QP id with the given
// NEXTIWSTATE and flag bits.
func qpWQE(op uint64, id uint32, ctx, shadow hostmem.IOVA, next uint64, flags uint64) [8]uint64 {
	return [8]uint64{
		2: uint64(ctx),    // qw2: host context PA
		5: uint64(shadow), // qw5: shadow area PA
		3: op<<32 | // OPCODE
			uint64(id) | // QPID [23:0]
			3<<48 | // QPTYPE [50:48] = 3 RoCE RC
			next<<60 | // NEXTIWSTATE [62:60]
			flags,
	}
}

const (
	fCQNumValid  = 1 << 47
	fMACValid    = 1 << 51
	fARPIdxValid = 1 << 59
	fORDValid    = 1 << 42
)

// TestQPLifecycle creates, modifies, uploads, suspends, flushes and
// destroys an RC QP, checking stored context bytes and completion codes.
func TestQPLifecycle(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	scq, c := createCQ(t, e, 3, 64, 0x4000_0000_0000_0003)
	e.MustOK(c, "CREATE_CQ 3")
	rcq, c := createCQ(t, e, 4, 64, 0x4000_0000_0000_0004)
	e.MustOK(c, "CREATE_CQ 4")

	sq := e.Scr(8*32, 256)
	rq := e.Scr(8*32, 256)
	shadow := e.Scr(64, 64)
	_ = e.Mem.Store64(shadow, 0xffff) // the device must overwrite it with its SQ tail
	ctxPA := e.Scr(256, 256)
	ctx := qpCtx(sq, rq, 0x11, 0x200)
	if err := e.Mem.Write(ctxPA, ctx); err != nil {
		t.Fatal(err)
	}

	// CREATE_QP: next state IDLE, MACVALID, CQNUMVALID (verbs.c:irdma_cqp_create_qp_cmd).
	e.MustOK(e.Exec(qpWQE(0x00, 5, ctxPA, shadow, 1, fCQNumValid|fMACValid)), "CREATE_QP")
	if got := read(t, e, hmcBacking(t, e, 0, 5), 256); !bytes.Equal(got, ctx) {
		t.Errorf("HMC QP object differs from the host context")
	}
	if v := load(t, e, shadow); v != 0 {
		t.Errorf("QP shadow qword0 = %#x, want HW SQ tail 0", v)
	}
	// Create over an existing id.
	wantStatus(t, "CREATE_QP twice", e.Exec(qpWQE(0x00, 5, ctxPA, shadow, 1, fCQNumValid)), 0xffff, cqp.MinorObjectExists)

	// MODIFY_QP → IDLE (INIT), → RTR with a new EPSN, → RTS.
	e.MustOK(e.Exec(qpWQE(0x01, 5, ctxPA, shadow, 1, 0)), "MODIFY_QP IDLE")
	ctx2 := qpCtx(sq, rq, 0x22, 0x333)
	_ = e.Mem.Write(ctxPA, ctx2)
	e.MustOK(e.Exec(qpWQE(0x01, 5, ctxPA, shadow, 4, fARPIdxValid|fCQNumValid)), "MODIFY_QP RTR")
	if got := read(t, e, hmcBacking(t, e, 0, 5), 256); !bytes.Equal(got, ctx2) {
		t.Errorf("MODIFY_QP did not re-store the context")
	}
	if a := e.Dev.QPs().Get(5).Attrs(); a.DestQP != 0x22 || a.EPSN != 0x333 || a.MTU != 1024 || a.ARPIdx != 7 || a.PD != 9 {
		t.Errorf("decoded attrs %+v", a)
	}
	e.MustOK(e.Exec(qpWQE(0x01, 5, ctxPA, shadow, 2, fARPIdxValid|fCQNumValid|fORDValid)), "MODIFY_QP RTS")
	// RTS → RTR is not a transition the device takes: Invalid State.
	wantStatus(t, "MODIFY_QP RTS→RTR", e.Exec(qpWQE(0x01, 5, ctxPA, shadow, 4, 0)), 0xffff, cqp.MinorInvalidState)

	// UPLOAD_CONTEXT returns the stored context.
	up := e.Scr(256, 256)
	e.MustOK(e.Exec([8]uint64{
		2: uint64(up),           // qw2: buffer PA
		3: 0x13<<32 | 5 | 3<<48, // OPCODE UPLOAD_CONTEXT, QPID 5, QPTYPE RC
	}), "UPLOAD_CONTEXT")
	if got := read(t, e, up, 256); !bytes.Equal(got, ctx2) {
		t.Errorf("UPLOAD_CONTEXT bytes differ")
	}

	// SUSPEND_QP → AE QP_SUSPEND_COMPLETE (0x0900) with the QP context and id.
	e.MustOK(e.Exec([8]uint64{3: 0x29<<32 | 5}), "SUSPEND_QP")
	q0, q1 := e.WaitAEQ()
	if q0 != 0xdead_beef_0000_0005 || q1&0x3ffff != 5 || q1>>34&0xfff != 0x900 {
		t.Errorf("suspend AEQE %#x %#x", q0, q1)
	}
	e.MustOK(e.Exec([8]uint64{2: 1, 3: 0x2a<<32 | 5}), "RESUME_QP")

	// CQ 3 is bound: DESTROY_CQ refuses.
	wantStatus(t, "DESTROY_CQ bound", e.Exec([8]uint64{3: 0x05<<32 | 3}), 0xffff, cqp.MinorObjectInUse)

	// MODIFY_QP → ERROR, post SQ WQEs (SEND 1 quantum, NOP, SEND with
	// ADDFRAGCNT 2 = 2 quanta) and two RQ WQEs, then FLUSH_WQES.
	e.MustOK(e.Exec(qpWQE(0x01, 5, ctxPA, shadow, 6, 0)), "MODIFY_QP ERROR")
	sqHdr := []struct {
		idx uint32
		hdr uint64
	}{
		{0, 1<<63 | 1<<62 | 0x03<<32},         // VALID | SIGCOMPL | SEND
		{1, 1<<63 | 0x0c<<32},                 // VALID | NOP
		{2, 1<<63 | 1<<62 | 2<<38 | 0x03<<32}, // VALID | SIGCOMPL | ADDFRAGCNT 2 | SEND
	}
	for _, w := range sqHdr {
		_ = e.Mem.Store64(sq+hostmem.IOVA(w.idx)*32+24, w.hdr)
	}
	for i := range 2 {
		_ = e.Mem.Store64(rq+hostmem.IOVA(i)*32+24, 1<<63) // RQ WQE: VALID
	}
	flush := [8]uint64{
		2: 0x0001_0002_0001_0005,                // SQ major 1 [63:48], SQ minor 2 [47:32], RQ major 1 [31:16], RQ minor 5 [15:0]
		3: 0x22<<32 | 5 | 1<<60 | 1<<61 | 1<<62, // FLUSH_WQES QP 5 | USERFLCODE | FLUSHSQ | FLUSHRQ
	}
	wantStatus(t, "FLUSH_WQES", e.Exec(flush), 0, cqp.MinorSQRQFlushed)
	// GEN_2: one flushed CQE per queue (software expands it).
	sc, ok := scq.poll(t, e)
	if !ok {
		t.Fatal("no flushed SQ CQE")
	}
	if sc[1] != 0xdead_beef_0000_0005 || sc[2]>>32&0xffffff != 5 ||
		sc[3]&0xffff != 2 || sc[3]>>16&0xffff != 1 || sc[3]>>55&1 != 1 || sc[3]>>62&1 != 1 ||
		sc[3]>>32&0x7fff != 0 || sc[3]>>56&0x3f != 0x03 {
		t.Errorf("SQ flush CQE %#x", sc)
	}
	if _, more := scq.poll(t, e); more {
		t.Errorf("more than one SQ flush CQE on GEN_2")
	}
	rc, ok := rcq.poll(t, e)
	if !ok || rc[3]&0xffff != 5 || rc[3]>>62&1 != 0 || rc[3]>>55&1 != 1 {
		t.Errorf("RQ flush CQE %#x ok %v", rc, ok)
	}
	if v := load(t, e, shadow); v != 4 {
		t.Errorf("HW SQ tail after flush %d, want 4 quanta", v)
	}
	// Nothing left: (0xFFFF, 0x8006).
	wantStatus(t, "FLUSH_WQES again", e.Exec(flush), 0xffff, cqp.MinorFlushNoWQE)

	// GEN_AE: post AE 0x0700 from source SQ (5) for QP 5.
	e.MustOK(e.Exec([8]uint64{
		1: 0x0700 | 5<<16,       // AE code [15:0], AE source [19:16]
		3: 0x22<<32 | 5 | 1<<59, // FLUSH_WQES opcode | QP 5 | GENERATE_AE
	}), "GEN_AE")
	q0, q1 = e.WaitAEQ()
	if q0 != 0xdead_beef_0000_0005 || q1&0x3ffff != 5 || q1>>34&0xfff != 0x700 || q1>>50&0xf != 5 {
		t.Errorf("GEN_AE AEQE %#x %#x", q0, q1)
	}

	e.MustOK(e.Exec([8]uint64{2: uint64(ctxPA), 5: uint64(shadow), 3: 0x02<<32 | 5 | 3<<48}), "DESTROY_QP")
	wantStatus(t, "DESTROY_QP twice", e.Exec([8]uint64{3: 0x02<<32 | 5 | 3<<48}), 0xffff, cqp.MinorObjectNotFound)
	e.MustOK(e.Exec([8]uint64{3: 0x05<<32 | 3}), "DESTROY_CQ 3")
	e.MustOK(e.Exec([8]uint64{3: 0x05<<32 | 4}), "DESTROY_CQ 4")
}

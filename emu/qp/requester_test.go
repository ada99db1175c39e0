package qp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// SQ opcodes and header flags (docs/hw-datapath.md "SQ opcodes", "SQ WQE
// header").
const (
	opWrite   = 0x00
	opRead    = 0x01
	opSend    = 0x03
	opFA      = 0x0f
	readFence = 1 << 60
)

const rto = time.Millisecond

// TestRequesterSegmentation: a SEND is cut at the path MTU into FIRST,
// MIDDLE, LAST with consecutive PSNs across 2^24, AckReq on the last; one
// ACK completes it.
func TestRequesterSegmentation(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	idx := r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 2500)
	r.run()
	r.expect("SEND",
		pkt{wire.RCSendFirst, startPSN, false, 0, 1024},
		pkt{wire.RCSendMiddle, startPSN.Add(1), false, 0, 1024},
		pkt{wire.RCSendLast, startPSN.Add(2), true, 0, 452})
	r.noCQE("before the ACK")
	r.inject(ack(startPSN.Add(2)), nil)
	r.run()
	r.wantCQE("SEND", func(c cq.CQE) bool { return !c.Error && c.SQ && c.Op == opSend && uint32(c.WQEIdx) == idx })
	if v, _ := r.env.Mem.Load64(r.q.ShIOVA); v != 1 {
		t.Fatalf("HW SQ tail %d, want 1", v)
	}
}

// TestRequesterAckReqEvery: AckReq also on every Nth packet (rxe
// RXE_MAX_PKT_PER_ACK).
func TestRequesterAckReqEvery(t *testing.T) {
	r := newRig(t, qp.Tunables{AckReqEvery: 2}, nil)
	r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 5*1024)
	r.run()
	r.expect("WRITE",
		pkt{wire.RCRDMAWriteFirst, startPSN, false, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(1), true, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(2), false, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(3), true, 0, 1024},
		pkt{wire.RCRDMAWriteLast, startPSN.Add(4), true, 0, 1024})
}

// TestRequesterWindow: no more than MaxUnackedPSNs PSNs outstanding; the
// packet that fills the window asks for an ACK, and an ACK opens the
// window.
func TestRequesterWindow(t *testing.T) {
	r := newRig(t, qp.Tunables{MaxUnackedPSNs: 3}, nil)
	r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 6*1024)
	r.run()
	f := r.expect("window", pkt{wire.RCRDMAWriteFirst, startPSN, false, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(1), false, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(2), true, 0, 1024})
	if reth := f[0].Packet.RETH; reth.VA() != 0x1000 || reth.RKey() != 0x99 || reth.DMALen() != 6*1024 {
		t.Fatalf("RETH %+v", reth.Fields())
	}
	r.inject(ack(startPSN.Add(1)), nil)
	r.run()
	r.expect("after ACK", pkt{wire.RCRDMAWriteMiddle, startPSN.Add(3), false, 0, 1024},
		pkt{wire.RCRDMAWriteMiddle, startPSN.Add(4), true, 0, 1024})
}

// TestRequesterSequenceNAK: a PSN sequence NAK acknowledges what is
// before it and goes back to it; a second NAK for the same gap while the
// retry runs is ignored (rxe comp.started_retry).
func TestRequesterSequenceNAK(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 3000)
	r.run()
	r.sent()
	r.inject(nak(startPSN.Add(1), wire.NAKSyndrome(wire.NAKPSNSequenceError)), nil)
	r.run()
	r.expect("go back N", pkt{wire.RCSendMiddle, startPSN.Add(1), false, 0, 1024},
		pkt{wire.RCSendLast, startPSN.Add(2), true, 0, 952})
	r.inject(nak(startPSN.Add(1), wire.NAKSyndrome(wire.NAKPSNSequenceError)), nil)
	r.run()
	r.expect("second NAK of the gap")
	c := r.counters()
	if c.Retransmits != 2 || c.NAKsRcvd[qp.NAKSeq] != 2 {
		t.Fatalf("retransmits %d, NAKs %v", c.Retransmits, c.NAKsRcvd)
	}
	r.inject(ack(startPSN.Add(2)), nil)
	r.run()
	r.wantCQE("SEND", func(c cq.CQE) bool { return !c.Error })
}

// TestRequesterTimeout: the retransmission timer goes back to the oldest
// unacknowledged PSN, skipping packets already acknowledged; after
// REXMIT_THRESH retries the WQE completes with RETRY_EXC_ERR and AE
// LLP_TOO_MANY_RETRIES.
func TestRequesterTimeout(t *testing.T) {
	r := newRig(t, qp.Tunables{RTO: rto}, nil) // RetryCnt 2
	idx := r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 4096)
	r.run()
	r.sent()
	r.inject(ack(startPSN.Add(1)), nil) // half acknowledged
	r.run()
	r.advance(rto)
	r.expect("first timeout", pkt{wire.RCSendMiddle, startPSN.Add(2), false, 0, 1024},
		pkt{wire.RCSendLast, startPSN.Add(3), true, 0, 1024})
	r.advance(rto)
	r.expect("second timeout", pkt{wire.RCSendMiddle, startPSN.Add(2), false, 0, 1024},
		pkt{wire.RCSendLast, startPSN.Add(3), true, 0, 1024})
	r.advance(rto)
	r.expect("third timeout: no more retries")
	r.wantCQE("retry exceeded", func(c cq.CQE) bool {
		return c.Error && c.Major == cq.MajorFlush && c.Minor == cq.FlushRetryExcErr && uint32(c.WQEIdx) == idx
	})
	q0, q1, ok := r.env.PollAEQ()
	if ae := cq.DecodeAEQE(q0, q1); !ok || ae.Code != qp.AELLPTooManyRetries || ae.ID != 3 || ae.Source != cq.AESourceSQ || ae.Ctx != 0xabc {
		t.Fatalf("AE %+v", ae)
	}
	if st := r.env.Dev.QPs().Get(3).State(); st != qp.StateError {
		t.Fatalf("state %v", st)
	}
	if c := r.counters(); c.Timeouts != 3 || c.Retransmits != 4 {
		t.Fatalf("timeouts %d retransmits %d", c.Timeouts, c.Retransmits)
	}
}

// TestRequesterRNR: an RNR NAK stops the requester for the NAK's timer,
// then it retries the NAKed PSN; with the RNR retry count spent the WQE
// fails with RNR_RETRY_EXC_ERR.
func TestRequesterRNR(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil) // RNRRetry 1
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 100)
	r.run()
	r.sent()
	r.inject(nak(startPSN, wire.RNRNAKSyndrome(6)), nil) // 80 µs
	r.run()
	r.advance(79 * time.Microsecond)
	r.expect("inside the RNR wait")
	r.advance(time.Microsecond)
	r.expect("after the RNR wait", pkt{wire.RCSendOnly, startPSN, true, 0, 100})
	r.inject(nak(startPSN, wire.RNRNAKSyndrome(6)), nil)
	r.run()
	r.wantCQE("RNR retry exceeded", func(c cq.CQE) bool { return c.Error && c.Minor == cq.FlushRNRRetryExErr })
}

// TestRequesterReadRetry: a READ whose responses stop half way is asked
// again for the rest, at the first missing PSN with the VA advanced.
func TestRequesterReadRetry(t *testing.T) {
	r := newRig(t, qp.Tunables{RTO: rto}, nil)
	r.postSQ(opRead, 0, 0x5000, 0x77, uint64(r.mr)+8192, 3000)
	r.run()
	f := r.expect("READ", pkt{wire.RCRDMAReadRequest, startPSN, true, 0, 0})
	if reth := f[0].Packet.RETH; reth.VA() != 0x5000 || reth.DMALen() != 3000 {
		t.Fatalf("RETH %+v", reth.Fields())
	}
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	resp := func(op wire.Opcode, psn wire.PSN, b []byte) {
		r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: op, PSN: psn}, AETH: wire.AETHFields{Syndrome: ackSyn}}, b)
	}
	resp(wire.RCRDMAReadResponseFirst, startPSN, data[:1024])
	r.run()
	r.advance(rto)
	f = r.expect("re-request", pkt{wire.RCRDMAReadRequest, startPSN.Add(1), true, 0, 0})
	if reth := f[0].Packet.RETH; reth.VA() != 0x5000+1024 || reth.DMALen() != 3000-1024 {
		t.Fatalf("re-request RETH %+v", reth.Fields())
	}
	// A late MIDDLE of the first request is as good as the re-request's
	// FIRST: same bytes, same PSN.
	resp(wire.RCRDMAReadResponseMiddle, startPSN.Add(1), data[1024:2048])
	resp(wire.RCRDMAReadResponseLast, startPSN.Add(2), data[2048:])
	r.run()
	r.wantCQE("READ", func(c cq.CQE) bool { return !c.Error && c.Op == opRead })
	if got := r.mem(8192, 3000); !bytes.Equal(got, data) {
		t.Fatal("READ data differs")
	}
}

// TestRequesterImpliedNAK: an ACK for a SEND after an unanswered READ
// means the READ's responses were lost: both go again.
func TestRequesterImpliedNAK(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postSQ(opRead, 0, 0x5000, 0x77, uint64(r.mr)+8192, 100)
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 10)
	r.run()
	r.expect("READ, SEND", pkt{wire.RCRDMAReadRequest, startPSN, true, 0, 0}, pkt{wire.RCSendOnly, startPSN.Add(1), true, 0, 10})
	r.inject(ack(startPSN.Add(1)), nil)
	r.run()
	r.expect("implied NAK", pkt{wire.RCRDMAReadRequest, startPSN, true, 0, 0}, pkt{wire.RCSendOnly, startPSN.Add(1), true, 0, 10})
	r.noCQE("nothing completes")
}

// TestRequesterRetryCutShort: an ACK that completes everything in the
// middle of a go-back-N leaves the next new message at the next PSN never
// used, not where the retransmission stopped.
func TestRequesterRetryCutShort(t *testing.T) {
	r := newRig(t, qp.Tunables{RTO: rto, TxBurst: 1}, nil)
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 2048)
	r.run()
	r.sent()
	r.clk.Advance(rto)
	if !r.tr.TryClaim() {
		t.Fatal("claim")
	}
	r.tr.Run(&r.ctx) // one packet of the retransmission
	r.tr.Unclaim()
	r.expect("retransmission", pkt{wire.RCSendFirst, startPSN, false, 0, 1024})
	r.inject(ack(startPSN.Add(1)), nil)
	r.run()
	r.wantCQE("SEND", func(c cq.CQE) bool { return !c.Error })
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 8)
	r.run()
	r.expect("next message", pkt{wire.RCSendOnly, startPSN.Add(2), true, 0, 8})
}

// TestRequesterFenceAndORD: a fenced WQE waits for every earlier one; ORD
// bounds the READs outstanding.
func TestRequesterFenceAndORD(t *testing.T) {
	r := newRig(t, qp.Tunables{}, func(s *devtest.QPSpec) { s.ORD = 1 })
	r.postSQ(opRead, 0, 0x5000, 0x77, uint64(r.mr)+8192, 8)
	r.postSQ(opRead, 0, 0x6000, 0x77, uint64(r.mr)+8200, 8)
	r.postSQ(opSend, readFence, 0, 0, uint64(r.mr), 8)
	r.run()
	r.expect("ORD 1", pkt{wire.RCRDMAReadRequest, startPSN, true, 0, 0})
	resp := func(psn wire.PSN) {
		r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAReadResponseOnly, PSN: psn},
			AETH: wire.AETHFields{Syndrome: ackSyn}}, make([]byte, 8))
	}
	resp(startPSN)
	r.run()
	r.expect("second READ", pkt{wire.RCRDMAReadRequest, startPSN.Add(1), true, 0, 0})
	resp(startPSN.Add(1))
	r.run()
	r.expect("fenced SEND", pkt{wire.RCSendOnly, startPSN.Add(2), true, 0, 8})
}

// TestRequesterAtomic: FETCH_ADD goes out with its AtomicETH; the ATOMIC
// ACK's original value lands at the local VA.
func TestRequesterAtomic(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postSQ(opFA, 1<<38, 0x8000, 0x55, uint64(r.mr)+16, 0, 9, 0, 0)
	r.run()
	f := r.expect("FETCH_ADD", pkt{wire.RCFetchAdd, startPSN, true, 0, 0})
	if a := f[0].Packet.AtomicETH; a.VA() != 0x8000 || a.RKey() != 0x55 || a.SwapAdd() != 9 {
		t.Fatalf("AtomicETH %+v", a.Fields())
	}
	r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCAtomicAcknowledge, PSN: startPSN},
		AETH: wire.AETHFields{Syndrome: ackSyn}, AtomicAckETH: wire.AtomicAckETHFields{OrigRemoteData: 0x1122334455}}, nil)
	r.run()
	r.wantCQE("FETCH_ADD", func(c cq.CQE) bool { return !c.Error && c.Op == opFA })
	if v := le.Uint64(r.mem(16, 8)); v != 0x1122334455 {
		t.Fatalf("original value %#x", v)
	}
}

// TestRequesterSuspend: after SUSPEND_QP nothing goes out, retransmissions
// included; RESUME_QP lets it go.
func TestRequesterSuspend(t *testing.T) {
	r := newRig(t, qp.Tunables{RTO: rto}, nil)
	r.env.MustOK(r.env.Exec([8]uint64{3: 0x29<<32 | 3}), "SUSPEND_QP")
	r.env.PollAEQ() // QP_SUSPEND_COMPLETE
	r.postSQ(opSend, 0, 0, 0, uint64(r.mr), 10)
	r.run()
	r.expect("suspended")
	r.env.MustOK(r.env.Exec([8]uint64{3: 0x2a<<32 | 3}), "RESUME_QP")
	r.run()
	r.expect("resumed", pkt{wire.RCSendOnly, startPSN, true, 0, 10})
	r.env.MustOK(r.env.Exec([8]uint64{3: 0x29<<32 | 3}), "SUSPEND_QP")
	r.advance(3 * rto)
	r.expect("no retransmission while suspended")
	if c := r.counters(); c.Timeouts != 0 {
		t.Fatalf("timeouts %d", c.Timeouts)
	}
}

// TestRequesterWindowLoss: a go-back-N that a loss starts halves the
// window (window.go) — after a PSN sequence NAK the requester sends half
// a window again, not a whole one — acknowledgements open it again, and
// an RNR NAK, which is the receiver's state and not a loss, cuts nothing.
func TestRequesterWindowLoss(t *testing.T) {
	r := newRig(t, qp.Tunables{MaxUnackedPSNs: 64, RTO: rto}, nil)
	// Two 64 KiB WRITEs: PSNs 0–63 and 64–127 at a 1 KiB MTU.
	r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 64*1024)
	r.postSQ(opWrite, 0, 0x1000, 0x99, uint64(r.mr), 64*1024)
	// psns checks the PSNs sent, and that the last one, which fills the
	// window, asks for an ACK: a window of middle packets (a loss can
	// leave one below AckReqEvery) would otherwise wait for the timer.
	psns := func(what string, first, n int) {
		t.Helper()
		got := r.sent()
		if len(got) != n {
			t.Fatalf("%s: %d packets, want %d", what, len(got), n)
		}
		for i, f := range got {
			if psn := f.Packet.BTH.PSN(); psn != startPSN.Add(uint32(first+i)) {
				t.Fatalf("%s: packet %d has PSN %#x, want %#x", what, i, psn, startPSN.Add(uint32(first+i)))
			}
		}
		if !got[n-1].Packet.BTH.AckReq() {
			t.Fatalf("%s: the packet that fills the window does not ask for an ACK", what)
		}
	}
	r.run()
	psns("the whole window", 0, 64)
	r.inject(nak(startPSN.Add(10), wire.NAKSyndrome(wire.NAKPSNSequenceError)), nil)
	r.run()
	psns("after a sequence NAK: half the window from the NAKed PSN", 10, 32)
	// 32 PSNs acknowledged in a window of 32: it opens by one.
	r.inject(ack(startPSN.Add(41)), nil)
	r.run()
	psns("after the ACK", 42, 33)
	r.inject(nak(startPSN.Add(42), wire.RNRNAKSyndrome(6)), nil) // 80 µs
	r.run()
	r.advance(80 * time.Microsecond)
	psns("after an RNR wait: the same window", 42, 33)
	if c := r.counters(); c.WindowCuts != 1 || c.NAKsRcvd[qp.NAKRNR] != 1 {
		t.Errorf("window cuts %d, RNR NAKs %d; want 1, 1", c.WindowCuts, c.NAKsRcvd[qp.NAKRNR])
	}
}

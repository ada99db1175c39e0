package qp_test

import (
	"bytes"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

func send(op wire.Opcode, psn wire.PSN, ackReq bool) wire.PacketFields {
	return wire.PacketFields{BTH: wire.BTHFields{Opcode: op, PSN: psn, AckReq: ackReq}}
}

// TestResponderSendAndCoalescing: SENDs placed into receive WQEs and
// completed; two AckReqs in one batch are answered by one ACK carrying the
// later PSN and the MSN.
func TestResponderSendAndCoalescing(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postRQ(uint64(r.mr), 4096)
	r.postRQ(uint64(r.mr)+4096, 4096)
	a, b := bytes.Repeat([]byte{1}, 1024), bytes.Repeat([]byte{2}, 500)
	r.inject(send(wire.RCSendFirst, peerPSN, false), a)
	r.inject(send(wire.RCSendLast, peerPSN.Add(1), true), b)
	r.inject(send(wire.RCSendOnly, peerPSN.Add(2), true), b)
	r.run()
	f := r.expect("one ACK", pkt{wire.RCAcknowledge, peerPSN.Add(2), false, ackSyn, 0})
	if msn := f[0].Packet.AETH.MSN(); msn != 2 {
		t.Fatalf("MSN %d", msn)
	}
	r.wantCQE("first SEND", func(c cq.CQE) bool { return !c.Error && !c.SQ && c.PayloadLen == 1524 && c.WQEIdx == 0 })
	r.wantCQE("second SEND", func(c cq.CQE) bool { return !c.Error && c.PayloadLen == 500 && c.WQEIdx == 2 })
	if got := r.mem(0, 1524); !bytes.Equal(got, append(a, b...)) {
		t.Fatal("payload")
	}
	if c := r.counters(); c.AcksSent != 1 || c.AcksCoalesced != 1 {
		t.Fatalf("acks %d coalesced %d", c.AcksSent, c.AcksCoalesced)
	}
}

// TestResponderOutOfSequence: a request ahead of ePSN draws one PSN
// sequence NAK carrying ePSN; the rest of the gap is dropped silently.
func TestResponderOutOfSequence(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postRQ(uint64(r.mr), 4096)
	r.inject(send(wire.RCSendOnly, peerPSN.Add(2), true), []byte{1})
	r.inject(send(wire.RCSendOnly, peerPSN.Add(3), true), []byte{1})
	r.run()
	r.expect("one NAK", pkt{wire.RCAcknowledge, peerPSN, false, wire.NAKSyndrome(wire.NAKPSNSequenceError), 0})
	r.inject(send(wire.RCSendOnly, peerPSN.Add(4), true), []byte{1})
	r.run()
	r.expect("gap already NAKed")
	r.inject(send(wire.RCSendOnly, peerPSN, true), []byte{7})
	r.run()
	r.expect("in order again", pkt{wire.RCAcknowledge, peerPSN, false, ackSyn, 0})
	if c := r.counters(); c.OutOfSequence != 3 || c.NAKsSent[qp.NAKSeq] != 1 {
		t.Fatalf("OOS %d NAKs %v", c.OutOfSequence, c.NAKsSent)
	}
}

// TestResponderDuplicates: a duplicate SEND is acknowledged with ePSN−1
// (C9-105) and not executed again; a duplicate READ for a sub-range is
// answered from memory from its PSN; a duplicate atomic is answered with
// the saved original value and not executed again.
func TestResponderDuplicates(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.postRQ(uint64(r.mr), 4096)
	r.inject(send(wire.RCSendOnly, peerPSN, true), []byte{1, 2, 3})
	r.run()
	r.sent()
	r.wantCQE("SEND", func(c cq.CQE) bool { return !c.Error })
	r.inject(send(wire.RCSendOnly, peerPSN, true), []byte{1, 2, 3})
	r.run()
	r.expect("re-ACK", pkt{wire.RCAcknowledge, peerPSN, false, ackSyn, 0})
	r.noCQE("duplicate SEND")

	// READ of 2500 bytes: three responses from its PSN.
	data := make([]byte, 2500)
	for i := range data {
		data[i] = byte(i*13 + 1)
	}
	r.setMem(16384, data)
	va := uint64(r.mr) + 16384
	read := func(psn wire.PSN, va uint64, n uint32) {
		r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAReadRequest, PSN: psn, AckReq: true},
			RETH: wire.RETHFields{VA: va, RKey: r.stag, DMALen: n}}, nil)
	}
	rp := peerPSN.Add(1)
	read(rp, va, 2500)
	r.run()
	f := r.expect("READ", pkt{wire.RCRDMAReadResponseFirst, rp, false, ackSyn, 1024},
		pkt{wire.RCRDMAReadResponseMiddle, rp.Add(1), false, 0, 1024},
		pkt{wire.RCRDMAReadResponseLast, rp.Add(2), false, ackSyn, 452})
	got := append(append(append([]byte{}, f[0].Packet.Payload...), f[1].Packet.Payload...), f[2].Packet.Payload...)
	if !bytes.Equal(got, data) {
		t.Fatal("READ payload")
	}
	read(rp.Add(1), va+1024, 1476)
	r.run()
	f = r.expect("READ replay from the middle", pkt{wire.RCRDMAReadResponseFirst, rp.Add(1), false, ackSyn, 1024},
		pkt{wire.RCRDMAReadResponseLast, rp.Add(2), false, ackSyn, 452})
	if !bytes.Equal(f[0].Packet.Payload, data[1024:2048]) {
		t.Fatal("replayed payload")
	}

	// FETCH_ADD, then its duplicate.
	var v [8]byte
	le.PutUint64(v[:], 40)
	r.setMem(32768, v[:])
	ap := rp.Add(3)
	fa := wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCFetchAdd, PSN: ap, AckReq: true},
		AtomicETH: wire.AtomicETHFields{VA: uint64(r.mr) + 32768, RKey: r.stag, SwapAdd: 2}}
	r.inject(fa, nil)
	r.run()
	f = r.expect("ATOMIC ACK", pkt{wire.RCAtomicAcknowledge, ap, false, ackSyn, 0})
	if f[0].Packet.AtomicAckETH.OrigRemoteData() != 40 {
		t.Fatalf("original %d", f[0].Packet.AtomicAckETH.OrigRemoteData())
	}
	r.inject(fa, nil)
	r.run()
	f = r.expect("atomic replay", pkt{wire.RCAtomicAcknowledge, ap, false, ackSyn, 0})
	if f[0].Packet.AtomicAckETH.OrigRemoteData() != 40 || le.Uint64(r.mem(32768, 8)) != 42 {
		t.Fatalf("replay original %d, memory %d", f[0].Packet.AtomicAckETH.OrigRemoteData(), le.Uint64(r.mem(32768, 8)))
	}
	// A FETCH_ADD at the PSN of the SEND: a duplicate atomic with no saved
	// result. It is counted among the duplicate atomics, dropped, and
	// neither answered nor executed.
	dup := fa
	dup.BTH.PSN = peerPSN
	r.inject(dup, nil)
	r.run()
	r.expect("duplicate atomic without a saved result")
	if got := le.Uint64(r.mem(32768, 8)); got != 42 {
		t.Fatalf("memory %d after an unmatched duplicate atomic", got)
	}
	c := r.counters()
	if c.ReadReplays != 1 || c.AtomicReplays != 1 || c.AtomicDuplicates != 2 || c.Duplicates != 4 ||
		c.Drops[qp.DropDuplicate] != 1 {
		t.Fatalf("READ replays %d, atomic replays %d, atomic duplicates %d, duplicates %d, duplicate drops %d (want 1, 1, 2, 4, 1)",
			c.ReadReplays, c.AtomicReplays, c.AtomicDuplicates, c.Duplicates, c.Drops[qp.DropDuplicate])
	}
}

// TestResponderRNR: no receive WQE: an RNR NAK with the configured timer
// code for the packet's PSN, nothing consumed; posted later, the retried
// SEND succeeds. A zero-valued Tunables (the daemon's) sends the
// documented default, 12 (640 µs), not IBTA's code 0 (655.36 ms), which
// only RNRTimerLongest asks for.
func TestResponderRNR(t *testing.T) {
	for _, tc := range []struct {
		name string
		tun  wire.RNRTimer
		want byte // the syndrome's timer code (IBTA Vol 1 Table 45)
	}{
		{"configured 14", 14, 14},
		{"zero value: default 12", 0, 12},
		{"RNRTimerLongest: code 0", qp.RNRTimerLongest, 0},
		{"out of range: default 12", 40, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, qp.Tunables{MinRNRTimer: tc.tun}, nil)
			r.inject(send(wire.RCSendFirst, peerPSN, false), make([]byte, 1024))
			r.inject(send(wire.RCSendLast, peerPSN.Add(1), true), []byte{1})
			r.run()
			// 0x20 | code: the RNR NAK type (bits 6:5 = 01) and the timer.
			r.expect("RNR NAK", pkt{wire.RCAcknowledge, peerPSN, false, wire.Syndrome(0x20 | tc.want), 0})
			r.noCQE("RNR")
			r.postRQ(uint64(r.mr), 4096)
			r.inject(send(wire.RCSendFirst, peerPSN, false), make([]byte, 1024))
			r.inject(send(wire.RCSendLast, peerPSN.Add(1), true), []byte{1})
			r.run()
			r.expect("ACK", pkt{wire.RCAcknowledge, peerPSN.Add(1), false, ackSyn, 0})
			r.wantCQE("SEND", func(c cq.CQE) bool { return !c.Error && c.PayloadLen == 1025 })
		})
	}
}

// TestResponderWrites: a zero-length WRITE needs no valid R_Key; a bad
// R_Key draws a remote access NAK, the AE of the key check and ERROR.
func TestResponderWrites(t *testing.T) {
	r := newRig(t, qp.Tunables{}, nil)
	r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, PSN: peerPSN, AckReq: true},
		RETH: wire.RETHFields{VA: 0xdead, RKey: 0, DMALen: 0}}, nil)
	r.run()
	r.expect("zero-length WRITE", pkt{wire.RCAcknowledge, peerPSN, false, ackSyn, 0})
	r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, PSN: peerPSN.Add(1), AckReq: true},
		RETH: wire.RETHFields{VA: uint64(r.mr), RKey: r.stag ^ 0xff, DMALen: 4}}, []byte{1, 2, 3, 4})
	r.run()
	r.expect("bad R_Key", pkt{wire.RCAcknowledge, peerPSN.Add(1), false, wire.NAKSyndrome(wire.NAKRemoteAccessError), 0})
	q0, q1, ok := r.env.PollAEQ()
	if ae := cq.DecodeAEQE(q0, q1); !ok || ae.Code != 0x0106 || ae.Source != cq.AESourceInRR {
		t.Fatalf("AE %+v", ae)
	}
	if st := r.env.Dev.QPs().Get(3).State(); st != qp.StateError {
		t.Fatalf("state %v", st)
	}
}

// TestResponderInvalidRequests: opcode sequence and length errors are
// invalid requests (NAK 0x61, ERROR).
func TestResponderInvalidRequests(t *testing.T) {
	cases := []struct {
		name string
		pf   wire.PacketFields
		pay  []byte
	}{
		{"MIDDLE without FIRST", send(wire.RCSendMiddle, peerPSN, true), make([]byte, 1024)},
		{"WRITE shorter than its RETH", wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAWriteOnly, PSN: peerPSN},
			RETH: wire.RETHFields{VA: 0, RKey: 0, DMALen: 100}}, make([]byte, 50)},
		{"FIRST shorter than the path MTU", send(wire.RCSendFirst, peerPSN, false), make([]byte, 512)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, qp.Tunables{}, nil)
			r.postRQ(uint64(r.mr), 4096)
			if c.pf.RETH.DMALen != 0 {
				c.pf.RETH.VA, c.pf.RETH.RKey = uint64(r.mr), r.stag
			}
			r.inject(c.pf, c.pay)
			r.run()
			r.expect(c.name, pkt{wire.RCAcknowledge, peerPSN, false, wire.NAKSyndrome(wire.NAKInvalidRequest), 0})
			if st := r.env.Dev.QPs().Get(3).State(); st != qp.StateError {
				t.Fatalf("state %v", st)
			}
		})
	}
}

// TestResponderReadReRequest: a re-request of the READ whose answer is
// going out restarts that answer at its PSN: the rest of the first answer
// (which the requester drops after its gap) is not sent first. A READ of
// eight packets, two responses sent; the requester asks again from the
// second: seven responses follow, from that PSN, once.
func TestResponderReadReRequest(t *testing.T) {
	r := newRig(t, qp.Tunables{RespBurst: 2}, nil)
	data := make([]byte, 8*1024)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	r.setMem(0, data)
	va := uint64(r.mr)
	read := func(psn wire.PSN, va uint64, n uint32) {
		r.inject(wire.PacketFields{BTH: wire.BTHFields{Opcode: wire.RCRDMAReadRequest, PSN: psn, AckReq: true},
			RETH: wire.RETHFields{VA: va, RKey: r.stag, DMALen: n}}, nil)
	}
	read(peerPSN, va, uint32(len(data)))
	if !r.tr.TryClaim() {
		t.Fatal("claim held")
	}
	r.tr.Run(&r.ctx) // one visit: RespBurst responses
	r.tr.Unclaim()
	r.expect("the first two responses", pkt{wire.RCRDMAReadResponseFirst, peerPSN, false, ackSyn, 1024},
		pkt{wire.RCRDMAReadResponseMiddle, peerPSN.Add(1), false, 0, 1024})
	read(peerPSN.Add(1), va+1024, uint32(len(data)-1024))
	r.run()
	want := []pkt{{wire.RCRDMAReadResponseFirst, peerPSN.Add(1), false, ackSyn, 1024}}
	for i := uint32(2); i < 7; i++ {
		want = append(want, pkt{wire.RCRDMAReadResponseMiddle, peerPSN.Add(i), false, 0, 1024})
	}
	want = append(want, pkt{wire.RCRDMAReadResponseLast, peerPSN.Add(7), false, ackSyn, 1024})
	f := r.expect("the answer restarted at the re-request's PSN", want...)
	var got []byte
	for _, x := range f {
		got = append(got, x.Packet.Payload...)
	}
	if !bytes.Equal(got, data[1024:]) {
		t.Fatal("restarted READ payload")
	}
	if c := r.counters(); c.ReadReplays != 1 || c.Duplicates != 1 {
		t.Fatalf("READ replays %d, duplicates %d (want 1, 1)", c.ReadReplays, c.Duplicates)
	}
}

package qp_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// TestResponderAtomicGen3 runs the responder's atomics on the GEN_3
// profile, where the QP's right is REMOTE_ATOMIC_EN (+160 b18) and the
// MR's is REG_MR's REMOTE_ATOMIC_EN (b61). Values are hand-computed:
// memory holds host-order (little-endian) words, the AtomicETH and the
// AtomicAckETH carry them big-endian (IBTA Vol 1 §9.3.4, §9.3.6; rxe_resp.c
// atomic_reply). A misaligned VA and a QP without the right are invalid
// requests, an MR without the right a remote access error (rxe_resp.c:
// RESPST_ERR_MISALIGNED_ATOMIC, check_op_valid, check_rkey). A duplicate
// is answered from the saved original, not executed again.
func TestResponderAtomicGen3(t *testing.T) {
	const (
		off  = 4096 // where the word lives in the rig's MR
		mem0 = uint64(0x0102030405060708)
	)
	atomicMR := uint8(devtest.RightsAll | devtest.RightsRemoteAtomic)
	tests := []struct {
		name     string
		op       wire.Opcode
		va       uint64 // offset in the MR
		cmp, arg uint64 // Compare; SwapAdd
		rights   uint8
		qpRight  bool
		dup      bool
		syn      wire.Syndrome // ATOMIC ACK (ackSyn) or the NAK
		orig     uint64        // OrigRemoteData in the ATOMIC ACK
		after    uint64        // the word afterwards
	}{
		{"FETCH_ADD", wire.RCFetchAdd, off, 0, 0x10, atomicMR, true, false, ackSyn, mem0, 0x0102030405060718},
		{"FETCH_ADD wraps", wire.RCFetchAdd, off, 0, 0xfefdfcfbfaf9f8f9, atomicMR, true, false, ackSyn, mem0, 0x0000000000000001},
		{"CMP_SWAP equal", wire.RCCompareSwap, off, mem0, 0x1122334455667788, atomicMR, true, false, ackSyn, mem0, 0x1122334455667788},
		{"CMP_SWAP not equal", wire.RCCompareSwap, off, mem0 + 1, 0x1122334455667788, atomicMR, true, false, ackSyn, mem0, mem0},
		{"duplicate FETCH_ADD replayed", wire.RCFetchAdd, off, 0, 0x10, atomicMR, true, true, ackSyn, mem0, 0x0102030405060718},
		{"misaligned", wire.RCFetchAdd, off + 4, 0, 1, atomicMR, true, false, wire.NAKSyndrome(wire.NAKInvalidRequest), 0, mem0},
		{"MR without REMOTE_ATOMIC_EN", wire.RCFetchAdd, off, 0, 1, devtest.RightsAll, true, false, wire.NAKSyndrome(wire.NAKRemoteAccessError), 0, mem0},
		{"QP without REMOTE_ATOMIC_EN", wire.RCCompareSwap, off, mem0, 1, atomicMR, false, false, wire.NAKSyndrome(wire.NAKInvalidRequest), 0, mem0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigOn(t, profile.GEN3(), tc.rights, qp.Tunables{}, func(s *devtest.QPSpec) {
				s.AtomicOK = tc.qpRight
				s.WrOK = true // remote write does not stand for the atomic right on GEN_3
			})
			var w [8]byte
			le.PutUint64(w[:], mem0)
			r.setMem(off, w[:])
			req := wire.PacketFields{BTH: wire.BTHFields{Opcode: tc.op, PSN: peerPSN, AckReq: true},
				AtomicETH: wire.AtomicETHFields{VA: uint64(r.mr) + tc.va, RKey: r.stag, SwapAdd: tc.arg, Compare: tc.cmp}}
			r.inject(req, nil)
			r.run()
			if tc.syn != ackSyn {
				r.expect("NAK", pkt{wire.RCAcknowledge, peerPSN, false, tc.syn, 0})
			} else {
				rounds := 1
				if tc.dup {
					rounds = 2
				}
				for i := range rounds {
					if i > 0 {
						r.inject(req, nil) // the ACK was lost: the same PSN again
						r.run()
					}
					f := r.expect("ATOMIC ACK", pkt{wire.RCAtomicAcknowledge, peerPSN, false, ackSyn, 0})
					if got := f[0].Packet.AtomicAckETH.OrigRemoteData(); got != tc.orig {
						t.Fatalf("round %d: original %#x, want %#x", i, got, tc.orig)
					}
				}
			}
			if got := le.Uint64(r.mem(off, 8)); got != tc.after {
				t.Fatalf("memory %#x, want %#x", got, tc.after)
			}
			if c := r.counters(); tc.dup && c.AtomicReplays != 1 {
				t.Fatalf("atomic replays %d, want 1", c.AtomicReplays)
			}
		})
	}
}

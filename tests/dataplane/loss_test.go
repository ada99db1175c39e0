package dataplane_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/link"
)

// TestLossyLink runs 10 000 mixed RC operations (SEND, SEND with
// immediate, WRITE, WRITE with immediate, READ, FETCH_ADD) over a link
// that loses 5%, reorders 5% and duplicates 1% of the frames in each
// direction (seeded, deterministic with the stepped engines and the
// manual clock). Every operation must complete exactly once, in order,
// with byte-exact data; every FETCH_ADD must execute exactly once (the
// duplicates are answered from the atomic cache).
func TestLossyLink(t *testing.T) {
	ops := 10000
	switch s := os.Getenv("DATAPLANE_LOSS_OPS"); {
	case s != "":
		ops, _ = strconv.Atoi(s)
	case testing.Short():
		ops = 1000
	}
	// The full 10 000 run under the race detector too (about 70–95 s on
	// two cores): CI's test command runs with -race, and this count is
	// the bar the data plane is held to.
	f := link.Faults{Loss: 0.05, Reorder: 0.05, ReorderDepth: 3, Duplicate: 0.01, Seed: 20260401}
	w := newWorld(t, opts{stepped: true, faults: f, atomics: true})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	const slot = 8 << 10
	const window = 64
	src := a.n.newMR(window*slot, devtest.RightsAll, a.pd)
	sink := a.n.newMR(window*slot, devtest.RightsAll, a.pd)
	res := a.n.newMR(window*8, devtest.RightsAll, a.pd)
	dst := b.n.newMR(window*slot, devtest.RightsAll, b.pd)
	rsrc := b.n.newMR(window*slot, devtest.RightsAll, b.pd) // what READs fetch
	ctr := b.n.newMR(8, devtest.RightsAll, b.pd)
	rng := rand.New(rand.NewPCG(1, 2))

	type op struct {
		kind  int // 0 SEND, 1 SEND imm, 2 WRITE, 3 WRITE imm, 4 READ, 5 FETCH_ADD
		size  int
		recv  bool
		faIdx uint64
	}
	pend := map[uint64]op{}
	var nextPost, nextSend, nextRecv, recvPosted, recvDone uint64
	var fas uint64
	le := binary.LittleEndian
	slotOf := func(i uint64) uint64 { return (i % window) * slot }

	// checkRecv checks one receive completion: the next operation that
	// consumes a receive WQE, in order, successful, with its length,
	// opcode, immediate and payload.
	checkRecv := func(wc uk.WorkCompletion) {
		t.Helper()
		for nextRecv < nextPost && !pend[nextRecv].recv {
			nextRecv++
		}
		if nextRecv >= nextPost {
			t.Fatalf("receive completion %+v, but every posted receive has completed (%d of %d)", wc, recvDone, recvPosted)
		}
		if wc.Status != uk.WCSuccess || wc.WrID != nextRecv {
			t.Fatalf("receive completion %+v (status %v), want wr %d", wc, wc.Status, nextRecv)
		}
		o := pend[wc.WrID]
		off := slotOf(wc.WrID)
		if wc.ByteLen != uint32(o.size) {
			t.Fatalf("op %d: receive length %d, want %d", wc.WrID, wc.ByteLen, o.size)
		}
		wantOp, wantImm := uk.WCRecv, o.kind == 1
		if o.kind == 3 {
			wantOp, wantImm = uk.WCRecvRDMAWithImm, true
		}
		if wc.Opcode != wantOp || (wc.Flags&uk.WCWithImm != 0) != wantImm || (wantImm && wc.ImmData != uint32(wc.WrID)) {
			t.Fatalf("op %d (kind %d): receive opcode %v, flags %#x, imm %#x", wc.WrID, o.kind, wc.Opcode, wc.Flags, wc.ImmData)
		}
		mustEqual(t, dst.bytes()[off:off+uint64(o.size)], src.bytes()[off:off+uint64(o.size)], "received payload")
		if nextSend > wc.WrID {
			delete(pend, wc.WrID) // both completions seen
		}
		nextRecv++
		recvDone++
	}
	sendOp := [...]uk.WCOpcode{uk.WCSend, uk.WCSend, uk.WCRDMAWrite, uk.WCRDMAWrite, uk.WCRDMARead, uk.WCFetchAdd}

	for nextSend < uint64(ops) {
		for nextPost < uint64(ops) && nextPost-nextSend < window {
			i := nextPost
			o := op{kind: rng.IntN(6), size: rng.IntN(slot + 1)}
			off := slotOf(i)
			pattern(src.bytes()[off:off+uint64(o.size)], int(i))
			sge := []uk.SGE{{Addr: src.va + off, Length: uint32(o.size), LKey: src.stag}}
			if o.size == 0 {
				sge = nil
			}
			wr := uk.SendWR{WrID: i, Flags: uk.SendSignaled, SGList: sge, RemoteAddr: dst.va + off, RKey: dst.stag,
				ImmData: uint32(i)}
			switch o.kind {
			case 0, 1:
				wr.Opcode = uk.WRSend
				if o.kind == 1 {
					wr.Opcode = uk.WRSendWithImm
				}
				o.recv = true
			case 2, 3:
				wr.Opcode = uk.WRRDMAWrite
				if o.kind == 3 {
					wr.Opcode = uk.WRRDMAWriteWithImm
					o.recv = true
				}
			case 4:
				wr.Opcode = uk.WRRDMARead
				pattern(rsrc.bytes()[off:off+uint64(o.size)], int(i)+7)
				wr.RemoteAddr, wr.RKey = rsrc.va+off, rsrc.stag
				wr.SGList = nil
				if o.size > 0 {
					wr.SGList = []uk.SGE{{Addr: sink.va + off, Length: uint32(o.size), LKey: sink.stag}}
				}
			case 5:
				wr.Opcode = uk.WRAtomicFetchAndAdd
				wr.SGList = []uk.SGE{{Addr: res.va + (i%window)*8, Length: 8, LKey: res.stag}}
				wr.RemoteAddr, wr.RKey, wr.CompareAdd = ctr.va, ctr.stag, 1
				o.faIdx = fas
				fas++
			}
			if o.recv {
				b.recv(uk.RecvWR{WrID: i, SGList: []uk.SGE{{Addr: dst.va + off, Length: slot, LKey: dst.stag}}})
				recvPosted++
			}
			pend[i] = o
			a.post(wr)
			nextPost++
		}
		// Completions, in order, each exactly once.
		w.until("completions", func() bool {
			return !a.us.Empty() || !b.ur.Empty()
		})
		for _, wc := range poll(t, b.ur, nil) {
			checkRecv(wc)
		}
		for _, wc := range poll(t, a.us, nil) {
			if wc.Status != uk.WCSuccess || wc.WrID != nextSend {
				t.Fatalf("send completion %+v, want wr %d (status %v)", wc, nextSend, wc.Status)
			}
			o := pend[wc.WrID]
			off := slotOf(wc.WrID)
			if wc.Opcode != sendOp[o.kind] {
				t.Fatalf("op %d (kind %d): send completion opcode %v, want %v", wc.WrID, o.kind, wc.Opcode, sendOp[o.kind])
			}
			switch o.kind {
			case 2, 3:
				mustEqual(t, dst.bytes()[off:off+uint64(o.size)], src.bytes()[off:off+uint64(o.size)], "written payload")
			case 4:
				mustEqual(t, sink.bytes()[off:off+uint64(o.size)], rsrc.bytes()[off:off+uint64(o.size)], "read payload")
			case 5:
				if got := le.Uint64(res.bytes()[(wc.WrID%window)*8:]); got != o.faIdx {
					t.Fatalf("op %d: FETCH_ADD returned %d, want %d", wc.WrID, got, o.faIdx)
				}
			}
			if !o.recv || nextRecv > wc.WrID {
				delete(pend, wc.WrID)
			}
			nextSend++
		}
	}
	// Every SEND completed at A was received at B, but B's completions
	// may trail A's: wait for the rest, checked like the others.
	w.until("last receive", func() bool {
		for _, wc := range poll(t, b.ur, nil) {
			checkRecv(wc)
		}
		return recvDone == recvPosted
	})
	// Nothing more: run the world until nothing at all is pending (no
	// frame in flight, no timer armed), then every CQ must be empty: no
	// operation completed twice, and nothing completed on the CQs that
	// have no work (A's receive CQ, B's send CQ).
	done := w.man.Now()
	w.quiesce("after the last completion")
	for _, c := range []struct {
		name string
		cq   *uk.CQ
	}{{"A send", a.us}, {"A receive", a.ur}, {"B send", b.us}, {"B receive", b.ur}} {
		if got := poll(t, c.cq, nil); len(got) != 0 {
			t.Fatalf("%s CQ: %d completions after the run: %+v", c.name, len(got), got)
		}
	}
	if nextSend != uint64(ops) || recvDone != recvPosted || len(pend) != 0 {
		t.Fatalf("%d of %d sends and %d of %d receives completed, %d operations pending", nextSend, ops, recvDone,
			recvPosted, len(pend))
	}
	if got := le.Uint64(ctr.bytes()); got != fas {
		t.Fatalf("FETCH_ADD counter %d, want %d: an atomic ran twice or not at all", got, fas)
	}
	sa, sb := a.n.eng.Stats(), b.n.eng.Stats()
	t.Logf("%d ops (%d FETCH_ADDs, %d receives) in %v simulated, idle at %v", ops, fas, recvPosted, done, w.man.Now())
	t.Logf("link A→B %+v", sa.Link.Faults)
	t.Logf("link B→A %+v", sb.Link.Faults)
	t.Logf("A: tx %d, retransmitted %d, timeouts %d, NAKs received %v, drops %v", sa.Port.TxPackets,
		sa.Port.Retransmits, sa.Port.Timeouts, sa.Port.NAKsRcvd, sa.Port.Drops)
	t.Logf("B: tx %d, NAKs sent %v, out-of-sequence %d, duplicates %d, READ replays %d, atomic duplicates %d, atomic replays %d, drops %v",
		sb.Port.TxPackets, sb.Port.NAKsSent, sb.Port.OutOfSequence, sb.Port.Duplicates, sb.Port.ReadReplays,
		sb.Port.AtomicDuplicates, sb.Port.AtomicReplays, sb.Port.Drops)
	if sa.Link.Faults.Lost == 0 || sa.Link.Faults.Reordered == 0 || sa.Link.Faults.Duplicated == 0 {
		t.Errorf("link A→B injected %+v: want losses, reorderings and duplicates", sa.Link.Faults)
	}
	if sa.Port.Retransmits == 0 || sb.Port.Duplicates == 0 {
		t.Errorf("the faults did not exercise recovery: %d retransmissions, %d duplicates", sa.Port.Retransmits,
			sb.Port.Duplicates)
	}
	// Duplicate atomic requests reach B from the link's duplication and
	// from go-back-N; each must be answered from the saved result, never
	// executed again (the counter above) and never left unanswered: B
	// keeps IRD (128) results and A has at most ORD (16) READs and atomics
	// outstanding, so the result of any atomic A may still resend is
	// there, and the response ring (IRD+16 entries) is never full here.
	if fas > 0 && sb.Port.AtomicDuplicates == 0 {
		t.Errorf("no duplicate atomic request reached B: the atomic cache was not exercised")
	}
	if sb.Port.AtomicReplays != sb.Port.AtomicDuplicates {
		t.Errorf("B answered %d of %d duplicate atomic requests from its cache", sb.Port.AtomicReplays,
			sb.Port.AtomicDuplicates)
	}
}

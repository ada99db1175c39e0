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
	var nextPost, nextSend, nextRecv, recvPosted uint64
	var fas uint64
	le := binary.LittleEndian
	slotOf := func(i uint64) uint64 { return (i % window) * slot }

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
			for nextRecv < nextPost && !pend[nextRecv].recv {
				nextRecv++
			}
			if wc.Status != uk.WCSuccess || wc.WrID != nextRecv {
				t.Fatalf("receive completion %+v, want wr %d", wc, nextRecv)
			}
			o := pend[wc.WrID]
			off := slotOf(wc.WrID)
			if wc.ByteLen != uint32(o.size) {
				t.Fatalf("op %d: receive length %d, want %d", wc.WrID, wc.ByteLen, o.size)
			}
			if o.kind == 1 || o.kind == 3 {
				if wc.ImmData != uint32(wc.WrID) {
					t.Fatalf("op %d: imm %#x", wc.WrID, wc.ImmData)
				}
			}
			mustEqual(t, dst.bytes()[off:off+uint64(o.size)], src.bytes()[off:off+uint64(o.size)], "received payload")
			nextRecv++
		}
		for _, wc := range poll(t, a.us, nil) {
			if wc.Status != uk.WCSuccess || wc.WrID != nextSend {
				t.Fatalf("send completion %+v, want wr %d (status %v)", wc, nextSend, wc.Status)
			}
			o := pend[wc.WrID]
			off := slotOf(wc.WrID)
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
			if !o.recv {
				delete(pend, wc.WrID)
			}
			nextSend++
		}
	}
	w.until("last receive", func() bool {
		for _, wc := range poll(t, b.ur, nil) {
			_ = wc
			nextRecv++
		}
		for nextRecv < nextPost && !pend[nextRecv].recv {
			nextRecv++
		}
		return nextRecv >= nextPost
	})
	if got := le.Uint64(ctr.bytes()); got != fas {
		t.Fatalf("FETCH_ADD counter %d, want %d: an atomic ran twice or not at all", got, fas)
	}
	sa, sb := a.n.eng.Stats(), b.n.eng.Stats()
	t.Logf("%d ops (%d FETCH_ADDs) in %v simulated", ops, fas, w.man.Now())
	t.Logf("link A→B %+v", sa.Link.Faults)
	t.Logf("link B→A %+v", sb.Link.Faults)
	t.Logf("A: tx %d, retransmitted %d, timeouts %d, NAKs received %v, drops %v", sa.Port.TxPackets,
		sa.Port.Retransmits, sa.Port.Timeouts, sa.Port.NAKsRcvd, sa.Port.Drops)
	t.Logf("B: tx %d, NAKs sent %v, out-of-sequence %d, duplicates %d, READ replays %d, atomic replays %d, drops %v",
		sb.Port.TxPackets, sb.Port.NAKsSent, sb.Port.OutOfSequence, sb.Port.Duplicates, sb.Port.ReadReplays,
		sb.Port.AtomicReplays, sb.Port.Drops)
	if sa.Port.Retransmits == 0 || sb.Port.Duplicates == 0 {
		t.Errorf("the faults did not exercise recovery")
	}
}

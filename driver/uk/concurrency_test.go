package uk

import (
	"encoding/binary"
	"sync"
	"testing"
)

// TestConcurrentDevice runs a minimal device in another goroutine against
// the uk producer and consumer, sharing only the ring and shadow memory,
// to check the publication protocol under the race detector: the device
// polls SQ headers atomically, reads the body after a valid header,
// publishes its SQ tail in the QP shadow area, and writes each CQE body
// before its atomic qword3; the driver posts, decides doorbells, polls
// and reports its CQ head in the CQ shadow area.
func TestConcurrentDevice(t *testing.T) {
	const total = 3000
	f := newCQFixture(t, 64)
	q := f.rc
	sqMem, qpShadow := q.sqBuf, q.shadow
	cqMem, cqShadow := f.ring, f.shadow

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the device
		defer wg.Done()
		var sqTail uint32
		sqPol := uint8(1)
		var cqHead uint32
		cqPol := uint64(1)
		for done := 0; done < total; {
			hdr := load64(sqMem, int(sqTail)*QuantumSize+24)
			if uint8(hdr>>63) != sqPol {
				continue
			}
			frag := binary.LittleEndian.Uint64(sqMem[int(sqTail)*QuantumSize+8:]) // body after a valid header
			idx := sqTail
			if sqTail = (sqTail + 1) % 512; sqTail == 0 {
				sqPol ^= 1
			}
			store64(qpShadow, 0, uint64(sqTail))
			// Do not overrun the driver: keep one slot free behind its head.
			for (cqHead+1)%64 == uint32(load64(cqShadow, 0)) {
			}
			off := int(cqHead) * CQESize
			put64(cqMem, off, frag>>32&0x7fffffff)
			put64(cqMem, off+8, ctxRC)
			put64(cqMem, off+16, 0x11<<32)
			store64(cqMem, off+24, cqPol<<63|cSQ|cOp(OpSend)|cWQEIdx(idx))
			if cqHead = (cqHead + 1) % 64; cqHead == 0 {
				cqPol ^= 1
			}
			done++
		}
	}()

	posted, polled := 0, 0
	var info CQPollInfo
	for polled < total {
		for posted < total && q.SQFreeQuanta() > 0 {
			wr := SendWR{WrID: uint64(posted), Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: 1, Length: uint32(posted % 1000), LKey: 2}}}
			if _, err := q.PostSend([]SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		_ = q.SQDoorbell()
		for f.cq.PollCmpl(&info) == nil {
			if info.WrID != uint64(polled) || info.BytesXfered != uint32(polled%1000) {
				t.Fatalf("completion %d: wr_id %d bytes %d", polled, info.WrID, info.BytesXfered)
			}
			polled++
		}
	}
	wg.Wait()
}

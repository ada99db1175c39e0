package cq_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// TestCQEEncode pins the CQE layout to hand-written qwords
// (docs/hw-datapath.md "CQE layout", "CQE extension").
func TestCQEEncode(t *testing.T) {
	e := cq.CQE{
		PayloadLen: 0x100, PSN: 0xabcdef, QPCtx: 0x1122_3344_5566_7788, Qword2Low: 0x99,
		Minor: 0x2, Major: 0x1, WQEIdx: 0x7ff, Error: true, Op: 0x03, SQ: true, SolEvent: true,
		Ext: true, Imm: 0xdead_beef, ImmValid: true, SMAC: [6]byte{2, 0, 0, 0, 0, 9}, SMACValid: true,
		VLAN: 0x2005, VLANValid: true,
	}
	e.SetQPID(0x12345)
	base, ext := e.Encode()
	want := [4]uint64{
		0x00ab_cdef_0000_0100, // PSN [63:32] | PAYLDLEN
		0x1122_3344_5566_7788, // QP context
		0x0001_2345_0000_0099, // QPID [55:32] | INVSTAG/UDSRCQPN
		0 | 1<<62 | 0x03<<56 | 1<<55 | 1<<54 | 1<<50 | 0x7ff<<32 | 1<<16 | 2, // SQ | OP | ERROR | SOEVENT | EXTCQE | WQEIDX | MAJ | MIN
	}
	if base != want {
		t.Errorf("base %#x, want %#x", base, want)
	}
	wantExt := [4]uint64{0xdead_beef, 0, 0x2005_0200_0000_0009, 1<<62 | 1<<61 | 1<<60}
	if ext != wantExt {
		t.Errorf("ext %#x, want %#x", ext, wantExt)
	}
	if d := cmp.Diff(e, cq.DecodeCQE(base, ext)); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

// TestAEQEEncode pins the GEN_2 AEQE layout (docs/hw-controlpath.md "AEQE").
func TestAEQEEncode(t *testing.T) {
	a := cq.AEQE{Ctx: 7, ID: 0x4_0001, WQEIdx: 3, Code: 0x203, Source: 2, State: 6}
	q0, q1 := a.Encode()
	want := uint64(0x0_0001) | 1<<46 | 3<<18 | 0x203<<34 | 2<<50 | 6<<54
	if q0 != 7 || q1 != want {
		t.Errorf("AEQE %#x %#x, want %#x", q0, q1, want)
	}
	if cq.DecodeAEQE(q0, q1) != a {
		t.Error("AEQE round trip")
	}
}

type nopNotify struct{}

func (nopNotify) CEQEvent(uint32) {}
func (nopNotify) AEQEvent()       {}

// TestConcurrentProducers posts from several goroutines into one CQ (and
// one extended CQE per producer round): every CQE lands once, valid bits
// at the right polarity, no slot overwritten.
func TestConcurrentProducers(t *testing.T) {
	mem := hostmem.New()
	defer mem.Close()
	const size = 256
	ring, _ := mem.Alloc(size*32, 256, "ring")
	sh, _ := mem.Alloc(64, 0, "shadow")
	ev := cq.NewEvents(mem, nil, nopNotify{}, 4)
	tab := cq.NewTable(mem, ev, 8)
	c, err := tab.Create(cq.Config{ID: 1, Ring: cq.RingMem{Base: ring.IOVA(), Entry: 32, Size: size},
		Shadow: sh.IOVA(), CheckOverflow: true})
	if err != nil {
		t.Fatal(err)
	}
	const producers, each = 4, 30 // 4·30 base + 4·30 ext = 240 slots < 255
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := cq.CQE{QPCtx: uint64(p)<<32 | uint64(i), Ext: true, Imm: uint32(i), ImmValid: true}
				if err := c.Post(&e); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for slot := 0; slot < 2*producers*each; slot += 2 {
		q3, _ := mem.Load64(ring.IOVA() + hostmem.IOVA(slot*32+24))
		x3, _ := mem.Load64(ring.IOVA() + hostmem.IOVA((slot+1)*32+24))
		if q3>>63 != 1 || x3>>63 != 1 || q3>>50&1 != 1 {
			t.Fatalf("slot %d: qword3 %#x ext %#x", slot, q3, x3)
		}
		ctx, _ := mem.Load64(ring.IOVA() + hostmem.IOVA(slot*32+8))
		if seen[ctx] {
			t.Fatalf("CQE %#x twice", ctx)
		}
		seen[ctx] = true
	}
	if len(seen) != producers*each {
		t.Fatalf("%d CQEs", len(seen))
	}
	// Fill to 254 of the 255 usable slots (CHKOVERFLOW, head still 0); an
	// extended CQE (2 slots) then overflows.
	for i := 0; i < 14; i++ {
		e := cq.CQE{}
		if err := c.Post(&e); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	e := cq.CQE{Ext: true}
	if err := c.Post(&e); err != cq.ErrOverflow {
		t.Fatalf("want overflow, got %v", err)
	}
	if ev.Stats().AEsDropped != 1 { // no AEQ: the AE is counted as dropped
		t.Errorf("AE drops %d", ev.Stats().AEsDropped)
	}
}

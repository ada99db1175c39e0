package qp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// Header bits as defs.h IRDMAQPSQ_* defines them (docs/hw-datapath.md "SQ WQE
// header"), written out here so the tests do not lean on the decoder's own
// constants.
const (
	bValid     = uint64(1) << 63
	bSig       = uint64(1) << 62
	bLocFence  = uint64(1) << 61
	bRdFence   = uint64(1) << 60
	bLSMM      = uint64(1) << 58
	bInline    = uint64(1) << 57
	bPush      = uint64(1) << 56
	bImm       = uint64(1) << 47
	vaBased    = uint64(1) << 53
	mwType1    = uint64(1) << 54
	remAtomics = uint64(1) << 55
)

func hdr(op qp.Opcode, afc int, bits uint64) uint64 {
	return bits | uint64(op)<<32 | uint64(afc)<<38
}

func inlineLen(n int) uint64 { return uint64(n) << 48 }

// wqe lays qwords out little-endian into quanta*32 bytes pre-filled with
// fill, so bytes the test leaves alone read as garbage.
func wqe(quanta int, fill byte, qwords map[int]uint64) []byte {
	b := bytes.Repeat([]byte{fill}, quanta*qp.QuantumSize)
	for i, v := range qwords {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// slot2 returns the two qwords of a GEN_2 fragment slot.
func slot2(addr uint64, length, stag uint32, valid bool) (uint64, uint64) {
	q := uint64(length)<<32 | uint64(stag)
	if valid {
		q |= bValid
	}
	return addr, q
}

func withSlots(m map[int]uint64, first int, frags ...[2]uint64) map[int]uint64 {
	for i, f := range frags {
		k := first + i
		off := 0
		if k > 0 {
			off = 32 + 16*(k-1)
		}
		m[off/8], m[off/8+1] = f[0], f[1]
	}
	return m
}

func fr(addr uint64, length, stag uint32, valid bool) [2]uint64 {
	a, b := slot2(addr, length, stag, valid)
	return [2]uint64{a, b}
}

var pad1 = fr(0, 0, 0, true)

func TestDecodeSQViolations(t *testing.T) {
	sge := fr(0x1000, 64, 0x100, true)
	tests := []struct {
		name   string
		b      []byte
		p      qp.DecodeParams
		want   []qp.ViolationCode
		quanta int
	}{
		{
			name:   "one SGE SEND is clean",
			b:      wqe(1, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 0, bValid|bSig)}, 0, sge)),
			quanta: 1,
		},
		{
			name:   "valid bit against the wrong polarity, tool mode",
			b:      wqe(1, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 0, 0)}, 0, fr(0x1000, 64, 0x100, false))),
			p:      qp.DecodeParams{Polarity: 1, IgnoreValid: true},
			want:   []qp.ViolationCode{qp.ViolHeaderNotValid},
			quanta: 1,
		},
		{
			name:   "reserved opcode",
			b:      wqe(1, 0, map[int]uint64{3: hdr(0x02, 0, bValid)}),
			want:   []qp.ViolationCode{qp.ViolUnknownOpcode},
			quanta: 1,
		},
		{
			name:   "software-only REC opcode",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpRec, 0, bValid)}),
			want:   []qp.ViolationCode{qp.ViolUnknownOpcode},
			quanta: 1,
		},
		{
			name:   "iWARP GEN_RTS_AE",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpGenRTSAE, 0, bValid)}),
			want:   []qp.ViolationCode{qp.ViolIWARPOnly},
			quanta: 1,
		},
		{
			name:   "iWARP LSMM stream mode on a SEND",
			b:      wqe(1, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 0, bValid|bLSMM)}, 0, sge)),
			want:   []qp.ViolationCode{qp.ViolIWARPOnly},
			quanta: 1,
		},
		{
			name: "14 SGEs plus pad (ADDFRAGCNT 14 without imm)",
			b: wqe(8, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 14, bValid)}, 0,
				sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, pad1)),
			want:   []qp.ViolationCode{qp.ViolTooManyFrags},
			quanta: 8,
		},
		{
			name:   "13 SGEs with imm and pad is the GEN_2 maximum",
			b:      wqe(8, 0, withSlots(map[int]uint64{0: 7, 3: hdr(qp.OpSend, 14, bValid|bImm)}, 1, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, pad1)),
			quanta: 8,
		},
		{
			name:   "14 READ sink SGEs",
			b:      wqe(8, 0, withSlots(map[int]uint64{3: hdr(qp.OpRDMARead, 14, bValid)}, 0, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, pad1)),
			want:   []qp.ViolationCode{qp.ViolTooManyFrags},
			quanta: 8,
		},
		{
			name:   "odd ADDFRAGCNT breaks the pad rule",
			b:      wqe(2, 0, withSlots(map[int]uint64{3: hdr(qp.OpRDMAWrite, 3, bValid)}, 0, sge, sge, sge)),
			want:   []qp.ViolationCode{qp.ViolPadRule},
			quanta: 2,
		},
		{
			name:   "fragment valid bit off in slot 1",
			b:      wqe(2, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 2, bValid)}, 0, sge, fr(0x2000, 1, 2, false), pad1)),
			want:   []qp.ViolationCode{qp.ViolFragValid},
			quanta: 2,
		},
		{
			name:   "pad slot valid bit off",
			b:      wqe(2, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 2, bValid)}, 0, sge, sge, fr(0, 0, 0, false))),
			want:   []qp.ViolationCode{qp.ViolFragValid},
			quanta: 2,
		},
		{
			name:   "inline 102 bytes",
			b:      wqe(5, 0x80, map[int]uint64{3: hdr(qp.OpSend, 0, bValid|bInline|inlineLen(102))}),
			want:   []qp.ViolationCode{qp.ViolInlineTooLong},
			quanta: 5,
		},
		{
			name:   "inline valid byte of quantum 1 not written",
			b:      wqe(2, 0, map[int]uint64{3: hdr(qp.OpSend, 0, bValid|bInline|inlineLen(9))}),
			want:   []qp.ViolationCode{qp.ViolInlineValid},
			quanta: 2,
		},
		{
			name:   "inline flag on READ",
			b:      wqe(1, 0, withSlots(map[int]uint64{3: hdr(qp.OpRDMARead, 0, bValid|bInline)}, 0, sge)),
			want:   []qp.ViolationCode{qp.ViolInlineNotAllowed},
			quanta: 1,
		},
		{
			name:   "imm flag on READ",
			b:      wqe(1, 0, withSlots(map[int]uint64{3: hdr(qp.OpRDMARead, 0, bValid|bImm)}, 0, sge)),
			want:   []qp.ViolationCode{qp.ViolImmNotAllowed},
			quanta: 1,
		},
		{
			name: "imm flag on SEND_INV",
			// The opcode cannot carry an immediate, so slot 0 is a fragment.
			b:      wqe(2, 0, withSlots(map[int]uint64{3: hdr(qp.OpSendInv, 2, bValid|bImm)}, 0, sge, sge, pad1)),
			want:   []qp.ViolationCode{qp.ViolImmNotAllowed},
			quanta: 2,
		},
		{
			name:   "bit 47 on FAST_REG is HPAGESIZE, not imm",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpFastRegister, 0, bValid|uint64(qp.PageSize1G)<<46)}),
			quanta: 1,
		},
		{
			name:   "FAST_REG reserved page size",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpFastRegister, 0, bValid|3<<46)}),
			want:   []qp.ViolationCode{qp.ViolReservedField},
			quanta: 1,
		},
		{
			name:   "two quanta at index 7 cross the chunk",
			b:      wqe(2, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 2, bValid)}, 0, sge, sge, pad1)),
			p:      qp.DecodeParams{Index: 7},
			want:   []qp.ViolationCode{qp.ViolCrossesChunk},
			quanta: 2,
		},
		{
			name:   "eight quanta at index 8 fit",
			b:      wqe(8, 0, withSlots(map[int]uint64{0: 7, 3: hdr(qp.OpSend, 14, bValid|bImm)}, 1, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, pad1)),
			p:      qp.DecodeParams{Index: 8},
			quanta: 8,
		},
		{
			name:   "NOP with ADDFRAGCNT",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpNOP, 2, bValid)}),
			want:   []qp.ViolationCode{qp.ViolAddFragCnt},
			quanta: 1,
		},
		{
			name:   "inline with ADDFRAGCNT",
			b:      wqe(1, 0, map[int]uint64{3: hdr(qp.OpRDMAWrite, 2, bValid|bInline|inlineLen(4))}),
			want:   []qp.ViolationCode{qp.ViolAddFragCnt},
			quanta: 1,
		},
		{
			name:   "atomic with ADDFRAGCNT 0",
			b:      wqe(2, 0, map[int]uint64{3: hdr(qp.OpAtomicFetchAdd, 0, bValid), 7: bValid}),
			want:   []qp.ViolationCode{qp.ViolAddFragCnt},
			quanta: 2,
		},
		{
			name:   "atomic second quantum not valid",
			b:      wqe(2, 0, map[int]uint64{3: hdr(qp.OpAtomicCompareSwap, 1, bValid)}),
			want:   []qp.ViolationCode{qp.ViolFragValid},
			quanta: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			if p.Polarity == 0 && !p.IgnoreValid {
				p.Polarity = 1
			}
			var w qp.SQWQE
			if err := qp.DecodeSQ(&w, tc.b, p); err != nil {
				t.Fatalf("DecodeSQ: %v", err)
			}
			var got []qp.ViolationCode
			for _, v := range w.Violations() {
				got = append(got, v.Code)
				if v.String() == "" {
					t.Errorf("empty description for %v", v.Code)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v (%v)", got, tc.want, w.Violations())
			}
			if w.Quanta != tc.quanta {
				t.Errorf("quanta %d, want %d", w.Quanta, tc.quanta)
			}
		})
	}
}

func TestDecodeSQNotValidAndShort(t *testing.T) {
	var w qp.SQWQE
	// First lap header (VALID=1) read on the second lap (polarity 0).
	b := wqe(1, 0, map[int]uint64{3: hdr(qp.OpNOP, 0, bValid)})
	if err := qp.DecodeSQ(&w, b, qp.DecodeParams{Polarity: 0}); !errors.Is(err, qp.ErrNotValid) {
		t.Errorf("stale WQE: err %v, want ErrNotValid", err)
	}
	// A 3-SGE SEND needs 2 quanta.
	b = wqe(1, 0, map[int]uint64{3: hdr(qp.OpSend, 2, bValid)})
	var se *qp.ShortError
	if err := qp.DecodeSQ(&w, b, qp.DecodeParams{Polarity: 1}); !errors.As(err, &se) || se.Need != 64 || se.Have != 32 {
		t.Errorf("short WQE: err %v, want ShortError{64, 32}", err)
	}
	if err := qp.DecodeSQ(&w, b[:31], qp.DecodeParams{Polarity: 1}); !errors.As(err, &se) || se.Need != 32 {
		t.Errorf("short quantum: err %v, want ShortError{32, 31}", err)
	}
}

// TestDecodeSQGarbage: bytes the header's lengths and flags do not cover are
// ignored, whatever they hold (0xff after a wrap; docs/hw-datapath.md "SQ WQE
// body" on qword1 with an immediate).
func TestDecodeSQGarbage(t *testing.T) {
	// Second lap: polarity 0, the ring pre-filled with 0xff by
	// irdma_clr_wqes. SEND with imm and one SGE: qword1 unwritten.
	m := withSlots(map[int]uint64{0: 0xffff_ffff_1122_3344, 3: hdr(qp.OpSend, 2, bSig|bImm)}, 1,
		fr(0x5000, 10, 0x77, false), fr(0, 0, 0, false))
	var w qp.SQWQE
	if err := qp.DecodeSQ(&w, wqe(2, 0xff, m), qp.DecodeParams{Polarity: 0}); err != nil {
		t.Fatal(err)
	}
	if !w.OK() || w.ImmData != 0x11223344 || len(w.Fragments()) != 1 || w.Fragments()[0].Addr != 0x5000 || w.TotalLen != 10 {
		t.Errorf("imm SEND after wrap: ok %v imm %#x frags %v total %d (%v)", w.OK(), w.ImmData, w.Fragments(), w.TotalLen, w.Violations())
	}
	// Inline WRITE of 9 bytes, second lap: the tail of quantum 1 is 0xff
	// except its inline valid byte (0x00 at polarity 0).
	b := wqe(2, 0xff, map[int]uint64{1: 0x0807060504030201, 2: 0xabc, 3: hdr(qp.OpRDMAWrite, 0, bInline|inlineLen(9)|0x55)})
	b[32] = 9
	b[63] = 0
	if err := qp.DecodeSQ(&w, b, qp.DecodeParams{Polarity: 0}); err != nil {
		t.Fatal(err)
	}
	if !w.OK() || !bytes.Equal(w.InlineData(), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}) || w.RemoteVA != 0xabc || w.RemoteSTag != 0x55 {
		t.Errorf("inline after wrap: ok %v data %x remote %#x/%#x (%v)", w.OK(), w.InlineData(), w.RemoteVA, w.RemoteSTag, w.Violations())
	}
}

// TestDecodeSQFixedLayouts decodes hand-written atomic, LOCAL_INV, BIND_MW
// and FAST_REG WQEs laid out per docs/hw-datapath.md "Atomic WQEs" and
// "Memory and NOP WQEs".
func TestDecodeSQFixedLayouts(t *testing.T) {
	var w qp.SQWQE
	p := qp.DecodeParams{Polarity: 1}

	cas := wqe(2, 0, map[int]uint64{0: 0x7000, 1: 0x1234, 2: 0x9000_0008, 3: hdr(qp.OpAtomicCompareSwap, 1, bValid|bSig|0xc0ffee),
		4: 0x1112131415161718, 5: 0x0102030405060708, 7: bValid})
	if err := qp.DecodeSQ(&w, cas, p); err != nil || !w.OK() {
		t.Fatalf("CAS: %v %v", err, w.Violations())
	}
	wantA := qp.AtomicFields{LocalVA: 0x7000, LocalSTag: 0x1234, SwapAdd: 0x1112131415161718, Compare: 0x0102030405060708}
	if w.Atomic != wantA || w.RemoteVA != 0x9000_0008 || w.RemoteSTag != 0xc0ffee || w.TotalLen != 8 || w.Quanta != 2 {
		t.Errorf("CAS: %+v remote %#x/%#x len %d quanta %d", w.Atomic, w.RemoteVA, w.RemoteSTag, w.TotalLen, w.Quanta)
	}

	// LOCAL_INV as the kernel writes it: local fence forced, slot valid 0.
	li := wqe(1, 0, map[int]uint64{1: 0xabcd01, 3: hdr(qp.OpLocalInvalidate, 0, bValid|bSig|bLocFence)})
	if err := qp.DecodeSQ(&w, li, p); err != nil || !w.OK() || w.InvalidateSTag != 0xabcd01 || !w.LocalFence {
		t.Errorf("LOCAL_INV: %v stag %#x fence %v %v", err, w.InvalidateSTag, w.LocalFence, w.Violations())
	}

	bind := wqe(1, 0, map[int]uint64{0: 0x1000, 1: 0x00010012_00010b35, 2: 0x2000,
		3: hdr(qp.OpBindMW, 0, bValid|bSig|vaBased|mwType1|remAtomics|0xc<<48|bPush|bRdFence)})
	if err := qp.DecodeSQ(&w, bind, p); err != nil || !w.OK() {
		t.Fatalf("BIND_MW: %v %v", err, w.Violations())
	}
	wantB := qp.BindFields{VA: 0x1000, ParentSTag: 0x10012, MWSTag: 0x10b35, Len: 0x2000, Rights: 0xc, VABased: true, Type1: true, RemoteAtomics: true}
	if w.Bind != wantB || !w.Push || !w.ReadFence {
		t.Errorf("BIND_MW: %+v push %v fence %v", w.Bind, w.Push, w.ReadFence)
	}

	// FAST_REG: key 0x5a, index 0x1234, first PBL index 0x0abc_def0.
	fast := wqe(1, 0, map[int]uint64{0: 0x7f00_0000_1000, 1: 0x0000_0012_3456_7000 | 0xabc, 2: 1<<40 | 0xdef0<<48,
		3: hdr(qp.OpFastRegister, 0, bValid|bSig|0x1234<<8|0x5a|1<<44|uint64(qp.PageSize2M)<<46|0x0b<<48|vaBased)})
	if err := qp.DecodeSQ(&w, fast, p); err != nil || !w.OK() {
		t.Fatalf("FAST_REG: %v %v", err, w.Violations())
	}
	wantF := qp.FastRegFields{VA: 0x7f00_0000_1000, PBLAddr: 0x12_3456_7000, FirstPMPBLIndex: 0x0abc_def0, Len: 1 << 40,
		STagKey: 0x5a, STagIndex: 0x1234, ChunkSize: 1, PageSize: qp.PageSize2M, Rights: 0x0b, VABased: true}
	if w.FastReg != wantF {
		t.Errorf("FAST_REG: %+v\nwant      %+v", w.FastReg, wantF)
	}
}

func TestDecodeRQ(t *testing.T) {
	sge := fr(0x1000, 64, 0x100, true)
	tests := []struct {
		name      string
		b         []byte
		wqeQuanta int
		nsge      int
		want      []qp.ViolationCode
	}{
		{"two SGEs and pad in a 64-byte WQE", wqe(2, 0, withSlots(map[int]uint64{3: hdr(0, 2, bValid)}, 0, sge, sge, pad1)), 2, 2, nil},
		{"three SGEs", wqe(2, 0xff, withSlots(map[int]uint64{3: hdr(0, 2, bValid)}, 0, sge, sge, sge)), 2, 3, nil},
		{"fragments beyond a 32-byte WQE", wqe(2, 0, withSlots(map[int]uint64{3: hdr(0, 2, bValid)}, 0, sge, sge, pad1)), 1, 1, []qp.ViolationCode{qp.ViolRQFragsExceedWQE}},
		{"odd ADDFRAGCNT", wqe(2, 0, withSlots(map[int]uint64{3: hdr(0, 1, bValid)}, 0, sge, sge)), 2, 2, []qp.ViolationCode{qp.ViolPadRule}},
		{"slot valid bit off", wqe(1, 0, withSlots(map[int]uint64{3: hdr(0, 0, bValid)}, 0, fr(1, 1, 1, false))), 1, 1, []qp.ViolationCode{qp.ViolFragValid}},
		{"14 SGEs", wqe(8, 0, withSlots(map[int]uint64{3: hdr(0, 14, bValid)}, 0, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, sge, pad1)), 8, 14, []qp.ViolationCode{qp.ViolTooManyFrags}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w qp.RQWQE
			if err := qp.DecodeRQ(&w, tc.b, qp.DecodeParams{Polarity: 1, WQEQuanta: tc.wqeQuanta}); err != nil {
				t.Fatal(err)
			}
			var got []qp.ViolationCode
			for _, v := range w.Violations() {
				got = append(got, v.Code)
			}
			if !slices.Equal(got, tc.want) || len(w.Fragments()) != tc.nsge {
				t.Errorf("violations %v (want %v), %d SGEs (want %d)", got, tc.want, len(w.Fragments()), tc.nsge)
			}
		})
	}
}

// TestDecodeNoAlloc: the engine decodes every WQE it consumes; that must
// not allocate.
func TestDecodeNoAlloc(t *testing.T) {
	var w qp.SQWQE
	var r qp.RQWQE
	sq := wqe(8, 0, withSlots(map[int]uint64{0: 7, 3: hdr(qp.OpSend, 14, bValid|bImm)}, 1,
		fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true),
		fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), fr(1, 2, 3, true), pad1))
	in := wqe(4, 0x80, map[int]uint64{3: hdr(qp.OpSend, 0, bValid|bInline|inlineLen(101))})
	rq := wqe(2, 0, withSlots(map[int]uint64{3: hdr(0, 2, bValid)}, 0, fr(1, 2, 3, true), fr(1, 2, 3, true), pad1))
	p := qp.DecodeParams{Polarity: 1, Limits: qp.GEN2WQELimits, WQEQuanta: 2}
	allocs := testing.AllocsPerRun(100, func() {
		_ = qp.DecodeSQ(&w, sq, p)
		_ = qp.DecodeSQ(&w, in, p)
		_ = qp.DecodeRQ(&r, rq, p)
		_ = w.Fragments()
		_ = w.Violations()
	})
	if allocs != 0 {
		t.Errorf("decode allocates %v times per run", allocs)
	}
}

// TestViolationReactions pins the documented intended reactions.
func TestViolationReactions(t *testing.T) {
	want := map[qp.ViolationCode]qp.Reaction{
		qp.ViolHeaderNotValid:   {},
		qp.ViolUnknownOpcode:    {AE: 0x020a, Fatal: true},
		qp.ViolIWARPOnly:        {AE: 0x020a, Fatal: true},
		qp.ViolTooManyFrags:     {AE: 0x020c, Fatal: true},
		qp.ViolPadRule:          {AE: 0x020c, Fatal: true},
		qp.ViolAddFragCnt:       {AE: 0x020b, Fatal: true},
		qp.ViolFragValid:        {AE: 0x020c, Fatal: true},
		qp.ViolInlineTooLong:    {AE: 0x020b, Fatal: true},
		qp.ViolInlineValid:      {AE: 0x020c, Fatal: true},
		qp.ViolInlineNotAllowed: {AE: 0x020b, Fatal: true},
		qp.ViolImmNotAllowed:    {AE: 0x020b, Fatal: true},
		qp.ViolCrossesChunk:     {AE: 0x020b, Fatal: true},
		qp.ViolReservedField:    {AE: 0x020b, Fatal: true},
		qp.ViolRQFragsExceedWQE: {AE: 0x020c, Fatal: true},
	}
	for c := qp.ViolationCode(0); c < 20; c++ {
		r, ok := want[c]
		if got := c.Reaction(); got != r {
			t.Errorf("%v: reaction %+v, want %+v", c, got, r)
		}
		if named := !strings.HasPrefix(c.String(), "violation("); named != ok {
			t.Errorf("code %d: name %q", c, c.String())
		}
	}
}

// TestViolationOverflow: more violations than the fixed list holds are
// counted, and the WQE is still not OK.
func TestViolationOverflow(t *testing.T) {
	bad := fr(1, 1, 1, false)
	b := wqe(8, 0, withSlots(map[int]uint64{3: hdr(qp.OpSend, 14, bValid)}, 0,
		bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad))
	var w qp.SQWQE
	if err := qp.DecodeSQ(&w, b, qp.DecodeParams{Polarity: 1}); err != nil {
		t.Fatal(err)
	}
	// 15 slot valid bits and the SGE limit: 8 kept, 8 dropped.
	if len(w.Violations()) != 8 || w.Dropped != 8 || w.OK() || !w.Has(qp.ViolFragValid) || w.Has(qp.ViolTooManyFrags) {
		t.Errorf("kept %d dropped %d ok %v", len(w.Violations()), w.Dropped, w.OK())
	}
}

func TestWQELimitsFromGEN2Profile(t *testing.T) {
	if got := qp.WQELimitsFrom(profile.GEN2()); got != qp.GEN2WQELimits {
		t.Errorf("WQELimitsFrom(GEN2) = %+v, want %+v", got, qp.GEN2WQELimits)
	}
}

func TestOpcodeNames(t *testing.T) {
	for _, tc := range []struct {
		op   qp.Opcode
		name string
	}{{qp.OpSend, "RDMA_SEND"}, {qp.OpRDMAWriteSolicited, "RDMA_WRITE_SOL"}, {qp.OpNOP, "NOP"}, {0x07, "RESERVED(0x07)"}} {
		if got := tc.op.String(); got != tc.name {
			t.Errorf("%#x: %q, want %q", uint8(tc.op), got, tc.name)
		}
	}
}

func TestInlineGeometry(t *testing.T) {
	// irdma_inline_data_size_to_quanta boundaries (docs/hw-datapath.md
	// "Inline data").
	for n, q := range map[int]int{0: 1, 8: 1, 9: 2, 39: 2, 40: 3, 70: 3, 71: 4, 101: 4, 102: 5, 132: 5, 133: 6, 163: 6, 164: 7, 194: 7, 195: 8, 255: 8} {
		if got := qp.InlineQuanta(n); got != q {
			t.Errorf("InlineQuanta(%d) = %d, want %d", n, got, q)
		}
	}
	for i, off := range map[int]int{0: 8, 7: 15, 8: 32, 38: 62, 39: 64, 69: 94, 70: 96} {
		if got := qp.InlineByteOffset(i); got != off {
			t.Errorf("InlineByteOffset(%d) = %d, want %d", i, got, off)
		}
	}
}

// TestDecodeBindType2: BIND_MW for a type-2 window as libirdma 65 writes
// it (uk.c irdma_uk_mw_bind; the bytes worked out by hand from the layout,
// docs/hw-datapath.md "Memory and NOP WQEs"): MEMWINDOWTYPE 0, the
// window's new STag in qword1 [31:0] below the parent MR's.
func TestDecodeBindType2(t *testing.T) {
	p := qp.DecodeParams{Polarity: 1}
	for _, tc := range []struct {
		name   string
		qwords map[int]uint64
		want   qp.BindFields
	}{
		{"VA-based, remote read and write",
			map[int]uint64{0: 0x0000_7f00_1234_5000, 1: 0x0000_4321_00ab_cd77, 2: 0x3000, 3: 0xc02c_0008_0000_0000},
			qp.BindFields{VA: 0x7f00_1234_5000, ParentSTag: 0x4321, MWSTag: 0xabcd77, Len: 0x3000, Rights: 0xc, VABased: true}},
		{"zero-based, remote read",
			map[int]uint64{1: 0x0000_4321_00ab_cd78, 2: 0x800, 3: 0xc004_0008_0000_0000},
			qp.BindFields{ParentSTag: 0x4321, MWSTag: 0xabcd78, Len: 0x800, Rights: 0x4}},
	} {
		var w qp.SQWQE
		if err := qp.DecodeSQ(&w, wqe(1, 0, tc.qwords), p); err != nil || !w.OK() {
			t.Fatalf("%s: %v %v", tc.name, err, w.Violations())
		}
		if w.Opcode != qp.OpBindMW || w.Bind != tc.want || !w.Signaled || w.Quanta != 1 {
			t.Errorf("%s: opcode %v bind %+v signaled %v quanta %d\nwant bind %+v", tc.name, w.Opcode, w.Bind, w.Signaled, w.Quanta, tc.want)
		}
	}
}

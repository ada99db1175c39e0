package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// testFields returns PacketFields with a distinct value in every field, so
// a header written at the wrong offset or with the wrong width shows.
func testFields(op wire.Opcode) wire.PacketFields {
	return wire.PacketFields{
		BTH: wire.BTHFields{
			Opcode: op, SE: true, MigReq: false, PKey: 0xffff, FECN: false, BECN: op == wire.CNP,
			DestQP: 0xabcdef, AckReq: true, PSN: 0x123456,
		},
		RDETH:        wire.RDETHFields{EEContext: 0x0a0b0c},
		DETH:         wire.DETHFields{QKey: 0x11111111, SrcQP: 0x000013},
		FETH:         wire.FETHFields{SelectivityLevel: 2, PlacementType: 1},
		RETH:         wire.RETHFields{VA: 0x0102030405060708, RKey: 0x0a0b0c0d, DMALen: 0x1000},
		AtomicETH:    wire.AtomicETHFields{VA: 0x1112131415161718, RKey: 0x1a1b1c1d, SwapAdd: 0x2122232425262728, Compare: 0x3132333435363738},
		AETH:         wire.AETHFields{Syndrome: wire.ACKSyndrome(wire.CreditsInvalid), MSN: 0x00beef},
		AtomicAckETH: wire.AtomicAckETHFields{OrigRemoteData: 0x4142434445464748},
		ImmDt:        wire.ImmDtFields{Imm: 0xdeadbeef},
		IETH:         wire.IETHFields{RKey: 0x51525354},
	}
}

// payloadLens returns payload lengths to try for a rule.
func payloadLens(r wire.PayloadRule) []int {
	switch r {
	case wire.PayloadNone:
		return []int{0}
	case wire.PayloadPMTU:
		return []int{256, 1024, 4096}
	case wire.PayloadLast:
		return []int{1, 2, 3, 4, 1021, 1024, 4096}
	case wire.PayloadOnly:
		return []int{0, 1, 5, 1024, 4096}
	case wire.PayloadAtomicWrite:
		return []int{8}
	case wire.PayloadCNP:
		return []int{16}
	}
	return nil
}

// headerView returns the view of header name in p.
func headerView(p *wire.Packet, name string) []byte {
	return map[string][]byte{
		"RDETH": p.RDETH, "DETH": p.DETH, "FETH": p.FETH, "RETH": p.RETH, "AtomicETH": p.AtomicETH,
		"AETH": p.AETH, "AtomicAckETH": p.AtomicAckETH, "ImmDt": p.ImmDt, "IETH": p.IETH,
	}[name]
}

// onlyCarried zeroes the headers op does not carry, for comparison with
// Packet.Fields.
func onlyCarried(f wire.PacketFields, op wire.Opcode, padCount int) wire.PacketFields {
	var g wire.PacketFields
	g.BTH = f.BTH
	g.BTH.PadCount = uint8(padCount)
	h := op.Headers()
	if h.Has(wire.HdrRDETH) {
		g.RDETH = f.RDETH
	}
	if h.Has(wire.HdrDETH) {
		g.DETH = f.DETH
	}
	if h.Has(wire.HdrFETH) {
		g.FETH = f.FETH
	}
	if h.Has(wire.HdrRETH) {
		g.RETH = f.RETH
	}
	if h.Has(wire.HdrAtomicETH) {
		g.AtomicETH = f.AtomicETH
	}
	if h.Has(wire.HdrAETH) {
		g.AETH = f.AETH
	}
	if h.Has(wire.HdrAtomicAckETH) {
		g.AtomicAckETH = f.AtomicAckETH
	}
	if h.Has(wire.HdrImmDt) {
		g.ImmDt = f.ImmDt
	}
	if h.Has(wire.HdrIETH) {
		g.IETH = f.IETH
	}
	return g
}

// TestRoundTripEveryOpcode builds one packet of every opcode at several
// payload lengths into a buffer pre-filled with 0xFF, decodes it, and
// checks the header set against the hand table, every field, the reserved
// bits, the pad and the lengths.
func TestRoundTripEveryOpcode(t *testing.T) {
	for _, s := range opcodeSpecs {
		for _, n := range payloadLens(s.payload) {
			t.Run(fmt.Sprintf("%s/%d", s.name, n), func(t *testing.T) {
				pf := testFields(s.op)
				buf := bytes.Repeat([]byte{0xff}, wire.MaxPacketSize+64)
				var built wire.Packet
				size, err := wire.EncodePacket(buf, &pf, n, &built)
				if err != nil {
					t.Fatalf("EncodePacket: %v", err)
				}
				pad := -n & 3
				wantSize := wire.BTHSize + n + pad + wire.ICRCSize
				for _, h := range s.headers {
					wantSize += headerSizes[h]
				}
				if size != wantSize || size != wire.PacketLen(s.op, n) {
					t.Fatalf("size %d, PacketLen %d, want %d", size, wire.PacketLen(s.op, n), wantSize)
				}
				for i := range built.Payload {
					built.Payload[i] = byte(i*7 + 1)
				}
				b := buf[:size]

				// Reserved bits and pad must have been written as zeros
				// over the 0xFF fill.
				if b[4]&0x3f != 0 || b[8]&0x7f != 0 || b[1]&0x0f != 0 {
					t.Errorf("BTH reserved/TVer bits not cleared: % x", b[:12])
				}
				if int(b[1]>>4&3) != pad {
					t.Errorf("PadCnt = %d, want %d", b[1]>>4&3, pad)
				}
				if !bytes.Equal(b[size-4-pad:], make([]byte, pad+4)) {
					t.Errorf("pad+ICRC = % x, want zeros", b[size-4-pad:])
				}
				if bytes.Contains(buf[size:size+1], []byte{0}) {
					t.Errorf("EncodePacket wrote past the packet")
				}

				var p wire.Packet
				if err := wire.Parse(b, &p); err != nil {
					t.Fatalf("Parse: %v", err)
				}
				// The header set, at the offsets IBTA order gives.
				off := wire.BTHSize
				for _, h := range s.headers {
					v := headerView(&p, h)
					if offsetIn(b, v) != off || len(v) != headerSizes[h] {
						t.Errorf("%s at offset %d len %d, want offset %d len %d", h, offsetIn(b, v), len(v), off, headerSizes[h])
					}
					off += headerSizes[h]
				}
				for name := range headerSizes {
					carried := false
					for _, h := range s.headers {
						carried = carried || h == name
					}
					if !carried && headerView(&p, name) != nil {
						t.Errorf("%s present but %s does not carry it", name, s.name)
					}
				}
				if offsetIn(b, p.Payload) != off && n > 0 || len(p.Payload) != n {
					t.Errorf("payload at %d len %d, want %d len %d", offsetIn(b, p.Payload), len(p.Payload), off, n)
				}
				for i, v := range p.Payload {
					if v != byte(i*7+1) {
						t.Fatalf("payload byte %d = %#x", i, v)
					}
				}
				if len(p.Pad) != pad || len(p.ICRCBytes) != 4 || offsetIn(b, p.ICRCBytes) != size-4 || len(p.Raw) != size {
					t.Errorf("pad %d ICRC at %d raw %d; want %d, %d, %d", len(p.Pad), offsetIn(b, p.ICRCBytes), len(p.Raw), pad, size-4, size)
				}
				if diff := cmp.Diff(onlyCarried(pf, s.op, pad), p.Fields()); diff != "" {
					t.Errorf("decoded fields (-built +decoded):\n%s", diff)
				}
				// Built and parsed views agree.
				if offsetIn(b, built.Payload) != offsetIn(b, p.Payload) && n > 0 || len(built.Raw) != len(p.Raw) {
					t.Errorf("EncodePacket views differ from Parse views")
				}
			})
		}
	}
}

// TestRejectWrongHeaderSet removes each extension header from a packet
// built with the smallest payload its opcode allows (so nothing else can
// stand in for the missing bytes) and expects the gate to notice; it also
// relabels packets with an opcode of a different header set.
func TestRejectWrongHeaderSet(t *testing.T) {
	for _, s := range opcodeSpecs {
		if len(s.headers) == 0 {
			continue
		}
		n := payloadLens(s.payload)[0]
		pf := testFields(s.op)
		buf := make([]byte, wire.MaxPacketSize)
		size, err := wire.EncodePacket(buf, &pf, n, new(wire.Packet))
		if err != nil {
			t.Fatal(err)
		}
		b := buf[:size]
		off := wire.BTHSize
		for _, h := range s.headers {
			hs := headerSizes[h]
			cut := append(append([]byte(nil), b[:off]...), b[off+hs:]...)
			err := wire.Parse(cut, new(wire.Packet))
			pad, want := -n&3, wire.ErrBadLength
			switch left := n + pad - hs; {
			case left < 0:
				want = wire.ErrTruncated
			case pad > left:
				want = wire.ErrBadPad
			}
			if !errors.Is(err, want) {
				t.Errorf("%s without its %s: Parse = %v, want %v", s.name, h, err, want)
			}
			off += hs
		}
	}

	// Same bytes, another opcode: the lengths no longer add up.
	for _, c := range []struct {
		build, relabel wire.Opcode
		n              int
		want           wire.Reason
	}{
		{wire.RCRDMAWriteFirst, wire.RCSendFirst, 1024, wire.ErrBadLength},   // 1040 is no PMTU
		{wire.RCSendFirst, wire.RCRDMAWriteFirst, 1024, wire.ErrBadLength},   // 1008 is no PMTU
		{wire.RCAcknowledge, wire.RCAtomicAcknowledge, 0, wire.ErrTruncated}, // AtomicAckETH missing
		{wire.RCAtomicAcknowledge, wire.RCAcknowledge, 0, wire.ErrBadLength}, // 8 stray bytes
		{wire.RCRDMAReadRequest, wire.RCCompareSwap, 0, wire.ErrTruncated},   // 16 < 28
		{wire.RCCompareSwap, wire.RCRDMAReadRequest, 0, wire.ErrBadLength},   // 12 stray bytes
		{wire.RCSendOnly, wire.RCRDMAWriteOnly, 8, wire.ErrTruncated},        // 8 < RETH
		{wire.UCSendOnly, wire.UDSendOnly, 4, wire.ErrTruncated},             // 4 < DETH
		{wire.RCRDMAReadResponseOnly, wire.RCRDMAReadResponseFirst, 100, wire.ErrBadLength},
		{wire.RCSendLast, wire.RCSendLastWithImm, 4, wire.ErrBadLength}, // nothing left for the payload
	} {
		pf := testFields(c.build)
		buf := make([]byte, wire.MaxPacketSize)
		size, err := wire.EncodePacket(buf, &pf, c.n, new(wire.Packet))
		if err != nil {
			t.Fatal(err)
		}
		wire.BTH(buf).SetOpcode(c.relabel)
		err = wire.Parse(buf[:size], new(wire.Packet))
		if !errors.Is(err, c.want) {
			t.Errorf("%v relabelled %v: Parse = %v, want %v", c.build, c.relabel, err, c.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	build := func(op wire.Opcode, n int) []byte {
		pf := testFields(op)
		buf := make([]byte, wire.MaxPacketSize)
		size, err := wire.EncodePacket(buf, &pf, n, new(wire.Packet))
		if err != nil {
			t.Fatal(err)
		}
		return buf[:size]
	}
	for _, c := range []struct {
		name string
		b    []byte
		want wire.Reason
	}{
		{"empty", nil, wire.ErrTruncated},
		{"15 bytes", make([]byte, 15), wire.ErrTruncated},
		{"TVer 1", func() []byte { b := build(wire.RCSendOnly, 4); wire.BTH(b).SetTVer(1); return b }(), wire.ErrBadTVer},
		{"RC 0x15 reserved", func() []byte { b := build(wire.RCSendOnly, 4); b[0] = 0x15; return b }(), wire.ErrInvalidOpcode},
		{"RD send", func() []byte { b := build(wire.RCSendOnly, 4); b[0] = 0x44; return b }(), wire.ErrInvalidOpcode},
		{"UD 0x60", func() []byte { b := build(wire.RCSendOnly, 4); b[0] = 0x60; return b }(), wire.ErrInvalidOpcode},
		{"XRC", func() []byte { b := build(wire.RCSendOnly, 4); b[0] = 0xa4; return b }(), wire.ErrInvalidOpcode},
		{"CNP 0x80", func() []byte { b := build(wire.CNP, 16); b[0] = 0x80; return b }(), wire.ErrInvalidOpcode},
		{"pad > payload region", func() []byte { b := build(wire.RCSendOnly, 0); wire.BTH(b).SetPadCount(3); return b }(), wire.ErrBadPad},
		{"pad on first", func() []byte { b := build(wire.RCSendFirst, 1024); wire.BTH(b).SetPadCount(1); return b }(), wire.ErrBadPad},
		{"pad on ACK", func() []byte {
			b := build(wire.RCAcknowledge, 0)
			wire.BTH(b).SetPadCount(1)
			return b
		}(), wire.ErrBadPad},
		{"payload+pad not words", append(build(wire.RCSendOnly, 4), 0), wire.ErrBadLength},
		{"ACK with payload", append(build(wire.RCAcknowledge, 0), 0, 0, 0, 0), wire.ErrBadLength},
		{"last empty", func() []byte { b := build(wire.RCSendLast, 4); return append(b[:12], b[16:]...) }(), wire.ErrBadLength},
		{"middle 1020", func() []byte { b := build(wire.RCSendMiddle, 1024); return b[:len(b)-4] }(), wire.ErrBadLength},
		{"only > 4096", append(build(wire.RCSendOnly, 4096), 0, 0, 0, 0), wire.ErrBadLength},
		{"atomic write 12", append(build(wire.RCAtomicWrite, 8), 0, 0, 0, 0), wire.ErrBadLength},
		{"CNP short", func() []byte { b := build(wire.CNP, 16); return b[:len(b)-4] }(), wire.ErrBadLength},
	} {
		var p wire.Packet
		err := wire.Parse(c.b, &p)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Parse = %v, want %v", c.name, err, c.want)
			continue
		}
		var pe *wire.ParseError
		if !errors.As(err, &pe) || pe.Error() == "" || wire.ReasonOf(err) != c.want {
			t.Errorf("%s: error %v is not a *ParseError with reason %v", c.name, err, c.want)
		}
	}
}

// TestGoldenHeaderBytes pins the encoders to bytes written out by hand
// from the IBTA layouts.
func TestGoldenHeaderBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		op   wire.Opcode
		n    int
		hex  string
	}{
		{"RC RDMA Write Only Immediate", wire.RCRDMAWriteOnlyWithImm, 0, `
			0b 80 ffff 00 abcdef 80 123456
			0102030405060708 0a0b0c0d 00001000
			deadbeef
			00000000`},
		{"UD Send Only, 3-byte payload", wire.UDSendOnly, 3, `
			64 90 ffff 00 abcdef 80 123456
			11111111 00 000013
			01080f 00
			00000000`},
		{"RC Atomic Acknowledge", wire.RCAtomicAcknowledge, 0, `
			12 80 ffff 00 abcdef 80 123456
			1f 00beef
			4142434445464748
			00000000`},
		{"RC Compare Swap", wire.RCCompareSwap, 0, `
			13 80 ffff 00 abcdef 80 123456
			1112131415161718 1a1b1c1d 2122232425262728 3132333435363738
			00000000`},
		{"RC Send Only Invalidate", wire.RCSendOnlyWithInvalidate, 0, `
			17 80 ffff 00 abcdef 80 123456
			51525354
			00000000`},
		{"RC Flush", wire.RCFlush, 0, `
			1c 80 ffff 00 abcdef 80 123456
			00000021
			0102030405060708 0a0b0c0d 00001000
			00000000`},
		{"CNP", wire.CNP, 16, `
			81 80 ffff 40 abcdef 80 123456
			00000000000000000000000000000000
			00000000`},
	} {
		pf := testFields(c.op)
		buf := bytes.Repeat([]byte{0xff}, 256)
		var p wire.Packet
		size, err := wire.EncodePacket(buf, &pf, c.n, &p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range p.Payload {
			p.Payload[i] = byte(i*7 + 1)
		}
		if c.op == wire.CNP {
			clear(p.Payload)
		}
		if got, want := buf[:size], unhex(t, c.hex); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got % x\nwant % x", c.name, got, want)
		}
	}
}

func TestEncodePacketErrors(t *testing.T) {
	pf := testFields(wire.RCSendOnly)
	if _, err := wire.EncodePacket(make([]byte, 20), &pf, 5, new(wire.Packet)); !errors.Is(err, wire.ErrBufferTooSmall) {
		t.Errorf("small buffer: %v", err)
	}
	pf.BTH.Opcode = 0x15
	if _, err := wire.EncodePacket(make([]byte, 100), &pf, 0, new(wire.Packet)); !errors.Is(err, wire.ErrInvalidOpcode) {
		t.Errorf("reserved opcode: %v", err)
	}
	pf.BTH.Opcode = wire.RCSendMiddle
	if _, err := wire.EncodePacket(make([]byte, 2000), &pf, 1000, new(wire.Packet)); !errors.Is(err, wire.ErrBadLength) {
		t.Errorf("middle of 1000 bytes: %v", err)
	}
}

package wire_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// opcodeSpec is the opcode table written out again by hand from IBTA Vol 1
// Table 38 / ib_pack.h (values), rxe_opcode.c (header sets) and Wireshark's
// packet-infiniband.c OpCodeMap (names), independently of opcode.go, so a
// slip in either shows up as a difference.
type opcodeSpec struct {
	op      wire.Opcode
	value   uint8
	name    string
	headers []string // after the BTH, in wire order
	pos     wire.Position
	payload wire.PayloadRule
}

const (
	first  = wire.PositionFirst
	middle = wire.PositionMiddle
	last   = wire.PositionLast
	only   = wire.PositionOnly
)

var opcodeSpecs = []opcodeSpec{
	{wire.RCSendFirst, 0x00, "RC Send First", nil, first, wire.PayloadPMTU},
	{wire.RCSendMiddle, 0x01, "RC Send Middle", nil, middle, wire.PayloadPMTU},
	{wire.RCSendLast, 0x02, "RC Send Last", nil, last, wire.PayloadLast},
	{wire.RCSendLastWithImm, 0x03, "RC Send Last Immediate", []string{"ImmDt"}, last, wire.PayloadLast},
	{wire.RCSendOnly, 0x04, "RC Send Only", nil, only, wire.PayloadOnly},
	{wire.RCSendOnlyWithImm, 0x05, "RC Send Only Immediate", []string{"ImmDt"}, only, wire.PayloadOnly},
	{wire.RCRDMAWriteFirst, 0x06, "RC RDMA Write First", []string{"RETH"}, first, wire.PayloadPMTU},
	{wire.RCRDMAWriteMiddle, 0x07, "RC RDMA Write Middle", nil, middle, wire.PayloadPMTU},
	{wire.RCRDMAWriteLast, 0x08, "RC RDMA Write Last", nil, last, wire.PayloadLast},
	{wire.RCRDMAWriteLastWithImm, 0x09, "RC RDMA Write Last Immediate", []string{"ImmDt"}, last, wire.PayloadLast},
	{wire.RCRDMAWriteOnly, 0x0a, "RC RDMA Write Only", []string{"RETH"}, only, wire.PayloadOnly},
	{wire.RCRDMAWriteOnlyWithImm, 0x0b, "RC RDMA Write Only Immediate", []string{"RETH", "ImmDt"}, only, wire.PayloadOnly},
	{wire.RCRDMAReadRequest, 0x0c, "RC RDMA Read Request", []string{"RETH"}, only, wire.PayloadNone},
	{wire.RCRDMAReadResponseFirst, 0x0d, "RC RDMA Read Response First", []string{"AETH"}, first, wire.PayloadPMTU},
	{wire.RCRDMAReadResponseMiddle, 0x0e, "RC RDMA Read Response Middle", nil, middle, wire.PayloadPMTU},
	{wire.RCRDMAReadResponseLast, 0x0f, "RC RDMA Read Response Last", []string{"AETH"}, last, wire.PayloadLast},
	{wire.RCRDMAReadResponseOnly, 0x10, "RC RDMA Read Response Only", []string{"AETH"}, only, wire.PayloadOnly},
	{wire.RCAcknowledge, 0x11, "RC Acknowledge", []string{"AETH"}, only, wire.PayloadNone},
	{wire.RCAtomicAcknowledge, 0x12, "RC Atomic Acknowledge", []string{"AETH", "AtomicAckETH"}, only, wire.PayloadNone},
	{wire.RCCompareSwap, 0x13, "RC Compare Swap", []string{"AtomicETH"}, only, wire.PayloadNone},
	{wire.RCFetchAdd, 0x14, "RC Fetch Add", []string{"AtomicETH"}, only, wire.PayloadNone},
	{wire.RCSendLastWithInvalidate, 0x16, "RC Send Last Invalidate", []string{"IETH"}, last, wire.PayloadLast},
	{wire.RCSendOnlyWithInvalidate, 0x17, "RC Send Only Invalidate", []string{"IETH"}, only, wire.PayloadOnly},
	{wire.RCFlush, 0x1c, "RC Flush", []string{"FETH", "RETH"}, only, wire.PayloadNone},
	{wire.RCAtomicWrite, 0x1d, "RC Atomic Write", []string{"RETH"}, only, wire.PayloadAtomicWrite},

	{wire.UCSendFirst, 0x20, "UC Send First", nil, first, wire.PayloadPMTU},
	{wire.UCSendMiddle, 0x21, "UC Send Middle", nil, middle, wire.PayloadPMTU},
	{wire.UCSendLast, 0x22, "UC Send Last", nil, last, wire.PayloadLast},
	{wire.UCSendLastWithImm, 0x23, "UC Send Last Immediate", []string{"ImmDt"}, last, wire.PayloadLast},
	{wire.UCSendOnly, 0x24, "UC Send Only", nil, only, wire.PayloadOnly},
	{wire.UCSendOnlyWithImm, 0x25, "UC Send Only Immediate", []string{"ImmDt"}, only, wire.PayloadOnly},
	{wire.UCRDMAWriteFirst, 0x26, "UC RDMA Write First", []string{"RETH"}, first, wire.PayloadPMTU},
	{wire.UCRDMAWriteMiddle, 0x27, "UC RDMA Write Middle", nil, middle, wire.PayloadPMTU},
	{wire.UCRDMAWriteLast, 0x28, "UC RDMA Write Last", nil, last, wire.PayloadLast},
	{wire.UCRDMAWriteLastWithImm, 0x29, "UC RDMA Write Last Immediate", []string{"ImmDt"}, last, wire.PayloadLast},
	{wire.UCRDMAWriteOnly, 0x2a, "UC RDMA Write Only", []string{"RETH"}, only, wire.PayloadOnly},
	{wire.UCRDMAWriteOnlyWithImm, 0x2b, "UC RDMA Write Only Immediate", []string{"RETH", "ImmDt"}, only, wire.PayloadOnly},

	{wire.UDSendOnly, 0x64, "UD Send Only", []string{"DETH"}, only, wire.PayloadOnly},
	{wire.UDSendOnlyWithImm, 0x65, "UD Send Only Immediate", []string{"DETH", "ImmDt"}, only, wire.PayloadOnly},

	{wire.CNP, 0x81, "CNP", nil, only, wire.PayloadCNP},
}

// headerSizes is IBTA §9.3, by hand.
var headerSizes = map[string]int{
	"RDETH": 4, "DETH": 8, "FETH": 4, "RETH": 16, "AtomicETH": 28,
	"AETH": 4, "AtomicAckETH": 8, "ImmDt": 4, "IETH": 4,
}

func TestOpcodeTable(t *testing.T) {
	var valid []wire.Opcode
	for _, s := range opcodeSpecs {
		valid = append(valid, s.op)
		op := s.op
		if uint8(op) != s.value {
			t.Errorf("%s = %#02x, want %#02x", s.name, uint8(op), s.value)
		}
		if op.String() != s.name {
			t.Errorf("%#02x String = %q, want %q", s.value, op.String(), s.name)
		}
		if !op.IsValid() {
			t.Errorf("%s not valid", s.name)
		}
		want := wire.BTHSize
		for _, h := range s.headers {
			want += headerSizes[h]
		}
		if op.HeaderLen() != want {
			t.Errorf("%s HeaderLen = %d, want %d", s.name, op.HeaderLen(), want)
		}
		if got := op.Headers().String(); got != joinOrNone(s.headers) {
			t.Errorf("%s headers = %s, want %s", s.name, got, joinOrNone(s.headers))
		}
		if op.Position() != s.pos {
			t.Errorf("%s position = %v, want %v", s.name, op.Position(), s.pos)
		}
		if op.PayloadRule() != s.payload {
			t.Errorf("%s payload rule = %v, want %v", s.name, op.PayloadRule(), s.payload)
		}
		has := map[string]bool{}
		for _, h := range s.headers {
			has[h] = true
		}
		preds := map[string]bool{
			"RDETH": op.HasRDETH(), "DETH": op.HasDETH(), "FETH": op.HasFETH(), "RETH": op.HasRETH(),
			"AtomicETH": op.HasAtomicETH(), "AETH": op.HasAETH(), "AtomicAckETH": op.HasAtomicAckETH(),
			"ImmDt": op.HasImmDt(), "IETH": op.HasIETH(),
		}
		for h, got := range preds {
			if got != has[h] {
				t.Errorf("%s Has%s = %v, want %v", s.name, h, got, has[h])
			}
		}
		if op.IsFirst() != (s.pos == first) || op.IsMiddle() != (s.pos == middle) ||
			op.IsLast() != (s.pos == last) || op.IsOnly() != (s.pos == only) {
			t.Errorf("%s position predicates disagree with %v", s.name, s.pos)
		}
		if op.HasPayload() != (s.payload != wire.PayloadNone) {
			t.Errorf("%s HasPayload = %v", s.name, op.HasPayload())
		}
		wantTransport := map[uint8]wire.Transport{0: wire.TransportRC, 1: wire.TransportUC, 3: wire.TransportUD, 4: wire.TransportCNP}[s.value>>5]
		if op.Transport() != wantTransport {
			t.Errorf("%s transport = %v, want %v", s.name, op.Transport(), wantTransport)
		}
	}
	if diff := cmp.Diff(valid, wire.Opcodes()); diff != "" {
		t.Errorf("Opcodes() differs from the hand table (-hand +Opcodes):\n%s", diff)
	}
	for v := 0; v < 256; v++ {
		op := wire.Opcode(v)
		inTable := false
		for _, s := range opcodeSpecs {
			inTable = inTable || s.op == op
		}
		if !inTable && (op.IsValid() || op.HeaderLen() != 0) {
			t.Errorf("%#02x is valid in the package but reserved in the hand table", v)
		}
	}
	if got := wire.Opcode(0x15).String(); got != "Unknown OpCode (0x15)" {
		t.Errorf("0x15 String = %q", got)
	}
}

func joinOrNone(h []string) string {
	if len(h) == 0 {
		return "none"
	}
	s := h[0]
	for _, x := range h[1:] {
		s += "+" + x
	}
	return s
}

func TestOpcodeSemantics(t *testing.T) {
	for _, c := range []struct {
		op                                 wire.Opcode
		req, resp, send, write, atomic, rw bool
	}{
		{wire.RCSendFirst, true, false, true, false, false, true},
		{wire.RCSendMiddle, true, false, true, false, false, false},
		{wire.RCSendOnlyWithInvalidate, true, false, true, false, false, true},
		{wire.RCRDMAWriteFirst, true, false, false, true, false, false},
		{wire.RCRDMAWriteLastWithImm, true, false, false, true, false, true},
		{wire.RCRDMAWriteOnlyWithImm, true, false, false, true, false, true},
		{wire.RCRDMAReadRequest, true, false, false, false, false, false},
		{wire.RCRDMAReadResponseMiddle, false, true, false, false, false, false},
		{wire.RCAcknowledge, false, true, false, false, false, false},
		{wire.RCAtomicAcknowledge, false, true, false, false, false, false},
		{wire.RCCompareSwap, true, false, false, false, true, false},
		{wire.RCFetchAdd, true, false, false, false, true, false},
		{wire.UDSendOnly, true, false, true, false, false, true},
		{wire.CNP, false, false, false, false, false, false},
	} {
		got := []bool{c.op.IsRequest(), c.op.IsResponse(), c.op.IsSend(), c.op.IsWrite(), c.op.IsAtomic(), c.op.ConsumesRecvWQE()}
		want := []bool{c.req, c.resp, c.send, c.write, c.atomic, c.rw}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%v [req resp send write atomic recvWQE] (-want +got):\n%s", c.op, diff)
		}
	}
}

func TestCheckPayloadLen(t *testing.T) {
	for _, c := range []struct {
		op      wire.Opcode
		n, pmtu int
		ok      bool
	}{
		{wire.RCSendFirst, 1024, 1024, true},
		{wire.RCSendFirst, 1020, 1024, false},
		{wire.RCSendFirst, 2048, 1024, false},
		{wire.RCSendMiddle, 4096, 4096, true},
		{wire.RCSendLast, 0, 1024, false},
		{wire.RCSendLast, 1, 1024, true},
		{wire.RCSendLast, 1024, 1024, true},
		{wire.RCSendLast, 1025, 1024, false},
		{wire.RCSendOnly, 0, 1024, true},
		{wire.RCSendOnly, 1025, 1024, false},
		{wire.UDSendOnly, 4096, 4096, true},
		{wire.RCAcknowledge, 0, 1024, true},
		{wire.RCAcknowledge, 4, 1024, false},
		{wire.RCAtomicWrite, 8, 1024, true},
		{wire.RCAtomicWrite, 16, 1024, false},
		{wire.Opcode(0x15), 0, 1024, false},
	} {
		err := c.op.CheckPayloadLen(c.n, c.pmtu)
		if (err == nil) != c.ok {
			t.Errorf("%v CheckPayloadLen(%d, %d) = %v, want ok=%v", c.op, c.n, c.pmtu, err, c.ok)
		}
		if err != nil && !errors.Is(err, wire.ErrBadLength) && !errors.Is(err, wire.ErrInvalidOpcode) {
			t.Errorf("%v: error %v is neither ErrBadLength nor ErrInvalidOpcode", c.op, err)
		}
	}
}

func TestPadLen(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 1021: 3, 1024: 0} {
		if got := wire.PadLen(n); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestHeadersSet(t *testing.T) {
	h := wire.HdrRETH | wire.HdrImmDt
	if h.Len() != 20 || h.Count() != 2 || h.First() != wire.HdrRETH ||
		h.After(wire.HdrRETH) != wire.HdrImmDt || h.After(wire.HdrImmDt) != 0 {
		t.Errorf("RETH+ImmDt: Len %d Count %d First %v After(RETH) %v After(ImmDt) %v",
			h.Len(), h.Count(), h.First(), h.After(wire.HdrRETH), h.After(wire.HdrImmDt))
	}
	if h.Offset(wire.HdrRETH) != 12 || h.Offset(wire.HdrImmDt) != 28 || h.Offset(wire.HdrAETH) != -1 {
		t.Errorf("offsets RETH %d ImmDt %d AETH %d; want 12 28 -1",
			h.Offset(wire.HdrRETH), h.Offset(wire.HdrImmDt), h.Offset(wire.HdrAETH))
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{wire.PayloadLast.String(), "1..PMTU"},
		{wire.PayloadRule(0).String(), "invalid"},
		{wire.OpRDMAReadResponse.String(), "RDMA READ response"},
		{wire.RCFetchAdd.Operation().String(), "Fetch Add"},
		{wire.PositionMiddle.String(), "middle"},
		{wire.TransportUD.String(), "UD"},
		{(wire.HdrAETH | wire.HdrAtomicAckETH).String(), "AETH+AtomicAckETH"},
		{wire.Headers(0).String(), "none"},
		{wire.ErrICRCMismatch.Error(), "wire: ICRC mismatch"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

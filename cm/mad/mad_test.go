package mad

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// golden builds a 256-byte MAD from "offset: hex bytes" lines written by
// hand from the IBTA tables (offsets absolute, header included).
func golden(t *testing.T, spec string) []byte {
	t.Helper()
	b := make([]byte, Size)
	for _, line := range strings.Split(strings.TrimSpace(spec), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		off, hx, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("bad golden line %q", line)
		}
		var o int
		for _, c := range strings.TrimSpace(off) {
			o = o*10 + int(c-'0')
		}
		v, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(strings.SplitN(hx, "#", 2)[0]), " ", ""))
		if err != nil {
			t.Fatalf("bad golden hex %q: %v", line, err)
		}
		copy(b[o:], v)
	}
	return b
}

const cmHeader = `
0: 01 07 02 03 0000 0000     # base 1, class CM, version 2, SEND, status, class specific
8: 0000000100000abc          # TID
16: %s 0000 00000000         # attribute, reserved, modifier
`

func hdr(attr string) string { return strings.Replace(cmHeader, "%s", attr, 1) }

var reqGolden = hdr("0010") + `
24: 11223344                 # local comm ID
32: 0000000001064e20         # service ID (RDMA_PS_TCP, port 20000)
40: 0200c9fffe112233         # local CA GUID
52: 00000000                 # local Q_Key
56: 000123 10                # local QPN, responder resources 16
63: 08                       # initiator depth
67: a1                       # remote CM response timeout 20, RC, flow control
68: abcdef a7                # starting PSN, local CM response timeout 20, retry 7
72: ffff 37 f0               # P_Key, MTU 1024 | RNR retry 7, max CM retries 15
76: ffff ffff                # primary local/remote LID: permissive (routed RoCE)
80: 00000000000000000000ffff0a000001
96: 00000000000000000000ffff0a000002
112: 12345002                # flow label 0x12345, packet rate 2
116: 68 40 00 90             # traffic class, hop limit 64, SL 0, local ACK timeout 18
164: 68656c6c6f              # private data "hello"
`

func TestREQGolden(t *testing.T) {
	want := golden(t, reqGolden)
	if a, err := Check(want); err != nil || a != AttrREQ {
		t.Fatalf("Check: %v %v", a, err)
	}
	m := REQ(want)
	p := m.Primary()
	lgid := p.LocalGID()
	rgid := p.RemoteGID()
	got := []struct {
		name      string
		got, want uint64
	}{
		{"TID", Header(m).TID(), 0x100000abc},
		{"LocalCommID", uint64(m.LocalCommID()), 0x11223344},
		{"ServiceID", m.ServiceID(), 0x1064e20},
		{"LocalCAGUID", m.LocalCAGUID(), 0x0200c9fffe112233},
		{"LocalQPN", uint64(m.LocalQPN()), 0x123},
		{"ResponderResources", uint64(m.ResponderResources()), 16},
		{"InitiatorDepth", uint64(m.InitiatorDepth()), 8},
		{"RemoteCMResponseTimeout", uint64(m.RemoteCMResponseTimeout()), 20},
		{"TransportServiceType", uint64(m.TransportServiceType()), 0},
		{"FlowControl", uint64(flag(m.FlowControl())), 1},
		{"StartingPSN", uint64(m.StartingPSN()), 0xabcdef},
		{"LocalCMResponseTimeout", uint64(m.LocalCMResponseTimeout()), 20},
		{"RetryCount", uint64(m.RetryCount()), 7},
		{"PKey", uint64(m.PKey()), 0xffff},
		{"PathMTU", uint64(m.PathMTU()), 3},
		{"RNRRetryCount", uint64(m.RNRRetryCount()), 7},
		{"MaxCMRetries", uint64(m.MaxCMRetries()), 15},
		{"SRQ", uint64(flag(m.SRQ())), 0},
		{"LocalLID", uint64(p.LocalLID()), 0xffff},
		{"RemoteLID", uint64(p.RemoteLID()), 0xffff},
		{"LocalGID[15]", uint64(lgid[15]), 1},
		{"RemoteGID[15]", uint64(rgid[15]), 2},
		{"FlowLabel", uint64(p.FlowLabel()), 0x12345},
		{"PacketRate", uint64(p.PacketRate()), 2},
		{"TrafficClass", uint64(p.TrafficClass()), 0x68},
		{"HopLimit", uint64(p.HopLimit()), 64},
		{"SubnetLocal", uint64(flag(p.SubnetLocal())), 0},
		{"LocalACKTimeout", uint64(p.LocalACKTimeout()), 18},
		{"AltLocalLID", uint64(m.Alternate().LocalLID()), 0},
	}
	for _, g := range got {
		if g.got != g.want {
			t.Errorf("%s = %#x, want %#x", g.name, g.got, g.want)
		}
	}
	if !bytes.HasPrefix(m.PrivateData(), []byte("hello")) || len(m.PrivateData()) != REQPrivateDataSize {
		t.Errorf("private data %q (len %d)", m.PrivateData()[:8], len(m.PrivateData()))
	}

	// The setters produce the same bytes from zero.
	b := REQ(make([]byte, Size))
	Header(b).InitCM(AttrREQ, 0x100000abc)
	b.SetLocalCommID(0x11223344)
	b.SetServiceID(0x1064e20)
	b.SetLocalCAGUID(0x0200c9fffe112233)
	b.SetLocalQPN(0x123)
	b.SetResponderResources(16)
	b.SetInitiatorDepth(8)
	b.SetRemoteCMResponseTimeout(20)
	b.SetTransportServiceType(0)
	b.SetFlowControl(true)
	b.SetStartingPSN(0xabcdef)
	b.SetLocalCMResponseTimeout(20)
	b.SetRetryCount(7)
	b.SetPKey(0xffff)
	b.SetPathMTU(3)
	b.SetRNRRetryCount(7)
	b.SetMaxCMRetries(15)
	bp := b.Primary()
	bp.SetLocalLID(0xffff)
	bp.SetRemoteLID(0xffff)
	bp.SetLocalGID(lgid)
	bp.SetRemoteGID(rgid)
	bp.SetFlowLabel(0x12345)
	bp.SetPacketRate(2)
	bp.SetTrafficClass(0x68)
	bp.SetHopLimit(64)
	bp.SetLocalACKTimeout(18)
	copy(b.PrivateData(), "hello")
	if !bytes.Equal(b, want) {
		t.Errorf("encoded REQ differs:\n got %x\nwant %x", []byte(b), want)
	}
}

func TestREPGolden(t *testing.T) {
	want := golden(t, hdr("0013")+`
24: 55667788 11223344        # local comm ID, remote comm ID
32: 00000000                 # local Q_Key
36: 000456 00                # local QPN
40: 00000000                 # local EECN
44: 123456 00                # starting PSN
48: 04 08                    # responder resources, initiator depth
50: 81                       # target ACK delay 16, failover 0, flow control 1
51: e0                       # RNR retry 7, SRQ 0
52: 0200c9fffe445566         # local CA GUID
60: 7265706c79               # "reply"
`)
	m := REP(want)
	if a, err := Check(want); err != nil || a != AttrREP {
		t.Fatalf("Check: %v %v", a, err)
	}
	c := m.CommIDs()
	if c.LocalCommID() != 0x55667788 || c.RemoteCommID() != 0x11223344 || m.LocalQPN() != 0x456 ||
		m.StartingPSN() != 0x123456 || m.ResponderResources() != 4 || m.InitiatorDepth() != 8 ||
		m.TargetACKDelay() != 16 || m.FailoverAccepted() != 0 || !m.FlowControl() || m.RNRRetryCount() != 7 ||
		m.SRQ() || m.LocalCAGUID() != 0x0200c9fffe445566 || string(m.PrivateData()[:5]) != "reply" ||
		len(m.PrivateData()) != REPPrivateDataSize {
		t.Errorf("REP fields wrong")
	}
	b := REP(make([]byte, Size))
	Header(b).InitCM(AttrREP, 0x100000abc)
	b.CommIDs().SetLocalCommID(0x55667788)
	b.CommIDs().SetRemoteCommID(0x11223344)
	b.SetLocalQPN(0x456)
	b.SetStartingPSN(0x123456)
	b.SetResponderResources(4)
	b.SetInitiatorDepth(8)
	b.SetTargetACKDelay(16)
	b.SetFlowControl(true)
	b.SetRNRRetryCount(7)
	b.SetLocalCAGUID(0x0200c9fffe445566)
	copy(b.PrivateData(), "reply")
	if !bytes.Equal(b, want) {
		t.Errorf("encoded REP differs:\n got %x\nwant %x", []byte(b), want)
	}
}

func TestREJGolden(t *testing.T) {
	want := golden(t, hdr("0012")+`
24: 00000000 11223344        # local comm ID 0 (rejecting a REQ), remote comm ID
32: 00                       # message rejected: REQ
33: 10                       # rejected info length 8 (7 bits from the MSB: 0001000 0)
34: 001c                     # reason 28 consumer defined
36: 0200c9fffe445566         # ARI
108: 6e6f                    # "no"
`)
	m := REJ(want)
	if m.MessageRejected() != MsgREQ || m.RejectedInfoLength() != 8 || m.Reason() != 28 ||
		m.CommIDs().RemoteCommID() != 0x11223344 || m.ARI()[0] != 0x02 || len(m.ARI()) != REJARISize ||
		string(m.PrivateData()[:2]) != "no" || len(m.PrivateData()) != REJPrivateDataSize {
		t.Errorf("REJ fields wrong: rejected %d len %d reason %d", m.MessageRejected(), m.RejectedInfoLength(), m.Reason())
	}
	b := REJ(make([]byte, Size))
	Header(b).InitCM(AttrREJ, 0x100000abc)
	b.CommIDs().SetRemoteCommID(0x11223344)
	b.SetMessageRejected(MsgREQ)
	b.SetRejectedInfoLength(8)
	b.SetReason(28)
	copy(b.ARI(), want[36:44])
	copy(b.PrivateData(), "no")
	if !bytes.Equal(b, want) {
		t.Errorf("encoded REJ differs:\n got %x\nwant %x", []byte(b), want)
	}
	b.SetMessageRejected(MsgOther)
	if b[32] != 0x80 {
		t.Errorf("message rejected OTHER is byte %#x, want 0x80", b[32])
	}
}

func TestMRADREQSIDRGolden(t *testing.T) {
	mra := golden(t, hdr("0011")+`
24: 55667788 11223344
32: 40                       # message MRAed: REP (01 in the top two bits)
33: c0                       # service timeout 24 (11000 in the top five bits)
`)
	m := MRA(mra)
	if m.MessageMRAed() != MsgREP || m.ServiceTimeout() != 24 || len(m.PrivateData()) != MRAPrivateDataSize {
		t.Errorf("MRA: mraed %d timeout %d", m.MessageMRAed(), m.ServiceTimeout())
	}
	dreq := golden(t, hdr("0015")+`
24: 11223344 55667788
32: 000456                   # remote QPN
36: 6279                     # "by"
`)
	d := DREQ(dreq)
	if d.RemoteQPN() != 0x456 || string(d.PrivateData()[:2]) != "by" || len(d.PrivateData()) != DREQPrivateDataSize {
		t.Errorf("DREQ: qpn %#x", d.RemoteQPN())
	}
	sreq := golden(t, hdr("0017")+`
24: 0000abcd ffff 0000       # request ID, P_Key
32: 0000000002114e20         # service ID (RDMA_PS_UDP, port 20000)
40: 01                       # private data
`)
	s := SIDRREQ(sreq)
	if s.RequestID() != 0xabcd || s.PKey() != 0xffff || s.ServiceID() != 0x2114e20 || s.PrivateData()[0] != 1 ||
		len(s.PrivateData()) != SIDRREQPrivateDataSize {
		t.Errorf("SIDR_REQ fields wrong")
	}
	srep := golden(t, hdr("0018")+`
24: 0000abcd 00 00 0000      # request ID, status success, info length
32: 000789 00                # QPN
36: 0000000002114e20         # service ID
44: 80010000                 # the UD QP's Q_Key
`)
	r := SIDRREP(srep)
	if r.RequestID() != 0xabcd || r.Status() != 0 || r.QPN() != 0x789 || r.ServiceID() != 0x2114e20 ||
		r.QKey() != 0x80010000 || len(r.Info()) != SIDRREPInfoSize || len(r.PrivateData()) != SIDRREPPrivateDataSize {
		t.Errorf("SIDR_REP fields wrong")
	}
	b := SIDRREP(make([]byte, Size))
	Header(b).InitCM(AttrSIDRREP, 0x100000abc)
	b.SetRequestID(0xabcd)
	b.SetQPN(0x789)
	b.SetServiceID(0x2114e20)
	b.SetQKey(0x80010000)
	if !bytes.Equal(b, srep) {
		t.Errorf("encoded SIDR_REP differs:\n got %x\nwant %x", []byte(b), srep)
	}
}

func TestCheck(t *testing.T) {
	good := golden(t, hdr("0014"))
	mod := func(off int, v byte) []byte {
		b := bytes.Clone(good)
		b[off] = v
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		attr AttrID
		err  error
	}{
		{"RTU", good, AttrRTU, nil},
		{"truncated", good[:255], 0, ErrTruncated},
		{"empty", nil, 0, ErrTruncated},
		{"base version", mod(0, 2), 0, ErrBaseVersion},
		{"class", mod(1, 0x03), 0, ErrClass},
		{"class version", mod(2, 1), 0, ErrClassVersion},
		{"method GET", mod(3, 0x01), 0, ErrMethod},
		{"attr LAP", mod(17, 0x19), AttrLAP, ErrUnsupportedAttr},
		{"attr 0x1b", mod(17, 0x1b), 0x1b, ErrUnknownAttr},
		{"attr 0x0f", mod(17, 0x0f), 0x0f, ErrUnknownAttr},
		{"attr SIDR_REP", mod(17, 0x18), AttrSIDRREP, nil},
		{"attr high byte", mod(16, 0x01), 0x0114, ErrUnknownAttr},
	} {
		a, err := Check(c.b)
		if a != c.attr || err != c.err {
			t.Errorf("%s: Check = %v, %v; want %v, %v", c.name, a, err, c.attr, c.err)
		}
	}
	if AttrSIDRREQ.String() != "SIDR_REQ" || AttrID(0x99).String() != "attr-0x0099" {
		t.Errorf("names: %v %v", AttrSIDRREQ, AttrID(0x99))
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		name, spec, want string
	}{
		{"REQ", reqGolden, "cm=REQ tid=0x100000abc lcid=0x11223344 sid=0x0000000001064e20 qpn=0x123 spsn=11259375"},
		{"REJ", hdr("0012") + "24: 00000000 11223344\n32: 00 00 0008\n",
			"cm=REJ tid=0x100000abc lcid=0x0 rcid=0x11223344 reason=8 rejected=REQ"},
		{"DREQ", hdr("0015") + "24: 11223344 55667788\n32: 000456\n",
			"cm=DREQ tid=0x100000abc lcid=0x11223344 rcid=0x55667788 qpn=0x456"},
		{"SIDR_REP", hdr("0018") + "24: 0000abcd 01\n32: 000789 00 0000000002114e20 00000007\n",
			"cm=SIDR_REP tid=0x100000abc reqid=0xabcd sid=0x0000000002114e20 qpn=0x789 status=1 qkey=0x7"},
	} {
		s, err := Describe(golden(t, c.spec))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := s.String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

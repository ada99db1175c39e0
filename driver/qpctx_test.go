package driver

import (
	"net/netip"
	"testing"
)

// TestRoCECtxIPv4RC pins all 32 qwords of the host context of an IPv4 RC QP
// in RTS, hand-computed from ctrl.c:irdma_sc_qp_setctx_roce_gen_2 as
// docs/hw-controlpath.md "QP host context" lists it ("MAC and IP byte order"
// for the addresses).
func TestRoCECtxIPv4RC(t *testing.T) {
	c := roceCtx{
		RQWQESize: 1, SQPA: 0x1_0000_0000, RQPA: 0x1_0000_2000, HWSQSize: 4, HWRQSize: 3,
		PushIdx: invalidPushIdx, QSHandle: 7, SendCQ: 3, RecvCQ: 4, QPComplCtx: 0x9f00_0000_0000_0012,
		PDID: 0x12345, PKey: 0xffff, AckCredits: 0x1e, QKey: 0x1111_1111, DestQP: 0x34, RTOMin: 5,
		MAC: [6]byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}, ORDSize: 0xff, IRDSize: 127,
		WrRdRespEn: true, RdEn: true, BindEn: true, FastRegEn: true, UDPrivCQEn: true, PrivModeEn: true,
		IPv4: true, TTL: 64, SrcPort: 0xc123, DstPort: 4791, DestIP: [4]uint32{0, 0, 0, 0xc000_0202},
		LocalIP: [4]uint32{0, 0, 0, 0xc000_0201}, SndMSS: 1024, ARPIdx: 4, PSNNxt: 0x100, LSN: 0xffff,
		EPSN: 0x200, PSNMax: 0x100, PSNUna: 0x100, CWnd: 0x400, RexmitThresh: 7, RNRNakThresh: 6,
		RemEndpointIdx: 4,
	}
	want := [32]uint64{
		0:  0x0010_0108,           // RQWQESIZE [9:8]=1 | PDIDXHI [21:20]=1 | IPV4 b3
		1:  0x1_0000_0000,         // SQ address
		2:  0x1_0000_2000,         // RQ address
		3:  0x12b7_c123_0000_4340, // TTL 64 | RQSIZE 3 | SQSIZE 4 | TOS 0 | SRCPORT 0xc123 | DESTPORT 4791
		4:  0xc000_0202,           // DESTIPADDR3 (IPv4) [31:0], DESTIPADDR2 0
		5:  0,                     // DESTIPADDR0/1
		6:  0x0004_0000_0400_0000, // SNDMSS [29:16]=1024 | VLANTAG 0 | ARPIDX [63:48]=4
		7:  0x2345_ffff_01e0_0000, // FLOWLABEL 0 | ACKCREDITS [24:20]=0x1e | PKEY [47:32] | PDIDX [63:48]
		8:  0x1111_1111_0000_0034, // DESTQP | QKEY
		10: 0x0000_ffff_0000_0100, // PSNNXT | LSN 0xffff
		11: 0x200,                 // EPSN
		12: 0x0000_0100_0000_0100, // PSNMAX | PSNUNA
		14: 0x0000_0400_0000_0000, // CWNDROCE [55:32]
		16: 0x0b87_0000_0000_0000, // REXMIT [53:48]=7 | RNRNAK [56:54]=6 | RTOMIN [63:57]=5
		17: 0x0000_0004_0000_0003, // TXCQNUM 3 | RXCQNUM 4
		19: 0x0211_2233_4455_0000, // MAC << 16
		// ORDSIZE 0xff | IRDSIZE [18:16]=4 (127 → 256) | UDPRIVCQ b19 | WRRDRSPOK b20 |
		// RDOK b21 | BINDEN b23 | FASTREGEN b24 | PRIVEN b25
		20: 0x03bc_00ff,
		21: 0x9f00_0000_0000_0012, // QP completion context
		22: 0x0007_0000,           // QSHANDLE [25:16]=7
		23: 0xc000_0201,           // LOCAL_IPADDR3 (IPv4)
		26: 4,                     // REMENDPOINTIDX
	}
	got := encodeRoCECtx(&c)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("+%d: got %#016x want %#016x", 8*i, got[i], want[i])
		}
	}
}

// TestRoCECtxIPv6 covers the IPv6 word layout, VLAN insertion, the
// ECN rule with DCQCN, push page and error-RQ-index fields.
func TestRoCECtxIPv6(t *testing.T) {
	d6, _ := ipWords(netip.MustParseAddr("2001:db8::2"))
	l6, _ := ipWords(netip.MustParseAddr("fe80::11:22"))
	c := roceCtx{
		PushIdx: 9, DestIP: d6, LocalIP: l6, InsertVLANTag: true, VLANTag: 0x6005, TOS: 0x20,
		DCQCNEn: true, ErrRQIdxValid: true, ErrRQIdx: 0x7fff, FlowLabel: 0xfffff, IsQP1: true,
		IRDSize: 4, ORDSize: 8, StatsIdx: 5, StatsIdxValid: true, THigh: 0xabc, TLow: 0x12,
		RemEndpointIdx: 0x1ffff, SendCQ: 0x1ffffff, RecvCQ: 0x1ffffff,
	}
	got := encodeRoCECtx(&c)
	want := map[int]uint64{
		0:  0x0000_8009_0008_0060, // ISQP1 b6 | INSERTVLANTAG b5 | ERR_RQ_IDX_VALID b19 | PPIDX 9 | PMENA b47
		3:  0x0000_0000_2200_0000, // TOS 0x20 | ECT(0) 0x02
		4:  0x0000_0000_0000_0002, // DESTIPADDR2 | DESTIPADDR3
		5:  0x2001_0db8_0000_0000, // DESTIPADDR0 | DESTIPADDR1
		6:  0x0000_6005_0000_0000, // VLANTAG [47:32]
		7:  0x000f_ffff,           // FLOWLABEL [19:0]
		16: 0x0000_7fff_0000_0000, // ERR_RQ_IDX [46:32]
		17: 0x01ff_ffff_01ff_ffff, // TXCQNUM [24:0] | RXCQNUM [56:32]
		18: 5,                     // STAT_INDEX
		20: 0x0441_0008,           // ORDSIZE 8 | IRDSIZE 1 (4 → 8) | DCQCNENABLE b22 | USESTATSINSTANCE b26
		23: 0x0000_0000_0011_0022, // LOCAL_IPADDR2 | 3
		24: 0xfe80_0000_0000_0000, // LOCAL_IPADDR0 | 1
		25: 0xabc0_0012_0000_0000, // THIGH [63:52] | TLOW [39:32]
		26: 0x1_ffff,              // REMENDPOINTIDX [16:0]
	}
	for i, w := range got {
		if w != want[i] {
			t.Errorf("+%d: got %#016x want %#016x", 8*i, w, want[i])
		}
	}
}

func TestEncodedIRD(t *testing.T) {
	for ird, enc := range map[uint32]uint64{1: 0, 2: 0, 4: 1, 8: 1, 16: 2, 32: 2, 64: 3, 127: 4, 128: 4, 129: 0} {
		if got := encodedIRDSize(ird); got != enc {
			t.Errorf("encodedIRDSize(%d) = %d, want %d", ird, got, enc)
		}
	}
	for quanta, enc := range map[uint32]uint64{8: 1, 16: 2, 64: 4, 32768: 13} {
		if got := encodedWQSize(quanta); got != enc {
			t.Errorf("encodedWQSize(%d) = %d, want %d", quanta, got, enc)
		}
	}
}

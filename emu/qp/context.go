package qp

import (
	"encoding/binary"
	"net/netip"
)

// ContextSize is the size of the RoCE QP host context the driver builds
// (IRDMA_QP_CTX_SIZE, docs/hw-controlpath.md "QP host context").
const ContextSize = 256

// Context is a typed view of the GEN_2 RoCE QP host context, the 256 bytes
// irdma_sc_qp_setctx_roce_gen_2 writes (docs/hw-controlpath.md "QP host
// context"). Decode only: the driver half has its own encoder. Accessors take
// the wider (newer-kernel) masks where widths moved (docs/hw-controlpath.md
// "Version differences"); the extra bits are zero from older drivers. The
// view must be ContextSize bytes long (NewContext checks).
type Context []byte

// NewContext returns b as a Context if it is long enough.
func NewContext(b []byte) (Context, bool) {
	if len(b) < ContextSize {
		return nil, false
	}
	return Context(b[:ContextSize]), true
}

func (c Context) q(off int) uint64 { return binary.LittleEndian.Uint64(c[off:]) }

func (c Context) f(off int, shift, width uint) uint64 {
	return c.q(off) >> shift & (1<<width - 1)
}

func (c Context) bit(off int, n uint) bool { return c.q(off)>>n&1 == 1 }

// Qword returns the 64-bit word at byte offset off (a multiple of 8).
func (c Context) Qword(off int) uint64 { return c.q(off) }

// +0
func (c Context) RQWQESize() uint8    { return uint8(c.f(0, 8, 2)) } // RQWQESIZE [9:8]: RQ WQE size shift
func (c Context) IPv4() bool          { return c.bit(0, 3) }         // IPV4
func (c Context) InsertVLANTag() bool { return c.bit(0, 5) }         // INSERTVLANTAG
func (c Context) IsQP1() bool         { return c.bit(0, 6) }         // ISQP1 (GSI)
func (c Context) UseSRQ() bool        { return c.bit(0, 10) }        // USE_SRQ (GEN_3; reserved on GEN_2)

// SRQID is IRDMAQPC_SRQ_ID, qword 25 (byte 200) [15:0] (GEN_3,
// ctrl.c:irdma_sc_qp_setctx_roce_gen_3; reserved on GEN_2).
func (c Context) SRQID() uint32       { return uint32(c.f(200, 0, 16)) }
func (c Context) ErrRQIdxValid() bool { return c.bit(0, 19) }         // ERR_RQ_IDX_VALID
func (c Context) PDIdxHi() uint8      { return uint8(c.f(0, 20, 2)) } // PDIDXHI [21:20] = pd >> 16
func (c Context) DCTCPEn() bool       { return c.bit(0, 25) }
func (c Context) RcvTPHEn() bool      { return c.bit(0, 28) }
func (c Context) XmitTPHEn() bool     { return c.bit(0, 29) }
func (c Context) RQTPHEn() bool       { return c.bit(0, 30) }
func (c Context) SQTPHEn() bool       { return c.bit(0, 31) }
func (c Context) PushPageIdx() uint16 { return uint16(c.f(0, 32, 10)) } // PPIDX [41:32]
func (c Context) PushModeEn() bool    { return c.bit(0, 47) }           // PMENA
func (c Context) RoCETVer() uint8     { return uint8(c.f(0, 60, 4)) }   // ROCE_TVER [63:60]

// +8, +16: ring addresses (PA, or level-1 PBLE index when the WQE's VQ is set).
func (c Context) SQAddr() uint64 { return c.q(8) }
func (c Context) RQAddr() uint64 { return c.q(16) }

// +24
func (c Context) TTL() uint8       { return uint8(c.f(24, 0, 8)) }    // TTL (hop limit)
func (c Context) RQSize() uint8    { return uint8(c.f(24, 8, 4)) }    // RQSIZE = log2(RQ quanta) − 2
func (c Context) SQSize() uint8    { return uint8(c.f(24, 12, 4)) }   // SQSIZE = log2(SQ quanta) − 2
func (c Context) TOS() uint8       { return uint8(c.f(24, 24, 8)) }   // TOS
func (c Context) SrcPort() uint16  { return uint16(c.f(24, 32, 16)) } // SRCPORTNUM
func (c Context) DestPort() uint16 { return uint16(c.f(24, 48, 16)) } // DESTPORTNUM

// DestIPWords returns DESTIPADDR0..3 (+40 [63:32], +40 [31:0], +32 [63:32],
// +32 [31:0]); each word is a host-order ntohl value (docs/hw-controlpath.md
// "MAC and IP byte order").
func (c Context) DestIPWords() [4]uint32 {
	return [4]uint32{uint32(c.q(40) >> 32), uint32(c.q(40)), uint32(c.q(32) >> 32), uint32(c.q(32))}
}

// +48
func (c Context) SndMSS() uint16  { return uint16(c.f(48, 16, 14)) } // SNDMSS [29:16]: path MTU in bytes
func (c Context) VLANTag() uint16 { return uint16(c.f(48, 32, 16)) } // VLANTAG
func (c Context) ARPIdx() uint16  { return uint16(c.f(48, 48, 16)) } // ARPIDX

// +56
func (c Context) FlowLabel() uint32 { return uint32(c.f(56, 0, 20)) }
func (c Context) AckCredits() uint8 { return uint8(c.f(56, 20, 5)) }
func (c Context) PKey() uint16      { return uint16(c.f(56, 32, 16)) }
func (c Context) PDIdx() uint16     { return uint16(c.f(56, 48, 16)) } // PDIDX = pd & 0xffff

// PD returns the 18-bit protection domain (PDIDXHI << 16 | PDIDX).
func (c Context) PD() uint32 { return uint32(c.PDIdxHi())<<16 | uint32(c.PDIdx()) }

// +64
func (c Context) DestQP() uint32 { return uint32(c.f(64, 0, 24)) }
func (c Context) QKey() uint32   { return uint32(c.q(64) >> 32) }

// +80 .. +112: PSNs and window.
func (c Context) PSNNext() uint32  { return uint32(c.f(80, 0, 24)) }  // PSNNXT
func (c Context) LSN() uint32      { return uint32(c.f(80, 32, 24)) } // LSN
func (c Context) EPSN() uint32     { return uint32(c.f(88, 0, 24)) }  // EPSN
func (c Context) PSNMax() uint32   { return uint32(c.f(96, 0, 24)) }  // PSNMAX
func (c Context) PSNUna() uint32   { return uint32(c.f(96, 32, 24)) } // PSNUNA
func (c Context) CwndRoCE() uint32 { return uint32(c.f(112, 32, 24)) }

// +128
func (c Context) ErrRQIdx() uint32    { return uint32(c.f(128, 32, 15)) } // ERR_RQ_IDX [46:32]
func (c Context) RexmitThresh() uint8 { return uint8(c.f(128, 48, 6)) }   // REXMIT_THRESH (retry_cnt)
func (c Context) RNRNakThresh() uint8 { return uint8(c.f(128, 54, 3)) }   // RNRNAK_THRESH (rnr_retry)
func (c Context) RTOMin() uint8       { return uint8(c.f(128, 57, 7)) }   // RTOMIN

// +136
func (c Context) TxCQNum() uint32 { return uint32(c.f(136, 0, 25)) }  // TXCQNUM [24:0]
func (c Context) RxCQNum() uint32 { return uint32(c.f(136, 32, 25)) } // RXCQNUM [56:32]

// +144
func (c Context) StatIndex() uint8 { return uint8(c.f(144, 0, 7)) }

// LocalMAC returns the source MAC (+152 [63:16], mac[0] most significant:
// ether_addr_to_u64).
func (c Context) LocalMAC() [6]byte {
	v := c.q(152) >> 16
	var m [6]byte
	for i := range m {
		m[i] = byte(v >> (40 - 8*uint(i)))
	}
	return m
}

// +160
func (c Context) ORDSize() uint8         { return uint8(c.f(160, 0, 8)) }
func (c Context) IRDSizeEnc() uint8      { return uint8(c.f(160, 16, 3)) } // IRDSIZE: 0:4, 1:16, 2:64, 3:128, 4:256
func (c Context) UDPrivCQEn() bool       { return c.bit(160, 19) }
func (c Context) WrRdRespOK() bool       { return c.bit(160, 20) }
func (c Context) RdOK() bool             { return c.bit(160, 21) }
func (c Context) DCQCNEnable() bool      { return c.bit(160, 22) }
func (c Context) BindEn() bool           { return c.bit(160, 23) }
func (c Context) FastRegEn() bool        { return c.bit(160, 24) }
func (c Context) PrivEn() bool           { return c.bit(160, 25) }
func (c Context) UseStatsInstance() bool { return c.bit(160, 26) }
func (c Context) TimelyEnable() bool     { return c.bit(160, 27) }
func (c Context) FWCCEnable() bool       { return c.bit(160, 28) }
func (c Context) RcvNoICRC() bool        { return c.bit(160, 31) }

// CompletionCtx is +168: returned in CQE qword1 and AEQE qword0.
func (c Context) CompletionCtx() uint64 { return c.q(168) }

// +176
func (c Context) SQTPHVal() uint8  { return uint8(c.f(176, 0, 8)) }
func (c Context) RQTPHVal() uint8  { return uint8(c.f(176, 8, 8)) }
func (c Context) QSHandle() uint16 { return uint16(c.f(176, 16, 10)) }

// LocalIPWords returns LOCAL_IPADDR0..3 (+192 [63:32], +192 [31:0],
// +184 [63:32], +184 [31:0]).
func (c Context) LocalIPWords() [4]uint32 {
	return [4]uint32{uint32(c.q(192) >> 32), uint32(c.q(192)), uint32(c.q(184) >> 32), uint32(c.q(184))}
}

// +200, +208
func (c Context) TimelyLow() uint8       { return uint8(c.f(200, 32, 8)) }
func (c Context) TimelyHigh() uint16     { return uint16(c.f(200, 52, 12)) }
func (c Context) RemEndpointIdx() uint32 { return uint32(c.f(208, 0, 17)) }

// GEN_3's remote-atomic enable in the GEN_2 layout the emulator keeps for
// GEN_3 (docs/hw-controlpath.md "QP host context"): REMOTE_ATOMIC_EN sits
// at GEN_3's position, +160 b18 (defs.h IRDMAQPC_REMOTE_ATOMIC_EN, written
// by ctrl.c:irdma_sc_qp_setctx_roce_gen_3 from ctx_info->remote_atomics_en),
// so IRDSIZE keeps its GEN_2 encoding in [17:16] only: GEN_3's largest
// IRD, 64, encodes as 3. On GEN_2 b18 is IRDSIZE's top bit.
func (c Context) RemoteAtomicEnGen3() bool { return c.bit(160, 18) }
func (c Context) IRDSizeEncGen3() uint8    { return uint8(c.f(160, 16, 2)) }

// IRDEntries decodes IRDSIZE to the responder resource count
// (irdma_sc_get_encoded_ird_size: 4→0, 8/16→1, 32/64→2, 128→3, 256→4).
func IRDEntries(enc uint8) uint32 {
	switch enc {
	case 0:
		return 4
	case 1:
		return 16
	case 2:
		return 64
	case 3:
		return 128
	case 4:
		return 256
	}
	return 0
}

// ipFromWords builds an address from the context's host-order words:
// IPv4 uses word 3 only (verbs.c:irdma_modify_qp_roce).
func ipFromWords(w [4]uint32, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{byte(w[3] >> 24), byte(w[3] >> 16), byte(w[3] >> 8), byte(w[3])})
	}
	var b [16]byte
	for i, x := range w {
		binary.BigEndian.PutUint32(b[4*i:], x)
	}
	return netip.AddrFrom16(b)
}

// DestIP returns the destination address (IPv4 when the IPV4 bit is set).
func (c Context) DestIP() netip.Addr { return ipFromWords(c.DestIPWords(), c.IPv4()) }

// LocalIP returns the source address.
func (c Context) LocalIP() netip.Addr { return ipFromWords(c.LocalIPWords(), c.IPv4()) }

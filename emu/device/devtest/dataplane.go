package devtest

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// Data-plane helpers: CQs, QPs, MRs, ARP entries and address handles set up
// through hand-written CQP WQEs, the way irdma's verbs issue them
// (docs/hw-controlpath.md, the WQE sections to "PBLEs"), so that the data
// plane can be driven in tests without the driver half. Rings live in their
// own host-memory regions, so a test can hand their bytes (Region.Bytes) to a
// WQE builder and a CQE poller.

// CQ is a CQ created with CreateCQ.
type CQ struct {
	ID     uint32
	Size   uint32
	Ring   *hostmem.Region // Size × 32 bytes
	Shadow *hostmem.Region // 64 bytes: head at +0, arm word at +32
	Ctx    uint64          // the CQ context echoed in CEQEs
}

// CreateCQ creates CQ id with size 32-byte CQEs on CEQ 0 (ENCEQEMASK,
// CHKOVERFLOW, as irdma_create_cq).
func (e *Env) CreateCQ(id, size uint32) *CQ {
	e.TB.Helper()
	c := &CQ{ID: id, Size: size, Ctx: 0x4000_0000_0000_0000 | uint64(id)}
	c.Ring = e.alloc(int(size)*32, 256, "cq-ring")
	c.Shadow = e.alloc(64, 64, "cq-shadow")
	e.MustOK(e.Exec([8]uint64{
		0: uint64(size),            // qw0: cq_size
		1: c.Ctx,                   // qw1: CQ context
		2: uint64(size / 2),        // qw2: SHADOW_READ_THRESHOLD
		4: uint64(c.Ring.IOVA()),   // qw4: ring PA
		5: uint64(c.Shadow.IOVA()), // qw5: shadow area PA
		3: 0x03<<32 | uint64(id)&0x7ffff | // OPCODE CREATE_CQ, CQID [18:0]
			0<<22 | // CEQID [31:22] = 0
			1<<46 | // CHKOVERFLOW
			1<<48 | // ENCEQEMASK
			1<<49, // CEQIDVALID
	}), "CREATE_CQ")
	return c
}

// QPSpec describes a RoCE QP: the host context fields irdma writes
// (docs/hw-controlpath.md "QP host context") and the ring sizes.
type QPSpec struct {
	ID       uint32
	UD       bool   // RoCE UD (QPTYPE 4) instead of RC (3)
	SQQuanta uint32 // power of two ≥ 8
	RQWQEs   uint32 // power of two; RQ quanta = RQWQEs << RQShift ≥ 8
	RQShift  uint8  // RQWQESIZE: RQ WQEs of 1 << RQShift quanta
	SendCQ   uint32
	RecvCQ   uint32
	PD       uint32
	MTU      uint16 // SNDMSS: path MTU in bytes
	LocalIP  netip.Addr
	DestIP   netip.Addr
	DestQP   uint32
	QKey     uint32
	SQPSN    uint32 // PSNNXT
	RQPSN    uint32 // EPSN
	ARPIdx   uint16
	RetryCnt uint8 // REXMIT_THRESH
	RNRRetry uint8 // RNRNAK_THRESH
	ORD      uint8
	IRDEnc   uint8 // IRDSIZE encoding (3: 128)
	RdOK     bool  // RDOK: remote read allowed
	WrOK     bool  // WRRDRSPOK: remote write allowed
	AtomicOK bool  // REMOTE_ATOMIC_EN (+160 b18, GEN_3 only; keep IRDEnc ≤ 3)
	FastReg  bool  // FASTREGEN
	Bind     bool  // BINDEN
	Priv     bool  // PRIVEN
	SrcPort  uint16
	TTL      uint8
	TOS      uint8
	MAC      [6]byte // local MAC
	CompCtx  uint64  // QP completion context (CQE qword1, AEQE qword0)
	QP1      bool    // ISQP1
	VLAN     uint16  // VLANTAG (with InsertVLAN)
	InsVLAN  bool
	StatsIdx uint8
	UseStats bool
}

// QP is a QP created with CreateQP: its rings, one kernel-style buffer SQ ‖
// RQ ‖ 64-byte shadow area (verbs.c:irdma_setup_kmode_qp), and its host
// context.
type QP struct {
	Spec   QPSpec
	Mem    *hostmem.Region
	SQ     []byte // the SQ ring's bytes
	RQ     []byte // the RQ ring's bytes
	Shadow []byte // the shadow area's bytes
	SQIOVA hostmem.IOVA
	RQIOVA hostmem.IOVA
	ShIOVA hostmem.IOVA
	CtxPA  hostmem.IOVA
}

func log2(v uint32) uint64 { return uint64(bits.Len32(v) - 1) }

// ipWords returns the context's host-order address words (IPv4 in word 3).
func ipWords(a netip.Addr) (w [4]uint32, v4 bool) {
	if a.Is4() || a.Is4In6() {
		b := a.Unmap().As4()
		w[3] = binary.BigEndian.Uint32(b[:])
		return w, true
	}
	b := a.As16()
	for i := range w {
		w[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return w, false
}

// Context builds the 256-byte host context of s, one qword per field group
// (irdma_sc_qp_setctx_roce_gen_2).
func (q *QP) Context() []byte {
	s := &q.Spec
	ctx := make([]byte, 256)
	put := func(off int, v uint64) { binary.LittleEndian.PutUint64(ctx[off:], v) }
	dw, v4 := ipWords(s.DestIP)
	lw, _ := ipWords(s.LocalIP)
	w0 := uint64(s.RQShift)<<8 | // RQWQESIZE [9:8]
		uint64(s.PD>>16&3)<<20 // PDIDXHI [21:20]
	if v4 {
		w0 |= 1 << 3 // IPV4
	}
	if s.InsVLAN {
		w0 |= 1 << 5 // INSERTVLANTAG
	}
	if s.QP1 {
		w0 |= 1 << 6 // ISQP1
	}
	put(0, w0)
	put(8, uint64(q.SQIOVA))  // SQ address
	put(16, uint64(q.RQIOVA)) // RQ address
	rqQuanta := s.RQWQEs << s.RQShift
	put(24, uint64(s.TTL)| // TTL [7:0]
		(log2(rqQuanta)-2)<<8| // RQSIZE [11:8]
		(log2(s.SQQuanta)-2)<<12| // SQSIZE [15:12]
		uint64(s.TOS)<<24| // TOS [31:24]
		uint64(s.SrcPort)<<32| // SRCPORTNUM [47:32]
		4791<<48) // DESTPORTNUM [63:48]
	put(32, uint64(dw[2])<<32|uint64(dw[3]))                             // DESTIPADDR2, DESTIPADDR3
	put(40, uint64(dw[0])<<32|uint64(dw[1]))                             // DESTIPADDR0, DESTIPADDR1
	put(48, uint64(s.MTU)<<16|uint64(s.VLAN)<<32|uint64(s.ARPIdx)<<48)   // SNDMSS, VLANTAG, ARPIDX
	put(56, 0x1e<<20|0xffff<<32|uint64(s.PD&0xffff)<<48)                 // ACKCREDITS, PKEY, PDIDX
	put(64, uint64(s.DestQP)|uint64(s.QKey)<<32)                         // DESTQP, QKEY
	put(80, uint64(s.SQPSN)|0xffff<<32)                                  // PSNNXT, LSN
	put(88, uint64(s.RQPSN))                                             // EPSN
	put(96, uint64(s.SQPSN)|uint64(s.SQPSN)<<32)                         // PSNMAX, PSNUNA
	put(112, 0x400<<32)                                                  // CWNDROCE
	put(128, uint64(s.RetryCnt&0x3f)<<48|uint64(s.RNRRetry&7)<<54|5<<57) // REXMIT_THRESH, RNRNAK_THRESH, RTOMIN 5
	put(136, uint64(s.SendCQ)|uint64(s.RecvCQ)<<32)                      // TXCQNUM, RXCQNUM
	put(144, uint64(s.StatsIdx))                                         // STAT_INDEX
	var mac uint64
	for _, b := range s.MAC {
		mac = mac<<8 | uint64(b)
	}
	put(152, mac<<16) // MAC [63:16]
	w160 := uint64(s.ORD) | uint64(s.IRDEnc&7)<<16
	for _, f := range []struct {
		on  bool
		bit uint
	}{{s.AtomicOK, 18}, {s.WrOK, 20}, {s.RdOK, 21}, {s.Bind, 23}, {s.FastReg, 24}, {s.Priv, 25}, {s.UseStats, 26}} {
		if f.on {
			w160 |= 1 << f.bit
		}
	}
	put(160, w160)
	put(168, s.CompCtx)                       // QP completion context
	put(176, 1<<16)                           // QSHANDLE
	put(184, uint64(lw[2])<<32|uint64(lw[3])) // LOCAL_IPADDR2, LOCAL_IPADDR3
	put(192, uint64(lw[0])<<32|uint64(lw[1])) // LOCAL_IPADDR0, LOCAL_IPADDR1
	return ctx
}

// QP states for ModifyQP (NEXTIWSTATE).
const (
	StateIdle  = 1
	StateRTS   = 2
	StateSQD   = 3
	StateRTR   = 4
	StateError = 6
)

// qpWQE is CREATE/MODIFY_QP.
func qpWQE(op uint64, q *QP, next uint64, flags uint64) [8]uint64 {
	typ := uint64(3)
	if q.Spec.UD {
		typ = 4
	}
	return [8]uint64{
		2: uint64(q.CtxPA),  // qw2: host context PA
		5: uint64(q.ShIOVA), // qw5: shadow area PA
		3: op<<32 | uint64(q.Spec.ID)&0xffffff | typ<<48 | next<<60 | flags,
	}
}

const (
	qpCQNumValid  = 1 << 47
	qpMACValid    = 1 << 51
	qpARPIdxValid = 1 << 59
	qpORDValid    = 1 << 42
)

// CreateQP allocates the rings and creates the QP in IDLE (CREATE_QP with
// MACVALID and CQNUMVALID, then MODIFY_QP to IDLE as irdma's INIT does).
func (e *Env) CreateQP(s QPSpec) *QP {
	e.TB.Helper()
	if s.SQQuanta == 0 {
		s.SQQuanta = 256
	}
	if s.RQWQEs == 0 {
		s.RQWQEs = 64
	}
	if s.MTU == 0 {
		s.MTU = 1024
	}
	if s.TTL == 0 {
		s.TTL = 64
	}
	if s.SrcPort == 0 {
		s.SrcPort = 0xc000 | uint16(s.ID)
	}
	q := &QP{Spec: s}
	sqBytes := int(s.SQQuanta) * 32
	rqBytes := int(s.RQWQEs<<s.RQShift) * 32
	q.Mem = e.alloc(sqBytes+rqBytes+64, 4096, "qp")
	b := q.Mem.Bytes()
	q.SQ, q.RQ, q.Shadow = b[:sqBytes], b[sqBytes:sqBytes+rqBytes], b[sqBytes+rqBytes:sqBytes+rqBytes+64]
	q.SQIOVA = q.Mem.IOVA()
	q.RQIOVA = q.SQIOVA + hostmem.IOVA(sqBytes)
	q.ShIOVA = q.RQIOVA + hostmem.IOVA(rqBytes)
	q.CtxPA = e.Scr(256, 256)
	e.writeCtx(q)
	e.MustOK(e.Exec(qpWQE(0x00, q, StateIdle, qpCQNumValid|qpMACValid)), "CREATE_QP")
	e.MustOK(e.Exec(qpWQE(0x01, q, StateIdle, 0)), "MODIFY_QP INIT")
	return q
}

func (e *Env) writeCtx(q *QP) {
	if err := e.Mem.Write(q.CtxPA, q.Context()); err != nil {
		e.TB.Fatalf("devtest: %v", err)
	}
}

// ModifyQP rewrites the host context from q.Spec and issues MODIFY_QP to
// next with the flags irdma_modify_qp_roce sets for it.
func (e *Env) ModifyQP(q *QP, next uint64) Completion {
	e.TB.Helper()
	e.writeCtx(q)
	var flags uint64
	switch next {
	case StateRTR:
		flags = qpARPIdxValid | qpCQNumValid
	case StateRTS:
		flags = qpARPIdxValid | qpCQNumValid | qpORDValid
	}
	return e.Exec(qpWQE(0x01, q, next, flags))
}

// Connect moves q through RTR to RTS.
func (e *Env) Connect(q *QP) {
	e.TB.Helper()
	e.MustOK(e.ModifyQP(q, StateRTR), "MODIFY_QP RTR")
	e.MustOK(e.ModifyQP(q, StateRTS), "MODIFY_QP RTS")
}

// FlushWQES issues FLUSH_WQES (irdma_sc_qp_flush_wqes) for the selected
// queues; with user codes, SQ and RQ get major 1 and the given minors.
func (e *Env) FlushWQEs(q *QP, sq, rq bool, sqMinor, rqMinor uint16) Completion {
	e.TB.Helper()
	h := uint64(0x22)<<32 | uint64(q.Spec.ID)&0xffffff
	var w2 uint64
	if sqMinor != 0 || rqMinor != 0 {
		h |= 1 << 60 // USERFLCODE
		w2 = uint64(rqMinor) | 1<<16 | uint64(sqMinor)<<32 | 1<<48
	}
	if sq {
		h |= 1 << 61
	}
	if rq {
		h |= 1 << 62
	}
	return e.Exec([8]uint64{2: w2, 3: h})
}

// DestroyQP issues DESTROY_QP.
func (e *Env) DestroyQP(q *QP) Completion {
	e.TB.Helper()
	typ := uint64(3)
	if q.Spec.UD {
		typ = 4
	}
	return e.Exec([8]uint64{3: 0x02<<32 | uint64(q.Spec.ID)&0xffffff | typ<<48})
}

// Doorbell writes the QP id to WQEALLOC (the kernel SQ doorbell).
func (e *Env) Doorbell(q *QP) { e.Dev.Write32(regs.WQEALLOC, q.Spec.ID) }

// MR rights (ARIGHTS, irdma_get_mr_access: LOCALREAD always, REMOTEWRITE
// and REMOTEREAD imply their local right).
const (
	RightsLocalRead   = 0x01
	RightsLocalWrite  = 0x02
	RightsRemoteRead  = 0x05
	RightsRemoteWrite = 0x0a
	RightsBind        = 0x10
	RightsAll         = RightsLocalRead | RightsLocalWrite | RightsRemoteRead | RightsRemoteWrite
	// RightsRemoteAtomic is not an ARIGHTS bit: RegMR sends it as REG_MR's
	// REMOTE_ATOMIC_EN (hdr b61, GEN_3), with LOCALWRITE.
	RightsRemoteAtomic = 0x40
)

// RegMR registers r as a VA-based MR (VA = its IOVA, contiguous, no PBL) of
// PD pd with index idx and key, as REG_MR (irdma_sc_mr_reg_non_shared);
// remote rights are enabled when rights has any. It returns the STag.
func (e *Env) RegMR(idx uint32, key uint8, pd uint32, r *hostmem.Region, rights uint8) uint32 {
	e.TB.Helper()
	return e.RegMRAt(idx, key, pd, r.IOVA(), uint64(r.Len()), rights)
}

// RegMRAt registers length bytes at iova (VA = iova).
func (e *Env) RegMRAt(idx uint32, key uint8, pd uint32, iova hostmem.IOVA, length uint64, rights uint8) uint32 {
	e.TB.Helper()
	h := uint64(0x0a)<<32 | 1<<43 | uint64(rights&0x1f)<<48 | 1<<59 // REG_MR | MR | ARIGHTS | VABASEDTO
	if rights&(RightsRemoteRead|RightsRemoteWrite)&^(RightsLocalRead|RightsLocalWrite) != 0 {
		h |= 1 << 53 // REMACCENABLED
	}
	if rights&RightsRemoteAtomic != 0 {
		h |= 1<<61 | uint64(RightsLocalWrite)<<48 // REMOTE_ATOMIC_EN, LOCALWRITE
	}
	e.MustOK(e.Exec([8]uint64{
		0: uint64(iova),                              // VA
		1: uint64(pd&0x3ffff)<<46 | length&(1<<46-1), // PDID | STAGLEN
		2: uint64(idx)<<8 | uint64(key),              // STAG_IDX | KEY
		4: uint64(iova),                              // reg_addr_pa
		3: h,
	}), "REG_MR")
	return idx<<8 | uint32(key)
}

// AllocSTag allocates STag index idx (ALLOC_STAG): a fast-register MR of
// maxLen bytes with a level-1 PBL at firstPBLE (mr true), or a type-2
// memory window (mr false).
func (e *Env) AllocSTag(idx, pd uint32, maxLen uint64, mr bool, firstPBLE uint32, rights uint8) {
	e.TB.Helper()
	h := uint64(0x09)<<32 | uint64(rights&0x1f)<<48 | 1<<53 // ALLOC_STAG | ARIGHTS | REMACCENABLED
	if mr {
		h |= 1<<43 | 1<<44 // MR, LPBLSIZE 1
	}
	e.MustOK(e.Exec([8]uint64{
		1: uint64(pd&0x3ffff)<<46 | maxLen&(1<<46-1),
		2: uint64(idx) << 8,
		6: uint64(firstPBLE),
		3: h,
	}), "ALLOC_STAG")
}

// SetARP adds ARP entry idx (MANAGE_ARP, ENTRYVALID).
func (e *Env) SetARP(idx uint32, mac [6]byte) {
	e.TB.Helper()
	var m uint64
	for _, b := range mac {
		m = m<<8 | uint64(b)
	}
	e.MustOK(e.Exec([8]uint64{2: m, 3: 0x0f<<32 | uint64(idx)&0xfff | 1<<42}), "MANAGE_ARP")
}

// AHSpec describes an address handle (CREATE_ADDR_HANDLE, uda.c).
type AHSpec struct {
	Index    uint32
	PD       uint32
	SrcMAC   [6]byte
	ARPIdx   uint16
	SrcIP    netip.Addr
	DestIP   netip.Addr
	TC       uint8
	HopLimit uint8
	Flow     uint32
	VLAN     uint16
	InsVLAN  bool
}

// CreateAH creates an address handle.
func (e *Env) CreateAH(a AHSpec) {
	e.TB.Helper()
	var m uint64
	for _, b := range a.SrcMAC {
		m = m<<8 | uint64(b)
	}
	dw, v4 := ipWords(a.DestIP)
	sw, _ := ipWords(a.SrcIP)
	h := uint64(0x1c)<<32 | uint64(a.Index)&0xffffff
	if v4 {
		h |= 1 << 59
	}
	if a.InsVLAN {
		h |= 1 << 60
	}
	e.MustOK(e.Exec([8]uint64{
		0: m << 16,
		1: uint64(a.VLAN) | uint64(a.TC)<<32 | uint64(a.PD&0xffff)<<48,
		2: uint64(a.Flow&0xfffff) | uint64(a.PD>>16&0xff)<<20 | uint64(a.HopLimit)<<32 | uint64(a.ARPIdx)<<48,
		4: uint64(dw[2])<<32 | uint64(dw[3]),
		5: uint64(dw[0])<<32 | uint64(dw[1]),
		6: uint64(sw[2])<<32 | uint64(sw[3]),
		7: uint64(sw[0])<<32 | uint64(sw[1]),
		3: h,
	}), "CREATE_ADDR_HANDLE")
}

// Alloc allocates a host-memory region (a data buffer) freed with the
// device.
func (e *Env) Alloc(size int, name string) *hostmem.Region {
	e.TB.Helper()
	return e.alloc(size, 4096, name)
}

// CreateMcast creates multicast group idx for the IPv4 address ip with
// destination MAC mac and the member QPs (CREATE_MCAST_GRP, uda.c
// irdma_access_mcast_grp; the MG context lists QPID | VALIDENT | DESTPORT).
func (e *Env) CreateMcast(idx uint32, ip netip.Addr, mac [6]byte, qps ...uint32) {
	e.TB.Helper()
	ctx := e.Scr(64, 64)
	for i, q := range qps {
		if err := e.Mem.Store64(ctx+hostmem.IOVA(8*i), uint64(q)&0x3ffff|1<<31|4791<<32); err != nil {
			e.TB.Fatalf("devtest: %v", err)
		}
	}
	var m uint64
	for _, b := range mac {
		m = m<<8 | uint64(b)
	}
	w, _ := ipWords(ip)
	e.MustOK(e.Exec([8]uint64{0: m, 4: uint64(ctx), 6: uint64(w[3]),
		3: 0x26<<32 | uint64(idx)&0x1fff | 1<<60}), "CREATE_MCAST_GRP")
}

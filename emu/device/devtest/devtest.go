// Package devtest brings an emulated device up the way irdma does
// (hw.c:irdma_ctrl_init_hw, docs/hw-controlpath.md "Bring-up order"), driving
// it only through its hardware interface: CQP WQEs written by hand into host
// memory, register writes, CCQEs read back. Device tests and the CQP fuzz
// target share it.
//
// Every WQE here is spelled out qword by qword from the ctrl.c layouts
// (docs/hw-controlpath.md),
// not produced by an encoder, so that a bug shared by an encoder and the
// device's decoder cannot pass.
package devtest

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// Geometry the helper uses.
const (
	// RingEnc is the encoded CQP ring size: log2(64) − 1 = 5, a 64-WQE
	// ring so that tests wrap it quickly.
	RingEnc  = 5
	RingSize = 64
	// CCQSize is the CCQ's CQE count: ring + 2 (IW_CCQ_SIZE's rule).
	CCQSize = RingSize + 2
	// CQPCtxCookie is the completion context at host context +24 (the
	// driver puts its irdma_sc_cqp pointer there).
	CQPCtxCookie = 0xffff_8880_1234_5600
	// CCQCtxCookie is the CCQ's CQ context (CREATE_CQ qword1, cq >> 1).
	CCQCtxCookie = 0x7fff_c440_0000_1000
	CEQSize      = 256
	AEQSize      = 256
	// ScratchSize is the scratch area for contexts and buffers.
	ScratchSize = 4 << 20
)

// Counts committed by Bringup (COMMIT_FPM_VAL), small enough for one or
// two SDs.
var Counts = map[int]uint64{
	0: 64, 8: 128, 32: 64, 48: 256, 96: 16, 104: 64, 112: 4096, // QP, CQ, ARP, MR, FSIMC, FSIAV, PBLE (commit offsets)
}

// Completion is what one CQP WQE returned.
type Completion struct {
	Index  uint32 // WQE index
	Major  uint16
	Minor  uint16
	RetVal uint32
	Error  bool   // CCQE ERROR (or CQP_OP_ERR when register-polled)
	CCQE   bool   // the completion came from a CCQE
	Tail   uint32 // CQPTAIL after the WQE
	Ctx    uint64 // CCQE qword1
}

// Env is a device brought up by Bringup.
type Env struct {
	TB      testing.TB
	Dev     *device.Device
	Mem     *hostmem.Memory
	HostCtx *hostmem.Region
	Ring    *hostmem.Region
	CCQ     *hostmem.Region
	CCQSh   *hostmem.Region
	CEQ     *hostmem.Region
	AEQ     *hostmem.Region
	Scratch *hostmem.Region
	SDs     []*hostmem.Region
	// Features are the QUERY_RDMA_FEATURES entries; Query the
	// QUERY_FPM_VAL buffer; Commit the COMMIT_FPM_VAL write-back.
	Features []uint64
	Query    []byte
	Commit   []byte

	head    uint32 // driver CQP head
	pol     uint64 // driver CQP polarity (valid bit of the next WQE)
	ccqOn   bool
	ccqHead uint32
	ccqPol  uint64
	aeqHead uint32
	aeqPol  uint64
	ceqHead uint32
	ceqPol  uint64
	scrNext uint64
	Timeout time.Duration
}

// Options select how far Bringup goes.
type Options struct {
	Config device.Config
	// NoCCQ stops after SHMC_PAGES_ALLOCATED (register-polled only).
	NoCCQ bool
}

func (e *Env) alloc(size int, align uint64, name string) *hostmem.Region {
	r, err := e.Mem.Alloc(size, align, name)
	if err != nil {
		e.TB.Fatalf("devtest: alloc %s: %v", name, err)
	}
	return r
}

// Scr returns a fresh, zeroed piece of the scratch area.
func (e *Env) Scr(n int, align uint64) hostmem.IOVA {
	if align == 0 {
		align = 64
	}
	off := (e.scrNext + align - 1) &^ (align - 1)
	if off+uint64(n) > ScratchSize {
		e.TB.Fatalf("devtest: scratch exhausted")
	}
	e.scrNext = off + uint64(n)
	a := e.Scratch.IOVA() + hostmem.IOVA(off)
	if err := e.Mem.Write(a, make([]byte, n)); err != nil {
		e.TB.Fatalf("devtest: scratch: %v", err)
	}
	return a
}

// New creates a device with its memory regions but does not bring it up.
func New(tb testing.TB, opt Options) *Env {
	tb.Helper()
	d, err := device.New(opt.Config)
	if err != nil {
		tb.Fatalf("devtest: device.New: %v", err)
	}
	e := &Env{TB: tb, Dev: d, Mem: d.Mem(), pol: 1 << 63, ccqPol: 1 << 63, aeqPol: 1 << 63, ceqPol: 1 << 63,
		Timeout: 5 * time.Second}
	tb.Cleanup(func() { d.Close() })
	e.HostCtx = e.alloc(4096, 0, "cqp-host-ctx")
	e.Ring = e.alloc(RingSize*64, 0x200, "cqp-ring")
	e.CCQ = e.alloc(CCQSize*32, 0x100, "ccq")
	e.CCQSh = e.alloc(64, 0, "ccq-shadow")
	e.CEQ = e.alloc(CEQSize*8, 0x100, "ceq0")
	e.AEQ = e.alloc(AEQSize*16, 0x100, "aeq")
	e.Scratch = e.alloc(ScratchSize, 0, "scratch")
	return e
}

// Bringup creates a device and brings it up: PE ready, CQP create,
// QUERY_RDMA_FEATURES, QUERY_FPM_VAL, COMMIT_FPM_VAL, UPDATE_PE_SDS,
// SHMC_PAGES_ALLOCATED, CCQ, CEQ 0, CCQ arm, AEQ, interrupt enables.
func Bringup(tb testing.TB, opt Options) *Env {
	tb.Helper()
	e := New(tb, opt)
	e.CreateCQP()
	e.QueryFeatures()
	e.QueryFPM()
	e.CommitFPM()
	e.BackSDs()
	e.MustOK(e.Exec(SHMCPagesAllocated()), "SHMC_PAGES_ALLOCATED")
	if opt.NoCCQ {
		return e
	}
	e.CreateCCQ()
	e.MustOK(e.Exec(CreateCEQ0(e.CEQ.IOVA())), "CREATE_CEQ 0")
	e.ArmCCQ()
	e.MustOK(e.Exec(CreateAEQ(e.AEQ.IOVA())), "CREATE_AEQ")
	// Interrupt causes on vector 0, vector 0 enabled (icrdma_cfg_ceq,
	// irdma_cfg_aeq, icrdma_ena_irq).
	e.Dev.Write32(regs.GLINT_CEQCTL(0), regs.GLINT_CEQCTL_CAUSE_ENA|0)
	e.Dev.Write32(regs.PFINT_AEQCTL, regs.GLINT_CEQCTL_CAUSE_ENA|0)
	e.Dev.Write32(regs.GLINT_DYN_CTL(0), regs.GLINT_DYN_CTL_INTENA)
	return e
}

// CreateCQP checks PE readiness and creates the CQP (ctrl.c:irdma_sc_cqp_init, _create).
func (e *Env) CreateCQP() {
	tb := e.TB
	tb.Helper()
	d := e.Dev
	for _, r := range []regs.Offset{regs.GLPE_CPUSTATUS0, regs.GLPE_CPUSTATUS1, regs.GLPE_CPUSTATUS2} {
		if v := d.Read32(r); v != 0x80 {
			tb.Fatalf("devtest: CPUSTATUS %#x = %#x, want 0x80", uint32(r), v)
		}
	}
	if s := d.Read32(regs.GLPCI_LBARCTRL) >> 4 & 3; s != 1 && s != 2 {
		tb.Fatalf("devtest: PE_DB_SIZE %d", s)
	}
	var ctx [64]byte
	put := func(off int, v uint64) { binary.LittleEndian.PutUint64(ctx[off:], v) }
	put(0, RingEnc<<8| // SQSIZE [11:8] = 5: 64 WQEs
		2<<3) // PROTOCOL_USED [4:3] = 2 RoCE only
	put(8, uint64(e.Ring.IOVA())) // SQ base, 512-aligned
	put(16, 1)                    // HMC_PROFILE [2:0] = 1 default
	put(24, CQPCtxCookie)         // completion context, echoed in CCQE qword1
	// HW_MAJVER [31:16]: the profile's (GEN_2 1, GEN_3 2), HW_MINVER 0.
	put(32, uint64(d.Profile().Queues.CQPHWMajorVer)<<16)
	if err := e.Mem.Write(e.HostCtx.IOVA(), ctx[:]); err != nil {
		tb.Fatalf("devtest: %v", err)
	}
	d.Write32(regs.CQPTAIL, 0)
	d.Write32(regs.CQPDB, 0)
	d.Write32(regs.CCQPSTATUS, 0)
	pa := uint64(e.HostCtx.IOVA())
	d.Write32(regs.CCQPHIGH, uint32(pa>>32))
	d.Write32(regs.CCQPLOW, uint32(pa))
	st := e.waitReg(regs.CCQPSTATUS, func(v uint32) bool { return v != 0 })
	if st != regs.CCQPSTATUS_DONE {
		tb.Fatalf("devtest: CCQPSTATUS %#x, CQPERRCODES %#x", st, d.Read32(regs.CQPERRCODES))
	}
}

func (e *Env) waitReg(off regs.Offset, ok func(uint32) bool) uint32 {
	deadline := time.Now().Add(e.Timeout)
	for {
		v := e.Dev.Read32(off)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			e.TB.Fatalf("devtest: register %#x stuck at %#x", uint32(off), v)
		}
		runtime.Gosched()
	}
}

// Post writes w into the next ring slot, header last with the valid bit
// at the driver's polarity, and rings CQPDB with the new head. It returns
// the slot index.
func (e *Env) Post(w [8]uint64) uint32 {
	idx := e.head
	slot := e.Ring.IOVA() + hostmem.IOVA(idx)*64
	var b [64]byte
	for i, q := range w {
		if i != 3 {
			binary.LittleEndian.PutUint64(b[8*i:], q)
		}
	}
	// The header qword is stored once, last: writing the 64 bytes whole
	// would put a zero header in the slot first, and on every odd lap a
	// zero valid bit is the device's current polarity, so the device could
	// take that half-written slot for a CREATE_QP (0x00) WQE. A driver
	// never stores the header before the rest (ctrl.c builds every WQE
	// with the header's set_64bit_val after dma_wmb).
	if err := e.Mem.Write(slot, b[:24]); err != nil {
		e.TB.Fatalf("devtest: %v", err)
	}
	if err := e.Mem.Write(slot+32, b[32:]); err != nil {
		e.TB.Fatalf("devtest: %v", err)
	}
	if err := e.Mem.Store64(slot+24, w[3]&^(1<<63)|e.pol); err != nil {
		e.TB.Fatalf("devtest: %v", err)
	}
	e.head++
	if e.head == RingSize {
		e.head = 0
		e.pol ^= 1 << 63
	}
	e.Dev.Write32(regs.CQPDB, e.head)
	return idx
}

// Exec posts w and waits for its completion: CQPTAIL moving to the next
// index, then (once the CCQ exists) the CCQE, whose head the helper
// returns to the device through the CCQ shadow area.
func (e *Env) Exec(w [8]uint64) Completion {
	e.TB.Helper()
	idx := e.Post(w)
	want := e.head
	t := e.waitReg(regs.CQPTAIL, func(v uint32) bool { return v&regs.CQPTAIL_WQTAIL == want })
	c := Completion{Index: idx, Tail: t, Error: t&regs.CQPTAIL_CQP_OP_ERR != 0}
	if c.Error {
		ec := e.Dev.Read32(regs.CQPERRCODES)
		c.Major, c.Minor = uint16(ec>>16), uint16(ec)
	}
	if e.ccqOn {
		if q, ok := e.PollCCQ(); ok {
			c.CCQE = true
			c.Ctx = q[1]
			c.RetVal = uint32(q[2])
			c.Minor = uint16(q[3])
			c.Error = q[3]>>55&1 == 1
			if c.Error {
				c.Major = uint16(q[3] >> 16)
			}
			if got := uint32(q[3] >> 32 & 0x7fff); got != idx {
				e.TB.Errorf("devtest: CCQE WQE index %d, want %d", got, idx)
			}
		}
	}
	return c
}

// PollCCQ consumes the next CCQE if its valid bit matches, waiting up to
// the timeout for it (the CCQE is written before CQPTAIL moves).
func (e *Env) PollCCQ() ([4]uint64, bool) {
	var q [4]uint64
	a := e.CCQ.IOVA() + hostmem.IOVA(e.ccqHead)*32
	v, err := e.Mem.Load64(a + 24)
	if err != nil || v&(1<<63) != e.ccqPol {
		return q, false
	}
	for i := range 3 {
		q[i], _ = e.Mem.Load64(a + hostmem.IOVA(8*i))
	}
	q[3] = v
	e.ccqHead++
	if e.ccqHead == CCQSize {
		e.ccqHead = 0
		e.ccqPol ^= 1 << 63
	}
	_ = e.Mem.Store64(e.CCQSh.IOVA(), uint64(e.ccqHead)) // shadow +0: new head
	return q, true
}

// SetCCQ tells the helper the CCQ exists (or not).
func (e *Env) SetCCQ(on bool) { e.ccqOn = on }

// MustOK fails the test unless c succeeded.
func (e *Env) MustOK(c Completion, what string) Completion {
	e.TB.Helper()
	if c.Error || c.Major != 0 {
		e.TB.Fatalf("devtest: %s failed: major %#x minor %#x (ccqe %v)", what, c.Major, c.Minor, c.CCQE)
	}
	return c
}

// QueryFeatures runs QUERY_RDMA_FEATURES with a 272-byte buffer (34
// entries, the GEN_3-era IRDMA_MAX_FEATURES).
func (e *Env) QueryFeatures() {
	buf := e.Scr(272, 16)
	e.MustOK(e.Exec([8]uint64{
		4: uint64(buf), // qw4: buffer PA
		3: 0x12<<32 | // OPCODE 0x12 QUERY_RDMA_FEATURES
			272, // BUF_LEN [31:0]
	}), "QUERY_RDMA_FEATURES")
	first, _ := e.Mem.Load64(buf)
	n := int(first >> 32 & 0xffff) // FEATURE_CNT [47:32]
	e.Features = nil
	for i := 0; i < n && i < 34; i++ {
		v, _ := e.Mem.Load64(buf + hostmem.IOVA(8*i))
		e.Features = append(e.Features, v)
	}
}

// QueryFPM runs QUERY_FPM_VAL into a 200-byte buffer.
func (e *Env) QueryFPM() {
	buf := e.Scr(200, 8)
	e.MustOK(e.Exec([8]uint64{
		2: 0,           // qw2: hmc_fn_id 0
		4: uint64(buf), // qw4: buffer PA
		3: 0x20 << 32,  // OPCODE 0x20 QUERY_FPM_VAL
	}), "QUERY_FPM_VAL")
	e.Query = make([]byte, 200)
	_ = e.Mem.Read(buf, e.Query)
}

// CommitFPM runs COMMIT_FPM_VAL with Counts and a 176-byte BUFSIZE (the
// oldest kernels' size, docs/hw-controlpath.md "FPM WQEs").
func (e *Env) CommitFPM() {
	buf := e.Scr(208, 8)
	for off, n := range Counts {
		_ = e.Mem.Store64(buf+hostmem.IOVA(off), n)
	}
	e.MustOK(e.Exec([8]uint64{
		2: 0,              // qw2: hmc_fn_id 0
		4: uint64(buf),    // qw4: buffer PA
		3: 0x21<<32 | 176, // OPCODE 0x21 COMMIT_FPM_VAL, BUFSIZE [31:0] = 176
	}), "COMMIT_FPM_VAL")
	e.Commit = make([]byte, 208)
	_ = e.Mem.Read(buf, e.Commit)
}

// objSize returns the object size of the commit slot at off from the query
// buffer (query slot = commit slot + 8; size = 1 << [63:32]).
func (e *Env) objSize(off int) uint64 {
	switch off {
	case 40:
		return 8192 // APBVT: fixed (irdma_sc_parse_fpm_query_buf)
	case 112:
		return 8 // PBLE
	case 64, 80, 136, 168:
		return 4 // free lists
	case 120:
		return 0
	}
	q := binary.LittleEndian.Uint64(e.Query[off+8:])
	return 1 << (q >> 32 & 0x3f)
}

// SDCount computes the SD table size from the commit write-back the way
// ctrl.c:irdma_sc_parse_fpm_commit_buf does: the end of the highest-based
// object, in 2 MB units.
func (e *Env) SDCount() uint32 {
	var end uint64
	for off := 0; off <= 168; off += 8 {
		q := binary.LittleEndian.Uint64(e.Commit[off:])
		base := (q >> 32) * 512
		cnt := q & 0xffffffff
		if off == 40 {
			cnt = 1
		}
		if cnt == 0 || off == 120 {
			continue
		}
		end = max(end, base+cnt*e.objSize(off))
	}
	return uint32((end + 2<<20 - 1) / (2 << 20))
}

// BackSDs backs every SD with a direct 2 MB page, three entries per
// UPDATE_PE_SDS in the WQE and the rest through the overflow buffer
// (ctrl.c:cqp_sds_wqe_fill).
func (e *Env) BackSDs() {
	n := e.SDCount()
	type ent struct{ cmd, data uint64 }
	var ents []ent
	for sd := uint32(0); sd < n; sd++ {
		bp := e.alloc(2<<20, 2<<20, "sd")
		e.SDs = append(e.SDs, bp)
		ents = append(ents, ent{
			cmd: uint64(sd) | 1<<15 | 1<<31, // PMSDIDX | PMSDPARTSEL | PMSDWR
			data: uint64(bp.IOVA()) | 512<<2 | // PA | PMSDBPCOUNT = 512
				1<<1 | 1, // PMSDTYPE direct | PMSDVALID
		})
	}
	for len(ents) > 0 {
		k := min(len(ents), 11)
		batch := ents[:k]
		ents = ents[k:]
		var w [8]uint64
		w[0], w[1] = batch[0].cmd, batch[0].data
		if k > 1 {
			w[4], w[5] = batch[1].cmd|1<<63, batch[1].data // ENTRY_VALID b63
		}
		if k > 2 {
			w[6], w[7] = batch[2].cmd|1<<63, batch[2].data
		}
		more := k - 3
		if more > 0 {
			buf := e.Scr(16*more, 64)
			for i, x := range batch[3:] {
				_ = e.Mem.Store64(buf+hostmem.IOVA(16*i), x.cmd)
				_ = e.Mem.Store64(buf+hostmem.IOVA(16*i+8), x.data)
			}
			w[2] = uint64(buf) // overflow buffer | HMCFNID 0
		} else {
			more = 0
		}
		w[3] = 0x1f<<32 | uint64(more) // OPCODE 0x1f UPDATE_PE_SDS, ENTRY_COUNT [3:0]
		e.MustOK(e.Exec(w), "UPDATE_PE_SDS")
	}
}

// SHMCPagesAllocated is the SHMC_PAGES_ALLOCATED WQE (qw2 HMC_FN_ID 0).
func SHMCPagesAllocated() [8]uint64 {
	return [8]uint64{3: 0x2b << 32}
}

// CreateCCQ creates CQ 0 (ctrl.c:irdma_sc_ccq_create): its completion is
// the first CCQE.
func (e *Env) CreateCCQ() {
	e.ccqOn = true
	c := e.Exec([8]uint64{
		0: CCQSize,                // qw0: cq_size
		1: CCQCtxCookie,           // qw1: CQ context (cq >> 1)
		2: 16,                     // qw2: SHADOW_READ_THRESHOLD
		4: uint64(e.CCQ.IOVA()),   // qw4: ring PA
		5: uint64(e.CCQSh.IOVA()), // qw5: shadow area PA
		3: 0x03<<32 | // OPCODE CREATE_CQ
			0<<22 | // CEQID [31:22] = 0
			0 | // CQID [18:0] = 0
			1<<46 | // CHKOVERFLOW
			1<<49, // CEQIDVALID; ENCEQEMASK 0 for the CCQ
	})
	e.MustOK(c, "CREATE_CQ (CCQ)")
	if !c.CCQE {
		e.TB.Fatalf("devtest: the CCQ's CREATE_CQ did not complete on the CCQ")
	}
}

// CreateCEQ0 is CREATE_CEQ for CEQ 0 with CEQSize entries at pa.
func CreateCEQ0(pa hostmem.IOVA) [8]uint64 {
	return [8]uint64{
		2: CEQSize,    // qw2: CEQSIZE [21:0]
		4: uint64(pa), // qw4: ring PA
		3: 0x16 << 32, // OPCODE CREATE_CEQ, CEQID [9:0] = 0
	}
}

// CreateAEQ is CREATE_AEQ with AEQSize entries at pa.
func CreateAEQ(pa hostmem.IOVA) [8]uint64 {
	return [8]uint64{
		2: AEQSize,    // qw2: AEQECNT [18:0]
		4: uint64(pa), // qw4: ring PA
		3: 0x19 << 32, // OPCODE CREATE_AEQ
	}
}

// ArmCCQ arms the CCQ (ctrl.c:irdma_sc_ccq_arm): shadow +32 ARM_SEQ_NUM
// [17:16] + 1, ARM_NEXT b14 = 1, ARM_NEXT_SE b15 kept; then CQARM ← 0.
func (e *Env) ArmCCQ() { e.ArmCQ(0, e.CCQSh.IOVA(), true) }

// ArmCQ arms any CQ through its shadow area and the CQARM register; next
// selects ARM_NEXT (any completion), else solicited only. ARM_NEXT_SE is set
// on every arm (uk.c irdma_uk_cq_request_notification; docs/hw-datapath.md
// "CQ shadow area and arming").
func (e *Env) ArmCQ(id uint32, shadow hostmem.IOVA, next bool) {
	v, _ := e.Mem.Load64(shadow + 32)
	seq := (v>>16 + 1) & 3
	v = v&^(3<<16|1<<14) | seq<<16 | 1<<15
	if next {
		v |= 1 << 14
	}
	_ = e.Mem.Store64(shadow+32, v)
	e.Dev.Write32(regs.CQARM, id)
}

// PollAEQ returns the next AEQE (qword0, qword1) if valid, returning the
// entry to the device through AEQALLOC.
func (e *Env) PollAEQ() (uint64, uint64, bool) {
	a := e.AEQ.IOVA() + hostmem.IOVA(e.aeqHead)*16
	q1, _ := e.Mem.Load64(a + 8)
	if q1&(1<<63) != e.aeqPol {
		return 0, 0, false
	}
	q0, _ := e.Mem.Load64(a)
	e.aeqHead++
	if e.aeqHead == AEQSize {
		e.aeqHead, e.aeqPol = 0, e.aeqPol^1<<63
	}
	e.Dev.Write32(regs.AEQALLOC, 1)
	return q0, q1, true
}

// PollCEQ returns the next CEQE's context if valid.
func (e *Env) PollCEQ() (uint64, bool) {
	a := e.CEQ.IOVA() + hostmem.IOVA(e.ceqHead)*8
	v, _ := e.Mem.Load64(a)
	if v&(1<<63) != e.ceqPol {
		return 0, false
	}
	e.ceqHead++
	if e.ceqHead == CEQSize {
		e.ceqHead, e.ceqPol = 0, e.ceqPol^1<<63
	}
	return v &^ (1 << 63), true
}

// WaitAEQ polls the AEQ until an entry arrives.
func (e *Env) WaitAEQ() (uint64, uint64) {
	e.TB.Helper()
	deadline := time.Now().Add(e.Timeout)
	for {
		if q0, q1, ok := e.PollAEQ(); ok {
			return q0, q1
		}
		if time.Now().After(deadline) {
			e.TB.Fatalf("devtest: no AEQE")
		}
		runtime.Gosched()
	}
}

// Status is the status a completion carries.
func (c Completion) Status() cqp.Status { return cqp.Status{Major: c.Major, Minor: c.Minor} }

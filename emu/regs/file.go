package regs

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrUnknownRegister is returned by OnWrite for an offset the File does not
// hold.
var ErrUnknownRegister = errors.New("regs: unknown register")

// Access says who may write a register.
type Access uint8

const (
	// RW registers take driver writes (stored, then subscribers called).
	RW Access = iota
	// RO registers are device status: driver writes are dropped and
	// counted; the device sets them with Set.
	RO
)

// File is a BAR0 register file. Its methods are safe for concurrent use;
// Read32, Write32 and Set take no lock and do not allocate.
type File struct {
	blocks []block // sorted by base, immutable after New

	unknownReads   atomic.Uint64
	unknownWrites  atomic.Uint64
	readOnlyWrites atomic.Uint64
	lastUnknown    atomic.Uint32

	subMu sync.Mutex // serialises OnWrite and cancels
}

// block is a run of count registers 4 bytes apart (count 1 for a single
// register).
type block struct {
	name    string
	base    Offset
	indexed bool
	regs    []reg
}

type reg struct {
	v      atomic.Uint32
	reset  uint32
	access Access
	subs   atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(uint32) }

// Stats counts accesses the register map did not expect.
type Stats struct {
	UnknownReads   uint64 // Read32 of an offset not in the File
	UnknownWrites  uint64 // Write32 to an offset not in the File
	ReadOnlyWrites uint64 // Write32 to an RO register
	LastUnknown    Offset // the most recent unknown offset read or written
}

// spec describes one block of the GEN_2 PF file.
type spec struct {
	name   string
	base   Offset
	count  int // 0: a single register
	access Access
	reset  uint32
}

// gen2 is the GEN_2 PF register map: every register irdma touches
// (icrdma_hw.h; docs/hw-controlpath.md "Registers").
var gen2 = []spec{
	{name: "CQPDB", base: CQPDB},
	{name: "CQPTAIL", base: CQPTAIL}, // driver writes 0 at irdma_sc_cqp_init
	{name: "CCQPSTATUS", base: CCQPSTATUS},
	{name: "CCQPLOW", base: CCQPLOW},
	{name: "CCQPHIGH", base: CCQPHIGH},
	{name: "CQPERRCODES", base: CQPERRCODES, access: RO},
	{name: "CQARM", base: CQARM},
	{name: "CQACK", base: CQACK},
	{name: "AEQALLOC", base: AEQALLOC},
	{name: "WQEALLOC", base: WQEALLOC},
	// 8 MiB BAR: PE_DB_SIZE = 2 (irdma_sc_dev_init accepts 1 or 2; the
	// doorbell page sits at 8 MiB − 64 KiB).
	{name: "GLPCI_LBARCTRL", base: GLPCI_LBARCTRL, access: RO, reset: PEDBSize8M << 4},
	// Ready from the first read, or driver load stalls up to 14 s
	// (ctrl.c:irdma_wait_pe_ready).
	{name: "GLPE_CPUSTATUS0", base: GLPE_CPUSTATUS0, access: RO, reset: CPUStatusReady},
	{name: "GLPE_CPUSTATUS1", base: GLPE_CPUSTATUS1, access: RO, reset: CPUStatusReady},
	{name: "GLPE_CPUSTATUS2", base: GLPE_CPUSTATUS2, access: RO, reset: CPUStatusReady},
	{name: "PFINT_AEQCTL", base: PFINT_AEQCTL},
	{name: "PFHMC_PDINV", base: PFHMC_PDINV},
	{name: "GLPE_CRITERR", base: GLPE_CRITERR, access: RO},
	{name: "GLINT_DYN_CTL", base: glintDynCtlBase, count: NumGLINT},
	{name: "GLINT_CEQCTL", base: glintCeqctlBase, count: NumGLINT},
	{name: "GLINT_RATE", base: glintRateBase, count: NumGLINT},
	{name: "GLHMC_VFPDINV", base: glhmcVFPDInvBase, count: NumGLHMCVFPDInv},
	{name: "VSIQF_PE_CTL1", base: vsiqfPECtl1Base, count: NumVSI},
}

// New returns the GEN_2 PF register file at its power-on values.
func New() *File {
	f := &File{}
	for _, s := range gen2 {
		n := max(s.count, 1)
		b := block{name: s.name, base: s.base, indexed: s.count > 0, regs: make([]reg, n)}
		for i := range b.regs {
			b.regs[i].reset = s.reset
			b.regs[i].access = s.access
			b.regs[i].v.Store(s.reset)
		}
		f.blocks = append(f.blocks, b)
	}
	slices.SortFunc(f.blocks, func(a, b block) int {
		switch {
		case a.base < b.base:
			return -1
		case a.base > b.base:
			return 1
		}
		return 0
	})
	return f // TestLayoutDisjoint checks that no two blocks overlap
}

// lookup finds the register at off; nil if off is not a register.
func (f *File) lookup(off Offset) *reg {
	if off&3 != 0 {
		return nil
	}
	lo, hi := 0, len(f.blocks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if f.blocks[mid].base <= off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return nil
	}
	b := &f.blocks[lo-1]
	if i := uint64(off-b.base) / 4; i < uint64(len(b.regs)) {
		return &b.regs[i]
	}
	return nil
}

// Read32 returns the register at off (readl on BAR0). Unknown offsets read 0
// and are counted.
func (f *File) Read32(off Offset) uint32 {
	r := f.lookup(off)
	if r == nil {
		f.unknownReads.Add(1)
		f.lastUnknown.Store(uint32(off))
		return 0
	}
	return r.v.Load()
}

// Write32 is a driver write (writel on BAR0): it stores v and calls the
// register's subscribers, in order, in the caller's goroutine. Writes to
// unknown offsets and to RO registers are dropped and counted.
func (f *File) Write32(off Offset, v uint32) {
	r := f.lookup(off)
	if r == nil {
		f.unknownWrites.Add(1)
		f.lastUnknown.Store(uint32(off))
		return
	}
	if r.access == RO {
		f.readOnlyWrites.Add(1)
		return
	}
	r.v.Store(v)
	if subs := r.subs.Load(); subs != nil {
		for _, s := range *subs {
			s.fn(v)
		}
	}
}

// Set is a device-side store (a status value, CQPTAIL, CCQPSTATUS, …): it
// stores v whatever the register's access and calls no subscriber. It
// reports false for an unknown offset.
func (f *File) Set(off Offset, v uint32) bool {
	r := f.lookup(off)
	if r == nil {
		return false
	}
	r.v.Store(v)
	return true
}

// OnWrite subscribes fn to driver writes of the register at off. fn runs in
// the writer's goroutine for every Write32, with the value written; it must
// not block and should only wake the owning engine (e.g. a non-blocking send
// on a 1-buffered channel, or a push onto a ready queue). A write is a hint,
// not an event to count (see the package documentation). cancel removes
// the subscription; a write already running may still call fn once.
func (f *File) OnWrite(off Offset, fn func(v uint32)) (cancel func(), err error) {
	r := f.lookup(off)
	if r == nil {
		return nil, fmt.Errorf("%w: %#x", ErrUnknownRegister, uint32(off))
	}
	if fn == nil {
		return nil, errors.New("regs: OnWrite with nil func")
	}
	s := &subscriber{fn: fn}
	f.subMu.Lock()
	defer f.subMu.Unlock()
	var next []*subscriber
	if old := r.subs.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, s)
	r.subs.Store(&next)
	return func() { f.unsubscribe(r, s) }, nil
}

func (f *File) unsubscribe(r *reg, s *subscriber) {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	old := r.subs.Load()
	if old == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*old), func(x *subscriber) bool { return x == s })
	if len(next) == 0 {
		r.subs.Store(nil)
		return
	}
	r.subs.Store(&next)
}

// Reset restores every register to its power-on value (a function reset).
// Subscriptions and Stats are kept.
func (f *File) Reset() {
	for bi := range f.blocks {
		for i := range f.blocks[bi].regs {
			r := &f.blocks[bi].regs[i]
			r.v.Store(r.reset)
		}
	}
}

// Known reports whether off is a register of the File.
func (f *File) Known(off Offset) bool { return f.lookup(off) != nil }

// Access returns the access class of the register at off, and whether off
// is known.
func (f *File) Access(off Offset) (Access, bool) {
	if r := f.lookup(off); r != nil {
		return r.access, true
	}
	return 0, false
}

// Name returns the register's name ("CQPDB", "GLINT_DYN_CTL(5)"), or a hex
// offset for unknown offsets (for traces and test failures).
func (f *File) Name(off Offset) string {
	if f.lookup(off) == nil {
		return fmt.Sprintf("BAR0+%#x", uint32(off))
	}
	for _, b := range f.blocks {
		if off >= b.base && off < b.base+4*Offset(len(b.regs)) {
			if b.indexed {
				return fmt.Sprintf("%s(%d)", b.name, (off-b.base)/4)
			}
			return b.name
		}
	}
	return fmt.Sprintf("BAR0+%#x", uint32(off))
}

// Stats returns the counts of unexpected accesses.
func (f *File) Stats() Stats {
	return Stats{
		UnknownReads:   f.unknownReads.Load(),
		UnknownWrites:  f.unknownWrites.Load(),
		ReadOnlyWrites: f.readOnlyWrites.Load(),
		LastUnknown:    Offset(f.lastUnknown.Load()),
	}
}

// Get extracts the field mask from v (the driver's FIELD_GET).
func Get(v, mask uint32) uint32 {
	return (v & mask) >> bits.TrailingZeros32(mask)
}

// Prep places x in the field mask (the driver's FIELD_PREP); bits of x that
// do not fit are dropped.
func Prep(mask, x uint32) uint32 {
	return (x << bits.TrailingZeros32(mask)) & mask
}

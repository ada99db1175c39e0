// Package device is one emulated irdma PCI function (GEN_2 / E810 by
// default): the BAR0 register file, the host memory bus, and the blocks
// behind them — the HMC, the CQP engine, the CQ and event queues, the QP
// table — wired together.
//
// # The hardware interface
//
// The driver half reaches the device only through Read32, Write32, Mem and
// MSIX, as irdma reaches hardware through readl/writel on BAR0,
// dma_alloc_coherent memory and MSI-X vectors. Everything else exported
// here (Meter, Stats, CQs, QPs, HMC, …) is for the daemon, the data plane
// and tests; the driver half must never use it.
//
// # Engines
//
// The CQP engine runs on its own goroutine, woken by writes of CCQPLOW and
// CQPDB. Writes are hints that coalesce: the engine derives its work from
// host memory (the ring's valid bits) and never counts doorbells. Close
// stops every goroutine the device started.
//
// # Interrupts
//
// MSIX(v) is a coalescing notification per vector: a 1-buffered channel
// that receives a value when vector v fires; several firings before the
// receiver runs coalesce into one. A CEQ raises its vector when a CEQE is
// written, the AEQ when an AEQE is written, subject to two gates:
//
//   - the cause: GLINT_CEQCTL(ceq) (for CEQ ceq) or PFINT_AEQCTL (for the
//     AEQ) must have CAUSE_ENA (bit 30); its MSIX_INDX [10:0] names the
//     vector (icrdma_cfg_ceq, irdma_cfg_aeq). Without CAUSE_ENA the entry
//     is written but no interrupt is raised, and none is remembered;
//   - the vector: GLINT_DYN_CTL(v) must have INTENA (bit 0)
//     (icrdma_ena_irq). A cause that fires while INTENA is clear is kept
//     pending and delivered by the next GLINT_DYN_CTL(v) write that sets
//     INTENA (the driver re-enables the vector after each DPC).
//
// INTENA is not cleared by the device when a vector fires (no auto-mask);
// the channel's coalescing takes that role.
package device

import (
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/cq"
	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Config configures a Device. Zero fields take defaults.
type Config struct {
	Profile profile.Profile // zero value: profile.GEN2()
	Clock   timing.Clock    // nil: wall clock
	Model   timing.Model    // nil: timing.E810()
	Logger  *zap.Logger     // nil: nop
	Mem     *hostmem.Memory // nil: a new bus, closed by Close
	// MR and AH replace the STag table and the ARP/AH/multicast tables
	// the CQP programs (nil: emu/mr's and emu/ah's tables on this
	// device's HMC). Tests use them to observe what the CQP decoded.
	MR cqp.MRTable
	AH cqp.AHTables
}

// Stats is a snapshot of the device's counters.
type Stats struct {
	CQP      cqp.Counters
	Events   cq.EventStats
	Regs     regs.Stats
	CQArms   uint64 // CQARM writes (hints)
	CQAcks   uint64 // CQACK writes
	WQEAlloc uint64 // WQEALLOC writes (hints for the data plane)
	MSIX     uint64 // notifications raised
}

// Device is one PCI function.
type Device struct {
	prof    profile.Profile
	clock   timing.Clock
	meter   *timing.Meter
	log     *zap.Logger
	mem     *hostmem.Memory
	ownMem  bool
	regs    *regs.File
	hmc     *hmc.HMC
	events  *cq.Events
	cqs     *cq.Table
	qps     *qp.Table
	srqs    *qp.SRQTable // GEN_3 only
	stats   *qp.StatsBlock
	mrs     *mr.Table
	ahs     *ah.Tables
	cqp     *cqp.CQP
	cancels []func()

	msix    []chan struct{}
	pending []atomic.Bool

	cqArms, cqAcks, wqeAlloc, msixCount atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// New creates and starts a device.
func New(cfg Config) (*Device, error) {
	p := cfg.Profile
	if p.Gen == 0 {
		p = profile.GEN2()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	d := &Device{prof: p, clock: cfg.Clock, log: cfg.Logger, mem: cfg.Mem}
	if d.clock == nil {
		d.clock = timing.NewWall()
	}
	if d.log == nil {
		d.log = zap.NewNop()
	}
	if d.mem == nil {
		d.mem, d.ownMem = hostmem.New(), true
	}
	d.meter = timing.NewMeter(cfg.Model)
	d.regs = regs.New()
	d.msix = make([]chan struct{}, regs.NumGLINT)
	for i := range d.msix {
		d.msix[i] = make(chan struct{}, 1)
	}
	d.pending = make([]atomic.Bool, regs.NumGLINT)
	d.hmc = hmc.New(d.mem, p)
	d.events = cq.NewEvents(d.mem, d.meter, (*notifier)(d), p.Limits.MaxCEQs)
	if p.UK.FeatureFlags&profile.FeatureCQETimestamping != 0 {
		// GEN_3: every CQE carries the device clock (emu/cq timestamp.go),
		// counted from the device's clock at hca_core_clock.
		d.events.StampCQEs(timing.NewCounter(d.clock, p.Limits.HCACoreClockKHz), p.Limits.TimestampMask)
	}
	d.cqs = cq.NewTable(d.mem, d.events, 0)
	d.qps = qp.NewTable(d.mem, 0)
	d.stats = qp.NewStatsBlock(p.Limits.StatsInstances)
	d.mrs = mr.NewTable(d.mem, d.hmc, p)
	mrt := cfg.MR
	if mrt == nil {
		mrt = mrAdapter{d.mrs}
	}
	d.ahs = ah.NewTables(d.mem, d.hmc, p)
	aht := cfg.AH
	if aht == nil {
		aht = ahAdapter{d.ahs}
	}
	if p.SRQ {
		d.srqs = qp.NewSRQTable(p.Limits.MaxSRQs)
	}
	c, err := cqp.New(cqp.Config{
		Profile: p, Regs: d.regs, Mem: d.mem, Meter: d.meter, Logger: d.log.Named("cqp"),
		HMC: hmcAdapter{d.hmc}, MR: mrt, AH: aht, CQs: d.cqs, QPs: d.qps, SRQs: d.srqs, Stats: d.stats,
	})
	if err != nil {
		d.release()
		return nil, err
	}
	d.cqp = c
	if err := d.subscribe(); err != nil {
		d.unsubscribe()
		d.release()
		return nil, err
	}
	if err := c.Start(); err != nil {
		d.unsubscribe()
		d.release()
		return nil, err
	}
	return d, nil
}

func (d *Device) subscribe() error {
	lay := d.prof.Regs
	sub := func(off regs.Offset, fn func(uint32)) error {
		cancel, err := d.regs.OnWrite(off, fn)
		if err != nil {
			return err
		}
		d.cancels = append(d.cancels, cancel)
		return nil
	}
	errs := []error{
		sub(lay.CQARM, func(uint32) { d.cqArms.Add(1) }),
		sub(lay.CQACK, func(uint32) { d.cqAcks.Add(1) }),
		sub(lay.WQEALLOC, func(uint32) { d.wqeAlloc.Add(1) }),
		sub(lay.AEQALLOC, func(v uint32) { d.events.AEQAlloc(v) }),
		sub(lay.PFHMC_PDINV, func(v uint32) { d.hmc.InvalidatePD(v) }),
	}
	for i := 0; i < regs.NumGLINT; i++ {
		i := i
		errs = append(errs, sub(lay.GLINT_DYN_CTL+regs.Offset(4*i), func(v uint32) {
			if v&regs.GLINT_DYN_CTL_INTENA != 0 && d.pending[i].Swap(false) {
				d.fire(i)
			}
		}))
	}
	return errors.Join(errs...)
}

func (d *Device) unsubscribe() {
	for _, f := range d.cancels {
		f()
	}
	d.cancels = nil
}

func (d *Device) release() {
	if d.ownMem {
		d.closeErr = d.mem.Close()
	}
}

// Close stops the engines and, if the device created its bus, closes it.
// It is idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.unsubscribe()
		d.cqp.Close()
		d.release()
	})
	return d.closeErr
}

// Read32 is a BAR0 read (readl).
func (d *Device) Read32(off regs.Offset) uint32 { return d.regs.Read32(off) }

// Write32 is a BAR0 write (writel).
func (d *Device) Write32(off regs.Offset, v uint32) { d.regs.Write32(off, v) }

// Mem is the host memory bus the driver allocates its DMA memory from.
func (d *Device) Mem() *hostmem.Memory { return d.mem }

// MSIX returns the notification channel of vector v (nil for a vector
// the device does not have: receiving from it blocks forever).
func (d *Device) MSIX(v int) <-chan struct{} {
	if v < 0 || v >= len(d.msix) {
		return nil
	}
	return d.msix[v]
}

// notifier turns event-queue entries into MSI-X notifications.
type notifier Device

func (n *notifier) CEQEvent(ceq uint32) {
	d := (*Device)(n)
	d.cause(d.prof.Regs.GLINT_CEQCTL + regs.Offset(4*ceq))
}

func (n *notifier) AEQEvent() {
	d := (*Device)(n)
	d.cause(d.prof.Regs.PFINT_AEQCTL)
}

// cause raises the vector a cause control register names, if enabled.
func (d *Device) cause(ctl regs.Offset) {
	v := d.regs.Read32(ctl)
	if v&regs.GLINT_CEQCTL_CAUSE_ENA == 0 {
		return
	}
	vec := int(v & regs.GLINT_CEQCTL_MSIX_INDX)
	if vec >= len(d.msix) {
		return
	}
	if d.regs.Read32(d.prof.Regs.GLINT_DYN_CTL+regs.Offset(4*vec))&regs.GLINT_DYN_CTL_INTENA == 0 {
		d.pending[vec].Store(true)
		return
	}
	d.fire(vec)
}

func (d *Device) fire(vec int) {
	d.msixCount.Add(1)
	select {
	case d.msix[vec] <- struct{}{}:
	default:
	}
}

// Daemon/test/data-plane accessors (not part of the hardware interface).

// Profile returns the device profile.
func (d *Device) Profile() profile.Profile { return d.prof }

// Clock returns the device clock.
func (d *Device) Clock() timing.Clock { return d.clock }

// Meter returns the cycle meter every stage charges.
func (d *Device) Meter() *timing.Meter { return d.meter }

// Regs returns the register file.
func (d *Device) Regs() *regs.File { return d.regs }

// HMC returns the host memory cache.
func (d *Device) HMC() *hmc.HMC { return d.hmc }

// CQs returns the CQ table.
func (d *Device) CQs() *cq.Table { return d.cqs }

// Events returns the CEQs and the AEQ.
func (d *Device) Events() *cq.Events { return d.events }

// QPs returns the QP table.
func (d *Device) QPs() *qp.Table { return d.qps }

// SRQs is the SRQ table (nil on a profile without SRQ).
func (d *Device) SRQs() *qp.SRQTable { return d.srqs }

// HWStats returns the hardware counter block GATHER_STATS reports.
func (d *Device) HWStats() *qp.StatsBlock { return d.stats }

// MRs returns the STag table (emu/mr) the CQP programs by default.
func (d *Device) MRs() *mr.Table { return d.mrs }

// AHs returns the ARP, AH and multicast tables (emu/ah).
func (d *Device) AHs() *ah.Tables { return d.ahs }

// CQP returns the CQP engine.
func (d *Device) CQP() *cqp.CQP { return d.cqp }

// Stats returns a snapshot of the counters.
func (d *Device) Stats() Stats {
	return Stats{
		CQP: d.cqp.Counters(), Events: d.events.Stats(), Regs: d.regs.Stats(),
		CQArms: d.cqArms.Load(), CQAcks: d.cqAcks.Load(), WQEAlloc: d.wqeAlloc.Load(), MSIX: d.msixCount.Load(),
	}
}

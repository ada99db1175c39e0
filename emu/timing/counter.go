package timing

// Counter is a free-running counter at a fixed rate, driven by a Clock: the
// device clock irdma reports as hca_core_clock (in kHz) and that GEN_3
// writes into every CQE (verbs.c:irdma_query_device HCA_CORE_CLOCK_KHZ;
// docs/hw-datapath.md "CQE timestamps"). Under a Manual or simulated clock
// its value is as deterministic as the clock.
type Counter struct {
	clock Clock
	khz   uint64
}

// NewCounter returns a counter ticking khz thousand times per second of
// c's time, starting at 0 at c's epoch.
func NewCounter(c Clock, khz uint64) Counter { return Counter{clock: c, khz: khz} }

// KHz is the counter's rate.
func (c Counter) KHz() uint64 { return c.khz }

// Ticks returns the counter now: ⌊Now·kHz / 10⁶ ns⌋, modulo 2⁶⁴ (the
// device field keeps only its low bits, which the wrap leaves exact).
func (c Counter) Ticks() uint64 {
	if c.clock == nil {
		return 0
	}
	ns := uint64(max(c.clock.Now().Nanoseconds(), 0))
	const nsPerMs = 1_000_000 // kHz counts per millisecond
	return ns/nsPerMs*c.khz + ns%nsPerMs*c.khz/nsPerMs
}

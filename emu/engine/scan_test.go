package engine

import (
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestScanTradeoff measures, for several MaxBackoff values, the CPU an
// engine burns while its one active QP is idle, and the latency from
// posting a WQE without a doorbell (as the kernel does when it believes
// the device busy) to its completion. docs/dataplane.md quotes the
// figures. Set IRDMA_MEASURE_SCAN=1 to run it (it takes a few seconds and
// wants a quiet machine).
func TestScanTradeoff(t *testing.T) {
	if os.Getenv("IRDMA_MEASURE_SCAN") == "" {
		t.Skip("set IRDMA_MEASURE_SCAN=1 to measure")
	}
	const idle = 500 * time.Millisecond
	for _, mb := range []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		n := newNode(t, timing.NewWall(), Config{Workers: 1, Scan: ScanConfig{MaxBackoff: mb, Linger: time.Hour}},
			ipA, ipB, macB, nil)
		cqs := n.env.Dev.CQs().Get(2)
		idx := uint32(0)
		post := func(bell bool) time.Duration {
			want := cqs.Stats().CQEs + 1
			start := time.Now()
			n.nop(n.rc, idx)
			idx++
			if bell {
				n.env.Doorbell(n.rc)
			}
			for cqs.Stats().CQEs < want {
				runtime.Gosched()
			}
			return time.Since(start)
		}
		post(true) // the QP becomes active
		time.Sleep(20 * time.Millisecond)
		c0 := cpuTime()
		time.Sleep(idle)
		cpu := cpuTime() - c0
		// After a quiet period long enough for the backoff to reach its
		// cap (the backoff doubles from MinBackoff after the last work).
		var lat []time.Duration
		for range 20 {
			time.Sleep(max(60*time.Millisecond, 4*mb))
			lat = append(lat, post(false))
		}
		slices.Sort(lat)
		var bell []time.Duration
		for range 20 {
			time.Sleep(10 * time.Millisecond)
			bell = append(bell, post(true))
		}
		slices.Sort(bell)
		t.Logf("MaxBackoff %8v: idle CPU %5.1f%% of a core; first WQE without doorbell after a quiet period: median %8v p90 %8v; with doorbell median %8v",
			mb, 100*float64(cpu)/float64(idle), lat[len(lat)/2], lat[len(lat)*9/10], bell[len(bell)/2])
		n.eng.Close()
	}
	// Baseline: no active QP, the worker sleeps until kicked.
	n := newNode(t, timing.NewWall(), Config{Workers: 1}, ipA, ipB, macB, nil)
	c0 := cpuTime()
	time.Sleep(idle)
	t.Logf("no active QP: idle CPU %.1f%% of a core", 100*float64(cpuTime()-c0)/float64(idle))
	n.eng.Close()
}

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

// TestScanTradeoff measures what an idle engine costs and how fast it
// wakes: the CPU it burns while its one active QP is idle, and the latency
// from posting a WQE after a quiet period to its completion — with a
// doorbell (a kick: WQEALLOC, or a notification), and through a source
// that cannot notify (polled with backoff up to MaxBackoff).
// docs/dataplane.md quotes the figures. Set IRDMA_MEASURE_SCAN=1 to run it
// (it takes a few seconds and wants a quiet machine).
func TestScanTradeoff(t *testing.T) {
	if os.Getenv("IRDMA_MEASURE_SCAN") == "" {
		t.Skip("set IRDMA_MEASURE_SCAN=1 to measure")
	}
	const idle = 500 * time.Millisecond
	for _, mb := range []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		for _, legacy := range []bool{false, true} {
			n := newNode(t, timing.NewWall(), Config{Workers: 1, Scan: ScanConfig{MaxBackoff: mb, Linger: time.Hour}},
				ipA, ipB, macB, nil)
			src := &fakeSource{ids: make(chan uint32, 64)}
			if legacy {
				n.eng.AddDoorbellSource(src)
			}
			cqs := n.env.Dev.CQs().Get(2)
			idx := uint32(0)
			post := func() time.Duration {
				want := cqs.Stats().CQEs + 1
				start := time.Now()
				n.nop(n.rc, idx)
				idx++
				if legacy {
					src.ids <- 2
				} else {
					n.env.Doorbell(n.rc)
				}
				for cqs.Stats().CQEs < want {
					runtime.Gosched()
				}
				return time.Since(start)
			}
			post() // the QP becomes active
			time.Sleep(20 * time.Millisecond)
			c0 := cpuTime()
			time.Sleep(idle)
			cpu := cpuTime() - c0
			var lat []time.Duration
			for range 20 {
				time.Sleep(max(20*time.Millisecond, 4*mb))
				lat = append(lat, post())
			}
			slices.Sort(lat)
			how := "doorbell (kick)"
			if legacy {
				how = "polled source"
			}
			t.Logf("MaxBackoff %8v, %-15s: idle CPU %5.1f%% of a core; first WQE after a quiet period: median %8v p90 %8v",
				mb, how, 100*float64(cpu)/float64(idle), lat[len(lat)/2], lat[len(lat)*9/10])
			n.eng.Close()
		}
	}
}

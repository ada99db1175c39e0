package sim

import "testing"

// BenchmarkWrite64K is the simulator's speed on the 1-QP 64 KiB WRITE at
// 100 Gb/s (payload copied, ICRCs computed): it reports modelled seconds
// per wall second.
func BenchmarkWrite64K(b *testing.B) {
	for i := 0; i < b.N; i++ {
		rs, err := Run(Scenario{Verb: "write", Sizes: []int{65536}, Iters: 2000, Inline: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rs[0].SimPerWall(), "sim-s/wall-s")
		b.ReportMetric(rs[0].SimPerCPU(), "sim-s/cpu-s")
		b.ReportMetric(rs[0].Gbps, "Gb/s")
	}
}

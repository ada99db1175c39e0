package sim

import "testing"

func TestSmokeRun(t *testing.T) {
	for _, sc := range []Scenario{
		{Verb: "write", Sizes: []int{65536}, Iters: 200},
		{Verb: "send", Sizes: []int{65536}, Iters: 200},
		{Verb: "send", Sizes: []int{65536}, Iters: 200, QPs: 2},
		{Verb: "send", Sizes: []int{65536}, Iters: 200, QPs: 3},
		{Verb: "read", Sizes: []int{65536}, Iters: 200},
		{Verb: "write", Lat: true, Sizes: []int{8}, Iters: 50, Inline: -1},
		{Verb: "send", Lat: true, Sizes: []int{8}, Iters: 50, Inline: -1},
		{Verb: "read", Lat: true, Sizes: []int{8}, Iters: 50, Inline: -1},
	} {
		rs, err := Run(sc)
		if err != nil {
			t.Fatalf("%+v: %v", sc, err)
		}
		for _, r := range rs {
			t.Logf("%s lat=%v q=%d size %d: %.2f Gb/s %.3f Mpps lat %.3f us sim %v wall %v speed %.4f retx %d bd %v util %v", r.Verb, r.Lat, r.QPs, r.Size, r.Gbps, r.Mpps, r.LatTypical, r.SimTime, r.Wall, r.SimPerWall(), r.Retransmits, r.Breakdown, r.Util)
		}
	}
}

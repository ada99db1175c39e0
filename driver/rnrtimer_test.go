package driver

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// TestMinRNRTimerQuery: irdma_modify_qp_roce keeps IB_QP_MIN_RNR_TIMER in
// udp_info.min_rnr_timer only when hw_rev >= IRDMA_GEN_3, and
// irdma_query_qp reads that field back on every generation, so GEN_3
// reports what RTR (required) and RTS (optional) set, and GEN_2 reports 0
// whatever was asked.
func TestMinRNRTimerQuery(t *testing.T) {
	for _, tc := range []struct {
		name             string
		prof             profile.Profile
		wantRTR, wantRTS uint8
	}{
		{"GEN_3", profile.GEN3(), 17, 5},
		{"GEN_2", profile.GEN2(), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := atomPair(t, tc.prof)
			q, peer := a.qp(), b.qp()
			steps := []struct {
				attr QPAttr
				mask QPAttrMask
				want uint8
			}{
				{QPAttr{QPState: QPSInit, QPAccessFlags: AccessLocalWrite, PortNum: 1},
					QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags, 0},
				{QPAttr{QPState: QPSRTR, PathMTU: MTU1024, DestQPNum: peer.ID(), RQPSN: 0x200, MaxDestRdAtomic: 4,
					MinRNRTimer: 17, AH: AHAttr{GRH: true, SGIDIndex: a.sgid, HopLimit: 64,
						DGID: gidFromAddr(b.nd.IPs[0]), DMAC: [6]byte(b.nd.MAC())}},
					QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic |
						QPAttrMinRNRTimer, tc.wantRTR},
				{QPAttr{QPState: QPSRTS, SQPSN: 0x200, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4,
					MinRNRTimer: 5},
					QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic |
						QPAttrMinRNRTimer, tc.wantRTS},
				// Without the mask bit the stored value stays.
				{QPAttr{QPState: QPSRTS, MinRNRTimer: 30}, QPAttrState, tc.wantRTS},
			}
			for i, s := range steps {
				if err := a.d.ModifyQP(q, &s.attr, s.mask); err != nil {
					t.Fatalf("step %d (%v): %v", i, s.attr.QPState, err)
				}
				if at, _ := a.d.QueryQP(q); at.MinRNRTimer != s.want {
					t.Errorf("step %d (%v): QUERY_QP min_rnr_timer %d, want %d", i, s.attr.QPState, at.MinRNRTimer, s.want)
				}
			}
		})
	}
}

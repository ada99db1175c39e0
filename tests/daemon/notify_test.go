package daemon_test

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// TestClientNotify: the Go client (driver/uk posts into memfd rings, then
// the doorbell store) asks NOTIFY and notifies a parked engine as the
// preload does (docs/attach.md "NOTIFY"): `irdma-emu perf write --lat`
// between daemons that park at once has its posts notified; between
// daemons that always poll, none is, every one is suppressed.
func TestClientNotify(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*daemon.Config)
	}{
		{"parked", func(c *daemon.Config) { c.Engine.Scan.Poll, c.Engine.Scan.Spin = -1, -1 }},
		{"polling", func(c *daemon.Config) { c.Engine.Scan.Poll, c.Engine.Workers = time.Hour, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := twoNodes(t, tc.mod)
			_, co := perfRun(t, nil, nil, a.socket(), b.socket(), a.addr.String(), "write", "--lat", "-n", "100", "--check")
			tavg, _ := parseLat(t, co)
			t.Logf("t_avg %.2f usec", tavg)
			for _, n := range []*node{a, b} {
				st := n.prov.Stats()
				t.Logf("%s: %+v", n.addr, st)
				if st.Notified+st.Suppressed < 100 {
					t.Errorf("%s: %d notified + %d suppressed posts for 100 iterations", n.addr, st.Notified, st.Suppressed)
				}
				if tc.name == "parked" && (st.Notified == 0 || st.NotifyWakeups == 0) {
					t.Errorf("%s: no notification reached a parked daemon: %+v", n.addr, st)
				}
				// The client names its QP in the notify page: a read of
				// the eventfd finds it, or nothing when an earlier read
				// took its bit.
				if tc.name == "parked" && (st.NotifyNamed == 0 || st.NotifyNamed > st.NotifyWakeups) {
					t.Errorf("%s: %d QPs named in %d notifications", n.addr, st.NotifyNamed, st.NotifyWakeups)
				}
				if tc.name == "polling" && (st.Notified != 0 || st.NotifyWakeups != 0) {
					t.Errorf("%s: a polling daemon was notified: %+v", n.addr, st)
				}
			}
		})
	}
}

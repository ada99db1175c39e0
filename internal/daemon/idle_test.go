package daemon_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// idleWindow is how long an idle daemon is watched. A periodic wake-up of
// the kind this test exists for (the old 1 ms rescan timer, a 1 s flush
// ticker) would show hundreds of wake-ups in it; the assertion is that
// there are none, which does not depend on how long the window is.
const idleWindow = 1500 * time.Millisecond

// TestIdleDaemonNoWakeups: a daemon with no program attached — with a
// capture running, whose flusher used to tick every second — parks its
// workers and then nothing wakes them: no wake-up, no backoff timer, no
// park or unpark over the window, and the capture's flusher is not
// ticking either (it waits for a first unwritten frame).
func TestIdleDaemonNoWakeups(t *testing.T) {
	pcap := &lockedWriter{b: &bytes.Buffer{}}
	d := daemontest.Start(t, "idle0", "127.0.10.29", func(c *daemon.Config) {
		c.PcapWriter = pcap
	})
	eng := d.Engine()
	// Parked, and settled: a worker may still hold a kick from start-up
	// (adding the doorbell source kicks them all), which wakes it once.
	var s0 engine.SchedStats
	waitFor(t, func() bool {
		s := eng.Stats().Sched
		if !s.Parked || s.Pollers != 0 || s != s0 {
			s0 = s
			return false
		}
		return true
	}, "the workers to park")
	<-time.After(idleWindow)
	s1 := eng.Stats().Sched
	if s1 != s0 {
		t.Fatalf("an idle daemon woke: before %+v, after %+v", s0, s1)
	}
	if s1.TimerArms != 0 {
		t.Fatalf("%d backoff timers armed with no program attached", s1.TimerArms)
	}
	// The control socket reports the same.
	st, err := dial(t, d).Stats(-1)
	if err != nil {
		t.Fatal(err)
	}
	if sc := st.Port.Sched; !sc.Parked || sc.Wakeups != s1.Wakeups {
		t.Fatalf("stats sched %+v, engine %+v", sc, s1)
	}
	if n := len(pcap.bytes()); n == 0 || !bytes.Equal(pcap.bytes()[:4], []byte{0x4d, 0x3c, 0xb2, 0xa1}) {
		t.Fatalf("capture header missing (%d bytes)", n)
	}
}

package programs_test

import (
	"testing"
	"time"
)

// TestPostNotification runs the real ibv_rc_pingpong through the preload,
// whose wrapped ops.post_send reads the daemon's polling word after every
// send post (docs/attach.md "NOTIFY"), against daemons in the two states
// that word can be held in:
//
//   - parked: --poll-window -1 makes the workers park as soon as they run
//     out of work, so the program's posts find them parked and write the
//     eventfd: notified posts, and the daemon woke for them;
//   - polling: --poll-window 1h (one worker) keeps the engine polling
//     from its start, so no post is notified, every one is suppressed.
//
// Either way every send post is counted exactly once, the pingpong
// completes, and the daemon's counters say which path the posts took.
func TestPostNotification(t *testing.T) {
	needPrograms(t, "ibv_rc_pingpong")
	const iters = 50
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"parked", []string{"--poll-window", "-1ns"}},
		{"polling", []string{"--poll-window", "1h", "--workers", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startNodes(t, 2, tc.flags...)
			s, c := pair(t, nodes[0], nodes[1], 60*time.Second, "ibv_rc_pingpong", "-g", "1", "-n", "50")
			checkPair(t, nodes[0], nodes[1], s, c, 4096, iters)
			for _, n := range nodes {
				st := n.stats(t)
				db := st.Port.Doorbells
				t.Logf("%s: doorbells %+v sched %+v", n.addr, db, st.Port.Sched)
				// ibv_rc_pingpong posts one send per iteration (pp_post_send).
				if db.Notified+db.Suppressed != iters {
					t.Errorf("%s: %d notified + %d suppressed posts, want %d send posts counted", n.addr, db.Notified, db.Suppressed, iters)
				}
				switch tc.name {
				case "parked":
					if db.Notified == 0 || db.NotifyWakeups == 0 {
						t.Errorf("%s: a parked daemon got no notification: %+v", n.addr, db)
					}
					// The preload names the posting QP (its ibv_qp.qp_num,
					// the id libirdma rings): each read of the eventfd
					// finds the program's one QP named, or nothing when
					// an earlier read took its bit.
					if db.NotifyNamed == 0 || db.NotifyNamed > db.NotifyWakeups {
						t.Errorf("%s: %d QPs named in %d notifications", n.addr, db.NotifyNamed, db.NotifyWakeups)
					}
				case "polling":
					if db.Notified != 0 || db.NotifyWakeups != 0 || db.NotifyNamed != 0 || db.Suppressed != iters {
						t.Errorf("%s: a polling daemon was notified: %+v", n.addr, db)
					}
				}
			}
		})
	}
}

package uverbs_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

// seedCommands are valid commands of a context with the fixture's
// objects; the fuzzer mutates them.
func seedCommands(f *fixture) [][]byte {
	m := newModify(5, 1)
	m[96] = 6
	return [][]byte{
		getContextCmd(5, 0), allocPDCmd(), handleCmd(4, 9), regMRCmd(f.a.addr+0x30000, 4096, 0, 1, 0, 0, 0, 0),
		regMRCmd(f.a.addr+0x30000, 4096, 0, 1, 2, 1, 0, 0), compChannelCmd(),
		createCQCmd(1, 64, 0, -1, f.a.addr+0x30000, f.a.addr+0x31000), destroyCmd(20, 3, 8),
		createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 2, f.a.addr+offQP, 1), queryQPCmd(5, 0), m.legacy(), m.ex(1, 1),
		destroyCmd(27, 5, 4), createAHCmd(0, gid4(peerIP), 1, 1, true, 12), mcastCmd(30, f.mcastGID, 7),
		exQueryDeviceCmd(0, nil), queryPortCmd(1, 40), legacy(1, 176, withResp(8)), reqNotifyCmd(3, 1),
		legacy(28, 4, withResp(24+56)), legacy(29, 4, withResp(24+16)), legacy(19, 8, withResp(24)),
		createSRQCmd(1, 0, 64, 1, 0, f.a.addr+0x30000, f.a.addr+0x31000), querySRQCmd(0), modifySRQCmd(0, 2, 0, 1),
		destroyCmd(35, 0, 4), postSRQRecvCmd(0), createQPOnSRQCmd(0, 3, 0, f.a.addr+offQP),
	}
}

// TestRandomCommands throws mutated commands at a live context: every
// one gets an answer, none reaches a panic, and the context still works.
func TestRandomCommands(t *testing.T) {
	f := newFixture(t)
	storm(t, f.e, f.c, seedCommands(f), 20000) // about 0.2 s
}

// storm sends n commands mutated from seeds on c, then checks that none
// panicked and that the context still answers.
func storm(t *testing.T, e *env, c *client, seeds [][]byte, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	if testing.Short() {
		n = 500
	}
	for i := 0; i < n; i++ {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		switch rng.IntN(4) {
		case 0: // flip bytes
			for k := rng.IntN(4) + 1; k > 0; k-- {
				b[rng.IntN(len(b))] = byte(rng.Uint32())
			}
		case 1: // truncate
			b = b[:rng.IntN(len(b)+1)]
		case 2: // extend
			b = append(b, make([]byte, rng.IntN(64))...)
			if rng.IntN(2) == 0 && len(b) >= 8 {
				le.PutUint16(b[4:], uint16(len(b)/4))
			}
		case 3: // random header words
			if len(b) >= 8 {
				le.PutUint16(b[4:], uint16(rng.Uint32()))
				le.PutUint16(b[6:], uint16(rng.Uint32()))
			}
		}
		t0 := time.Now()
		r := c.raw(b)
		if d := time.Since(t0); d > 20*time.Millisecond {
			t.Logf("slow command (%v): %x -> %d", d, b, r.status)
		}
		if r.status == 0 {
			t.Fatalf("status 0 for %x", b)
		}
		if r.status > 0 && int(r.status) != len(b) {
			t.Fatalf("status %d for a %d-byte command", r.status, len(b))
		}
	}
	for _, fd := range c.fds {
		fd.Close()
	}
	c.fds = nil
	if p := e.p.Stats().Panics; p != 0 {
		t.Fatalf("%d commands panicked", p)
	}
	c.ok(c.raw(queryPortCmd(1, 40)), "QUERY_PORT after the storm")
}

// FuzzCommand: go test -fuzz=FuzzCommand ./uverbs/ — each input on a
// fresh context with the fixture's objects.
func FuzzCommand(fz *testing.F) {
	fz.Add(queryPortCmd(1, 40))
	fz.Add(createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 2, 0, 1))
	fz.Fuzz(func(t *testing.T, b []byte) {
		fx := newFixture(t)
		fx.c.raw(b)
		if p := fx.e.p.Stats().Panics; p != 0 {
			t.Fatalf("%d commands panicked", p)
		}
	})
}

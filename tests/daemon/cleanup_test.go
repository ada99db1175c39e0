package daemon_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/client"
)

// resources are a daemon's counts of what clients hold.
type resources struct {
	sessions, qps, regions, transports int
}

func (n *node) resources() resources {
	return resources{
		sessions:   n.prov.Stats().Sessions,
		qps:        n.d.Device().QPs().Count(),
		regions:    n.d.Device().Mem().NumRegions(),
		transports: n.d.Engine().Stats().QPs,
	}
}

// waitResources waits until n's counts are back to want.
func waitResources(t *testing.T, n *node, want resources, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := n.resources()
		if got.sessions == want.sessions && got.qps == want.qps && got.regions == want.regions {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resources %+v, want %+v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exchange sends k messages of n bytes a → b and checks them.
func exchange(t *testing.T, a, b *end, k, n int) {
	t.Helper()
	for i := range k {
		fill(a.buf[:n], uint64(i))
		if _, err := b.qp.PostRecv([]client.RecvWR{{WrID: uint64(i), SGList: []client.SGE{b.mr.SGE(0, n)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.qp.PostSend([]client.SendWR{{WrID: uint64(i), Opcode: client.WRSend, Flags: client.SendSignaled,
			SGList: []client.SGE{a.mr.SGE(0, n)}}}); err != nil {
			t.Fatal(err)
		}
		wantOK(t, poll(t, a.cq, 1, 10*time.Second))
		wantOK(t, poll(t, b.cq, 1, 10*time.Second))
		if !bytes.Equal(a.buf[:n], b.buf[:n]) {
			t.Fatalf("message %d differs", i)
		}
	}
}

// TestKilledClientFreesResources kills a client process in the middle of a
// transfer: the daemon frees everything its connection held, and a new
// client then uses the device fully.
func TestKilledClientFreesResources(t *testing.T) {
	na, nb := twoNodes(t, nil)
	baseA, baseB := na.resources(), nb.resources()
	port := nextPort()
	srv := start(t, nil, nil, "perf", "write", "-d", na.socket(), "-p", port, "--timeout", "60s")
	cli := start(t, nil, nil, "perf", "write", "-d", nb.socket(), "-p", port, "-n", "100000000", "-q", "2", "--timeout", "60s", na.addr.String())
	// Wait until the transfer runs.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := ctlStats(t, nb.d.Paths().Control)
		if s.Port.TxPackets > 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no traffic after 30s:\nclient:\n%s\nserver:\n%s", cli.out, srv.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	during := nb.resources()
	if during.sessions != baseB.sessions+1 || during.qps < baseB.qps+2 || during.regions <= baseB.regions {
		t.Fatalf("while running: %+v (base %+v)", during, baseB)
	}
	t.Logf("base %+v, during the transfer %+v", baseB, during)
	cli.kill()
	waitResources(t, nb, baseB, 15*time.Second)
	// The server sees its peer vanish and exits with an error; its daemon
	// frees its session too.
	if err := srv.wait(t, 90*time.Second); err == nil {
		t.Errorf("perf server exited cleanly after its client was killed:\n%s", srv.out)
	}
	waitResources(t, na, baseA, 15*time.Second)
	// The device is fully usable by a new client.
	a, b := newEnd(t, na, endOpts{}), newEnd(t, nb, endOpts{})
	a.connectRC(t, b)
	b.connectRC(t, a)
	exchange(t, b, a, 20, 30000)
	exchange(t, a, b, 20, 30000)
}

// TestAttachGarbage: a client sending garbage on the attach socket gets an
// error reply and is disconnected; a transfer of another client goes on.
func TestAttachGarbage(t *testing.T) {
	a, b := rcPair(t, endOpts{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		junk := [][]byte{
			[]byte("garbage"),                                                // shorter than a header
			bytes.Repeat([]byte{0xff}, 64),                                   // bad magic
			attach.AppendMessage(nil, 9, 1, nil),                             // unknown type
			attach.AppendMessage(nil, attach.TypeCmd, 1, []byte{1, 2, 3, 4}), // a command before HELLO
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			msg := junk[i%len(junk)]
			c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: b.n.socket(), Net: "unixpacket"})
			if err != nil {
				t.Error(err)
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(msg); err != nil {
				t.Error(err)
				c.Close()
				return
			}
			buf := make([]byte, 1024)
			n, err := c.Read(buf)
			if err != nil || n < attach.HeaderSize+attach.StatusSize {
				t.Errorf("junk %d: reply %d bytes, %v", i%len(junk), n, err)
			} else if st := int32(binary.LittleEndian.Uint32(buf[attach.HeaderSize:])); st != -int32(syscall.EPROTO) {
				t.Errorf("junk %d: status %d, want -EPROTO", i%len(junk), st)
			}
			// Then the daemon closes the connection.
			if n, err := c.Read(buf); n != 0 || err == nil {
				t.Errorf("junk %d: connection still open after the error reply (%d, %v)", i%len(junk), n, err)
			}
			c.Close()
		}
	}()
	exchange(t, a, b, 100, 5000)
	close(stop)
	wg.Wait()
}

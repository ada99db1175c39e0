package udp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

// inPoller reports whether f is registered with the Go poller: only a
// registered file takes a deadline (os.ErrNoDeadline otherwise).
func inPoller(t *testing.T, f *os.File) bool {
	t.Helper()
	err := f.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		return true
	case errors.Is(err, os.ErrNoDeadline):
		return false
	}
	t.Fatalf("SetReadDeadline(%s): %v", f.Name(), err)
	return false
}

// TestSocketsOutOfPoller: a link's sockets are in the Go poller only when
// a receive ring waits there (WaitInPoller): the discarding UDP sockets of
// packet receive mode and the packet send socket never, the others only
// with WaitInPoller (sock_linux.go "Out of the poller"). A registered
// socket wakes the runtime's poller thread for every datagram it sends.
func TestSocketsOutOfPoller(t *testing.T) {
	tests := []struct {
		mode udp2Mode
		// want: the UDP sockets, the packet receive socket, the packet
		// send socket in the poller.
		udp, prx, ptx bool
	}{
		{udp2Mode{Mode{Send: IOUDP, Recv: IOUDP}, false}, false, false, false},
		{udp2Mode{Mode{Send: IOUDP, Recv: IOUDP, WaitInPoller: true}, false}, true, false, false},
		{udp2Mode{Mode{Send: IOUDP, Recv: IOPacket}, true}, false, false, false},
		{udp2Mode{Mode{Send: IOUDP, Recv: IOPacket, WaitInPoller: true}, true}, false, true, false},
		{udp2Mode{Mode{Send: IOPacket, Recv: IOPacket}, true}, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			if tc.mode.root {
				nstest.NeedRoot(t)
			}
			addrs := testaddr.Loopback(t, 2)
			l, err := New(Config{Addrs: addrs, Mode: tc.mode.Mode, Pool: link.NewPool(0)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			socks := l.table.Load().socks
			if len(socks) != len(addrs) {
				t.Fatalf("%d UDP sockets for %d addresses", len(socks), len(addrs))
			}
			for _, s := range socks {
				if got := inPoller(t, s.file); got != tc.udp {
					t.Errorf("UDP socket of %v in the poller: %v, want %v", s.addr, got, tc.udp)
				}
			}
			if (l.prx != nil) != (tc.mode.Recv == IOPacket) || (l.ptx != nil) != (tc.mode.Send == IOPacket) {
				t.Fatalf("packet sockets: receive %v, send %v", l.prx != nil, l.ptx != nil)
			}
			if l.prx != nil {
				if got := inPoller(t, l.prx.file); got != tc.prx {
					t.Errorf("packet receive socket in the poller: %v, want %v", got, tc.prx)
				}
			}
			if l.ptx != nil {
				if got := inPoller(t, l.ptx.file); got != tc.ptx {
					t.Errorf("packet send socket in the poller: %v, want %v", got, tc.ptx)
				}
			}
		})
	}
}

// udp2Mode is a mode and whether it needs root.
type udp2Mode struct {
	Mode
	root bool
}

// TestWaitWithoutWake: a ring whose wake eventfd could not be opened
// (out of descriptors) still receives from a socket outside the poller,
// and still stops when woken: waitRecv then looks at the stop every
// wakeCheck. A wait that never looked would hang the test.
func TestWaitWithoutWake(t *testing.T) {
	a := testaddr.Loopback(t, 1)[0]
	s, err := openUDP(a, 0, 0, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.file.Close()
	m := newMmsg(s.raw, false)
	if m.wake != -1 {
		t.Fatalf("wake %d before openWake", m.wake)
	}
	buf := make([]byte, 64)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	hdrs := make([]unix.Mmsghdr, 1)
	hdrs[0].Hdr.Iov = &iov
	hdrs[0].Hdr.SetIovlen(1)

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	recv := func() {
		n, err := m.recv(hdrs)
		done <- result{n, err}
	}

	go recv()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, wire.RoCEv2Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("irdma")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.n != 1 || hdrs[0].Len != 5 || string(buf[:5]) != "irdma" {
			t.Fatalf("recv: %d datagrams (%d bytes %q), %v; want the one sent", r.n, hdrs[0].Len, buf[:hdrs[0].Len], r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the datagram did not end the wait")
	}

	go recv()
	time.Sleep(20 * time.Millisecond) // let it wait in ppoll
	m.wakeUp()
	select {
	case r := <-done:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("recv after wakeUp: %d, %v; want net.ErrClosed", r.n, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wakeUp did not end a wait without an eventfd")
	}
}

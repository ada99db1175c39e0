package udp

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsg issues recvmmsg and sendmmsg on one socket through its RawConn,
// with the callbacks bound once so that a call allocates nothing. A
// receive ring's mmsg waits for datagrams in ppoll(2) on its own thread
// (waitRecv), or, when the socket is in the Go poller (inPoller), parks
// there. x/net's ReadBatch would allocate a net.UDPAddr and its IP for
// every datagram (internal/socket parseInetAddr; BenchmarkReadBatchXNet
// measures it); the receive path reads straight into preallocated
// sockaddrs instead. Sending uses it too (sendVia): x/net's PacketConn
// has no AF_PACKET socket to wrap, and its WriteBatch takes the socket's
// write lock.
//
// An mmsg is used by one goroutine at a time.
type mmsg struct {
	raw   syscall.RawConn
	hdrs  []unix.Mmsghdr
	n     int
	errno syscall.Errno

	recvF func(fd uintptr) bool
	sendF func(fd uintptr)

	// inPoller: the socket is registered with the Go poller and recv
	// parks there (Mode.WaitInPoller; sock_linux.go "Out of the poller").
	inPoller bool
	// wake ends waitRecv's ppoll (wakeUp) once the ring stops; -1: none
	// could be opened, and waitRecv looks at stop every wakeCheck
	// instead. Set before the ring's goroutine starts and cleared by it
	// as it ends (closeWake), under wakeMu against wakeUp.
	wakeMu sync.Mutex
	wake   int
	stop   atomic.Bool
	woken  bool
	pfd    [2]unix.PollFd
	waitF  func(fd uintptr)
}

// wakeCheck is how often a ring without a wake eventfd (out of
// descriptors) looks whether it was stopped while it waits.
var wakeCheck = unix.NsecToTimespec(int64(100 * time.Millisecond))

func newMmsg(raw syscall.RawConn, inPoller bool) *mmsg {
	m := &mmsg{raw: raw, inPoller: inPoller, wake: -1}
	m.recvF = m.doRecv
	m.sendF = m.doSend
	m.waitF = m.waitRecv
	return m
}

// recv reads up to len(hdrs) datagrams, waiting until at least one is
// there. It returns net.ErrClosed once the ring is woken to stop (wakeUp)
// or the socket is closed.
func (m *mmsg) recv(hdrs []unix.Mmsghdr) (int, error) {
	m.hdrs, m.n, m.errno = hdrs, 0, 0
	if !m.inPoller {
		if err := m.raw.Control(m.waitF); err != nil {
			return 0, err
		}
		if m.woken {
			return 0, net.ErrClosed
		}
	} else if err := m.raw.Read(m.recvF); err != nil {
		return 0, err
	}
	if m.errno != 0 {
		return 0, m.errno
	}
	return m.n, nil
}

// Waiting in ppoll rather than in the Go poller: a datagram then wakes
// this thread directly. In the poller the goroutine waits for whichever
// thread next polls the network, and a Go thread busy with other
// goroutines polls it late: two daemons' ib_write_lat -s 8, six
// alternated pairs, p99 1 472–1 914 µs in the poller against 242–298 µs
// here (docs/performance.md "Waiting for datagrams"). The price is
// smaller receive batches under a stream (a 64 KiB WRITE stream: 3.0
// datagrams per recvmmsg against 4.7, and 10 % less bandwidth). Such a
// socket is not in the poller at all (sock_linux.go "Out of the
// poller"); Control holds it open while the thread waits, so the ring is
// woken (wakeUp) before it is closed, and its descriptor is closed when
// the wait lets go of it.

// openWake makes recv wait in ppoll, woken by wakeUp.
func (m *mmsg) openWake() error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	m.wake = fd
	return nil
}

// wakeUp ends a wait in ppoll and every later one: the ring stops.
func (m *mmsg) wakeUp() {
	m.stop.Store(true)
	m.wakeMu.Lock()
	defer m.wakeMu.Unlock()
	if m.wake >= 0 {
		one := [8]byte{1}
		_, _ = unix.Write(m.wake, one[:])
	}
}

// closeWake releases the wake eventfd; the ring's goroutine calls it as
// it ends.
func (m *mmsg) closeWake() {
	m.wakeMu.Lock()
	defer m.wakeMu.Unlock()
	if m.wake >= 0 {
		unix.Close(m.wake)
		m.wake = -1
	}
}

// waitRecv reads like doRecv and, while there is nothing to read, waits in
// ppoll on the socket and the wake eventfd (a negative descriptor, when
// there is none, ppoll ignores).
func (m *mmsg) waitRecv(fd uintptr) {
	var timeout *unix.Timespec
	if m.wake < 0 {
		timeout = &wakeCheck
	}
	for !m.doRecv(fd) {
		m.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		m.pfd[1] = unix.PollFd{Fd: int32(m.wake), Events: unix.POLLIN}
		if _, err := unix.Ppoll(m.pfd[:], timeout, nil); err != nil && err != unix.EINTR {
			m.errno = unix.EIO
			if en, ok := err.(syscall.Errno); ok {
				m.errno = en
			}
			return
		}
		if m.pfd[1].Revents != 0 || m.stop.Load() {
			m.woken = true
			return
		}
	}
}

func (m *mmsg) doRecv(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // park until readable
		case 0:
			m.n = int(n)
		default:
			m.errno = e
		}
		return true
	}
}

// send writes up to len(hdrs) messages on m's socket without waiting: a
// full socket buffer is EAGAIN, which the caller counts as a full
// transmit queue.
func (m *mmsg) send(hdrs []unix.Mmsghdr) (int, error) { return m.sendVia(m.raw, hdrs) }

// sendVia is send on raw's socket. It holds the socket open for the call
// (Control), not its write lock (Write): a sendmmsg with MSG_DONTWAIT never
// waits in the poller, so the lock would only serialise the device's
// senders — the ACKs a receive thread sends and the requests a
// notification runs, on one socket — and a sender that found it held
// slept until the holder's system call was over and it was scheduled
// again (docs/performance.md "Sends without the socket's lock").
func (m *mmsg) sendVia(raw syscall.RawConn, hdrs []unix.Mmsghdr) (int, error) {
	m.hdrs, m.n, m.errno = hdrs, 0, 0
	if err := raw.Control(m.sendF); err != nil {
		return 0, err
	}
	if m.errno != 0 {
		return 0, m.errno
	}
	return m.n, nil
}

func (m *mmsg) doSend(fd uintptr) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case 0:
			m.n = int(n)
		default:
			m.errno = e
		}
		return
	}
}

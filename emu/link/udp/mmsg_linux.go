package udp

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsg issues recvmmsg and sendmmsg on one socket through its RawConn, so
// that the Go poller parks the goroutine while the socket has nothing to
// read, and with the callbacks bound once so that a call allocates
// nothing. x/net's ReadBatch would allocate a net.UDPAddr and its IP for
// every datagram (internal/socket parseInetAddr; BenchmarkReadBatchXNet
// measures it); the receive path reads straight into preallocated
// sockaddrs instead. Packet-mode sending uses it too: x/net's
// PacketConn has no AF_PACKET socket to wrap.
//
// An mmsg is used by one goroutine at a time.
type mmsg struct {
	raw   syscall.RawConn
	hdrs  []unix.Mmsghdr
	n     int
	errno syscall.Errno

	recvF, sendF func(fd uintptr) bool
}

func newMmsg(raw syscall.RawConn) *mmsg {
	m := &mmsg{raw: raw}
	m.recvF = m.doRecv
	m.sendF = m.doSend
	return m
}

// recv reads up to len(hdrs) datagrams, waiting until at least one is
// there. It returns net.ErrClosed (wrapped by the poller) once the socket
// is closed.
func (m *mmsg) recv(hdrs []unix.Mmsghdr) (int, error) {
	m.hdrs, m.n, m.errno = hdrs, 0, 0
	if err := m.raw.Read(m.recvF); err != nil {
		return 0, err
	}
	if m.errno != 0 {
		return 0, m.errno
	}
	return m.n, nil
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

// send writes up to len(hdrs) messages without waiting: a full socket
// buffer is EAGAIN, which the caller counts as a full transmit queue.
func (m *mmsg) send(hdrs []unix.Mmsghdr) (int, error) {
	m.hdrs, m.n, m.errno = hdrs, 0, 0
	if err := m.raw.Write(m.sendF); err != nil {
		return 0, err
	}
	if m.errno != 0 {
		return 0, m.errno
	}
	return m.n, nil
}

func (m *mmsg) doSend(fd uintptr) bool {
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
		return true
	}
}

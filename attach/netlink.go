package attach

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"go.uber.org/zap"
)

// NetlinkHandler answers the NETLINK_RDMA sockets of programs: the preload
// turns socket(AF_NETLINK, …, NETLINK_RDMA) into a connection whose HELLO
// carries HelloNetlink, and from then on the connection is the socket —
// every datagram the program sends reaches Request unchanged, every reply
// is a datagram the program receives unchanged (docs/attach.md "Netlink
// connections"). It is a ListenConfig option, beside the uverbs Handler.
type NetlinkHandler interface {
	// OpenNetlink accepts a socket; p.Hello.Port is the port id the
	// program's socket reports.
	OpenNetlink(p *Peer) (NetlinkSession, error)
}

// NetlinkSession is one program's NETLINK_RDMA socket.
type NetlinkSession interface {
	// Request answers one datagram: the replies to send, each one
	// datagram, in order (none for a message that asks for none).
	Request(msg []byte) [][]byte
	// Close ends the socket (the program closed it or exited).
	Close()
}

// helloNetlink answers a HELLO with HelloNetlink; it returns the reply and
// the session (nil when refused; the connection then ends).
func (cs *connState) helloNetlink(h Header, m Hello, fds []*os.File) ([]byte, NetlinkSession) {
	closeFiles(fds) // a netlink socket reaches no memory
	rep := HelloReply{Version: Version}
	if cs.nl == nil {
		rep.Status = -int32(syscall.EPROTONOSUPPORT)
		return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), nil
	}
	sess, err := cs.nl.OpenNetlink(&Peer{Hello: m, Cred: cs.cred})
	if err == nil && sess == nil {
		err = errors.New("attach: netlink handler returned no session")
	}
	if err != nil {
		rep.Status = Errno(err)
		cs.log.Info("attach: netlink socket refused", zap.Error(err), cs.pidField())
		return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), nil
	}
	rep.Features = FeatureNetlink
	cs.log.Debug("attach: netlink socket", zap.String("program", m.Program), zap.Uint32("pid", m.PID), zap.Uint32("port", m.Port))
	return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), sess
}

// serveNetlink runs a connection that has become a netlink socket: raw
// datagrams in, raw datagrams out, no attach header, no descriptors. A
// datagram longer than the buffer is cut as the kernel's netlink_sendmsg
// never would (it takes up to the socket's send buffer): it is answered
// like any malformed request, by the handler.
func serveNetlink(c *net.UnixConn, sess NetlinkSession, log *zap.Logger) {
	defer sess.Close()
	buf := make([]byte, MaxMessage)
	for {
		n, err := c.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("attach: netlink read", zap.Error(err))
			}
			return
		}
		if n == 0 {
			// A zero-length SOCK_SEQPACKET read is the peer's
			// orderly close.
			return
		}
		for _, r := range sess.Request(buf[:n]) {
			if _, err := c.Write(r); err != nil {
				log.Debug("attach: netlink write", zap.Error(err))
				return
			}
		}
	}
}

package attach

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Peer is what the server knows of a client when its HELLO arrives.
type Peer struct {
	Hello Hello
	// Cred is the client's pid, uid and gid as the kernel recorded them at
	// connect (SO_PEERCRED); nil if unavailable.
	Cred *unix.Ucred
	// Mem is the client's /proc/self/mem opened O_RDWR, or nil if it sent
	// none (non-dumpable program, no /proc). If Open succeeds it belongs to
	// the Session; if Open fails the server closes it.
	Mem *os.File
}

// Welcome is what Open tells the client in the HELLO reply.
type Welcome struct {
	Device     string // the device's name, e.g. irdma0
	ABIVersion uint32 // uverbs driver ABI version (irdma: 5)
	// Features are the Feature* bits offered. FeatureNotify is sent only
	// when the Session is also a Notifier.
	Features uint32
}

// Handler opens a Session for every client that says HELLO. It is called
// from the connection's goroutine; different connections call it
// concurrently.
type Handler interface {
	// Open accepts or refuses a client. An error is sent as the HELLO
	// reply's status (a syscall.Errno keeps its value, anything else is
	// EIO) and the connection is closed.
	Open(p *Peer) (Session, Welcome, error)
}

// Session is one open of the uverbs device: one connection, one ucontext.
// Its methods are called from the connection's goroutine, one at a time, in
// the order of the requests; Close is called exactly once, last, when the
// connection ends for whatever reason (the client closed it, exited or was
// killed, sent a malformed message, or the server is closing). Close must
// free everything the client created, as the kernel does on the last close
// of a uverbs file.
type Session interface {
	// Command executes one uverbs write() command. cmd aliases the
	// connection's receive buffer and is valid during the call only.
	Command(cmd []byte) CmdReply
	// Mmap answers the client's mmap() of the device: a memfd and the
	// offset in it where the mapping starts. The file belongs to the
	// server once returned (see DupFile). An error becomes the status.
	Mmap(req MmapRequest) (memfd *os.File, fdOffset uint64, err error)
	// Mem takes a piece of the client's shared memory: memfd is mapped at
	// req.Addr in the client, req.FDOffset bytes into the file. The file
	// belongs to the Session, also when it returns an error.
	Mem(req MemRequest, memfd *os.File) error
	// Close ends the session.
	Close()
}

// Notifier is a Session that answers NOTIFY: the post notification of
// docs/attach.md. A Session that is not gets -EOPNOTSUPP (the connection
// goes on).
type Notifier interface {
	// Notify returns the eventfd the client writes to notify a post, and
	// the memfd of the notify page with where its words are. The files
	// belong to the server once returned (see DupFile).
	Notify(req NotifyRequest) (NotifyGrant, error)
}

// NotifyGrant is a Notifier's answer.
type NotifyGrant struct {
	EventFD     *os.File // the client writes 8-byte counts to it
	Page        *os.File // memfd: NotifyPageSize bytes at PageOffset
	PageOffset  uint64
	PollingOff  uint32 // the u32 the daemon sets to 1 while it polls
	CountersOff uint32 // the client's two u64 counters: notified, suppressed
	// Flags is NotifyQPBits when the request asked it and the session
	// names QPs: QPBits bits at QPBitsOff (NotifyReply).
	Flags     uint32
	QPBitsOff uint32
	QPBits    uint32
}

// FD is a descriptor a CMD reply passes, and the byte offset in the
// response where the client writes the descriptor's number.
type FD struct {
	File   *os.File
	Offset uint32
}

// CmdReply is a Session's answer to a command.
type CmdReply struct {
	// Status is what the client's write() returns: the command's length on
	// success, or a negative errno.
	Status int32
	// RespAddr is the client address the response is copied to (taken from
	// the command); 0 for none.
	RespAddr uint64
	// Resp is the response, copied to RespAddr after the descriptor numbers
	// have been patched in.
	Resp []byte
	// FDs are passed with the reply; they belong to the server once the
	// reply is returned.
	FDs []FD
}

// Errno returns the negative errno a reply carries for err: a
// syscall.Errno keeps its value, anything else is -EIO, nil is 0.
func Errno(err error) int32 {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return -int32(e)
	}
	return -int32(syscall.EIO)
}

// ListenConfig holds the options of a server.
type ListenConfig struct {
	// SocketMode is the socket's permissions; 0 means 0666, like the
	// uverbs character devices (any local user may open the device).
	SocketMode os.FileMode
	// DirMode is the permissions of the socket's directory when Listen
	// creates it; 0 means 0755. An existing directory is left as it is.
	DirMode os.FileMode
	// Logger receives connection events and protocol errors; nil means none.
	Logger *zap.Logger
	// Netlink answers the programs' NETLINK_RDMA sockets (HELLO with
	// HelloNetlink); nil refuses them with -EPROTONOSUPPORT.
	Netlink NetlinkHandler
}

// Server serves the attach protocol on one socket.
type Server struct {
	ln   *net.UnixListener
	path string
	h    Handler
	nl   NetlinkHandler
	log  *zap.Logger

	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ErrInUse is returned by Listen when a live server already answers on the
// socket's path.
var ErrInUse = errors.New("attach: socket in use by a running server")

// Listen serves the attach protocol on a SOCK_SEQPACKET socket at path with
// the default ListenConfig.
func Listen(path string, h Handler) (*Server, error) {
	return ListenConfig{}.Listen(path, h)
}

// Listen creates the socket's directory if needed, removes a stale socket
// left by a server that is gone (ErrInUse if one still answers), binds and
// starts serving: one goroutine per connection. Close stops it.
func (lc ListenConfig) Listen(path string, h Handler) (*Server, error) {
	if h == nil {
		return nil, errors.New("attach: nil handler")
	}
	sockMode, dirMode := lc.SocketMode, lc.DirMode
	if sockMode == 0 {
		sockMode = 0o666
	}
	if dirMode == 0 {
		dirMode = 0o755
	}
	log := lc.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, fmt.Errorf("attach: socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, sockMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("attach: %w", err)
	}
	s := &Server{ln: ln, path: path, h: h, nl: lc.Netlink, log: log, conns: map[*net.UnixConn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// removeStale removes a socket at path that no server answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("attach: %s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		// EPROTOTYPE (a live socket of another type), EACCES, a timeout:
		// not provably stale; leave it alone.
		return fmt.Errorf("attach: %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("attach: removing stale socket: %w", err)
	}
	return nil
}

// Addr returns the socket's path.
func (s *Server) Addr() string { return s.path }

// Close stops accepting, closes every connection, waits for requests in
// flight and for every Session's Close, and removes the socket.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	backoff := time.Millisecond
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait and retry rather than spin.
			s.log.Warn("attach: accept", zap.Error(err))
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = time.Millisecond
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve runs one connection until it ends.
func (s *Server) serve(c *net.UnixConn) {
	defer s.wg.Done()
	cs := &connState{h: s.h, nl: s.nl, log: s.log, cred: peerCred(c)}
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		cs.close()
	}()
	buf := make([]byte, MaxMessage)
	oob := make([]byte, oobSize)
	for {
		r, err := recvMsg(c, buf, oob)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				cs.log.Debug("attach: read", zap.Error(err))
			}
			return
		}
		reply, files, keep := cs.handle(r)
		if reply != nil {
			err = sendMsg(c, reply, files)
		}
		closeFiles(files)
		if err != nil {
			cs.log.Debug("attach: write", zap.Error(err))
			return
		}
		if !keep {
			return
		}
		if cs.nlSess != nil {
			// The connection is a netlink socket from now on.
			serveNetlink(c, cs.nlSess, cs.log)
			return
		}
	}
}

func peerCred(c *net.UnixConn) *unix.Ucred {
	sc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var cred *unix.Ucred
	sc.Control(func(fd uintptr) {
		cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return cred
}

// connState is the protocol state of one connection, apart from its
// socket, so that the fuzz target can drive it directly.
type connState struct {
	h  Handler
	nl NetlinkHandler // nil: HelloNetlink is refused
	// nlSess is set once a HELLO with HelloNetlink was accepted.
	nlSess NetlinkSession
	log    *zap.Logger
	cred   *unix.Ucred
	sess   Session // nil until HELLO succeeded
}

func (cs *connState) close() {
	if cs.sess != nil {
		cs.sess.Close()
		cs.sess = nil
	}
}

// handle processes one received message: it returns the reply to send (nil
// for none), the files to send with it (the caller closes them after
// sending), and whether the connection goes on. It consumes r.files.
func (cs *connState) handle(r received) (reply []byte, files []*os.File, keep bool) {
	h, payload, err := ParseMessage(r.msg)
	if err == nil && r.trunc {
		err = malformed("message or descriptors truncated")
	}
	if err == nil && !h.Type.Known() {
		err = malformed("unknown type %d", uint16(h.Type))
	}
	if err == nil && len(r.files) > h.Type.maxRequestFDs() {
		err = malformed("%s with %d descriptors", h.Type, len(r.files))
	}
	if err == nil && (cs.sess == nil) != (h.Type == TypeHello) {
		if cs.sess == nil {
			err = malformed("%s before HELLO", h.Type)
		} else {
			err = malformed("second HELLO")
		}
	}
	if err != nil {
		closeFiles(r.files)
		return cs.protocolError(h, err), nil, false
	}
	switch h.Type {
	case TypeHello:
		return cs.hello(h, payload, r.files)
	case TypeCmd:
		return cs.cmd(h, payload)
	case TypeMmap:
		return cs.mmap(h, payload)
	case TypeNotify:
		return cs.notify(h, payload)
	default: // TypeMem
		return cs.mem(h, payload, r.files)
	}
}

// protocolError builds the short error reply (-EPROTO) for a malformed
// message; the connection is then dropped. The reply echoes the request's
// type and seq as far as they could be read.
func (cs *connState) protocolError(h Header, err error) []byte {
	cs.log.Warn("attach: dropping connection", zap.Error(err), cs.pidField())
	return AppendMessage(nil, h.Type, h.Seq, AppendStatus(nil, -int32(syscall.EPROTO)))
}

func (cs *connState) pidField() zap.Field {
	if cs.cred == nil {
		return zap.Skip()
	}
	return zap.Int32("pid", cs.cred.Pid)
}

func (cs *connState) hello(h Header, payload []byte, fds []*os.File) ([]byte, []*os.File, bool) {
	m, err := ParseHello(payload)
	if err != nil {
		closeFiles(fds)
		return cs.protocolError(h, err), nil, false
	}
	if m.Version == Version && m.Flags&HelloNetlink != 0 {
		reply, sess := cs.helloNetlink(h, m, fds)
		cs.nlSess = sess
		return reply, nil, sess != nil
	}
	rep := HelloReply{Version: Version}
	if m.Version != Version {
		closeFiles(fds)
		rep.Status = -int32(syscall.EPROTONOSUPPORT)
		cs.log.Warn("attach: unsupported protocol version", zap.Uint32("version", m.Version), cs.pidField())
		return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), nil, false
	}
	p := &Peer{Hello: m, Cred: cs.cred}
	if len(fds) == 1 {
		p.Mem = fds[0]
	}
	sess, w, err := cs.h.Open(p)
	if err == nil && sess == nil {
		err = errors.New("attach: handler returned no session")
	}
	if err != nil {
		if p.Mem != nil {
			p.Mem.Close()
		}
		rep.Status = Errno(err)
		cs.log.Info("attach: open refused", zap.Error(err), cs.pidField())
		return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), nil, false
	}
	cs.sess = sess
	rep.ABIVersion, rep.Device = w.ABIVersion, w.Device
	if _, ok := sess.(Notifier); ok {
		rep.Features = w.Features & FeatureNotify
	}
	rep.Features |= w.Features & FeatureRdmaCM
	cs.log.Debug("attach: open", zap.String("program", m.Program), zap.Uint32("pid", m.PID), zap.Bool("mem", p.Mem != nil))
	return AppendMessage(nil, TypeHello, h.Seq, rep.Append(nil)), nil, true
}

func (cs *connState) cmd(h Header, payload []byte) ([]byte, []*os.File, bool) {
	r := cs.sess.Command(payload)
	w := CmdReplyWire{Status: r.Status, RespAddr: r.RespAddr, Resp: r.Resp}
	files := make([]*os.File, 0, len(r.FDs))
	for _, fd := range r.FDs {
		w.FDOffsets = append(w.FDOffsets, fd.Offset)
		files = append(files, fd.File)
	}
	err := w.Check()
	for _, f := range files {
		if f == nil && err == nil {
			err = errors.New("attach: nil file in a CMD reply")
		}
	}
	if err != nil {
		// The daemon's own mistake: the client gets EIO, the connection
		// goes on.
		cs.log.Error("attach: bad CMD reply from the session", zap.Error(err))
		closeFiles(files)
		w = CmdReplyWire{Status: -int32(syscall.EIO)}
		files = nil
	}
	return AppendMessage(nil, TypeCmd, h.Seq, w.Append(nil)), files, true
}

func (cs *connState) mmap(h Header, payload []byte) ([]byte, []*os.File, bool) {
	m, err := ParseMmap(payload)
	if err != nil {
		return cs.protocolError(h, err), nil, false
	}
	f, off, err := cs.sess.Mmap(m)
	if err == nil && f == nil {
		err = errors.New("attach: Mmap returned no file")
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return AppendMessage(nil, TypeMmap, h.Seq, MmapReply{Status: Errno(err)}.Append(nil)), nil, true
	}
	return AppendMessage(nil, TypeMmap, h.Seq, MmapReply{FDOffset: off}.Append(nil)), []*os.File{f}, true
}

func (cs *connState) mem(h Header, payload []byte, fds []*os.File) ([]byte, []*os.File, bool) {
	m, err := ParseMem(payload)
	if err == nil && len(fds) != 1 {
		err = malformed("MEM without a descriptor")
	}
	if err != nil {
		closeFiles(fds)
		return cs.protocolError(h, err), nil, false
	}
	st := Errno(cs.sess.Mem(m, fds[0]))
	return AppendMessage(nil, TypeMem, h.Seq, AppendStatus(nil, st)), nil, true
}

func (cs *connState) notify(h Header, payload []byte) ([]byte, []*os.File, bool) {
	m, err := ParseNotify(payload)
	if err != nil {
		return cs.protocolError(h, err), nil, false
	}
	n, ok := cs.sess.(Notifier)
	if !ok {
		return AppendMessage(nil, TypeNotify, h.Seq, NotifyReply{Status: -int32(syscall.EOPNOTSUPP)}.Append(nil)), nil, true
	}
	g, err := n.Notify(m)
	rep := NotifyReply{Flags: g.Flags, PageOffset: g.PageOffset, PollingOff: g.PollingOff, CountersOff: g.CountersOff,
		QPBitsOff: g.QPBitsOff, QPBits: g.QPBits}
	if err == nil && (g.EventFD == nil || g.Page == nil) {
		err = errors.New("attach: Notify returned no file")
	}
	if err == nil {
		// The Session's own mistake must not reach the client as a
		// reply it would refuse.
		if _, perr := ParseNotifyReply(rep.Append(nil)); perr != nil {
			cs.log.Error("attach: bad NOTIFY grant from the session", zap.Error(perr))
			err = syscall.EIO
		} else if g.Flags&^m.Flags != 0 {
			cs.log.Error("attach: NOTIFY grant with flags not asked", zap.Uint32("flags", g.Flags), zap.Uint32("asked", m.Flags))
			err = syscall.EIO
		}
	}
	if err != nil {
		closeFiles([]*os.File{g.EventFD, g.Page})
		return AppendMessage(nil, TypeNotify, h.Seq, NotifyReply{Status: Errno(err)}.Append(nil)), nil, true
	}
	return AppendMessage(nil, TypeNotify, h.Seq, rep.Append(nil)), []*os.File{g.EventFD, g.Page}, true
}

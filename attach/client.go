package attach

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is the client side of one connection: one open of the device. Its
// methods may be called from several goroutines; requests are serialised.
type Conn struct {
	mu     sync.Mutex
	c      *net.UnixConn
	seq    uint32
	buf    []byte
	oob    []byte
	broken error // set once the connection is unusable
}

// Dial connects to the daemon's socket at path.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, buf: make([]byte, MaxMessage), oob: make([]byte, oobSize)}, nil
}

// Close closes the connection; the daemon frees the session.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = net.ErrClosed
	}
	return c.c.Close()
}

// StatusError is a negative status the daemon returned for a request.
type StatusError struct {
	Type   Type
	Errno  syscall.Errno
	Closed bool // a protocol error: the daemon closed the connection
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("attach: %s: %v", e.Type, e.Errno)
	if e.Closed {
		s += " (connection closed)"
	}
	return s
}

// Unwrap lets errors.Is match the errno.
func (e *StatusError) Unwrap() error { return e.Errno }

// roundTrip sends one request and reads its reply. It returns the reply's
// payload (valid until the next request) and descriptors. A short
// status-only reply to a request whose normal reply is longer is returned
// as a *StatusError with Closed set, and the connection is marked broken.
func (c *Conn) roundTrip(t Type, payload []byte, files []*os.File, normalSize int) ([]byte, []*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, nil, c.broken
	}
	c.seq++
	seq := c.seq
	if err := sendMsg(c.c, AppendMessage(nil, t, seq, payload), files); err != nil {
		c.broken = err
		return nil, nil, err
	}
	r, err := recvMsg(c.c, c.buf, c.oob)
	if err != nil {
		c.broken = err
		return nil, nil, err
	}
	h, p, err := ParseMessage(r.msg)
	if err == nil && r.trunc {
		err = malformed("reply truncated")
	}
	if err == nil && (h.Seq != seq || h.Type != t) {
		err = malformed("reply %s seq %d to %s seq %d", h.Type, h.Seq, t, seq)
	}
	if err != nil {
		closeFiles(r.files)
		c.broken = err
		c.c.Close()
		return nil, nil, err
	}
	if len(p) == StatusSize && normalSize != StatusSize {
		closeFiles(r.files)
		st, _ := ParseStatus(p)
		serr := &StatusError{Type: t, Errno: errnoOf(st), Closed: true}
		c.broken = serr
		c.c.Close()
		return nil, nil, serr
	}
	return p, r.files, nil
}

func errnoOf(status int32) syscall.Errno {
	if status >= 0 {
		return syscall.EIO
	}
	return syscall.Errno(-status)
}

// Hello sends HELLO with the client's /proc/self/mem (mem may be nil) and
// returns the daemon's reply. A refused HELLO is a *StatusError.
func (c *Conn) Hello(h Hello, mem *os.File) (HelloReply, error) {
	if h.Version == 0 {
		h.Version = Version
	}
	var files []*os.File
	if mem != nil {
		files = []*os.File{mem}
	}
	p, fds, err := c.roundTrip(TypeHello, h.Append(nil), files, HelloReplySize)
	if err != nil {
		return HelloReply{}, err
	}
	closeFiles(fds)
	rep, err := ParseHelloReply(p)
	if err != nil {
		return HelloReply{}, err
	}
	if rep.Status != 0 {
		c.mu.Lock()
		c.broken = &StatusError{Type: TypeHello, Errno: errnoOf(rep.Status), Closed: true}
		c.mu.Unlock()
		return rep, c.broken
	}
	return rep, nil
}

// CmdResult is the answer to a command, as the preload would apply it.
type CmdResult struct {
	Status   int32  // what write() returns
	RespAddr uint64 // where the response would be copied
	// Resp is the response with the received descriptors' numbers already
	// written at their offsets (as the preload does).
	Resp  []byte
	Files []*os.File // the received descriptors; the caller owns them
}

// Command sends one uverbs write() command.
func (c *Conn) Command(cmd []byte) (CmdResult, error) {
	if len(cmd) > MaxPayload {
		return CmdResult{}, syscall.EMSGSIZE
	}
	p, fds, err := c.roundTrip(TypeCmd, cmd, nil, CmdReplyMin)
	if err != nil {
		return CmdResult{}, err
	}
	w, err := ParseCmdReply(p)
	if err == nil && len(w.FDOffsets) != len(fds) {
		err = malformed("CMD reply announces %d descriptors, %d came", len(w.FDOffsets), len(fds))
	}
	if err != nil {
		closeFiles(fds)
		return CmdResult{}, err
	}
	res := CmdResult{Status: w.Status, RespAddr: w.RespAddr, Resp: append([]byte(nil), w.Resp...), Files: fds}
	for i, off := range w.FDOffsets {
		fd, err := rawFD(fds[i])
		if err != nil {
			closeFiles(fds)
			return CmdResult{}, err
		}
		le.PutUint32(res.Resp[off:], uint32(int32(fd)))
	}
	return res, nil
}

// Mmap asks for the memory behind an mmap() of the device: it returns the
// memfd (owned by the caller) and the offset to map it at.
func (c *Conn) Mmap(req MmapRequest) (*os.File, uint64, error) {
	p, fds, err := c.roundTrip(TypeMmap, req.Append(nil), nil, MmapReplySize)
	if err != nil {
		return nil, 0, err
	}
	rep, err := ParseMmapReply(p)
	if err == nil && rep.Status == 0 && len(fds) != 1 {
		err = malformed("MMAP reply with %d descriptors", len(fds))
	}
	if err != nil {
		closeFiles(fds)
		return nil, 0, err
	}
	if rep.Status != 0 {
		closeFiles(fds)
		return nil, 0, &StatusError{Type: TypeMmap, Errno: errnoOf(rep.Status)}
	}
	return fds[0], rep.FDOffset, nil
}

// Mem hands a piece of shared memory to the daemon.
func (c *Conn) Mem(req MemRequest, memfd *os.File) error {
	if memfd == nil {
		return errors.New("attach: MEM needs a descriptor")
	}
	p, fds, err := c.roundTrip(TypeMem, req.Append(nil), []*os.File{memfd}, StatusSize)
	if err != nil {
		return err
	}
	closeFiles(fds)
	st, err := ParseStatus(p)
	if err != nil {
		return err
	}
	if st != 0 {
		return &StatusError{Type: TypeMem, Errno: errnoOf(st)}
	}
	return nil
}

// Notify asks for the post notification (the HELLO reply's Features must
// have FeatureNotify): it returns the reply, the eventfd and the memfd of
// the notify page, both owned by the caller.
func (c *Conn) Notify(req NotifyRequest) (NotifyReply, *os.File, *os.File, error) {
	p, fds, err := c.roundTrip(TypeNotify, req.Append(nil), nil, NotifyReplySize)
	if err != nil {
		return NotifyReply{}, nil, nil, err
	}
	rep, err := ParseNotifyReply(p)
	if err == nil && rep.Status == 0 && len(fds) != 2 {
		err = malformed("NOTIFY reply with %d descriptors", len(fds))
	}
	if err != nil {
		closeFiles(fds)
		return NotifyReply{}, nil, nil, err
	}
	if rep.Status != 0 {
		closeFiles(fds)
		return rep, nil, nil, &StatusError{Type: TypeNotify, Errno: errnoOf(rep.Status)}
	}
	return rep, fds[0], fds[1], nil
}

// Package attachtest is a canned attach server for tests: it accepts every
// client, records every request, and answers with behaviour the test sets.
// It knows nothing of uverbs command semantics; it exercises the transport
// and the preload's mechanics.
package attachtest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
)

// Kind is what happened on a connection.
type Kind string

// Event kinds.
const (
	Open  Kind = "open"
	Cmd   Kind = "cmd"
	Mmap  Kind = "mmap"
	Mem   Kind = "mem"
	Close Kind = "close"
)

// Event is one recorded request or lifecycle step.
type Event struct {
	Kind    Kind
	Session *Session
	Cmd     []byte             // Cmd: a copy of the command
	Mmap    attach.MmapRequest // Mmap
	Mem     attach.MemRequest  // Mem
	Hello   attach.Hello       // Open
	HasMem  bool               // Open: a /proc/self/mem descriptor came
}

// Config is the canned behaviour.
type Config struct {
	// Welcome is sent in every HELLO reply (default: the server's name,
	// ABI 5).
	Welcome attach.Welcome
	// Refuse, if set, refuses every HELLO with this error.
	Refuse error
	// OnCommand answers a command; nil answers -ENOSYS.
	OnCommand func(s *Session, cmd []byte) attach.CmdReply
	// OnMmap answers an MMAP; nil creates a memfd of the page-rounded
	// length, keeps a copy in the session (Session.Mapped) and returns it
	// at offset 0.
	OnMmap func(s *Session, req attach.MmapRequest) (*os.File, uint64, error)
}

// Server is a running canned server.
type Server struct {
	*attach.Server
	Path string
	cfg  Config

	events chan Event

	mu       sync.Mutex
	sessions []*Session
}

// Session is one client connection as the canned server saw it.
type Session struct {
	ID   int
	Peer *attach.Peer
	srv  *Server

	mu     sync.Mutex
	mapped []*os.File
	mems   []MemRange
	closed bool
}

// MemRange is a MEM request and its memfd.
type MemRange struct {
	Req  attach.MemRequest
	File *os.File
}

// Start starts a canned server at dir/<name>.sock; the test's cleanup
// closes it.
func Start(t testing.TB, dir, name string, cfg Config) *Server {
	t.Helper()
	if cfg.Welcome == (attach.Welcome{}) {
		cfg.Welcome = attach.Welcome{Device: name, ABIVersion: 5}
	}
	s := &Server{
		Path:   filepath.Join(dir, name+".sock"),
		cfg:    cfg,
		events: make(chan Event, 4096),
	}
	srv, err := attach.Listen(s.Path, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Server = srv
	t.Cleanup(func() { s.Close() })
	return s
}

func (s *Server) record(e Event) {
	select {
	case s.events <- e:
	default: // a test that records this much does not read events
	}
}

// Open implements attach.Handler.
func (s *Server) Open(p *attach.Peer) (attach.Session, attach.Welcome, error) {
	if s.cfg.Refuse != nil {
		return nil, attach.Welcome{}, s.cfg.Refuse
	}
	s.mu.Lock()
	sess := &Session{ID: len(s.sessions) + 1, Peer: p, srv: s}
	s.sessions = append(s.sessions, sess)
	s.mu.Unlock()
	s.record(Event{Kind: Open, Session: sess, Hello: p.Hello, HasMem: p.Mem != nil})
	return sess, s.cfg.Welcome, nil
}

// Command implements attach.Session.
func (ss *Session) Command(cmd []byte) attach.CmdReply {
	ss.srv.record(Event{Kind: Cmd, Session: ss, Cmd: append([]byte(nil), cmd...)})
	if ss.srv.cfg.OnCommand != nil {
		return ss.srv.cfg.OnCommand(ss, cmd)
	}
	return attach.CmdReply{Status: -int32(syscall.ENOSYS)}
}

// Mmap implements attach.Session.
func (ss *Session) Mmap(req attach.MmapRequest) (*os.File, uint64, error) {
	ss.srv.record(Event{Kind: Mmap, Session: ss, Mmap: req})
	if ss.srv.cfg.OnMmap != nil {
		return ss.srv.cfg.OnMmap(ss, req)
	}
	f, err := NewMemfd("attachtest-mmap", int64(req.Length+4095)&^4095)
	if err != nil {
		return nil, 0, err
	}
	keep, err := attach.DupFile(f)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	ss.mu.Lock()
	ss.mapped = append(ss.mapped, keep)
	ss.mu.Unlock()
	return f, 0, nil
}

// Mem implements attach.Session.
func (ss *Session) Mem(req attach.MemRequest, f *os.File) error {
	ss.srv.record(Event{Kind: Mem, Session: ss, Mem: req})
	ss.mu.Lock()
	ss.mems = append(ss.mems, MemRange{Req: req, File: f})
	ss.mu.Unlock()
	return nil
}

// Close implements attach.Session.
func (ss *Session) Close() {
	ss.mu.Lock()
	ss.closed = true
	for _, f := range ss.mapped {
		f.Close()
	}
	for _, m := range ss.mems {
		m.File.Close()
	}
	ss.mapped, ss.mems = nil, nil
	if ss.Peer.Mem != nil {
		ss.Peer.Mem.Close()
	}
	ss.mu.Unlock()
	ss.srv.record(Event{Kind: Close, Session: ss})
}

// Closed reports whether the session has ended.
func (ss *Session) Closed() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closed
}

// Mapped returns the server's copy of the i-th memfd handed out by the
// default OnMmap (nil if there is none).
func (ss *Session) Mapped(i int) *os.File {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if i < 0 || i >= len(ss.mapped) {
		return nil
	}
	return ss.mapped[i]
}

// Mems returns the MEM ranges received so far.
func (ss *Session) Mems() []MemRange {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]MemRange(nil), ss.mems...)
}

// ReadMem reads n bytes at client address addr through the MEM ranges
// (pread on the memfd, so it sees what the client wrote through its shared
// mapping). ok is false when addr is in no range.
func (ss *Session) ReadMem(addr uint64, n int) ([]byte, bool) {
	for _, m := range ss.Mems() {
		if addr >= m.Req.Addr && addr+uint64(n) <= m.Req.Addr+m.Req.Length {
			b := make([]byte, n)
			if _, err := m.File.ReadAt(b, int64(m.Req.FDOffset+addr-m.Req.Addr)); err != nil {
				return nil, false
			}
			return b, true
		}
	}
	return nil, false
}

// Sessions returns the sessions opened so far.
func (s *Server) Sessions() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Session(nil), s.sessions...)
}

// Next returns the next event, failing the test after timeout.
func (s *Server) Next(t testing.TB, timeout time.Duration) Event {
	t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-time.After(timeout):
		t.Fatalf("attachtest: no event within %v", timeout)
		return Event{}
	}
}

// Expect returns the next event, failing the test unless it is of kind k.
func (s *Server) Expect(t testing.TB, k Kind) Event {
	t.Helper()
	e := s.Next(t, 10*time.Second)
	if e.Kind != k {
		t.Fatalf("attachtest: event %s (session %d), want %s", e.Kind, e.Session.ID, k)
	}
	return e
}

// Drain returns every event recorded so far without waiting.
func (s *Server) Drain() []Event {
	var es []Event
	for {
		select {
		case e := <-s.events:
			es = append(es, e)
		default:
			return es
		}
	}
}

// NewMemfd creates a memfd of size bytes.
func NewMemfd(name string, size int64) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

// The control protocol (docs/daemon.md): a unix stream socket, one request
// per line, one response line per request, in order. A request is a JSON
// object, or the same as words for people typing into socat:
//
//	{"id":1,"cmd":"ping"}                       ping
//	{"cmd":"stats"} {"cmd":"stats","qp":5}      stats, stats 5
//	{"cmd":"devinfo"}                           devinfo
//	{"cmd":"fault","op":"set","spec":"loss=0.1"} fault set loss=0.1
//	{"cmd":"fault","op":"clear"}                fault clear
//	{"cmd":"link","op":"down"}                  link down, link up
//	{"cmd":"events","after":0}                  events, events 0
//
// A response is {"id":…,"ok":true,"result":…} or {"id":…,"ok":false,
// "error":"…"}; id echoes the request's. `events` turns the connection into
// a stream: one response line per port event (the kept ones after `after`
// first), until the client closes it.
//
// Anything else — bad JSON, an unknown command, a bad argument — gets an
// error response and the connection stays usable; a line longer than
// MaxControlLine gets an error response and the connection is closed.
// Requests that change the device (fault, link) are taken only from root
// or the daemon's own user (SO_PEERCRED); the socket itself is 0666 so that
// anyone may read statistics, as anyone may read sysfs counters.

// Request is one control request.
type Request struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Cmd   string          `json:"cmd"`
	Op    string          `json:"op,omitempty"`
	Spec  string          `json:"spec,omitempty"`
	QP    *int64          `json:"qp,omitempty"`
	After uint64          `json:"after,omitempty"`
}

// Response is one control response.
type Response struct {
	ID     json.RawMessage `json:"id,omitempty"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Limits of the control socket.
const (
	MaxControlLine  = 64 << 10         // longest request line
	maxControlConns = 64               // connections served at once
	controlIdle     = 10 * time.Minute // an idle connection is closed after this
)

// PingResult is the `ping` result.
type PingResult struct {
	Device  string  `json:"device"`
	PID     int     `json:"pid"`
	UptimeS float64 `json:"uptime_s"`
	State   string  `json:"state"`
}

type controlServer struct {
	d    *Daemon
	l    *net.UnixListener
	path string
	log  *zap.Logger
	uid  int

	mu     sync.Mutex
	conns  map[*net.UnixConn]bool // guarded by mu
	closed bool                   // guarded by mu
	wg     sync.WaitGroup
}

// listenControl creates the control socket (replacing a stale one: Start
// checked that nothing answers on it) and starts serving.
func listenControl(d *Daemon, path string) (*controlServer, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Close removes the file only if it is still ours.
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, err
	}
	s := &controlServer{d: d, l: l, path: path, log: d.log.Named("control"), uid: os.Geteuid(),
		conns: map[*net.UnixConn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *controlServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: back off rather than spin.
			s.log.Warn("accept", zap.Error(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= maxControlConns {
			s.mu.Unlock()
			writeResponse(c, Response{Error: fmt.Sprintf("too many control connections (%d)", maxControlConns)})
			c.Close()
			continue
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// close stops accepting, closes every connection and waits for them.
func (s *controlServer) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.l.Close()
	s.wg.Wait()
}

func (s *controlServer) serve(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	privileged := s.privileged(c)
	r := bufio.NewReaderSize(c, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(controlIdle))
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			writeResponse(c, Response{Error: fmt.Sprintf("request longer than %d bytes", MaxControlLine)})
			return
		}
		if err != nil {
			return // EOF, deadline, closed
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		req, err := parseRequest(line)
		if err != nil {
			if !writeResponse(c, Response{ID: req.ID, Error: err.Error()}) {
				return
			}
			continue
		}
		if req.Cmd == "events" {
			s.stream(c, req)
			return
		}
		resp := s.handle(req, privileged)
		resp.ID = req.ID
		if !writeResponse(c, resp) {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most MaxControlLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > MaxControlLine {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return line, nil // a last request without its newline
			}
			return nil, err
		}
		// No newline yet and no room left for one: say so now rather
		// than wait for bytes that may never come.
		if len(line) >= MaxControlLine {
			return nil, errLineTooLong
		}
	}
}

// privileged reports whether the peer may change the device: root or the
// daemon's own user.
func (s *controlServer) privileged(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == s.uid
}

// parseRequest reads a JSON request or its word form.
func parseRequest(line []byte) (Request, error) {
	var req Request
	if line[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			// Salvage the id for the error response if the object has one.
			var idOnly struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(line, &idOnly)
			return Request{ID: idOnly.ID}, fmt.Errorf("bad request: %v", err)
		}
		if dec.More() {
			return Request{ID: req.ID}, errors.New("bad request: more than one JSON value on the line")
		}
		if req.Cmd == "" {
			return req, errors.New(`bad request: no "cmd"`)
		}
		return req, nil
	}
	w := strings.Fields(string(line))
	req.Cmd = w[0]
	args := w[1:]
	switch req.Cmd {
	case "stats":
		if len(args) > 1 {
			return req, errors.New("usage: stats [QPN]")
		}
		if len(args) == 1 {
			n, err := strconv.ParseInt(args[0], 0, 64)
			if err != nil || n < 0 || n > 1<<24-1 {
				return req, fmt.Errorf("stats: bad QP number %q", args[0])
			}
			req.QP = &n
		}
	case "fault":
		if len(args) == 0 {
			return req, errors.New("usage: fault set SPEC | fault clear")
		}
		req.Op = args[0]
		req.Spec = strings.Join(args[1:], ",")
	case "link":
		if len(args) != 1 {
			return req, errors.New("usage: link up|down")
		}
		req.Op = args[0]
	case "events":
		if len(args) > 1 {
			return req, errors.New("usage: events [AFTER_SEQ]")
		}
		if len(args) == 1 {
			n, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return req, fmt.Errorf("events: bad sequence number %q", args[0])
			}
			req.After = n
		}
	default:
		if len(args) != 0 {
			return req, fmt.Errorf("%s takes no arguments", req.Cmd)
		}
	}
	return req, nil
}

// handle executes one request.
func (s *controlServer) handle(req Request, privileged bool) Response {
	d := s.d
	var result any
	var err error
	switch req.Cmd {
	case "ping":
		result = PingResult{Device: d.cfg.Name, PID: os.Getpid(), UptimeS: d.clock.Now().Seconds(), State: d.portState().String()}
	case "stats":
		qpn := int64(-1)
		if req.QP != nil {
			if *req.QP < 0 || *req.QP > 1<<24-1 {
				return Response{Error: fmt.Sprintf("stats: bad QP number %d", *req.QP)}
			}
			qpn = *req.QP
		}
		result, err = d.Stats(qpn)
	case "devinfo":
		result, err = d.DevInfo()
	case "fault", "link":
		if !privileged {
			return Response{Error: req.Cmd + ": permission denied (root or the daemon's user only)"}
		}
		if req.Cmd == "fault" {
			result, err = s.fault(req)
		} else {
			result, err = s.link(req)
		}
	default:
		return Response{Error: fmt.Sprintf("unknown command %q (ping, stats, devinfo, fault, link, events)", req.Cmd)}
	}
	if err != nil {
		return Response{Error: err.Error()}
	}
	b, err := json.Marshal(result)
	if err != nil {
		return Response{Error: "encoding the result: " + err.Error()}
	}
	return Response{OK: true, Result: b}
}

// FaultResult is the result of `fault`.
type FaultResult struct {
	Faults string `json:"faults"` // the faults now injected ("" for none)
}

func (s *controlServer) fault(req Request) (any, error) {
	var f link.Faults
	switch req.Op {
	case "set":
		var err error
		if f, err = link.ParseFaults(req.Spec); err != nil {
			return nil, fmt.Errorf("fault set: %w", err)
		}
	case "clear":
		if req.Spec != "" {
			return nil, errors.New("fault clear takes no spec")
		}
	default:
		return nil, fmt.Errorf("fault: unknown operation %q (set SPEC, clear)", req.Op)
	}
	err := s.d.SetFaults(f)
	now := s.d.Faults()
	res := FaultResult{}
	if now.Enabled() {
		res.Faults = now.String()
	}
	return res, err
}

// LinkResult is the result of `link`.
type LinkResult struct {
	State string `json:"state"` // the port state after the change
}

func (s *controlServer) link(req Request) (any, error) {
	var up bool
	switch req.Op {
	case "up":
		up = true
	case "down":
	default:
		return nil, fmt.Errorf("link: unknown operation %q (up, down)", req.Op)
	}
	if err := s.d.SetLinkUp(up); err != nil {
		return nil, err
	}
	return LinkResult{State: s.d.portState().String()}, nil
}

// stream sends port events until the client goes away or the daemon stops.
func (s *controlServer) stream(c *net.UnixConn, req Request) {
	past, ch, cancel := s.d.events.subscribe(req.After)
	defer cancel()
	_ = c.SetReadDeadline(time.Time{})
	send := func(ev PortEvent) bool {
		b, _ := json.Marshal(ev)
		return writeResponse(c, Response{ID: req.ID, OK: true, Result: b})
	}
	for _, ev := range past {
		if !send(ev) {
			return
		}
	}
	// The client's close shows as EOF on a read.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	for {
		select {
		case ev := <-ch:
			if !send(ev) {
				return
			}
		case <-gone:
			return
		case <-s.d.stop:
			return
		}
	}
}

// writeResponse writes one response line; false if the connection failed.
func writeResponse(c net.Conn, r Response) bool {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"ok":false,"error":"internal: unencodable response"}`)
	}
	b = append(b, '\n')
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Write(b)
	return err == nil
}

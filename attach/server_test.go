package attach_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/attach/attachtest"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

func dial(t *testing.T, s *attachtest.Server) *attach.Conn {
	t.Helper()
	c, err := attach.Dial(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hello(t *testing.T, c *attach.Conn, mem *os.File) attach.HelloReply {
	t.Helper()
	rep, err := c.Hello(attach.Hello{PID: uint32(os.Getpid()), Program: "attach.test"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestHelloProcMem: the /proc/self/mem descriptor sent with HELLO reaches
// the handler and reads this process's memory.
func TestHelloProcMem(t *testing.T) {
	s := attachtest.Start(t, t.TempDir(), "irdma0", attachtest.Config{})
	c := dial(t, s)
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	testenv.Check(t, err, "no writable /proc/self/mem", "procfs")
	rep := hello(t, c, mem)
	mem.Close()
	if rep != (attach.HelloReply{Version: attach.Version, ABIVersion: 5, Device: "irdma0"}) {
		t.Fatalf("reply %+v", rep)
	}
	e := s.Expect(t, attachtest.Open)
	if !e.HasMem || e.Hello.Program != "attach.test" || e.Hello.PID != uint32(os.Getpid()) {
		t.Fatalf("open event %+v", e)
	}
	secret := []byte("the device reads this")
	got := make([]byte, len(secret))
	if _, err := e.Session.Peer.Mem.ReadAt(got, int64(uintptr(unsafe.Pointer(&secret[0])))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, secret) {
		t.Fatalf("read %q through /proc/self/mem", got)
	}
	// And writes land in this process.
	if _, err := e.Session.Peer.Mem.WriteAt([]byte("T"), int64(uintptr(unsafe.Pointer(&secret[0])))); err != nil {
		t.Fatal(err)
	}
	if secret[0] != 'T' {
		t.Fatalf("write through /proc/self/mem not seen: %q", secret)
	}
	runtime.KeepAlive(secret)
}

// TestCommandFDPatch: descriptors passed in a CMD reply arrive, and their
// numbers are written at the announced offsets of the response.
func TestCommandFDPatch(t *testing.T) {
	var readEnds []*os.File
	var mu sync.Mutex
	cfg := attachtest.Config{OnCommand: func(ss *attachtest.Session, cmd []byte) attach.CmdReply {
		r1, w1, _ := os.Pipe()
		r2, w2, _ := os.Pipe()
		mu.Lock()
		readEnds = append(readEnds, r1, r2)
		mu.Unlock()
		resp := make([]byte, 16)
		binary.LittleEndian.PutUint32(resp[0:], 0xffffffff)
		binary.LittleEndian.PutUint32(resp[4:], 1) // e.g. num_comp_vectors
		binary.LittleEndian.PutUint32(resp[12:], 0xffffffff)
		return attach.CmdReply{
			Status: int32(len(cmd)), RespAddr: 0x1000, Resp: resp,
			FDs: []attach.FD{{File: w1, Offset: 0}, {File: w2, Offset: 12}},
		}
	}}
	s := attachtest.Start(t, t.TempDir(), "irdma0", cfg)
	c := dial(t, s)
	hello(t, c, nil)
	cmd := []byte{0, 0, 0, 0, 6, 0, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	res, err := c.Command(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range res.Files {
			f.Close()
		}
	}()
	s.Expect(t, attachtest.Open)
	if e := s.Expect(t, attachtest.Cmd); !bytes.Equal(e.Cmd, cmd) {
		t.Fatalf("server saw % x", e.Cmd)
	}
	if res.Status != int32(len(cmd)) || res.RespAddr != 0x1000 || len(res.Files) != 2 {
		t.Fatalf("result %+v", res)
	}
	for i, off := range []int{0, 12} {
		n := int32(binary.LittleEndian.Uint32(res.Resp[off:]))
		if n < 0 {
			t.Fatalf("fd %d not patched: % x", i, res.Resp)
		}
		// The number is a live descriptor for the pipe's write end.
		msg := fmt.Sprintf("through fd %d", i)
		if _, err := unix.Write(int(n), []byte(msg)); err != nil {
			t.Fatalf("write to patched fd %d: %v", n, err)
		}
		buf := make([]byte, 64)
		mu.Lock()
		r := readEnds[i]
		mu.Unlock()
		k, err := r.Read(buf)
		if err != nil || string(buf[:k]) != msg {
			t.Fatalf("pipe %d read %q, %v", i, buf[:k], err)
		}
	}
	if binary.LittleEndian.Uint32(res.Resp[4:]) != 1 {
		t.Fatalf("unpatched bytes changed: % x", res.Resp)
	}
	mu.Lock()
	for _, r := range readEnds {
		r.Close()
	}
	mu.Unlock()
}

// TestMmapShared: the MMAP memfd is shared memory between client and server.
func TestMmapShared(t *testing.T) {
	s := attachtest.Start(t, t.TempDir(), "irdma0", attachtest.Config{})
	c := dial(t, s)
	hello(t, c, nil)
	f, off, err := c.Mmap(attach.MmapRequest{Offset: 0x10000, Length: 4096, Prot: unix.PROT_READ | unix.PROT_WRITE, Flags: unix.MAP_SHARED})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), int64(off), 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	binary.LittleEndian.PutUint32(b[0:], 17) // a doorbell store
	s.Expect(t, attachtest.Open)
	e := s.Expect(t, attachtest.Mmap)
	if e.Mmap.Offset != 0x10000 || e.Mmap.Length != 4096 {
		t.Fatalf("mmap event %+v", e.Mmap)
	}
	got := make([]byte, 4)
	if _, err := e.Session.Mapped(0).ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(got) != 17 {
		t.Fatalf("server sees % x", got)
	}
}

// TestMem: a MEM range reaches the session with its memfd.
func TestMem(t *testing.T) {
	s := attachtest.Start(t, t.TempDir(), "irdma0", attachtest.Config{})
	c := dial(t, s)
	hello(t, c, nil)
	f, err := attachtest.NewMemfd("ring", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("ring data"), 4096+16); err != nil {
		t.Fatal(err)
	}
	if err := c.Mem(attach.MemRequest{Addr: 0x7f0000000000, Length: 4096, FDOffset: 4096}, f); err != nil {
		t.Fatal(err)
	}
	s.Expect(t, attachtest.Open)
	e := s.Expect(t, attachtest.Mem)
	got, ok := e.Session.ReadMem(0x7f0000000010, 9)
	if !ok || string(got) != "ring data" {
		t.Fatalf("ReadMem = %q, %v", got, ok)
	}
}

// TestRefused: a refused HELLO carries the errno and closes the connection.
func TestRefused(t *testing.T) {
	s := attachtest.Start(t, t.TempDir(), "irdma0", attachtest.Config{Refuse: syscall.EPERM})
	c := dial(t, s)
	rep, err := c.Hello(attach.Hello{}, nil)
	if !errors.Is(err, syscall.EPERM) || rep.Status != -int32(syscall.EPERM) {
		t.Fatalf("Hello = %+v, %v", rep, err)
	}
	if _, err := c.Command([]byte{1}); err == nil {
		t.Fatal("command after a refused HELLO succeeded")
	}
}

// rawConn is a SOCK_SEQPACKET connection without the client's checks.
func rawConn(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func rawSend(t *testing.T, fd int, msg []byte, nfds int) {
	t.Helper()
	var oob []byte
	if nfds > 0 {
		fds := make([]int, nfds)
		for i := range fds {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, msg, oob, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// rawRecv reads one message; it returns nil at end of file.
func rawRecv(t *testing.T, fd int) []byte {
	t.Helper()
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
	buf := make([]byte, attach.MaxMessage)
	oob := make([]byte, 256)
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		t.Fatalf("recvmsg: %v", err)
	}
	if oobn > 0 {
		cm, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for i := range cm {
			fds, _ := unix.ParseUnixRights(&cm[i])
			for _, f := range fds {
				unix.Close(f)
			}
		}
	}
	if n == 0 {
		return nil
	}
	return buf[:n]
}

func helloMsg(seq uint32) []byte {
	return attach.AppendMessage(nil, attach.TypeHello, seq, attach.Hello{Version: 1}.Append(nil))
}

// TestMalformed: every kind of bad message gets an -EPROTO error reply
// echoing what could be read of its header, then the connection is
// dropped and its session closed; another connection is unaffected.
func TestMalformed(t *testing.T) {
	cfg := attachtest.Config{OnCommand: func(_ *attachtest.Session, cmd []byte) attach.CmdReply {
		return attach.CmdReply{Status: int32(len(cmd))}
	}}
	s := attachtest.Start(t, t.TempDir(), "irdma0", cfg)
	bystander := dial(t, s)
	hello(t, bystander, nil)

	good := func(typ attach.Type, seq uint32, p []byte) []byte { return attach.AppendMessage(nil, typ, seq, p) }
	with := func(b []byte, f func([]byte)) []byte { b = append([]byte(nil), b...); f(b); return b }
	cmd := good(attach.TypeCmd, 5, []byte{1, 2, 3, 4})
	cases := []struct {
		name      string
		hello     bool // say HELLO first
		msg       []byte
		nfds      int
		wantType  attach.Type
		wantSeq   uint32
		noReply   bool // end of file without a reply
		wantClose bool // a session existed and must be closed
	}{
		{name: "short", msg: []byte{1, 2, 3}, wantType: 0, wantSeq: 0},
		{name: "bad magic", msg: with(helloMsg(9), func(b []byte) { b[3] = 0 }), wantType: attach.TypeHello, wantSeq: 9},
		{name: "flags", msg: with(helloMsg(9), func(b []byte) { b[6] = 1 }), wantType: attach.TypeHello, wantSeq: 9},
		{name: "length mismatch", msg: with(helloMsg(9), func(b []byte) { b[12]++ }), wantType: attach.TypeHello, wantSeq: 9},
		{name: "unknown type", msg: good(7, 3, nil), wantType: 7, wantSeq: 3},
		{name: "type zero", msg: good(0, 3, nil), wantType: 0, wantSeq: 3},
		{name: "cmd before hello", msg: cmd, wantType: attach.TypeCmd, wantSeq: 5},
		{name: "mem before hello", msg: good(attach.TypeMem, 6, make([]byte, 24)), nfds: 1, wantType: attach.TypeMem, wantSeq: 6},
		{name: "short hello", msg: good(attach.TypeHello, 2, make([]byte, 10)), wantType: attach.TypeHello, wantSeq: 2},
		{name: "hello two fds", msg: helloMsg(4), nfds: 2, wantType: attach.TypeHello, wantSeq: 4},
		{name: "second hello", hello: true, msg: helloMsg(8), wantType: attach.TypeHello, wantSeq: 8, wantClose: true},
		{name: "cmd with fd", hello: true, msg: cmd, nfds: 1, wantType: attach.TypeCmd, wantSeq: 5, wantClose: true},
		{name: "too many fds", hello: true, msg: cmd, nfds: attach.MaxFDs + 2, wantType: attach.TypeCmd, wantSeq: 5, wantClose: true},
		{name: "mmap short", hello: true, msg: good(attach.TypeMmap, 1, make([]byte, 23)), wantType: attach.TypeMmap, wantSeq: 1, wantClose: true},
		{name: "mem no fd", hello: true, msg: good(attach.TypeMem, 1, make([]byte, 24)), wantType: attach.TypeMem, wantSeq: 1, wantClose: true},
		{name: "mem long", hello: true, msg: good(attach.TypeMem, 1, make([]byte, 25)), nfds: 1, wantType: attach.TypeMem, wantSeq: 1, wantClose: true},
		{name: "notify flags", hello: true, msg: good(attach.TypeNotify, 1, []byte{2, 0, 0, 0, 0, 0, 0, 0}), wantType: attach.TypeNotify, wantSeq: 1, wantClose: true},
		{name: "notify short", hello: true, msg: good(attach.TypeNotify, 1, make([]byte, 4)), wantType: attach.TypeNotify, wantSeq: 1, wantClose: true},
		{name: "notify with fd", hello: true, msg: good(attach.TypeNotify, 1, make([]byte, 8)), nfds: 1, wantType: attach.TypeNotify, wantSeq: 1, wantClose: true},
		{name: "notify before hello", msg: good(attach.TypeNotify, 2, make([]byte, 8)), wantType: attach.TypeNotify, wantSeq: 2},
		{name: "too long", hello: true, msg: good(attach.TypeCmd, 1, make([]byte, attach.MaxPayload+1)), wantType: attach.TypeCmd, wantSeq: 1, wantClose: true},
		{name: "empty message", hello: true, msg: []byte{}, noReply: true, wantClose: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fd := rawConn(t, s.Path)
			if tc.hello {
				rawSend(t, fd, helloMsg(1), 0)
				if r := rawRecv(t, fd); r == nil {
					t.Fatal("no HELLO reply")
				}
			}
			rawSend(t, fd, tc.msg, tc.nfds)
			r := rawRecv(t, fd)
			if tc.noReply {
				if r != nil {
					t.Fatalf("reply % x", r)
				}
			} else {
				h, p, err := attach.ParseMessage(r)
				if err != nil {
					t.Fatalf("reply % x: %v", r, err)
				}
				st, err := attach.ParseStatus(p)
				if err != nil || len(p) != attach.StatusSize || st != -int32(syscall.EPROTO) {
					t.Fatalf("reply payload % x, want status -EPROTO only", p)
				}
				if h.Type != tc.wantType || h.Seq != tc.wantSeq {
					t.Fatalf("reply header %+v, want type %d seq %d", h, tc.wantType, tc.wantSeq)
				}
				if r := rawRecv(t, fd); r != nil {
					t.Fatalf("connection not dropped: % x", r)
				}
			}
			if tc.wantClose {
				waitClosed(t, s)
			}
			// The bystander's connection still works.
			if res, err := bystander.Command([]byte{1, 2}); err != nil || res.Status != 2 {
				t.Fatalf("bystander: %+v, %v", res, err)
			}
		})
	}
}

// waitClosed waits until every session but the first (the bystander) of
// TestMalformed is closed.
func waitClosed(t *testing.T, s *attachtest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := 0
		for _, ss := range s.Sessions()[1:] {
			if !ss.Closed() {
				open++
			}
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open", open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestVersionMismatch: an unknown protocol version is refused with
// EPROTONOSUPPORT in a full HELLO reply.
func TestVersionMismatch(t *testing.T) {
	s := attachtest.Start(t, t.TempDir(), "irdma0", attachtest.Config{})
	fd := rawConn(t, s.Path)
	rawSend(t, fd, attach.AppendMessage(nil, attach.TypeHello, 1, attach.Hello{Version: 99}.Append(nil)), 0)
	_, p, err := attach.ParseMessage(rawRecv(t, fd))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := attach.ParseHelloReply(p)
	if err != nil || rep.Status != -int32(syscall.EPROTONOSUPPORT) || rep.Version != attach.Version {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	if rawRecv(t, fd) != nil {
		t.Fatal("connection not dropped")
	}
}

// TestConcurrent: many connections at once, each with its own answers.
func TestConcurrent(t *testing.T) {
	cfg := attachtest.Config{OnCommand: func(ss *attachtest.Session, cmd []byte) attach.CmdReply {
		resp := make([]byte, 8)
		binary.LittleEndian.PutUint32(resp, uint32(ss.ID))
		copy(resp[4:], cmd)
		return attach.CmdReply{Status: int32(len(cmd)), Resp: resp}
	}}
	s := attachtest.Start(t, t.TempDir(), "irdma0", cfg)
	const conns, cmds = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := attach.Dial(s.Path)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if _, err := c.Hello(attach.Hello{PID: uint32(i)}, nil); err != nil {
				errs <- err
				return
			}
			id := uint32(0)
			for j := range cmds {
				cmd := []byte{byte(i), byte(j), 0, 0}
				res, err := c.Command(cmd)
				if err != nil {
					errs <- err
					return
				}
				got := binary.LittleEndian.Uint32(res.Resp)
				if id == 0 {
					id = got
				}
				if got != id || !bytes.Equal(res.Resp[4:], cmd) {
					errs <- fmt.Errorf("conn %d cmd %d: % x", i, j, res.Resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(s.Sessions()); n != conns {
		t.Fatalf("%d sessions", n)
	}
}

// TestClientVanishes: a client that disconnects while its command is being
// executed; the reply goes nowhere, the session is closed, the server goes
// on.
func TestClientVanishes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	cfg := attachtest.Config{OnCommand: func(_ *attachtest.Session, cmd []byte) attach.CmdReply {
		if cmd[0] == 1 {
			close(entered)
			<-release
		}
		return attach.CmdReply{Status: int32(len(cmd)), Resp: make([]byte, 4096)}
	}}
	s := attachtest.Start(t, t.TempDir(), "irdma0", cfg)
	fd := rawConn(t, s.Path)
	rawSend(t, fd, helloMsg(1), 0)
	rawRecv(t, fd)
	rawSend(t, fd, attach.AppendMessage(nil, attach.TypeCmd, 2, []byte{1}), 0)
	<-entered
	unix.Close(fd)
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for !s.Sessions()[0].Closed() {
		if time.Now().After(deadline) {
			t.Fatal("session not closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := dial(t, s)
	hello(t, c, nil)
	if res, err := c.Command([]byte{2}); err != nil || res.Status != 1 {
		t.Fatalf("after: %+v, %v", res, err)
	}
}

// TestServerClose: Close ends every connection, closes every session and
// leaves no goroutine behind; the socket is removed.
func TestServerClose(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	s := attachtest.Start(t, dir, "irdma0", attachtest.Config{})
	var cs []*attach.Conn
	for range 5 {
		c, err := attach.Dial(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Hello(attach.Hello{}, nil); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// One connection that never says HELLO.
	raw, err := net.Dial("unixpacket", s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ss := range s.Sessions() {
		if !ss.Closed() {
			t.Errorf("session %d not closed", ss.ID)
		}
	}
	for _, c := range cs {
		if _, err := c.Command([]byte{1}); err == nil {
			t.Error("command after server close succeeded")
		}
		c.Close()
	}
	raw.Close()
	if _, err := os.Lstat(s.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestListenPaths: directory creation and permissions, stale socket
// removal, a live server's socket, a path that is not a socket.
func TestListenPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "irdma-emu")
	path := filepath.Join(dir, "irdma0.sock")
	h := attachtest.Start(t, t.TempDir(), "x", attachtest.Config{}) // any handler
	s, err := attach.Listen(path, h)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("dir %v %v", fi.Mode(), err)
	}
	fi, err = os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v %v", fi.Mode(), err)
	}
	if _, err := attach.Listen(path, h); !errors.Is(err, attach.ErrInUse) {
		t.Fatalf("second Listen: %v", err)
	}
	s.Close()

	// A stale socket: bound, then abandoned without unlinking.
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	s, err = attach.ListenConfig{SocketMode: 0o660}.Listen(path, h)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if fi, _ := os.Lstat(path); fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v", fi.Mode())
	}
	s.Close()

	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := attach.Listen(path, h); err == nil {
		t.Fatal("Listen over a regular file succeeded")
	}
}

// TestNotifyUnsupported: a session that is not a Notifier offers no
// FeatureNotify in its HELLO reply, even when its handler says so, and a
// NOTIFY gets -EOPNOTSUPP without losing the connection.
func TestNotifyUnsupported(t *testing.T) {
	cfg := attachtest.Config{Welcome: attach.Welcome{Device: "irdma0", ABIVersion: 5, Features: attach.FeatureNotify},
		OnCommand: func(_ *attachtest.Session, cmd []byte) attach.CmdReply {
			return attach.CmdReply{Status: int32(len(cmd))}
		}}
	s := attachtest.Start(t, t.TempDir(), "irdma0", cfg)
	c := dial(t, s)
	if rep := hello(t, c, nil); rep.Features != 0 {
		t.Fatalf("features %#x from a session that cannot notify", rep.Features)
	}
	_, e, p, err := c.Notify(attach.NotifyRequest{})
	var se *attach.StatusError
	if !errors.As(err, &se) || se.Errno != syscall.EOPNOTSUPP || se.Closed || e != nil || p != nil {
		t.Fatalf("NOTIFY: %v", err)
	}
	if res, err := c.Command([]byte{1, 2}); err != nil || res.Status != 2 {
		t.Fatalf("after NOTIFY: %+v, %v", res, err)
	}
}

// TestNotifyCodec: the NOTIFY request's and reply's checks.
func TestNotifyCodec(t *testing.T) {
	bits := attach.NotifyReply{Flags: attach.NotifyQPBits, CountersOff: 64, QPBitsOff: 128, QPBits: 8 * (4096 - 128)}
	for _, good := range []attach.NotifyReply{
		{PollingOff: 0, CountersOff: 64},
		bits,
		{Flags: attach.NotifyQPBits, PollingOff: 4092, CountersOff: 4072, QPBitsOff: 0, QPBits: 64 * 509},
		// An error reply names nothing and is not checked.
		{Status: -95, PollingOff: 3, QPBits: 7},
	} {
		if m, err := attach.ParseNotifyReply(good.Append(nil)); err != nil || m != good {
			t.Errorf("%+v: %+v, %v", good, m, err)
		}
	}
	with := func(f func(*attach.NotifyReply)) attach.NotifyReply { m := bits; f(&m); return m }
	for _, bad := range []attach.NotifyReply{
		{PollingOff: 2}, {PollingOff: 4096}, {CountersOff: 4088}, {CountersOff: 4}, {PageOffset: 100},
		{PollingOff: 72, CountersOff: 64}, // the polling word inside the counters
		{Flags: 2, CountersOff: 64},       // a flag nobody defined
		{CountersOff: 64, QPBitsOff: 128}, // QP bits without the flag
		{CountersOff: 64, QPBits: 64},     // ditto
		with(func(m *attach.NotifyReply) { m.QPBits = 0 }),
		with(func(m *attach.NotifyReply) { m.QPBits = 100 }),           // not whole words
		with(func(m *attach.NotifyReply) { m.QPBitsOff = 132 }),        // not aligned
		with(func(m *attach.NotifyReply) { m.QPBits += 64 }),           // past the page
		with(func(m *attach.NotifyReply) { m.QPBitsOff = 0xffffffc0 }), // far past it
		with(func(m *attach.NotifyReply) { m.QPBits = 0xffffffc0 }),
		with(func(m *attach.NotifyReply) { m.QPBitsOff = 64 }), // over the counters
		with(func(m *attach.NotifyReply) { m.QPBitsOff = 0 }),  // over the polling word
	} {
		if _, err := attach.ParseNotifyReply(bad.Append(nil)); !errors.Is(err, attach.ErrMalformed) {
			t.Errorf("%+v accepted", bad)
		}
	}
	for _, c := range []struct {
		p    []byte
		want uint32
		ok   bool
	}{
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0}, 0, true},
		{[]byte{1, 0, 0, 0, 0, 0, 0, 0}, attach.NotifyQPBits, true},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0}, 0, false},
		{[]byte{0, 0, 0, 0, 1, 0, 0, 0}, 0, false}, // the reserved word
		{[]byte{0, 0, 0, 0}, 0, false},
	} {
		m, err := attach.ParseNotify(c.p)
		if (err == nil) != c.ok || (c.ok && m.Flags != c.want) {
			t.Errorf("% x: %+v, %v", c.p, m, err)
		}
	}
}

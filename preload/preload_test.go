package preload_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/attach/attachtest"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
	"github.com/irdma-emu/irdma-emu/preload"
	"github.com/irdma-emu/irdma-emu/sysfs"
)

var le = binary.LittleEndian

// needGCC stops the test when the preload cannot be built (a failure
// under CI: internal/testenv).
func needGCC(t *testing.T) {
	t.Helper()
	testenv.Program(t, "gcc", "gcc and libc6-dev: the preload is built with them")
}

// lib builds (or finds in the cache) the preload.
func lib(t *testing.T) string {
	t.Helper()
	needGCC(t)
	p, err := preload.Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func gcc(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("gcc", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// buildCheck compiles testdata/check.c against a fake provider library
// named libirdma-fake.so.
func buildCheck(t *testing.T, dir string) string {
	t.Helper()
	gcc(t, "-O2", "-Wall", "-Werror", "-fPIC", "-shared", "-o", filepath.Join(dir, "libirdma-fake.so"), "testdata/fakeprov.c")
	bin := filepath.Join(dir, "check")
	gcc(t, "-O2", "-Wall", "-Werror", "-pthread", "-o", bin, "testdata/check.c", "-L"+dir, "-lirdma-fake", "-Wl,-rpath,"+dir)
	return bin
}

// tree writes a sysfs tree for irdma0 (uverbs0, 231:192).
func tree(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "sysfs")
	d := sysfs.DefaultDevice("irdma0", 0, "lo", make(net.HardwareAddr, 6),
		[]netip.Addr{netip.MustParseAddr("127.0.0.1")}, true, profile.GEN2())
	if err := sysfs.Write(root, d); err != nil {
		t.Fatal(err)
	}
	return root
}

// server answers check.c's test commands.
type server struct {
	*attachtest.Server
	mu    sync.Mutex
	pipes []*os.File // read ends of descriptors passed to the program
}

func startServer(t *testing.T, dir string) *server {
	s := &server{}
	s.Server = attachtest.Start(t, dir, "irdma0", attachtest.Config{OnCommand: s.command})
	t.Cleanup(func() {
		s.mu.Lock()
		for _, f := range s.pipes {
			f.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func status(ok bool, cmd []byte) attach.CmdReply {
	if ok {
		return attach.CmdReply{Status: int32(len(cmd))}
	}
	return attach.CmdReply{Status: -int32(syscall.EBADMSG)}
}

func (s *server) command(ss *attachtest.Session, cmd []byte) attach.CmdReply {
	if len(cmd) < 88 {
		return attach.CmdReply{Status: -int32(syscall.ENOSYS)}
	}
	addr, n := le.Uint64(cmd[8:]), int(le.Uint32(cmd[16:]))
	want := cmd[24:min(24+n, len(cmd))]
	switch le.Uint32(cmd) {
	case 0:
		var ws []attach.FD
		for _, off := range []uint32{0, 12} {
			r, w, err := os.Pipe()
			if err != nil {
				return attach.CmdReply{Status: -int32(syscall.EMFILE)}
			}
			s.mu.Lock()
			s.pipes = append(s.pipes, r)
			s.mu.Unlock()
			ws = append(ws, attach.FD{File: w, Offset: off})
		}
		resp := make([]byte, 16)
		le.PutUint32(resp[4:], 1)
		return attach.CmdReply{Status: int32(len(cmd)), RespAddr: addr, Resp: resp, FDs: ws}
	case 0x1001:
		got := make([]byte, len(want))
		f := ss.Mapped(0)
		if f == nil {
			return status(false, cmd)
		}
		_, err := f.ReadAt(got, 0)
		return status(err == nil && bytes.Equal(got, want), cmd)
	case 0x1002:
		got, ok := ss.ReadMem(addr, len(want))
		return status(ok && bytes.Equal(got, want), cmd)
	case 0x1003:
		if ss.Peer.Mem == nil {
			return status(false, cmd)
		}
		got := make([]byte, len(want))
		_, err := ss.Peer.Mem.ReadAt(got, int64(addr))
		return status(err == nil && bytes.Equal(got, want), cmd)
	case 0x1004:
		_, ok := ss.ReadMem(addr, 1)
		if ok {
			return attach.CmdReply{Status: 1}
		}
		return attach.CmdReply{Status: 0}
	}
	return attach.CmdReply{Status: -int32(syscall.ENOSYS)}
}

func env(lib, root, sock string, extra ...string) []string {
	e := append(os.Environ(), "LD_PRELOAD="+lib, "SYSFS_PATH="+root, attach.EnvSocket+"="+sock, "IRDMA_EMU_DEBUG=1")
	return append(e, extra...)
}

// runCheck runs check.c's binary with args in environment e, fails the
// test unless it ends with "done", and returns its stderr (the preload's
// debug lines).
func runCheck(t *testing.T, bin string, e []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = e
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("check output:\n%s", stdout.String())
	if err != nil || !strings.Contains(stdout.String(), "\ndone\n") {
		t.Fatalf("check: %v\nstderr:\n%s", err, stderr.String())
	}
	return stderr.String()
}

// TestMechanics runs check.c under the preload against the canned server:
// stat faking, open with HELLO and /proc/self/mem, ENOTTY ioctls, EINVAL
// reads, a command whose reply passes descriptors (patched into the
// program's response), MMAP shared with the server, the arena, dup/dup2/
// F_DUPFD, fork, close_range and a raw close with the number reused.
func TestMechanics(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	bin := buildCheck(t, dir)
	root := tree(t, dir)
	s := startServer(t, dir)
	stderr := runCheck(t, bin, env(l, root, s.Path))

	// The server's side of the story.
	events := s.Drain()
	var opens, mems, closes int
	var sawGetContext bool
	pids := map[uint32]bool{}
	for _, e := range events {
		switch e.Kind {
		case attachtest.Open:
			opens++
			pids[e.Hello.PID] = true
			if !e.HasMem || e.Hello.Program != "check" || e.Hello.Version != attach.Version {
				t.Errorf("open without /proc/self/mem or bad hello: %+v", e.Hello)
			}
		case attachtest.Cmd:
			if le.Uint32(e.Cmd) == 0 {
				sawGetContext = true
				if words := int(le.Uint16(e.Cmd[4:])); words*4 != len(e.Cmd) {
					t.Errorf("command header in_words %d for %d bytes", words, len(e.Cmd))
				}
			}
		case attachtest.Mem:
			mems++
			if e.Mem.Addr%4096 != 0 || e.Mem.Length%4096 != 0 || e.Mem.FDOffset%4096 != 0 {
				t.Errorf("unaligned MEM %+v", e.Mem)
			}
		case attachtest.Close:
			closes++
		}
	}
	// Parent: first open, reopen; child: one open.
	if opens != 3 || len(pids) != 2 || !sawGetContext {
		t.Errorf("%d opens from %d pids, GET_CONTEXT seen %v", opens, len(pids), sawGetContext)
	}
	// Parent: the arena at HELLO, one growth; child: its new arena.
	if mems < 3 {
		t.Errorf("%d MEM messages", mems)
	}
	deadline := time.Now().Add(5 * time.Second)
	for closes < opens && time.Now().Before(deadline) {
		for _, e := range s.Drain() {
			if e.Kind == attachtest.Close {
				closes++
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if closes != opens {
		t.Errorf("%d sessions closed of %d", closes, opens)
	}
	// The descriptor passed in the reply reached the program, which wrote
	// through it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pipes) != 2 {
		t.Fatalf("%d pipes", len(s.pipes))
	}
	s.pipes[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, _ := s.pipes[0].Read(buf)
	if string(buf[:n]) != "via-fd" {
		t.Errorf("passed descriptor carried %q", buf[:n])
	}
	if !strings.Contains(stderr, "arena: memalign(4096, 8192) from libirdma-fake.so") {
		t.Errorf("no arena debug line:\n%s", stderr)
	}
}

// TestArenaPolicy runs check.c's policy mode under each IRDMA_EMU_ARENA
// setting: who gets the arena (the provider's rings; the program's
// page-aligned buffers of at least IRDMA_EMU_ARENA_MIN bytes, by every
// page-aligned allocation function), free, realloc and reallocarray out of
// the arena, malloc_usable_size, and fork (a private copy of a program
// buffer, the arena's holes costing the child no memory).
func TestArenaPolicy(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	bin := buildCheck(t, dir)
	root := tree(t, dir)
	for _, c := range []struct {
		mode string
		env  []string
	}{
		{"all", nil},
		{"all", []string{"IRDMA_EMU_ARENA=all"}},
		{"min", []string{"IRDMA_EMU_ARENA_MIN=16384"}},
		{"rings", []string{"IRDMA_EMU_ARENA=rings"}},
		{"off", []string{"IRDMA_EMU_ARENA=0"}},
	} {
		t.Run(strings.Join(append([]string{c.mode}, c.env...), ","), func(t *testing.T) {
			s := startServer(t, dir)
			stderr := runCheck(t, bin, env(l, root, s.Path, c.env...), "policy", c.mode)
			if c.mode == "all" && !strings.Contains(stderr, "arena: memalign(4096, 131072) from the program") {
				t.Errorf("no debug line for the program's buffer:\n%s", stderr)
			}
		})
	}
}

// TestThreads: commands from several threads on shared and private
// descriptors, concurrent arena growth (MEM on every connection) and
// descriptor churn.
func TestThreads(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	bin := buildCheck(t, dir)
	root := tree(t, dir)
	s := startServer(t, dir)
	cmd := exec.Command(bin, "threads")
	cmd.Env = env(l, root, s.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\ndone\n") {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := len(s.Sessions()); n != 5 {
		t.Fatalf("%d sessions, want 5", n)
	}
}

// TestNonDumpable: a non-dumpable program that is not root cannot open its
// /proc/self/mem; it still opens the device, with a HELLO that carries no
// descriptor. As root the test runs the program as nobody (setpriv).
func TestNonDumpable(t *testing.T) {
	l := lib(t)
	var wrap []string
	if os.Geteuid() == 0 {
		p := testenv.Tool(t, "setpriv") // drops root's privileges
		wrap = []string{p, "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
	}
	dir := t.TempDir()
	// nobody must reach everything: the test directories, the library.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(l)
	if err != nil {
		t.Fatal(err)
	}
	l = filepath.Join(dir, "preload.so")
	if err := os.WriteFile(l, b, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildCheck(t, dir)
	root := tree(t, dir)
	s := startServer(t, dir)
	cmd := exec.Command(append(wrap, bin, "nodump")[0], append(wrap, bin, "nodump")[1:]...)
	cmd.Env = env(l, root, s.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\ndone\n") {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "cannot open /proc/self/mem") {
		t.Errorf("no explanation on stderr:\n%s", out)
	}
	if e := s.Expect(t, attachtest.Open); e.HasMem {
		t.Errorf("a non-dumpable program sent /proc/self/mem")
	}
}

// TestUnreachable: with no daemon, open fails with ENXIO and says why when
// IRDMA_EMU_DEBUG is set.
func TestUnreachable(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	bin := buildCheck(t, dir)
	root := tree(t, dir)
	cmd := exec.Command(bin, "unreachable")
	cmd.Env = env(l, root, filepath.Join(dir, "nobody.sock"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok open-unreachable") ||
		!strings.Contains(string(out), "cannot reach the daemon") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestTransparent: ordinary file I/O, stat, mmap, pipes and fork behave
// identically under the preload (with the device configured).
func TestTransparent(t *testing.T) {
	l := lib(t)
	testenv.Tool(t, "sh")
	dir := t.TempDir()
	root := tree(t, dir)
	s := startServer(t, dir)
	data := filepath.Join(dir, "data")
	big := bytes.Repeat([]byte("irdma-emu transparent check\n"), 40000)
	if err := os.WriteFile(data, big, 0o640); err != nil {
		t.Fatal(err)
	}
	script := `set -e
cd "$1"
sha256sum data
stat -c '%s %a %F' data /dev/null .
ls -l data | cut -c1-10
dd if=data of=copy bs=4096 2>/dev/null
cmp data copy && echo same
cat data | tail -c 30
head -c 100000 data | wc -c
exec 7>fd7; echo seven >&7; exec 7>&-; cat fd7
( echo sub; exit 3 ) || echo "sub status $?"
printf 'x%.0s' 1 2 3 | od -c | head -1
rm copy fd7
echo end
`
	run := func(env []string) (string, error) {
		cmd := exec.Command("sh", "-c", script, "sh", dir)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	plain, err := run(os.Environ())
	if err != nil {
		t.Fatalf("without preload: %v\n%s", err, plain)
	}
	with, err := run(append(os.Environ(), "LD_PRELOAD="+l, "SYSFS_PATH="+root, attach.EnvSocket+"="+s.Path))
	if err != nil {
		t.Fatalf("with preload: %v\n%s", err, with)
	}
	if plain != with {
		t.Fatalf("output differs\nwithout:\n%s\nwith:\n%s", plain, with)
	}
	if !strings.HasSuffix(plain, "end\n") {
		t.Fatalf("script did not finish:\n%s", plain)
	}
	// The fake node itself, seen by coreutils.
	cmd := exec.Command("stat", "-c", "%F %t:%T", "/dev/infiniband/uverbs0")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+l, "SYSFS_PATH="+root, attach.EnvSocket+"="+s.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "character special file e7:c0" {
		t.Fatalf("stat of the fake node: %v %q", err, out)
	}
	if n := len(s.Sessions()); n != 0 {
		t.Fatalf("%d connections from programs that never opened the device", n)
	}
}

// TestBuildCache: the library is rebuilt into a fresh cache directory, and
// found there the second time.
func TestBuildCache(t *testing.T) {
	needGCC(t)
	dir := t.TempDir()
	p, err := preload.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != preload.FileName() || !strings.Contains(p, preload.Key()) {
		t.Fatalf("built %s, key %s", p, preload.Key())
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := preload.Build(dir)
	if err != nil || p2 != p {
		t.Fatalf("second build: %s %v", p2, err)
	}
	fi2, _ := os.Stat(p2)
	if !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("rebuilt although cached")
	}
	// Only the interposed symbols are exported.
	out, err := exec.Command(testenv.Tool(t, "nm"), "-D", "--defined-only", p).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == "T" && strings.HasPrefix(f[2], "iemu_") {
			t.Errorf("internal symbol exported: %s", f[2])
		}
	}
}

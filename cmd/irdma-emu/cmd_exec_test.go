package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/attach/attachtest"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// The test binary doubles as irdma-emu when this variable is set, so that
// exec (which replaces the process) runs for real.
const asMain = "IRDMA_EMU_TEST_AS_MAIN"

func init() {
	if os.Getenv(asMain) == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// irdmaEmu runs the test binary as irdma-emu with the given run directory.
func irdmaEmu(t *testing.T, runDir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1", attach.EnvRunDir+"="+runDir, "IRDMA_EMU_DEBUG=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run: %v", err)
		}
		code = ee.ExitCode()
	}
	return o.String(), e.String(), code
}

// needTool stops the test when a program it runs is missing, and the
// libirdma provider too where an rdma-core program is among them (a
// failure under CI: internal/testenv).
func needTool(t *testing.T, names ...string) {
	t.Helper()
	testenv.Tools(t, names...)
	for _, n := range names {
		if strings.HasPrefix(n, "ibv_") {
			testenv.Libirdma(t)
			break
		}
	}
}

// runDirWithTree writes <run>/irdma0/sysfs as the daemon would.
func runDirWithTree(t *testing.T) string {
	t.Helper()
	run := t.TempDir()
	var out, errb bytes.Buffer
	if code := dispatch([]string{"sysfs", "--mac", "02:fc:00:00:00:01", attach.SysfsPath(run, "irdma0")}, &out, &errb); code != exitOK {
		t.Fatalf("sysfs: %d %s", code, errb.String())
	}
	return run
}

// TestExecIbvDevices: ibv_devices through irdma-emu exec lists the device
// with its node GUID: sysfs and the faked stat only, end to end.
func TestExecIbvDevices(t *testing.T) {
	needTool(t, "gcc", "ibv_devices")
	run := runDirWithTree(t)
	attachtest.Start(t, run, "irdma0", attachtest.Config{})
	out, errs, code := irdmaEmu(t, run, "exec", "--", "ibv_devices")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var found bool
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		found = found || (len(f) == 2 && f[0] == "irdma0" && f[1] == "00fc00fffe000001")
	}
	if !found {
		t.Fatalf("ibv_devices did not list irdma0 00fc00fffe000001:\n%s\n%s", out, errs)
	}
}

// TestExecIbvDevinfoForwarding: ibv_devinfo's open reaches the server as
// HELLO with a /proc/self/mem descriptor; its two ioctl probes are answered
// ENOTTY locally, so the first command the server sees is GET_CONTEXT as a
// write() command with a consistent header. The canned server refuses it,
// and ibv_devinfo reports the failure; the session is closed.
func TestExecIbvDevinfoForwarding(t *testing.T) {
	needTool(t, "gcc", "ibv_devinfo")
	run := runDirWithTree(t)
	s := attachtest.Start(t, run, "irdma0", attachtest.Config{})
	out, errs, code := irdmaEmu(t, run, "exec", "--device", "irdma0", "--", "ibv_devinfo")
	if code == 0 || !strings.Contains(out+errs, "Failed to open device") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	e := s.Expect(t, attachtest.Open)
	if !e.HasMem || e.Hello.Program != "ibv_devinfo" {
		t.Fatalf("HELLO %+v, /proc/self/mem %v", e.Hello, e.HasMem)
	}
	// libirdma asks with userspace_ver 5, then falls back to 4: every
	// command is a GET_CONTEXT, then the connection closes.
	var n int
	for e = s.Next(t, 10*time.Second); e.Kind == attachtest.Cmd; e = s.Next(t, 10*time.Second) {
		n++
		if len(e.Cmd) < 16 {
			t.Fatalf("command % x", e.Cmd)
		}
		command := binary.LittleEndian.Uint32(e.Cmd)
		inWords := binary.LittleEndian.Uint16(e.Cmd[4:])
		outWords := binary.LittleEndian.Uint16(e.Cmd[6:])
		if command != 0 || int(inWords)*4 != len(e.Cmd) || outWords == 0 {
			t.Fatalf("GET_CONTEXT header: command %d in_words %d out_words %d, %d bytes", command, inWords, outWords, len(e.Cmd))
		}
		// The response pointer is a program address.
		if binary.LittleEndian.Uint64(e.Cmd[8:]) == 0 {
			t.Fatalf("no response address: % x", e.Cmd)
		}
	}
	if n == 0 || e.Kind != attachtest.Close {
		t.Fatalf("%d commands, then %s", n, e.Kind)
	}
}

// TestExecStatus: the program's exit status passes through; the program
// sees the environment; errors have their own statuses.
func TestExecStatus(t *testing.T) {
	needTool(t, "gcc", "sh")
	run := runDirWithTree(t)
	attachtest.Start(t, run, "irdma0", attachtest.Config{})
	out, errs, code := irdmaEmu(t, run, "exec", "--", "sh", "-c", `echo "$SYSFS_PATH|$IRDMA_EMU_SOCKET|$LD_PRELOAD"; exit 7`)
	if code != 7 {
		t.Fatalf("exit %d, want 7\n%s", code, errs)
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	if len(f) != 3 || f[0] != attach.SysfsPath(run, "irdma0") || f[1] != attach.SocketPath(run, "irdma0") ||
		!strings.Contains(f[2], "libirdma-emu-preload-") {
		t.Fatalf("environment %q", out)
	}
	if _, errs, code := irdmaEmu(t, run, "exec", "--", "no-such-program-xyz"); code != 127 {
		t.Fatalf("missing program: exit %d %s", code, errs)
	}
	if _, errs, code := irdmaEmu(t, run, "exec", "--device", "irdma9", "--", "true"); code != exitFail ||
		!strings.Contains(errs, "no sysfs tree for irdma9") {
		t.Fatalf("missing device: exit %d %s", code, errs)
	}
	if _, _, code := irdmaEmu(t, run, "exec"); code != exitUsage {
		t.Fatalf("no program: exit %d", code)
	}
}

// TestEnv: the export lines, evaluated by a shell, give the same
// environment exec sets; a missing socket is a warning.
func TestEnv(t *testing.T) {
	needTool(t, "gcc", "sh")
	run := runDirWithTree(t)
	out, errs, code := irdmaEmu(t, run, "env")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	if !strings.Contains(errs, "no attach socket") {
		t.Errorf("no warning for the missing socket: %q", errs)
	}
	cmd := exec.Command("sh", "-c", out+`printf '%s\n' "$SYSFS_PATH" "$IRDMA_EMU_SOCKET" "$LD_PRELOAD"`)
	cmd.Env = append(os.Environ(), "LD_PRELOAD=/other/lib.so")
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 || lines[0] != attach.SysfsPath(run, "irdma0") || lines[1] != attach.SocketPath(run, "irdma0") {
		t.Fatalf("env gives %q", lines)
	}
	lib := strings.Split(lines[2], ":")[0]
	if _, err := os.Stat(lib); err != nil || !strings.HasPrefix(filepath.Base(lib), "libirdma-emu-preload-") {
		t.Fatalf("LD_PRELOAD %q: %v", lines[2], err)
	}
	// A quote in a path survives the shell.
	if q := shellQuote("a'b c"); q != `'a'\''b c'` {
		t.Fatalf("shellQuote %s", q)
	}
	if _, _, code := irdmaEmu(t, run, "env", "extra"); code != exitUsage {
		t.Fatalf("extra argument: exit %d", code)
	}
}

func TestSetEnv(t *testing.T) {
	got := setEnv([]string{"A=1", "B=2", "A=3", "AB=4"}, "A", "9")
	want := []string{"B=2", "AB=4", "A=9"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("setEnv = %v", got)
	}
}

// TestExecSysClass: as root, absolute /sys/class paths show the device's
// tree (a file read with cat, a directory listed with ls: libc internals
// no preload sees) while the host's classes stay; the host's own
// /sys/class is untouched; --sys-class off gives the host's view.
func TestExecSysClass(t *testing.T) {
	needTool(t, "gcc", "sh")
	testenv.Root(t)
	run := runDirWithTree(t)
	attachtest.Start(t, run, "irdma0", attachtest.Config{})
	script := `cat /sys/class/infiniband/irdma0/ports/1/pkeys/0; ls /sys/class/infiniband_verbs; test -e /sys/class/net/lo && echo net-lo`
	out, errs, code := irdmaEmu(t, run, "exec", "--sys-class", "on", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	want := "0xffff\nabi_version\nuverbs0\nnet-lo\n"
	if out != want {
		t.Fatalf("in the namespace:\n%s\nwant\n%s(stderr %s)", out, want, errs)
	}
	if _, err := os.Stat("/sys/class/infiniband/irdma0"); err == nil {
		t.Fatalf("the host's /sys/class shows irdma0 after exec")
	}
	out, _, code = irdmaEmu(t, run, "exec", "--sys-class", "off", "--", "sh", "-c", "test -e /sys/class/infiniband/irdma0 && echo seen; true")
	if code != 0 || out != "" {
		t.Fatalf("--sys-class off: exit %d, %q", code, out)
	}
	if _, errs, code := irdmaEmu(t, run, "exec", "--sys-class", "maybe", "--", "true"); code != exitUsage {
		t.Fatalf("--sys-class maybe: exit %d %s", code, errs)
	}
}

package guest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests need neither root nor QEMU; they run with -short too.

type cpioEntry struct {
	name  string
	mode  uint32
	rdev  [2]uint32
	data  string
	nlink uint32
}

// readCPIO is a minimal newc reader, independent of the writer.
func readCPIO(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	for off := 0; ; {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("bad header at %d", off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(v)
		}
		mode, nlink, size, rmaj, rmin, nameLen := field(1), field(4), int(field(6)), field(9), field(10), int(field(11))
		name := string(b[off+110 : off+110+nameLen-1])
		if b[off+110+nameLen-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		off = (off + 110 + nameLen + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, cpioEntry{name: name, mode: mode, rdev: [2]uint32{rmaj, rmin}, data: string(b[off : off+size]), nlink: nlink})
		off = (off + size + 3) &^ 3
	}
}

func TestCPIOWriter(t *testing.T) {
	var buf bytes.Buffer
	w := newCPIOWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Dir("tmp", 0o1777))
	must(w.CharDev("dev/console", 0o600, 5, 1))
	must(w.File("/usr/bin/tool", 0o755, []byte("abc")))
	must(w.Symlink("sbin/ip", "/bin/ip"))
	must(w.File("usr/bin/other", 0o644, nil))
	if err := w.File("usr/bin/tool", 0o755, nil); err == nil {
		t.Error("writing a path twice succeeded")
	}
	if err := w.File("../../etc/passwd", 0o644, nil); err != nil {
		t.Errorf("a path with .. is cleaned inside the archive, got %v", err)
	}
	must(w.Close())
	got := readCPIO(t, buf.Bytes())
	want := []cpioEntry{
		{"tmp", 0o041777, [2]uint32{}, "", 2},
		{"dev", 0o040755, [2]uint32{}, "", 2},
		{"dev/console", 0o020600, [2]uint32{5, 1}, "", 1},
		{"usr", 0o040755, [2]uint32{}, "", 2},
		{"usr/bin", 0o040755, [2]uint32{}, "", 2},
		{"usr/bin/tool", 0o100755, [2]uint32{}, "abc", 1},
		{"sbin", 0o040755, [2]uint32{}, "", 2},
		{"sbin/ip", 0o120777, [2]uint32{}, "/bin/ip", 1},
		{"usr/bin/other", 0o100644, [2]uint32{}, "", 1},
		{"etc", 0o040755, [2]uint32{}, "", 2},
		{"etc/passwd", 0o100644, [2]uint32{}, "", 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("archive:\n got %v\nwant %v", got, want)
	}
}

func TestStageResolveStaysInside(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin", "sbin", "lib/x86_64-linux-gnu", "lib64"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/ip", "staged ip")
	link("sbin/ip", "/bin/ip") // absolute, as in iproute2
	write("lib/x86_64-linux-gnu/ld.so", "loader")
	link("lib64/ld.so", "/lib/x86_64-linux-gnu/ld.so")
	link("lib64/loop", "loop")
	link("sbin/host", "/etc/hostname") // exists on the host, not in the stage
	st := newStage()
	if err := st.add("pkg", dir); err != nil {
		t.Fatal(err)
	}
	final, links, err := st.resolve("sbin/ip")
	if err != nil || final != "bin/ip" || !reflect.DeepEqual(links, []string{"sbin/ip"}) {
		t.Errorf("resolve(sbin/ip) = %q %v %v", final, links, err)
	}
	if _, _, err := st.resolve("sbin/host"); err == nil {
		t.Error("a symlink to a host file resolved although no staged package ships it")
	}
	if _, _, err := st.resolve("lib64/loop"); err == nil {
		t.Error("a symlink loop resolved")
	}
	need, err := st.closure([]string{"sbin/ip", "lib64/ld.so"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sbin/ip", "bin/ip", "lib64/ld.so", "lib/x86_64-linux-gnu/ld.so"} {
		if !need[p] {
			t.Errorf("closure lacks %s: %v", p, need)
		}
	}
}

func TestModuleOrder(t *testing.T) {
	dep := map[string][]string{
		"rdma_rxe":   {"k/rdma_rxe.ko.xz", "k/ib_uverbs.ko.xz", "k/ib_core.ko.xz", "k/udp_tunnel.ko.xz"},
		"ib_uverbs":  {"k/ib_uverbs.ko.xz", "k/ib_core.ko.xz"},
		"ib_core":    {"k/ib_core.ko.xz"},
		"udp_tunnel": {"k/udp_tunnel.ko.xz"},
	}
	got, err := moduleOrder(dep, map[string]bool{"crc32_generic": true}, []string{"crc32-generic", "rdma_rxe", "ib_uverbs"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k/udp_tunnel.ko.xz", "k/ib_core.ko.xz", "k/ib_uverbs.ko.xz", "k/rdma_rxe.ko.xz"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if _, err := moduleOrder(dep, nil, []string{"missing"}); err == nil {
		t.Error("an unknown module was accepted")
	}
	if moduleName("kernel/x/virtio-net.ko.zst") != "virtio_net" || stripCompression("a/b.ko.xz") != "a/b.ko" {
		t.Error("module name normalisation")
	}
}

func TestParsePrintURIs(t *testing.T) {
	out := []byte(`'http://deb.debian.org/debian/pool/main/b/busybox/busybox-static_1.35.0-4%2bdeb12u1%2bb1_amd64.deb' busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb 928188 SHA256:3D3FDBE9
'http://x/perftest_4.5%2b0.17-1_amd64.deb' perftest_4.5+0.17-1_amd64.deb 266940 SHA256:d5bb8f96
`)
	got, err := parsePrintURIs(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []debFile{
		{Package: "busybox-static", Version: "1:1.35.0-4+deb12u1+b1", FileName: "busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb", Size: 928188, SHA256: "3d3fdbe9"},
		{Package: "perftest", Version: "4.5+0.17-1", FileName: "perftest_4.5+0.17-1_amd64.deb", Size: 266940, SHA256: "d5bb8f96"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if imageKey(got) == imageKey(got[:1]) {
		t.Error("the image key ignores a package")
	}
}

func TestParseSteps(t *testing.T) {
	lines := []string{
		"noise",
		"@@IRDMA-EMU begin a",
		"line 1",
		"line 2",
		"@@IRDMA-EMU end a",
		"@@IRDMA-EMU step a rc=0",
		"@@IRDMA-EMU begin b",
		"@@IRDMA-EMU end b",
		"@@IRDMA-EMU step b rc=3",
	}
	want := []StepResult{{"a", 0, "line 1\nline 2"}, {"b", 3, ""}}
	if got := parseSteps(lines); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestConsoleMarkersStartLines(t *testing.T) {
	c, err := newConsole(filepath.Join(t.TempDir(), "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.read(strings.NewReader("\x1b[2JProbing EDD... ok@@IRDMA-EMU init start\r\n@@IRDMA-EMU fatal no eth0\n"), "")
	lines, _, _ := c.snapshot()
	if want := []string{"Probing EDD... ok", "@@IRDMA-EMU init start", "@@IRDMA-EMU fatal no eth0"}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.wait(ctx, regexp.MustCompile("ready")); err == nil || !strings.Contains(err.Error(), "no eth0") {
		t.Errorf("waiting past a fatal marker: %v", err)
	}
}

func TestPingpongRecord(t *testing.T) {
	d := PingpongDest{QPN: 0xabcdef, PSN: 0x123456, GID: MappedGID(netip.MustParseAddr("10.99.0.1"))}
	b := d.Marshal()
	if len(b) != PingpongRecordLen || PingpongRecordLen != 52 {
		t.Fatalf("record length %d (const %d), want 52", len(b), PingpongRecordLen)
	}
	if want := "0000:abcdef:123456:00000000000000000000ffff0a630001\x00"; string(b) != want {
		t.Errorf("record %q, want %q", b, want)
	}
	// As rxe's ibv_rc_pingpong client sent it in the interop test.
	got, err := ParsePingpongDest([]byte("0000:000011:EBE003:00000000000000000000ffff0a630002\x00"))
	if err != nil || got.QPN != 0x11 || got.PSN != 0xebe003 || got.GIDAddr() != netip.MustParseAddr("10.99.0.2") {
		t.Errorf("parse: %+v %v", got, err)
	}
}

func TestRdmaStatisticAndGIDs(t *testing.T) {
	m, err := ParseRdmaStatistic("link rxe0/1 sent_pkts 72 rcvd_pkts 0 completer_retry_err 71 \n")
	if err != nil || m["sent_pkts"] != 72 || m["completer_retry_err"] != 71 || len(m) != 3 {
		t.Errorf("%v %v", m, err)
	}
	if d := CounterDelta(map[string]uint64{"a": 1, "b": 2}, map[string]uint64{"a": 1, "b": 5}); !reflect.DeepEqual(d, map[string]int64{"b": 3}) {
		t.Errorf("delta %v", d)
	}
	g := ParseGIDs("\t\t\tGID[  0]:\t\tfe80::5054:ff:fe12:3456, RoCE v2\n\t\t\tGID[  1]:\t\t::ffff:10.99.0.2, RoCE v2\n")
	if g[0] != "fe80::5054:ff:fe12:3456" || g[1] != "::ffff:10.99.0.2" {
		t.Errorf("GIDs %v", g)
	}
}

// TestAgentProtocol plays the guest's side of the agent channel.
func TestAgentProtocol(t *testing.T) {
	host, guestEnd := net.Pipe()
	a := newAgentConn(host)
	defer a.close()
	go func() {
		sc := newLineReader(guestEnd)
		for {
			line, err := sc()
			if err != nil {
				return
			}
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "RUN" {
				script, _ := base64.StdEncoding.DecodeString(f[2])
				out := base64.StdEncoding.EncodeToString([]byte("ran: " + string(script)))
				// Busybox's base64 wraps at 76 columns.
				var wrapped strings.Builder
				for len(out) > 76 {
					wrapped.WriteString(out[:76] + "\n")
					out = out[76:]
				}
				wrapped.WriteString(out + "\n")
				fmt.Fprintf(guestEnd, "%s begin %s\n%s%s end %s rc=7\n", Marker, f[1], wrapped.String(), Marker, f[1])
			}
		}
	}()
	p, err := a.start(strings.Repeat("echo hello; ", 20))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := p.Wait(ctx)
	if err != nil || r.RC != 7 || r.Output != "ran: "+strings.Repeat("echo hello; ", 20) {
		t.Errorf("result %+v %v", r, err)
	}
	guestEnd.Close()
	<-a.done
	if _, err := a.start("true"); err == nil {
		t.Error("a command on a closed channel was accepted")
	}
}

func newLineReader(c net.Conn) func() (string, error) {
	var buf []byte
	one := make([]byte, 1)
	return func() (string, error) {
		for {
			if _, err := c.Read(one); err != nil {
				return "", err
			}
			if one[0] == '\n' {
				s := string(buf)
				buf = buf[:0]
				return s, nil
			}
			buf = append(buf, one[0])
		}
	}
}

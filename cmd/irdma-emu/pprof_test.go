package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// TestBinaryProfiling: --pprof serves the runtime's profiles while the
// daemon runs (a heap profile and the goroutine dump, which shows the
// engine's workers), and --cpuprofile leaves a CPU profile (gzip-framed
// protobuf, what go tool pprof reads) once the daemon stops.
func TestBinaryProfiling(t *testing.T) {
	cpu := filepath.Join(t.TempDir(), "cpu.pprof")
	p := daemontest.Run(t, daemontest.Options{Name: "prof0"}, "--addr", "127.0.11.2", "--pprof", "127.0.0.1:0", "--cpuprofile", cpu)
	m := regexp.MustCompile(`pprof on (http://\S+/debug/pprof/)`).FindStringSubmatch(p.Output())
	if m == nil {
		t.Fatalf("no pprof address printed:\n%s", p.Output())
	}
	get := func(path string) string {
		t.Helper()
		c := http.Client{Timeout: 20 * time.Second}
		r, err := c.Get(m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, r.StatusCode, err, b)
		}
		return string(b)
	}
	if s := get("heap?debug=1"); !strings.HasPrefix(s, "heap profile:") {
		t.Errorf("heap profile starts %q", s[:min(len(s), 40)])
	}
	if s := get("goroutine?debug=2"); !strings.Contains(s, "emu/engine.(*worker).loop") {
		t.Errorf("goroutine dump shows no engine worker:\n%.2000s", s)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rc := p.Wait(t, 20*time.Second); rc != 0 {
		t.Fatalf("status %d:\n%s", rc, p.Output())
	}
	b, err := os.ReadFile(cpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 16 || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile: %d bytes, starts % x", len(b), b[:min(len(b), 4)])
	}
}

// TestRunProfilingUsage: a --pprof address that is not host:port is a
// usage error, before anything starts.
func TestRunProfilingUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := dispatch([]string{"run", "--run-dir", t.TempDir(), "--pprof", "localhost"}, &out, &errb); rc != exitUsage || !strings.Contains(errb.String(), "host:port") {
		t.Errorf("--pprof localhost: %d %q", rc, errb.String())
	}
}

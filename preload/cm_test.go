package preload_test

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/netport"
	"github.com/irdma-emu/irdma-emu/rdmacm"
)

// TestRdmaCM runs testdata/cmcheck.c under the preload against a real
// rdmacm.Provider (no CM: address resolution needs none): the fake
// /dev/infiniband/rdma_cm, GET_EVENT's EAGAIN, EINTR and EFAULT, a
// GET_EVENT waiting on while another thread closes the channel, poll and
// epoll readiness, MIGRATE_ID by descriptor; and the channels are gone
// when the program has closed them.
func TestRdmaCM(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "cmcheck")
	gcc(t, "-O2", "-Wall", "-Werror", "-pthread", "-o", bin, "testdata/cmcheck.c")
	root := tree(t, dir)
	ip := netip.MustParseAddr("127.0.0.1")
	p, err := rdmacm.NewProvider(rdmacm.Config{Device: "irdma0", NodeGUID: 0x0200_00ff_fe00_0000,
		Port: func() netport.Info {
			return netport.Info{Name: "lo", ActiveMTU: netport.IBMTU4096, Addrs: []netip.Addr{ip}, Present: true}
		},
		GIDs:    func() [][16]byte { return [][16]byte{{0: 0xfe, 1: 0x80}, ip.As16()} },
		Resolve: func(context.Context, netip.Addr) ([6]byte, error) { return [6]byte{2}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "irdma0.sock")
	srv, err := attach.Listen(sock, p)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cmd := exec.Command(bin, ip.String())
	cmd.Env = env(l, root, sock)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok\n") {
		t.Fatalf("cmcheck: %v\n%s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Counts() != (rdmacm.Counts{}) {
		if time.Now().After(deadline) {
			t.Fatalf("after the program: %+v", p.Counts())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

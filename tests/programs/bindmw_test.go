package programs_test

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// TestBindMWType1 builds testdata/bindmw.c against Debian's libibverbs and
// runs it through the preload on a daemon whose workers park as soon as
// they run out of work (--poll-window -1ns): a type-1 window bound with
// ibv_bind_mw on a self-connected RC QP must complete (IBV_WC_BIND_MW,
// success) and an RDMA write through its new rkey must land. libirdma's
// irdma_ubind_mw rings the SQ doorbell through its own irdma_upost_send,
// not ops.post_send, so the preload must wrap ops.bind_mw too: without
// that, the parked daemon never saw the bind (rdma-core 65's
// tests.test_mr.MWTest type-1 tests timed out polling for it).
func TestBindMWType1(t *testing.T) {
	needPrograms(t)
	testenv.Glob(t, "/usr/include/infiniband/verbs.h", "libibverbs' headers", "Debian package libibverbs-dev; tests/run.sh installs it")
	bin := filepath.Join(t.TempDir(), "bindmw")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", bin, "testdata/bindmw.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc bindmw.c (libibverbs-dev): %v\n%s", err, out)
	}
	n := startNodes(t, 1, "--poll-window", "-1ns")[0]
	p := n.run(t, bin)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("bindmw exit status %d\n%s", code, dump(p))
	}
	t.Logf("%s", p.stdout.String())
}

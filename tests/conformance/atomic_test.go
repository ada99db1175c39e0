package conformance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// TestAtomicSuite65 runs rdma-core 65's own tests/test_atomic.py (and
// test_mr_rereg_atomic) through libirdma 65 on both profiles. GEN_3, whose
// firmware allows atomics: the seven RC tests pass — FETCH_ADD, CMP_SWAP
// equal and unequal, and the error flows the test expects to fail (no
// remote-atomic right on the QP or the MR, a misaligned address, a bad
// L_Key or R_Key); the XRC ones skip themselves (libirdma has no
// open_xrcd). test_mr_rereg_atomic gets past its atomics ("Remote access
// error" after the rereg without the right) and stops where
// test_mr_rereg_addr does on GEN_2 (docs/conformance.md). GEN_2 (E810, no
// IRDMA_FEATURE_ATOMIC_OPS): every test_atomic test skips on atomic_cap
// IBV_ATOMIC_NONE.
func TestAtomicSuite65(t *testing.T) {
	testenv.Tools(t, "rdma", "ip")
	testenv.Program(t, "python3", "python3")
	rc := cachedRdmaCore(t)
	const atomic = "tests.test_atomic.AtomicTest."
	rcTests := []string{"test_atomic_fetch_and_add", "test_atomic_cmp_and_swap", "test_atomic_invalid_qp_access",
		"test_atomic_invalid_mr_access", "test_atomic_non_aligned_addr", "test_atomic_invalid_lkey", "test_atomic_invalid_rkey"}
	xrc := []string{"test_xrc_atomic_fetch_and_add", "test_xrc_atomic_cmp_and_swap"}
	type want struct{ verdict, reason string } // reason: a prefix
	for _, p := range []struct {
		profile string
		want    map[string]want
	}{
		{"gen3", func() map[string]want {
			m := map[string]want{"tests.test_mr.MRTest.test_mr_rereg_atomic": {"ERROR",
				"pyverbs.pyverbs_error.PyverbsRDMAError: Failed to modify QP state to init"}}
			for _, n := range rcTests {
				m[atomic+n] = want{"OK", ""}
			}
			for _, n := range xrc {
				m[atomic+n] = want{"SKIP", "Create XRCD is not supported"}
			}
			return m
		}()},
		{"gen2", func() map[string]want {
			m := map[string]want{}
			for _, n := range append(append([]string{}, rcTests...), xrc...) {
				m[atomic+n] = want{"SKIP", "Atomic operations are not supported"}
			}
			return m
		}()},
	} {
		t.Run(p.profile, func(t *testing.T) {
			d := daemontest.Run(t, daemontest.Options{}, "--addr", testaddr.Loopback(t, 1)[0].String(), "--profile", p.profile)
			env := append(os.Environ(), "IRDMA_EMU_RUN_DIR="+d.RunDir, "LD_LIBRARY_PATH="+filepath.Join(rc.build(), "lib"),
				"PATH=/usr/sbin:/usr/bin:/sbin:/bin")
			runner := filepath.Join(rc.build(), "bin", "run_tests.py")
			for id, w := range p.want {
				v, reason, _, out := runSuiteTest(daemontest.Binary(t), env, runner, d.Name, id, 2*time.Minute)
				if v != w.verdict || !strings.HasPrefix(reason, w.reason) {
					t.Errorf("%s: %s (%s), want %s (%s…)\n%s", id, v, reason, w.verdict, w.reason, out)
				}
			}
			if t.Failed() {
				t.Logf("daemon log:\n%s", d.Output())
			}
		})
	}
}

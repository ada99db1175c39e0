package interop

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// TestMain prints how long the whole interop suite took (CI's budget,
// docs/interop.md) and removes the irdma-emu binary daemontest.Binary
// builds for the scenarios with the emulator.
func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	daemontest.RemoveBinary()
	if !testing.Short() {
		fmt.Printf("DURATION interop suite (all of tests/interop): %v\n", time.Since(start).Round(time.Millisecond))
	}
	os.Exit(code)
}

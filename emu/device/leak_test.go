package device_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// deviceGoroutines lists the stacks of goroutines running code of the
// device model.
func deviceGoroutines() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "irdma-emu/emu/") && !strings.Contains(g, "leak_test.go") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseNoLeak brings devices up, uses them, closes them, and checks
// that no goroutine of the device model survives, and that Close is
// idempotent.
func TestCloseNoLeak(t *testing.T) {
	for range 3 {
		d, err := device.New(device.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if len(deviceGoroutines()) == 0 {
			t.Fatal("no engine goroutine while the device runs")
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("brought-up", func(t *testing.T) {
		e := devtest.Bringup(t, devtest.Options{})
		e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC")
		if err := e.Dev.Close(); err != nil {
			t.Fatal(err)
		}
		// Writes after Close are harmless: nothing listens.
		e.Dev.Write32(0x00500800, 1)
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := deviceGoroutines()
		if len(g) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the device model leaked:\n%s", len(g), strings.Join(g, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

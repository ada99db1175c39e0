package attach

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultRunDir is where the daemon keeps its sockets and sysfs trees.
const DefaultRunDir = "/run/irdma-emu"

// Environment variables shared by the daemon, the tools and the preload.
const (
	// EnvRunDir overrides DefaultRunDir (for unprivileged use and tests).
	EnvRunDir = "IRDMA_EMU_RUN_DIR"
	// EnvSocket is the socket the preload connects to; it overrides the
	// run-directory default.
	EnvSocket = "IRDMA_EMU_SOCKET"
	// EnvDevice names the device the tools pick when no --device is given.
	EnvDevice = "IRDMA_EMU_DEVICE"
	// EnvDebug makes the preload explain failures on stderr.
	EnvDebug = "IRDMA_EMU_DEBUG"
)

// DefaultDevice is the device name used when none is given.
const DefaultDevice = "irdma0"

// RunDir returns the run directory a client (the tools, exec, the Go
// client) looks in: $IRDMA_EMU_RUN_DIR if set; else DefaultRunDir if it
// exists; else the per-user FallbackRunDir if it exists (where an
// unprivileged daemon puts its files); else DefaultRunDir.
func RunDir() string {
	if d := os.Getenv(EnvRunDir); d != "" {
		return d
	}
	if isDir(DefaultRunDir) {
		return DefaultRunDir
	}
	if fb := FallbackRunDir(); isDir(fb) {
		return fb
	}
	return DefaultRunDir
}

// FallbackRunDir is the per-user run directory a daemon uses when it
// cannot write DefaultRunDir: $XDG_RUNTIME_DIR/irdma-emu, or
// /tmp/irdma-emu-<uid>.
func FallbackRunDir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "irdma-emu")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("irdma-emu-%d", os.Geteuid()))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// SocketPath is the attach socket of a device: <runDir>/<device>.sock.
func SocketPath(runDir, device string) string {
	return filepath.Join(runDir, device+".sock")
}

// DeviceDir is the per-device directory: <runDir>/<device>.
func DeviceDir(runDir, device string) string {
	return filepath.Join(runDir, device)
}

// SysfsPath is the fake sysfs tree of a device, the value of SYSFS_PATH for
// its programs: <runDir>/<device>/sysfs.
func SysfsPath(runDir, device string) string {
	return filepath.Join(runDir, device, "sysfs")
}

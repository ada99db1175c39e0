package attach

import (
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

// RunDir returns the run directory: $IRDMA_EMU_RUN_DIR if set, else
// DefaultRunDir.
func RunDir() string {
	if d := os.Getenv(EnvRunDir); d != "" {
		return d
	}
	return DefaultRunDir
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

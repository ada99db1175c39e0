package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// DefaultAddr is the port's address when neither an interface nor an
// address is given: `irdma-emu run` with no flags is a device on loopback.
var DefaultAddr = netip.MustParseAddr("127.0.0.1")

// Config configures a daemon. The zero value is a device named irdma0 on
// 127.0.0.1 under the default run directory.
type Config struct {
	// Name is the device name (hca_id): irdma0 by default. It names the
	// attach socket, the control socket and the sysfs tree.
	Name string
	// Netdev is the interface the port sits on (--netdev).
	Netdev string
	// Addr restricts the port to one address (--addr); with neither
	// Netdev nor Addr, DefaultAddr.
	Addr netip.Addr
	// NetNS is the network namespace (a path such as
	// /var/run/netns/NAME) of the interface and the sockets; "": the
	// caller's.
	NetNS string

	// RunDir holds the sockets and sysfs trees; "": RunDir().
	RunDir string
	// Socket is the attach socket; "": <RunDir>/<Name>.sock.
	Socket string
	// Control is the control socket; "": <RunDir>/<Name>.ctl.
	Control string
	// Sysfs is the fake sysfs tree; "": <RunDir>/<Name>/sysfs.
	Sysfs string
	// Uverbs is N of /dev/infiniband/uverbsN in the device's sysfs tree.
	// Every daemon has its own tree, so 0 serves for all of them.
	Uverbs int

	// Mode is the link's transport (--transport); the zero Mode picks per
	// CAP_NET_RAW (docs/transport.md).
	Mode udp.Mode
	// Faults are injected into what the port sends (--fault).
	Faults link.Faults
	// Pcap, if not empty, is a file that records every frame sent and
	// received (pcapng if the name ends in .pcapng, else pcap).
	Pcap string
	// PcapWriter, if set, receives the capture instead of a file (tests).
	// The daemon does not close it.
	PcapWriter io.Writer

	// Engine configures the data plane (workers, scan policy).
	Engine engine.Config
	// Profile is the device generation; the zero value is GEN_2.
	Profile profile.Profile

	// Handler makes the attach socket's handler once the device is up; nil
	// uses DefaultHandler. A handler may implement PortEventSink and
	// Quiescer to take part in port events and shutdown.
	Handler func(*Daemon) (attach.Handler, error)

	// ShutdownTimeout bounds the orderly part of Close (moving QPs to
	// error, closing sessions); 0: 10 s.
	ShutdownTimeout time.Duration

	// Logger; nil: none.
	Logger *zap.Logger
}

// Paths are the files a daemon owns.
type Paths struct {
	RunDir  string // the run directory
	Socket  string // the attach socket (<run-dir>/<name>.sock)
	Control string // the control socket (<run-dir>/<name>.ctl)
	Dir     string // the device directory (<run-dir>/<name>), removed at exit
	Sysfs   string // the fake sysfs tree (<run-dir>/<name>/sysfs)
}

// ControlPath is a device's control socket under a run directory:
// <runDir>/<device>.ctl.
func ControlPath(runDir, device string) string {
	return filepath.Join(runDir, device+".ctl")
}

// RunDir is the run directory the daemon and its tools use when none is
// given: $IRDMA_EMU_RUN_DIR, else attach.DefaultRunDir when this process
// may create or write it, else a per-user directory (FallbackRunDir), so
// that an unprivileged `irdma-emu run` still starts a device.
func RunDir() string {
	if d := os.Getenv(attach.EnvRunDir); d != "" {
		return d
	}
	if usable(attach.DefaultRunDir) {
		return attach.DefaultRunDir
	}
	return FallbackRunDir()
}

// FallbackRunDir is attach.FallbackRunDir: the per-user run directory.
func FallbackRunDir() string { return attach.FallbackRunDir() }

// usable reports whether dir exists and is writable, or could be created
// (its parent is writable).
func usable(dir string) bool {
	if fi, err := os.Stat(dir); err == nil {
		return fi.IsDir() && unix.Access(dir, unix.W_OK|unix.X_OK) == nil
	}
	return unix.Access(filepath.Dir(dir), unix.W_OK|unix.X_OK) == nil
}

// CheckName reports whether name can be a device name: it becomes a file
// name and the hca_id libibverbs shows (IB_DEVICE_NAME_MAX is 64 with the
// terminating zero).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("empty device name")
	case len(name) > 63:
		return fmt.Errorf("device name %q longer than 63 bytes", name)
	case name == "." || name == ".." || strings.HasPrefix(name, "."):
		return fmt.Errorf("device name %q may not start with a dot", name)
	}
	for _, r := range name {
		if r <= ' ' || r == '/' || r > '~' {
			return fmt.Errorf("device name %q: only printable ASCII without spaces or '/'", name)
		}
	}
	return nil
}

// fill applies defaults and checks the configuration.
func (c *Config) fill() error {
	if c.Name == "" {
		c.Name = attach.DefaultDevice
	}
	if err := CheckName(c.Name); err != nil {
		return err
	}
	if c.Netdev == "" && !c.Addr.IsValid() {
		c.Addr = DefaultAddr
	}
	if c.Addr.IsValid() {
		c.Addr = c.Addr.Unmap()
		if c.Addr.IsUnspecified() || c.Addr.IsMulticast() {
			return fmt.Errorf("address %v cannot be a port's address", c.Addr)
		}
	}
	if c.Uverbs < 0 || c.Uverbs > 63 {
		return fmt.Errorf("uverbs index %d out of range 0..63", c.Uverbs)
	}
	if err := c.Faults.Validate(); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if c.RunDir == "" {
		c.RunDir = RunDir()
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// paths resolves the daemon's files (absolute, so that a daemon started
// from one directory is found from another).
func (c *Config) paths() (Paths, error) {
	p := Paths{RunDir: c.RunDir, Socket: c.Socket, Control: c.Control, Sysfs: c.Sysfs}
	if p.Socket == "" {
		p.Socket = attach.SocketPath(p.RunDir, c.Name)
	}
	if p.Control == "" {
		p.Control = ControlPath(p.RunDir, c.Name)
	}
	p.Dir = attach.DeviceDir(p.RunDir, c.Name)
	if p.Sysfs == "" {
		p.Sysfs = attach.SysfsPath(p.RunDir, c.Name)
	}
	for _, s := range []*string{&p.RunDir, &p.Socket, &p.Control, &p.Dir, &p.Sysfs} {
		a, err := filepath.Abs(*s)
		if err != nil {
			return Paths{}, err
		}
		*s = a
	}
	// A unix socket path is limited to sun_path (108 bytes with the NUL).
	for _, s := range []string{p.Socket, p.Control} {
		if len(s) > 107 {
			return Paths{}, fmt.Errorf("socket path %s is longer than a unix socket address allows (107 bytes)", s)
		}
	}
	if p.Socket == p.Control {
		return Paths{}, fmt.Errorf("attach and control sockets are the same file %s", p.Socket)
	}
	return p, nil
}

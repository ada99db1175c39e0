package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/preload"
)

func init() {
	register(&command{
		name:    "env",
		summary: "print the environment that runs programs on the emulated device (eval \"$(irdma-emu env)\")",
		run:     runEnv,
	})
}

const envUsage = `usage: irdma-emu env [--device NAME] [--run-dir DIR] [--socket PATH] [--sysfs DIR]

Prints export lines for a POSIX shell that make unmodified rdma-core
programs use the emulated device: SYSFS_PATH (the daemon's fake sysfs
tree), IRDMA_EMU_SOCKET (its attach socket) and LD_PRELOAD (the preload
library, compiled on first use). Use it as:

    eval "$(irdma-emu env --device irdma0)"

The device's socket and tree are found under the daemon's run directory:
<run-dir>/<device>.sock and <run-dir>/<device>/sysfs (docs/preload.md).

flags:
`

// deviceFlags are the flags exec and env share.
type deviceFlags struct {
	device, runDir, socket, sysfs string
}

func (d *deviceFlags) register(fs *flag.FlagSet) {
	def := os.Getenv(attach.EnvDevice)
	if def == "" {
		def = attach.DefaultDevice
	}
	fs.StringVar(&d.device, "device", def, "device name (default $"+attach.EnvDevice+" or "+attach.DefaultDevice+")")
	fs.StringVar(&d.runDir, "run-dir", attach.RunDir(), "the daemon's run directory ($"+attach.EnvRunDir+")")
	fs.StringVar(&d.socket, "socket", "", "attach socket (default <run-dir>/<device>.sock)")
	fs.StringVar(&d.sysfs, "sysfs", "", "fake sysfs tree (default <run-dir>/<device>/sysfs)")
}

// deviceEnv resolves the flags into the variables a program needs. It fails
// when the sysfs tree is missing (libibverbs would find no device); a
// missing socket is only a warning, written to warn (the program sees the
// device and fails to open it, as with a driver gone).
func (d *deviceFlags) env(warn io.Writer) ([][2]string, error) {
	if d.device == "" || strings.ContainsAny(d.device, "/\x00") {
		return nil, fmt.Errorf("bad device name %q", d.device)
	}
	sock, sys := d.socket, d.sysfs
	if sock == "" {
		sock = attach.SocketPath(d.runDir, d.device)
	}
	if sys == "" {
		sys = attach.SysfsPath(d.runDir, d.device)
	}
	var err error
	if sock, err = filepath.Abs(sock); err != nil {
		return nil, err
	}
	if sys, err = filepath.Abs(sys); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(sys, "class", "infiniband_verbs")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("no sysfs tree for %s at %s: is the daemon running? (irdma-emu sysfs DIR writes one by hand)", d.device, sys)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		fmt.Fprintf(warn, "irdma-emu: warning: no attach socket at %s: programs will see %s but fail to open it\n", sock, d.device)
	}
	lib, err := preload.Path()
	if err != nil {
		return nil, err
	}
	pre := lib
	if old := os.Getenv("LD_PRELOAD"); old != "" {
		for _, p := range strings.FieldsFunc(old, func(r rune) bool { return r == ':' || r == ' ' }) {
			if p != lib {
				pre += ":" + p
			}
		}
	}
	return [][2]string{
		{"SYSFS_PATH", sys},
		{attach.EnvSocket, sock},
		{"LD_PRELOAD", pre},
	}, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func runEnv(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var d deviceFlags
	d.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, envUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return exitUsage
	}
	vars, err := d.env(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu env: %v\n", err)
		return exitFail
	}
	for _, kv := range vars {
		fmt.Fprintf(stdout, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return exitOK
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

func init() {
	register(&command{
		name:    "exec",
		summary: "run a program on the emulated device (exec [--device NAME] -- PROGRAM ARGS…)",
		run:     runExec,
	})
}

const execUsage = `usage: irdma-emu exec [--device NAME] [--run-dir DIR] [--socket PATH] [--sysfs DIR] [--sys-class auto|on|off] -- PROGRAM [ARGS…]

Runs an unmodified rdma-core program (ibv_devinfo, ibv_rc_pingpong,
perftest, …) on the emulated device: sets SYSFS_PATH, IRDMA_EMU_SOCKET and
LD_PRELOAD as 'irdma-emu env' prints them and replaces itself with the
program (execve), so the program's exit status and signals are its own.
IRDMA_EMU_DEBUG=1 makes the preload explain what it does on stderr.

With --sys-class (default auto: when running as root) the program runs in
a private mount namespace where /sys/class/infiniband,
/sys/class/infiniband_verbs and the tree's other classes are the device's
fake sysfs tree, so absolute paths (ls /sys/class/infiniband/irdma0/...)
work for the program and its children; the rest of /sys/class is the
host's (docs/preload.md "Absolute /sys/class paths"). on: fail if it
cannot be set up; off: never.

Exit status: the program's; 1 if the device has no sysfs tree or the
preload cannot be built; 2 usage; 126/127 if the program cannot be run.

flags:
`

// execve replaces the process; tests replace it.
var execve = syscall.Exec

// mountSys sets up /sys/class for the program (sysclass.go); tests
// replace it.
var mountSys = mountSysClass

func envValue(vars [][2]string, key string) string {
	for _, kv := range vars {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

func runExec(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var d deviceFlags
	d.register(fs)
	sysClass := fs.String("sys-class", "auto", "show the fake tree at /sys/class in a private mount namespace: auto (as root), on, off")
	fs.Usage = func() {
		fmt.Fprint(stderr, execUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "irdma-emu exec: no program given")
		fs.Usage()
		return exitUsage
	}
	vars, err := d.env(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu exec: %v\n", err)
		return exitFail
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu exec: %v\n", err)
		return 127
	}
	env := os.Environ()
	for _, kv := range vars {
		env = setEnv(env, kv[0], kv[1])
	}
	switch *sysClass {
	case "off":
	case "auto", "on":
		if *sysClass == "auto" && os.Geteuid() != 0 {
			break
		}
		if err := mountSys(envValue(vars, "SYSFS_PATH")); err != nil {
			if *sysClass == "on" {
				fmt.Fprintf(stderr, "irdma-emu exec: /sys/class: %v\n", err)
				return exitFail
			}
			fmt.Fprintf(stderr, "irdma-emu exec: warning: absolute /sys/class paths show the host's, not the device's: %v\n", err)
		}
	default:
		fmt.Fprintf(stderr, "irdma-emu exec: --sys-class %q: want auto, on or off\n", *sysClass)
		return exitUsage
	}
	err = execve(prog, argv, env)
	fmt.Fprintf(stderr, "irdma-emu exec: %s: %v\n", prog, err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// setEnv sets key=value in env, replacing every earlier setting.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}

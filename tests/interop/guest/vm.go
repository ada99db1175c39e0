package guest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Script is a scenario script: it rides in the guest's second cpio archive
// as /scenario/NAME.sh, and /init runs it after bring-up with
// /etc/irdma-emu/lib.sh sourced (step, emu_mark, wait_tcp, rxe_debug_on).
type Script struct {
	Name string // [A-Za-z0-9_.-]; scripts run in name order
	Body string
}

// Config describes one guest.
type Config struct {
	Image *Image
	// Dir receives the console log, the capture and the combined initrd.
	Dir string
	// Scripts run in the guest after rxe0 is active, before the agent.
	Scripts []Script
	// Files are extra files for the guest (guest path -> content), in the
	// same archive as the scripts.
	Files map[string][]byte
	// NoAgent makes the guest power off after its scripts. Otherwise it
	// serves Run and Start on its second serial port until Shutdown or
	// Close.
	NoAgent bool
	// Capture records the tap (all guest traffic) into Dir/tap.pcap from
	// before the guest boots; see VM.Capture.
	Capture bool
	// HostAddr is the address of the tap inside the namespace, GuestAddr
	// the guest's eth0; 10.99.0.1/24 and 10.99.0.2/24 by default (every
	// guest has its own namespace, so they never collide).
	HostAddr, GuestAddr netip.Prefix
	// GuestMAC is eth0's MAC address; 52:54:00:12:34:56 by default.
	GuestMAC string
	// RxeDebug enables rdma_rxe's dynamic debug before rxe0 is used.
	RxeDebug bool
	// SMP and MemoryMB size the guest (2 and 1024 by default).
	SMP, MemoryMB int
	// Append is added to the kernel command line.
	Append []string
	// Logf receives progress lines; none when nil.
	Logf func(format string, args ...any)
}

// VM is a running guest with its namespace.
type VM struct {
	cfg     Config
	ns      *Netns
	tap     string
	console *console
	proc    *HostProc // QEMU
	started time.Time
	sockDir string
	capture *Capture

	agentMu sync.Mutex
	agent   *agentConn

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	stopWatch func() bool
}

const readyPattern = Marker + ` ready rxe0 PORT_ACTIVE`

// Start boots a guest: a new namespace with a tap carrying HostAddr, the
// capture if asked for, and QEMU attached to the tap. Everything is torn
// down by Close, and also as soon as ctx ends (a test's deadline, or a
// cancellation that simulates a failure midway). Start returns once QEMU
// runs; use WaitReady for rxe0.
func Start(ctx context.Context, cfg Config) (v *VM, err error) {
	if cfg.Image == nil {
		return nil, errors.New("guest: Config.Image is nil")
	}
	if cfg.Dir == "" {
		return nil, errors.New("guest: Config.Dir is empty")
	}
	if !cfg.HostAddr.IsValid() {
		cfg.HostAddr = netip.MustParsePrefix("10.99.0.1/24")
	}
	if !cfg.GuestAddr.IsValid() {
		cfg.GuestAddr = netip.MustParsePrefix("10.99.0.2/24")
	}
	if cfg.GuestMAC == "" {
		cfg.GuestMAC = "52:54:00:12:34:56"
	}
	if cfg.SMP == 0 {
		cfg.SMP = 2
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 1024
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	v = &VM{cfg: cfg, done: make(chan struct{})}
	defer func() {
		if err != nil {
			v.Close()
			v = nil
		}
	}()

	initrd := filepath.Join(cfg.Dir, "initrd.img")
	if err := writeInitrd(initrd, cfg); err != nil {
		return v, err
	}
	if v.ns, err = NewNetns(ctx); err != nil {
		return v, err
	}
	// Interface names are per namespace; the namespace's sequence number
	// in the name only makes captures and logs easier to tell apart.
	v.tap = "tap" + v.ns.Name[strings.LastIndexByte(v.ns.Name, '-')+1:]
	if err := v.ns.AddTap(v.tap, cfg.HostAddr); err != nil {
		return v, err
	}
	if cfg.Capture {
		if v.capture, err = v.ns.StartCapture(ctx, v.tap, filepath.Join(cfg.Dir, "tap.pcap")); err != nil {
			return v, err
		}
	}
	if v.console, err = newConsole(filepath.Join(cfg.Dir, "console.log")); err != nil {
		return v, err
	}
	// A short directory: a unix socket path has at most 107 bytes.
	if v.sockDir, err = os.MkdirTemp("", "iemu"); err != nil {
		return v, err
	}

	appendLine := []string{
		"console=ttyS0",
		// Only errors on the console, so kernel messages rarely cut into
		// the scenario's output; everything is in dmesg.
		"loglevel=4",
		"panic=-1", // with -no-reboot, a panic ends QEMU
		"edd=off",  // no BIOS disk probing (and its unterminated console line)
		"emu.addr=" + cfg.GuestAddr.String(),
		"emu.host=" + cfg.HostAddr.Addr().String(),
	}
	if !cfg.NoAgent {
		appendLine = append(appendLine, "emu.agent=1")
	}
	if cfg.RxeDebug {
		appendLine = append(appendLine, "emu.debug=1")
	}
	appendLine = append(appendLine, cfg.Append...)
	args := []string{
		"-accel", "tcg", "-M", "pc", "-cpu", "max",
		"-smp", strconv.Itoa(cfg.SMP), "-m", strconv.Itoa(cfg.MemoryMB) + "M",
		"-nographic", "-nodefaults", "-no-reboot",
		"-serial", "stdio", // ttyS0: the console
		"-serial", "unix:" + v.agentSock() + ",server=on,wait=off", // ttyS1: the agent
		"-kernel", cfg.Image.Kernel,
		"-initrd", initrd,
		"-append", strings.Join(appendLine, " "),
		"-netdev", "tap,id=n0,ifname=" + v.tap + ",script=no,downscript=no",
		// An empty romfile skips the iPXE option ROM nobody boots from.
		"-device", "virtio-net-pci,netdev=n0,mac=" + cfg.GuestMAC + ",romfile=",
	}
	// QEMU's lifetime is the VM's, not ctx's: ctx ending triggers Close,
	// which kills QEMU in order with everything else.
	cmd := v.ns.Command(context.Background(), "qemu-system-x86_64", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return v, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return v, err
	}
	v.started = time.Now()
	if err := cmd.Start(); err != nil {
		return v, fmt.Errorf("qemu: %w", err)
	}
	v.proc = &HostProc{Cmd: cmd, name: "qemu", out: &syncBuffer{}, done: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); v.console.read(stdout, "") }()
	go func() { defer readers.Done(); v.console.read(stderr, "qemu: ") }()
	go func() {
		// Wait must follow the pipe readers (exec.Cmd's rule).
		readers.Wait()
		v.proc.err = cmd.Wait()
		v.console.add(fmt.Sprintf("%s qemu exited: %v", Marker, v.proc.err))
		v.console.close()
		close(v.proc.done)
	}()
	v.stopWatch = context.AfterFunc(ctx, func() {
		cfg.Logf("guest: context ended (%v): tearing down", context.Cause(ctx))
		v.Close()
	})
	cfg.Logf("guest: qemu pid %d in namespace %s, tap %s %v, guest %v, run dir %s",
		cmd.Process.Pid, v.ns.Name, v.tap, cfg.HostAddr, cfg.GuestAddr, cfg.Dir)
	return v, nil
}

func (v *VM) agentSock() string { return filepath.Join(v.sockDir, "agent.sock") }

// writeInitrd concatenates the base initramfs and a small archive with
// the scenario scripts and files; the kernel unpacks both in order.
func writeInitrd(name string, cfg Config) error {
	var overlay bytes.Buffer
	zw := gzip.NewWriter(&overlay)
	cw := newCPIOWriter(zw)
	validName := regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	for _, s := range cfg.Scripts {
		if !validName.MatchString(s.Name) {
			return fmt.Errorf("guest: script name %q", s.Name)
		}
		if err := cw.File("scenario/"+s.Name+".sh", 0o755, []byte(s.Body)); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(cfg.Files) {
		if err := cw.File(p, 0o755, cfg.Files[p]); err != nil {
			return err
		}
	}
	if err := cw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	base, err := os.Open(cfg.Image.Initrd)
	if err != nil {
		return err
	}
	defer base.Close()
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, base); err != nil {
		out.Close()
		return err
	}
	if _, err := out.Write(overlay.Bytes()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Netns is the namespace of the guest's network: start host-side peers
// with Netns().Start, or open sockets in Go with Netns().Listen.
func (v *VM) Netns() *Netns { return v.ns }

// Tap is the name of the guest's tap inside the namespace.
func (v *VM) Tap() string { return v.tap }

// HostAddr is the host side's address on the guest's link.
func (v *VM) HostAddr() netip.Addr { return v.cfg.HostAddr.Addr() }

// GuestAddr is the guest's eth0 address.
func (v *VM) GuestAddr() netip.Addr { return v.cfg.GuestAddr.Addr() }

// Dir is the run directory (console.log, tap.pcap).
func (v *VM) Dir() string { return v.cfg.Dir }

// Capture is the tap capture started with Config.Capture, or nil.
func (v *VM) Capture() *Capture { return v.capture }

// QEMUPid is the process id of QEMU.
func (v *VM) QEMUPid() int {
	if v.proc == nil || v.proc.Cmd.Process == nil {
		return 0
	}
	return v.proc.Cmd.Process.Pid
}

// Console returns the console so far, escape sequences removed.
func (v *VM) Console() string { return v.console.String() }

// WaitConsole waits for a console line matching re and returns it.
func (v *VM) WaitConsole(ctx context.Context, re *regexp.Regexp) (string, error) {
	return v.console.wait(ctx, re)
}

// WaitMarker waits for the marker line "@@IRDMA-EMU " + text (text is a
// regular expression matched against the rest of the line's start).
func (v *VM) WaitMarker(ctx context.Context, text string) (string, error) {
	return v.console.wait(ctx, regexp.MustCompile(regexp.QuoteMeta(Marker+" ")+text))
}

// WaitReady waits until rxe0 is PORT_ACTIVE and, unless NoAgent, the
// agent is connected. It returns the time since QEMU started.
func (v *VM) WaitReady(ctx context.Context) (time.Duration, error) {
	if _, err := v.WaitMarker(ctx, "ready rxe0 PORT_ACTIVE"); err != nil {
		return 0, err
	}
	ready := time.Since(v.started)
	if v.cfg.NoAgent {
		return ready, nil
	}
	if _, err := v.WaitMarker(ctx, "agent ready"); err != nil {
		return 0, err
	}
	if err := v.connectAgent(ctx); err != nil {
		return 0, err
	}
	return ready, nil
}

func (v *VM) connectAgent(ctx context.Context) error {
	v.agentMu.Lock()
	defer v.agentMu.Unlock()
	if v.agent != nil {
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", v.agentSock())
	if err != nil {
		return fmt.Errorf("agent socket: %w", err)
	}
	v.agent = newAgentConn(conn)
	return nil
}

func (v *VM) agentConn() (*agentConn, error) {
	v.agentMu.Lock()
	defer v.agentMu.Unlock()
	if v.agent == nil {
		return nil, errors.New("guest agent not connected (NoAgent set, or WaitReady not called)")
	}
	return v.agent, nil
}

// Start runs a shell script in the guest in the background (its own
// session; lib.sh sourced) and returns at once; GuestProc.Wait collects
// its exit status and output.
func (v *VM) Start(script string) (*GuestProc, error) {
	a, err := v.agentConn()
	if err != nil {
		return nil, err
	}
	return a.start(script)
}

// Run runs a shell script in the guest and waits for it. A non-zero exit
// status is not an error; a broken channel or ctx's end is.
func (v *VM) Run(ctx context.Context, script string) (Result, error) {
	p, err := v.Start(script)
	if err != nil {
		return Result{RC: -1}, err
	}
	return p.Wait(ctx)
}

// Steps returns the results of the `step` calls of the scenario scripts
// printed so far.
func (v *VM) Steps() []StepResult {
	lines, _, _ := v.console.snapshot()
	return parseSteps(lines)
}

// Step returns the result of the named step.
func (v *VM) Step(name string) (StepResult, bool) {
	for _, s := range v.Steps() {
		if s.Name == name {
			return s, true
		}
	}
	return StepResult{}, false
}

// WaitScenario waits for the named scenario script to finish and returns
// its exit status.
func (v *VM) WaitScenario(ctx context.Context, name string) (int, error) {
	line, err := v.WaitMarker(ctx, "scenario "+regexp.QuoteMeta(name)+" rc=")
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(line[strings.LastIndex(line, "rc=")+3:])
}

// Exited is closed when QEMU has exited.
func (v *VM) Exited() <-chan struct{} { return v.proc.done }

// Done is closed when Close has finished tearing everything down.
func (v *VM) Done() <-chan struct{} { return v.done }

// Shutdown asks the guest to power off (the agent leaves its loop and
// /init powers off) and waits for QEMU to exit. Close still tears down the
// namespace.
func (v *VM) Shutdown(ctx context.Context) error {
	if a, err := v.agentConn(); err == nil {
		_ = a.send("POWEROFF")
	}
	select {
	case <-v.proc.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("guest did not power off: %w", ctx.Err())
	}
}

// Close tears everything down: QEMU killed, the agent channel closed, the
// capture stopped, host-side programs stopped, the namespace and its tap
// deleted. It is idempotent, safe from any goroutine, and waits until the
// teardown is complete.
func (v *VM) Close() error {
	v.closeOnce.Do(func() {
		defer close(v.done)
		if v.stopWatch != nil {
			v.stopWatch()
		}
		var errs []error
		if v.proc != nil {
			select {
			case <-v.proc.done:
			default:
				_ = killGroup(v.proc.Cmd, syscall.SIGKILL)
				select {
				case <-v.proc.done:
				case <-time.After(10 * time.Second):
					errs = append(errs, fmt.Errorf("qemu pid %d did not exit after SIGKILL", v.QEMUPid()))
				}
			}
		}
		v.agentMu.Lock()
		if v.agent != nil {
			v.agent.close()
		}
		v.agentMu.Unlock()
		if v.capture != nil {
			if err := v.capture.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if v.ns != nil {
			if err := v.ns.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if v.sockDir != "" {
			_ = os.RemoveAll(v.sockDir)
		}
		if v.console != nil && v.proc == nil {
			v.console.close()
		}
		v.closeErr = errors.Join(errs...)
	})
	<-v.done
	return v.closeErr
}

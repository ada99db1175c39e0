package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run the emulator: one irdma device on a real network (default: on loopback, 127.0.0.1)",
		run:     runRun,
	})
}

const runUsage = `usage: irdma-emu run [--name NAME] [--netdev IFNAME | --addr IP] [flags]

Starts one emulated irdma function (E810, GEN_2) and serves it until
SIGTERM or SIGINT: RoCEv2 on UDP/4791 on a real interface, a port that
follows the interface's link, the attach socket unmodified rdma-core
programs open through 'irdma-emu exec', the fake sysfs tree, and a
control socket for 'irdma-emu stats' and 'irdma-emu devinfo'.

With no flags the device is irdma0 on 127.0.0.1 (loopback). Any
127.0.0.0/8 address works, so several daemons share lo:

    irdma-emu run --name irdma0 --addr 127.0.0.2
    irdma-emu run --name irdma1 --addr 127.0.0.3

Files, under the run directory ($IRDMA_EMU_RUN_DIR, else /run/irdma-emu,
else a per-user directory when that is not writable):
    <run-dir>/<name>.sock     attach socket (irdma-emu exec/env use it)
    <run-dir>/<name>.ctl      control socket (JSON lines; docs/daemon.md)
    <run-dir>/<name>/sysfs    fake sysfs tree (SYSFS_PATH)
A name whose sockets answer belongs to a running daemon: run refuses it.

On SIGTERM/SIGINT every QP goes to the error state (programs get flush
completions), clients are told, the device is torn down and the files
removed; exit 0. A second signal exits at once (status 1).

Exit status: 0 clean shutdown; 1 runtime failure (cannot start, or
errors while shutting down); 2 usage.

flags:
`

// exitNow ends the process on a second signal; tests replace it.
var exitNow = os.Exit

// addrFlag is an optional IP address flag.
type addrFlag struct{ a netip.Addr }

func (f *addrFlag) String() string {
	if !f.a.IsValid() {
		return ""
	}
	return f.a.String()
}

func (f *addrFlag) Set(s string) error {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not an IP address: %q", s)
	}
	if a.Zone() != "" {
		return fmt.Errorf("give the interface with --netdev, not a zone: %q", s)
	}
	f.a = a.Unmap()
	return nil
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defName := os.Getenv(attach.EnvDevice)
	if defName == "" {
		defName = attach.DefaultDevice
	}
	var (
		cfg       daemon.Config
		addr      addrFlag
		mode      udp.Mode
		faults    link.Faults
		logFormat = fs.String("log-format", "console", "log format: console or json")
		logLevel  = fs.String("log-level", "info", "log level: debug, info, warn or error")
	)
	fs.StringVar(&cfg.Name, "name", defName, "device name (hca_id); names the sockets and the sysfs tree ($"+attach.EnvDevice+")")
	fs.StringVar(&cfg.Netdev, "netdev", "", "interface the port sits on (GID table: all its addresses)")
	fs.Var(&addr, "addr", "the port's one address (GID table: that address); default 127.0.0.1 when --netdev is not given")
	fs.StringVar(&cfg.NetNS, "netns", "", "network namespace of the interface (/var/run/netns/NAME); default the daemon's own")
	fs.StringVar(&cfg.RunDir, "run-dir", "", "run directory (default $"+attach.EnvRunDir+", else "+attach.DefaultRunDir+")")
	fs.StringVar(&cfg.Socket, "socket", "", "attach socket (default <run-dir>/<name>.sock)")
	fs.StringVar(&cfg.Control, "control", "", "control socket (default <run-dir>/<name>.ctl)")
	fs.Var(&mode, "transport", "link transport send=udp|packet,recv=udp|packet, or udp, packet, auto (default auto: udp sending, packet receiving with CAP_NET_RAW), optionally followed by ,gso=off (one datagram per frame, for captures on the interface) and ,wait=poller (receive through the Go poller rather than a thread in ppoll; docs/transport.md)")
	fs.Var(&faults, "fault", "faults injected on the send path, e.g. loss=0.03,reorder=0.05,dup=0.01,corrupt=0.001,seed=7")
	fs.StringVar(&cfg.Pcap, "pcap", "", "record every frame sent and received to `FILE` (pcapng if it ends in .pcapng, else pcap)")
	fs.IntVar(&cfg.Engine.Workers, "workers", 0, "data-plane worker goroutines (default min(GOMAXPROCS, 4))")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "bound on the orderly part of shutdown")
	profName := fs.String("profile", "gen2", "device generation: gen2 (Intel E810, the default) or gen3 (Intel IPU E2100: SRQ, 64-byte CQEs; docs/hw-datapath.md \"Generations\")")
	atomics := fs.Bool("atomics", false, "enable RDMA atomics (FETCH_ADD, CMP_SWAP) on gen2: an E810 has them only when its firmware allows (FTN_FLAGS); gen3 has them")
	fs.DurationVar(&cfg.Engine.Scan.MaxBackoff, "scan-max-backoff", 0, "longest sleep between polls of a doorbell page whose program cannot notify (an old preload or client), against CPU when idle (default 1ms; docs/dataplane.md)")
	fs.DurationVar(&cfg.Engine.Scan.Poll, "poll-window", 0, "how long an idle worker keeps polling doorbells after its last work before it parks and programs must notify (default 0: park once a few yields found nothing; negative: not even those; docs/dataplane.md)")
	pprofAddr := fs.String("pprof", "", "serve Go's net/http/pprof on `ADDR` (host:port, port 0 picks one; printed at start) while the daemon runs (docs/daemon.md \"Profiling\")")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`, for go tool pprof (docs/daemon.md \"Profiling\")")
	nice := fs.Int("nice", defaultNice, "nice value of the daemon's threads, below the spinning programs' so its bursts get a CPU first; below the current value needs CAP_SYS_NICE, and without it the default keeps the current value (docs/daemon.md \"Scheduling\")")
	slice := fs.Duration("slice", defaultSlice, "scheduler slice the daemon's threads ask for (Linux 6.12 on: a shorter slice is picked sooner after a wake-up); 0 keeps the kernel's default (docs/daemon.md \"Scheduling\")")
	fs.Usage = func() {
		fmt.Fprint(stderr, runUsage)
		fs.PrintDefaults()
	}
	// A mistake gets its one-line error and a pointer to -h, not the whole
	// page, so that the error stays on the screen.
	if !wantsHelp(args) {
		fs.Usage = func() { fmt.Fprintln(stderr, "run 'irdma-emu run -h' for the flags") }
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "irdma-emu run: unexpected argument %q (run 'irdma-emu run -h' for the flags)\n", fs.Arg(0))
		return exitUsage
	}
	if err := daemon.CheckName(cfg.Name); err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: --name: %v\n", err)
		return exitUsage
	}
	if cfg.Engine.Scan.MaxBackoff < 0 || cfg.Engine.Scan.MaxBackoff > time.Second {
		fmt.Fprintf(stderr, "irdma-emu run: --scan-max-backoff %v out of range 0..1s\n", cfg.Engine.Scan.MaxBackoff)
		return exitUsage
	}
	if cfg.Engine.Scan.Poll > time.Hour {
		fmt.Fprintf(stderr, "irdma-emu run: --poll-window %v out of range (at most 1h)\n", cfg.Engine.Scan.Poll)
		return exitUsage
	}
	if cfg.Engine.Scan.Poll < 0 {
		cfg.Engine.Scan.Spin = -1 // no yields either: park as soon as a scan finds nothing
	}
	devProf, err := profile.ByName(*profName)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: --profile: %v\n", err)
		return exitUsage
	}
	if *atomics {
		devProf = devProf.WithAtomics(true)
	}
	if *profName != "gen2" || *atomics {
		cfg.Profile = devProf
	}
	if cfg.Engine.Workers < 0 || cfg.Engine.Workers > 256 {
		fmt.Fprintf(stderr, "irdma-emu run: --workers %d out of range 0..256\n", cfg.Engine.Workers)
		return exitUsage
	}
	if err := checkSched(*nice, *slice); err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: %v\n", err)
		return exitUsage
	}
	niceSet := false
	fs.Visit(func(f *flag.Flag) { niceSet = niceSet || f.Name == "nice" })
	if err := checkPprofAddr(*pprofAddr); err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: %v\n", err)
		return exitUsage
	}
	defer func() { _ = log.Sync() }()
	cfg.Addr, cfg.Mode, cfg.Faults, cfg.Logger = addr.a, mode, faults, log

	// Before the device's goroutines start: the threads made for them
	// inherit the attributes.
	if err := applySched(*nice, *slice); err != nil {
		if !errors.Is(err, unix.EPERM) || niceSet {
			fmt.Fprintf(stderr, "irdma-emu run: --nice %d --slice %v: %v\n", *nice, *slice, err)
			return exitFail
		}
		// The default nice needs CAP_SYS_NICE: keep the current one.
		cur := currentNice()
		log.Info("scheduling: nice below the current value not permitted (no CAP_SYS_NICE); keeping it", zap.Int("nice", cur))
		*nice = cur
		if err := applySched(cur, *slice); err != nil {
			fmt.Fprintf(stderr, "irdma-emu run: --slice %v: %v\n", *slice, err)
			return exitFail
		}
	}
	log.Debug("scheduling", zap.Int("nice", *nice), zap.Duration("slice", *slice))

	// Catch the signals before the device exists, so that one arriving
	// during start-up still shuts down in order.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	prof, err := startProfiling(*pprofAddr, *cpuProfile, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: %v\n", err)
		return exitFail
	}
	defer func() {
		if err := prof.stop(); err != nil {
			fmt.Fprintf(stderr, "irdma-emu run: profiling: %v\n", err)
		}
	}()

	d, err := daemon.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "irdma-emu: %s up on %s (control %s)\n", cfg.Name, d.Port().Info().Name, d.Paths().Control)

	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-d.Done():
		// Closed from elsewhere (not by this command today); report it.
	}
	if sig != nil {
		log.Info("signal: shutting down (a second signal exits at once)", zap.String("signal", sig.String()))
		go func() {
			s := <-sigs
			log.Warn("second signal: exiting without cleanup", zap.String("signal", s.String()))
			_ = log.Sync()
			exitNow(exitFail)
		}()
	}
	if err := d.Close(); err != nil {
		fmt.Fprintf(stderr, "irdma-emu run: shutdown: %v\n", err)
		return exitFail
	}
	return exitOK
}

// newLogger builds the daemon's zap logger on w.
func newLogger(w io.Writer, format, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, fmt.Errorf("--log-level %q: debug, info, warn or error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(ec)
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: console or json", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}

// wantsHelp reports whether the arguments ask for help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "--h":
			return true
		case "--":
			return false
		}
	}
	return false
}

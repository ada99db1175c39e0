package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/client"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

func init() {
	register(&command{
		name:    "perf",
		summary: "bandwidth and latency tests in the manner of perftest (perf write|read|send|atomic)",
		run:     runPerf,
	})
}

const perfUsage = `usage: irdma-emu perf write|read|send|atomic [flags]          server
       irdma-emu perf write|read|send|atomic [flags] HOST     client

Bandwidth (default) or latency (--lat) of RDMA WRITE, RDMA READ, SEND/RECV
or atomics between two emulated devices, in the manner of perftest's
ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw and their _lat variants:
the same defaults (65536 bytes and 5000 iterations for bandwidth, 2 bytes
and 1000 iterations for latency, TX depth 128, CQ moderation 100, -a from 2
bytes to 8 MiB), the same result tables. The client decides the test: the
server takes size, iterations, QPs and modes from the client, and needs
only the verb, its device and the TCP port. The out-of-band exchange is
this tool's own (JSON lines on TCP): perf talks to perf; run perftest
itself through 'irdma-emu exec' to face real perftest.

Each result is followed by the modelled E810 figures: the same scenario
(verb, size, QPs, path MTU, depths, moderation, inlining, bidirectional)
run through the pipeline model of 'irdma-emu sim' — two modelled E810s in
virtual time running the real data path (docs/timing.md, "The pipeline
model") — with the busiest resource, next to the wall-clock figures of
the emulator itself.

flags:
`

// perfParams are what the client asks the server for.
type perfParams struct {
	Verb    string `json:"verb"`
	Lat     bool   `json:"lat"`
	Bidir   bool   `json:"bidir"`
	QPs     int    `json:"qps"`
	Sizes   []int  `json:"sizes"`
	Iters   int    `json:"iters"`
	TxDepth int    `json:"tx_depth"`
	RxDepth int    `json:"rx_depth"`
	CQMod   int    `json:"cq_mod"`
	MTU     int    `json:"mtu"`
	Outs    int    `json:"outs"`
	Atomic  string `json:"atomic"`
	Check   bool   `json:"check"`
	Inline  int    `json:"inline"`
	Timeout int    `json:"qp_timeout"`
	Seed    uint64 `json:"seed"`
}

// perfOptions are the command line.
type perfOptions struct {
	perfParams
	dev      string
	ibPort   int
	port     int
	gidx     int
	all      bool
	size     int
	sizeSet  bool
	itersSet bool
	maxSize  int
	gbits    bool
	control  string
	noModel  bool
	timeout  time.Duration
	server   string
	stdout   io.Writer
	stderr   io.Writer
}

const (
	perfMaxSize    = 8 << 20 // perftest's MAX_SIZE
	perfAtomicSize = 8
	perfMaxInline  = 101 // the device's max_hw_inline
)

func runPerf(args []string, stdout, stderr io.Writer) int {
	o := &perfOptions{stdout: stdout, stderr: stderr}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(stdout, perfUsage)
			return exitOK
		}
		fmt.Fprint(stderr, perfUsage)
		return exitUsage
	}
	o.Verb = args[0]
	switch o.Verb {
	case "write", "read", "send", "atomic":
	default:
		fmt.Fprintf(stderr, "irdma-emu perf: unknown test %q (write, read, send, atomic)\n", o.Verb)
		return exitUsage
	}
	fs := flag.NewFlagSet("perf "+o.Verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv(attach.EnvDevice)
	fs.StringVar(&o.dev, "d", def, "device name or attach socket path (default $"+attach.EnvDevice+" or "+attach.DefaultDevice+")")
	fs.StringVar(&o.dev, "ib-dev", def, "same as -d")
	intVar(fs, &o.ibPort, nil, 1, "device port", "i", "ib-port")
	intVar(fs, &o.port, nil, 18515, "TCP port of the exchange", "p", "port")
	intVar(fs, &o.gidx, nil, -1, "GID `index` (default: the port's first address GID)", "x", "gid-index")
	intVar(fs, &o.size, &o.sizeSet, 0, "message `size` (default 65536; 2 with --lat; 8 for atomic)", "s", "size")
	intVar(fs, &o.Iters, &o.itersSet, 0, "iterations (default 5000; 1000 with --lat)", "n", "iters")
	fs.BoolVar(&o.all, "a", false, "run sizes from 2 to 2^23 bytes (up to --max-size)")
	fs.BoolVar(&o.all, "all", false, "same as -a")
	intVar(fs, &o.maxSize, nil, perfMaxSize, "largest size of -a", "max-size")
	fs.BoolVar(&o.Bidir, "b", false, "bidirectional: both sides send (bandwidth)")
	fs.BoolVar(&o.Bidir, "bidirectional", false, "same as -b")
	intVar(fs, &o.QPs, nil, 1, "number of QPs", "q", "qp")
	intVar(fs, &o.TxDepth, nil, 0, "send queue depth (default 128; 1 with --lat)", "t", "tx-depth")
	intVar(fs, &o.RxDepth, nil, 512, "receive queue depth (send)", "r", "rx-depth")
	intVar(fs, &o.CQMod, nil, 100, "request a completion every N sends (bandwidth)", "Q", "cq-mod")
	intVar(fs, &o.MTU, nil, 0, "path MTU (default the port's active MTU)", "m", "mtu")
	intVar(fs, &o.Outs, nil, 16, "outstanding READs/atomics (max_rd_atomic)", "o", "outs")
	fs.StringVar(&o.Atomic, "A", "FETCH_AND_ADD", "atomic type: FETCH_AND_ADD or CMP_AND_SWAP")
	fs.StringVar(&o.Atomic, "atomic_type", "FETCH_AND_ADD", "same as -A")
	intVar(fs, &o.Inline, nil, -1, "max inline size (default: 101 for latency tests up to it, else 0)", "I", "inline_size")
	intVar(fs, &o.Timeout, nil, 14, "QP timeout: the retransmission timer is 4.096 µs × 2^`exp`", "u", "qp-timeout")
	fs.BoolVar(&o.Lat, "lat", false, "latency test (ib_*_lat)")
	fs.BoolVar(&o.Check, "check", false, "check every payload byte (and atomic results) after each size")
	fs.BoolVar(&o.gbits, "report_gbits", false, "report bandwidth in Gb/s")
	fs.StringVar(&o.control, "control", "", "the local daemon's control socket (default beside the attach socket)")
	fs.BoolVar(&o.noModel, "no-model", false, "do not print the modelled E810 figures")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (0: never)")
	fs.Usage = func() {
		fmt.Fprint(stderr, perfUsage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	switch {
	case len(pos) == 1:
		o.server = pos[0]
	case len(pos) > 1:
		fs.Usage()
		return exitUsage
	}
	if err := o.fill(); err == nil {
		err = o.perfParams.check()
		if err != nil {
			fmt.Fprintf(stderr, "irdma-emu perf: %v\n", err)
			return exitUsage
		}
	} else {
		fmt.Fprintf(stderr, "irdma-emu perf: %v\n", err)
		return exitUsage
	}
	if o.timeout > 0 {
		timer := time.AfterFunc(o.timeout, func() {
			fmt.Fprintf(stderr, "irdma-emu perf: gave up after %v\n", o.timeout)
			os.Exit(exitFail)
		})
		defer timer.Stop()
	}
	if err := o.run(); err != nil {
		fmt.Fprintf(stderr, "irdma-emu perf: %v\n", err)
		return exitFail
	}
	return exitOK
}

// fill applies perftest's defaults and checks ranges.
func (o *perfOptions) fill() error {
	if !o.itersSet {
		o.Iters = 5000
		if o.Lat {
			o.Iters = 1000
		}
	}
	if o.TxDepth == 0 {
		o.TxDepth = 128
		if o.Lat {
			o.TxDepth = 1
		}
	}
	switch {
	case o.Iters < 5 || o.Iters > 100_000_000:
		return errors.New(" Iterations should be between 5 and 100000000")
	case o.QPs < 1 || o.QPs > 64:
		return errors.New(" number of QPs should be between 1 and 64")
	case o.TxDepth < 1 || o.TxDepth > 4096:
		return errors.New(" TX depth should be between 1 and 4096")
	case o.RxDepth < 1 || o.RxDepth > 16384:
		return errors.New(" RX depth should be between 1 and 16384")
	case o.CQMod < 1 || o.CQMod > 1024:
		return errors.New(" CQ moderation should be between 1 and 1024")
	case o.Outs < 1 || o.Outs > 255:
		return errors.New(" outstanding reads should be between 1 and 255")
	case o.port < 0 || o.port > 65535 || o.ibPort < 1 || o.ibPort > 255 || o.gidx < -1 || o.gidx > 255:
		return errors.New("bad port or GID index")
	case o.MTU != 0 && client.MTUFromBytes(o.MTU) == 0:
		return fmt.Errorf("bad MTU %d (256, 512, 1024, 2048 or 4096)", o.MTU)
	case o.Atomic != "FETCH_AND_ADD" && o.Atomic != "CMP_AND_SWAP":
		return fmt.Errorf("bad atomic type %q (FETCH_AND_ADD, CMP_AND_SWAP)", o.Atomic)
	case o.Inline > perfMaxInline:
		return fmt.Errorf("inline size %d over the device's %d", o.Inline, perfMaxInline)
	case o.Timeout < 0 || o.Timeout > 31:
		return errors.New(" QP timeout should be between 0 and 31")
	case o.maxSize < 2 || o.maxSize > 1<<30:
		return errors.New("--max-size must be 2 .. 2^30")
	}
	if o.Bidir && o.Lat {
		return errors.New("--bidirectional is a bandwidth mode")
	}
	if o.Verb == "atomic" && o.Bidir {
		return errors.New("--bidirectional is for write, read and send")
	}
	// perftest lowers the moderation to the depth (a batch must fit).
	o.CQMod = min(o.CQMod, o.TxDepth)
	switch {
	case o.Verb == "atomic":
		if o.sizeSet && o.size != perfAtomicSize {
			return errors.New("atomic operations are 8 bytes")
		}
		o.Sizes = []int{perfAtomicSize}
	case o.all:
		for s := 2; s <= min(o.maxSize, perfMaxSize); s *= 2 {
			o.Sizes = append(o.Sizes, s)
		}
	default:
		s := o.size
		if !o.sizeSet {
			s = 65536
			if o.Lat {
				s = 2
			}
		}
		if s < 1 || s > 1<<30 {
			return fmt.Errorf("size %d out of range", s)
		}
		o.Sizes = []int{s}
	}
	if o.Inline < 0 {
		o.Inline = 0
		if o.Lat && (o.Verb == "write" || o.Verb == "send") {
			o.Inline = perfMaxInline
		}
	}
	o.Seed = rand.Uint64()
	return nil
}

// qpInfo is one QP's end of the exchange.
type qpInfo struct {
	QPN  uint32 `json:"qpn"`
	PSN  uint32 `json:"psn"`
	GID  string `json:"gid"`
	VA   uint64 `json:"va"`
	RKey uint32 `json:"rkey"`
	Len  uint64 `json:"len"`
}

// perfMsg is one message of the exchange.
type perfMsg struct {
	Op     string       `json:"op"`
	Params *perfParams  `json:"params,omitempty"`
	QPs    []qpInfo     `json:"qps,omitempty"`
	Size   int          `json:"size,omitempty"`
	Result *sideResult  `json:"result,omitempty"`
	Stages *stageDeltas `json:"stages,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// perfWire is the TCP exchange: JSON lines.
type perfWire struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

func newPerfWire(c net.Conn) *perfWire {
	return &perfWire{c: c, r: bufio.NewReaderSize(c, 64<<10), enc: json.NewEncoder(c)}
}

func (w *perfWire) send(m perfMsg) error { return w.enc.Encode(m) }

func (w *perfWire) recv(op string) (perfMsg, error) {
	line, err := w.r.ReadBytes('\n')
	if err != nil {
		return perfMsg{}, fmt.Errorf("exchange: %w", err)
	}
	var m perfMsg
	if err := json.Unmarshal(line, &m); err != nil {
		return perfMsg{}, fmt.Errorf("exchange: bad message: %w", err)
	}
	if m.Op == "error" {
		return m, fmt.Errorf("peer: %s", m.Error)
	}
	if op != "" && m.Op != op {
		return m, fmt.Errorf("exchange: got %q, want %q", m.Op, op)
	}
	return m, nil
}

func (o *perfOptions) run() error {
	ctx, err := client.Open(o.dev)
	if err != nil {
		return fmt.Errorf("Couldn't get context for the device: %v", err)
	}
	defer ctx.Close()
	var w *perfWire
	if o.server != "" {
		conn, err := dialRetry(net.JoinHostPort(o.server, strconv.Itoa(o.port)), 10*time.Second)
		if err != nil {
			return fmt.Errorf("Couldn't connect to %s:%d: %v", o.server, o.port, err)
		}
		defer conn.Close()
		w = newPerfWire(conn)
		if err := w.send(perfMsg{Op: "hello", Params: &o.perfParams}); err != nil {
			return err
		}
	} else {
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(o.port)))
		if err != nil {
			return fmt.Errorf("Couldn't listen to port %d: %v", o.port, err)
		}
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return err
		}
		defer conn.Close()
		w = newPerfWire(conn)
		m, err := w.recv("hello")
		if err != nil {
			return err
		}
		if m.Params == nil || m.Params.Verb != o.Verb {
			got := "?"
			if m.Params != nil {
				got = m.Params.Verb
			}
			w.send(perfMsg{Op: "error", Error: fmt.Sprintf("this server runs %s, the client asked for %s", o.Verb, got)})
			return fmt.Errorf("the client asked for %s, this server runs %s", got, o.Verb)
		}
		if err := m.Params.check(); err != nil {
			w.send(perfMsg{Op: "error", Error: err.Error()})
			return err
		}
		o.perfParams = *m.Params
	}
	s := &perfSession{o: o, ctx: ctx, w: w}
	err = s.run()
	if err != nil && o.server == "" {
		w.send(perfMsg{Op: "error", Error: err.Error()})
	}
	s.close()
	return err
}

// check validates parameters that came from the network.
func (p *perfParams) check() error {
	if p.QPs < 1 || p.QPs > 64 || p.Iters < 1 || p.Iters > 100_000_000 || p.TxDepth < 1 || p.TxDepth > 4096 ||
		p.RxDepth < 1 || p.RxDepth > 16384 || p.CQMod < 1 || p.CQMod > p.TxDepth || p.Outs < 1 || p.Outs > 255 ||
		len(p.Sizes) == 0 || len(p.Sizes) > 64 || p.Inline < 0 || p.Inline > perfMaxInline || p.Timeout < 0 || p.Timeout > 31 ||
		(p.MTU != 0 && client.MTUFromBytes(p.MTU) == 0) {
		return errors.New("bad parameters from the client")
	}
	biggest := 0
	for _, s := range p.Sizes {
		if s < 1 || s > 1<<30 {
			return fmt.Errorf("bad size %d from the client", s)
		}
		biggest = max(biggest, s)
	}
	// Each QP has two buffers of the largest size.
	if uint64(p.QPs)*2*uint64(biggest) > perfMaxMemory {
		return fmt.Errorf("%d QPs of %d-byte messages need more than %d bytes", p.QPs, biggest, uint64(perfMaxMemory))
	}
	return nil
}

// perfMaxMemory bounds the buffers one side allocates.
const perfMaxMemory = 4 << 30

func dialRetry(addr string, d time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// controlPath is the local daemon's control socket: --control, else beside
// the attach socket (<run-dir>/<device>.ctl).
func (o *perfOptions) controlPath(ctx *client.Context) string {
	if o.control != "" {
		return o.control
	}
	if strings.ContainsRune(o.dev, '/') {
		return daemon.ControlPath(filepath.Dir(o.dev), ctx.Device())
	}
	if s := os.Getenv(attach.EnvSocket); o.dev == "" && s != "" {
		return daemon.ControlPath(filepath.Dir(s), ctx.Device())
	}
	return daemon.ControlPath(daemon.RunDir(), ctx.Device())
}

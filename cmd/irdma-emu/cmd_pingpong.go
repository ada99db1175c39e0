package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/client"
)

func init() {
	register(&command{
		name:    "pingpong",
		summary: "RC (or UD) ping-pong test, wire-compatible with ibv_rc_pingpong / ibv_ud_pingpong",
		run:     runPingpong,
	})
}

const pingpongUsage = `usage: irdma-emu pingpong [flags]          start a server and wait for connection
       irdma-emu pingpong [flags] HOST     connect to the server at HOST

The ping-pong of rdma-core's ibv_rc_pingpong (ibv_ud_pingpong with --ud) on
the emulated device, through the Go client package: the same out-of-band
TCP exchange (port 18515, the 52-byte "LID:QPN:PSN:GID" record, the server
connects its QP before it replies, the client ends with "done"), the same
QP attributes and the same summary lines, so either side can be the
unmodified rdma-core program on another host.

Differences: -g defaults to the port's first address GID (ibv_rc_pingpong
sends no GRH without -g, which RoCE cannot carry); -c checks every byte of
every message received (the pattern ibv_rc_pingpong -c sends: 0x7b with a
zero at each 4 KiB page start) and exits 1 on a mismatch, besides printing
"invalid data in page N" as the server of ibv_rc_pingpong does; --timeout
bounds the whole run.

flags:
`

// ppOptions are ibv_rc_pingpong's options and ours.
type ppOptions struct {
	port     int
	dev      string
	ibPort   int
	size     int
	sizeSet  bool
	mtu      int
	rxDepth  int
	iters    int
	sl       int
	events   bool
	gidx     int
	check    bool
	ts       bool
	odp      bool
	ud       bool
	tos      int
	timeout  time.Duration
	server   string
	pageSize int
	stdout   io.Writer
	stderr   io.Writer
}

const (
	ppRecvWRID = 1
	ppSendWRID = 2
	ppUDQKey   = 0x11111111 // ibv_ud_pingpong's Q_Key
	ppGRHSize  = 40         // room for the GRH a UD receive starts with
	ppFill     = 0x7b       // ibv_rc_pingpong's buffer fill
)

// parseInterspersed parses flags before and after positional arguments,
// as getopt_long does, so "HOST -g 1" works like "-g 1 HOST".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// intFlag is an integer flag accepting C's strtol base-0 forms (0x…, 0…).
type intFlag struct {
	v   *int
	set *bool
}

func (f intFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}

func (f intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return fmt.Errorf("not a number: %q", s)
	}
	*f.v = int(n)
	if f.set != nil {
		*f.set = true
	}
	return nil
}

func intVar(fs *flag.FlagSet, v *int, set *bool, def int, usage string, names ...string) {
	*v = def
	for _, n := range names {
		fs.Var(intFlag{v, set}, n, usage)
	}
}

func runPingpong(args []string, stdout, stderr io.Writer) int {
	o := &ppOptions{stdout: stdout, stderr: stderr, pageSize: os.Getpagesize()}
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	fs.SetOutput(stderr)
	intVar(fs, &o.port, nil, 18515, "listen on/connect to TCP port `port`", "p", "port")
	def := os.Getenv(attach.EnvDevice)
	fs.StringVar(&o.dev, "d", def, "use device `dev` (a name, or an attach socket path; default $"+attach.EnvDevice+" or "+attach.DefaultDevice+")")
	fs.StringVar(&o.dev, "ib-dev", def, "same as -d")
	intVar(fs, &o.ibPort, nil, 1, "use `port` of the device", "i", "ib-port")
	intVar(fs, &o.size, &o.sizeSet, 4096, "`size` of message to exchange (default 4096, 2048 with --ud)", "s", "size")
	intVar(fs, &o.mtu, nil, 1024, "path `MTU` (RC)", "m", "mtu")
	intVar(fs, &o.rxDepth, nil, 500, "number of receives to post at a time", "r", "rx-depth")
	intVar(fs, &o.iters, nil, 1000, "number of exchanges", "n", "iters")
	intVar(fs, &o.sl, nil, 0, "service level value", "l", "sl")
	fs.BoolVar(&o.events, "e", false, "sleep on CQ events (default poll)")
	fs.BoolVar(&o.events, "events", false, "same as -e")
	intVar(fs, &o.gidx, nil, -1, "local port gid `index` (default: the first address GID)", "g", "gid-idx")
	fs.BoolVar(&o.check, "c", false, "validate received buffers")
	fs.BoolVar(&o.check, "chk", false, "same as -c")
	fs.BoolVar(&o.ts, "t", false, "get CQE with timestamp (not supported by irdma)")
	fs.BoolVar(&o.ts, "ts", false, "same as -t")
	fs.BoolVar(&o.odp, "o", false, "use on demand paging (not supported by irdma)")
	fs.BoolVar(&o.odp, "odp", false, "same as -o")
	fs.BoolVar(&o.ud, "ud", false, "UD ping-pong (ibv_ud_pingpong)")
	intVar(fs, &o.tos, nil, 0, "traffic class of the GRH", "tos")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long (0: never)")
	fs.Usage = func() {
		fmt.Fprint(stderr, pingpongUsage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
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
	if o.port < 0 || o.port > 65535 || o.ibPort < 1 || o.ibPort > 255 || o.iters < 1 || o.rxDepth < 1 ||
		o.size < 1 || o.size > 1<<30 || o.sl < 0 || o.sl > 15 || o.tos < 0 || o.tos > 255 || o.gidx < -1 || o.gidx > 255 {
		fs.Usage()
		return exitUsage
	}
	if !o.ud && client.MTUFromBytes(o.mtu) == 0 {
		fs.Usage()
		return exitUsage
	}
	if o.ud && !o.sizeSet {
		o.size = 2048
	}
	if o.timeout > 0 {
		// The verbs waits here poll in bounded slices; a deadline on the
		// whole run turns a dead peer into an error exit.
		timer := time.AfterFunc(o.timeout, func() {
			fmt.Fprintf(stderr, "irdma-emu pingpong: gave up after %v\n", o.timeout)
			os.Exit(exitFail)
		})
		defer timer.Stop()
	}
	if err := o.run(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	return exitOK
}

// ppDest is struct pingpong_dest.
type ppDest struct {
	lid, qpn, psn int
	gid           client.GID
}

// record is the 52-byte exchange record: "%04x:%06x:%06x:" and the GID as 32
// hex digits in wire order, NUL-terminated.
func (d ppDest) record() []byte {
	s := fmt.Sprintf("%04x:%06x:%06x:%x", d.lid, d.qpn, d.psn, d.gid[:])
	b := make([]byte, 52)
	copy(b, s)
	return b
}

// parseRecord reads a record as sscanf("%x:%x:%x:%s") and wire_gid_to_gid
// do.
func parseRecord(b []byte) (ppDest, error) {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 || len(f[3]) < 32 {
		return ppDest{}, fmt.Errorf("bad address record %q", s)
	}
	var d ppDest
	for i, p := range []*int{&d.lid, &d.qpn, &d.psn} {
		v, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil {
			return ppDest{}, fmt.Errorf("bad address record %q", s)
		}
		*p = int(v)
	}
	for i := 0; i < 16; i++ {
		v, err := strconv.ParseUint(f[3][2*i:2*i+2], 16, 8)
		if err != nil {
			return ppDest{}, fmt.Errorf("bad GID in address record %q", s)
		}
		d.gid[i] = byte(v)
	}
	return d, nil
}

// ppCtx is struct pingpong_context.
type ppCtx struct {
	o         *ppOptions
	ctx       *client.Context
	ch        *client.CompChannel
	pd        *client.PD
	mr        *client.MR
	buf       []byte
	cq        *client.CQ
	qp        *client.QP
	ah        *client.AH
	sendFlags client.SendFlags
	pending   int
	badMsgs   int
	badPages  map[int]bool
}

func (o *ppOptions) run() error {
	if o.ts {
		return errors.New("The device isn't completion timestamp capable")
	}
	if o.odp {
		return errors.New("The device isn't ODP capable or does not support RC send and receive with ODP")
	}
	dev := o.dev
	ctx, err := client.Open(dev)
	if err != nil {
		name := dev
		if name == "" {
			name = attach.DefaultDevice
		}
		return fmt.Errorf("Couldn't get context for %s: %v", name, err)
	}
	defer ctx.Close()
	p := &ppCtx{o: o, ctx: ctx, sendFlags: client.SendSignaled, badPages: map[int]bool{}}
	if err := p.init(); err != nil {
		return err
	}
	defer p.close()
	return p.pingpong()
}

func (p *ppCtx) init() error {
	o := p.o
	var err error
	bufLen := o.size
	if o.ud {
		bufLen += ppGRHSize
	}
	if p.buf, err = p.ctx.AllocBuffer(bufLen); err != nil {
		return fmt.Errorf("Couldn't allocate work buf: %v", err)
	}
	for i := range p.buf {
		p.buf[i] = ppFill
	}
	if o.ud {
		pa, err := p.ctx.QueryPort(uint8(o.ibPort))
		if err != nil {
			return fmt.Errorf("Unable to query port info for port %d: %v", o.ibPort, err)
		}
		if mtu := pa.ActiveMTU.Bytes(); o.size > mtu {
			return fmt.Errorf("Requested size larger than port MTU (%d)", mtu)
		}
	}
	if o.events {
		if p.ch, err = p.ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %v", err)
		}
	}
	if p.pd, err = p.ctx.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %v", err)
	}
	if p.mr, err = p.pd.RegMR(p.buf, client.AccessLocalWrite); err != nil {
		return fmt.Errorf("Couldn't register MR: %v", err)
	}
	if p.cq, err = p.ctx.CreateCQ(o.rxDepth+1, p.ch, 0); err != nil {
		return fmt.Errorf("Couldn't create CQ: %v", err)
	}
	typ := client.QPTypeRC
	if o.ud {
		typ = client.QPTypeUD
	}
	p.qp, err = p.pd.CreateQP(client.QPInitAttr{
		SendCQ: p.cq, RecvCQ: p.cq, Type: typ,
		Cap: client.QPCapabilities{MaxSendWR: 1, MaxRecvWR: uint32(o.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		return fmt.Errorf("Couldn't create QP: %v", err)
	}
	if a, err := p.qp.Query(client.AttrCap); err == nil && int(a.Cap.MaxInlineData) >= o.size {
		p.sendFlags |= client.SendInline
	}
	init := &client.QPAttr{State: client.QPSInit, PKeyIndex: 0, PortNum: uint8(o.ibPort)}
	mask := client.AttrState | client.AttrPKeyIndex | client.AttrPort
	if o.ud {
		init.QKey = ppUDQKey
		mask |= client.AttrQKey
	} else {
		mask |= client.AttrAccessFlags
	}
	if err := p.qp.Modify(init, mask); err != nil {
		return fmt.Errorf("Failed to modify QP to INIT: %v", err)
	}
	return nil
}

func (p *ppCtx) close() {
	if p.qp != nil {
		if err := p.qp.Destroy(); err != nil {
			fmt.Fprintln(p.o.stderr, "Couldn't destroy QP")
		}
	}
	if p.cq != nil {
		if err := p.cq.Destroy(); err != nil {
			fmt.Fprintln(p.o.stderr, "Couldn't destroy CQ")
		}
	}
	if p.mr != nil {
		if err := p.mr.Dereg(); err != nil {
			fmt.Fprintln(p.o.stderr, "Couldn't deregister MR")
		}
	}
	if p.ah != nil {
		if err := p.ah.Destroy(); err != nil {
			fmt.Fprintln(p.o.stderr, "Couldn't destroy AH")
		}
	}
	if p.pd != nil {
		if err := p.pd.Dealloc(); err != nil {
			fmt.Fprintln(p.o.stderr, "Couldn't deallocate PD")
		}
	}
	if p.ch != nil {
		p.ch.Destroy()
	}
}

// connect is pp_connect_ctx.
func (p *ppCtx) connect(myPSN int, dest ppDest, sgid int) error {
	o := p.o
	ah := client.AHAttr{DLID: uint16(dest.lid), SL: uint8(o.sl), PortNum: uint8(o.ibPort)}
	if dest.gid.InterfaceID() != 0 {
		ah.IsGlobal = true
		ah.HopLimit = 1
		ah.DGID = dest.gid
		ah.SGIDIndex = uint8(sgid)
		ah.TrafficClass = uint8(o.tos)
	}
	if o.ud {
		if err := p.qp.Modify(&client.QPAttr{State: client.QPSRTR}, client.AttrState); err != nil {
			return fmt.Errorf("Failed to modify QP to RTR: %v", err)
		}
		if err := p.qp.Modify(&client.QPAttr{State: client.QPSRTS, SQPSN: uint32(myPSN)}, client.AttrState|client.AttrSQPSN); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %v", err)
		}
		var err error
		if p.ah, err = p.pd.CreateAH(ah); err != nil {
			return fmt.Errorf("Failed to create AH: %v", err)
		}
		return nil
	}
	attr := &client.QPAttr{
		State: client.QPSRTR, PathMTU: client.MTUFromBytes(o.mtu), DestQPN: uint32(dest.qpn),
		RQPSN: uint32(dest.psn), MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: ah,
	}
	if err := p.qp.Modify(attr, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|
		client.AttrRQPSN|client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
		return fmt.Errorf("Failed to modify QP to RTR: %v", err)
	}
	attr.State = client.QPSRTS
	attr.Timeout, attr.RetryCnt, attr.RNRRetry = 14, 7, 7
	attr.SQPSN = uint32(myPSN)
	attr.MaxRdAtomic = 1
	if err := p.qp.Modify(attr, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
		client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("Failed to modify QP to RTS: %v", err)
	}
	return nil
}

func (p *ppCtx) postRecv(n int) int {
	o := p.o
	l := o.size
	if o.ud {
		l += ppGRHSize
	}
	wr := []client.RecvWR{{WrID: ppRecvWRID, SGList: []client.SGE{p.mr.SGE(0, l)}}}
	for i := 0; i < n; i++ {
		if _, err := p.qp.PostRecv(wr); err != nil {
			return i
		}
	}
	return n
}

func (p *ppCtx) postSend(remoteQPN int) error {
	off := 0
	if p.o.ud {
		off = ppGRHSize
	}
	wr := client.SendWR{WrID: ppSendWRID, Opcode: client.WRSend, Flags: p.sendFlags, SGList: []client.SGE{p.mr.SGE(off, p.o.size)}}
	if p.o.ud {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = p.ah, uint32(remoteQPN), ppUDQKey
	}
	_, err := p.qp.PostSend([]client.SendWR{wr})
	return err
}

// localGID picks the source GID: -g, or the port's first address GID.
func (p *ppCtx) localGID() (int, client.GID, error) {
	return pickGID(p.ctx, uint8(p.o.ibPort), p.o.gidx)
}

// pickGID returns GID index gidx of the port, or with gidx < 0 the port's
// first address GID: the first non-zero entry after the link-local
// default, an IPv4-mapped one if there is any (what -g 1 usually names).
func pickGID(ctx *client.Context, port uint8, gidx int) (int, client.GID, error) {
	if gidx >= 0 {
		g, err := ctx.QueryGID(port, gidx)
		if err != nil {
			return 0, g, fmt.Errorf("can't read sgid of index %d", gidx)
		}
		return gidx, g, nil
	}
	pa, err := ctx.QueryPort(port)
	n := 32
	if err == nil && pa.GIDTableLen > 0 {
		n = int(pa.GIDTableLen)
	}
	first := -1
	var firstGID client.GID
	for i := 1; i < n; i++ {
		g, err := ctx.QueryGID(port, i)
		if err != nil || g.IsZero() {
			continue
		}
		if first < 0 {
			first, firstGID = i, g
		}
		if netip.AddrFrom16(g).Is4In6() {
			return i, g, nil
		}
	}
	if first < 0 {
		return 0, client.GID{}, errors.New("no address GID on the port: give -g")
	}
	return first, firstGID, nil
}

func (p *ppCtx) pingpong() error {
	o := p.o
	routs := p.postRecv(o.rxDepth)
	if routs < o.rxDepth {
		return fmt.Errorf("Couldn't post receive (%d)", routs)
	}
	if o.events {
		if err := p.cq.ReqNotify(false); err != nil {
			return errors.New("Couldn't request CQ notification")
		}
	}
	pa, err := p.ctx.QueryPort(uint8(o.ibPort))
	if err != nil {
		return errors.New("Couldn't get port info")
	}
	my := ppDest{lid: int(pa.LID)}
	if pa.LinkLayer != client.LinkLayerEthernet && my.lid == 0 {
		return errors.New("Couldn't get local LID")
	}
	gidx, gid, err := p.localGID()
	if err != nil {
		return err
	}
	my.gid = gid
	my.qpn = int(p.qp.QPN())
	my.psn = int(rand.Uint32() & 0xffffff)
	sep := ","
	if o.ud {
		sep = ":"
	}
	fmt.Fprintf(o.stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", my.lid, my.qpn, my.psn, sep, my.gid)

	var rem ppDest
	if o.server != "" {
		rem, err = p.clientExchange(my)
	} else {
		rem, err = p.serverExchange(my, gidx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", rem.lid, rem.qpn, rem.psn, rem.gid)
	if o.server != "" {
		if err := p.connect(my.psn, rem, gidx); err != nil {
			return err
		}
	}

	p.pending = ppRecvWRID
	if o.server != "" {
		if o.check {
			p.fillPattern()
		}
		if err := p.postSend(rem.qpn); err != nil {
			return errors.New("Couldn't post send")
		}
		p.pending |= ppSendWRID
	}
	start := time.Now()
	rcnt, scnt := 0, 0
	var wc [2]client.WorkCompletion
	for rcnt < o.iters || scnt < o.iters {
		if o.events {
			if err := p.cq.WaitEvent(-1); err != nil {
				return fmt.Errorf("Failed to get cq_event: %v", err)
			}
			if err := p.cq.ReqNotify(false); err != nil {
				return errors.New("Couldn't request CQ notification")
			}
		}
		var ne int
		if o.events {
			ne, err = p.cq.Poll(wc[:]) // the event said there is one
		} else {
			ne, err = waitCQ(p.cq, wc[:], time.Time{}, "")
		}
		if err != nil {
			return fmt.Errorf("poll CQ failed %v", err)
		}
		for i := 0; i < ne; i++ {
			w := &wc[i]
			if w.Status != client.WCSuccess {
				return fmt.Errorf("Failed status %s (%d) for wr_id %d", w.Status, w.Status, int(w.WrID))
			}
			switch int(w.WrID) {
			case ppSendWRID:
				scnt++
			case ppRecvWRID:
				if o.check {
					p.checkPayload(w.ByteLen)
				}
				routs--
				if routs <= 1 {
					routs += p.postRecv(o.rxDepth - routs)
					if routs < o.rxDepth {
						return fmt.Errorf("Couldn't post receive (%d)", routs)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("Completion for unknown wr_id %d", int(w.WrID))
			}
			p.pending &^= int(w.WrID)
			if scnt < o.iters && p.pending == 0 {
				if err := p.postSend(rem.qpn); err != nil {
					return errors.New("Couldn't post send")
				}
				p.pending = ppRecvWRID | ppSendWRID
			}
		}
	}
	usec := float64(time.Since(start).Microseconds())
	if usec <= 0 {
		usec = 1
	}
	bytes := int64(o.size) * int64(o.iters) * 2
	fmt.Fprintf(o.stdout, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, float64(bytes)*8/usec)
	fmt.Fprintf(o.stdout, "%d iters in %.2f seconds = %.2f usec/iter\n", o.iters, usec/1e6, usec/float64(o.iters))
	if o.check {
		if o.server == "" {
			for pg := 0; pg*o.pageSize < o.size; pg++ {
				if p.badPages[pg] {
					fmt.Fprintf(o.stdout, "invalid data in page %d\n", pg)
				}
			}
		}
		if p.badMsgs > 0 {
			return fmt.Errorf("%d of %d messages received had bad payload bytes", p.badMsgs, rcnt)
		}
	}
	return nil
}

// fillPattern is what ibv_rc_pingpong -c writes before the first send: a
// zero at each page start of the 0x7b buffer.
func (p *ppCtx) fillPattern() {
	b := p.payload()
	for i := 0; i < len(b); i += p.o.pageSize {
		b[i] = 0
	}
}

// payload is the message part of the buffer (after the GRH room on UD).
func (p *ppCtx) payload() []byte {
	if p.o.ud {
		return p.buf[ppGRHSize : ppGRHSize+p.o.size]
	}
	return p.buf[:p.o.size]
}

// checkPayload compares a received message with the -c pattern, every
// byte of it.
func (p *ppCtx) checkPayload(n uint32) {
	want := p.o.size
	if p.o.ud {
		want += ppGRHSize
	}
	b := p.payload()
	bad := int(n) != want
	for i, c := range b {
		exp := byte(ppFill)
		if i%p.o.pageSize == 0 {
			exp = 0
		}
		if c != exp {
			bad = true
			p.badPages[i/p.o.pageSize] = true
		}
	}
	if bad {
		p.badMsgs++
	}
}

// clientExchange is pp_client_exch_dest.
func (p *ppCtx) clientExchange(my ppDest) (ppDest, error) {
	o := p.o
	addr := net.JoinHostPort(o.server, strconv.Itoa(o.port))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return ppDest{}, fmt.Errorf("Couldn't connect to %s:%d", o.server, o.port)
	}
	defer conn.Close()
	if _, err := conn.Write(my.record()); err != nil {
		return ppDest{}, errors.New("Couldn't send local address")
	}
	msg := make([]byte, 52)
	n, err := conn.Read(msg)
	if err != nil || n != len(msg) {
		return ppDest{}, fmt.Errorf("client read/write: Couldn't read/write remote address (read %d bytes)", n)
	}
	if _, err := conn.Write([]byte("done\x00")); err != nil {
		return ppDest{}, errors.New("Couldn't read/write remote address")
	}
	return parseRecord(msg)
}

// serverExchange is pp_server_exch_dest: one connection, the record read
// in one read, the QP connected before the reply, then "done".
func (p *ppCtx) serverExchange(my ppDest, sgid int) (ppDest, error) {
	o := p.o
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(o.port)))
	if err != nil {
		return ppDest{}, fmt.Errorf("Couldn't listen to port %d", o.port)
	}
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return ppDest{}, errors.New("accept() failed")
	}
	defer conn.Close()
	msg := make([]byte, 52)
	n, err := conn.Read(msg)
	if err != nil || n != len(msg) {
		return ppDest{}, fmt.Errorf("%d/%d: Couldn't read remote address", n, len(msg))
	}
	rem, err := parseRecord(msg)
	if err != nil {
		return ppDest{}, err
	}
	if err := p.connect(my.psn, rem, sgid); err != nil {
		return ppDest{}, fmt.Errorf("%v\nCouldn't connect to remote QP", err)
	}
	if _, err := conn.Write(my.record()); err != nil {
		return ppDest{}, errors.New("Couldn't send/recv local address")
	}
	done := make([]byte, 52)
	if n, err := conn.Read(done); err != nil || n != len("done\x00") {
		return ppDest{}, errors.New("Couldn't send/recv local address")
	}
	return rem, nil
}

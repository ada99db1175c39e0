package main

// The idle part of `irdma-emu bench` (issue 11, "Idle means idle" and
// "Scale with work"): what a daemon costs while nothing happens — with no
// program attached, and with a program holding many connected RC QPs and
// posting nothing — and how soon the first WQE after that quiet completes.
// CPU time and context switches are read from /proc for the daemon's
// threads; the memory a QP costs the daemon is its resident set's growth
// over the QPs the program made.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/client"
)

// benchIdleEnv makes `irdma-emu bench` the idle part's program: it opens
// the attach socket named by the variable, creates benchIdleQPsEnv RC QPs
// connected in pairs to each other (one device, in-device loopback), says
// "ready N", waits for a line on stdin, posts one signaled 8-byte WRITE and
// says "first MICROSECONDS" when its completion is polled.
const (
	benchIdleEnv    = "IRDMA_EMU_BENCH_IDLE"
	benchIdleQPsEnv = "IRDMA_EMU_BENCH_IDLE_QPS"
)

// procUsage is what /proc tells of a process: CPU time (user + system)
// and context switches (voluntary + involuntary, every thread), and its
// resident set.
type procUsage struct {
	cpu      time.Duration
	switches int64
	rssKiB   int64
}

// clockTick is USER_HZ: /proc/PID/stat counts CPU time in 1/100 s on
// Linux (sysconf(_SC_CLK_TCK) is 100 on every architecture Go supports).
const clockTick = 10 * time.Millisecond

func readUsage(pid int) (procUsage, error) {
	var u procUsage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name may hold spaces: fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	u.cpu = time.Duration(ut+st) * clockTick
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				u.switches += n
			}
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return u, nil
}

// idleCost measures pid over d: the share of one core it used (percent)
// and its context switches per second.
func idleCost(pid int, d time.Duration) (cpuPct, wakeups float64, err error) {
	a, err := readUsage(pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	time.Sleep(d)
	b, err := readUsage(pid)
	if err != nil {
		return 0, 0, err
	}
	el := time.Since(start)
	return 100 * float64(b.cpu-a.cpu) / float64(el), float64(b.switches-a.switches) / el.Seconds(), nil
}

// benchIdle runs the idle part on its own daemon at addr.
func benchIdle(rep *benchReport, o benchOptions, self string, progress func(string, ...any)) {
	runDir, err := os.MkdirTemp("", "irdma-emu-bench-idle-")
	if err != nil {
		rep.fail("run directory: %v", err)
		return
	}
	defer os.RemoveAll(runDir)
	window, nqp := 10*time.Second, 1000
	if o.quick {
		window, nqp = 2*time.Second, 200
	}
	if o.idleQPs > 0 {
		nqp = o.idleQPs
	}
	d, err := startBenchDaemon(self, runDir, "benchidle", o.addrs[2])
	if err != nil {
		rep.fail("%v", err)
		return
	}
	defer d.stop()
	pid := d.cmd.Process.Pid
	echo, err := startColdEcho(self)
	if err != nil {
		rep.fail("cold round trip: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // past start-up's work
	progress("idle daemon, no program, %v", window)
	cpu, wk, err := idleCost(pid, window)
	if err != nil {
		rep.fail("idle daemon: %v", err)
		return
	}
	rep.add("idle.none.cpu", cpu, "% core", "", "< 0.5")
	rep.add("idle.none.wakeups", wk, "/s", "", "< 10")
	if echo != nil {
		// The same quiet the first WQE comes after: the machine's own
		// wake-up of a process that slept through it.
		rtt, err := echo.roundTrip()
		echo.stop()
		if err != nil {
			rep.fail("%v", err)
		} else {
			us := float64(rtt) / float64(time.Microsecond)
			rep.Baselines = append(rep.Baselines,
				benchFigure{Name: "udp.rtt.cold", Value: us, Unit: "us"},
				benchFigure{Name: "udp.oneway.cold", Value: us / 2, Unit: "us"})
		}
	}

	before, err := readUsage(pid)
	if err != nil {
		rep.fail("idle daemon: %v", err)
		return
	}
	progress("%d connected QPs, idle, %v", nqp, window)
	c := exec.Command(self, "bench")
	c.Env = append(os.Environ(), benchIdleEnv+"="+d.socket(), benchIdleQPsEnv+"="+strconv.Itoa(nqp))
	in, err := c.StdinPipe()
	if err != nil {
		rep.fail("idle program: %v", err)
		return
	}
	outp, err := c.StdoutPipe()
	if err != nil {
		rep.fail("idle program: %v", err)
		return
	}
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		rep.fail("idle program: %v", err)
		return
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	lines := bufio.NewScanner(outp)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "ready ") {
		_ = c.Process.Kill()
		_ = c.Wait()
		rep.fail("idle program: no ready line (%q): %s", lines.Text(), errb.String())
		return
	}
	after, err := readUsage(pid)
	if err != nil {
		rep.fail("idle daemon: %v", err)
		return
	}
	rep.add("idle.qps.count", float64(nqp), "QPs", "", "")
	rep.add("idle.qps.rss_per_qp", float64(after.rssKiB-before.rssKiB)/float64(nqp), "KiB", "", "")
	time.Sleep(500 * time.Millisecond)
	cpu, wk, err = idleCost(pid, window)
	if err != nil {
		rep.fail("idle daemon: %v", err)
		return
	}
	rep.add("idle.qps.cpu", cpu, "% core", "", "< 2")
	rep.add("idle.qps.wakeups", wk, "/s", "", "")
	if _, err := io.WriteString(in, "go\n"); err != nil {
		rep.fail("idle program: %v", err)
		return
	}
	if !lines.Scan() {
		rep.fail("idle program: no first-WQE line: %s", errb.String())
		return
	}
	us, err := strconv.ParseFloat(strings.TrimPrefix(lines.Text(), "first "), 64)
	if err != nil {
		rep.fail("idle program: %q: %v", lines.Text(), err)
		return
	}
	rep.add("idle.first_wqe", us, "us", "udp.oneway.idle", "<= 3")
	rep.add("idle.first_wqe.vs_cold", us, "us", "udp.oneway.cold", "")
}

// idleProgram is the program benchIdle runs (this binary, benchIdleEnv set).
func idleProgram(sock string, nqp int, stdin io.Reader, stdout io.Writer) error {
	if nqp < 2 || nqp%2 != 0 {
		return fmt.Errorf("%s=%d: an even number of QPs, at least 2", benchIdleQPsEnv, nqp)
	}
	ctx, err := client.Open(sock)
	if err != nil {
		return err
	}
	defer ctx.Close()
	gidx := 1 // the IPv4-mapped GID of the daemon's address
	gid, err := ctx.QueryGID(1, gidx)
	if err != nil {
		return err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	buf, err := ctx.AllocBuffer(4096)
	if err != nil {
		return err
	}
	access := client.AccessLocalWrite | client.AccessRemoteWrite
	mr, err := pd.RegMR(buf, access)
	if err != nil {
		return err
	}
	cq, err := ctx.CreateCQ(nqp+16, nil, 0)
	if err != nil {
		return err
	}
	qps := make([]*client.QP, nqp)
	for i := range qps {
		qps[i], err = pd.CreateQP(client.QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: client.QPTypeRC,
			Cap: client.QPCapabilities{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fmt.Errorf("QP %d: %v", i, err)
		}
		err = qps[i].Modify(&client.QPAttr{State: client.QPSInit, PortNum: 1, AccessFlags: client.AccessRemoteWrite},
			client.AttrState|client.AttrPKeyIndex|client.AttrPort|client.AttrAccessFlags)
		if err != nil {
			return fmt.Errorf("QP %d to INIT: %v", i, err)
		}
	}
	for i, q := range qps {
		peer := qps[i^1]
		a := &client.QPAttr{State: client.QPSRTR, PathMTU: client.MTU1024, DestQPN: peer.QPN(), RQPSN: 0,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: client.AHAttr{IsGlobal: true, DGID: gid, SGIDIndex: uint8(gidx), HopLimit: 0xff, PortNum: 1}}
		if err := q.Modify(a, client.AttrState|client.AttrAV|client.AttrPathMTU|client.AttrDestQPN|client.AttrRQPSN|
			client.AttrMaxDestRdAtomic|client.AttrMinRNRTimer); err != nil {
			return fmt.Errorf("QP %d to RTR: %v", i, err)
		}
		a.State, a.Timeout, a.RetryCnt, a.RNRRetry, a.SQPSN, a.MaxRdAtomic = client.QPSRTS, 14, 7, 7, 0, 1
		if err := q.Modify(a, client.AttrState|client.AttrTimeout|client.AttrRetryCnt|client.AttrRNRRetry|
			client.AttrSQPSN|client.AttrMaxQPRdAtomic); err != nil {
			return fmt.Errorf("QP %d to RTS: %v", i, err)
		}
	}
	fmt.Fprintf(stdout, "ready %d\n", nqp)
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
		return err
	}
	wr := []client.SendWR{{WrID: 1, Opcode: client.WRRDMAWrite, Flags: client.SendSignaled,
		SGList: []client.SGE{{Addr: mr.Addr, Length: 8, LKey: mr.LKey}}, RemoteAddr: mr.Addr + 2048, RKey: mr.RKey}}
	wc := make([]client.WorkCompletion, 4)
	start := time.Now()
	if _, err := qps[0].PostSend(wr); err != nil {
		return err
	}
	n, err := waitCQ(cq, wc, start.Add(10*time.Second), "the first WRITE's completion")
	el := time.Since(start)
	if err != nil {
		return err
	}
	if n != 1 || wc[0].Status != client.WCSuccess {
		return errors.New("the first WRITE did not complete successfully")
	}
	fmt.Fprintf(stdout, "first %.1f\n", float64(el)/float64(time.Microsecond))
	return nil
}

// benchEchoEnv makes `irdma-emu bench` the cold round trip's echo: it
// binds a UDP socket on 127.0.0.1, says "port N", and sends every
// datagram back from one thread blocked in recvfrom, until its stdin
// closes. Its socket has no receive timeout, so through the idle part's
// quiet nothing wakes it: the first datagram after the quiet pays the
// machine's wake-up of a process that slept, as the daemon's first WQE
// does.
const benchEchoEnv = "IRDMA_EMU_BENCH_ECHO"

// echoProgram is the program startColdEcho runs (benchEchoEnv set).
func echoProgram(stdin io.Reader, stdout io.Writer) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, stdin); os.Exit(0) }()
	fmt.Fprintf(stdout, "port %d\n", sa.(*unix.SockaddrInet4).Port)
	runtime.LockOSThread()
	var buf [64]byte
	for {
		n, from, err := unix.Recvfrom(fd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		_ = unix.Sendto(fd, buf[:n], 0, from)
	}
}

// coldEcho is the echo process and the bench's socket connected to it.
type coldEcho struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	fd  int
}

// startColdEcho starts the echo process and makes one round trip to it,
// so that the one after the quiet finds every path set up.
func startColdEcho(self string) (*coldEcho, error) {
	c := exec.Command(self, "bench")
	c.Env = append(os.Environ(), benchEchoEnv+"=1")
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	e := &coldEcho{cmd: c, in: in, fd: -1}
	lines := bufio.NewScanner(out)
	var port int
	if !lines.Scan() {
		e.stop()
		return nil, errors.New("echo process: no port line")
	}
	if _, err := fmt.Sscanf(lines.Text(), "port %d", &port); err != nil {
		e.stop()
		return nil, fmt.Errorf("echo process: %q", lines.Text())
	}
	fd, _, err := udpSocket()
	if err != nil {
		e.stop()
		return nil, err
	}
	e.fd = fd
	tv := unix.Timeval{Sec: 2} // a cold wake-up is milliseconds at worst
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		e.stop()
		return nil, err
	}
	if _, err := e.roundTrip(); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// roundTrip sends 8 bytes and waits for them to come back.
func (e *coldEcho) roundTrip() (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var buf [8]byte
	t0 := time.Now()
	if _, err := unix.Write(e.fd, buf[:]); err != nil {
		return 0, err
	}
	if _, err := readNoEINTR(e.fd, buf[:]); err != nil {
		return 0, fmt.Errorf("cold round trip: %v", err)
	}
	return time.Since(t0), nil
}

func (e *coldEcho) stop() {
	if e.fd >= 0 {
		unix.Close(e.fd)
	}
	e.in.Close()
	_ = e.cmd.Wait()
}

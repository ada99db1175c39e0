package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// pair is one scenario between rxe in the guest and irdma-emu on the host:
// the same program (or a wire-compatible one) on both sides, one of them
// the server.
type pair struct {
	name string
	// guestCmd is the rxe side's command line, without the server's
	// address; hostArgv the emulator side's (run through irdma-emu exec
	// unless hostTool).
	guestCmd string
	hostArgv []string
	hostTool bool // hostArgv are irdma-emu tool arguments (pingpong)
	// rxeServer: the guest is the server, the host connects to it; else
	// the other way round.
	rxeServer bool
	timeout   time.Duration
	// rdmaCM: the programs connect with the RDMA CM (rping, perftest
	// -R): their servers listen on an RDMA CM id, not a TCP socket.
	rdmaCM bool
	// addrFlag, when set, precedes the server's address on the client's
	// command line (rping's -a); else the address is the last argument.
	addrFlag string
}

type pairResult struct {
	server, client    string // outputs
	hostOut, guestOut string
	elapsed           time.Duration
}

// runPair runs one scenario and fails t unless both sides exit 0.
func (r *emuRig) runPair(t *testing.T, p pair) pairResult {
	t.Helper()
	res, err := r.tryPair(t, p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryPair runs one scenario; an error unless both sides exit 0.
func (r *emuRig) tryPair(t *testing.T, p pair) (pairResult, error) {
	t.Helper()
	if p.timeout == 0 {
		p.timeout = 2 * time.Minute
	}
	start := time.Now()
	defer func() { r.spans = append(r.spans, span{name: t.Name(), start: start, end: time.Now()}) }()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	port := r.nextPort()
	gsecs := int(p.timeout/time.Second) - 5
	guestCmd := fmt.Sprintf("timeout %d %s -p %d", gsecs, p.guestCmd, port)
	hostArgv := append(append([]string{}, p.hostArgv...), "-p", fmt.Sprint(port))
	startHost := func(extra ...string) (*guest.HostProc, error) {
		if len(extra) > 0 && p.addrFlag != "" {
			extra = append([]string{p.addrFlag}, extra...)
		}
		argv := append(append([]string{}, hostArgv...), extra...)
		if p.hostTool {
			return r.hostTool(ctx, argv...)
		}
		return r.hostExec(ctx, argv...)
	}
	var res pairResult
	var hostErr, guestErr error
	var gres guest.Result
	if p.rxeServer {
		srv, err := r.guestServer(ctx, port, guestCmd, p.rdmaCM)
		if err != nil {
			return res, fmt.Errorf("rxe server: %w", err)
		}
		cli, err := startHost(r.v.GuestAddr().String())
		if err != nil {
			return res, fmt.Errorf("irdma-emu client: %w", err)
		}
		res.hostOut, hostErr = hostResult(ctx, cli)
		if hostErr != nil {
			// Do not wait for the guest's timeout: the server cannot
			// finish without its client.
			cancel()
		}
		// Once the client is done, the server has at most its last
		// completion and its summary to go.
		select {
		case <-srv.done:
		case <-time.After(30 * time.Second):
			cancel()
			guestErr = errors.New("the rxe server did not finish within 30 s of its client")
		}
		gres, err = srv.wait()
		if guestErr == nil {
			guestErr = err
		}
		res.guestOut = gres.Output
		res.server, res.client = res.guestOut, res.hostOut
	} else {
		var listens int
		if p.rdmaCM {
			st, err := r.ctl.Stats(-1)
			if err != nil {
				return res, fmt.Errorf("irdma-emu stats: %w", err)
			}
			listens = st.Resources.CMListens
		}
		srv, err := startHost()
		if err != nil {
			return res, fmt.Errorf("irdma-emu server: %w", err)
		}
		wait := r.waitHostListen
		if p.rdmaCM {
			wait = func(ctx context.Context, port int, p *guest.HostProc) error {
				return r.waitHostCMListen(ctx, port, p, listens)
			}
		}
		if err := wait(ctx, port, srv); err != nil {
			return res, err
		}
		addr := " $EMU_HOST"
		if p.addrFlag != "" {
			addr = " " + p.addrFlag + addr
		}
		cli, err := startGuest(ctx, r.v, guestCmd+addr)
		if err != nil {
			return res, fmt.Errorf("rxe client: %w", err)
		}
		gres, guestErr = cli.wait()
		res.guestOut = gres.Output
		if guestErr != nil || gres.RC != 0 {
			cancel()
		}
		res.hostOut, hostErr = hostResult(ctx, srv)
		res.server, res.client = res.hostOut, res.guestOut
	}
	res.elapsed = time.Since(start)
	if guestErr != nil || gres.RC != 0 || hostErr != nil {
		return res, fmt.Errorf("%s: rxe side rc=%d err=%v, irdma-emu side err=%v\n--- rxe (guest) output:\n%s\n--- irdma-emu (host) output:\n%s",
			p.name, gres.RC, guestErr, hostErr, res.guestOut, res.hostOut)
	}
	return res, nil
}

// TestRxeEmu runs unmodified rdma-core programs between rdma_rxe in the
// guest and irdma-emu on the host side of the guest's tap, in both roles:
// ibv_rc_pingpong, ibv_ud_pingpong, perftest and irdma-emu pingpong. One
// guest and one daemon serve every scenario. At the end the capture of
// the tap is decoded (every ICRC right), and rxe's counters and kernel log
// must show it accepted everything irdma-emu sent.
func TestRxeEmu(t *testing.T) {
	suiteStart := time.Now()
	guest.RequireGuest(t)
	var missing []string
	for _, p := range []struct{ prog, pkg string }{
		{"ibv_rc_pingpong", "ibverbs-utils"}, {"ibv_ud_pingpong", "ibverbs-utils"},
		{"ib_write_bw", "perftest"}, {"ib_read_bw", "perftest"}, {"ib_send_bw", "perftest"},
		{"ib_write_lat", "perftest"}, {"ib_read_lat", "perftest"},
		{"gcc", "gcc"}, // irdma-emu exec builds its preload on first use
		{"ss", "iproute2"},
	} {
		if _, err := exec.LookPath(p.prog); err != nil {
			missing = append(missing, fmt.Sprintf("%s is missing (Debian package %s)", p.prog, p.pkg))
		}
	}
	if len(missing) > 0 {
		guest.MissingLoudly(t, "TestRxeEmu cannot run: "+strings.Join(missing, "; "))
	}
	// One vCPU: TCG runs a vCPU per host thread, and the host side (the
	// daemon, and programs that busy-poll their CQ) needs the other core
	// of a 2-core machine. rdma_rxe's debug messages are on from boot,
	// into a log buffer that holds a scenario's worth of them, except its
	// per-packet state trace (a dozen lines a packet, which slows the guest
	// tenfold and tells nothing the counters do not).
	v := guest.StartT(t, guest.Config{Capture: true, RxeDebug: true, SMP: 1, Append: []string{"log_buf_len=16M"}})
	v.WaitReadyT(t, 5*time.Minute)
	{
		// IRDMA_EMU_INTEROP_SLOW_RXE=1 leaves the state trace on: rxe then
		// runs slower than the transport timeout, which stresses both
		// sides' retry paths (expect rxe to give up in some scenarios).
		var queries []string
		if os.Getenv("IRDMA_EMU_INTEROP_SLOW_RXE") != "1" {
			queries = append(queries, `module rdma_rxe format "state = " -p`)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		n, err := v.RxeDebugControl(ctx, queries...)
		cancel()
		if err != nil || n == 0 {
			t.Fatalf("rdma_rxe dynamic debug: %d sites on, %v", n, err)
		}
		t.Logf("rdma_rxe dynamic debug: %d sites on (%d queries after all on)", n, len(queries))
	}
	r := startEmu(t, v)
	t.Logf("DURATION guest and irdma-emu ready: %v", time.Since(suiteStart).Round(time.Millisecond))

	t.Run("devinfo", func(t *testing.T) { r.checkDevinfo(t) })

	// ibv_rc_pingpong: the default size (4 KiB, 4 packets a message at MTU
	// 1024), 64 KiB (64 packets, with -c checking every byte received), and
	// completion events (-e).
	for _, sc := range []struct {
		name  string
		args  string
		iters int
		size  int
	}{
		{"default", "-n 200", 200, 4096},
		{"s65536", "-s 65536 -c -n 20", 20, 65536},
		{"events", "-e -n 200", 200, 4096},
	} {
		for _, rxeServer := range []bool{true, false} {
			t.Run("rc_pingpong/"+sc.name+"/"+roleName(rxeServer), func(t *testing.T) {
				r.pingpongPair(t, pair{
					name:      "ibv_rc_pingpong " + sc.args,
					guestCmd:  "ibv_rc_pingpong -d rxe0 -g 1 " + sc.args,
					hostArgv:  append([]string{"ibv_rc_pingpong", "-d", emuDev, "-g", "1"}, strings.Fields(sc.args)...),
					rxeServer: rxeServer,
				}, sc.iters, sc.size)
			})
		}
	}

	// ibv_ud_pingpong: UD SENDs with the GRH, 1 KiB (the active MTU).
	for _, rxeServer := range []bool{true, false} {
		t.Run("ud_pingpong/"+roleName(rxeServer), func(t *testing.T) {
			const args = "-s 1024 -n 200"
			r.pingpongPair(t, pair{
				name:      "ibv_ud_pingpong " + args,
				guestCmd:  "ibv_ud_pingpong -d rxe0 -g 1 " + args,
				hostArgv:  append([]string{"ibv_ud_pingpong", "-d", emuDev, "-g", "1"}, strings.Fields(args)...),
				rxeServer: rxeServer,
			}, 200, 1024)
		})
	}

	// perftest, each side once the server. TCG makes rxe slow: few
	// iterations, and -F (no CPU frequency check).
	for _, sc := range []struct {
		tool, args string
		bw         bool
	}{
		{"ib_write_bw", "-n 100", true},
		{"ib_read_bw", "-n 100", true},
		{"ib_send_bw", "-n 100", true},
		// ib_write_lat sends inline, 220 bytes by default; the E810 takes
		// at most 101, and libirdma refuses the QP otherwise (as on
		// hardware), so both sides say 64.
		{"ib_write_lat", "-n 200 -I 64", false},
		{"ib_read_lat", "-n 200", false},
	} {
		for _, rxeServer := range []bool{true, false} {
			t.Run("perftest/"+sc.tool+"/"+roleName(rxeServer), func(t *testing.T) {
				defer r.checkRxeCounters(t)
				common := "-x 1 -F " + sc.args
				res := r.runPair(t, pair{
					name:      sc.tool + " " + common,
					guestCmd:  sc.tool + " -d rxe0 " + common,
					hostArgv:  append([]string{sc.tool, "-d", emuDev}, strings.Fields(common)...),
					rxeServer: rxeServer,
				})
				r.checkPerftest(t, sc.tool, sc.bw, res)
			})
		}
	}

	// irdma-emu pingpong (the Go client) against rdma-core's unmodified
	// ibv_rc_pingpong on rxe, both checking every byte (-c).
	for _, sc := range []struct {
		name  string
		args  string
		iters int
		size  int
	}{
		{"4k", "-s 4096 -c -n 100", 100, 4096},
		{"64k", "-s 65536 -c -n 20", 20, 65536},
	} {
		for _, rxeServer := range []bool{true, false} {
			t.Run("emu_pingpong/"+sc.name+"/"+roleName(rxeServer), func(t *testing.T) {
				r.pingpongPair(t, pair{
					name:      "irdma-emu pingpong " + sc.args,
					guestCmd:  "ibv_rc_pingpong -d rxe0 -g 1 " + sc.args,
					hostArgv:  append([]string{"pingpong", "-d", emuDev, "-g", "1"}, strings.Fields(sc.args)...),
					hostTool:  true,
					rxeServer: rxeServer,
				}, sc.iters, sc.size)
			})
		}
	}

	t.Run("capture", func(t *testing.T) { r.checkCapture(t) })
	t.Logf("DURATION interop suite with irdma-emu: %v", time.Since(suiteStart).Round(time.Millisecond))
}

func roleName(rxeServer bool) string {
	if rxeServer {
		return "rxe-server"
	}
	return "emu-server"
}

// pingpongPair runs a pingpong scenario and checks both summaries: iters
// exchanges of size bytes each way, and no invalid data (-c).
func (r *emuRig) pingpongPair(t *testing.T, p pair, iters, size int) {
	t.Helper()
	defer r.checkRxeCounters(t)
	start := time.Now()
	res, err := r.tryPair(t, p)
	if err != nil && p.rxeServer {
		// rxe as the server sends the last message; the client (ours)
		// exits, and its QP goes, once that message is in. If rxe lost its
		// own race between a retry and our ACK, it retries to a QP that is
		// gone, forever: its fault, told apart by the capture.
		if why, ok := r.rxeLostFinalAck(start); ok {
			t.Logf("RXE RACE: %v\n%s\nrunning the scenario again", why, err)
			r.races = append(r.races, t.Name()+": "+why)
			res, err = r.tryPair(t, p)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct{ name, out string }{{"server", res.server}, {"client", res.client}} {
		who := "irdma-emu"
		if (side.name == "server") == p.rxeServer {
			who = "rxe"
		}
		s := parsePingpong(side.out)
		if !s.HasResult || s.Iters != iters || s.Bytes != int64(2*size*iters) {
			t.Errorf("%s (%s): %+v, want %d iters and %d bytes:\n%s", side.name, who, s, iters, 2*size*iters, side.out)
		}
		if strings.Contains(side.out, "invalid data") {
			t.Errorf("%s (%s) received corrupted data:\n%s", side.name, who, side.out)
		}
		t.Logf("RESULT %s %s (%s): %d iters, %.2f usec/iter, %.2f Mbit/s", t.Name(), side.name, who, s.Iters, s.UsecIter, s.Mbits)
	}
	t.Logf("DURATION scenario %s: %v", t.Name(), res.elapsed.Round(time.Millisecond))
}

// unclocked reports whether perftest failed to measure the CPU clock it
// turns cycle counts into time with: get_clock.c:sample_get_cpu_mhz fits
// cycles against gettimeofday and gives up below r² = 0.9 (printing
// "Correlation coefficient r^2"), which happens in a TCG guest whose
// cycle counter does not follow the wall clock; with -F perftest goes on
// with 0 MHz and prints 0.00 for every bandwidth.
func unclocked(out string) bool { return strings.Contains(out, "Correlation coefficient r^2") }

// checkPerftest checks perftest's result rows: the client's always, the
// server's where perftest prints one (bandwidth tests exchange reports).
func (r *emuRig) checkPerftest(t *testing.T, tool string, bw bool, res pairResult) {
	t.Helper()
	row, ok := parsePerftest(res.client)
	if !ok {
		t.Fatalf("%s client: no result row:\n%s", tool, res.client)
	}
	iters := 200
	if bw {
		iters = 100
	}
	if int(row["#iterations"]) != iters {
		t.Errorf("%s client: %v iterations, want %d", tool, row["#iterations"], iters)
	}
	if bw {
		avg, peak := row["BW average[MB/sec]"], row["BW peak[MB/sec]"]
		if int(row["#bytes"]) != 65536 {
			t.Errorf("%s client: %v bytes, want 65536:\n%s", tool, row["#bytes"], res.client)
		}
		if unclocked(res.client) {
			// The counters (checkRxeCounters) prove the transfer; perftest's
			// figures on that side are 0.00 and say nothing.
			t.Logf("%s client: perftest could not measure the CPU clock (TCG guest), so it prints no bandwidth", tool)
			if avg != 0 || peak != 0 {
				t.Errorf("%s client: unclocked, yet BW average %v peak %v", tool, avg, peak)
			}
		} else if !(avg > 0.1 && avg < 1e5 && peak >= avg*0.99) {
			t.Errorf("%s client: insane result %v:\n%s", tool, row, res.client)
		}
		t.Logf("RESULT %s: %d x %d bytes, BW average %.2f MB/s, peak %.2f MB/s", t.Name(), int(row["#iterations"]), int(row["#bytes"]), avg, peak)
		// perftest's bandwidth server prints the result row too: the same
		// size and iteration count, a sane figure (ib_send_bw's receiving
		// server prints a peak of 0.00: it measures no peak).
		srow, ok := parsePerftest(res.server)
		if !ok {
			t.Fatalf("%s server: no result row:\n%s", tool, res.server)
		}
		savg, speak := srow["BW average[MB/sec]"], srow["BW peak[MB/sec]"]
		sane := savg > 0.1 && savg < 1e5 && (speak >= savg*0.99 || (tool == "ib_send_bw" && speak == 0))
		if unclocked(res.server) {
			sane = savg == 0 && speak == 0 // as for the client
		}
		if int(srow["#bytes"]) != 65536 || int(srow["#iterations"]) != iters || !sane {
			t.Errorf("%s server: result %v, want %d x 65536 bytes and a sane bandwidth:\n%s", tool, srow, iters, res.server)
		}
		t.Logf("RESULT %s server: BW average %.2f MB/s", t.Name(), savg)
	} else {
		avg, min, max := row["t_avg[usec]"], row["t_min[usec]"], row["t_max[usec]"]
		if unclocked(res.client) {
			// As for bandwidth: no clock, no time; the counters prove the
			// exchange.
			t.Logf("%s client: perftest could not measure the CPU clock (TCG guest): %v", tool, row)
		} else if !(avg > 0 && min > 0 && min <= avg && avg <= max && avg < 1e6) {
			t.Errorf("%s client: insane result %v:\n%s", tool, row, res.client)
		}
		t.Logf("RESULT %s: %d x %d bytes, t_avg %.2f usec, t_typical %.2f, t_min %.2f, t_max %.2f", t.Name(), int(row["#iterations"]), int(row["#bytes"]), avg, row["t_typical[usec]"], min, max)
	}
	t.Logf("DURATION scenario %s: %v", t.Name(), res.elapsed.Round(time.Millisecond))
}

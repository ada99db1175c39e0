package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// emuRig is irdma-emu on the host side of a guest's tap: `irdma-emu run`
// inside the guest's namespace on the tap (--netdev), so that its GID 1
// is the tap's address, and helpers to run unmodified rdma-core programs
// on it (`irdma-emu exec`) and their rxe peers in the guest.
type emuRig struct {
	v      *guest.VM
	bin    string
	runDir string
	dev    string
	daemon *guest.HostProc
	ctl    *daemon.Client

	mu   sync.Mutex
	port int // next TCP port for a scenario's out-of-band exchange

	// base is the guest's state before the first scenario, last after the
	// previous one; lastStats irdma-emu's counters then.
	base, last guestState
	lastStats  daemon.Stats
	kmsgTotal  int
	lastTap    tapStats
	base0Tap   tapStats
	// spans are the scenarios' times, to tell which one a packet of the
	// capture belongs to.
	spans []span
	// races are the scenarios run again because rxe lost its own race
	// between a retry and irdma-emu's final ACK (rxeLostFinalAck).
	races []string
}

type span struct {
	name       string
	start, end time.Time
}

// tapStats are the host side's counters of the guest's tap: what it
// could not hand to QEMU (the guest was too slow to take it) is dropped
// there, before rxe could see it.
type tapStats struct{ txDropped uint64 }

func (r *emuRig) tapStats() (tapStats, error) {
	l, err := r.v.Netns().Netlink().LinkByName(r.v.Tap())
	if err != nil {
		return tapStats{}, err
	}
	st := l.Attrs().Statistics
	if st == nil {
		return tapStats{}, fmt.Errorf("no statistics for %s", r.v.Tap())
	}
	return tapStats{txDropped: st.TxDropped}, nil
}

// scenarioOf names the scenario running at t (or just ended).
func (r *emuRig) scenarioOf(t time.Time) string {
	name := "before the first scenario"
	for _, s := range r.spans {
		if !t.Before(s.start) {
			name = s.name
			if t.After(s.end) {
				name += " (after its end)"
			}
		}
	}
	return name
}

const emuDev = "irdma0"

// startEmu starts the daemon on the guest's tap and waits until its port
// is ACTIVE. It is stopped with SIGTERM (and must exit 0) when the test
// ends, before the guest and its namespace go.
func startEmu(t *testing.T, v *guest.VM) *emuRig {
	t.Helper()
	r := &emuRig{v: v, bin: daemontest.Binary(t), runDir: daemontest.RunDir(t), dev: emuDev, port: 18600}
	// Its own capture of what it sent and received, next to the tap's.
	args := []string{"run", "--name", r.dev, "--run-dir", r.runDir, "--netdev", v.Tap(),
		"--pcap", filepath.Join(v.Dir(), "irdma-emu.pcap")}
	p, err := v.Netns().Start(context.Background(), nil, r.bin, args...)
	if err != nil {
		t.Fatalf("irdma-emu run: %v", err)
	}
	r.daemon = p
	t.Cleanup(func() {
		err := p.Stop(20 * time.Second)
		if err != nil {
			t.Errorf("irdma-emu run did not shut down cleanly: %v\n%s", err, p.Output())
		}
		if t.Failed() {
			t.Logf("irdma-emu run output:\n%s", p.Output())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := daemon.Dial(daemon.ControlPath(r.runDir, r.dev))
		if err == nil {
			if _, err = c.Ping(); err == nil {
				r.ctl = c
				t.Cleanup(func() { c.Close() })
				break
			}
			c.Close()
		}
		select {
		case <-p.Done():
			t.Fatalf("irdma-emu run exited: %v\n%s", p.Wait(), p.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("irdma-emu run: control socket not answering after 60 s: %v\n%s", err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		di, err := r.ctl.DevInfo()
		if err == nil && len(di.Ports) > 0 && di.Ports[0].StateName == "PORT_ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("irdma-emu port not ACTIVE after 60 s: %+v %v", di.Ports, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := r.guestState(ctx)
	if err != nil {
		t.Fatalf("guest state: %v", err)
	}
	r.base, r.last = st, st
	if r.lastTap, err = r.tapStats(); err != nil {
		t.Fatalf("tap statistics: %v", err)
	}
	r.base0Tap = r.lastTap
	if r.lastStats, err = r.ctl.Stats(-1); err != nil {
		t.Fatalf("irdma-emu stats: %v", err)
	}
	return r
}

// nextPort returns a TCP port no earlier scenario used, so that a server
// left over from a failed scenario cannot answer the next one.
func (r *emuRig) nextPort() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.port++
	return r.port
}

// hostExec starts an rdma-core program on the emulated device, in the
// guest's namespace, through `irdma-emu exec`.
func (r *emuRig) hostExec(ctx context.Context, argv ...string) (*guest.HostProc, error) {
	args := append([]string{"exec", "--run-dir", r.runDir, "--device", r.dev, "--"}, argv...)
	return r.v.Netns().Start(ctx, nil, r.bin, args...)
}

// hostTool starts an irdma-emu tool (pingpong) on the device, in the
// guest's namespace.
func (r *emuRig) hostTool(ctx context.Context, args ...string) (*guest.HostProc, error) {
	return r.v.Netns().Start(ctx, nil, "env", append([]string{"IRDMA_EMU_RUN_DIR=" + r.runDir, r.bin}, args...)...)
}

// waitHostListen waits until a TCP socket listens on port in the
// namespace, without connecting (the pingpong servers accept once).
func (r *emuRig) waitHostListen(ctx context.Context, port int, p *guest.HostProc) error {
	for {
		out, _ := r.v.Netns().Command(ctx, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if strings.TrimSpace(string(out)) != "" {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("host server exited before listening on %d: %v\n%s", port, p.Wait(), p.Output())
		case <-ctx.Done():
			return fmt.Errorf("host server not listening on %d: %w", port, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHostCMListen waits until the daemon's RDMA CM listens on one more
// service ID than the listens it held before the server started (the
// server's rdma_listen; the scenarios run one at a time), or the server
// exits.
func (r *emuRig) waitHostCMListen(ctx context.Context, port int, p *guest.HostProc, listens int) error {
	for {
		st, err := r.ctl.Stats(-1)
		if err != nil {
			return fmt.Errorf("irdma-emu stats: %w", err)
		}
		if st.Resources.CMListens > listens {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("host server exited before listening on %d: %v\n%s", port, p.Wait(), p.Output())
		case <-ctx.Done():
			return fmt.Errorf("host server not listening on %d: %w", port, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// guestJob is a script running in the guest, collected in the background.
type guestJob struct {
	done chan struct{}
	res  guest.Result
	err  error
}

func startGuest(ctx context.Context, v *guest.VM, script string) (*guestJob, error) {
	p, err := v.Start(script)
	if err != nil {
		return nil, err
	}
	j := &guestJob{done: make(chan struct{})}
	go func() {
		j.res, j.err = p.Wait(ctx)
		close(j.done)
	}()
	return j, nil
}

func (j *guestJob) wait() (guest.Result, error) { <-j.done; return j.res, j.err }

// guestServer starts a server program in the guest and waits until it
// listens on port (or has exited): a TCP socket, or with rdmaCM an RDMA CM
// id in state LISTEN (the rdma tool's cm_id resources, from the guest
// kernel's cma.c over netlink). The script prints a console marker
// either way, so a server that fails at once does not cost a timeout.
func (r *emuRig) guestServer(ctx context.Context, port int, cmd string, rdmaCM bool) (*guestJob, error) {
	listening := fmt.Sprintf(`netstat -ltn 2>/dev/null | grep -q ":%d "`, port)
	if rdmaCM {
		listening = fmt.Sprintf(`rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ":%d "`, port)
	}
	script := fmt.Sprintf(`%s & p=$!
while kill -0 $p 2>/dev/null; do
	if %s; then emu_notify "server %d up"; break; fi
	usleep 100000
done
kill -0 $p 2>/dev/null || emu_notify "server %d down"
wait $p`, cmd, listening, port, port)
	j, err := startGuest(ctx, r.v, script)
	if err != nil {
		return nil, err
	}
	line, err := r.v.WaitMarker(ctx, fmt.Sprintf("server %d (up|down)", port))
	if err != nil {
		return j, err
	}
	if strings.HasSuffix(strings.TrimSpace(line), "down") {
		res, _ := j.wait()
		return j, fmt.Errorf("guest server exited before listening on %d: rc=%d\n%s", port, res.RC, res.Output)
	}
	return j, nil
}

// hostResult waits for a host program, bounded by ctx.
func hostResult(ctx context.Context, p *guest.HostProc) (string, error) {
	select {
	case <-p.Done():
		return p.Output(), p.Wait()
	case <-ctx.Done():
		_ = p.Stop(2 * time.Second)
		return p.Output(), fmt.Errorf("still running at the deadline (%w), stopped", ctx.Err())
	}
}

var (
	reUsecIter = regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
	reBytesIn  = regexp.MustCompile(`(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec`)
)

// pingpongSummary is the last two lines of ibv_*_pingpong (and of
// irdma-emu pingpong).
type pingpongSummary struct {
	Iters     int
	Bytes     int64
	Mbits     float64
	UsecIter  float64
	HasResult bool
}

func parsePingpong(out string) pingpongSummary {
	var s pingpongSummary
	if m := reUsecIter.FindStringSubmatch(out); m != nil {
		fmt.Sscan(m[1], &s.Iters)
		fmt.Sscan(m[3], &s.UsecIter)
		s.HasResult = true
	}
	if m := reBytesIn.FindStringSubmatch(out); m != nil {
		fmt.Sscan(m[1], &s.Bytes)
		fmt.Sscan(m[3], &s.Mbits)
	}
	return s
}

// perftestRow is the result row perftest prints under its column header
// ("#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
// for bandwidth, "#bytes #iterations t_min[usec] t_max[usec]
// t_typical[usec] t_avg[usec] …" for latency), by column name.
func parsePerftest(out string) (map[string]float64, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "#bytes") {
			continue
		}
		cols := perftestColumns(l)
		for _, next := range lines[i+1:] {
			f := strings.Fields(next)
			if len(f) == 0 || strings.HasPrefix(f[0], "-") {
				continue
			}
			if len(f) < len(cols) {
				break
			}
			row := map[string]float64{}
			for k, c := range cols {
				var x float64
				if _, err := fmt.Sscan(f[k], &x); err != nil {
					return nil, false
				}
				row[c] = x
			}
			return row, true
		}
	}
	return nil, false
}

// perftestColumns splits perftest's header into column names: words, with
// "BW peak[MB/sec]" and "99% percentile[usec]" kept whole (the unit in
// brackets ends a name).
func perftestColumns(h string) []string {
	var cols []string
	var cur []string
	for _, w := range strings.Fields(h) {
		cur = append(cur, w)
		if strings.HasPrefix(w, "#") || strings.HasSuffix(w, "]") {
			cols = append(cols, strings.Join(cur, " "))
			cur = nil
		}
	}
	return cols
}

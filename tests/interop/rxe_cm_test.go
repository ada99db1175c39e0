package interop

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// cmAttrs are the CM messages a connection and its teardown use, by the
// names of the guest kernel's counter files (cm.c's cm_counter_attr
// names) and of irdma-emu decode ("REQ", …).
var cmAttrs = []string{"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "sidr_req", "sidr_rep", "lap", "apr"}

// cmCountersScript prints every counter of the guest kernel CM's counter
// groups for rxe0 port 1 (cm.c: cm_tx_msgs, cm_tx_retries, cm_rx_msgs,
// cm_rx_duplicates, one file per message) as "group/file value". Linux
// 6.1 puts them under the port's sysfs directory; older kernels under
// the infiniband_cm class: whichever exists.
const cmCountersScript = `n=0
for g in /sys/class/infiniband/rxe0/ports/1/cm_* /sys/class/infiniband_cm/rxe0/1/cm_*; do
	[ -d "$g" ] || continue
	for f in "$g"/*; do echo "${g##*/}/${f##*/} $(cat "$f")"; n=$((n+1)); done
done
[ $n -gt 0 ] || { echo "no CM counters under rxe0"; exit 1; }`

// guestCMCounters reads the guest kernel CM's counters of rxe0 port 1.
func (r *emuRig) guestCMCounters(ctx context.Context) (map[string]uint64, error) {
	res, err := r.v.Run(ctx, cmCountersScript)
	if err != nil {
		return nil, err
	}
	if res.RC != 0 {
		return nil, fmt.Errorf("guest CM counters: rc=%d: %s", res.RC, res.Output)
	}
	return parseCMCounters(res.Output)
}

func parseCMCounters(out string) (map[string]uint64, error) {
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok {
			return nil, fmt.Errorf("guest CM counters: line %q", l)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("guest CM counters: %s=%q: %v", k, v, err)
		}
		m[k] = n
	}
	for _, a := range cmAttrs {
		for _, g := range []string{"cm_tx_msgs", "cm_rx_msgs", "cm_tx_retries", "cm_rx_duplicates"} {
			if _, ok := m[g+"/"+a]; !ok && (a == "req" || a == "rep" || a == "rtu" || a == "dreq" || a == "drep") {
				return nil, fmt.Errorf("guest CM counters: no %s/%s in %q", g, a, out)
			}
		}
	}
	return m, nil
}

// cmSide sums a guest CM counter group over every message.
func cmSum(d map[string]int64, group string) int64 {
	var n int64
	for k, v := range d {
		if strings.HasPrefix(k, group+"/") {
			n += v
		}
	}
	return n
}

// timeoutRetried are the CM messages the guest kernel sends again on a
// response timeout (cm.c gives only REQ, REP, DREQ, LAP and SIDR_REQ a
// timeout_ms and max_cm_retries): their cm_tx_retries are resends on
// the wire.
var timeoutRetried = map[string]bool{"req": true, "rep": true, "dreq": true, "lap": true, "sidr_req": true}

// guestCMSent is what the guest kernel CM put on the wire, by message,
// from its counters. cm.c's cm_send_handler treats every MAD sent with
// no cm_id as a "manually retried" one (the answer to a duplicate: a
// DREP for a DREQ that finds its id in TIMEWAIT, cm_dreq_handler; an
// RTU or MRA for a duplicate REP or REQ) and adds 2 to cm_tx_msgs and 1
// to cm_tx_retries for its one send; a REJ it leaves alone. So for a
// message that is never retried on a timeout, cm_tx_retries counts
// those answers, each sent once.
func guestCMSent(d map[string]int64) (sent map[string]int64, total int64) {
	sent = map[string]int64{}
	for _, a := range cmAttrs {
		n := d["cm_tx_msgs/"+a]
		if !timeoutRetried[a] {
			n -= d["cm_tx_retries/"+a]
		}
		sent[a] = n
		total += n
	}
	return sent, total
}

// guestCMRetried checks that the guest kernel CM neither sent a MAD
// again on a timeout (irdma-emu's answer came in time) nor saw a
// duplicate irdma-emu sent, and logs what the counters show otherwise.
// One duplicate is legitimate: both sides disconnecting at once, the
// guest destroying its id in DREQ_SENT (ib_destroy_cm_id enters
// TIMEWAIT) before irdma-emu's DREQ arrives; cm_dreq_handler counts
// that DREQ a duplicate and answers it with a direct DREP. irdma-emu's
// own retransmissions are counted by cmDrops, which must stay 0, so a
// duplicate DREQ here cannot be one.
func guestCMRetried(t *testing.T, d map[string]int64, what string) {
	t.Helper()
	errs, notes := guestCMRetries(d, what)
	for _, n := range notes {
		t.Log(n)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// guestCMRetries is guestCMRetried's judgement: the faults and the notes.
func guestCMRetries(d map[string]int64, what string) (errs, notes []string) {
	for _, a := range cmAttrs {
		r, dup := d["cm_tx_retries/"+a], d["cm_rx_duplicates/"+a]
		switch {
		case timeoutRetried[a] && r != 0:
			errs = append(errs, fmt.Sprintf("guest CM retried %d %s on a timeout %s (irdma-emu did not answer in time)", r, strings.ToUpper(a), what))
		case a == "drep" && r > d["cm_rx_duplicates/dreq"]:
			errs = append(errs, fmt.Sprintf("guest CM sent %d direct DREPs for %d duplicate DREQs %s", r, d["cm_rx_duplicates/dreq"], what))
		case !timeoutRetried[a] && a != "drep" && r != 0:
			errs = append(errs, fmt.Sprintf("guest CM answered %d duplicates with a direct %s %s (irdma-emu retransmitted)", r, strings.ToUpper(a), what))
		}
		switch {
		case a == "dreq" && dup != 0:
			notes = append(notes, fmt.Sprintf("guest CM: %d DREQs found their id in TIMEWAIT %s (a disconnect from both sides at once)", dup, what))
		case dup != 0:
			errs = append(errs, fmt.Sprintf("guest CM received %d duplicate %s %s (irdma-emu retransmitted)", dup, strings.ToUpper(a), what))
		}
	}
	return errs, notes
}

// cmDrops are irdma-emu's CM counters that a clean run between two
// correct CMs leaves alone: a MAD it could not parse or place, a
// retransmission (nobody's answer went missing on a lossless tap), a
// reject or a stale connection.
func cmDrops(c, p daemon.CMStats) map[string]int64 {
	d := map[string]int64{}
	for _, x := range []struct {
		name string
		a, b uint64
	}{
		{"retransmits", c.Retransmits, p.Retransmits},
		{"timeouts", c.Timeouts, p.Timeouts},
		{"drop_truncated", c.DropTruncated, p.DropTruncated},
		{"drop_bad_header", c.DropBadHeader, p.DropBadHeader},
		{"drop_bad_attribute", c.DropBadAttribute, p.DropBadAttribute},
		{"drop_unknown_comm_id", c.DropUnknownCommID, p.DropUnknownCommID},
		{"drop_unexpected", c.DropUnexpected, p.DropUnexpected},
		{"drop_duplicate", c.DropDuplicate, p.DropDuplicate},
		{"drop_no_resources", c.DropNoResources, p.DropNoResources},
		{"send_errors", c.SendErrors, p.SendErrors},
		{"rej_sent", c.REJSent, p.REJSent},
		{"rej_received", c.REJReceived, p.REJReceived},
		{"stale_rejected", c.StaleRejected, p.StaleRejected},
		{"gsi.send_errors", c.GSI.SendErrors, p.GSI.SendErrors},
		{"gsi.no_send_buffer", c.GSI.NoSendBuffer, p.GSI.NoSendBuffer},
		{"gsi.recv_errors", c.GSI.RecvErrors, p.GSI.RecvErrors},
		{"gsi.short", c.GSI.Short, p.GSI.Short},
		{"gsi.resolve_fails", c.GSI.ResolveFails, p.GSI.ResolveFails},
	} {
		if x.a != x.b {
			d[x.name] = int64(x.a - x.b)
		}
	}
	return d
}

// cmRig follows both CMs' counters from scenario to scenario.
type cmRig struct {
	*emuRig
	base, last       map[string]uint64 // the guest CM's counters
	emuBase, emuLast daemon.CMStats
	conns            int // connections the scenarios made
	// rejected counts the attempts perftest lost to its own race
	// (rejectedAttempt): each a REQ answered by a REJ, and irdma-emu's
	// rej_sent or rej_received moved by one.
	rejected    int
	rejCounters map[string]int64
}

// perftestRejected reports whether a perftest -R run failed because its
// client's REQ for the test QP reached the server before the server
// listened again: REJECTED with reason 8 (invalid service ID, IBTA Vol 1
// Table 112), the kernel CM's answer for no listener (and ours). perftest
// connects the test QP right after its handshake over the first
// connection, while the server only then creates its listening id
// (perftest_communication.c create_rdma_cm_connection: ctx_hand_shake,
// then rdma_cm_client_connection / rdma_cm_server_connection); a slow
// server (the TCG guest) loses that race (once in 8 runs, with rxe the
// server). perftest means to retry the connect (rdma_cm_client_connection
// tries 10 times); Debian's 4.5 client through irdma-emu instead died of
// SIGSEGV right after printing "Failed to connect RDMA CM events." —
// most likely its retry path (rdma_cm_destroy_cma, then the retry on the
// same nodes), which upstream reports broken ("connect retry fails",
// linux-rdma/perftest issue #93: the race and the failed retry, on RoCE
// too); that it is not the preload is not established (docs/cm.md).
func perftestRejected(err error) bool {
	return err != nil && strings.Contains(err.Error(), "RDMA_CM_EVENT_REJECTED; error: 8")
}

// rejectedAttempt checks both CMs over a perftest attempt lost to that
// race, and starts the next attempt from fresh counters: the server's CM
// sent exactly one REJ and the client's received it, every MAD one side
// sent the other received, no retry or duplicate; irdma-emu's CM moved
// nothing but the one REJ counter.
func (c *cmRig) rejectedAttempt(t *testing.T, rxeServer bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := c.guestCMCounters(ctx)
	if err != nil {
		t.Fatalf("%v", err)
	}
	s, err := c.ctl.Stats(-1)
	if err != nil {
		t.Fatalf("irdma-emu stats: %v", err)
	}
	d := delta(c.last, g)
	e, ep := s.CM, c.emuLast
	c.last, c.emuLast = g, e
	c.rejected++
	// The attempt may have made perftest's first connection (its
	// communication context) before the rejected REQ: the whole-run
	// count of REQs, REPs and RTUs on the wire includes it. The guest
	// CM's RTUs tell how many there were.
	c.conns += int(d["cm_rx_msgs/rtu"] + d["cm_tx_msgs/rtu"])
	t.Logf("the rejected attempt: guest CM counter deltas %v", d)
	dr := cmDrops(e, ep)
	guestRej, emuRej := "cm_rx_msgs/rej", "rej_sent"
	if rxeServer {
		guestRej, emuRej = "cm_tx_msgs/rej", "rej_received"
	}
	if d[guestRej] != 1 || dr[emuRej] != 1 || len(dr) != 1 {
		t.Errorf("a rejected attempt: guest CM %s %d, irdma-emu CM %v; want one REJ, nothing else", guestRej, d[guestRej], dr)
	}
	c.rejCounters[emuRej]++
	guestCMRetried(t, d, "in the rejected attempt")
	if _, want := guestCMSent(d); int64(e.MADsReceived-ep.MADsReceived) != want {
		t.Errorf("irdma-emu's CM received %d MADs; the guest CM sent %d", e.MADsReceived-ep.MADsReceived, want)
	}
	if got, want := cmSum(d, "cm_rx_msgs"), int64(e.MADsSent-ep.MADsSent); got != want {
		t.Errorf("the guest CM received %d MADs; irdma-emu's CM sent %d", got, want)
	}
}

// checkCM compares the guest kernel CM's counters over one scenario
// (conns RDMA CM connections, their client rxe when rxeClient) with
// irdma-emu's: each connection's REQ, REP and RTU sent once, by the
// right side, and taken by the other; no MRA or REJ, no retry or
// duplicate on either side but the crossed DREQ guestCMRetried allows;
// every MAD one side sent (guestCMSent) counted received by the other
// (the guest CM counts a MAD only once its MAD layer delivered it, so a
// MAD the kernel refused would be missing), and none of irdma-emu's drop
// counters moved.
func (c *cmRig) checkCM(t *testing.T, rxeClient bool, conns int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := c.guestCMCounters(ctx)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	s, err := c.ctl.Stats(-1)
	if err != nil {
		t.Errorf("irdma-emu stats: %v", err)
		return
	}
	d := delta(c.last, g)
	e, ep := s.CM, c.emuLast
	c.last, c.emuLast = g, e
	c.conns += conns
	t.Logf("guest CM counter deltas: %v", d)
	t.Logf("irdma-emu CM: mads received %d sent %d, after destroy %d; QP1 received %d sent %d; ids now %d, timewaits %d",
		e.MADsReceived-ep.MADsReceived, e.MADsSent-ep.MADsSent, e.AfterDestroy-ep.AfterDestroy,
		e.GSI.Received-ep.GSI.Received, e.GSI.Sent-ep.GSI.Sent, e.IDs, e.Timewaits)
	active, passive := "cm_rx_msgs", "cm_tx_msgs" // irdma-emu the client
	if rxeClient {
		active, passive = passive, active
	}
	for _, w := range []struct {
		key  string
		want int64
	}{
		{active + "/req", int64(conns)}, {passive + "/rep", int64(conns)}, {active + "/rtu", int64(conns)},
		{passive + "/req", 0}, {active + "/rep", 0}, {passive + "/rtu", 0},
	} {
		if d[w.key] != w.want {
			t.Errorf("guest CM %s moved by %d, want %d (%d connections, rxe the %s)", w.key, d[w.key], w.want, conns, map[bool]string{true: "client", false: "server"}[rxeClient])
		}
	}
	// Each connection ends with a DREQ, from either side or from both at
	// once (then each side answers the other's DREQ or not, per cm.c's
	// cm_dreq_handler in DREQ_SENT): at least one a connection.
	if n := d["cm_tx_msgs/dreq"] + d["cm_rx_msgs/dreq"]; n < int64(conns) {
		t.Errorf("guest CM: %d DREQs either way for %d connections: not every connection was disconnected", n, conns)
	}
	for _, a := range []string{"mra", "rej", "sidr_req", "sidr_rep", "lap", "apr"} {
		if d["cm_tx_msgs/"+a] != 0 || d["cm_rx_msgs/"+a] != 0 {
			t.Errorf("guest CM %s: sent %d, received %d; want none", a, d["cm_tx_msgs/"+a], d["cm_rx_msgs/"+a])
		}
	}
	guestCMRetried(t, d, "in the scenario")
	if _, want := guestCMSent(d); int64(e.MADsReceived-ep.MADsReceived) != want {
		t.Errorf("irdma-emu's CM received %d MADs; the guest CM sent %d", e.MADsReceived-ep.MADsReceived, want)
	}
	if got, want := cmSum(d, "cm_rx_msgs"), int64(e.MADsSent-ep.MADsSent); got != want {
		t.Errorf("the guest CM received %d MADs; irdma-emu's CM sent %d", got, want)
	}
	if dr := cmDrops(e, ep); len(dr) != 0 {
		t.Errorf("irdma-emu CM counters moved: %v", dr)
	}
}

// TestRxeEmuCM runs unmodified librdmacm programs between rdma_rxe and
// the guest kernel's RDMA CM (cma.c, cm.c) on one side and irdma-emu's CM
// (rdmacm/, cm/) on the host: rping with data verification and perftest
// with -R, each side once the server. After each scenario rxe's counters
// (checkRxeCounters) and both CMs' counters (checkCM) are compared; at the
// end the capture's CM MADs, by message and direction, must equal what
// the guest CM counted sent and received, and every packet's ICRC is
// checked (checkCapture).
func TestRxeEmuCM(t *testing.T) {
	suiteStart := time.Now()
	guest.RequireGuest(t)
	var missing []string
	for _, p := range []struct{ prog, pkg string }{
		{"rping", "rdmacm-utils"}, {"ib_write_bw", "perftest"},
		{"gcc", "gcc"}, // irdma-emu exec builds its preload on first use
	} {
		if _, err := exec.LookPath(p.prog); err != nil {
			missing = append(missing, fmt.Sprintf("%s is missing (Debian package %s)", p.prog, p.pkg))
		}
	}
	if len(missing) > 0 {
		guest.MissingLoudly(t, "TestRxeEmuCM cannot run: "+strings.Join(missing, "; "))
	}
	// One vCPU, as TestRxeEmu (the host side needs the other core).
	v := guest.StartT(t, guest.Config{Capture: true, SMP: 1})
	v.WaitReadyT(t, 5*time.Minute)
	r := startEmu(t, v)
	c := &cmRig{emuRig: r, emuBase: r.lastStats.CM, emuLast: r.lastStats.CM, rejCounters: map[string]int64{}}
	{
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		g, err := r.guestCMCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.base, c.last = g, g
		where, _ := r.v.Run(ctx, "ls -d /sys/class/infiniband/rxe0/ports/1/cm_* /sys/class/infiniband_cm/rxe0/1/cm_* 2>/dev/null")
		t.Logf("guest CM counters: %d, in %s", len(g), strings.Join(strings.Fields(where.Output), " "))
	}
	t.Logf("DURATION guest and irdma-emu ready: %v", time.Since(suiteStart).Round(time.Millisecond))

	// rping: 20 exchanges of its 64-byte ping (-S default), the client
	// checking every byte it reads back (-V), both printing each ping
	// (-v). rping's server ends with its one connection.
	const rpingCount = 20
	for _, rxeServer := range []bool{true, false} {
		t.Run("rping/"+roleName(rxeServer), func(t *testing.T) {
			defer c.checkCM(t, !rxeServer, 1)
			defer r.checkRxeCounters(t)
			srv := fmt.Sprintf("rping -s -a 0.0.0.0 -C %d -v", rpingCount)
			cli := fmt.Sprintf("rping -c -C %d -v -V", rpingCount)
			p := pair{name: "rping", rxeServer: rxeServer, rdmaCM: true, addrFlag: "-a"}
			if rxeServer {
				p.guestCmd, p.hostArgv = srv, strings.Fields(cli)
			} else {
				p.guestCmd, p.hostArgv = cli, strings.Fields(srv)
			}
			start := time.Now()
			res := r.runPair(t, p)
			for _, side := range []struct{ name, out, prefix string }{
				{"server", res.server, "server ping data: "}, {"client", res.client, "ping data: "},
			} {
				n := 0
				for _, l := range strings.Split(side.out, "\n") {
					if strings.HasPrefix(strings.TrimSpace(l), side.prefix) {
						n++
					}
				}
				if n != rpingCount {
					t.Errorf("rping %s printed %d pings, want %d:\n%s", side.name, n, rpingCount, side.out)
				}
				if strings.Contains(side.out, "mismatch") || strings.Contains(side.out, "error") {
					t.Errorf("rping %s reports an error:\n%s", side.name, side.out)
				}
			}
			t.Logf("RESULT %s: %d pings verified, %v", t.Name(), rpingCount, time.Since(start).Round(time.Millisecond))
		})
	}

	// ib_write_bw -R: perftest connects with the RDMA CM (and exchanges
	// its parameters over the connection, no TCP socket). As in
	// TestRxeEmu: 100 iterations of 64 KiB, -F, and perftest's figures
	// judged by unclocked() in the TCG guest.
	for _, rxeServer := range []bool{true, false} {
		t.Run("perftest/ib_write_bw-R/"+roleName(rxeServer), func(t *testing.T) { c.writeBWScenario(t, rxeServer) })
	}

	// The capture: what went over the tap, by CM message and direction,
	// against what the guest CM counted over the run, and irdma-emu's CM
	// totals (taken before checkCapture stops the daemon).
	final, err := r.ctl.Stats(-1)
	if err != nil {
		t.Fatalf("irdma-emu stats: %v", err)
	}
	t.Run("capture", func(t *testing.T) { r.checkCapture(t) })
	t.Run("cm_capture", func(t *testing.T) { c.checkCMCapture(t, final.CM) })
	t.Logf("DURATION interop CM suite with irdma-emu: %v", time.Since(suiteStart).Round(time.Millisecond))
}

// checkCMCapture counts the CM MADs of the tap's capture by message and
// direction and compares them with the guest CM's counters over the run
// (sent: cm_tx_msgs, received: cm_rx_msgs) and irdma-emu's CM totals.
func (c *cmRig) checkCMCapture(t *testing.T, emu daemon.CMStats) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, "decode", "--json", c.v.Capture().File).Output()
	if err != nil {
		t.Fatalf("irdma-emu decode: %v", err)
	}
	pkts, _, err := parseDecode(out)
	if err != nil {
		t.Fatal(err)
	}
	host, guestAddr := c.v.HostAddr(), c.v.GuestAddr()
	toGuest, toHost := map[string]int64{}, map[string]int64{}
	var nToGuest, nToHost int64
	for _, p := range pkts {
		if p.CM == nil {
			continue
		}
		if p.CM.Error != "" {
			t.Errorf("frame %d: CM MAD %s: %s", p.Frame, p.CM.Attr, p.CM.Error)
		}
		a := strings.ToLower(p.CM.Attr)
		switch {
		case p.src == host && p.dst == guestAddr:
			toGuest[a]++
			nToGuest++
		case p.src == guestAddr && p.dst == host:
			toHost[a]++
			nToHost++
		}
	}
	// tshark's InfiniBand dissector, which shares nothing with ours, must
	// read the same MADs (CM class 0x07) and find none malformed. The
	// attribute IDs are IBTA Vol 1 §12.6 (Table 106's REQ 0x0010 … APR
	// 0x001A).
	ibtaAttr := map[string]string{"0x0010": "req", "0x0011": "mra", "0x0012": "rej", "0x0013": "rep",
		"0x0014": "rtu", "0x0015": "dreq", "0x0016": "drep", "0x0017": "sidr_req", "0x0018": "sidr_rep",
		"0x0019": "lap", "0x001a": "apr"}
	lines, err := guest.Tshark(ctx, c.v.Capture().File, "infiniband.mad", "ip.src", "infiniband.mad.mgmtclass", "infiniband.mad.attributeid")
	if err != nil {
		t.Errorf("tshark: %v", err)
	}
	tsGuest, tsHost := map[string]int64{}, map[string]int64{}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[1] != "0x07" {
			t.Errorf("tshark: a MAD that is not the CM's: %q", l)
			continue
		}
		a, ok := ibtaAttr[strings.ToLower(f[2])]
		if !ok {
			t.Errorf("tshark: CM attribute %s", f[2])
			continue
		}
		if f[0] == host.String() {
			tsGuest[a]++
		} else {
			tsHost[a]++
		}
	}
	for _, a := range cmAttrs {
		if tsGuest[a] != toGuest[a] || tsHost[a] != toHost[a] {
			t.Errorf("%s: tshark reads %d from irdma-emu and %d from rxe, irdma-emu decode %d and %d", a, tsGuest[a], tsHost[a], toGuest[a], toHost[a])
		}
	}
	if bad, err := guest.Tshark(ctx, c.v.Capture().File, "infiniband.mad && _ws.malformed"); err != nil || len(bad) != 0 {
		t.Errorf("tshark: malformed MADs (%v):\n%s", err, strings.Join(bad, "\n"))
	}

	g := c.last
	{
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if cur, err := c.guestCMCounters(ctx); err == nil {
			g = cur
		} else {
			t.Errorf("%v", err)
		}
		cancel()
	}
	d := delta(c.base, g)
	sent, _ := guestCMSent(d)
	var rows []string
	for _, a := range cmAttrs {
		if toGuest[a] == 0 && toHost[a] == 0 && d["cm_rx_msgs/"+a] == 0 && d["cm_tx_msgs/"+a] == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("%s: irdma-emu→rxe %d (guest CM received %d), rxe→irdma-emu %d (guest CM sent %d)",
			strings.ToUpper(a), toGuest[a], d["cm_rx_msgs/"+a], toHost[a], sent[a]))
		if toGuest[a] != d["cm_rx_msgs/"+a] {
			t.Errorf("%s: the capture has %d from irdma-emu, the guest CM received %d", a, toGuest[a], d["cm_rx_msgs/"+a])
		}
		if toHost[a] != sent[a] {
			t.Errorf("%s: the capture has %d from rxe, the guest CM sent %d (cm_tx_msgs %d, direct answers to duplicates counted twice there)", a, toHost[a], sent[a], d["cm_tx_msgs/"+a])
		}
	}
	sort.Strings(rows)
	t.Logf("CM MADs over the run (%d connections):\n%s", c.conns, strings.Join(rows, "\n"))
	for _, k := range []string{"req", "rep", "rtu"} {
		want := int64(c.conns)
		if k == "req" {
			want += int64(c.rejected) // each rejected attempt's REQ
		}
		if n := toGuest[k] + toHost[k]; n != want {
			t.Errorf("%s: %d on the wire for %d connections and %d rejected attempts", strings.ToUpper(k), n, c.conns, c.rejected)
		}
	}
	if n := toGuest["rej"] + toHost["rej"]; n != int64(c.rejected) {
		t.Errorf("REJ: %d on the wire, %d rejected attempts", n, c.rejected)
	}
	if got := int64(emu.MADsSent - c.emuBase.MADsSent); got != nToGuest {
		t.Errorf("irdma-emu's CM sent %d MADs; the capture has %d", got, nToGuest)
	}
	if got := int64(emu.MADsReceived - c.emuBase.MADsReceived); got != nToHost {
		t.Errorf("irdma-emu's CM received %d MADs; the capture has %d from rxe", got, nToHost)
	}
	guestCMRetried(t, d, "over the run")
	dr := cmDrops(emu, c.emuBase)
	for k, n := range c.rejCounters {
		if dr[k] == n {
			delete(dr, k)
		}
	}
	if len(dr) != 0 {
		t.Errorf("irdma-emu CM counters over the run: %v (rejected attempts: %v)", dr, c.rejCounters)
	}
}

// perftestRaceTries bounds the attempts of a perftest -R scenario that
// perftest's own race may lose (perftestRejected). Each lost attempt is
// checked on both CMs (rejectedAttempt); the faster the client reaches its
// second connection, the more often it wins the race against the server
// listening again, so one retry is not always enough (two lost in a row
// were seen once it sent its data as segmentation offload sends).
const perftestRaceTries = 4

// writeBWScenario is ib_write_bw -R with rxeServer's roles, run again
// while perftest's own race loses it (perftestRejected), up to
// perftestRaceTries attempts.
func (c *cmRig) writeBWScenario(t *testing.T, rxeServer bool) {
	r := c.emuRig
	// perftest -R makes two connections (two REQs a run on the
	// wire): one for its parameter exchange and results (the
	// communication context perftest_communication.c's
	// create_comm_struct sets up over the RDMA CM), one for
	// the test's QP.
	defer c.checkCM(t, !rxeServer, 2)
	defer r.checkRxeCounters(t)
	const common = "-R -F -n 100"
	p := pair{
		name:      "ib_write_bw " + common,
		guestCmd:  "ib_write_bw -d rxe0 " + common,
		hostArgv:  append([]string{"ib_write_bw", "-d", emuDev}, strings.Fields(common)...),
		rxeServer: rxeServer,
		rdmaCM:    true,
	}
	res, err := r.tryPair(t, p)
	for try := 2; try <= perftestRaceTries && perftestRejected(err); try++ {
		t.Logf("PERFTEST RACE: the client's second REQ came before the server listened again (REJ, invalid service ID):\n%v\nrunning the scenario again (attempt %d of %d)", err, try, perftestRaceTries)
		r.checkRxeCounters(t)
		c.rejectedAttempt(t, rxeServer)
		res, err = r.tryPair(t, p)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.checkPerftest(t, "ib_write_bw", true, res)
}

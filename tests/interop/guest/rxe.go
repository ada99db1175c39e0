package guest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RxeCounters reads rdma_rxe's hardware counters of rxe0 port 1 in the
// guest (`rdma statistic show link rxe0/1`): sent_pkts, rcvd_pkts,
// duplicate_request, out_of_seq_request, rcvd_seq_err, ack_deferred,
// retry_exceeded_err, send_err, … Take them before and after a scenario
// and compare with CounterDelta.
func (v *VM) RxeCounters(ctx context.Context) (map[string]uint64, error) {
	r, err := v.Run(ctx, "rdma statistic show link rxe0/1")
	if err != nil {
		return nil, err
	}
	if r.RC != 0 {
		return nil, fmt.Errorf("rdma statistic: rc=%d: %s", r.RC, r.Output)
	}
	return ParseRdmaStatistic(r.Output)
}

// ParseRdmaStatistic parses "link rxe0/1 name value name value …".
func ParseRdmaStatistic(out string) (map[string]uint64, error) {
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "link" {
		return nil, fmt.Errorf("rdma statistic: unexpected output %q", out)
	}
	m := map[string]uint64{}
	for i := 2; i+1 < len(f); i += 2 {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("rdma statistic: %s=%q: %v", f[i], f[i+1], err)
		}
		m[f[i]] = n
	}
	return m, nil
}

// CounterDelta returns after-before for every counter that changed.
func CounterDelta(before, after map[string]uint64) map[string]int64 {
	d := map[string]int64{}
	for k, a := range after {
		if x := int64(a) - int64(before[k]); x != 0 {
			d[k] = x
		}
	}
	return d
}

// Dmesg returns the guest kernel's log.
func (v *VM) Dmesg(ctx context.Context) (string, error) {
	r, err := v.Run(ctx, "dmesg")
	if err != nil {
		return "", err
	}
	return r.Output, nil
}

// EnableRxeDebug turns on rdma_rxe's pr_debug messages (its timers, QP
// state changes, and a per-packet state trace: see RxeDebugControl); they
// appear in Dmesg. rdma_rxe of Linux 6.1 has no message for a packet it
// drops in rxe_rcv (bad ICRC, addresses, QP state, keys), even with debug
// on: its rcvd_pkts counter, which counts only accepted packets, tells.
func (v *VM) EnableRxeDebug(ctx context.Context) error {
	r, err := v.Run(ctx, "rxe_debug_on && grep -c rdma_rxe /sys/kernel/debug/dynamic_debug/control")
	if err != nil {
		return err
	}
	if r.RC != 0 {
		return fmt.Errorf("enabling rdma_rxe dynamic debug: rc=%d: %s", r.RC, r.Output)
	}
	return nil
}

// RxeDebugControl writes dynamic debug queries for rdma_rxe (such as
// `module rdma_rxe format "state = " -p`, which silences the per-packet
// state trace of its requester, completer and responder while the other
// messages stay on) and returns the number of rdma_rxe's debug sites then
// enabled. The debugfs mount is made if needed.
func (v *VM) RxeDebugControl(ctx context.Context, queries ...string) (int, error) {
	var sb strings.Builder
	sb.WriteString("grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs debugfs /sys/kernel/debug || exit 1\n")
	for _, q := range queries {
		if strings.ContainsAny(q, "'\n") {
			return 0, fmt.Errorf("dynamic debug query %q: no quotes or newlines", q)
		}
		fmt.Fprintf(&sb, "echo '%s' >/sys/kernel/debug/dynamic_debug/control || exit 1\n", q)
	}
	sb.WriteString("grep rdma_rxe /sys/kernel/debug/dynamic_debug/control | grep -c ' =p '\n")
	r, err := v.Run(ctx, sb.String())
	if err != nil {
		return 0, err
	}
	// grep -c exits 1 when it counts 0 lines.
	n, perr := strconv.Atoi(strings.TrimSpace(r.Output))
	if perr != nil || (r.RC != 0 && n != 0) {
		return 0, fmt.Errorf("rdma_rxe dynamic debug: rc=%d: %s", r.RC, r.Output)
	}
	return n, nil
}

var gidLine = regexp.MustCompile(`GID\[\s*(\d+)\]:\s+(\S+)`)

// ParseGIDs returns the GID table printed by `ibv_devinfo -v` (index ->
// GID as printed, e.g. "::ffff:10.99.0.2").
func ParseGIDs(devinfo string) map[int]string {
	g := map[int]string{}
	for _, m := range gidLine.FindAllStringSubmatch(devinfo, -1) {
		i, _ := strconv.Atoi(m[1])
		g[i] = strings.TrimSuffix(m[2], ",")
	}
	return g
}

package interop

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// guestState is what the guest says about the traffic it took: rxe0's
// counters, the UDP layer's counters (/proc/net/snmp), and the kernel log
// since the previous look.
type guestState struct {
	rxe map[string]uint64
	udp map[string]uint64
	// eth0 are the guest NIC's receive counters (rx_packets, rx_dropped,
	// rx_missed_errors, rx_fifo_errors).
	eth0 map[string]uint64
	// kmsgLines is the number of kernel log lines since the previous look;
	// kmsgShapes are those lines with every number replaced by N, counted
	// (a histogram that stays short however much rxe's debug printed).
	kmsgLines  int
	kmsgShapes map[string]int
}

// guestStateScript prints rxe0's counters, the Udp lines of
// /proc/net/snmp, eth0's receive counters and a histogram of the kernel
// log lines printed since the last call (which it clears), each section
// after a "@@" line.
const guestStateScript = `rdma statistic show link rxe0/1
echo @@udp
grep '^Udp:' /proc/net/snmp
echo @@eth0
cd /sys/class/net/eth0/statistics && for f in rx_packets rx_dropped rx_missed_errors rx_fifo_errors; do echo "$f $(cat $f)"; done
echo @@kmsg
dmesg -c >/tmp/kmsg.cur 2>&1
wc -l </tmp/kmsg.cur
sed -e 's/^\[[ 0-9.]*\] //' -e 's/[0-9][0-9]*/N/g' -e 's/0xN[0-9a-f]*/N/g' /tmp/kmsg.cur | sort | uniq -c | sort -rn
`

func (r *emuRig) guestState(ctx context.Context) (guestState, error) {
	res, err := r.v.Run(ctx, guestStateScript)
	if err != nil {
		return guestState{}, err
	}
	if res.RC != 0 {
		return guestState{}, fmt.Errorf("guest state script: rc=%d\n%s", res.RC, res.Output)
	}
	return parseGuestState(res.Output)
}

func parseGuestState(out string) (guestState, error) {
	st := guestState{udp: map[string]uint64{}, eth0: map[string]uint64{}, kmsgShapes: map[string]int{}}
	rxePart, rest, ok := strings.Cut(out, "@@udp\n")
	udpPart, rest, ok2 := strings.Cut(rest, "@@eth0\n")
	ethPart, kmsgPart, ok3 := strings.Cut(rest, "@@kmsg\n")
	if !ok || !ok2 || !ok3 {
		return st, fmt.Errorf("guest state: unexpected output %q", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(ethPart), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			st.eth0[k], _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	var err error
	if st.rxe, err = guest.ParseRdmaStatistic(rxePart); err != nil {
		return st, err
	}
	udp := strings.Split(strings.TrimSpace(udpPart), "\n")
	if len(udp) != 2 {
		return st, fmt.Errorf("guest state: /proc/net/snmp Udp lines %q", udpPart)
	}
	names, vals := strings.Fields(udp[0]), strings.Fields(udp[1])
	for i := 1; i < len(names) && i < len(vals); i++ {
		n, _ := strconv.ParseUint(vals[i], 10, 64)
		st.udp[names[i]] = n
	}
	sc := bufio.NewScanner(strings.NewReader(kmsgPart))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	first := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if first {
			st.kmsgLines, _ = strconv.Atoi(line)
			first = false
			continue
		}
		n, shape, _ := strings.Cut(line, " ")
		c, _ := strconv.Atoi(n)
		st.kmsgShapes[shape] += c
	}
	return st, nil
}

func delta(before, after map[string]uint64) map[string]int64 {
	return guest.CounterDelta(before, after)
}

// rxeBlame are rxe0's counters that count something only irdma-emu can
// have caused (nothing is lost from the guest to the host): a PSN sequence
// or RNR NAK from irdma-emu (rcvd_seq_err, rcvd_rnr_err), and rxe's
// requester giving up (retry_exceeded_err, retry_rnr_exceeded_err).
// out_of_seq_request (a request of irdma-emu's after a gap) is irdma-emu's
// doing too unless the tap dropped frames the guest was too slow to take.
// duplicate_request (irdma-emu retransmitted) and completer_retry_err (rxe
// retried) are judged by the capture (analyzeRetries): in a TCG guest
// both happen without anyone's fault.
var rxeBlame = []string{"rcvd_seq_err", "rcvd_rnr_err", "retry_exceeded_err", "retry_rnr_exceeded_err"}

// kmsgBlame are the shapes of rdma_rxe's messages that would say it
// dropped or refused what irdma-emu sent, and kernel warnings. rdma_rxe of
// Linux 6.1 drops a packet whose ICRC, addresses, QP state or keys are
// wrong without a message, even with its debug messages on (rxe_rcv and
// hdr_check just free the skb), so its rcvd_pkts counter is the proof
// that every packet was accepted (checkCapture); the log catches the rest.
var kmsgBlame = regexp.MustCompile(`(?i)crc|dropped|error sending|moved to error|\bbad\b|invalid|fail|unexpected|warn|call trace|\bbug\b`)

// checkRxeCounters reads the guest's state after a scenario and fails t
// if rxe counted anything only irdma-emu can have caused since the
// previous scenario, or its kernel log complained. It logs irdma-emu's own
// counters over the scenario too. Scenarios defer it, so that it also runs
// (and the next scenario starts from fresh counters) when one fails.
func (r *emuRig) checkRxeCounters(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	st, err := r.guestState(ctx)
	if err != nil {
		t.Errorf("guest state: %v", err)
		return
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("reading the guest's counters and log took %v", d.Round(time.Millisecond))
	}
	tap, err := r.tapStats()
	if err != nil {
		t.Errorf("tap statistics: %v", err)
		return
	}
	d := delta(r.last.rxe, st.rxe)
	ud, ed := delta(r.last.udp, st.udp), delta(r.last.eth0, st.eth0)
	tapDropped := tap.txDropped - r.lastTap.txDropped
	r.last, r.lastTap = st, tap
	t.Logf("rxe0 counter deltas: %v; guest UDP %v, eth0 %v; tap drops %d", d, ud, ed, tapDropped)
	for _, c := range rxeBlame {
		if d[c] != 0 {
			t.Errorf("rxe0 %s moved by %d", c, d[c])
		}
	}
	if d["out_of_seq_request"] != 0 && tapDropped == 0 && ed["rx_dropped"] == 0 {
		t.Errorf("rxe0 out_of_seq_request moved by %d with no frame lost on the way: irdma-emu sent requests out of order", d["out_of_seq_request"])
	}
	if d["rcvd_pkts"] <= 0 || d["sent_pkts"] <= 0 {
		t.Errorf("rxe0 sent %d and received %d packets: nothing went over the wire", d["sent_pkts"], d["rcvd_pkts"])
	}
	r.checkKmsg(t, st)
	if s, err := r.ctl.Stats(-1); err == nil {
		c, p := s.Port.Counters, r.lastStats.Port.Counters
		t.Logf("irdma-emu: tx %d rx %d packets, retransmissions %d, timeouts %d, rnr retries %d, naks sent %v received %v, out of sequence %d, duplicates %d, icrc failed %d, drops %v",
			c.TxPackets-p.TxPackets, c.RxPackets-p.RxPackets, c.Retransmissions-p.Retransmissions, c.Timeouts-p.Timeouts,
			c.RNRRetries-p.RNRRetries, subMap(c.NAKsSent, p.NAKsSent), subMap(c.NAKsReceived, p.NAKsReceived),
			c.OutOfSequence-p.OutOfSequence, c.DuplicateRequests-p.DuplicateRequests,
			c.ICRC.Failed-p.ICRC.Failed, subMap(c.Drops, p.Drops))
		if c.ICRC.Failed != p.ICRC.Failed {
			t.Errorf("irdma-emu dropped %d of rxe's packets for a bad ICRC", c.ICRC.Failed-p.ICRC.Failed)
		}
		r.lastStats = s
	} else {
		t.Errorf("irdma-emu stats: %v", err)
	}
}

func (r *emuRig) checkKmsg(t *testing.T, st guestState) {
	t.Helper()
	var shapes []string
	for s := range st.kmsgShapes {
		shapes = append(shapes, s)
	}
	sort.Slice(shapes, func(i, j int) bool { return st.kmsgShapes[shapes[i]] > st.kmsgShapes[shapes[j]] })
	var top []string
	for i, s := range shapes {
		if i == 12 {
			top = append(top, fmt.Sprintf("… %d more shapes", len(shapes)-i))
			break
		}
		top = append(top, fmt.Sprintf("%6d %s", st.kmsgShapes[s], s))
	}
	t.Logf("guest kernel log: %d lines since the last look; by shape:\n%s", st.kmsgLines, strings.Join(top, "\n"))
	for _, s := range shapes {
		if kmsgBlame.MatchString(s) {
			t.Errorf("guest kernel log: %d× %q", st.kmsgShapes[s], s)
		}
	}
	r.kmsgTotal += st.kmsgLines
}

func subMap(a, b map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range a {
		if v != b[k] {
			d[k] = v - b[k]
		}
	}
	return d
}

// checkDevinfo checks the emulated port as `irdma-emu devinfo -v` shows
// it: ACTIVE on the tap, GID 1 the tap's IPv4-mapped address, active MTU
// 1024 (a 1500-byte link), and the root default transport that verifies
// every received ICRC.
func (r *emuRig) checkDevinfo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := r.v.Netns().Command(ctx, "env", "IRDMA_EMU_RUN_DIR="+r.runDir, r.bin, "devinfo", "-v", "--device", r.dev)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("irdma-emu devinfo: %v\n%s", err, out)
	}
	t.Logf("irdma-emu devinfo -v (excerpt):\n%s", grepLines(string(out), "state:", "active_mtu", "GID[", "transport_mode", "icrc_verification", "link_addrs", "netdev:"))
	want := []string{
		"PORT_ACTIVE (4)",
		"active_mtu:\t\t1024 (3)",
		"GID[  1]:\t\t::ffff:" + r.v.HostAddr().String() + ", RoCE v2",
		"transport_mode:\t\t\tsend=udp,recv=packet",
		"every received frame verified",
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("irdma-emu devinfo -v lacks %q", w)
		}
	}
}

func grepLines(s string, subs ...string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// decodeSummary is the last object of `irdma-emu decode --json`.
type decodeSummary struct {
	Packets   int `json:"roce_packets"`
	ICRCOK    int `json:"icrc_ok"`
	ICRCBad   int `json:"icrc_bad"`
	Malformed int `json:"malformed"`
	Other     int `json:"other_frames"`
}

// checkCapture stops the tap's capture and judges the whole run from it:
//   - `irdma-emu decode` finds every RoCEv2 packet of both sides with a
//     good ICRC;
//   - rxe accepted every packet irdma-emu sent: its rcvd_pkts counts only
//     packets that passed its header and ICRC checks, and must equal what
//     the guest's UDP layer handed it, which with what the tap and the
//     guest's NIC dropped (a slow guest) must add up to what the capture
//     shows going to the guest;
//   - irdma-emu received and verified every packet rxe sent;
//   - no retransmission, NAK or late answer is irdma-emu's fault
//     (analyzeRetries).
func (r *emuRig) checkCapture(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := r.guestState(ctx)
	if err != nil {
		t.Fatalf("guest state: %v", err)
	}
	r.checkKmsg(t, st)
	tap, err := r.tapStats()
	if err != nil {
		t.Fatal(err)
	}
	stats, err := r.ctl.Stats(-1)
	if err != nil {
		t.Fatalf("irdma-emu stats: %v", err)
	}
	// The daemon flushes its capture every second and at exit: stop it
	// (SIGTERM, a clean shutdown) before reading the capture.
	if err := r.daemon.Stop(20 * time.Second); err != nil {
		t.Errorf("irdma-emu run did not shut down cleanly: %v", err)
	}
	capt := r.v.Capture()
	if err := capt.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("tcpdump: %s", capt.Summary())
	if !regexp.MustCompile(`(?m)^\s*0 packets dropped by kernel`).MatchString(capt.Summary()) {
		t.Errorf("tcpdump dropped packets: %s", capt.Summary())
	}
	// Packets the filter took that tcpdump never wrote: it was stopped
	// while they still waited in its ring (guest.Capture.Stop).
	if m := regexp.MustCompile(`(?m)^\s*(\d+) packets captured\s+(\d+) packets received by filter`).FindStringSubmatch(capt.Summary()); m == nil {
		t.Errorf("tcpdump's summary has no packet counts: %s", capt.Summary())
	} else if m[1] != m[2] {
		t.Errorf("tcpdump wrote %s packets of the %s its filter received: stopped before its ring was read", m[1], m[2])
	}
	t.Logf("capture of the tap kept at %s (irdma-emu's own capture: %s/irdma-emu.pcap)", capt.File, r.v.Dir())

	out, err := exec.CommandContext(ctx, r.bin, "decode", "--json", capt.File).Output()
	if err != nil {
		t.Errorf("irdma-emu decode %s: %v", capt.File, err)
	}
	pkts, sum, err := parseDecode(out)
	if err != nil {
		t.Fatal(err)
	}
	host, guestAddr := r.v.HostAddr(), r.v.GuestAddr()
	var toGuest, toHost, bad int
	opcodes := map[string]int{}
	for _, p := range pkts {
		switch {
		case p.src == host && p.dst == guestAddr:
			toGuest++
		case p.src == guestAddr && p.dst == host:
			toHost++
		default:
			t.Errorf("frame %d between unexpected addresses %s → %s", p.Frame, p.Src, p.Dst)
		}
		if !p.ICRCOK || p.Error != "" {
			bad++
			if bad <= 10 {
				t.Errorf("frame %d (%s → %s): icrc_ok=%v %s", p.Frame, p.Src, p.Dst, p.ICRCOK, p.Error)
			}
		}
		opcodes[p.Name]++
	}
	t.Logf("irdma-emu decode: %d RoCEv2 packets (%d icrc ok, %d bad, %d malformed), %d other frames; irdma-emu → rxe %d, rxe → irdma-emu %d",
		sum.Packets, sum.ICRCOK, sum.ICRCBad, sum.Malformed, sum.Other, toGuest, toHost)
	t.Logf("opcodes: %v", opcodes)
	if sum.Packets == 0 || sum.ICRCOK != sum.Packets || sum.Packets != toGuest+toHost || bad != 0 {
		t.Errorf("capture: %+v, %d bad; want every packet decoded with a good ICRC", sum, bad)
	}
	// The same verdict from the tests' own ICRC code (icrcref_test.go),
	// which shares nothing with emu/wire: our ICRC is not judged by our
	// ICRC code alone. rxe's counters below stay the independent proof.
	refN, refBad, err := refCheckCapture(capt.File)
	if err != nil {
		t.Errorf("reference ICRC check of %s: %v", capt.File, err)
	}
	t.Logf("reference ICRC: %d RoCEv2 packets, %d bad", refN, len(refBad))
	if refN != sum.Packets || len(refBad) != 0 {
		t.Errorf("reference ICRC: %d packets (decode found %d), %d bad: %v", refN, sum.Packets, len(refBad), refBad[:min(len(refBad), 10)])
	}

	// rxe's side.
	rd, ud, ed := delta(r.base.rxe, st.rxe), delta(r.base.udp, st.udp), delta(r.base.eth0, st.eth0)
	tapDropped := int64(tap.txDropped - r.base0Tap.txDropped)
	t.Logf("over the run: rxe0 %v; guest UDP %v; guest eth0 %v; tap drops %d", rd, ud, ed, tapDropped)
	lost := tapDropped + ed["rx_dropped"] + ed["rx_missed_errors"] + ed["rx_fifo_errors"]
	if got := ud["InDatagrams"] + lost; got != int64(toGuest) {
		t.Errorf("irdma-emu sent %d RoCEv2 packets to the guest (capture); the guest's UDP layer took %d and %d were lost on the way", toGuest, ud["InDatagrams"], lost)
	}
	// Retransmissions and answers, judged from the wire, with irdma-emu's
	// own capture saying when it sent and received each packet.
	emuFile := filepath.Join(r.v.Dir(), "irdma-emu.pcap")
	out, err = exec.CommandContext(ctx, r.bin, "decode", "--json", emuFile).Output()
	if err != nil {
		t.Errorf("irdma-emu decode %s: %v", emuFile, err)
	}
	emuPkts, _, err := parseDecode(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := annotateEmuTimes(pkts, emuPkts); n != len(pkts) || len(emuPkts) != len(pkts) {
		t.Errorf("irdma-emu's capture has %d packets, %d of them matched the tap's %d", len(emuPkts), n, len(pkts))
	}
	rep := analyzeRetries(pkts, host, 1024)

	if dropped := ud["InDatagrams"] - rd["rcvd_pkts"]; dropped != 0 {
		// The one drop that is nobody's fault: irdma-emu answering a
		// request rxe sent again, just as rxe completed it from the first
		// answer and its program destroyed the QP.
		if dropped > 0 && dropped <= int64(rep.trailingDupAcks) {
			t.Logf("rxe0 dropped %d of irdma-emu's packets; irdma-emu sent %d duplicate ACKs after which rxe sent nothing more to that QP (its QP was gone)", dropped, rep.trailingDupAcks)
		} else {
			t.Errorf("rxe0 accepted %d packets (rcvd_pkts) of the %d the guest's UDP layer handed it: rxe dropped %d of irdma-emu's packets (header, address, QP state or ICRC check; %d could be duplicate ACKs to QPs that were gone)",
				rd["rcvd_pkts"], ud["InDatagrams"], dropped, rep.trailingDupAcks)
		}
	}
	if rd["sent_pkts"] != int64(toHost) {
		t.Errorf("rxe0 sent_pkts %d, but the capture has %d packets from the guest", rd["sent_pkts"], toHost)
	}
	for _, c := range rxeBlame {
		if rd[c] != 0 {
			t.Errorf("rxe0 %s = %d over the run", c, rd[c])
		}
	}
	for _, c := range []string{"InErrors", "RcvbufErrors", "InCsumErrors"} {
		if ud[c] != 0 {
			t.Errorf("guest UDP %s moved by %d", c, ud[c])
		}
	}
	// NoPorts: the one datagram to a closed port irdma-emu sends on
	// purpose is its neighbour probe (netport.Resolve: an empty datagram
	// to the discard port, when the guest's MAC is not yet in the host's
	// neighbour table, as before an RDMA CM client's first connection).
	// (Not the ICMP port unreachable quoting it, which tshark also
	// dissects as UDP.)
	probes, err := guest.Tshark(ctx, capt.File, fmt.Sprintf("ip.src==%s && !icmp && udp.dstport==9 && udp.length==8", host), "frame.number")
	if err != nil {
		t.Errorf("counting irdma-emu's neighbour probes: %v", err)
	}
	if ud["NoPorts"] != int64(len(probes)) {
		other, _ := guest.Tshark(ctx, capt.File, "not udp.port==4791")
		t.Errorf("guest UDP NoPorts moved by %d; irdma-emu sent %d neighbour probes (UDP discard port); the frames other than RoCEv2:\n%s", ud["NoPorts"], len(probes), strings.Join(other, "\n"))
	} else if len(probes) > 0 {
		t.Logf("guest UDP NoPorts %d: irdma-emu's neighbour probes to the discard port", len(probes))
	}

	// irdma-emu's side: every frame rxe sent was received and verified.
	l := stats.Port.Link
	t.Logf("irdma-emu link: mode %s, tx %d rx %d frames, icrc good %d unverifiable %d bad %d, tx drops %v, rx drops %v; port drops %v; %d GSO sends of %d frames (cut by the host's kernel for the tap), %d refused",
		l.Mode, l.TxFrames, l.RxFrames, l.ICRCGood, l.ICRCUnver, l.ICRCBad, l.TxDrops, l.RxDrops, nonZero(stats.Port.Drops), l.GSOSends, l.GSOFrames, l.GSORefused)
	if l.RxFrames != uint64(toHost) || l.ICRCGood != uint64(toHost) || l.ICRCUnver != 0 || l.ICRCBad != 0 {
		t.Errorf("irdma-emu received %d frames (icrc good %d, unverifiable %d, bad %d); the capture has %d from rxe",
			l.RxFrames, l.ICRCGood, l.ICRCUnver, l.ICRCBad, toHost)
	}
	if l.TxFrames != uint64(toGuest) {
		t.Errorf("irdma-emu sent %d frames; the capture has %d to the guest", l.TxFrames, toGuest)
	}

	t.Logf("retransmissions and answers on the wire:\n%s", rep)
	for i, b := range rep.blame {
		if i == 30 {
			t.Errorf("… and %d more", len(rep.blame)-i)
			break
		}
		t.Errorf("%s: %s", r.scenarioOf(b.t), b.msg)
	}
	t.Logf("guest kernel log over the run: %d lines (rdma_rxe debug on)", r.kmsgTotal)
	for _, race := range r.races {
		t.Logf("scenario run again after rxe lost its retry/ACK race: %s", race)
	}
}

func nonZero(m map[string]uint64) map[string]uint64 {
	o := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			o[k] = v
		}
	}
	return o
}

func addrOf(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(s)
	return a
}

// rxeLostFinalAck looks in the capture since start for rdma_rxe's race
// between a retry and an ACK: rxe's retransmit timer fired (spuriously,
// or in a stall of the guest) while its last message was going out;
// irdma-emu acknowledged the message; rxe retransmitted it anyway. rxe
// 6.1's completer drops an ACK for a send WQE its requester has already
// reset for the retry (get_wqe: wqe_state_posted → COMPST_DONE), so that
// WQE only completes if the responder acknowledges the retransmission —
// which it cannot once the program on the other side has ended and
// destroyed its QP (ibv_rc_pingpong's client ends as soon as the last
// message is in). rxe then retries forever (retry count 7). It reports
// what it found, and true when the race explains a hang.
func (r *emuRig) rxeLostFinalAck(start time.Time) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// tcpdump -U writes every packet as it comes; decode a copy (a
	// record being written may be cut short: what decodes is enough).
	tmp := filepath.Join(r.v.Dir(), "tap-partial.pcap")
	defer os.Remove(tmp)
	if b, err := os.ReadFile(r.v.Capture().File); err != nil || os.WriteFile(tmp, b, 0o644) != nil {
		return fmt.Sprintf("cannot copy the capture: %v", err), false
	}
	out, _ := exec.CommandContext(ctx, r.bin, "decode", "--json", tmp).Output()
	var pkts []*wirePacket
	for _, line := range strings.Split(string(out), "\n") {
		if p, _, err := parseDecode([]byte(line)); err == nil && len(p) == 1 && !p[0].t.Before(start) {
			pkts = append(pkts, p[0])
		}
	}
	why, ok := findFinalAckRace(pkts, r.v.HostAddr(), r.v.GuestAddr())
	if !ok {
		return why, false
	}
	// And the retransmissions found no QP on irdma-emu's side.
	st, err := r.ctl.Stats(-1)
	if err != nil {
		return fmt.Sprintf("irdma-emu stats: %v", err), false
	}
	if n := st.Port.Drops["unknown-qpn"] - r.lastStats.Port.Drops["unknown-qpn"]; n == 0 {
		return why + "; but irdma-emu dropped none of them for an unknown QP", false
	}
	return why, true
}

// findFinalAckRace is rxeLostFinalAck's reading of the capture.
func findFinalAckRace(pkts []*wirePacket, host, guestAddr netip.Addr) (string, bool) {
	// rxe's last AckReq'd request to irdma-emu.
	var last *wirePacket
	for _, p := range pkts {
		if p.src == guestAddr && p.op().Transport() == wire.TransportRC && p.op().IsRequest() && p.AckReq {
			last = p
		}
	}
	if last == nil {
		return "no request from rxe in the capture", false
	}
	lastPSN := wire.PSN(last.PSN)
	var acked *wirePacket
	for _, p := range pkts {
		if p.src == host && p.dst == guestAddr && p.op() == wire.RCAcknowledge && p.AETH == "ack" && wire.PSN(p.PSN) == lastPSN {
			acked = p
			break
		}
	}
	if acked == nil {
		return fmt.Sprintf("irdma-emu never acknowledged rxe's last request (PSN %#x to QP %#x)", last.PSN, last.DQPN), false
	}
	var retry *wirePacket
	for _, p := range pkts {
		if p.src == guestAddr && p.DQPN == last.DQPN && p.t.After(acked.t) && p.op().IsRequest() &&
			wire.PSN(p.PSN).LessThanEq(lastPSN) && lastPSN.Diff(wire.PSN(p.PSN)) < 1024 {
			retry = p
			break
		}
	}
	if retry == nil {
		return fmt.Sprintf("irdma-emu acknowledged rxe's last request (PSN %#x) at %s and rxe did not retry it", last.PSN, acked.Time), false
	}
	return fmt.Sprintf("irdma-emu acknowledged rxe's last request (PSN %#x to QP %#x, frame %d) at %s (frame %d); rxe retransmitted PSN %#x at %s (frame %d) and on, to a QP that is gone",
		last.PSN, last.DQPN, last.Frame, acked.Time, acked.Frame, retry.PSN, retry.Time, retry.Frame), true
}

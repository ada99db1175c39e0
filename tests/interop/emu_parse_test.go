package interop

import "testing"

// TestParsePerftestAndPingpong pins the parsers of the programs' summaries
// (perftest 4.5's result tables, ibv_rc_pingpong's last two lines).
func TestParsePerftestAndPingpong(t *testing.T) {
	bw := ` local address: LID 0x01 QPN 0x000b PSN 0x9757ba RKey 0xd9272bb7 VAddr 0x007f2605914000
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      100              17.39              9.49   		   0.000152
---------------------------------------------------------------------------------------
`
	row, ok := parsePerftest(bw)
	if !ok || row["#bytes"] != 65536 || row["#iterations"] != 100 || row["BW peak[MB/sec]"] != 17.39 ||
		row["BW average[MB/sec]"] != 9.49 || row["MsgRate[Mpps]"] != 0.000152 {
		t.Errorf("bandwidth row %v %v", row, ok)
	}
	lat := `---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       200          317.57         2489.54      697.93     	       825.89      	350.12  		2012.44 		2489.54 	
---------------------------------------------------------------------------------------
`
	row, ok = parsePerftest(lat)
	if !ok || row["#iterations"] != 200 || row["t_min[usec]"] != 317.57 || row["t_avg[usec]"] != 825.89 ||
		row["99% percentile[usec]"] != 2012.44 || row["99.9% percentile[usec]"] != 2489.54 {
		t.Errorf("latency row %v %v", row, ok)
	}
	if _, ok := parsePerftest(" #bytes     #iterations    BW peak[MB/sec]\n Completion with error at client\n"); ok {
		t.Errorf("a failed run parsed as a result")
	}
	pp := "  local address:  LID 0x0000, QPN 0x000011, PSN 0x1d3b9e, GID ::ffff:10.99.0.2\n" +
		"819200 bytes in 0.17 seconds = 39.05 Mbit/sec\n200 iters in 0.17 seconds = 839.28 usec/iter\n"
	if s := parsePingpong(pp); !s.HasResult || s.Iters != 200 || s.Bytes != 819200 || s.Mbits != 39.05 || s.UsecIter != 839.28 {
		t.Errorf("pingpong summary %+v", s)
	}
}

// TestParseGuestState pins the parser of guestStateScript's output.
func TestParseGuestState(t *testing.T) {
	out := "link rxe0/1 sent_pkts 1000 rcvd_pkts 998 duplicate_request 0 out_of_seq_request 0 rcvd_rnr_err 0 send_rnr_err 0 rcvd_seq_err 0 ack_deferred 0 retry_exceeded_err 0 retry_rnr_exceeded_err 0 completer_retry_err 2 send_err 0 link_downed 0 rdma_sends 200 rdma_recvs 200\n" +
		"@@udp\n" +
		"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
		"Udp: 998 0 0 1000 0 0 0 0 0\n" +
		"@@eth0\nrx_packets 1010\nrx_dropped 0\nrx_missed_errors 0\nrx_fifo_errors 0\n" +
		"@@kmsg\n7\n      5 rdma_rxe: retransmit_timer: fired for qp#N\n      2 rdma_rxe: qp#N state -> RTS\n"
	st, err := parseGuestState(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.rxe["rcvd_pkts"] != 998 || st.rxe["completer_retry_err"] != 2 || st.udp["InDatagrams"] != 998 ||
		st.udp["OutDatagrams"] != 1000 || st.eth0["rx_packets"] != 1010 || st.kmsgLines != 7 ||
		st.kmsgShapes["rdma_rxe: retransmit_timer: fired for qp#N"] != 5 || len(st.kmsgShapes) != 2 {
		t.Errorf("parsed %+v", st)
	}
	for shape, blamed := range map[string]bool{
		"rdma_rxe: retransmit_timer: fired for qp#N":                               false,
		"rdma_rxe: qp#N state -> RTS":                                              false,
		"ethN speed is unknown, defaulting to N":                                   false,
		"rdma_rxe: qp#N moved to error state":                                      true,
		"rdma_rxe: qp#N rxe_xmit_packet: Packet dropped. QP is not in ready state": true,
		"WARNING: CPU: N PID: N at drivers/infiniband/sw/rxe/rxe_comp.c:N":         true,
	} {
		if kmsgBlame.MatchString(shape) != blamed {
			t.Errorf("kmsgBlame(%q) = %v, want %v", shape, !blamed, blamed)
		}
	}
}

// TestParseCMCounters pins the parser of cmCountersScript's output (the
// guest kernel CM's per-message counters) and its refusal of output that
// lacks the messages the checks rely on.
func TestParseCMCounters(t *testing.T) {
	var out string
	for _, g := range []string{"cm_tx_msgs", "cm_tx_retries", "cm_rx_msgs", "cm_rx_duplicates"} {
		for _, a := range cmAttrs {
			v := "0"
			if g == "cm_rx_msgs" && a == "req" {
				v = "3"
			}
			out += g + "/" + a + " " + v + "\n"
		}
	}
	m, err := parseCMCounters(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 4*len(cmAttrs) || m["cm_rx_msgs/req"] != 3 || m["cm_tx_msgs/req"] != 0 {
		t.Errorf("parsed %v", m)
	}
	if d := delta(map[string]uint64{"cm_rx_msgs/req": 1}, m); cmSum(d, "cm_rx_msgs") != 2 || cmSum(d, "cm_tx_msgs") != 0 {
		t.Errorf("delta %v", d)
	}
	for _, bad := range []string{
		"", "no CM counters under rxe0",
		"cm_tx_msgs/req x\n",
		"cm_tx_msgs/req 1\n", // no rep, rtu, dreq, drep, nor the other groups
	} {
		if _, err := parseCMCounters(bad); err == nil {
			t.Errorf("parseCMCounters(%q): no error", bad)
		}
	}
}

// TestGuestCMSent: what the guest CM put on the wire, from its counters.
// The first row is the CI run where both sides disconnected at once
// (two connections, rxe the server; the capture had 5 MADs from rxe:
// 2 REPs, 1 DREQ, 2 DREPs, one of them the direct answer to the crossed
// DREQ, which cm_send_handler counts twice in cm_tx_msgs).
func TestGuestCMSent(t *testing.T) {
	for _, c := range []struct {
		name  string
		d     map[string]int64
		sent  map[string]int64
		total int64
	}{
		{"crossed DREQ",
			map[string]int64{"cm_tx_msgs/rep": 2, "cm_tx_msgs/dreq": 1, "cm_tx_msgs/drep": 3, "cm_tx_retries/drep": 1},
			map[string]int64{"rep": 2, "dreq": 1, "drep": 2}, 5},
		{"a REQ retried on a timeout is on the wire twice",
			map[string]int64{"cm_tx_msgs/req": 2, "cm_tx_retries/req": 1, "cm_tx_msgs/rtu": 1},
			map[string]int64{"req": 2, "rtu": 1}, 3},
		{"a REJ is counted once", map[string]int64{"cm_tx_msgs/rej": 1}, map[string]int64{"rej": 1}, 1},
	} {
		sent, total := guestCMSent(c.d)
		if total != c.total {
			t.Errorf("%s: total %d, want %d", c.name, total, c.total)
		}
		for _, a := range cmAttrs {
			if sent[a] != c.sent[a] {
				t.Errorf("%s: %s sent %d, want %d", c.name, a, sent[a], c.sent[a])
			}
		}
	}
}

// TestGuestCMRetried: which guest CM counters a clean run may move.
func TestGuestCMRetried(t *testing.T) {
	for _, c := range []struct {
		name string
		d    map[string]int64
		fail bool
	}{
		{"nothing", map[string]int64{"cm_tx_msgs/req": 1}, false},
		{"crossed DREQ answered directly", map[string]int64{"cm_rx_duplicates/dreq": 1, "cm_tx_retries/drep": 1}, false},
		{"crossed DREQ in DREQ_RCVD, no answer", map[string]int64{"cm_rx_duplicates/dreq": 1}, false},
		{"REQ retried on a timeout", map[string]int64{"cm_tx_retries/req": 1}, true},
		{"DREQ retried on a timeout", map[string]int64{"cm_tx_retries/dreq": 1}, true},
		{"direct DREP with no duplicate DREQ", map[string]int64{"cm_tx_retries/drep": 1}, true},
		{"duplicate REQ answered with an MRA", map[string]int64{"cm_rx_duplicates/req": 1, "cm_tx_retries/mra": 1}, true},
		{"duplicate REP answered with an RTU", map[string]int64{"cm_rx_duplicates/rep": 1, "cm_tx_retries/rtu": 1}, true},
	} {
		if errs, _ := guestCMRetries(c.d, "here"); (len(errs) != 0) != c.fail {
			t.Errorf("%s: %q, want a fault: %v", c.name, errs, c.fail)
		}
	}
}

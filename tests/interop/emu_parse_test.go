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

package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/tests/interop/guest"
)

// TestRoCEv2Path is scenario 2. The host has no RDMA, so the path is
// proved in two halves with rxe and standard tools only:
//   - ibv_rc_pingpong server and client in the guest over rxe0 (rxe keeps
//     this in the kernel): the verbs stack works;
//   - ibv_rc_pingpong in the guest as a client of a Go program in the
//     host namespace that answers the TCP exchange with a made-up QP: rxe
//     sends its RoCEv2 SEND to the host address, the capture on the tap has
//     it, and tshark decodes it. The client then retries until killed; that
//     is expected, nothing answers on UDP 4791 yet.
func TestRoCEv2Path(t *testing.T) {
	v := guest.StartT(t, guest.Config{Capture: true})
	v.WaitReadyT(t, 3*time.Minute)

	t.Run("loopback in the guest", func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before, err := v.RxeCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const iters = 200
		pp := fmt.Sprintf("ibv_rc_pingpong -g 1 -d rxe0 -s 64 -n %d", iters)
		// The server accepts one TCP connection only, so the host waits for
		// a console marker rather than probing the port.
		srv, err := v.Start(pp + ` & p=$!
wait_listen 18515 30 && emu_notify "pingpong server listening"
wait $p`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.WaitMarker(ctx, "pingpong server listening"); err != nil {
			t.Fatal(err)
		}
		cli, err := v.Run(ctx, pp+` "$EMU_GUEST"`)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := srv.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for side, r := range map[string]guest.Result{"server": sr, "client": cli} {
			if r.RC != 0 || !strings.Contains(r.Output, fmt.Sprintf("%d iters in", iters)) ||
				!strings.Contains(r.Output, fmt.Sprintf("%d bytes in", 2*64*iters)) {
				t.Errorf("ibv_rc_pingpong %s: rc=%d\n%s", side, r.RC, r.Output)
			}
		}
		after, err := v.RxeCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := guest.CounterDelta(before, after)
		t.Logf("rxe0 counter deltas: %v", d)
		// Each side sends iters SEND_ONLY packets; each asks for an ACK.
		if d["sent_pkts"] < 2*iters || d["rcvd_pkts"] < 2*iters {
			t.Errorf("rxe0 counters moved by sent_pkts=%d rcvd_pkts=%d, want at least %d each", d["sent_pkts"], d["rcvd_pkts"], 2*iters)
		}
		t.Logf("client output:\n%s", cli.Output)
		t.Logf("DURATION scenario in-guest pingpong: %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("guest to host on the wire", func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := v.EnableRxeDebug(ctx); err != nil {
			t.Fatal(err)
		}
		before, err := v.RxeCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The made-up host QP the guest's client will send to.
		fake := guest.PingpongDest{QPN: 0xabcdef, PSN: 0x123456, GID: guest.MappedGID(v.HostAddr())}
		ln, err := v.Netns().Listen("tcp", netip.AddrPortFrom(v.HostAddr(), 18515).String())
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		peer := make(chan pingpongPeerResult, 1)
		go func() { peer <- servePingpongOnce(ln, fake) }()

		// The guest waits until the host port answers (wait_tcp), then
		// runs the client; it never gets an ACK, so timeout ends it.
		r, err := v.Run(ctx, `wait_tcp "$EMU_HOST" 18515 30 || exit 99
timeout 5 ibv_rc_pingpong -g 1 -d rxe0 -s 64 -n 1 "$EMU_HOST"`)
		if err != nil {
			t.Fatal(err)
		}
		if r.RC == 99 {
			t.Fatalf("guest: host port 18515 never answered")
		}
		// rc 143: timeout's SIGTERM, as expected (and the client's buffered
		// stdout is lost with it).
		t.Logf("guest client: rc=%d %s", r.RC, strings.TrimSpace(r.Output))
		var res pingpongPeerResult
		select {
		case res = <-peer:
		case <-ctx.Done():
			t.Fatal("host pingpong peer: no exchange")
		}
		if res.err != nil {
			t.Fatalf("host pingpong peer: %v", res.err)
		}
		client := res.client
		t.Logf("guest client's record: QPN %#06x PSN %#06x GID %v (probe connections before it: %d)",
			client.QPN, client.PSN, client.GIDAddr(), res.probes)
		if client.GIDAddr() != v.GuestAddr() {
			t.Errorf("client GID %v, want the guest's mapped address %v", client.GIDAddr(), v.GuestAddr())
		}
		after, err := v.RxeCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rxe0 counter deltas: %v", guest.CounterDelta(before, after))

		capt := v.Capture()
		if err := capt.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("tcpdump: %s", capt.Summary())
		filter := fmt.Sprintf("ip.src == %v && udp.dstport == 4791", v.GuestAddr())
		summary, err := guest.Tshark(ctx, capt.File, filter)
		if err != nil {
			t.Fatal(err)
		}
		if len(summary) == 0 {
			t.Fatalf("no RoCEv2 packet from the guest in %s", capt.File)
		}
		t.Logf("first RoCEv2 packet (tshark): %s", summary[0])
		t.Logf("RoCEv2 packets from the guest: %d (the first and its retransmissions)", len(summary))
		rows, err := guest.Tshark(ctx, capt.File, filter,
			"frame.protocols", "_ws.col.Protocol", "ip.dst", "ip.ttl", "ip.flags.df", "udp.srcport", "udp.checksum",
			"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a", "infiniband.bth.p_key")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Split(rows[0], "\t")
		if len(f) != 12 {
			t.Fatalf("tshark fields: %q", rows[0])
		}
		check := func(what, got, want string) {
			t.Helper()
			if got != want {
				t.Errorf("first packet %s = %q, want %q", what, got, want)
			}
		}
		if !strings.Contains(f[0], ":udp:infiniband") {
			t.Errorf("tshark does not decode the packet as InfiniBand over UDP: protocols %q", f[0])
		}
		check("protocol column", f[1], "RRoCE")
		check("IP destination", f[2], v.HostAddr().String())
		// ibv_rc_pingpong asks for hop limit 1, but rxe sends the TTL of the
		// route (measured: 64 with this kernel): the kernel's address
		// resolution for a routable GID replaces the AV's hop limit.
		check("TTL", f[3], "64")
		check("DF", f[4], "1")
		if sp, _ := strconv.Atoi(f[5]); sp < 0xC000 {
			t.Errorf("UDP source port %d, want rxe's per-QP port in 0xC000–0xFFFF", sp)
		}
		check("UDP checksum", f[6], "0x0000")
		check("BTH opcode (RC SEND Only)", f[7], "4")
		check("BTH destination QP", f[8], fmt.Sprintf("0x%06x", fake.QPN))
		check("BTH PSN (the client's own)", f[9], strconv.Itoa(int(client.PSN)))
		check("BTH AckReq", f[10], "1")
		check("BTH P_Key", f[11], "65535")
		// rxe retransmits the unacknowledged SEND with the same PSN.
		for i, row := range rows[1:] {
			g := strings.Split(row, "\t")
			if len(g) == 12 && (g[8] != f[8] || g[9] != f[9]) {
				t.Errorf("packet %d: destqp %s psn %s, want retransmissions of the first", i+2, g[8], g[9])
			}
		}
		dmesg, err := v.Dmesg(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var rxeLines []string
		for _, l := range strings.Split(dmesg, "\n") {
			if strings.Contains(l, "rxe") {
				rxeLines = append(rxeLines, l)
			}
		}
		t.Logf("guest dmesg, rxe lines (last 10 of %d):\n%s", len(rxeLines), strings.Join(tail(rxeLines, 10), "\n"))
		// With dynamic debug on, rxe narrates its retransmissions.
		if !strings.Contains(dmesg, "retransmit_timer: fired for qp#") {
			t.Errorf("no rdma_rxe debug messages in dmesg after EnableRxeDebug")
		}
		t.Logf("DURATION scenario guest to host capture: %v", time.Since(start).Round(time.Millisecond))
	})
}

type pingpongPeerResult struct {
	client guest.PingpongDest
	probes int // connections that sent nothing (wait_tcp's probes)
	err    error
}

// servePingpongOnce plays ibv_rc_pingpong's server side of the TCP
// exchange with dest as its QP: read the client's record, answer with
// ours, read "done". Connections that close without a record are the
// guest's readiness probes; they are counted and skipped.
func servePingpongOnce(ln net.Listener, dest guest.PingpongDest) pingpongPeerResult {
	var res pingpongPeerResult
	for {
		conn, err := ln.Accept()
		if err != nil {
			res.err = err
			return res
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, guest.PingpongRecordLen)
		if _, err := io.ReadFull(conn, buf); err != nil {
			conn.Close()
			if errors.Is(err, io.EOF) {
				res.probes++
				continue
			}
			res.err = fmt.Errorf("reading the client's record: %w", err)
			return res
		}
		res.client, res.err = guest.ParsePingpongDest(buf)
		if res.err == nil {
			_, res.err = conn.Write(dest.Marshal())
		}
		if res.err == nil {
			done := make([]byte, len("done")+1)
			if _, err := io.ReadFull(conn, done); err != nil || string(done) != "done\x00" {
				res.err = fmt.Errorf("client's done: %q %v", done, err)
			}
		}
		conn.Close()
		return res
	}
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

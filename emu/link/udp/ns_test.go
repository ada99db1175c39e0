package udp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/netport/nstest"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// vethPair is two namespaces joined by a veth pair with IPv4 and ULA IPv6
// addresses on each end.
type vethPair struct {
	ns       [2]*nstest.NS
	ifname   [2]string
	v4, v6   [2]netip.Addr
	mac      [2]wire.MAC
	ifindex  [2]int
	vethMTU  int
	captured *nstest.Capture
}

func newVethPair(t *testing.T, mtu int) *vethPair {
	t.Helper()
	p := &vethPair{ifname: [2]string{"rv0", "rv1"}, vethMTU: mtu}
	p.ns[0], p.ns[1] = nstest.New(t), nstest.New(t)
	nstest.Veth(t, p.ns[0], "rv0", p.ns[1], "rv1", mtu)
	for i := range 2 {
		c4, c6 := fmt.Sprintf("10.77.0.%d/24", i+1), fmt.Sprintf("fd77::%d/64", i+1)
		p.ns[i].AddAddr(t, p.ifname[i], c4)
		p.ns[i].AddAddr(t, p.ifname[i], c6)
		p.v4[i], p.v6[i] = nstest.Prefix(c4), nstest.Prefix(c6)
		l := p.ns[i].Link(t, p.ifname[i])
		p.mac[i] = wire.MAC(l.Attrs().HardwareAddr)
		p.ifindex[i] = l.Attrs().Index
	}
	return p
}

func (p *vethPair) link(t *testing.T, i int, mode udp.Mode, faults link.Faults) *udp.Link {
	t.Helper()
	return newLink(t, udp.Config{Addrs: []netip.Addr{p.v4[i], p.v6[i]}, Mode: mode, NetNS: p.ns[i].Path(), Faults: faults})
}

// sentFrame is what the namespace test remembers of a sent frame.
type sentFrame struct {
	roce        []byte
	op          wire.Opcode
	qp, psn     uint32
	sport, ipID uint16
	v6          bool
}

// TestNamespaceVeth: links in two network namespaces joined by a veth pair
// exchange IPv4 and IPv6 frames of every kind (up to the 4096-byte path
// MTU) in every mode. A tcpdump capture on the veth is decoded by tshark
// as RoCE with the expected opcode, QP and PSN, and emu/wire finds every
// captured ICRC good; with udp sending the wire shows IP ID 0 and source
// port 4791, with packet sending the device's own IDs and per-QP ports.
func TestNamespaceVeth(t *testing.T) {
	for _, m := range modes {
		t.Run(m.mode.String(), func(t *testing.T) {
			p := newVethPair(t, link.DefaultMTU)
			a := p.link(t, 0, m.mode, link.Faults{})
			b := p.link(t, 1, m.mode, link.Faults{})
			if a.MAC() != p.mac[0] || a.MTU() != link.DefaultMTU || a.Ifindex() != p.ifindex[0] {
				t.Fatalf("MAC %v MTU %d ifindex %d; want %v %d %d", a.MAC(), a.MTU(), a.Ifindex(), p.mac[0], link.DefaultMTU, p.ifindex[0])
			}
			rb := newRecorder()
			b.Attach(rb)
			capture := nstest.StartCapture(t, p.ns[0], "rv0")
			packetTx := m.mode.Send == udp.IOPacket

			var sent []sentFrame
			var pkts []*link.Packet
			for fam := range 2 {
				src, dst := p.v4[0], p.v4[1]
				if fam == 1 {
					src, dst = p.v6[0], p.v6[1]
				}
				for i, c := range opcodeCases {
					k := len(sent)
					s := frameSpec{op: c.op, src: src, dst: dst, payload: c.payload, seq: uint32(0x100 + k),
						dstQP: uint32(0x20 + k), srcMAC: p.mac[0], dstMAC: p.mac[1], hop: 64, tclass: uint8(i)}
					if packetTx {
						// What rxe would send: a per-QP source port
						// and a non-zero IP ID.
						s.srcPort, s.ipID = uint16(0xc000+k), uint16(0x4000+k)
					}
					pk := build(t, a.Pool(), s)
					_, roce := roceOf(t, pk.Data)
					sf := sentFrame{roce: bytes.Clone(roce), op: c.op, qp: s.dstQP, psn: s.seq, sport: wire.RoCEv2Port, v6: fam == 1}
					if packetTx {
						sf.sport, sf.ipID = s.srcPort, s.ipID
					}
					sent = append(sent, sf)
					pkts = append(pkts, pk)
				}
			}
			if err := a.Send(pkts); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "frames across the veth", func() bool { return rb.n() == len(sent) })
			for i, g := range rb.got() {
				f, roce := roceOf(t, g.data)
				// IPv4 and IPv6 come through different sockets in udp
				// receiving, so only the order within a family holds:
				// match by PSN.
				k := int(f.Packet.BTH.PSN()) - 0x100
				if k < 0 || k >= len(sent) {
					t.Fatalf("frame %d: unexpected PSN %#x", i, f.Packet.BTH.PSN())
				}
				want := sent[k]
				name := fmt.Sprintf("frame %d (%v, IPv6 %v)", i, want.op, want.v6)
				if !bytes.Equal(roce, want.roce) {
					t.Errorf("%s: RoCEv2 part differs", name)
				}
				if f.UDP.SourcePort() != want.sport {
					t.Errorf("%s: source port %#x, want %#x", name, f.UDP.SourcePort(), want.sport)
				}
				wantICRC := link.ICRCGood
				if packetTx && !want.v6 && m.mode.Recv == udp.IOUDP {
					wantICRC = link.ICRCUnverifiable // a UDP socket cannot see the non-zero ID
				}
				if g.icrc != wantICRC {
					t.Errorf("%s: ICRC %v, want %v", name, g.icrc, wantICRC)
				}
				if m.mode.Recv == udp.IOPacket {
					if f.Ethernet.Src() != p.mac[0] || f.Ethernet.Dst() != p.mac[1] {
						t.Errorf("%s: MACs %v → %v, want %v → %v", name, f.Ethernet.Src(), f.Ethernet.Dst(), p.mac[0], p.mac[1])
					}
					if !want.v6 && f.IPv4.ID() != want.ipID {
						t.Errorf("%s: IP ID %#x, want %#x", name, f.IPv4.ID(), want.ipID)
					}
				}
			}
			// Some frames back, so that the capture holds both directions.
			ra := newRecorder()
			a.Attach(ra)
			back := []*link.Packet{
				build(t, b.Pool(), frameSpec{op: wire.RCAcknowledge, src: p.v4[1], dst: p.v4[0], seq: 0x100, dstQP: 0x20, srcMAC: p.mac[1], dstMAC: p.mac[0]}),
				build(t, b.Pool(), frameSpec{op: wire.RCAcknowledge, src: p.v6[1], dst: p.v6[0], seq: 0x101, dstQP: 0x21, srcMAC: p.mac[1], dstMAC: p.mac[0]}),
			}
			if err := b.Send(back); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "acknowledgements", func() bool { return ra.n() == 2 })
			for _, g := range ra.got() {
				if g.icrc != link.ICRCGood {
					t.Errorf("acknowledgement ICRC %v, want good", g.icrc)
				}
			}

			file := capture.Stop(t)
			checkCapture(t, file, sent, packetTx)

			// The bound 4791 sockets kept the kernel from answering
			// anything with port unreachable, also in packet receiving
			// where their data is dropped unread.
			for k, ns := range p.ns {
				if n := udpNoPorts(t, ns); n != 0 {
					t.Errorf("namespace %d: %d datagrams found no socket (ICMP port unreachable sent)", k, n)
				}
			}
		})
	}
}

// udpNoPorts returns the namespace's Udp and Udp6 NoPorts counters summed
// (/proc/net/snmp and snmp6 are per namespace).
func udpNoPorts(t *testing.T, ns *nstest.NS) uint64 {
	t.Helper()
	var total uint64
	snmp := strings.Split(ns.Run(t, "cat", "/proc/net/snmp"), "\n")
	for i := 0; i+1 < len(snmp); i++ {
		h, v := strings.Fields(snmp[i]), strings.Fields(snmp[i+1])
		if len(h) > 0 && h[0] == "Udp:" && len(v) == len(h) && v[0] == "Udp:" {
			for j := range h {
				if h[j] == "NoPorts" {
					n, _ := strconv.ParseUint(v[j], 10, 64)
					total += n
				}
			}
		}
	}
	for _, line := range strings.Split(ns.Run(t, "cat", "/proc/net/snmp6"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Udp6NoPorts" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			total += n
		}
	}
	return total
}

// checkCapture reads a tcpdump capture of the veth: the first len(sent)
// frames must be the sent ones, each with a good ICRC over the headers as
// they were on the wire, IP ID 0 and source port 4791 for udp sending, the
// device's ID and port for packet sending; tshark must decode every frame
// as RoCE with the expected opcode, destination QP and PSN.
func checkCapture(t *testing.T, file string, sent []sentFrame, packetTx bool) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		frames = append(frames, data)
	}
	if len(frames) != len(sent)+2 {
		t.Fatalf("capture holds %d frames, want %d", len(frames), len(sent)+2)
	}
	for i, fr := range frames {
		var f wire.Frame
		if err := wire.ParseFrame(fr, &f); err != nil {
			t.Errorf("captured frame %d: %v", i, err)
			continue
		}
		if err := f.VerifyICRC(); err != nil {
			t.Errorf("captured frame %d: ICRC %v", i, err)
		}
		if i >= len(sent) {
			continue
		}
		want := sent[i]
		if !bytes.Equal(f.Packet.Raw, want.roce) {
			// Packet sending writes frames as built; udp sending keeps
			// their bytes too, since they were built with port 4791 and
			// ID 0 and so not resealed.
			t.Errorf("captured frame %d: RoCEv2 part differs from what was sent", i)
		}
		if f.UDP.SourcePort() != want.sport {
			t.Errorf("captured frame %d: source port %#x, want %#x", i, f.UDP.SourcePort(), want.sport)
		}
		if f.IPv4 != nil && (f.IPv4.ID() != want.ipID || !f.IPv4.DF()) {
			t.Errorf("captured frame %d: IP ID %#x DF %v, want %#x true", i, f.IPv4.ID(), f.IPv4.DF(), want.ipID)
		}
	}
	rows := runTshark(t, file)
	if len(rows) != len(frames) {
		t.Fatalf("tshark decoded %d frames, capture has %d", len(rows), len(frames))
	}
	for i, want := range sent {
		r := rows[i]
		if r.opcode != int(want.op) || r.qp != want.qp || r.psn != want.psn {
			t.Errorf("tshark frame %d: opcode %d QP %#x PSN %#x; sent %d %#x %#x", i+1, r.opcode, r.qp, r.psn, want.op, want.qp, want.psn)
		}
	}
	for _, r := range rows[len(sent):] {
		if r.opcode != int(wire.RCAcknowledge) {
			t.Errorf("tshark: reply opcode %d, want ACK", r.opcode)
		}
	}
}

type tsharkRow struct {
	opcode  int
	qp, psn uint32
}

// runTshark decodes a capture with the real tshark (udp.port 4791 as
// InfiniBand over UDP, as Wireshark does by default; the RPC-over-RDMA
// heuristic is off because it claims test payloads, as in emu/wire's
// tshark test).
func runTshark(t *testing.T, file string) []tsharkRow {
	t.Helper()
	path := testenv.Tool(t, "tshark")
	args := []string{"-r", file, "-n", "-d", "udp.port==4791,infiniband",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"}
	run := func(args []string) ([]byte, string, error) {
		cmd := exec.Command(path, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	out, stderr, err := run(append([]string{"--disable-heuristic", "rpcrdma_infiniband"}, args...))
	if err != nil && strings.Contains(stderr, "No such protocol") {
		out, stderr, err = run(args)
	}
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr)
	}
	var rows []tsharkRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		for len(f) < 3 {
			f = append(f, "")
		}
		r := tsharkRow{opcode: -1}
		if v, err := strconv.ParseInt(f[0], 0, 32); err == nil {
			r.opcode = int(v)
		}
		q, _ := strconv.ParseUint(f[1], 0, 32)
		p, _ := strconv.ParseUint(f[2], 0, 32)
		r.qp, r.psn = uint32(q), uint32(p)
		rows = append(rows, r)
	}
	return rows
}

// TestZeroChecksumIPv6: rxe sends IPv6 with UDP checksum 0. Sent that way
// (packet sending writes the frame as built, checksum 0), such a datagram
// reaches the link's socket, which sets UDP_NO_CHECK6_RX, while a plain
// UDP socket in the same namespace never sees one.
func TestZeroChecksumIPv6(t *testing.T) {
	p := newVethPair(t, 0)
	a := p.link(t, 0, udp.Mode{Send: udp.IOPacket, Recv: udp.IOUDP}, link.Faults{})
	b := p.link(t, 1, udp.Mode{Send: udp.IOUDP, Recv: udp.IOUDP}, link.Faults{})
	rb := newRecorder()
	b.Attach(rb)
	var plain *net.UDPConn
	if err := p.ns[1].Do(func() (err error) {
		plain, err = net.ListenUDP("udp6", &net.UDPAddr{IP: p.v6[1].AsSlice(), Port: 4792})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	mk := func(port uint16) *link.Packet {
		pk := build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: p.v6[0], dst: p.v6[1], payload: 32, srcMAC: p.mac[0], dstMAC: p.mac[1]})
		var f wire.Frame
		if err := wire.ParseFrame(pk.Data, &f); err != nil {
			t.Fatal(err)
		}
		if f.UDP.Checksum() != 0 {
			t.Fatalf("built with UDP checksum %#x, want 0", f.UDP.Checksum())
		}
		f.UDP.SetDestinationPort(port)
		return pk
	}
	if err := a.Send([]*link.Packet{mk(4792), mk(wire.RoCEv2Port)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "zero-checksum frame", func() bool { return rb.n() == 1 })
	if g := rb.got()[0]; g.icrc != link.ICRCGood {
		t.Errorf("ICRC %v, want good", g.icrc)
	}
	_ = plain.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := plain.ReadFromUDP(make([]byte, 100)); err == nil {
		t.Errorf("a plain socket received a zero-checksum IPv6 datagram (%d bytes); UDP_NO_CHECK6_RX would not be needed", n)
	}
}

// TestNftablesLoss: an nftables rule that drops RoCEv2 datagrams in the
// output chain makes sendmmsg fail; the link counts the frames of each
// such datagram as loss and keeps running, and the counts agree with the
// rule's counter: the rule's drops are the reported EPERMs (a datagram
// first in its sendmmsg call) plus the unreported failures (one per
// partial call), and every frame is either delivered or one of those.
//
// One datagram per frame (gso=off), the rule drops 5% at random. With GSO
// sends the rule sees one datagram per run of frames (here a whole batch
// of 50), so it drops every 20th datagram by count instead, which makes
// the loss exact: 4 of the 80 sends, 200 frames, whose number the rule's
// byte counter confirms.
func TestNftablesLoss(t *testing.T) {
	testenv.Tool(t, "nft")
	for _, c := range []struct {
		name  string
		noGSO bool
		rule  string
		n     int
	}{
		{"per frame", true, "numgen random mod 20 == 0", 2000},
		{"GSO sends", false, "numgen inc mod 20 == 19", 4000},
	} {
		t.Run(c.name, func(t *testing.T) { nftablesLoss(t, c.noGSO, c.rule, c.n) })
	}
}

func nftablesLoss(t *testing.T, noGSO bool, rule string, n int) {
	ns := nstest.New(t)
	rules := `table inet irdmaemu {
	chain out {
		type filter hook output priority 0; policy accept;
		udp dport 4791 ` + rule + ` counter drop
	}
}`
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	mode := udpMode
	mode.NoGSO = noGSO
	a := newLink(t, udp.Config{Addrs: []netip.Addr{lo2}, Mode: mode, NetNS: ns.Path()})
	b := newLink(t, udp.Config{Addrs: []netip.Addr{lo3}, Mode: udpMode, NetNS: ns.Path()})
	rb := newRecorder()
	rb.keep = false
	b.Attach(rb)
	const batch, payload = 50, 256
	for sent := 0; sent < n; sent += batch {
		var pkts []*link.Packet
		for i := range batch {
			pkts = append(pkts, build(t, a.Pool(), frameSpec{op: wire.RCSendOnly, src: lo2, dst: lo3, payload: payload, seq: uint32(sent + i)}))
		}
		if err := a.Send(pkts); err != nil {
			t.Fatalf("Send: %v", err)
		}
		want := uint64(sent + batch)
		waitFor(t, "batch accounted for", func() bool {
			return uint64(rb.n())+a.Counters().TxDropped() == want
		})
	}
	c := a.Counters()
	filtered, unreported := c.TxDrops[udp.ReasonFiltered], c.TxDrops[udp.ReasonUnreported]
	lost := filtered + unreported
	if a.State() != link.StateUp || c.TxFrames != uint64(n) {
		t.Errorf("state %v, TxFrames %d", a.State(), c.TxFrames)
	}
	if other := c.TxDropped() - lost; other != 0 {
		t.Errorf("%d other drops: %v", other, c.TxDrops)
	}
	ruleDrops, ruleBytes := nftCounter(t, ns)
	if noGSO {
		if lost < uint64(n/50) || lost > uint64(n/10) {
			t.Errorf("%d of %d lost; want about 5%%", lost, n)
		}
		if unreported != c.Partial {
			t.Errorf("%d unreported failures, %d partial calls", unreported, c.Partial)
		}
		if ruleDrops != lost {
			t.Errorf("the rule dropped %d; the link counted %d EPERMs and %d unreported failures", ruleDrops, filtered, unreported)
		}
	} else {
		if c.GSOSends != uint64(n/batch)-ruleDrops || c.GSOFrames != uint64(n)-lost {
			t.Errorf("%d GSO sends of %d frames went out; want every batch but the dropped in one", c.GSOSends, c.GSOFrames)
		}
		if ruleDrops != uint64(n/batch/20) || lost != ruleDrops*batch {
			t.Errorf("the rule dropped %d sends; the link counted %d EPERM and %d unreported frames, want %d",
				ruleDrops, filtered, unreported, ruleDrops*batch)
		}
		// The rule counts IP packets: each dropped send is one IPv4
		// header, one UDP header and its frames' payloads.
		datagram := uint64(wire.BTHSize + payload + wire.ICRCSize)
		if frames := (ruleBytes - ruleDrops*(wire.IPv4MinimumSize+wire.UDPSize)) / datagram; frames != lost {
			t.Errorf("the rule's %d bytes are %d frames; the link counted %d lost", ruleBytes, frames, lost)
		}
	}
	t.Logf("%d frames: %d delivered, %d lost (%d EPERM, %d unreported in %d partial sendmmsg calls), rule counter %d (%d bytes), %d GSO sends",
		n, rb.n(), lost, filtered, unreported, c.Partial, ruleDrops, ruleBytes, c.GSOSends)
}

// nftCounter returns the packet and byte counts of the rule's counter.
func nftCounter(t *testing.T, ns *nstest.NS) (packets, bytes uint64) {
	t.Helper()
	out := ns.Run(t, "nft", "-j", "list", "table", "inet", "irdmaemu")
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nft -j: %v\n%s", err, out)
	}
	var found [][2]uint64
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if c, ok := v["counter"].(map[string]any); ok {
				p, pok := c["packets"].(float64)
				b, bok := c["bytes"].(float64)
				if pok && bok {
					found = append(found, [2]uint64{uint64(p), uint64(b)})
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if len(found) != 1 {
		t.Fatalf("found %d counters in %s", len(found), out)
	}
	return found[0][0], found[0][1]
}

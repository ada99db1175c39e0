package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

const decodeCapture = "../../testdata/captures/rxe-rc-uc-ud-ipv4-mtu1024.pcap"

// decodeRun runs the decode command in-process.
func decodeRun(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(append([]string{"decode"}, args...), &o, &e)
	return code, o.String(), e.String()
}

type decodeFrame struct {
	ci   gopacket.CaptureInfo
	data []byte
}

func decodeReadFrames(t *testing.T) []decodeFrame {
	t.Helper()
	fh, err := os.Open(decodeCapture)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var frames []decodeFrame
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			return frames
		}
		frames = append(frames, decodeFrame{ci, data})
	}
}

// decodeWritePcap writes frames as a little-endian microsecond pcap with
// link type lt (written by hand: gopacket's writer cannot express 276).
func decodeWritePcap(t *testing.T, name string, lt uint32, frames []decodeFrame) string {
	t.Helper()
	var b bytes.Buffer
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 262144)
	binary.LittleEndian.PutUint32(hdr[20:], lt)
	b.Write(hdr)
	for _, f := range frames {
		rec := make([]byte, 16)
		binary.LittleEndian.PutUint32(rec[0:], uint32(f.ci.Timestamp.Unix()))
		binary.LittleEndian.PutUint32(rec[4:], uint32(f.ci.Timestamp.Nanosecond()/1000))
		binary.LittleEndian.PutUint32(rec[8:], uint32(len(f.data)))
		binary.LittleEndian.PutUint32(rec[12:], uint32(f.ci.Length-f.ci.CaptureLength+len(f.data)))
		b.Write(rec)
		b.Write(f.data)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const decodeSummary = "1531 RoCEv2 packets (1531 icrc ok, 0 bad, 0 malformed), 37 other frames skipped\n"

// TestDecodeCapture decodes the rxe capture: one line per RoCEv2 packet,
// every ICRC ok, the README's summary, exit 0.
func TestDecodeCapture(t *testing.T) {
	code, out, errOut := decodeRun(decodeCapture)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.SplitAfter(out, "\n")
	lines = lines[:len(lines)-1]
	if got := lines[len(lines)-1]; got != decodeSummary {
		t.Errorf("summary %q, want %q", got, decodeSummary)
	}
	ok := 0
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasSuffix(l, " icrc=ok\n") {
			t.Errorf("line without icrc=ok: %q", l)
		}
		ok++
	}
	if ok != 1531 {
		t.Errorf("%d packet lines, want 1531", ok)
	}
	// Spot checks of the formatting of each kind of extension header.
	for _, want := range []string{
		" RC Send First dqpn=0x000011 psn=8796800 ackreq=0 len=1024 icrc=ok\n",
		" RC Acknowledge dqpn=0x000011 psn=8796803 ackreq=0 syndrome=0x1f/ACK credits=invalid msn=1 len=0 icrc=ok\n",
		" UD Send Only dqpn=0x000013 psn=11920262 ackreq=0 qkey=0x11111111 srcqp=0x000013 len=512 icrc=ok\n",
		" RC RDMA Write First dqpn=0x000015 psn=5584847 ackreq=0 va=0x55c00e948000 rkey=0x000006e5 dmalen=4096 len=1024 icrc=ok\n",
		"  209 2026-11-30T01:46:03.062909Z 10.99.0.3:49777 → 10.99.0.2:4791 RC Atomic Acknowledge dqpn=0x000019 psn=13406220 ackreq=0 syndrome=0x1f/ACK credits=invalid msn=1 orig=0x9531a1b65800ac4a len=0 icrc=ok\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDecodeBadICRC flips one payload byte of one packet: that line says
// icrc=BAD, the summary counts it, exit 1.
func TestDecodeBadICRC(t *testing.T) {
	frames := decodeReadFrames(t)
	victim := -1
	for i, f := range frames {
		var fr wire.Frame
		if wire.ParseFrame(f.data, &fr) == nil && len(fr.Packet.Payload) > 100 {
			fr.Packet.Payload[100] ^= 0x40
			victim = i
			break
		}
	}
	p := decodeWritePcap(t, "bad.pcap", 1, frames)
	code, out, _ := decodeRun(p)
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	var bad []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "icrc=BAD") {
			bad = append(bad, l)
		}
	}
	if len(bad) != 1 || !strings.HasPrefix(strings.TrimSpace(bad[0]), strconv.Itoa(victim+1)+" ") {
		t.Errorf("BAD lines %q, want one for frame %d", bad, victim+1)
	}
	if !strings.HasSuffix(out, "1531 RoCEv2 packets (1530 icrc ok, 1 bad, 0 malformed), 37 other frames skipped\n") {
		t.Errorf("summary: %q", out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:])
	}
}

// TestDecodeMalformed: a RoCEv2 packet that fails the gate gets a line
// with the reason and exit 1; so does one cut short by the capture.
func TestDecodeMalformed(t *testing.T) {
	frames := decodeReadFrames(t)
	var tver, cut int
	for i := range frames {
		var fr wire.Frame
		if wire.ParseFrame(frames[i].data, &fr) != nil {
			continue
		}
		if tver == 0 {
			fr.Packet.BTH.SetTVer(1)
			tver = i + 1
		} else if len(fr.Packet.Payload) > 0 {
			frames[i].data = frames[i].data[:60]
			frames[i].ci.CaptureLength = 60 // as a snap length of 60 would
			cut = i + 1
			break
		}
	}
	code, out, _ := decodeRun(decodeWritePcap(t, "malformed.pcap", 1, frames))
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	for _, want := range []string{
		fmt.Sprintf("%5d ", tver), "error: wire: bad BTH TVer: BTH TVer 1",
		fmt.Sprintf("%5d ", cut), "error: wire: truncated: IPv4 total length",
		"(frame cut to 60 of ",
		"1531 RoCEv2 packets (1529 icrc ok, 0 bad, 2 malformed), 37 other frames skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestDecodeUsage(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("this is not a capture file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A pcap whose second record is cut in the middle.
	frames := decodeReadFrames(t)
	p := decodeWritePcap(t, "short.pcap", 1, frames[:3])
	b, _ := os.ReadFile(p)
	short := filepath.Join(t.TempDir(), "short.pcap")
	os.WriteFile(short, b[:len(b)-10], 0o644)

	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.pcap")}, exitUsage, "no such file"},
		{"garbage", []string{garbage}, exitUsage, "not a pcap or pcapng file"},
		{"empty", []string{empty}, exitUsage, "not a pcap or pcapng file"},
		{"cut pcap", []string{short}, exitUsage, "short.pcap"},
		{"no file", nil, exitUsage, "need exactly one capture file"},
		{"two files", []string{decodeCapture, decodeCapture}, exitUsage, "need exactly one"},
		{"unknown flag", []string{"--bogus", decodeCapture}, exitUsage, "bogus"},
		{"help", []string{"-h"}, exitOK, "usage: irdma-emu decode"},
	} {
		code, _, errOut := decodeRun(c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%s: exit %d stderr %q; want %d and %q", c.name, code, errOut, c.code, c.msg)
		}
	}
}

// decodeJSON runs decode --json and returns the packet objects and the
// summary.
func decodeJSON(t *testing.T, file string) ([]map[string]any, map[string]any) {
	t.Helper()
	code, out, errOut := decodeRun("--json", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pkts []map[string]any
	var summary map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		if s, ok := m["summary"]; ok {
			summary = s.(map[string]any)
			continue
		}
		if summary != nil {
			t.Fatalf("object after the summary: %q", sc.Text())
		}
		pkts = append(pkts, m)
	}
	return pkts, summary
}

func num(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	v, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("%q missing or not a number in %v", k, m)
	}
	n, err := v.Int64()
	if err != nil {
		u, err2 := strconv.ParseUint(string(v), 10, 64)
		if err2 != nil {
			t.Fatalf("%q: %v", k, err)
		}
		return int64(u)
	}
	return n
}

func TestDecodeJSON(t *testing.T) {
	pkts, summary := decodeJSON(t, decodeCapture)
	wantSummary := map[string]any{
		"roce_packets": json.Number("1531"), "icrc_ok": json.Number("1531"), "icrc_bad": json.Number("0"),
		"malformed": json.Number("0"), "other_frames": json.Number("37"),
	}
	if diff := cmp.Diff(wantSummary, summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	counts := map[int64]int{}
	seen := map[string]bool{}
	for _, p := range pkts {
		op := num(t, p, "opcode")
		counts[op]++
		if p["icrc_ok"] != true {
			t.Errorf("icrc_ok not true: %v", p)
		}
		name := p["opcode_name"].(string)
		if name != wire.Opcode(op).String() {
			t.Errorf("opcode %d named %q", op, name)
		}
		for _, k := range []string{"time", "src", "dst", "dqpn", "psn", "ackreq", "payload_len"} {
			if _, ok := p[k]; !ok {
				t.Fatalf("%q missing in %v", k, p)
			}
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		// Extension header fields appear exactly for the opcode's headers.
		h := wire.Opcode(op).Headers()
		for k, hdr := range map[string]wire.Headers{
			"reth_va": wire.HdrRETH, "reth_rkey": wire.HdrRETH, "reth_dma_len": wire.HdrRETH,
			"aeth_syndrome": wire.HdrAETH, "aeth_msn": wire.HdrAETH, "aeth_type": wire.HdrAETH,
			"deth_qkey": wire.HdrDETH, "deth_src_qp": wire.HdrDETH,
			"atomic_va": wire.HdrAtomicETH, "atomic_swap_add": wire.HdrAtomicETH, "atomic_compare": wire.HdrAtomicETH,
			"atomic_ack_orig": wire.HdrAtomicAckETH, "immdt": wire.HdrImmDt, "ieth_rkey": wire.HdrIETH,
		} {
			if _, ok := p[k]; ok != h.Has(hdr) {
				t.Errorf("%s: field %q present=%v", name, k, ok)
			}
		}
		switch wire.Opcode(op) {
		case wire.RCAcknowledge:
			if p["aeth_type"] != "ack" || num(t, p, "aeth_credit_code") != 31 || p["aeth_credits"] != nil {
				t.Errorf("ACK: %v", p)
			}
		case wire.UDSendOnly:
			if num(t, p, "deth_qkey") != 0x11111111 && num(t, p, "deth_qkey") != wire.GSIQKey {
				t.Errorf("UD Q_Key: %v", p)
			}
		}
	}
	want := map[int64]int{0: 10, 1: 20, 2: 10, 4: 22, 6: 25, 7: 1250, 8: 25, 10: 13, 12: 13, 13: 5, 14: 10,
		15: 5, 16: 8, 17: 70, 18: 10, 19: 5, 20: 5, 36: 10, 100: 15}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("opcode counts (-README +decoded):\n%s", diff)
	}
}

// TestDecodeLinkTypes rewrites the capture as pcapng, Linux cooked (SLL and
// SLL2) and raw IP, and requires the same packet lines.
func TestDecodeLinkTypes(t *testing.T) {
	frames := decodeReadFrames(t)
	_, want, _ := decodeRun(decodeCapture)

	// pcapng, written by gopacket.
	ng := filepath.Join(t.TempDir(), "c.pcapng")
	fh, err := os.Create(ng)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcapgo.NewNgWriter(fh, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := w.WritePacket(f.ci, f.data); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	fh.Close()

	var sll, sll2, raw []decodeFrame
	for _, f := range frames {
		eth := wire.Ethernet(f.data)
		body := f.data[wire.EthernetSize:]
		h := make([]byte, 16)
		binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
		binary.BigEndian.PutUint16(h[4:], 6)
		src := eth.Src()
		copy(h[6:], src[:])
		binary.BigEndian.PutUint16(h[14:], eth.EtherType())
		sll = append(sll, decodeFrame{f.ci, append(h, body...)})
		h2 := make([]byte, 20)
		binary.BigEndian.PutUint16(h2[0:], eth.EtherType())
		binary.BigEndian.PutUint32(h2[4:], 2) // ifindex
		binary.BigEndian.PutUint16(h2[8:], 1)
		h2[11] = 6
		copy(h2[12:], src[:])
		sll2 = append(sll2, decodeFrame{f.ci, append(h2, body...)})
		if t := eth.EtherType(); t == wire.EtherTypeIPv4 || t == wire.EtherTypeIPv6 {
			raw = append(raw, decodeFrame{f.ci, body})
		}
	}
	stripFrameNumbers := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				out = append(out, strings.Join(f[1:], " "))
			}
		}
		return out
	}
	for _, c := range []struct {
		name     string
		file     string
		renumber bool
	}{
		{"pcapng", ng, false},
		{"SLL", decodeWritePcap(t, "sll.pcap", 113, sll), false},
		{"SLL2", decodeWritePcap(t, "sll2.pcap", 276, sll2), false},
		{"raw IP", decodeWritePcap(t, "raw.pcap", 101, raw), true},
	} {
		code, got, errOut := decodeRun(c.file)
		if code != exitOK {
			t.Errorf("%s: exit %d %s", c.name, code, errOut)
			continue
		}
		if c.renumber {
			// Raw IP cannot hold the ARP frames: fewer frames, other
			// numbers, fewer skipped.
			w, g := stripFrameNumbers(want), stripFrameNumbers(got)
			w[len(w)-1] = strings.Replace(w[len(w)-1], "37 other", fmt.Sprintf("%d other", 37-(len(frames)-len(raw))), 1)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("%s (-Ethernet +%s):\n%s", c.name, c.name, diff)
			}
			continue
		}
		if got != want {
			t.Errorf("%s output differs from the Ethernet capture's:\n%s", c.name, cmp.Diff(want, got))
		}
	}
}

// TestDecodeMatchesTshark runs the real tshark on the capture and requires
// the same (opcode, DestQP, PSN) for every RoCEv2 packet, in order.
func TestDecodeMatchesTshark(t *testing.T) {
	tshark := testenv.Tool(t, "tshark")
	cmd := exec.Command(tshark, "-r", decodeCapture, "-n", "-d", "udp.port==4791,infiniband",
		"-Y", "infiniband.bth", "-T", "fields", "-E", "occurrence=f",
		"-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	var theirs [][4]int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("tshark line %q", sc.Text())
		}
		var row [4]int64
		for i, s := range f {
			v, err := strconv.ParseInt(s, 0, 64)
			if err != nil {
				t.Fatalf("tshark field %q: %v", s, err)
			}
			row[i] = v
		}
		theirs = append(theirs, row)
	}
	pkts, _ := decodeJSON(t, decodeCapture)
	var ours [][4]int64
	for _, p := range pkts {
		ours = append(ours, [4]int64{num(t, p, "frame"), num(t, p, "opcode"), num(t, p, "dqpn"), num(t, p, "psn")})
	}
	if len(ours) != 1531 {
		t.Fatalf("%d packets decoded", len(ours))
	}
	if diff := cmp.Diff(theirs, ours); diff != "" {
		t.Errorf("(frame, opcode, dqpn, psn) (-tshark +ours):\n%s", diff)
	}
}

// TestDecodeGSO: a datagram holding several RoCEv2 packets, as a capture
// on lo or veth shows a daemon's segmentation offload send, is cut into
// its packets, each decoded with a good ICRC over the headers the
// kernel's cut gives it (IPv4 IDs counting up); one that cannot be cut (a
// packet in it corrupted) gets a hint that says what it may be and how to
// capture frame by frame. The datagrams are built here as the kernel
// hands such a send to a capture: the packets back to back, each sealed
// for its ID, behind one IP and UDP header whose lengths cover them all.
func TestDecodeGSO(t *testing.T) {
	src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	packet := func(op wire.Opcode, psn, size int) []byte {
		buf := make([]byte, 8192)
		ff := wire.FrameFields{SrcIP: src, DstIP: dst, HopLimit: 64, SrcPort: wire.RoCEv2Port, IPID: uint16(psn)}
		pf := wire.PacketFields{BTH: wire.BTHFields{Opcode: op, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: wire.PSN(psn)}}
		pf.RETH = wire.RETHFields{VA: 0x1000, RKey: 0x1234, DMALen: uint32(size)}
		n, err := wire.BuildFrame(buf, &ff, &pf, make([]byte, size))
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	const hdrs = wire.EthernetSize + wire.IPv4MinimumSize + wire.UDPSize
	run := func(op wire.Opcode, count, size int) []byte {
		f := packet(op, 0, size)
		for k := 1; k < count; k++ {
			g := packet(op, k, size)
			f = append(f, g[hdrs:]...)
		}
		ip := wire.IPv4(f[wire.EthernetSize:])
		ip.SetTotalLength(uint16(len(f) - wire.EthernetSize))
		ip.SetChecksum(ip.CalculateChecksum())
		wire.UDP(f[wire.EthernetSize+wire.IPv4MinimumSize:]).SetLength(uint16(len(f) - wire.EthernetSize - wire.IPv4MinimumSize))
		return f
	}
	frames := []decodeFrame{
		{data: packet(wire.RCSendOnly, 0, 256)},
		{data: run(wire.RCRDMAWriteMiddle, 3, 1024)}, // no middle packet is 3 MTUs long
		{data: run(wire.RCSendOnly, 5, 1000)},        // one SEND's ICRC cannot cover five
		{data: run(wire.RCSendOnly, 4, 2048)},        // its last packet corrupted below
		{data: run(wire.RCSendOnly, 3, 2048)},        // its first packet corrupted below
	}
	// The fourth packet of frame 4: the cut still holds (the first
	// packet gives the size), and that packet alone is bad.
	f4 := frames[3].data
	f4[len(f4)-100] ^= 0x40
	// The first packet of frame 5: no cut holds, so the frame is one
	// SEND longer than any packet: malformed, with the hint.
	frames[4].data[wire.EthernetSize+wire.IPv4MinimumSize+wire.UDPSize+100] ^= 0x40
	for i := range frames {
		frames[i].ci = gopacket.CaptureInfo{CaptureLength: len(frames[i].data), Length: len(frames[i].data)}
	}
	p := decodeWritePcap(t, "gso.pcap", 1, frames)
	code, out, _ := decodeRun(p)
	if code != exitFail {
		t.Errorf("exit %d, want %d (bad ICRCs)", code, exitFail)
	}
	for _, want := range []string{
		"[gso 1/3]", "[gso 3/3]", "[gso 1/5]", "[gso 5/5]",
		"psn=3 ackreq=0 len=2048 icrc=BAD", "[gso 4/4]",
		"hint: several RoCEv2 packets in one datagram?",
		"14 RoCEv2 packets (12 icrc ok, 1 bad, 1 malformed), 0 other frames skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "hint:"); n != 1 {
		t.Errorf("%d hints, want 1 (the corrupted run):\n%s", n, out)
	}
	_, js, _ := decodeRun("--json", p)
	var parts, psns []int
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		var m struct {
			Part  int    `json:"gso_part"`
			Parts int    `json:"gso_parts"`
			PSN   int    `json:"psn"`
			OK    bool   `json:"icrc_ok"`
			Hint  string `json:"hint"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if m.Parts > 0 {
			if m.OK == (m.Parts == 4 && m.Part == 4) {
				t.Errorf("packet %d/%d: ICRC ok %v", m.Part, m.Parts, m.OK)
			}
			parts = append(parts, m.Part)
			psns = append(psns, m.PSN)
		}
	}
	if want := []int{1, 2, 3, 1, 2, 3, 4, 5, 1, 2, 3, 4}; !slices.Equal(parts, want) || !slices.Equal(psns, []int{0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 2, 3}) {
		t.Errorf("parts %v, PSNs %v; want %v and the PSNs in order", parts, psns, want)
	}
}

package wire_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// tsharkPath returns the tshark binary or stops the test (a failure under
// CI: internal/testenv).
func tsharkPath(t *testing.T) string {
	t.Helper()
	return testenv.Tool(t, "tshark")
}

// writePcap writes frames to a new pcap file with Ethernet link type.
func writePcap(t *testing.T, frames [][]byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "frames.pcap")
	fh, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(fh)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, b := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(b), Length: len(b)}
		if err := w.WritePacket(ci, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// expertError is Wireshark's PI_ERROR severity as -e _ws.expert.severity
// prints it.
const expertError = "8388608"

// tsharkRow is what tshark reports for one frame.
type tsharkRow struct {
	opcode    int
	destQP    uint32
	psn       uint32
	malformed bool
	expert    string
	info      string
	ipCsum    string // ip.checksum.status: 1 good, 0 bad
	udpCsum   string // udp.checksum.status: 1 good, 0 bad, 3 none (IPv4), 4 illegal zero (IPv6)
}

// runTshark dissects file and returns one row per frame. Wireshark
// dissects UDP port 4791 as RoCEv2 ("RRoCE") by default; -d makes that
// explicit so a changed default cannot silently skip the comparison. The
// RPC-over-RDMA heuristic claims SEND payloads whatever they hold and then
// reports its own parse failure as a malformed packet, so it is turned off:
// its verdict is about our test payload, not about the InfiniBand headers.
func runTshark(t *testing.T, file string) []tsharkRow {
	t.Helper()
	args := []string{"-r", file, "-n",
		"-d", "udp.port==4791,infiniband",
		"-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f",
		"-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
		"-e", "infiniband.bth.psn", "-e", "_ws.malformed", "-e", "_ws.expert.severity",
		"-e", "_ws.col.Info", "-e", "ip.checksum.status", "-e", "udp.checksum.status"}
	run := func(args []string) ([]byte, string, error) {
		cmd := exec.Command(tsharkPath(t), args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	out, stderr, err := run(append([]string{"--disable-heuristic", "rpcrdma_infiniband"}, args...))
	if err != nil && strings.Contains(stderr, "No such protocol") {
		// A tshark that does not know the heuristic by that name.
		out, stderr, err = run(args)
	}
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr)
	}
	var rows []tsharkRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		for len(f) < 9 {
			f = append(f, "")
		}
		var r tsharkRow
		r.opcode = -1
		if f[1] != "" {
			v, _ := strconv.ParseInt(f[1], 0, 32)
			r.opcode = int(v)
		}
		q, _ := strconv.ParseUint(f[2], 0, 32)
		p, _ := strconv.ParseUint(f[3], 0, 32)
		r.destQP, r.psn = uint32(q), uint32(p)
		r.malformed = f[4] != ""
		r.expert = f[5]
		r.info = f[6]
		r.ipCsum, r.udpCsum = f[7], f[8]
		rows = append(rows, r)
	}
	return rows
}

// TestTsharkEveryOpcode builds one frame of every opcode with emu/wire, over
// IPv4 and IPv6, some VLAN-tagged, some with a UDP checksum, has the real
// tshark dissect them, and requires tshark to report the same opcode,
// destination QP and PSN, to agree with our IPv4 and UDP checksums and to
// find nothing malformed.
//
// IPv6 frames always carry a UDP checksum here: a zero one is what rxe
// sends and accepts (its tunnel socket does not require IPv6 checksums),
// but RFC 8200 §8.1 forbids it outside tunnels (RFC 6935) and Wireshark
// reports it as an error.
func TestTsharkEveryOpcode(t *testing.T) {
	tsharkPath(t)
	var frames [][]byte
	var want []wire.PacketFields
	var wantUDP []string
	for i, s := range opcodeSpecs {
		for _, v6 := range []bool{false, true} {
			ff := testFrameFields(v6, i%3 == 0)
			ff.UDPChecksum = v6 || i%2 == 0
			pf := testFields(s.op)
			pf.BTH.DestQP = 0x010000 + uint32(len(frames))
			pf.BTH.PSN = wire.PSN(0xfffff0).Add(uint32(len(frames))) // crosses the 24-bit wrap
			n := payloadLens(s.payload)[len(payloadLens(s.payload))/2]
			// A payload that no heuristic sub-dissector claims.
			payload := bytes.Repeat([]byte{0xee}, n)
			buf := make([]byte, wire.FrameLen(&ff, s.op, n))
			if _, err := wire.BuildFrame(buf, &ff, &pf, payload); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, buf)
			want = append(want, pf)
			if ff.UDPChecksum {
				wantUDP = append(wantUDP, "1")
			} else {
				wantUDP = append(wantUDP, "3")
			}
		}
	}
	rows := runTshark(t, writePcap(t, frames))
	if len(rows) != len(frames) {
		t.Fatalf("tshark returned %d rows for %d frames", len(rows), len(frames))
	}
	for i, r := range rows {
		w := want[i].BTH
		name := fmt.Sprintf("frame %d (%v)", i+1, w.Opcode)
		if r.opcode != int(w.Opcode) || r.destQP != w.DestQP || r.psn != uint32(w.PSN) {
			t.Errorf("%s: tshark opcode %d destqp %#x psn %#x; built %d %#x %#x",
				name, r.opcode, r.destQP, r.psn, w.Opcode, w.DestQP, w.PSN)
		}
		if r.udpCsum != wantUDP[i] || (r.ipCsum != "" && r.ipCsum != "1") {
			t.Errorf("%s: tshark checksum status IPv4 %q UDP %q, want IPv4 \"1\" (good) UDP %q", name, r.ipCsum, r.udpCsum, wantUDP[i])
		}
		if r.malformed || r.expert == expertError {
			t.Errorf("%s: tshark marks it malformed=%v expert severity=%q info=%q", name, r.malformed, r.expert, r.info)
		}
		// Wireshark's Info column starts with its opcode name (with or
		// without a blank before "QP="); it has none for FLUSH, ATOMIC
		// WRITE and CNP 0x81, which it shows as unknown.
		wsName := strings.TrimSpace(strings.SplitN(r.info, "QP=", 2)[0])
		switch w.Opcode {
		case wire.RCFlush, wire.RCAtomicWrite, wire.CNP:
			if !strings.HasPrefix(wsName, "Unknown") {
				t.Logf("%s: this tshark names it %q; consider adopting the name", name, wsName)
			}
		default:
			if wsName != w.Opcode.String() {
				t.Errorf("%s: tshark names it %q, we %q", name, wsName, w.Opcode.String())
			}
		}
	}
}

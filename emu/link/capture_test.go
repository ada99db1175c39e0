package link_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// captureRecord is one frame read back from a capture.
type captureRecord struct {
	at   time.Time
	data []byte
}

func readPcap(t *testing.T, name string) []captureRecord {
	t.Helper()
	fh, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		t.Fatalf("pcapgo: %v", err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Errorf("link type %v, want Ethernet", r.LinkType())
	}
	// pcapgo v1.1.19's Reader.Resolution reports the two resolutions the
	// wrong way round, so read the magic number itself.
	var magic [4]byte
	if _, err := fh.ReadAt(magic[:], 0); err != nil || binary.LittleEndian.Uint32(magic[:]) != 0xa1b23c4d {
		t.Errorf("pcap magic % x, want the nanosecond-resolution magic a1b23c4d (%v)", magic, err)
	}
	var recs []captureRecord
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatalf("pcapgo: record %d: %v", len(recs)+1, err)
		}
		if ci.CaptureLength != ci.Length || ci.Length != len(data) {
			t.Errorf("record %d truncated: %+v", len(recs)+1, ci)
		}
		recs = append(recs, captureRecord{ci.Timestamp, data})
	}
}

// TestCapture runs traffic both ways, with duplicates, over a pair with a
// capture tap on a manual clock, and checks the pcap: one record per
// frame delivered, in delivery order, byte for byte, stamped with the
// epoch plus the arrival time; gopacket decodes the Ethernet/IP/UDP
// layers; and, if installed, tshark reads the file without errors and
// dissects every frame as RoCEv2 with the PSN we sent.
func TestCapture(t *testing.T) {
	name := filepath.Join(t.TempDir(), "pair.pcap")
	fh, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := timing.NewManual()
	p, ra, rb := newPair(t, link.PairConfig{
		Clock: clock, Rate: 100e9, Delay: 700 * time.Nanosecond,
		Capture: fh, CaptureEpoch: epoch,
		AtoB: link.Faults{Duplicate: 0.2, Seed: 11},
	})
	pool := p.A().Pool()
	for round := range 10 {
		o := frameOpts{payload: 100 * round, vlan: round%2 == 1}
		if err := p.A().Send(frames(t, pool, round*10, 5, o)); err != nil {
			t.Fatal(err)
		}
		if err := p.B().Send(frames(t, pool, 1000+round*10, 3, o)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Microsecond)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The pcap interleaves both directions by arrival time; within a
	// direction it is in delivery order.
	recs := readPcap(t, name)
	all := append(ra.got(), rb.got()...)
	if len(recs) != len(all) {
		t.Fatalf("%d records for %d frames delivered", len(recs), len(all))
	}
	byDir := map[bool][]captureRecord{}
	for _, r := range recs {
		toB := seqOf(r.data) < 1000
		byDir[toB] = append(byDir[toB], r)
	}
	for toB, got := range map[bool][]rxFrame{true: rb.got(), false: ra.got()} {
		for i, f := range got {
			r := byDir[toB][i]
			if !bytes.Equal(r.data, f.data) || !r.at.Equal(epoch.Add(f.time)) {
				t.Errorf("record for frame %d: at %v, want %v; same bytes %v", f.seq, r.at, epoch.Add(f.time), bytes.Equal(r.data, f.data))
			}
		}
	}
	for i, r := range recs {
		pkt := gopacket.NewPacket(r.data, layers.LayerTypeEthernet, gopacket.Default)
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if pkt.ErrorLayer() != nil || udp == nil || udp.DstPort != wire.RoCEv2Port {
			t.Errorf("record %d: gopacket: error %v, UDP %v", i+1, pkt.ErrorLayer(), udp)
		}
		if i > 0 && r.at.Before(recs[i-1].at) {
			t.Errorf("record %d goes back in time", i+1)
		}
	}

	checkTshark(t, name, recs)
}

// checkTshark has tshark read the capture: no error, no malformed frame,
// every frame RoCEv2 with the PSN it carries and the timestamp pcapgo
// read.
func checkTshark(t *testing.T, name string, recs []captureRecord) {
	tshark := testenv.Tool(t, "tshark")
	// As in emu/wire's tshark test: RoCEv2 explicitly, and the RPC-over-
	// RDMA heuristic off, since it judges our test payload.
	args := []string{"-r", name, "-n", "-d", "udp.port==4791,infiniband",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f",
		"-e", "frame.number", "-e", "frame.time_epoch", "-e", "infiniband.bth.psn",
		"-e", "_ws.malformed", "-e", "_ws.expert.severity"}
	run := func(args []string) ([]byte, string, error) {
		cmd := exec.Command(tshark, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	out, stderr, err := run(append([]string{"--disable-heuristic", "rpcrdma_infiniband"}, args...))
	if err != nil && strings.Contains(stderr, "No such protocol") {
		out, stderr, err = run(args)
	}
	if err != nil || strings.TrimSpace(withoutRootWarning(stderr)) != "" {
		t.Fatalf("tshark -r: %v\n%s", err, stderr)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		for len(f) < 5 {
			f = append(f, "")
		}
		if n >= len(recs) {
			t.Fatalf("tshark reports more frames than the %d written", len(recs))
		}
		r := recs[n]
		n++
		psn, _ := strconv.ParseUint(f[2], 0, 32)
		if f[2] == "" || uint32(psn) != seqOf(r.data)&uint32(wire.PSNMask) {
			t.Errorf("tshark frame %s: PSN %q, want %d", f[0], f[2], seqOf(r.data))
		}
		if f[3] != "" || f[4] == "8388608" { // PI_ERROR
			t.Errorf("tshark frame %s: malformed %q, expert severity %q", f[0], f[3], f[4])
		}
		if want := fmt.Sprintf("%d.%09d", r.at.Unix(), r.at.Nanosecond()); f[1] != want {
			t.Errorf("tshark frame %s: time %s, want %s", f[0], f[1], want)
		}
	}
	if n != len(recs) {
		t.Errorf("tshark read %d frames, want %d", n, len(recs))
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(b)
	return len(b), nil
}

// TestCaptureErrors checks that a capture that cannot be written never
// disturbs the data path, and that its error comes out of Close.
func TestCaptureErrors(t *testing.T) {
	clock := timing.NewManual()
	pool := link.NewPool(0)
	p, err := link.NewPair(link.PairConfig{Clock: clock, Pool: pool, Capture: &failingWriter{n: 100}})
	if err != nil {
		t.Fatalf("NewPair: %v", err) // the header is buffered
	}
	rb := &recorder{}
	p.B().Attach(rb)
	for i := range 100 {
		if err := p.A().Send(frames(t, pool, i*10, 10, frameOpts{payload: 1000})); err != nil {
			t.Fatal(err)
		}
		clock.Advance(0)
	}
	if rb.n() != 1000 {
		t.Errorf("delivered %d frames, want 1000", rb.n())
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Close: %v, want the capture's error", err)
	}
	if pool.Outstanding() != 0 {
		t.Errorf("%d packets outstanding", pool.Outstanding())
	}
}

// withoutRootWarning drops the warning tshark prints when run as root,
// which says nothing about the file.
func withoutRootWarning(stderr string) string {
	var keep []string
	for l := range strings.Lines(stderr) {
		if !strings.HasPrefix(l, "Running as user") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

package interop

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/wire"

	"github.com/irdma-emu/irdma-emu/internal/daemon/daemontest"
)

// TestAnalyzeCaptureFile judges the retransmissions of a kept capture
// (IRDMA_EMU_ANALYZE=tests/interop/cache/artifacts/…/tap.pcap): a tool for
// looking at a failed run again, not a scenario.
func TestAnalyzeCaptureFile(t *testing.T) {
	file := os.Getenv("IRDMA_EMU_ANALYZE")
	if file == "" {
		t.Skip("set IRDMA_EMU_ANALYZE to a capture of the tap to analyse it")
	}
	out, err := exec.Command(daemontest.Binary(t), "decode", "--json", file).Output()
	if err != nil && len(out) == 0 {
		t.Fatal(err)
	}
	pkts, sum, err := parseDecode(out)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(daemontest.Binary(t), "decode", "--json", filepath.Join(filepath.Dir(file), "irdma-emu.pcap")).Output(); err == nil || len(out) > 0 {
		emu, _, err := parseDecode(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d packets matched in irdma-emu's capture", annotateEmuTimes(pkts, emu), len(pkts))
	}
	rep := analyzeRetries(pkts, netip.MustParseAddr("10.99.0.1"), 1024)
	t.Logf("%+v\n%s", sum, rep)
	for _, b := range rep.blame {
		t.Log("BLAME " + b.t.Format(time.RFC3339Nano) + " " + b.msg)
	}
}

// TestAnalyzeRetries pins the verdicts of the capture's judge on small
// made-up exchanges between irdma-emu (10.99.0.1, QP 0x11) and rxe
// (10.99.0.2, QP 0x22).
func TestAnalyzeRetries(t *testing.T) {
	emu, rxe := netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type ev struct {
		ms     float64
		fromUs bool
		op     wire.Opcode
		psn    uint32
		ackreq bool
		aeth   string // ack, nak, rnr_nak
		dmaLen uint32
	}
	build := func(evs []ev) []*wirePacket {
		var out []*wirePacket
		for i, e := range evs {
			p := &wirePacket{Frame: i + 1, Opcode: uint8(e.op), PSN: e.psn, AckReq: e.ackreq, AETH: e.aeth}
			p.t = t0.Add(time.Duration(e.ms * float64(time.Millisecond)))
			p.at = p.t
			if e.fromUs {
				p.src, p.dst, p.DQPN = emu, rxe, 0x22
			} else {
				p.src, p.dst, p.DQPN = rxe, emu, 0x11
			}
			if e.aeth == "nak" {
				p.NAK = "psn-seq"
			}
			if e.dmaLen != 0 {
				p.DMALen = &e.dmaLen
			}
			out = append(out, p)
		}
		return out
	}
	const us, them = true, false
	for _, tc := range []struct {
		name     string
		evs      []ev
		blame    string // a substring of the one blame expected; "" for none
		verdicts map[string]int
	}{
		{"clean exchange", []ev{
			{0, us, wire.RCSendOnly, 10, true, "", 0},
			{1, them, wire.RCAcknowledge, 10, false, "ack", 0},
			{2, them, wire.RCSendOnly, 500, true, "", 0},
			{2.1, us, wire.RCAcknowledge, 500, false, "ack", 0},
		}, "", map[string]int{}},
		{"rxe's spurious timer", []ev{
			{0, them, wire.RCSendFirst, 500, false, "", 0},
			{0.1, them, wire.RCSendLast, 501, true, "", 0},
			{0.2, us, wire.RCAcknowledge, 501, false, "ack", 0},
			{4, them, wire.RCSendFirst, 500, false, "", 0},
			{4.1, them, wire.RCSendLast, 501, true, "", 0},
		}, "", map[string]int{"rxe: premature": 2}},
		{"rxe retries what was acknowledged long ago", []ev{
			{0, them, wire.RCSendOnly, 500, true, "", 0},
			{0.2, us, wire.RCAcknowledge, 500, false, "ack", 0},
			{70, them, wire.RCSendOnly, 500, true, "", 0},
		}, "", map[string]int{"rxe: needless (already acknowledged)": 1}},
		{"irdma-emu times out", []ev{
			{0, us, wire.RCSendFirst, 10, false, "", 0},
			{0.1, us, wire.RCSendLast, 11, true, "", 0},
			{68, us, wire.RCSendFirst, 10, false, "", 0},
			{68.1, us, wire.RCSendLast, 11, true, "", 0},
			{70, them, wire.RCAcknowledge, 11, false, "ack", 0},
		}, "", map[string]int{"irdma-emu: justified (timeout without progress)": 2}},
		{"irdma-emu retries early", []ev{
			{0, us, wire.RCSendOnly, 10, true, "", 0},
			{10, us, wire.RCSendOnly, 10, true, "", 0},
		}, "premature", nil},
		{"irdma-emu retries what was acknowledged", []ev{
			{0, us, wire.RCSendOnly, 10, true, "", 0},
			{0.1, us, wire.RCSendOnly, 11, true, "", 0},
			{1, them, wire.RCAcknowledge, 10, false, "ack", 0},
			{80, us, wire.RCSendOnly, 10, true, "", 0},
		}, "needless", nil},
		{"irdma-emu goes back after a NAK", []ev{
			{0, us, wire.RCSendOnly, 10, true, "", 0},
			{0.1, us, wire.RCSendOnly, 11, true, "", 0},
			{1, them, wire.RCAcknowledge, 11, false, "nak", 0},
			{1.5, us, wire.RCSendOnly, 11, true, "", 0},
			{2, them, wire.RCAcknowledge, 11, false, "ack", 0},
		}, "", map[string]int{"irdma-emu: justified (NAK)": 1}},
		{"irdma-emu answers late", []ev{
			{0, them, wire.RCSendOnly, 500, true, "", 0},
			{80, us, wire.RCAcknowledge, 500, false, "ack", 0},
		}, "answered PSN 0x1f4", nil},
		{"rxe retries while irdma-emu sits on its request", []ev{
			{0, them, wire.RCSendOnly, 500, true, "", 0},
			{67, them, wire.RCSendOnly, 500, true, "", 0},
		}, "unanswered", nil},
		{"irdma-emu NAKs", []ev{
			{0, them, wire.RCSendOnly, 502, true, "", 0},
			{0.1, us, wire.RCAcknowledge, 500, false, "nak", 0},
		}, "NAK", nil},
		{"irdma-emu skips a PSN", []ev{
			{0, us, wire.RCSendOnly, 10, true, "", 0},
			{0.1, us, wire.RCSendOnly, 12, true, "", 0},
		}, "out of order", nil},
		{"a READ takes a PSN per response packet", []ev{
			{0, us, wire.RCRDMAReadRequest, 10, true, "", 4096},
			{0.1, us, wire.RCSendOnly, 14, true, "", 0},
			{1, them, wire.RCRDMAReadResponseFirst, 10, false, "ack", 0},
			{1.1, them, wire.RCRDMAReadResponseMiddle, 11, false, "", 0},
			{1.2, them, wire.RCRDMAReadResponseMiddle, 12, false, "", 0},
			{1.3, them, wire.RCRDMAReadResponseLast, 13, false, "ack", 0},
			{1.4, them, wire.RCAcknowledge, 14, false, "ack", 0},
		}, "", map[string]int{}},
		{"irdma-emu answers rxe's retry, rxe is gone", []ev{
			{0, them, wire.RCSendOnly, 500, true, "", 0},
			{0.1, us, wire.RCAcknowledge, 500, false, "ack", 0},
			{3, them, wire.RCSendOnly, 500, true, "", 0},
			{3.1, us, wire.RCAcknowledge, 500, false, "ack", 0},
		}, "", map[string]int{"rxe: premature": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyzeRetries(build(tc.evs), emu, 1024)
			if want := map[bool]int{true: 1}[strings.Contains(tc.name, "rxe is gone")]; rep.trailingDupAcks != want {
				t.Errorf("trailing duplicate ACKs %d, want %d", rep.trailingDupAcks, want)
			}
			var msgs []string
			for _, b := range rep.blame {
				msgs = append(msgs, b.msg)
			}
			switch {
			case tc.blame == "" && len(msgs) != 0:
				t.Errorf("blamed irdma-emu: %q", msgs)
			case tc.blame != "" && (len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "\n"), tc.blame)):
				t.Errorf("blame %q, want one containing %q", msgs, tc.blame)
			}
			if tc.verdicts != nil {
				for k, v := range tc.verdicts {
					if rep.verdicts[k] != v {
						t.Errorf("verdict %q: %d, want %d (all: %v)", k, rep.verdicts[k], v, rep.verdicts)
					}
				}
				if len(rep.verdicts) != len(tc.verdicts) {
					t.Errorf("verdicts %v, want %v", rep.verdicts, tc.verdicts)
				}
			}
		})
	}
}

// TestFindFinalAckRace replays the end of a capture where rxe (the server
// of ibv_rc_pingpong) stalled in its last message, its retransmit timer
// fired, irdma-emu acknowledged the message, and rxe sent it again anyway
// (frames 2035–2043 of a run of TestRxeEmu).
func TestFindFinalAckRace(t *testing.T) {
	emu, rxe := netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	t0 := time.Date(2026, 11, 30, 4, 46, 11, 0, time.UTC)
	mk := func(frame int, ms float64, fromRxe bool, op wire.Opcode, psn uint32, ackreq bool, aeth string) *wirePacket {
		p := &wirePacket{Frame: frame, Opcode: uint8(op), PSN: psn, AckReq: ackreq, AETH: aeth}
		p.t = t0.Add(time.Duration(ms * float64(time.Millisecond)))
		p.at, p.Time = p.t, p.t.Format(time.RFC3339Nano)
		if fromRxe {
			p.src, p.dst, p.DQPN = rxe, emu, 0x3
		} else {
			p.src, p.dst, p.DQPN = emu, rxe, 0x11
		}
		return p
	}
	pkts := []*wirePacket{
		mk(2033, 658.348, false, wire.RCSendLast, 0x362f81, true, ""),
		mk(2034, 659.349, true, wire.RCAcknowledge, 0x362f81, false, "ack"),
		mk(2035, 659.722, true, wire.RCSendFirst, 0xbf8872, false, ""),
		mk(2036, 659.807, true, wire.RCSendMiddle, 0xbf8873, false, ""),
		mk(2037, 660.136, true, wire.RCSendMiddle, 0xbf8874, false, ""),
		mk(2038, 777.692, true, wire.RCSendLast, 0xbf8875, true, ""),
		mk(2039, 777.725, true, wire.RCSendFirst, 0xbf8872, false, ""),
		mk(2040, 777.876, false, wire.RCAcknowledge, 0xbf8875, false, "ack"),
		mk(2041, 780.505, true, wire.RCSendMiddle, 0xbf8873, false, ""),
		mk(2042, 780.521, true, wire.RCSendMiddle, 0xbf8874, false, ""),
		mk(2043, 780.534, true, wire.RCSendLast, 0xbf8875, true, ""),
	}
	why, ok := findFinalAckRace(pkts, emu, rxe)
	if !ok || !strings.Contains(why, "frame 2040") || !strings.Contains(why, "frame 2041") {
		t.Errorf("race not found: %v %s", ok, why)
	}
	// Without irdma-emu's ACK it is irdma-emu's fault, not a race.
	noAck := append(append([]*wirePacket{}, pkts[:7]...), pkts[8:]...)
	if why, ok := findFinalAckRace(noAck, emu, rxe); ok || !strings.Contains(why, "never acknowledged") {
		t.Errorf("without the ACK: %v %s", ok, why)
	}
	// Without rxe's retry after the ACK there is nothing to explain.
	if why, ok := findFinalAckRace(pkts[:8], emu, rxe); ok {
		t.Errorf("without the retry: %v %s", ok, why)
	}
}

package main

import (
	"regexp"
	"strings"
	"testing"
)

// decodeCMCapture is a capture of every CM message between two emulated
// devices (written by cm/gsi's TestCaptureTshark with
// IRDMA_EMU_UPDATE_CM_CAPTURE=1; tshark decodes it without errors there).
const decodeCMCapture = "../../testdata/captures/irdma-emu-cm-ipv4.pcap"

// TestDecodeCM: each CM MAD is named with its key fields; the scenario's
// QPNs, PSNs, service IDs, reason and SIDR answer are the ones the test
// that made the capture chose.
func TestDecodeCM(t *testing.T) {
	code, out, errOut := decodeRun(decodeCMCapture)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		`cm=REQ tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ sid=0x0000000001064e20 qpn=0x11 spsn=256 icrc=ok$`,
		`cm=MRA tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ rcid=0x[0-9a-f]+ mraed=REQ icrc=ok$`,
		`cm=REP tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ rcid=0x[0-9a-f]+ qpn=0x22 spsn=512 icrc=ok$`,
		`cm=RTU tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ rcid=0x[0-9a-f]+ icrc=ok$`,
		`cm=DREQ tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ rcid=0x[0-9a-f]+ qpn=0x22 icrc=ok$`,
		`cm=DREP tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ rcid=0x[0-9a-f]+ icrc=ok$`,
		`cm=REQ tid=0x[0-9a-f]+ lcid=0x[0-9a-f]+ sid=0x0000000001064e21 qpn=0x12 spsn=768 icrc=ok$`,
		`cm=REJ tid=0x[0-9a-f]+ lcid=0x0 rcid=0x[0-9a-f]+ reason=8 rejected=REQ icrc=ok$`,
		`cm=SIDR_REQ tid=0x[0-9a-f]+ reqid=0x[0-9a-f]+ sid=0x0000000002114e20 icrc=ok$`,
		`cm=SIDR_REP tid=0x[0-9a-f]+ reqid=0x[0-9a-f]+ sid=0x0000000002114e20 qpn=0x33 status=0 qkey=0x11111111 icrc=ok$`,
		`^10 RoCEv2 packets \(10 icrc ok, 0 bad, 0 malformed\), 0 other frames skipped$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d: %q\n does not match %q", i+1, lines[i], w)
		}
	}
	// The comm IDs pair up: the REP's remote comm ID is the REQ's local.
	lcid := regexp.MustCompile(` lcid=(0x[0-9a-f]+)`)
	rcid := regexp.MustCompile(` rcid=(0x[0-9a-f]+)`)
	reqID := lcid.FindStringSubmatch(lines[0])[1]
	repLocal := lcid.FindStringSubmatch(lines[2])[1]
	if r := rcid.FindStringSubmatch(lines[2])[1]; r != reqID {
		t.Errorf("REP answers comm ID %s, the REQ's is %s", r, reqID)
	}
	if r := rcid.FindStringSubmatch(lines[3])[1]; r != repLocal {
		t.Errorf("RTU names %s, the REP's comm ID is %s", r, repLocal)
	}

	pkts, _ := decodeJSON(t, decodeCMCapture)
	attrs := []string{"REQ", "MRA", "REP", "RTU", "DREQ", "DREP", "REQ", "REJ", "SIDR_REQ", "SIDR_REP"}
	for i, p := range pkts {
		c, ok := p["cm"].(map[string]any)
		if !ok {
			t.Fatalf("packet %d: no cm object", i+1)
		}
		if c["attr"] != attrs[i] {
			t.Errorf("packet %d: attr %v, want %s", i+1, c["attr"], attrs[i])
		}
	}
	req := pkts[0]["cm"].(map[string]any)
	if num(t, req, "attr_id") != 0x10 || num(t, req, "qpn") != 0x11 || num(t, req, "starting_psn") != 0x100 ||
		num(t, req, "service_id") != 0x1064e20 {
		t.Errorf("REQ JSON %v", req)
	}
	if rej := pkts[7]["cm"].(map[string]any); num(t, rej, "rej_reason") != 8 || rej["message_rejected"] != "REQ" {
		t.Errorf("REJ JSON %v", rej)
	}
}

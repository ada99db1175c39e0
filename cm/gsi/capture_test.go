package gsi

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// updateCapture, when set in the environment, makes TestCaptureTshark
// write its capture to testdata/captures (the `irdma-emu decode` test
// reads it).
const updateCapture = "IRDMA_EMU_UPDATE_CM_CAPTURE"

// cmScenario runs every CM message across the link: REQ, MRA, REP, RTU,
// DREQ, DREP; a REQ to nobody (REJ); SIDR_REQ, SIDR_REP.
func cmScenario(t *testing.T, w *world) {
	a, b := w.hosts[0], w.hosts[1]
	l, _ := b.m.CreateID(b.handler, nil)
	if err := l.Listen(svc, 0); err != nil {
		t.Fatal(err)
	}
	const udpSvc = 0x0000000002114e20
	ls, _ := b.m.CreateID(b.handler, nil)
	if err := ls.Listen(udpSvc, 0); err != nil {
		t.Fatal(err)
	}
	react := func(id *cm.ID, ev *cm.Event) error {
		switch ev.Type {
		case cm.EventREQReceived:
			if err := id.SendMRA(10, nil); err != nil {
				return err
			}
			return id.SendREP(&cm.REPParam{QPN: 0x22, StartingPSN: 0x200, ResponderResources: 4, InitiatorDepth: 4, RNRRetryCount: 7})
		case cm.EventREPReceived:
			return id.SendRTU(nil)
		case cm.EventDREQReceived:
			return id.SendDREP(nil)
		case cm.EventSIDRREQReceived:
			return id.SendSIDRREP(&cm.SIDRREPParam{QPN: 0x33, QKey: 0x11111111})
		}
		return nil
	}
	a.react, b.react = react, react
	id, _ := a.m.CreateID(a.handler, nil)
	if err := id.SendREQ(&cm.REQParam{Path: a.path(b), ServiceID: svc, QPN: 0x11, QPType: cm.QPTypeRC,
		StartingPSN: 0x100, ResponderResources: 4, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	w.wait(b, cm.EventRTUReceived, "RTU")
	if err := id.SendDREQ(nil); err != nil {
		t.Fatal(err)
	}
	w.wait(a, cm.EventDREPReceived, "DREP")
	id2, _ := a.m.CreateID(a.handler, nil)
	if err := id2.SendREQ(&cm.REQParam{Path: a.path(b), ServiceID: svc + 1, QPN: 0x12, QPType: cm.QPTypeRC, StartingPSN: 0x300}); err != nil {
		t.Fatal(err)
	}
	w.wait(a, cm.EventREJReceived, "REJ")
	id3, _ := a.m.CreateID(a.handler, nil)
	if err := id3.SendSIDRREQ(&cm.SIDRREQParam{Path: a.path(b), ServiceID: udpSvc}); err != nil {
		t.Fatal(err)
	}
	w.wait(a, cm.EventSIDRREPReceived, "SIDR_REP")
}

// wantAttrs is the scenario's MADs in wire order.
var wantAttrs = []mad.AttrID{mad.AttrREQ, mad.AttrMRA, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ, mad.AttrDREP,
	mad.AttrREQ, mad.AttrREJ, mad.AttrSIDRREQ, mad.AttrSIDRREP}

// TestCaptureTshark captures the scenario on the link and checks that
// tshark's InfiniBand dissector decodes every frame as the CM MAD we
// sent, with the same key fields, and reports nothing malformed.
func TestCaptureTshark(t *testing.T) {
	tshark := testenv.Tool(t, "tshark")
	w := newWorld(t, false)
	cmScenario(t, w)
	w.pair.Close()
	file := filepath.Join(t.TempDir(), "cm.pcap")
	if err := os.WriteFile(file, w.pcap.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(updateCapture) != "" {
		if err := os.WriteFile("../../testdata/captures/irdma-emu-cm-ipv4.pcap", w.pcap.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Ours: every RoCEv2 frame is a UD SEND to QP1 with a CM MAD.
	r, err := pcapgo.NewReader(bytes.NewReader(w.pcap.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var ours []mad.Summary
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		var f wire.Frame
		if err := wire.ParseFrame(data, &f); err != nil {
			t.Fatalf("frame %d: %v", len(ours)+1, err)
		}
		p := &f.Packet
		if p.DETH == nil || p.BTH.DestQP() != 1 || p.DETH.SrcQP() != 1 || p.DETH.QKey() != wire.GSIQKey || p.BTH.PKey() != 0xffff {
			t.Fatalf("frame %d: not a GSI UD SEND: dqp %d", len(ours)+1, p.BTH.DestQP())
		}
		s, err := mad.Describe(p.Payload)
		if err != nil {
			t.Fatalf("frame %d: %v", len(ours)+1, err)
		}
		ours = append(ours, s)
	}
	if len(ours) != len(wantAttrs) {
		t.Fatalf("%d frames, want %d", len(ours), len(wantAttrs))
	}
	for i, s := range ours {
		if s.Attr != wantAttrs[i] {
			t.Errorf("frame %d: %v, want %v", i+1, s.Attr, wantAttrs[i])
		}
	}

	fields := []string{"infiniband.mad.mgmtclass", "infiniband.mad.classversion", "infiniband.mad.method",
		"infiniband.mad.attributeid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
		"infiniband.cm.req.serviceid", "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn",
		"infiniband.cm.rej.reason", "infiniband.cm.rtu.remotecommid", "infiniband.cm.dreq.remotecommid", "_ws.malformed",
		"_ws.expert.severity"}
	args := []string{"-r", file, "-n", "-d", "udp.port==4791,infiniband", "-T", "fields", "-E", "separator=/t",
		"-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
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
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Errorf("frame %d: tshark field %q: %v", i+1, s, err)
		}
		return v
	}
	for ; sc.Scan(); i++ {
		f := strings.Split(sc.Text(), "\t")
		for len(f) < len(fields) {
			f = append(f, "")
		}
		if i >= len(ours) {
			t.Fatalf("tshark shows more frames than the capture holds")
		}
		s := ours[i]
		if num(f[0]) != mad.ClassCM || num(f[1]) != mad.ClassVersion || num(f[2]) != mad.MethodSend ||
			num(f[3]) != uint64(s.Attr) {
			t.Errorf("frame %d: tshark class %s version %s method %s attribute %s; sent %v", i+1, f[0], f[1], f[2], f[3], s.Attr)
		}
		if f[12] != "" || f[13] != "" {
			t.Errorf("frame %d (%v): tshark malformed %q, expert severity %q", i+1, s.Attr, f[12], f[13])
		}
		switch s.Attr {
		case mad.AttrREQ:
			if num(f[4]) != uint64(s.QPN) || num(f[5]) != uint64(s.PSN) || num(f[6]) != s.ServiceID {
				t.Errorf("frame %d REQ: tshark qpn %s psn %s sid %s; sent %+v", i+1, f[4], f[5], f[6], s)
			}
		case mad.AttrREP:
			if num(f[7]) != 0x22 || num(f[8]) != 0x200 {
				t.Errorf("frame %d REP: tshark qpn %s psn %s", i+1, f[7], f[8])
			}
		case mad.AttrREJ:
			if num(f[9]) != uint64(cm.RejInvalidServiceID) {
				t.Errorf("frame %d REJ: tshark reason %s", i+1, f[9])
			}
		case mad.AttrRTU:
			if num(f[10]) != uint64(s.RemoteCommID) {
				t.Errorf("frame %d RTU: tshark remote comm ID %s, sent %#x", i+1, f[10], s.RemoteCommID)
			}
		case mad.AttrDREQ:
			if num(f[11]) != uint64(s.RemoteCommID) {
				t.Errorf("frame %d DREQ: tshark remote comm ID %s, sent %#x", i+1, f[11], s.RemoteCommID)
			}
		}
	}
	if i != len(ours) {
		t.Errorf("tshark decoded %d frames, the capture holds %d", i, len(ours))
	}
}

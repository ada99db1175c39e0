package main

import (
	"bytes"
	"testing"

	"github.com/irdma-emu/irdma-emu/client"
)

// TestPingpongRecord pins the 52-byte exchange record of ibv_rc_pingpong:
// "%04x:%06x:%06x:" and the GID's 16 bytes as 32 hex digits, NUL-terminated.
func TestPingpongRecord(t *testing.T) {
	g, _ := client.ParseGID("::ffff:127.0.0.2")
	d := ppDest{lid: 0, qpn: 0x11, psn: 0xabcdef, gid: g}
	rec := d.record()
	want := "0000:000011:abcdef:00000000000000000000ffff7f000002\x00"
	if len(rec) != 52 || !bytes.Equal(rec, []byte(want)) {
		t.Fatalf("record %q (%d bytes), want %q", rec, len(rec), want)
	}
	back, err := parseRecord(rec)
	if err != nil || back != d {
		t.Fatalf("parse: %+v %v", back, err)
	}
	// sscanf's %x reads upper case too.
	if back, err := parseRecord([]byte("0000:00001A:ABCDEF:00000000000000000000FFFF7F000002\x00")); err != nil || back.qpn != 0x1a || back.gid != g {
		t.Fatalf("upper case: %+v %v", back, err)
	}
}

// FuzzParseRecord: any 52 bytes from the network give a record or an
// error, never a panic.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("0000:000011:abcdef:00000000000000000000ffff7f000002\x00"))
	f.Add([]byte("done\x00"))
	f.Add(bytes.Repeat([]byte{':'}, 52))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseRecord(b)
	})
}

// TestPerfParamsCheck: parameters from the network are bounded.
func TestPerfParamsCheck(t *testing.T) {
	ok := perfParams{Verb: "write", QPs: 1, Sizes: []int{65536}, Iters: 10, TxDepth: 128, RxDepth: 512, CQMod: 100, Outs: 16, Timeout: 14}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*perfParams){
		func(p *perfParams) { p.QPs = 0 },
		func(p *perfParams) { p.Sizes = nil },
		func(p *perfParams) { p.Sizes = []int{-1} },
		func(p *perfParams) { p.CQMod = 1000 },
		func(p *perfParams) { p.MTU = 1000 },
		func(p *perfParams) { p.QPs, p.Sizes = 64, []int{1 << 30} },
		func(p *perfParams) { p.Inline = 500 },
	} {
		p := ok
		bad(&p)
		if err := p.check(); err == nil {
			t.Errorf("accepted %+v", p)
		}
	}
}

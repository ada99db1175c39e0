package attach

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// unhex reads hex with spaces and newlines.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHeaderBytes(t *testing.T) {
	// CMD, seq 7, 4 payload bytes. Magic "IDEA" as bytes.
	want := unhex(t, "49444541 0200 0000 07000000 04000000")
	got := Header{Type: TypeCmd, Seq: 7, Len: 4}.Append(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("Append = % x, want % x", got, want)
	}
	h, err := ParseHeader(want)
	if err != nil || h != (Header{Type: TypeCmd, Seq: 7, Len: 4}) {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
}

func TestHelloBytes(t *testing.T) {
	b := unhex(t, "01000000 39300000 00000000 00000000") // version 1, pid 12345
	b = append(b, "ibv_devinfo"...)
	b = append(b, make([]byte, NameSize-len("ibv_devinfo"))...)
	m := Hello{Version: 1, PID: 12345, Program: "ibv_devinfo"}
	if got := m.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("Append:\n% x\nwant\n% x", got, b)
	}
	got, err := ParseHello(b)
	if err != nil || got != m {
		t.Fatalf("ParseHello = %+v, %v", got, err)
	}
	// A 64-byte name keeps its terminating NUL on the wire.
	long := Hello{Program: strings.Repeat("x", 80)}
	enc := long.Append(nil)
	if len(enc) != HelloSize || enc[HelloSize-1] != 0 {
		t.Fatalf("long name: %d bytes, last %#x", len(enc), enc[len(enc)-1])
	}
	if p, _ := ParseHello(enc); p.Program != strings.Repeat("x", 63) {
		t.Fatalf("long name parsed as %q", p.Program)
	}
}

func TestHelloReplyBytes(t *testing.T) {
	b := unhex(t, "00000000 01000000 05000000 00000000")
	b = append(b, "irdma0"...)
	b = append(b, make([]byte, NameSize-6)...)
	m := HelloReply{Version: 1, ABIVersion: 5, Device: "irdma0"}
	if got := m.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("Append:\n% x\nwant\n% x", got, b)
	}
	if got, err := ParseHelloReply(b); err != nil || got != m {
		t.Fatalf("ParseHelloReply = %+v, %v", got, err)
	}
}

func TestCmdReplyBytes(t *testing.T) {
	// status 24, 1 fd, resp_addr 0x7fff0000001000, resp_len 8, fd_off[0]=0,
	// response: async_fd placeholder ffffffff, num_comp_vectors 1.
	b := unhex(t, `18000000 01000000 0010000000ff7f00 08000000 00000000
		00000000
		ffffffff 01000000`)
	m := CmdReplyWire{Status: 24, RespAddr: 0x007fff0000001000, FDOffsets: []uint32{0},
		Resp: unhex(t, "ffffffff 01000000")}
	if got := m.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("Append:\n% x\nwant\n% x", got, b)
	}
	got, err := ParseCmdReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, got); d != "" {
		t.Fatalf("ParseCmdReply (-want +got):\n%s", d)
	}
	// An error status with nothing else.
	e := unhex(t, "eaffffff 00000000 0000000000000000 00000000 00000000")
	got, err = ParseCmdReply(e)
	if err != nil || got.Status != -22 || len(got.Resp) != 0 || got.FDOffsets != nil {
		t.Fatalf("error reply: %+v, %v", got, err)
	}
}

func TestMmapMemBytes(t *testing.T) {
	mm := unhex(t, "0000010000000000 0010000000000000 03000000 01000000")
	m := MmapRequest{Offset: 0x10000, Length: 4096, Prot: 3, Flags: 1}
	if got := m.Append(nil); !bytes.Equal(got, mm) {
		t.Fatalf("MMAP Append % x", got)
	}
	if got, err := ParseMmap(mm); err != nil || got != m {
		t.Fatalf("ParseMmap = %+v, %v", got, err)
	}
	mr := unhex(t, "00000000 00000000 0020000000000000")
	r := MmapReply{FDOffset: 0x2000}
	if got := r.Append(nil); !bytes.Equal(got, mr) {
		t.Fatalf("MMAP reply Append % x", got)
	}
	if got, err := ParseMmapReply(mr); err != nil || got != r {
		t.Fatalf("ParseMmapReply = %+v, %v", got, err)
	}
	me := unhex(t, "00f0ffff00000000 0000100000000000 0000000000000000")
	q := MemRequest{Addr: 0xfffff000, Length: 1 << 20}
	if got := q.Append(nil); !bytes.Equal(got, me) {
		t.Fatalf("MEM Append % x", got)
	}
	if got, err := ParseMem(me); err != nil || got != q {
		t.Fatalf("ParseMem = %+v, %v", got, err)
	}
	if got := AppendStatus(nil, -71); !bytes.Equal(got, unhex(t, "b9ffffff")) {
		t.Fatalf("AppendStatus % x", got)
	}
}

func TestParseMessageErrors(t *testing.T) {
	good := AppendMessage(nil, TypeCmd, 1, []byte{1, 2, 3})
	if h, p, err := ParseMessage(good); err != nil || h.Seq != 1 || !bytes.Equal(p, []byte{1, 2, 3}) {
		t.Fatalf("good message: %+v % x %v", h, p, err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"empty":       nil,
		"short":       good[:15],
		"bad magic":   mod(func(b []byte) []byte { b[0] = 'X'; return b }),
		"flags":       mod(func(b []byte) []byte { b[6] = 1; return b }),
		"len too big": mod(func(b []byte) []byte { b[12] = 4; return b }),
		"len small":   mod(func(b []byte) []byte { b[12] = 2; return b }),
		"huge len":    mod(func(b []byte) []byte { b[15] = 0xff; return b }),
		"too long":    AppendMessage(nil, TypeCmd, 1, make([]byte, MaxPayload+1)),
	}
	for name, b := range cases {
		if _, _, err := ParseMessage(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// The largest message is fine.
	if _, _, err := ParseMessage(AppendMessage(nil, TypeCmd, 1, make([]byte, MaxPayload))); err != nil {
		t.Errorf("max message: %v", err)
	}
}

func TestParseCmdReplyErrors(t *testing.T) {
	ok := CmdReplyWire{Status: 8, FDOffsets: []uint32{4}, Resp: make([]byte, 8)}.Append(nil)
	if _, err := ParseCmdReply(ok); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), ok...)) }
	cases := map[string][]byte{
		"short":          ok[:23],
		"fd off outside": mod(func(b []byte) []byte { b[24] = 5; return b }),
		"nfd too many":   mod(func(b []byte) []byte { b[4] = MaxFDs + 1; return b }),
		"nfd mismatch":   mod(func(b []byte) []byte { b[4] = 2; return b }),
		"resp_len big":   mod(func(b []byte) []byte { b[16] = 9; return b }),
		"resp_len huge":  mod(func(b []byte) []byte { b[19] = 0xff; return b }),
		"trailing":       append(mod(func(b []byte) []byte { return b }), 0),
	}
	for name, b := range cases {
		if _, err := ParseCmdReply(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	for name, f := range map[string]func([]byte) error{
		"hello":       func(b []byte) error { _, err := ParseHello(b); return err },
		"hello reply": func(b []byte) error { _, err := ParseHelloReply(b); return err },
		"mmap":        func(b []byte) error { _, err := ParseMmap(b); return err },
		"mmap reply":  func(b []byte) error { _, err := ParseMmapReply(b); return err },
		"mem":         func(b []byte) error { _, err := ParseMem(b); return err },
		"status":      func(b []byte) error { _, err := ParseStatus(b); return err },
	} {
		if err := f(make([]byte, 3)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s of 3 bytes: %v", name, err)
		}
	}
}

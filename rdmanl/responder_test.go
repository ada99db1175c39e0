package rdmanl

import (
	"bytes"
	"encoding/hex"
	"strings"
	"syscall"
	"testing"
)

type fakeSource struct{ res Resources }

func (fakeSource) Device() Device {
	return Device{Index: 0, Name: "irdma0", Ports: 1, CapFlags: 0x1, FWVersion: "1.60", NodeGUID: 0x0200_00ff_fe00_0000,
		SysImageGUID: 0x0200_00ff_fe00_0000, NodeType: 1, Protocol: "roce", DriverID: DriverIRDMA,
		Uverbs: Chardev{Name: "uverbs0", Major: 231, Minor: 192, ABI: 5}}
}
func (fakeSource) Port(n uint32) (Port, bool) {
	if n != 1 {
		return Port{}, false
	}
	return Port{Index: 1, State: 4, PhysState: 5, Netdev: "lo", NetdevIndex: 1}, true
}
func (s fakeSource) Resources() Resources { return s.res }
func (fakeSource) Counters(uint32) ([]Counter, error) {
	return []Counter{{"ip4InPkts", 7}}, nil
}
func (fakeSource) Chardev(name string) (Chardev, bool) {
	if name == "rdma_cm" {
		return Chardev{Name: "rdma_cm", Major: 10, Minor: 123, ABI: 4}, true
	}
	return Chardev{}, false
}
func (fakeSource) CopyOnFork() bool { return true }

// unhex reads a hex dump with spaces and comments (# to end of line).
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChardevEncode(t *testing.T) {
	// huge_encode_dev (include/linux/kdev_t.h): minor & 0xff | major << 8 |
	// (minor & ~0xff) << 12; libibverbs' find_uverbs_nl_cb decodes it.
	for _, c := range []struct {
		maj, min uint32
		want     uint64
	}{{231, 192, 0xe7c0}, {10, 123, 0x0a7b}, {231, 0x1c0, 0x10_0000 | 0xe7c0}} {
		if got := (Chardev{Major: c.maj, Minor: c.min}).Encode(); got != c.want {
			t.Errorf("%d:%d = %#x, want %#x", c.maj, c.min, got, c.want)
		}
	}
}

func TestHandleGolden(t *testing.T) {
	r := &Responder{Src: fakeSource{}, Port: 0x1234}
	for _, c := range []struct {
		name string
		req  string
		want []string
	}{{
		// libibverbs' rdmanl_get_chardev(nl, 0, "uverbs"): no flags but
		// NLM_F_REQUEST, DEV_INDEX 0, CHARDEV_TYPE "uverbs".
		name: "chardev-uverbs",
		req: `24000000 0f14 0100 07000000 00000000   # len 36, type 5<<10|15, REQUEST, seq 7, pid 0
		      0800 0100 00000000                     # DEV_INDEX 0
		      0b00 4500 75766572627300 00            # CHARDEV_TYPE "uverbs\0"`,
		want: []string{`3c000000 0f14 0000 07000000 34120000   # len 60, reply to port 0x1234
		      0c00 4800 c0e7000000000000             # CHARDEV 231:192
		      0c00 4700 0500000000000000             # CHARDEV_ABI 5
		      0c00 4600 7576657262733000             # CHARDEV_NAME "uverbs0\0"
		      0800 4900 09000000                     # UVERBS_DRIVER_ID 9 (RDMA_DRIVER_IRDMA)`},
	}, {
		name: "chardev-rdma-cm-global",
		req: `1c000000 0f14 0100 08000000 00000000
		      0c00 4500 72646d615f636d00             # "rdma_cm\0"`,
		want: []string{`34000000 0f14 0000 08000000 34120000
		      0c00 4800 7b0a000000000000             # 10:123
		      0c00 4700 0400000000000000
		      0c00 4600 72646d615f636d00`},
	}, {
		// A device the responder does not have: -EINVAL, the request's
		// header echoed, NLM_F_CAPPED.
		name: "port-get-unknown-device",
		req: `20000000 0514 0500 09000000 00000000       # PORT_GET, REQUEST|ACK
		      0800 0100 03000000 0800 0300 01000000`,
		want: []string{`24000000 0200 0001 09000000 34120000   # NLMSG_ERROR, CAPPED
		      eaffffff                               # -EINVAL
		      20000000 0514 0500 09000000 00000000`},
	}, {
		name: "port-get",
		req: `20000000 0514 0500 0a000000 00000000
		      0800 0100 00000000 0800 0300 01000000`,
		want: []string{`4c000000 0514 0000 0a000000 34120000
		      0800 0100 00000000                     # DEV_INDEX 0
		      0b00 0200 6972646d6130 00 00           # DEV_NAME "irdma0\0", one byte of padding
		      0800 0300 01000000                     # PORT_INDEX 1
		      0500 0c00 04 000000                    # PORT_STATE ACTIVE
		      0500 0d00 05 000000                    # PORT_PHYS_STATE LINK_UP
		      0800 3200 01000000                     # NDEV_INDEX 1
		      0700 3300 6c6f00 00                    # NDEV_NAME "lo\0"`,
			`24000000 0200 0001 0a000000 34120000 00000000 20000000 0514 0500 0a000000 00000000`}, // the ACK
	}, {
		// Not a request: the kernel only acknowledges (nothing here).
		name: "not-a-request",
		req:  `10000000 0114 0000 0b000000 00000000`,
		want: nil,
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := r.Handle(unhex(t, c.req))
			if len(got) != len(c.want) {
				t.Fatalf("%d datagrams, want %d: %x", len(got), len(c.want), got)
			}
			for i := range got {
				if w := unhex(t, c.want[i]); !bytes.Equal(got[i], w) {
					t.Errorf("datagram %d\n got %x\nwant %x", i, got[i], w)
				}
			}
		})
	}
}

// messages parses every reply message of a set of datagrams.
func messages(t *testing.T, dgrams [][]byte) []Header {
	t.Helper()
	var out []Header
	for _, d := range dgrams {
		hs := Split(d)
		n := 0
		for _, h := range hs {
			n += align4(int(h.Len()))
		}
		if n != align4(len(d)) {
			t.Fatalf("datagram of %d bytes holds %d bytes of messages", len(d), n)
		}
		out = append(out, hs...)
	}
	return out
}

func req(cmd uint16, flags uint16, attrs ...[]byte) []byte {
	var w writer
	w.begin(Type(cmd), flagRequest|flags, 1, 0)
	for _, a := range attrs {
		w.b = append(w.b, a...)
	}
	w.end()
	return w.b
}

func u32attr(t uint16, v uint32) []byte {
	var w writer
	w.u32(t, v)
	return w.b
}

func TestDumps(t *testing.T) {
	var res Resources
	for i := uint32(0); i < 200; i++ {
		res.QPs = append(res.QPs, QP{Owner: Owner{PID: 42}, Port: 1 + i%2, LQPN: i + 2, Type: QPTypeRC, State: 1, PDN: 1})
	}
	r := &Responder{Src: fakeSource{res: res}, Port: 9}
	for _, c := range []struct {
		name    string
		req     []byte
		entries int
		errno   syscall.Errno
	}{
		{"qp-all", req(CmdResQPGet, flagDump, u32attr(AttrDevIndex, 0)), 200, 0},
		{"qp-port-1", req(CmdResQPGet, flagDump, u32attr(AttrDevIndex, 0), u32attr(AttrPortIndex, 1)), 100, 0},
		{"qp-port-bad", req(CmdResQPGet, flagDump, u32attr(AttrDevIndex, 0), u32attr(AttrPortIndex, 2)), 0, syscall.EINVAL},
		{"cq-none", req(CmdResCQGet, flagDump, u32attr(AttrDevIndex, 0)), 0, 0},
		{"no-device", req(CmdResQPGet, flagDump), 0, syscall.EINVAL},
	} {
		t.Run(c.name, func(t *testing.T) {
			dg := r.Handle(c.req)
			for _, d := range dg {
				if len(d) > goodSize+512 {
					t.Errorf("datagram of %d bytes", len(d))
				}
			}
			ms := messages(t, dg)
			last := ms[len(ms)-1]
			if last.Type() != nlmsgDone || int32(le.Uint32(last[HeaderLen:])) != -int32(c.errno) {
				t.Fatalf("last message type %d status %d, want DONE %d", last.Type(), int32(le.Uint32(last[HeaderLen:])), -int32(c.errno))
			}
			n := 0
			for _, m := range ms[:len(ms)-1] {
				if m.Flags()&flagMulti == 0 || m.PID() != 9 || m.Seq() != 1 {
					t.Errorf("message flags %#x pid %d seq %d", m.Flags(), m.PID(), m.Seq())
				}
				a, err := ParseAttrs(m[HeaderLen:])
				if err != nil {
					t.Fatal(err)
				}
				tab, err := ParseAttrs(a[AttrResQP])
				if err != nil {
					t.Fatal(err)
				}
				// ParseAttrs keeps the last of a type: count entries by walking.
				_ = tab
				b := a[AttrResQP]
				for len(b) >= 4 {
					n++
					b = b[align4(int(le.Uint16(b))):]
				}
			}
			if n != c.entries {
				t.Errorf("%d entries, want %d", n, c.entries)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	r := &Responder{Src: fakeSource{}, Port: 1}
	for _, c := range []struct {
		name string
		req  []byte
		want syscall.Errno
	}{
		{"attr-past-end", append(req(CmdGet, 0)[:16:16], 0xff, 0x00, 0x01, 0x00), syscall.EINVAL},
		{"short-u32", req(CmdGet, 0, []byte{6, 0, 1, 0, 0, 0, 0, 0}), syscall.EINVAL},
		{"other-client", func() []byte { b := req(CmdGet, 0); le.PutUint16(b[4:], 4<<10|1); return b }(), syscall.EINVAL},
		{"set-unprivileged", req(CmdSet, 0, u32attr(AttrDevIndex, 0)), syscall.EPERM},
		{"chardev-no-type", req(CmdGetChardev, 0), syscall.EINVAL},
		{"chardev-unknown", req(CmdGetChardev, 0, append([]byte{8, 0, AttrChardevType, 0}, 'x', 'y', 0, 0)), syscall.EOPNOTSUPP},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.req
			le.PutUint32(b, uint32(len(b)))
			dg := r.Handle(b)
			if len(dg) != 1 {
				t.Fatalf("%d datagrams", len(dg))
			}
			m := Header(dg[0])
			if m.Type() != nlmsgError || int32(le.Uint32(m[HeaderLen:])) != -int32(c.want) {
				t.Errorf("type %d errno %d, want ERROR %d", m.Type(), -int32(le.Uint32(m[HeaderLen:])), c.want)
			}
		})
	}
}

func FuzzHandle(f *testing.F) {
	f.Add(req(CmdGet, flagDump))
	f.Add(req(CmdPortGet, flagAck, u32attr(AttrDevIndex, 0), u32attr(AttrPortIndex, 1)))
	f.Add(req(CmdStatGet, flagAck, u32attr(AttrDevIndex, 0), u32attr(AttrPortIndex, 1)))
	f.Add(req(CmdResQPGet, 0, u32attr(AttrDevIndex, 0), u32attr(AttrPortIndex, 1), u32attr(AttrResLQPN, 2)))
	res := Resources{QPs: []QP{{LQPN: 2, Port: 1, Type: QPTypeUD}}, CQs: []CQ{{CQN: 1}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &Responder{Src: fakeSource{res: res}, Port: 3, Admin: len(b)%2 == 0}
		for _, d := range r.Handle(b) {
			for _, m := range Split(d) {
				if m.PID() != 3 {
					t.Fatalf("reply to port %d", m.PID())
				}
			}
		}
	})
}

// TestResSummary: RES_GET's summary is fill_res_info — one entry per
// restrack type the kernel names, in nldev.c's order (pd, cq, qp, cm_id,
// mr, ctx, srq), each the count of that type; srq counts the device's
// SRQs (a GEN_3 device with SRQs prints them in `rdma resource show`).
func TestResSummary(t *testing.T) {
	type kv struct {
		name string
		curr uint64
	}
	for _, c := range []struct {
		name string
		res  Resources
		want []kv
	}{
		{"empty", Resources{}, []kv{{"pd", 0}, {"cq", 0}, {"qp", 0}, {"cm_id", 0}, {"mr", 0}, {"ctx", 0}, {"srq", 0}}},
		{"gen3 with SRQs", Resources{
			QPs:  []QP{{LQPN: 2}, {LQPN: 3}, {LQPN: 4}},
			CQs:  []CQ{{CQN: 1}, {CQN: 2}},
			MRs:  []MR{{MRN: 0}, {MRN: 1}, {MRN: 2}, {MRN: 3}},
			PDs:  []PD{{PDN: 1}},
			SRQs: []SRQ{{SRQN: 1, PDN: 1, QPNs: []uint32{3, 4}}, {SRQN: 2, PDN: 1}},
			Ctxs: []Ctx{{CtxN: 1}},
		}, []kv{{"pd", 1}, {"cq", 2}, {"qp", 3}, {"cm_id", 0}, {"mr", 4}, {"ctx", 1}, {"srq", 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Responder{Src: fakeSource{res: c.res}, Port: 9}
			ms := messages(t, r.Handle(req(CmdResGet, 0, u32attr(AttrDevIndex, 0))))
			if len(ms) != 1 {
				t.Fatalf("%d messages, want 1", len(ms))
			}
			a, err := ParseAttrs(ms[0][HeaderLen:])
			if err != nil {
				t.Fatal(err)
			}
			// ParseAttrs keeps the last of a type: walk the entries.
			var got []kv
			for b := a[AttrResSummary]; len(b) >= 4; b = b[align4(int(le.Uint16(b))):] {
				e, err := ParseAttrs(b[4:le.Uint16(b)])
				if err != nil {
					t.Fatal(err)
				}
				name := strings.TrimRight(string(e[AttrResSummaryEntryName]), "\x00")
				got = append(got, kv{name, le.Uint64(e[AttrResSummaryEntryCurr])})
			}
			if len(got) != len(c.want) {
				t.Fatalf("summary %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("entry %d: %v, want %v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestResSRQGolden: RES_SRQ_GET is fill_res_srq_entry — SRQN, type
// (IB_SRQT_BASIC), PDN, the bound QPs as runs (fill_res_srq_qps: a run of
// consecutive numbers as MIN_RANGE/MAX_RANGE, a single one as LQPN), then
// the owner's pid — in one message of the dump, then DONE. Written by
// hand from nldev.c and rdma_netlink.h.
func TestResSRQGolden(t *testing.T) {
	src := fakeSource{res: Resources{SRQs: []SRQ{{Owner: Owner{PID: 42}, SRQN: 1, PDN: 1, QPNs: []uint32{3, 4, 5, 9}}}}}
	r := &Responder{Src: src, Port: 0x1234}
	req := unhex(t, `18000000 1714 0103 0c000000 00000000   # RES_SRQ_GET (5<<10|23), REQUEST|DUMP, seq 12
	                 0800 0100 00000000                     # DEV_INDEX 0`)
	want := unhex(t, `70000000 1714 0200 0c000000 34120000   # len 112, MULTI
		0800 0100 00000000                     # DEV_INDEX 0
		0b00 0200 6972646d6130 00 00           # DEV_NAME "irdma0\0"
		4c00 5880                              # RES_SRQ (88), nested
		  4800 5980                            # RES_SRQ_ENTRY (89)
		    0800 5a00 01000000                 # RES_SRQN 1
		    0500 1a00 00 000000                # RES_TYPE IB_SRQT_BASIC
		    0800 3c00 01000000                 # RES_PDN 1
		    2400 1380                          # RES_QP (19)
		      1400 1480                        # RES_QP_ENTRY: QPs 3..5
		        0800 5b00 03000000             # MIN_RANGE 3
		        0800 5c00 05000000             # MAX_RANGE 5
		      0c00 1480                        # RES_QP_ENTRY: QP 9
		        0800 1500 09000000             # RES_LQPN 9
		    0800 1c00 2a000000                 # RES_PID 42`)
	ms := messages(t, r.Handle(req))
	if len(ms) != 2 {
		t.Fatalf("%d messages, want the entry and DONE", len(ms))
	}
	if !bytes.Equal(ms[0], want) {
		t.Errorf("RES_SRQ_GET\n got %x\nwant %x", []byte(ms[0]), want)
	}
	if ms[1].Type() != nlmsgDone {
		t.Errorf("second message type %d, want DONE", ms[1].Type())
	}
}

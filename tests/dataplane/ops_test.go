package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/mr"
	"github.com/irdma-emu/irdma-emu/emu/qp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// nearWrap starts the PSNs 128 below 2^24, so that every multi-packet
// message after the first few crosses the wrap.
const nearWrap = 0xffff80

func withMTU(mtu int) qpOpt {
	return func(s *devtest.QPSpec) {
		s.MTU = uint16(mtu)
		s.SQPSN = nearWrap
	}
}

// TestRCOperations runs every RC operation at every size the operation
// allows (0, 1, MTU−1, MTU, MTU+1, 1 MiB) at path MTUs 256, 1024 and 4096,
// with PSNs crossing 2^24, and compares the payloads byte for byte.
func TestRCOperations(t *testing.T) {
	for _, mtu := range []int{256, 1024, 4096} {
		t.Run(fmt.Sprint("mtu", mtu), func(t *testing.T) {
			w := newWorld(t, opts{stepped: true})
			a, b := w.connectRC(withMTU(mtu), withMTU(mtu))
			const big = 1 << 20
			src := a.n.newMR(big+4096, devtest.RightsAll, a.pd)
			dst := b.n.newMR(big+4096, devtest.RightsAll, b.pd)
			sink := a.n.newMR(big+4096, devtest.RightsAll, a.pd)
			seed := 0
			for _, size := range []int{0, 1, mtu - 1, mtu, mtu + 1, big} {
				seed++
				fill := func() {
					pattern(src.bytes()[:size], seed)
					clear(dst.bytes()[:size+16])
				}
				sge := []uk.SGE{{Addr: src.va, Length: uint32(size), LKey: src.stag}}
				if size == 0 {
					sge = nil
				}
				rsge := []uk.SGE{{Addr: dst.va, Length: big, LKey: dst.stag}}

				t.Logf("size %d", size)
				// SEND, plain.
				fill()
				b.recv(uk.RecvWR{WrID: 1, SGList: rsge})
				a.post(uk.SendWR{WrID: 2, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: sge})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "SEND")
				rc := b.waitRecv(1)[0]
				wantWC(t, rc, uk.WCSuccess, uk.WCRecv, uint32(size), "SEND recv")
				mustEqual(t, dst.bytes()[:size], src.bytes()[:size], fmt.Sprint("SEND ", size))

				// SEND with immediate, solicited.
				fill()
				b.recv(uk.RecvWR{WrID: 3, SGList: rsge})
				a.post(uk.SendWR{WrID: 4, Opcode: uk.WRSendWithImm, Flags: uk.SendSignaled | uk.SendSolicited,
					SGList: sge, ImmData: 0xfeed0000 | uint32(size)})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "SEND imm")
				rc = b.waitRecv(1)[0]
				wantWC(t, rc, uk.WCSuccess, uk.WCRecv, uint32(size), "SEND imm recv")
				if rc.Flags&uk.WCWithImm == 0 || rc.ImmData != 0xfeed0000|uint32(size) {
					t.Fatalf("SEND imm: %+v", rc)
				}
				mustEqual(t, dst.bytes()[:size], src.bytes()[:size], "SEND imm")

				// SEND with invalidate: the responder's R_Key goes invalid.
				fill()
				victim := b.n.newMR(4096, devtest.RightsAll, b.pd)
				b.recv(uk.RecvWR{WrID: 5, SGList: rsge})
				a.post(uk.SendWR{WrID: 6, Opcode: uk.WRSendWithInv, Flags: uk.SendSignaled, SGList: sge,
					InvalidateRKey: victim.stag})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "SEND inv")
				rc = b.waitRecv(1)[0]
				wantWC(t, rc, uk.WCSuccess, uk.WCRecv, uint32(size), "SEND inv recv")
				if rc.Flags&uk.WCWithInvalidate == 0 || rc.InvRKey != victim.stag {
					t.Fatalf("SEND inv: %+v", rc)
				}
				if r, ok := b.n.env.Dev.MRs().Get(victim.stag >> 8); !ok || r.State != mr.StateInvalid {
					t.Fatalf("SEND inv: MR %+v still valid", r)
				}
				mustEqual(t, dst.bytes()[:size], src.bytes()[:size], "SEND inv")

				// RDMA WRITE.
				fill()
				a.post(uk.SendWR{WrID: 7, Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled, SGList: sge,
					RemoteAddr: dst.va, RKey: dst.stag})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, uint32(size), "WRITE")
				mustEqual(t, dst.bytes()[:size+16], append(append([]byte{}, src.bytes()[:size]...), make([]byte, 16)...), "WRITE")

				// RDMA WRITE with immediate.
				fill()
				b.recv(uk.RecvWR{WrID: 8, SGList: rsge})
				a.post(uk.SendWR{WrID: 9, Opcode: uk.WRRDMAWriteWithImm, Flags: uk.SendSignaled, SGList: sge,
					RemoteAddr: dst.va, RKey: dst.stag, ImmData: 0xabcd})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, uint32(size), "WRITE imm")
				rc = b.waitRecv(1)[0]
				wantWC(t, rc, uk.WCSuccess, uk.WCRecvRDMAWithImm, uint32(size), "WRITE imm recv")
				if rc.ImmData != 0xabcd {
					t.Fatalf("WRITE imm: %+v", rc)
				}
				mustEqual(t, dst.bytes()[:size], src.bytes()[:size], "WRITE imm")

				// RDMA READ of what B holds into A's sink.
				pattern(dst.bytes()[:size], seed+1000)
				clear(sink.bytes()[:size+16])
				var rsg []uk.SGE
				if size > 0 {
					rsg = []uk.SGE{{Addr: sink.va, Length: uint32(size), LKey: sink.stag}}
				}
				a.post(uk.SendWR{WrID: 10, Opcode: uk.WRRDMARead, Flags: uk.SendSignaled, SGList: rsg,
					RemoteAddr: dst.va, RKey: dst.stag})
				wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMARead, uint32(size), "READ")
				mustEqual(t, sink.bytes()[:size+16], append(append([]byte{}, dst.bytes()[:size]...), make([]byte, 16)...), "READ")
			}
			st := w.nodes[0].eng.Stats().Port
			if st.Retransmits != 0 || st.Dropped() != 0 {
				t.Errorf("clean link: %d retransmissions, drops %v", st.Retransmits, st.Drops)
			}
		})
	}
}

// TestRCSGEsAndInline sends with several SGEs on both sides, unsignaled
// WQEs retired by a later CQE, and inline SEND/WRITE up to 101 bytes.
func TestRCSGEsAndInline(t *testing.T) {
	w := newWorld(t, opts{stepped: true})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	src := a.n.newMR(64<<10, devtest.RightsAll, a.pd)
	dst := b.n.newMR(64<<10, devtest.RightsAll, b.pd)
	pattern(src.bytes(), 42)

	// Three source SGEs (1000+3000+17 bytes) into four receive SGEs.
	sg := []uk.SGE{{Addr: src.va + 100, Length: 1000, LKey: src.stag}, {Addr: src.va + 5000, Length: 3000, LKey: src.stag},
		{Addr: src.va + 20000, Length: 17, LKey: src.stag}}
	want := append(append(append([]byte{}, src.bytes()[100:1100]...), src.bytes()[5000:8000]...), src.bytes()[20000:20017]...)
	rs := []uk.SGE{{Addr: dst.va, Length: 10, LKey: dst.stag}, {Addr: dst.va + 1000, Length: 2000, LKey: dst.stag},
		{Addr: dst.va + 10000, Length: 1, LKey: dst.stag}, {Addr: dst.va + 30000, Length: 5000, LKey: dst.stag}}
	b.recv(uk.RecvWR{WrID: 1, SGList: rs})
	a.post(uk.SendWR{WrID: 2, Opcode: uk.WRSend, Flags: uk.SendSignaled, SGList: sg})
	wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, 4017, "multi-SGE")
	wantWC(t, b.waitRecv(1)[0], uk.WCSuccess, uk.WCRecv, 4017, "multi-SGE recv")
	d := dst.bytes()
	got := append(append(append(append([]byte{}, d[:10]...), d[1000:3000]...), d[10000:10001]...), d[30000:30000+4017-2011]...)
	mustEqual(t, got, want, "multi-SGE")

	// Unsignaled WQEs: three unsignaled WRITEs, then a signaled one; one
	// CQE, and the driver retires all four.
	for i := range 4 {
		f := uk.SendFlags(0)
		if i == 3 {
			f = uk.SendSignaled
		}
		a.post(uk.SendWR{WrID: uint64(100 + i), Opcode: uk.WRRDMAWrite, Flags: f,
			SGList: []uk.SGE{{Addr: src.va, Length: 2000, LKey: src.stag}}, RemoteAddr: dst.va + uint64(i)*2000, RKey: dst.stag})
	}
	wcs := a.waitSend(1)
	w.settle()
	if wcs = poll(t, a.us, wcs); len(wcs) != 1 || wcs[0].WrID != 103 {
		t.Fatalf("unsignaled: %+v", wcs)
	}
	if a.uq.SQTail() != a.uq.SQHead() {
		t.Fatalf("SQ tail %d head %d: unsignaled WQEs not retired", a.uq.SQTail(), a.uq.SQHead())
	}
	for i := range 4 {
		mustEqual(t, d[i*2000:(i+1)*2000], src.bytes()[:2000], "unsignaled WRITE")
	}

	// Inline SEND and WRITE, 0..101 bytes.
	for _, n := range []int{0, 1, 8, 9, 39, 40, 70, 71, 101} {
		data := make([]byte, n)
		pattern(data, n)
		b.recv(uk.RecvWR{WrID: uint64(n), SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag}}})
		a.post(uk.SendWR{WrID: uint64(n), Opcode: uk.WRSend, Flags: uk.SendSignaled | uk.SendInline, InlineData: data})
		wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(n), "inline SEND")
		wantWC(t, b.waitRecv(1)[0], uk.WCSuccess, uk.WCRecv, uint32(n), "inline SEND recv")
		mustEqual(t, d[:n], data, fmt.Sprint("inline SEND ", n))
		a.post(uk.SendWR{WrID: uint64(n), Opcode: uk.WRRDMAWrite, Flags: uk.SendSignaled | uk.SendInline, InlineData: data,
			RemoteAddr: dst.va + 8192, RKey: dst.stag})
		wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCRDMAWrite, uint32(n), "inline WRITE")
		mustEqual(t, d[8192:8192+n], data, fmt.Sprint("inline WRITE ", n))
	}
}

// TestAtomics runs FETCH_ADD and COMPARE_SWAP (8 bytes) with atomics
// enabled in the profile.
func TestAtomics(t *testing.T) {
	w := newWorld(t, opts{stepped: true, atomics: true})
	a, b := w.connectRC(withMTU(1024), withMTU(1024))
	res := a.n.newMR(64, devtest.RightsAll, a.pd)
	tgt := b.n.newMR(64, devtest.RightsAll, b.pd)
	le := binary.LittleEndian
	le.PutUint64(tgt.bytes()[8:], 1000)
	a.post(uk.SendWR{WrID: 1, Opcode: uk.WRAtomicFetchAndAdd, Flags: uk.SendSignaled,
		SGList: []uk.SGE{{Addr: res.va, Length: 8, LKey: res.stag}}, RemoteAddr: tgt.va + 8, RKey: tgt.stag, CompareAdd: 5})
	wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCFetchAdd, 0, "FETCH_ADD") // irdma tracks wr_len 0 for atomics
	if got, rem := le.Uint64(res.bytes()), le.Uint64(tgt.bytes()[8:]); got != 1000 || rem != 1005 {
		t.Fatalf("FETCH_ADD: orig %d remote %d", got, rem)
	}
	// COMPARE_SWAP that matches, then one that does not.
	a.post(uk.SendWR{WrID: 2, Opcode: uk.WRAtomicCmpAndSwp, Flags: uk.SendSignaled,
		SGList: []uk.SGE{{Addr: res.va + 8, Length: 8, LKey: res.stag}}, RemoteAddr: tgt.va + 8, RKey: tgt.stag,
		CompareAdd: 1005, Swap: 77})
	a.post(uk.SendWR{WrID: 3, Opcode: uk.WRAtomicCmpAndSwp, Flags: uk.SendSignaled,
		SGList: []uk.SGE{{Addr: res.va + 16, Length: 8, LKey: res.stag}}, RemoteAddr: tgt.va + 8, RKey: tgt.stag,
		CompareAdd: 1005, Swap: 99})
	wcs := a.waitSend(2)
	wantWC(t, wcs[0], uk.WCSuccess, uk.WCCompSwap, 0, "CAS")
	wantWC(t, wcs[1], uk.WCSuccess, uk.WCCompSwap, 0, "CAS")
	if o1, o2, rem := le.Uint64(res.bytes()[8:]), le.Uint64(res.bytes()[16:]), le.Uint64(tgt.bytes()[8:]); o1 != 1005 || o2 != 77 || rem != 77 {
		t.Fatalf("CAS: orig %d, %d, remote %d", o1, o2, rem)
	}
}

// TestUDSend sends UD datagrams through an address handle, up to the
// MTU; one over the MTU completes without being delivered (IBA
// C10-93.1.1). The receive buffer starts with the 40-byte GRH area, the
// IPv4 header in its last 20 bytes; the completion carries the source QP
// and MAC.
func TestUDSend(t *testing.T) {
	for _, mtu := range []int{256, 1024, 4096} {
		for _, v6 := range []bool{false, true} {
			t.Run(fmt.Sprint("mtu", mtu, "/ipv6=", v6), func(t *testing.T) {
				w := newWorld(t, opts{stepped: true, ipv6: v6})
				an, bn := w.nodes[0], w.nodes[1]
				an.env.SetARP(1, bn.mac)
				a := an.newEP(true, nil, withMTU(mtu))
				b := bn.newEP(true, nil, withMTU(mtu), func(s *devtest.QPSpec) { s.QKey = 0x2222 })
				for _, e := range []*ep{a, b} {
					e.n.env.Connect(e.q)
				}
				an.env.CreateAH(devtest.AHSpec{Index: 3, PD: a.pd, SrcMAC: an.mac, ARPIdx: 1, SrcIP: an.ip, DestIP: bn.ip,
					HopLimit: 64, TC: 0x10})
				src := an.newMR(8192, devtest.RightsAll, a.pd)
				dst := bn.newMR(8192, devtest.RightsAll, b.pd)
				for i, size := range []int{0, 1, mtu - 1, mtu, mtu + 1} {
					pattern(src.bytes()[:size], i)
					clear(dst.bytes())
					b.recv(uk.RecvWR{WrID: uint64(i), SGList: []uk.SGE{{Addr: dst.va, Length: uint32(size + 40), LKey: dst.stag}}})
					var sge []uk.SGE
					if size > 0 {
						sge = []uk.SGE{{Addr: src.va, Length: uint32(size), LKey: src.stag}}
					}
					a.post(uk.SendWR{WrID: uint64(i), Opcode: uk.WRSendWithImm, Flags: uk.SendSignaled, SGList: sge,
						AHID: 3, RemoteQPN: b.q.Spec.ID, RemoteQKey: 0x2222, ImmData: uint32(i)})
					wantWC(t, a.waitSend(1)[0], uk.WCSuccess, uk.WCSend, uint32(size), "UD SEND")
					if size > mtu {
						w.settle()
						if got := poll(t, b.ur, nil); len(got) != 0 {
							t.Fatalf("a UD message over the MTU was delivered: %+v", got)
						}
						continue
					}
					rc := b.waitRecv(1)[0]
					wantWC(t, rc, uk.WCSuccess, uk.WCRecv, uint32(size+40), "UD recv")
					if rc.SrcQP != a.q.Spec.ID || rc.Flags&uk.WCGRH == 0 || rc.Flags&uk.WCWithSMAC == 0 ||
						rc.SMAC != [6]byte(an.mac) || rc.NetHdrIPv4 == v6 || rc.ImmData != uint32(i) {
						t.Fatalf("UD recv wc %+v", rc)
					}
					g := dst.bytes()[:40]
					if v6 {
						if g[0]>>4 != 6 || g[6] != 17 {
							t.Fatalf("GRH area (IPv6) % x", g)
						}
					} else if !allZero(g[:20]) || g[20] != 0x45 || g[29] != 17 {
						t.Fatalf("GRH area (IPv4) % x", g)
					}
					mustEqual(t, dst.bytes()[40:40+size], src.bytes()[:size], "UD payload")
				}
				// A Q_Key mismatch is dropped and counted.
				b.recv(uk.RecvWR{WrID: 99, SGList: []uk.SGE{{Addr: dst.va, Length: 4096, LKey: dst.stag}}})
				a.post(uk.SendWR{WrID: 99, Opcode: uk.WRSend, Flags: uk.SendSignaled, AHID: 3, RemoteQPN: b.q.Spec.ID,
					RemoteQKey: 0x3333})
				a.waitSend(1)
				w.settle()
				if got := poll(t, b.ur, nil); len(got) != 0 {
					t.Fatalf("Q_Key mismatch delivered")
				}
				if s, _ := bn.eng.QPStats(b.q.Spec.ID); s.Drops[qp.DropQKey] != 1 {
					t.Fatalf("Q_Key drops %v", s.Drops)
				}
			})
		}
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// settle steps a stepped world until nothing is pending (or a while).
func (w *world) settle() {
	if !w.o.stepped {
		time.Sleep(20 * time.Millisecond)
		return
	}
	for i := 0; i < 10000 && w.step(); i++ {
		if w.o.stepped {
			if _, ok := w.man.Next(); !ok {
				for _, n := range w.nodes {
					for n.eng.Poll() {
					}
				}
				return
			}
		}
	}
}

var _ = wire.GSIQKey

package ah_test

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hmc/hmctest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// hmctest defaults: 64 ARP entries, 64 AHs, 16 multicast groups.
func setup(t testing.TB) (*hmctest.Env, *ah.Tables) {
	t.Helper()
	env := hmctest.New(t, hmctest.Options{})
	return env, ah.NewTables(env.Mem, env.HMC, env.Profile)
}

func unhex(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hmcBytes(t *testing.T, env *hmctest.Env, ty hmc.ObjType, idx uint32, n int) []byte {
	t.Helper()
	a, err := env.HMC.ObjectIOVA(ty, idx)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if err := env.Mem.Read(a, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func wantReason(t *testing.T, what string, err error, r ah.Reason) {
	t.Helper()
	got, ok := ah.ReasonOf(err)
	if r == 0 {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	if !ok || got != r || !errors.Is(err, ah.ErrAH) {
		t.Errorf("%s: %v, want %v", what, err, r)
	}
}

func TestMACPacking(t *testing.T) {
	mac := [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
	// ether_addr_to_u64: mac[0] most significant.
	if v := ah.MACToU64(mac); v != 0x0011_2233_4455 {
		t.Errorf("MACToU64 = %#x", v)
	}
	if m := ah.MACFromU64(0xffff_0011_2233_4455); m != mac {
		t.Errorf("MACFromU64 = %x", m)
	}
}

func TestARP(t *testing.T) {
	env, tb := setup(t)
	mac := [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
	if _, ok := tb.ARP(3); ok {
		t.Errorf("ARP(3) valid before SetARP")
	}
	wantReason(t, "SetARP", tb.SetARP(3, mac, true), 0)
	got, perm, ok := tb.ARPEntry(3)
	if !ok || got != mac || !perm {
		t.Errorf("ARPEntry(3) = %x %v %v", got, perm, ok)
	}
	// HMC ARP object: MAC [47:0], valid b48, permanent b49.
	if diff := cmp.Diff(unhex(t, "5544332211000300"), hmcBytes(t, env, hmc.ARP, 3, 8)); diff != "" {
		t.Errorf("ARP object (-want +got):\n%s", diff)
	}
	mac2 := [6]byte{0x02, 0, 0, 0, 0, 0x99}
	wantReason(t, "SetARP replace", tb.SetARP(3, mac2, false), 0)
	if got, perm, ok := tb.ARPEntry(3); !ok || got != mac2 || perm {
		t.Errorf("after replace: %x %v %v", got, perm, ok)
	}
	wantReason(t, "DelARP", tb.DelARP(3), 0)
	if _, ok := tb.ARP(3); ok {
		t.Errorf("ARP(3) valid after DelARP")
	}
	if diff := cmp.Diff(make([]byte, 8), hmcBytes(t, env, hmc.ARP, 3, 8)); diff != "" {
		t.Errorf("ARP object after delete (-want +got):\n%s", diff)
	}
	wantReason(t, "DelARP of invalid entry", tb.DelARP(3), 0)
	wantReason(t, "SetARP index = count", tb.SetARP(64, mac, false), ah.ReasonIndexRange)
	wantReason(t, "DelARP index huge", tb.DelARP(1<<31), ah.ReasonIndexRange)
	if _, ok := tb.ARP(64); ok {
		t.Errorf("ARP(64) valid")
	}
}

func TestAH(t *testing.T) {
	env, tb := setup(t)
	dst4 := netip.MustParseAddr("192.168.1.2")
	src4 := netip.MustParseAddr("192.168.1.1")
	dw, v4 := ah.AddrToWords(dst4)
	sw, _ := ah.AddrToWords(src4)
	if !v4 || dw != [4]uint32{0, 0, 0, 0xc0a80102} {
		t.Fatalf("AddrToWords(%v) = %#x %v", dst4, dw, v4)
	}
	a := ah.AH{PD: 0x12345, DestIP: dw, SrcIP: sw, IPv4: true,
		SrcMAC: [6]byte{0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5}, ARPIndex: 7, VLANTag: 0x6064,
		InsertVLAN: true, TC: 0x48, FlowLabel: 0xabcde, HopLimit: 64, Loopback: false}
	wantReason(t, "AddAH", tb.AddAH(5, a), 0)
	got, ok := tb.AH(5)
	if !ok || got != a {
		t.Errorf("AH(5) = %+v %v", got, ok)
	}
	if got.Dest() != dst4 || got.Src() != src4 {
		t.Errorf("Dest %v Src %v", got.Dest(), got.Src())
	}
	want := unhex(t,
		"f5e4d3c2b1a00700", // src MAC, valid | IPv4 | insert VLAN
		"45230100",         // PD 0x12345
		"6460", "0700",     // VLAN 0x6064, ARP index 7
		"debc0a00", "48400000", // flow label, TC 0x48, hop limit 64
		"00000000", "00000000", "00000000", "0201a8c0", // dest words: 192.168.1.2 in word 3
		"00000000", "00000000", "00000000", "0101a8c0", // src words: 192.168.1.1
		"0000000000000000")
	if diff := cmp.Diff(want, hmcBytes(t, env, hmc.FSIAV, 5, 64)); diff != "" {
		t.Errorf("FSIAV object (-want +got):\n%s", diff)
	}

	// Destination MAC through the ARP cache.
	if _, _, ae, ok := tb.ResolveAH(5); ok || ae != ah.AEInvalidARPEntry {
		t.Errorf("ResolveAH without ARP entry: ae %#x ok %v", ae, ok)
	}
	mac := [6]byte{1, 2, 3, 4, 5, 6}
	if err := tb.SetARP(7, mac, false); err != nil {
		t.Fatal(err)
	}
	if r, m, ae, ok := tb.ResolveAH(5); !ok || ae != 0 || m != mac || r != a {
		t.Errorf("ResolveAH = %+v %x %#x %v", r, m, ae, ok)
	}
	if _, _, ae, ok := tb.ResolveAH(6); ok || ae != ah.AEInvalidAHEntry {
		t.Errorf("ResolveAH(6): ae %#x ok %v", ae, ok)
	}

	// IPv6.
	d6 := netip.MustParseAddr("fe80::1:2:3:4")
	w6, v4 := ah.AddrToWords(d6)
	if v4 || w6 != [4]uint32{0xfe800000, 0, 0x00010002, 0x00030004} {
		t.Errorf("AddrToWords(%v) = %#x %v", d6, w6, v4)
	}
	b := a
	b.IPv4, b.DestIP = false, w6
	wantReason(t, "ModifyAH", tb.ModifyAH(5, b), 0)
	if got, _ := tb.AH(5); got.Dest() != d6 {
		t.Errorf("after ModifyAH Dest = %v", got.Dest())
	}
	if w, v4 := ah.AddrToWords(netip.MustParseAddr("::ffff:10.0.0.1")); !v4 || w[3] != 0x0a000001 {
		t.Errorf("IPv4-mapped: %#x %v", w, v4)
	}

	tests := []struct {
		name string
		run  func() error
		want ah.Reason
	}{
		{"AddAH twice", func() error { return tb.AddAH(5, a) }, ah.ReasonAlreadyValid},
		{"AddAH index = count", func() error { return tb.AddAH(64, a) }, ah.ReasonIndexRange},
		{"AddAH bad ARP index", func() error { c := a; c.ARPIndex = 64; return tb.AddAH(6, c) }, ah.ReasonBadARPIndex},
		{"AddAH bad PD", func() error { c := a; c.PD = 1 << 18; return tb.AddAH(6, c) }, ah.ReasonBadPD},
		{"ModifyAH invalid", func() error { return tb.ModifyAH(6, a) }, ah.ReasonNotValid},
		{"DelAH invalid", func() error { return tb.DelAH(6) }, ah.ReasonNotValid},
		{"DelAH", func() error { return tb.DelAH(5) }, 0},
		{"DelAH twice", func() error { return tb.DelAH(5) }, ah.ReasonNotValid},
		{"AddAH after delete", func() error { return tb.AddAH(5, a) }, 0},
	}
	for _, tc := range tests {
		wantReason(t, tc.name, tc.run(), tc.want)
	}
	if _, ok := tb.AH(6); ok {
		t.Errorf("AH(6) valid after failed adds")
	}
}

func TestMG(t *testing.T) {
	env, tb := setup(t)
	// A context as irdma_create_mg_ctx builds it: QP 0x12345 port 0x1234,
	// QP 7 port 1, then invalid entries.
	ctx := unhex(t, "4523018034120000", "0700008001000000", strings.Repeat("00", 48))
	entries := ah.DecodeMGContext(ctx)
	want := [ah.MGEntries]ah.MGEntry{{QPID: 0x12345, Valid: true, DestPort: 0x1234}, {QPID: 7, Valid: true, DestPort: 1}}
	if entries != want {
		t.Errorf("DecodeMGContext = %+v", entries)
	}
	r, err := env.Mem.Alloc(4096, 0, "mgctx")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Mem.Write(r.IOVA(), ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := tb.ReadMGContext(r.IOVA()); err != nil || got != want {
		t.Errorf("ReadMGContext = %+v %v", got, err)
	}
	if _, err := tb.ReadMGContext(r.End()); !errors.Is(err, hostmem.ErrFault) {
		t.Errorf("ReadMGContext past region: %v", err)
	}

	ip, _ := ah.AddrToWords(netip.MustParseAddr("239.1.2.3"))
	g := ah.MG{DestMAC: [6]byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}, VLANID: 100, VLANValid: true,
		IPv4: true, DestIP: ip, QSHandle: 3, Entries: want}
	wantReason(t, "CreateMG", tb.CreateMG(2, g), 0)
	if got, ok := tb.MG(2); !ok || got != g {
		t.Errorf("MG(2) = %+v %v", got, ok)
	}
	if idx, got, ok := tb.LookupMG(ip, true); !ok || idx != 2 || got.QPs(nil)[1] != 7 {
		t.Errorf("LookupMG = %d %+v %v", idx, got, ok)
	}
	if _, _, ok := tb.LookupMG(ip, false); ok {
		t.Errorf("LookupMG matched an IPv6 key")
	}
	wantObj := unhex(t,
		"0302015e00010700",         // dest MAC, valid | IPv4 | VLAN valid
		"6400", "0300", "00000000", // VLAN 100, QS handle 3
		"00000000", "00000000", "00000000", "030201ef", // dest IP words
		"4523018034120000", "0700008001000000", strings.Repeat("00", 48), // context
		strings.Repeat("00", 32))
	if diff := cmp.Diff(wantObj, hmcBytes(t, env, hmc.FSIMC, 2, 128)); diff != "" {
		t.Errorf("FSIMC object (-want +got):\n%s", diff)
	}

	// Attach a third QP, move the group to another address.
	g2 := g
	g2.Entries[2] = ah.MGEntry{QPID: 9, Valid: true, DestPort: 2}
	g2.DestIP, _ = ah.AddrToWords(netip.MustParseAddr("239.9.9.9"))
	wantReason(t, "ModifyMG", tb.ModifyMG(2, g2), 0)
	if _, _, ok := tb.LookupMG(ip, true); ok {
		t.Errorf("old address still found after ModifyMG")
	}
	if idx, got, ok := tb.LookupMG(g2.DestIP, true); !ok || idx != 2 || len(got.QPs(nil)) != 3 {
		t.Errorf("LookupMG new address = %d %+v %v", idx, got, ok)
	}
	tests := []struct {
		name string
		err  error
		want ah.Reason
	}{
		{"CreateMG twice", tb.CreateMG(2, g), ah.ReasonAlreadyValid},
		{"CreateMG index = count", tb.CreateMG(16, g), ah.ReasonIndexRange},
		{"ModifyMG invalid", tb.ModifyMG(3, g), ah.ReasonNotValid},
		{"DestroyMG invalid", tb.DestroyMG(3), ah.ReasonNotValid},
		{"DestroyMG", tb.DestroyMG(2), 0},
	}
	for _, tc := range tests {
		wantReason(t, tc.name, tc.err, tc.want)
	}
	if _, _, ok := tb.LookupMG(g2.DestIP, true); ok {
		t.Errorf("LookupMG after DestroyMG")
	}
	if diff := cmp.Diff(make([]byte, 128), hmcBytes(t, env, hmc.FSIMC, 2, 128)); diff != "" {
		t.Errorf("FSIMC object after destroy (-want +got):\n%s", diff)
	}
}

func TestNotCommittedAndRecommit(t *testing.T) {
	mem := hostmem.New()
	defer mem.Close()
	h := hmc.New(mem, profile.GEN2())
	tb := ah.NewTables(mem, h, profile.GEN2())
	wantReason(t, "SetARP", tb.SetARP(1, [6]byte{}, false), ah.ReasonNotCommitted)
	wantReason(t, "AddAH", tb.AddAH(1, ah.AH{}), ah.ReasonNotCommitted)
	wantReason(t, "CreateMG", tb.CreateMG(1, ah.MG{}), ah.ReasonNotCommitted)
	if _, ok := tb.AH(1); ok {
		t.Errorf("AH before commit")
	}
	// Committed but not backed: the HMC write fails.
	if err := h.Commit(hmctest.CommitBuffer(hmctest.DefaultCounts)); err != nil {
		t.Fatal(err)
	}
	err := tb.SetARP(1, [6]byte{1}, false)
	wantReason(t, "SetARP without SD", err, ah.ReasonHMC)
	if !errors.Is(err, hmc.ErrSDInvalid) {
		t.Errorf("SetARP without SD: %v does not wrap ErrSDInvalid", err)
	}
	if _, ok := tb.ARP(1); ok {
		t.Errorf("failed SetARP published the entry")
	}

	env, tb2 := setup(t)
	if err := tb2.SetARP(1, [6]byte{1}, false); err != nil {
		t.Fatal(err)
	}
	if err := env.HMC.Commit(hmctest.CommitBuffer(hmctest.DefaultCounts)); err != nil {
		t.Fatal(err)
	}
	if _, ok := tb2.ARP(1); ok {
		t.Errorf("ARP entry survived a new commit")
	}
}

func TestLookupsDoNotAllocate(t *testing.T) {
	_, tb := setup(t)
	ip, _ := ah.AddrToWords(netip.MustParseAddr("239.1.2.3"))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tb.SetARP(1, [6]byte{1}, false))
	must(tb.AddAH(1, ah.AH{ARPIndex: 1, IPv4: true, DestIP: ip}))
	must(tb.CreateMG(1, ah.MG{IPv4: true, DestIP: ip}))
	n := testing.AllocsPerRun(100, func() {
		_, _ = tb.ARP(1)
		_, _ = tb.AH(1)
		_, _, _, _ = tb.ResolveAH(1)
		_, _ = tb.MG(1)
		_, _, _ = tb.LookupMG(ip, true)
		a, _ := tb.AH(1)
		_ = a.Dest()
	})
	if n != 0 {
		t.Errorf("%v allocations per lookup round", n)
	}
}

// TestConcurrentLookups reads every table while another goroutine changes
// them (run under -race): lookups see whole entries, never torn ones.
func TestConcurrentLookups(t *testing.T) {
	_, tb := setup(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if mac, ok := tb.ARP(2); ok && mac[1] != mac[0] {
					t.Errorf("torn ARP entry %x", mac)
					return
				}
				if a, ok := tb.AH(2); ok && a.TC != uint8(a.FlowLabel) {
					t.Errorf("torn AH %+v", a)
					return
				}
				if g, ok := tb.MG(2); ok && g.QSHandle != uint16(g.Entries[0].QPID) {
					t.Errorf("torn MG %+v", g)
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		v := byte(i)
		_ = tb.SetARP(2, [6]byte{v, v}, false)
		_ = tb.DelAH(2)
		_ = tb.AddAH(2, ah.AH{TC: v, FlowLabel: uint32(v)})
		_ = tb.DestroyMG(2)
		_ = tb.CreateMG(2, ah.MG{QSHandle: uint16(v), Entries: [8]ah.MGEntry{{QPID: uint32(v), Valid: true}}})
	}
	stop.Store(true)
	wg.Wait()
}

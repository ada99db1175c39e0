package device_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// TestSTagAndAHOps decodes hand-written ALLOC_STAG, REG_MR, DEALLOC_STAG,
// MANAGE_ARP, CREATE/DESTROY_ADDR_HANDLE and MCAST WQEs and checks what
// reached the tables.
func TestSTagAndAHOps(t *testing.T) {
	mr, ah := newFakes()
	e := devtest.Bringup(t, devtest.Options{Config: device.Config{MR: mr, AH: ah}})

	// ALLOC_STAG, MR variant (irdma_sc_alloc_stag).
	e.MustOK(e.Exec([8]uint64{
		1: 9<<46 | 0x40000,                     // PDID [63:46] = 9 | STAGLEN [45:0] = 256 KiB
		2: 0x000123 << 8,                       // STAG_IDX [31:8]
		3: 0x09<<32 | 1<<43 | 0x1f<<48 | 1<<53, // ALLOC_STAG | MR | ARIGHTS 0x1f | REMACCENABLED
	}), "ALLOC_STAG MR")
	// ALLOC_STAG, MW variant (irdma_sc_mw_alloc): type-1 window.
	e.MustOK(e.Exec([8]uint64{
		1: 9 << 46,          // PDID
		2: 0x000124 << 8,    // STAG_IDX
		3: 0x09<<32 | 1<<42, // ALLOC_STAG | MWTYPE (MR bit clear)
	}), "ALLOC_STAG MW")
	// REG_MR, VA-based, level-1 PBL at index 10, 4 KiB pages.
	e.MustOK(e.Exec([8]uint64{
		0: 0x7f00_0000_1000,                            // VA
		1: 9<<46 | 0x3000,                              // PDID | STAGLEN 12 KiB
		2: 0x000125<<8 | 0xab,                          // STAG_IDX | KEY
		6: 10,                                          // FIRSTPMPBLIDX
		3: 0x0a<<32 | 1<<43 | 1<<44 | 0x03<<48 | 1<<59, // REG_MR | MR | LPBLSIZE 1 | ARIGHTS 3 | VABASEDTO
	}), "REG_MR")
	// Same index again: the table's STag-valid status comes back.
	wantStatus(t, "REG_MR twice", e.Exec([8]uint64{1: 9 << 46, 2: 0x000125 << 8, 3: 0x0a<<32 | 1<<43}),
		0xffff, cqp.MinorSTagValid)
	// First PBLE beyond the committed 4096: PBLE out of range.
	wantStatus(t, "REG_MR PBLE range", e.Exec([8]uint64{1: 9 << 46, 2: 0x000126 << 8, 6: 4096,
		3: 0x0a<<32 | 1<<43 | 1<<44}), 0xffff, cqp.MinorPBLERange)
	e.MustOK(e.Exec([8]uint64{1: 9 << 46, 2: 0x000123 << 8, 3: 0x0d<<32 | 1<<43}), "DEALLOC_STAG")
	wantStatus(t, "DEALLOC_STAG twice", e.Exec([8]uint64{1: 9 << 46, 2: 0x000123 << 8, 3: 0x0d<<32 | 1<<43}),
		0xffff, cqp.MinorSTagInvalid)
	wantAlloc := []cqp.STagAlloc{
		{Index: 0x123, PD: 9, Len: 0x40000, MR: true, Rights: 0x1f, RemoteAcc: true},
		{Index: 0x124, PD: 9, MWType1: true},
	}
	if d := cmp.Diff(wantAlloc, mr.allocs); d != "" {
		t.Errorf("ALLOC_STAG decode (-want +got):\n%s", d)
	}
	wantReg := []cqp.MRReg{{Index: 0x125, Key: 0xab, PD: 9, Len: 0x3000, VA: 0x7f00_0000_1000, VABased: true,
		Rights: 3, LPBLSize: 1, FirstPBLE: 10}}
	if d := cmp.Diff(wantReg, mr.regs); d != "" {
		t.Errorf("REG_MR decode (-want +got):\n%s", d)
	}

	// MANAGE_ARP add entry 7 = 02:00:00:00:00:02 (ether_addr_to_u64 order).
	e.MustOK(e.Exec([8]uint64{
		2: 0x0200_0000_0002,     // MAC [47:0]
		3: 0x0f<<32 | 7 | 1<<42, // MANAGE_ARP | ARPENTRYIDX 7 | ENTRYVALID
	}), "MANAGE_ARP add")
	if got := ah.arp[7]; got != [6]byte{2, 0, 0, 0, 0, 2} {
		t.Errorf("ARP 7 = % x", got)
	}
	wantStatus(t, "MANAGE_ARP index 64", e.Exec([8]uint64{3: 0x0f<<32 | 64 | 1<<42}), 0xffff, cqp.MinorIndexRange)
	e.MustOK(e.Exec([8]uint64{3: 0x0f<<32 | 7}), "MANAGE_ARP delete")
	if _, ok := ah.arp[7]; ok {
		t.Error("ARP 7 not deleted")
	}

	// CREATE_ADDR_HANDLE, IPv4 (uda.c:irdma_sc_access_ah).
	e.MustOK(e.Exec([8]uint64{
		0: 0x0200_0000_0001 << 16,           // source MAC << 16
		1: 0x2005 | 3<<32 | 0x0009<<48,      // VLANTAG, TC 3, PDINDEXLO 9
		2: 0x12345 | 1<<20 | 64<<32 | 7<<48, // FLOWLABEL, PDINDEXHI 1, HOPLIMIT 64, ARPINDEX 7
		4: 0x0a00_0002,                      // dest IPv4 (host order) in [31:0]
		6: 0x0a00_0001,                      // source IPv4
		3: 0x1c<<32 | 3 | 1<<59 | 1<<60,     // CREATE_ADDR_HANDLE | AVIDX 3 | IPV4VALID | INSERTVLANTAG
	}), "CREATE_ADDR_HANDLE")
	want := cqp.AH{Index: 3, PD: 0x10009, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, VLANTag: 0x2005, TC: 3,
		FlowLabel: 0x12345, HopLimit: 64, ARPIndex: 7, DestIP: [4]uint32{3: 0x0a000002},
		SrcIP: [4]uint32{3: 0x0a000001}, IPv4: true, InsertVLAN: true}
	if d := cmp.Diff(want, ah.ahs[3]); d != "" {
		t.Errorf("AH decode (-want +got):\n%s", d)
	}
	e.MustOK(e.Exec([8]uint64{3: 0x1e<<32 | 3}), "DESTROY_ADDR_HANDLE")
	wantStatus(t, "MODIFY_ADDR_HANDLE", e.Exec([8]uint64{3: 0x1d<<32 | 3}), 0xffff, cqp.MinorUnsupportedOp)

	// CREATE_MCAST_GRP with two valid QPs in the MG context.
	mg := e.Scr(64, 64)
	_ = e.Mem.Store64(mg, 5|1<<31|4791<<32) // QPID 5 | VALIDENT | DESTPORT
	_ = e.Mem.Store64(mg+8, 0)              // invalid entry
	_ = e.Mem.Store64(mg+16, 6|1<<31|4791<<32)
	e.MustOK(e.Exec([8]uint64{
		0: 0x0100_5e00_0001,             // dest MAC
		2: 1 | 10<<32,                   // QS_HANDLE 1, VLANID 10
		4: uint64(mg),                   // MG context PA
		6: 0xe000_0001,                  // dest IPv4 224.0.0.1
		3: 0x26<<32 | 2 | 1<<59 | 1<<60, // CREATE_MCAST_GRP | MGIDX 2 | VLANVALID | IPV4VALID
	}), "CREATE_MCAST_GRP")
	g := ah.mcast[2]
	if len(g.QPs) != 2 || g.QPs[1].QPID != 6 || g.DestIP[3] != 0xe0000001 || g.VLANID != 10 || g.DestMAC != [6]byte{1, 0, 0x5e, 0, 0, 1} {
		t.Errorf("mcast group %+v", g)
	}
	e.MustOK(e.Exec([8]uint64{3: 0x28<<32 | 2}), "DESTROY_MCAST_GRP")
}

// TestMiscOps covers the bookkeeping opcodes.
func TestMiscOps(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	// MANAGE_PUSH_PAGES: declined with OP_RETVAL 0xFFFFFFFF
	// (docs/hw-controlpath.md "Push pages").
	c := e.MustOK(e.Exec([8]uint64{2: 1, 3: 0x11 << 32}), "MANAGE_PUSH_PAGES")
	if c.RetVal != 0xffffffff {
		t.Errorf("push page retval %#x", c.RetVal)
	}
	// WORK_SCHED_NODE: root, then a leaf: OP_RETVAL is a QS handle.
	e.MustOK(e.Exec([8]uint64{4: 1 << 48, 3: 0x2c<<32 | 1 | 1<<62}), "WS add root")
	c = e.MustOK(e.Exec([8]uint64{4: 1<<48 | 1<<32, 3: 0x2c<<32 | 2 | 1<<16 | 1<<61 | 1<<62}), "WS add leaf")
	if c.RetVal == 0 || c.RetVal > 0x3ff {
		t.Errorf("leaf qs_handle %d", c.RetVal)
	}
	wantStatus(t, "WS add twice", e.Exec([8]uint64{3: 0x2c<<32 | 2}), 0xffff, cqp.MinorObjectExists)
	e.MustOK(e.Exec([8]uint64{3: 0x2c<<32 | 2 | 2<<52}), "WS delete leaf")
	// MANAGE_STATS alloc → index in OP_RETVAL; GATHER_STATS of it.
	c = e.MustOK(e.Exec([8]uint64{3: 0x2d<<32 | 1<<62}), "MANAGE_STATS alloc")
	idx := c.RetVal
	e.Dev.HWStats().Instance(idx).Add(36, 7)            // RDMARXSNDS (data plane later)
	e.Dev.HWStats().Instance(idx).Add(0, 0x1_ffff_ffff) // RXVLANERR: 24 bits at [55:32]
	buf := e.Scr(1024, 64)
	e.MustOK(e.Exec([8]uint64{4: uint64(buf), 3: 0x2e<<32 | uint64(idx) | 1<<61}), "GATHER_STATS")
	if v := load(t, e, buf+256); v != 7 { // icrdma_hw_stat_map RDMARXSNDS {256, 0, 48}
		t.Errorf("RDMARXSNDS qword %#x", v)
	}
	if v := load(t, e, buf+0); v != 0xff_ffff<<32 { // RXVLANERR {0, 32, 24}
		t.Errorf("RXVLANERR qword %#x", v)
	}
	e.MustOK(e.Exec([8]uint64{3: 0x2d<<32 | uint64(idx)}), "MANAGE_STATS free")
	wantStatus(t, "GATHER_STATS freed", e.Exec([8]uint64{4: uint64(buf), 3: 0x2e<<32 | uint64(idx) | 1<<61}),
		0xffff, cqp.MinorObjectNotFound)
	// UP_MAP, HMC PM function table.
	e.MustOK(e.Exec([8]uint64{0: 0x0706050403020100, 3: 0x2f << 32}), "UP_MAP")
	c = e.MustOK(e.Exec([8]uint64{3: 0x15<<32 | 2}), "MANAGE_HMC_PM_FUNC_TABLE")
	if c.RetVal != 10 {
		t.Errorf("PM function %d", c.RetVal)
	}
	e.MustOK(e.Exec([8]uint64{3: 0x15<<32 | 2 | 1<<62}), "MANAGE_HMC_PM_FUNC_TABLE free")
	// APBVT / QHASH on a RoCE-only CQP.
	wantStatus(t, "MANAGE_APBVT", e.Exec([8]uint64{2: 4791, 3: 0x23<<32 | 1<<62}), 0xffff, cqp.MinorProtocol)
	wantStatus(t, "QHASH", e.Exec([8]uint64{3: 0x25<<32 | 1<<61}), 0xffff, cqp.MinorProtocol)
	// QUERY_RDMA_FEATURES with BUF_LEN 8: one entry written, count says 3.
	fb := e.Scr(32, 16)
	_ = e.Mem.Store64(fb+8, 0x5a5a)
	e.MustOK(e.Exec([8]uint64{4: uint64(fb), 3: 0x12<<32 | 8}), "QUERY_RDMA_FEATURES 8")
	if v := load(t, e, fb+8); v != 0x5a5a {
		t.Errorf("features wrote past BUF_LEN: %#x", v)
	}
	if v := load(t, e, fb); v>>32&0xffff != 3 {
		t.Errorf("feature count %d", v>>32&0xffff)
	}
}

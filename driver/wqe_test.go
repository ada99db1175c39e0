package driver

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// The expected qwords below are written by hand from the ctrl.c builders and
// defs.h masks (docs/hw-controlpath.md, the WQE sections and "CQP host
// context"), field by field; they are not produced by the builders under
// test.

var gen2 = profile.GEN2().Fields

func checkWQE(t *testing.T, name string, got, want cqpWQE) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
		for i := range want {
			if want[i] != got[i] {
				t.Errorf("  qw%d want %#016x got %#016x", i, want[i], got[i])
			}
		}
	}
}

func TestCQPHostCtx(t *testing.T) {
	got := buildCQPHostCtx(cqpCtxInfo{SQSize: 2048, SQPA: 0x1_0000_0200, HMCProfile: 1, ProtocolUsed: 2,
		ComplCtx: 0x1122334455667788, HWMajVer: 1})
	want := [8]uint64{
		0xa10,              // SQSIZE [11:8] = 10 (2048), PROTOCOL_USED [4:3] = 2 (RoCE)
		0x1_0000_0200,      // SQ base PA
		0x1,                // HMC_PROFILE 1 (default)
		0x1122334455667788, // completion context
		0x10000,            // HW_MAJVER [31:16] = 1 (GEN_2), HW_MINVER 0
	}
	if got != want {
		t.Errorf("CQP ctx:\n got %#x\nwant %#x", got, want)
	}
	for size, enc := range map[uint32]uint64{4: 1, 8: 2, 2048: 10} {
		if e := encodedCQPSize(size); e != enc {
			t.Errorf("encodedCQPSize(%d) = %d, want %d", size, e, enc)
		}
	}
}

func TestQPWQEs(t *testing.T) {
	base := qpWQEInfo{QPID: 0x12, QPType: qpTypeRoCERC, CtxPA: 0x1_0000_1100, ShadowPA: 0x1_0000_2040}
	c := base
	c.NextState, c.MACValid, c.CQNumValid = qpHWStateIdle, true, true
	checkWQE(t, "CREATE_QP RC", buildCreateQP(c), cqpWQE{
		2: 0x1_0000_1100, // host context PA
		5: 0x1_0000_2040, // shadow area PA
		// qp_id 0x12 | opcode 0x00 | CQNUMVALID b47 | QPTYPE [50:48]=3 |
		// MACVALID b51 | NEXTIWSTATE [62:60]=1 (IDLE)
		3: 0x100b_8000_0000_0012,
	})
	m := base
	m.NextState, m.ORDValid, m.CQNumValid, m.ARPIdxValid = qpHWStateRTS, true, true, true
	checkWQE(t, "MODIFY_QP →RTS", buildModifyQP(m), cqpWQE{
		2: 0x1_0000_1100,
		5: 0x1_0000_2040,
		// qp 0x12 | opcode 0x01 | ORDVALID b42 | CQNUMVALID b47 | QPTYPE 3 |
		// ARPTABIDXVALID b59 | NEXTIWSTATE 2 (RTS)
		3: 0x2803_8401_0000_0012,
	})
	m = base
	m.QPType, m.NextState, m.VirtualMap = qpTypeRoCEUD, qpHWStateError, true
	checkWQE(t, "MODIFY_QP UD →ERROR, VQ", buildModifyQP(m), cqpWQE{
		2: 0x1_0000_1100,
		5: 0x1_0000_2040,
		// qp 0x12 | opcode 0x01 | VQ b45 | QPTYPE 4 | NEXTIWSTATE 6
		3: 0x6004_2001_0000_0012,
	})
	dq := base
	dq.QPType = qpTypeRoCEUD
	checkWQE(t, "DESTROY_QP UD", buildDestroyQP(dq), cqpWQE{
		2: 0x1_0000_1100,
		5: 0x1_0000_2040,
		3: 0x0004_0002_0000_0012, // qp 0x12 | opcode 0x02 | QPTYPE [50:48]=4
	})
}

func TestFlushWQEs(t *testing.T) {
	got := buildFlushWQEs(flushInfo{QPID: 0x12, SQ: true, RQ: true, UserFlCode: true,
		SQMajor: 1, SQMinor: 1, RQMajor: 1, RQMinor: 2})
	checkWQE(t, "FLUSH_WQES", got, cqpWQE{
		// RQ minor [15:0]=2 (PROT_ERR), RQ major [31:16]=1, SQ minor
		// [47:32]=1 (GENERAL_ERR), SQ major [63:48]=1
		2: 0x0001_0001_0001_0002,
		// qp 0x12 | opcode 0x22 | USERFLCODE b60 | FLUSHSQ b61 | FLUSHRQ b62
		3: 0x7000_0022_0000_0012,
	})
	got = buildFlushWQEs(flushInfo{QPID: 7, RQ: true, GenerateAE: true, AECode: 0x0108, AESource: 1})
	checkWQE(t, "FLUSH_WQES gen AE", got, cqpWQE{
		1: 0x0001_0108,           // AE code [15:0] 0x108 | source [19:16] 1
		3: 0x4800_0022_0000_0007, // qp 7 | opcode | GENERATE_AE b59 | FLUSHRQ b62
	})
}

func TestCQWQEs(t *testing.T) {
	info := cqWQEInfo{CQID: 5, Size: 0x204, Ctx: cqCtxValue(5), ShadowThresh: 0x102, PA: 0x1_0004_0000,
		ShadowPA: 0x1_0004_1000, CEQID: 1, CEQIDValid: true, CEQEMask: true, CheckOverflow: true}
	checkWQE(t, "CREATE_CQ", buildCreateCQ(gen2, info), cqpWQE{
		0: 0x204,                 // cq_size
		1: 0x1c00_0000_0000_0005, // CQ context (our tag | cq id)
		2: 0x102,                 // SHADOW_READ_THRESHOLD
		4: 0x1_0004_0000,         // ring PA
		5: 0x1_0004_1000,         // shadow PA
		// CQID [18:0]=5 | CEQID [31:22]=1 | opcode 0x03 | CHKOVERFLOW b46 |
		// ENCEQEMASK b48 | CEQIDVALID b49
		3: 0x0003_4003_0040_0005,
	})
	v := info
	v.VirtualMap, v.LPBLSize, v.FirstPBLIdx, v.PA = true, 1, 0x40, 0
	checkWQE(t, "CREATE_CQ virtual", buildCreateCQ(gen2, v), cqpWQE{
		0: 0x204, 1: 0x1c00_0000_0000_0005, 2: 0x102,
		5: 0x1_0004_1000,
		6: 0x40, // FIRSTPMPBLIDX
		// + LPBLSIZE [45:44]=1, VIRTMAP b47; no ring PA
		3: 0x0003_d003_0040_0005,
	})
	ccq := cqWQEInfo{CQID: 0, Size: 2050, Ctx: cqCtxValue(0), ShadowThresh: 16, PA: 0x1_0010_0000,
		ShadowPA: 0x1_0000_0080, CEQIDValid: true, CheckOverflow: true}
	checkWQE(t, "CREATE_CQ (CCQ)", buildCreateCQ(gen2, ccq), cqpWQE{
		0: 0x802, 1: 0x1c00_0000_0000_0000, 2: 0x10, 4: 0x1_0010_0000, 5: 0x1_0000_0080,
		3: 0x0002_4003_0000_0000, // cq 0 | CEQ 0 | opcode 0x03 | CHKOVERFLOW | CEQIDVALID (no CEQE mask)
	})
	m := info
	m.Size, m.Resize, m.PA, m.CheckOverflow = 0x400, true, 0x1_0008_0000, false
	checkWQE(t, "MODIFY_CQ resize", buildModifyCQ(m), cqpWQE{
		0: 0x400, 1: 0x1c00_0000_0000_0005, 2: 0x102, 4: 0x1_0008_0000, 5: 0x1_0004_1000,
		3: 0x0001_0804_0000_0005, // cq 5 | opcode 0x04 | CQRESIZE b43 | ENCEQEMASK b48
	})
	checkWQE(t, "DESTROY_CQ", buildDestroyCQ(gen2, info), cqpWQE{
		0: 0x204, 1: 0x1c00_0000_0000_0005, 5: 0x1_0004_1000,
		3: 0x0003_0005_0040_0005, // cq 5 | CEQID 1 | opcode 0x05 | ENCEQEMASK | CEQIDVALID
	})
}

func TestEQWQEs(t *testing.T) {
	checkWQE(t, "CREATE_CEQ", buildCreateCEQ(eqWQEInfo{ID: 1, ElemCnt: 0x800, PA: 0x1_0020_0000}), cqpWQE{
		2: 0x800, 4: 0x1_0020_0000,
		3: 0x0000_0016_0000_0001, // CEQID 1 | opcode 0x16
	})
	checkWQE(t, "DESTROY_CEQ", buildDestroyCEQ(eqWQEInfo{ID: 3, ElemCnt: 0x800}), cqpWQE{
		2: 0x800, 3: 0x0000_0018_0000_0003,
	})
	checkWQE(t, "CREATE_AEQ", buildCreateAEQ(eqWQEInfo{ElemCnt: 0xc00, PA: 0x1_0030_0000}), cqpWQE{
		2: 0xc00, 4: 0x1_0030_0000, 3: 0x0000_0019_0000_0000,
	})
	checkWQE(t, "CREATE_AEQ virtual", buildCreateAEQ(eqWQEInfo{ElemCnt: 0xc00, VirtualMap: true, LPBLSize: 1, FirstPBLIdx: 9}), cqpWQE{
		2: 0xc00, 6: 9, 3: 0x0000_9019_0000_0000, // LPBLSIZE 1 | VMAP b47
	})
}

func TestSTagWQEs(t *testing.T) {
	checkWQE(t, "ALLOC_STAG (fast-reg MR)", buildAllocSTag(gen2, stagInfo{STagIdx: 0x12345, PDID: 7,
		TotalLen: 0x10000, PageSize: 4096, RemoteAccess: true}), cqpWQE{
		1: 0x0001_c000_0001_0000, // PDID [63:46]=7 | STAGLEN 0x10000
		2: 0x0123_4500,           // STAG_IDX [31:8]
		3: 0x0020_0809_0000_0000, // opcode 0x09 | MR b43 | REMACCENABLED b53
	})
	checkWQE(t, "ALLOC_STAG (MW type 1)", buildAllocMW(gen2, stagInfo{STagIdx: 0x12345, PDID: 7, MWWide: true}), cqpWQE{
		1: 0x0001_c000_0000_0000, 2: 0x0123_4500,
		3: 0x0000_0409_0000_0000, // opcode 0x09 | MWTYPE b42, MR 0
	})
	checkWQE(t, "ALLOC_STAG (MW type 2)", buildAllocMW(gen2, stagInfo{STagIdx: 0x12345, PDID: 7}), cqpWQE{
		1: 0x0001_c000_0000_0000, 2: 0x0123_4500, 3: 0x0000_0009_0000_0000,
	})
	rights := mrAccess(AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead)
	if rights != 0x0f {
		t.Fatalf("mrAccess = %#x, want 0x0f", rights)
	}
	s := stagInfo{VA: 0x7f00_0000_1000, STagIdx: 0x12345, STagKey: 0xab, TotalLen: 0x3000, PDID: 7,
		PageSize: 4096, AccessRights: rights, RegAddrPA: 0x1_0010_0000}
	w, err := buildRegMR(gen2, s, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	checkWQE(t, "REG_MR level 0", w, cqpWQE{
		0: 0x7f00_0000_1000,      // VA
		1: 0x0001_c000_0000_3000, // PDID 7 | STAGLEN 0x3000
		2: 0x0123_45ab,           // KEY 0xab | STAG_IDX 0x12345
		4: 0x1_0010_0000,         // reg_addr_pa
		// opcode 0x0a | MR b43 | ARIGHTS [52:48]=0x0f | REMACCENABLED b53 | VABASEDTO b59
		3: 0x082f_080a_0000_0000,
	})
	s1 := s
	s1.ChunkSize, s1.FirstPBLIdx, s1.PageSize, s1.RegAddrPA = 1, 0x40, 2<<20, 0
	w, _ = buildRegMR(gen2, s1, 1<<20)
	checkWQE(t, "REG_MR level 1, 2M pages", w, cqpWQE{
		0: 0x7f00_0000_1000, 1: 0x0001_c000_0000_3000, 2: 0x0123_45ab,
		6: 0x40,                  // FIRSTPMPBLIDX
		3: 0x082f_580a_0000_0000, // + LPBLSIZE 1 [45:44], HPAGESIZE 1 [47:46]
	})
	s2 := s
	s2.ChunkSize, s2.FirstPBLIdx, s2.RegAddrPA = 3, 0x200, 0
	w, _ = buildRegMR(gen2, s2, 1<<20)
	checkWQE(t, "REG_MR level 2", w, cqpWQE{
		0: 0x7f00_0000_1000, 1: 0x0001_c000_0000_3000, 2: 0x0123_45ab, 6: 0x200,
		3: 0x082f_380a_0000_0000, // LPBLSIZE 3
	})
	s3 := s
	s3.ZeroBased, s3.AccessRights = true, mrAccess(AccessLocalWrite|AccessZeroBased)
	w, _ = buildRegMR(gen2, s3, 1<<20)
	checkWQE(t, "REG_MR zero-based", w, cqpWQE{
		0: 0x0, // FBO: VA & 4095
		1: 0x0001_c000_0000_3000, 2: 0x0123_45ab, 4: 0x1_0010_0000,
		3: 0x0003_080a_0000_0000, // ARIGHTS 0x23 → [52:48] keeps 0x03; no REMACC, VABASEDTO 0
	})
	s4 := s
	s4.PageSize = 8192
	if _, err := buildRegMR(gen2, s4, 1<<20); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("REG_MR 8K pages: err %v, want EINVAL", err)
	}
	s5 := s1
	s5.FirstPBLIdx = 1 << 20
	if _, err := buildRegMR(gen2, s5, 1<<20); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("REG_MR PBL index past the PBLE object: err %v, want EINVAL", err)
	}
	checkWQE(t, "DEALLOC_STAG MR", buildDeallocSTag(gen2, stagInfo{PDID: 7, STagIdx: 0x12345, MR: true}), cqpWQE{
		1: 0x0001_c000_0000_0000, 2: 0x0123_4500, 3: 0x0000_080d_0000_0000,
	})
	checkWQE(t, "DEALLOC_STAG MW", buildDeallocSTag(gen2, stagInfo{PDID: 7, STagIdx: 0x12345}), cqpWQE{
		1: 0x0001_c000_0000_0000, 2: 0x0123_4500, 3: 0x0000_000d_0000_0000,
	})
}

func TestARPAndPushWQEs(t *testing.T) {
	mac := [6]byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}
	checkWQE(t, "MANAGE_ARP add", buildAddARP(3, mac, true), cqpWQE{
		2: 0x02aa_bbcc_ddee,      // MAC, mac[0] most significant (ether_addr_to_u64)
		3: 0x0000_0c0f_0000_0003, // index 3 | ENTRYVALID b42 | PERMANENT b43 | opcode 0x0f
	})
	checkWQE(t, "MANAGE_ARP delete", buildDelARP(3), cqpWQE{3: 0x0000_000f_0000_0003})
	checkWQE(t, "MANAGE_PUSH_PAGES alloc", buildManagePushPage(7, 0, false), cqpWQE{
		2: 7, 3: 0x0000_0011_0000_0000,
	})
	checkWQE(t, "MANAGE_PUSH_PAGES free", buildManagePushPage(7, 9, true), cqpWQE{
		2: 7, 3: 0x4000_0011_0000_0009, // PPIDX 9 | FREE_PAGE b62
	})
}

func TestInitWQEs(t *testing.T) {
	checkWQE(t, "QUERY_RDMA_FEATURES", buildQueryRDMAFeatures(0x1_0000_4000, 272), cqpWQE{
		4: 0x1_0000_4000, 3: 0x0000_0012_0000_0110, // BUF_LEN 272
	})
	checkWQE(t, "QUERY_FPM_VAL", buildQueryFPM(0, 0x1_0000_0040), cqpWQE{
		4: 0x1_0000_0040, 3: 0x0000_0020_0000_0000,
	})
	checkWQE(t, "COMMIT_FPM_VAL", buildCommitFPM(0, 0x1_0000_0108, fpmCommitBufSize), cqpWQE{
		4: 0x1_0000_0108, 3: 0x0000_0021_0000_00d0, // BUFSIZE 208
	})
	checkWQE(t, "SHMC_PAGES_ALLOCATED", buildSHMCPagesAllocated(0), cqpWQE{3: 0x0000_002b_0000_0000})
}

func TestUpdatePESDs(t *testing.T) {
	var ents []sdEntry
	for i := range 5 {
		ents = append(ents, setSDEntry(0x1_0020_0000+uint64(i)*0x20_0000, uint32(i), true))
	}
	if ents[1] != (sdEntry{Cmd: 0x8000_8001, Data: 0x1_0040_0803}) {
		// cmd: sd_idx | PMSDPARTSEL b15 | PMSDWR b31;
		// data: PA | PMSDBPCOUNT [11:2]=512 | PMSDTYPE b1 (direct) | PMSDVALID b0
		t.Errorf("setSDEntry = %#x", ents[1])
	}
	w, ovf, err := buildUpdatePESDs(ents, 0, 0x1_0050_0080)
	if err != nil {
		t.Fatal(err)
	}
	checkWQE(t, "UPDATE_PE_SDS 5 entries", w, cqpWQE{
		0: 0x8000_8000,           // entry 0 cmd (SDCMD)
		1: 0x1_0020_0803,         // entry 0 data
		2: 0x1_0050_0080,         // overflow buffer PA | HMCFNID 0
		4: 0x8000_0000_8000_8001, // entry 1 cmd | ENTRY_VALID b63
		5: 0x1_0040_0803,
		6: 0x8000_0000_8000_8002, // entry 2 cmd | ENTRY_VALID
		7: 0x1_0060_0803,
		3: 0x0000_001f_0000_0002, // opcode 0x1f | ENTRY_COUNT 2 (in the buffer)
	})
	want := []sdEntry{{0x8000_8003, 0x1_0080_0803}, {0x8000_8004, 0x1_00a0_0803}}
	if diff := cmp.Diff(want, ovf); diff != "" {
		t.Errorf("overflow entries (-want +got):\n%s", diff)
	}
	w, ovf, _ = buildUpdatePESDs([]sdEntry{clrSDEntry(9, true)}, 0, 0x1_0050_0080)
	checkWQE(t, "UPDATE_PE_SDS clear", w, cqpWQE{
		0: 0x8000_8009, 1: 0x802, // BPCOUNT 512, direct, VALID 0, no PA
		3: 0x0000_001f_0000_0000,
	})
	if len(ovf) != 0 {
		t.Errorf("overflow %v for one entry", ovf)
	}
	if _, _, err := buildUpdatePESDs(make([]sdEntry, 12), 0, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("12 entries: %v, want EINVAL", err)
	}
}

func TestAHWQEs(t *testing.T) {
	dst, _ := ipWords(netip.MustParseAddr("192.0.2.2"))
	src, _ := ipWords(netip.MustParseAddr("192.0.2.1"))
	a := ahInfo{AHIdx: 0x21, PDIdx: 0x12345, SrcMAC: [6]byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}, TCTOS: 0x20,
		FlowLabel: 0x12345, HopTTL: 64, DstARPIdx: 4, IPv4: true, DestIP: dst, SrcIP: src}
	checkWQE(t, "CREATE_ADDR_HANDLE IPv4", buildAccessAH(cqpOpCreateAddrHandle, a), cqpWQE{
		0: 0x0211_2233_4455_0000, // source MAC << 16
		1: 0x2345_0020_0000_0000, // PDINDEXLO [63:48] | TC [39:32] 0x20 | VLANTAG 0
		// ARPINDEX [63:48]=4 | HOPLIMIT [39:32]=64 | PDINDEXHI [27:20]=1 | FLOWLABEL 0x12345
		2: 0x0004_0040_0011_2345,
		4: 0xc000_0202,           // dest IPv4 (host order) [31:0]
		6: 0xc000_0201,           // source IPv4
		3: 0x0800_001c_0000_0021, // AVIDX 0x21 | opcode 0x1c | IPV4VALID b59
	})
	d6, _ := ipWords(netip.MustParseAddr("2001:db8::2"))
	s6, _ := ipWords(netip.MustParseAddr("2001:db8::1:1"))
	a6 := a
	a6.IPv4, a6.DestIP, a6.SrcIP, a6.DoLoopback, a6.InsertVLANTag, a6.VLANTag = false, d6, s6, true, true, 0x6005
	checkWQE(t, "CREATE_ADDR_HANDLE IPv6", buildAccessAH(cqpOpCreateAddrHandle, a6), cqpWQE{
		0: 0x0211_2233_4455_0000,
		1: 0x2345_0020_0000_6005, // + VLANTAG 0x6005 (PCP 3, VID 5)
		2: 0x0004_0040_0011_2345,
		5: 0x2001_0db8_0000_0000, // dest ip[0] [63:32] | ip[1]
		4: 0x0000_0000_0000_0002, // dest ip[2] | ip[3]
		7: 0x2001_0db8_0000_0000, // source ip[0] | ip[1]
		6: 0x0000_0000_0001_0001, // source ip[2] | ip[3]
		3: 0x5000_001c_0000_0021, // AVIDX | opcode | INSERTVLANTAG b60 | DOLOOPBACK b62
	})
	checkWQE(t, "DESTROY_ADDR_HANDLE", buildAccessAH(cqpOpDestroyAddrHandle, a), cqpWQE{
		0: 0x0211_2233_4455_0000, 1: 0x2345_0020_0000_0000, 2: 0x0004_0040_0011_2345,
		4: 0xc000_0202, 6: 0xc000_0201, 3: 0x0800_001e_0000_0021,
	})
}

func TestMcastWQEs(t *testing.T) {
	ip, _ := ipWords(netip.MustParseAddr("239.1.2.3"))
	m := mcastGrpInfo{MGID: 2, DestMAC: mcastMAC([4]uint32{ip[0]}, true), VLANID: 0xffff, QSHandle: 7,
		IPv4: true, DestIP: [4]uint32{ip[0]}, CtxPA: 0x1_0060_0000}
	if m.DestMAC != [6]byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03} {
		t.Errorf("mcast MAC %x", m.DestMAC)
	}
	w, err := buildMcastGrp(cqpOpCreateMcastGrp, m)
	if err != nil {
		t.Fatal(err)
	}
	checkWQE(t, "CREATE_MCAST_GRP IPv4", w, cqpWQE{
		0: 0x0100_5e01_0203,      // dest MAC (no shift)
		2: 0x0000_0fff_0000_0007, // VLANID [43:32] 0xfff | QS_HANDLE 7
		4: 0x1_0060_0000,         // MG context PA
		6: 0xef01_0203,           // dest IPv4
		3: 0x1000_0026_0000_0002, // MGIDX 2 | opcode 0x26 | IPV4VALID b60
	})
	ip6, _ := ipWords(netip.MustParseAddr("ff0e::1:2"))
	m6 := mcastGrpInfo{MGID: 3, DestMAC: mcastMAC(ip6, false), QSHandle: 7, VLANID: 5, VLANValid: true,
		DestIP: ip6, CtxPA: 0x1_0060_1000, HMCFcnID: 1}
	if m6.DestMAC != [6]byte{0x33, 0x33, 0x00, 0x01, 0x00, 0x02} {
		t.Errorf("mcast MAC6 %x", m6.DestMAC)
	}
	w, _ = buildMcastGrp(cqpOpModifyMcastGrp, m6)
	checkWQE(t, "MODIFY_MCAST_GRP IPv6", w, cqpWQE{
		0: 0x3333_0001_0002, 1: 1, 2: 0x0000_0005_0000_0007, 4: 0x1_0060_1000,
		7: 0xff0e_0000_0000_0000, 6: 0x0000_0000_0001_0002,
		3: 0x0800_0027_0000_0003, // MGIDX 3 | opcode 0x27 | VLANVALID b59
	})
	if _, err := buildMcastGrp(cqpOpDestroyMcastGrp, mcastGrpInfo{MGID: 4096}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("mg_id 4096: %v, want EINVAL", err)
	}
	var ents [maxMgsPerCtx]mgCtxEntry
	ents[2] = mgCtxEntry{QPID: 0x11, Valid: true, UseCnt: 1}
	ents[5] = mgCtxEntry{QPID: 0x3ffff, Valid: true, UseCnt: 1}
	ctx := encodeMgCtx(&ents)
	want := [maxMgsPerCtx]uint64{0x8000_0011, 0x8003_ffff} // QPID [17:0] | VALIDENT b31, packed
	if ctx != want {
		t.Errorf("MG context %#x, want %#x", ctx, want)
	}
}

func TestWSAndStatsWQEs(t *testing.T) {
	leaf := wsNodeInfo{ID: 2, ParentID: 1, Weight: 1, PrioType: 1, Leaf: true}
	checkWQE(t, "WORK_SCHED_NODE add leaf", buildWSNode(leaf, wsAddNode), cqpWQE{
		4: 0x1_0000_0000,         // WEIGHT [38:32]=1, VSI 0
		3: 0x2800_002c_0001_0002, // NODEID 2 | PARENTID 1 | opcode | PRIOTYPE 1 | NODETYPE leaf
	})
	leaf.Enable = true
	checkWQE(t, "WORK_SCHED_NODE modify leaf", buildWSNode(leaf, wsModifyNode), cqpWQE{
		4: 0x1_0000_0000,
		3: 0x6810_002c_0001_0002, // + NODEOP 1 [55:52] | ENABLENODE b62
	})
	root := wsNodeInfo{VSI: 3, Weight: 1, PrioType: 1, Enable: true}
	checkWQE(t, "WORK_SCHED_NODE delete root", buildWSNode(root, wsDelNode), cqpWQE{
		4: 0x0003_0001_0000_0000, // VSI [63:48]=3 | WEIGHT 1
		3: 0x4820_002c_0000_0000, // NODEOP 2 | PRIOTYPE 1 | ENABLENODE
	})
	checkWQE(t, "MANAGE_STATS alloc", buildManageStats(true, 0, false, 0), cqpWQE{3: 0x4000_002d_0000_0000})
	checkWQE(t, "MANAGE_STATS free", buildManageStats(false, 5, false, 0), cqpWQE{3: 0x0000_002d_0000_0005})
	checkWQE(t, "GATHER_STATS", buildGatherStats(0x1_0070_0000, true, 5, false, 0), cqpWQE{
		4: 0x1_0070_0000, 3: 0x2000_002e_0000_0005, // INST_INDEX 5 | opcode | USE_INST b61
	})
}

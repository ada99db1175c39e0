package device_test

import (
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
)

// TestSTagOpsRealTable runs the STag opcodes against emu/mr's table.
func TestSTagOpsRealTable(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	alloc := [8]uint64{
		1: 9<<46 | 0x4000,              // PDID 9 [63:46] | STAGLEN 16 KiB
		2: 0x23 << 8,                   // STAG_IDX 0x23
		3: 0x09<<32 | 1<<43 | 0x01<<48, // ALLOC_STAG | MR | ARIGHTS LOCALREAD
	}
	e.MustOK(e.Exec(alloc), "ALLOC_STAG")
	wantStatus(t, "ALLOC_STAG twice", e.Exec(alloc), 0xffff, cqp.MinorSTagValid)
	page := e.Scr(4096, 4096)
	e.MustOK(e.Exec([8]uint64{
		0: uint64(page),                        // VA (VA-based, equal to the bus address here)
		1: 9<<46 | 4096,                        // PDID | STAGLEN
		2: 0x24<<8 | 0x5c,                      // STAG_IDX 0x24 | KEY 0x5c
		4: uint64(page),                        // reg_addr_pa (LPBLSIZE 0)
		3: 0x0a<<32 | 1<<43 | 0x03<<48 | 1<<59, // REG_MR | MR | ARIGHTS 3 | VABASEDTO
	}), "REG_MR")
	if r, ok := e.Dev.MRs().Get(0x24); !ok || r.STag != 0x245c || r.PD != 9 {
		t.Errorf("MR record %+v %v", r, ok)
	}
	e.MustOK(e.Exec([8]uint64{1: 9 << 46, 2: 0x23 << 8, 3: 0x0d<<32 | 1<<43}), "DEALLOC_STAG")
	wantStatus(t, "DEALLOC_STAG twice", e.Exec([8]uint64{1: 9 << 46, 2: 0x23 << 8, 3: 0x0d<<32 | 1<<43}),
		0xffff, cqp.MinorSTagInvalid)
	wantStatus(t, "DEALLOC_STAG wrong PD", e.Exec([8]uint64{1: 8 << 46, 2: 0x24 << 8, 3: 0x0d<<32 | 1<<43}),
		0xffff, cqp.MinorSTagInvalid)
}

// TestAHOpsRealTables runs MANAGE_ARP, the AH and multicast opcodes
// against emu/ah's tables.
func TestAHOpsRealTables(t *testing.T) {
	e := devtest.Bringup(t, devtest.Options{})
	e.MustOK(e.Exec([8]uint64{2: 0x0200_0000_0002, 3: 0x0f<<32 | 7 | 1<<42}), "MANAGE_ARP add")
	if mac, ok := e.Dev.AHs().ARP(7); !ok || mac != [6]byte{2, 0, 0, 0, 0, 2} {
		t.Errorf("ARP 7 = % x %v", mac, ok)
	}
	ahw := [8]uint64{
		0: 0x0200_0000_0001 << 16, // source MAC
		1: 3<<32 | 9<<48,          // TC 3, PDINDEXLO 9
		2: 64<<32 | 7<<48,         // HOPLIMIT, ARPINDEX 7
		4: 0x0a00_0002,            // dest IPv4
		6: 0x0a00_0001,            // source IPv4
		3: 0x1c<<32 | 3 | 1<<59,   // CREATE_ADDR_HANDLE | AVIDX 3 | IPV4VALID
	}
	e.MustOK(e.Exec(ahw), "CREATE_ADDR_HANDLE")
	if a, ok := e.Dev.AHs().AH(3); !ok || a.ARPIndex != 7 || a.DestIP[3] != 0x0a000002 || a.PD != 9 {
		t.Errorf("AH 3 %+v %v", a, ok)
	}
	wantStatus(t, "CREATE_ADDR_HANDLE twice", e.Exec(ahw), 0xffff, cqp.MinorObjectExists)
	e.MustOK(e.Exec([8]uint64{3: 0x1e<<32 | 3}), "DESTROY_ADDR_HANDLE")
	wantStatus(t, "DESTROY_ADDR_HANDLE twice", e.Exec([8]uint64{3: 0x1e<<32 | 3}), 0xffff, cqp.MinorObjectNotFound)
	mgc := e.Scr(64, 64)
	_ = e.Mem.Store64(mgc, 5|1<<31|4791<<32) // QPID 5 | VALIDENT | DESTPORT
	e.MustOK(e.Exec([8]uint64{0: 0x0100_5e00_0001, 4: uint64(mgc), 6: 0xe000_0001,
		3: 0x26<<32 | 2 | 1<<60}), "CREATE_MCAST_GRP")
	if g, ok := e.Dev.AHs().MG(2); !ok || !g.Entries[0].Valid || g.Entries[0].QPID != 5 {
		t.Errorf("MG 2 %+v %v", g, ok)
	}
	e.MustOK(e.Exec([8]uint64{3: 0x28<<32 | 2}), "DESTROY_MCAST_GRP")
	e.MustOK(e.Exec([8]uint64{3: 0x0f<<32 | 7}), "MANAGE_ARP delete")
}

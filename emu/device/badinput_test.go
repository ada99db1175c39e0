package device_test

import (
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/cqp"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/device/devtest"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/regs"
)

// unmapped is an address no region covers (below the IOVA base).
const unmapped = 0x1000

// TestBadInput feeds WQEs the device must refuse and checks the defined
// reaction — the major/minor codes in the CCQE, CQP_OP_ERR and CQPERRCODES —
// and that the next good WQE succeeds with CQP_OP_ERR clear
// (docs/hw-controlpath.md "CQP completion").
func TestBadInput(t *testing.T) {
	mr, ah := newFakes()
	e := devtest.Bringup(t, devtest.Options{Config: device.Config{MR: mr, AH: ah}})
	ring := e.Scr(64*32, 256)
	sh := e.Scr(64, 64)
	ctxPA := e.Scr(256, 256)
	// A QP context whose TXCQNUM/RXCQNUM (3, 4) do not exist.
	_ = e.Mem.Write(ctxPA, qpCtx(e.Scr(256, 256), e.Scr(256, 256), 1, 1))
	e.MustOK(e.Exec([8]uint64{1: 9 << 46, 2: 0x77 << 8, 3: 0x09<<32 | 1<<43}), "ALLOC_STAG 0x77")
	cqw := func(id uint64, size uint64, ringPA uint64, extra uint64) [8]uint64 {
		return [8]uint64{0: size, 4: ringPA, 5: uint64(sh), 3: 0x03<<32 | id | extra}
	}
	cases := []struct {
		name  string
		w     [8]uint64
		minor uint16
	}{
		{"unassigned opcode 0x17", [8]uint64{3: 0x17 << 32}, cqp.MinorUnsupportedOp},
		{"unassigned opcode 0x1a", [8]uint64{3: 0x1a << 32}, cqp.MinorUnsupportedOp},
		{"opcode 0x30", [8]uint64{3: 0x30 << 32}, cqp.MinorUnsupportedOp},
		{"opcode 0x3f", [8]uint64{3: 0x3f << 32}, cqp.MinorUnsupportedOp},
		{"QUERY_STAG 0x0b", [8]uint64{3: 0x0b << 32}, cqp.MinorUnsupportedOp},
		{"REG_SMR 0x0c", [8]uint64{3: 0x0c << 32}, cqp.MinorUnsupportedOp},
		{"LOC_MAC 0x0e", [8]uint64{3: 0x0e << 32}, cqp.MinorUnsupportedOp},
		{"VF_PBLE_BP 0x10", [8]uint64{3: 0x10 << 32}, cqp.MinorUnsupportedOp},
		{"ALLOC_LOC_MAC 0x14", [8]uint64{3: 0x14 << 32}, cqp.MinorUnsupportedOp},
		{"NOP 0x24", [8]uint64{3: 0x24 << 32}, cqp.MinorUnsupportedOp},
		{"CREATE_SRQ without SRQ", [8]uint64{3: 0x06 << 32}, cqp.MinorUnsupportedOp},
		{"CREATE_CQ id beyond count", cqw(128, 64, uint64(ring), 0), cqp.MinorIndexRange},
		{"CREATE_CQ over the CCQ", cqw(0, 64, uint64(ring), 0), cqp.MinorObjectExists},
		{"CREATE_CQ too small", cqw(9, 1, uint64(ring), 0), cqp.MinorBadSize},
		{"CREATE_CQ bad ring PA", cqw(9, 64, unmapped, 0), cqp.MinorPAFault},
		{"CREATE_CQ ring PA 0", cqw(9, 64, 0, 0), cqp.MinorPAFault},
		{"CREATE_CQ misaligned ring", cqw(9, 64, uint64(ring)+8, 0), cqp.MinorBadAlignment},
		{"CREATE_CQ PBLE out of range", [8]uint64{0: 256, 5: uint64(sh), 6: 4095, // 2 pages from the last PBLE
			3: 0x03<<32 | 9 | 1<<47 | 1<<44}, cqp.MinorPBLERange},
		{"CREATE_CQ PBLE page 0", [8]uint64{0: 64, 5: uint64(sh), 6: 4095, 3: 0x03<<32 | 9 | 1<<47 | 1<<44}, cqp.MinorPAFault},
		{"CREATE_CQ virtual without LPBLSIZE 1", [8]uint64{0: 64, 5: uint64(sh), 3: 0x03<<32 | 9 | 1<<47},
			cqp.MinorBadContext},
		{"CREATE_CQ CEQ id too big", cqw(9, 64, uint64(ring), 1000<<22|1<<49), cqp.MinorIndexRange},
		{"CREATE_CQ 64-byte CQEs on GEN_2", cqw(9, 64, uint64(ring), 1<<61), cqp.MinorBadContext},
		{"CREATE_QP id beyond count", qpWQE(0, 64, ctxPA, sh, 1, fCQNumValid), cqp.MinorIndexRange},
		{"CREATE_QP bad context PA", qpWQE(0, 6, unmapped, sh, 1, fCQNumValid), cqp.MinorPAFault},
		{"CREATE_QP iWARP type", [8]uint64{2: uint64(ctxPA), 5: uint64(sh), 3: 6 | 1<<48 | 1<<60}, cqp.MinorBadQPType},
		{"CREATE_QP missing CQs", qpWQE(0, 6, ctxPA, sh, 1, fCQNumValid), cqp.MinorObjectNotFound},
		{"CREATE_QP next state RTS", qpWQE(0, 6, ctxPA, sh, 2, 0), cqp.MinorInvalidState},
		{"MODIFY_QP no such QP", qpWQE(1, 6, ctxPA, sh, 4, 0), cqp.MinorObjectNotFound},
		{"DESTROY_QP no such QP", [8]uint64{3: 0x02<<32 | 6 | 3<<48}, cqp.MinorObjectNotFound},
		{"UPLOAD_CONTEXT no such QP", [8]uint64{2: uint64(ctxPA), 3: 0x13<<32 | 6}, cqp.MinorObjectNotFound},
		{"FLUSH_WQES no such QP", [8]uint64{3: 0x22<<32 | 6 | 1<<61}, cqp.MinorObjectNotFound},
		{"DESTROY_CQ no such CQ", [8]uint64{3: 0x05<<32 | 9}, cqp.MinorObjectNotFound},
		{"ALLOC_STAG already valid", [8]uint64{1: 9 << 46, 2: 0x77 << 8, 3: 0x09<<32 | 1<<43}, cqp.MinorSTagValid},
		{"REG_MR page size 3", [8]uint64{2: 0x78 << 8, 3: 0x0a<<32 | 1<<43 | 3<<46}, cqp.MinorBadContext},
		{"REG_MR PBLE out of range", [8]uint64{2: 0x78 << 8, 6: 5000, 3: 0x0a<<32 | 1<<43 | 1<<44}, cqp.MinorPBLERange},
		{"MANAGE_ARP index beyond count", [8]uint64{3: 0x0f<<32 | 100 | 1<<42}, cqp.MinorIndexRange},
		{"CREATE_ADDR_HANDLE index beyond count", [8]uint64{3: 0x1c<<32 | 64}, cqp.MinorIndexRange},
		{"CREATE_MCAST_GRP bad context PA", [8]uint64{4: unmapped, 3: 0x26<<32 | 1}, cqp.MinorPAFault},
		{"CREATE_CEQ size 0", [8]uint64{2: 0, 4: uint64(ring), 3: 0x16<<32 | 2}, cqp.MinorBadSize},
		{"CREATE_CEQ id beyond max", [8]uint64{2: 8, 4: uint64(ring), 3: 0x16<<32 | 1023}, cqp.MinorIndexRange},
		{"CREATE_CEQ bad ring PA", [8]uint64{2: 8, 4: unmapped, 3: 0x16<<32 | 2}, cqp.MinorPAFault},
		{"DESTROY_CEQ no such CEQ", [8]uint64{3: 0x18<<32 | 5}, cqp.MinorObjectNotFound},
		{"CREATE_AEQ while one exists", devtest.CreateAEQ(hostmem.IOVA(ring)), cqp.MinorObjectExists},
		{"QUERY_FPM_VAL bad buffer", [8]uint64{4: unmapped, 3: 0x20 << 32}, cqp.MinorPAFault},
		{"COMMIT_FPM_VAL BUFSIZE 100", [8]uint64{4: uint64(ring), 3: 0x21<<32 | 100}, cqp.MinorBufferTooSmall},
		{"UPDATE_PE_SDS ENTRY_COUNT 9", [8]uint64{0: 1 << 31, 1: 0, 3: 0x1f<<32 | 9}, cqp.MinorBadSize},
		{"UPDATE_PE_SDS SD beyond table", [8]uint64{0: 4000 | 1<<15 | 1<<31, 1: uint64(e.SDs[0].IOVA()) | 512<<2 | 3,
			3: 0x1f << 32}, cqp.MinorIndexRange},
		{"GATHER_STATS bad buffer", [8]uint64{4: unmapped, 3: 0x2e << 32}, cqp.MinorPAFault},
		{"MANAGE_STATS free unallocated", [8]uint64{3: 0x2d<<32 | 100}, cqp.MinorObjectNotFound},
		{"WORK_SCHED_NODE bad op", [8]uint64{3: 0x2c<<32 | 9 | 7<<52}, cqp.MinorBadContext},
		{"QUERY_RDMA_FEATURES BUF_LEN 4", [8]uint64{4: uint64(ring), 3: 0x12<<32 | 4}, cqp.MinorBufferTooSmall},
		{"MANAGE_APBVT on RoCE", [8]uint64{3: 0x23 << 32}, cqp.MinorProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.Exec(tc.w)
			if !c.CCQE {
				t.Fatal("no CCQE")
			}
			wantStatus(t, tc.name, c, 0xffff, tc.minor)
			if c.Tail&regs.CQPTAIL_CQP_OP_ERR == 0 {
				t.Errorf("CQP_OP_ERR clear for a failed WQE")
			}
			if ec := e.Dev.Read32(regs.CQPERRCODES); ec != 0xffff<<16|uint32(tc.minor) {
				t.Errorf("CQPERRCODES %#x", ec)
			}
			good := e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "following good WQE")
			if good.Tail&regs.CQPTAIL_CQP_OP_ERR != 0 || e.Dev.Read32(regs.CQPERRCODES) != 0 {
				t.Errorf("CQP_OP_ERR or CQPERRCODES sticky after a good WQE")
			}
		})
	}
}

// TestBadInputBeforeCommit checks the refusals of a device whose HMC is not
// committed yet, register-polled.
func TestBadInputBeforeCommit(t *testing.T) {
	e := devtest.New(t, devtest.Options{})
	e.CreateCQP()
	for _, w := range [][8]uint64{
		{0: 64, 3: 0x03 << 32},            // CREATE_CQ
		{3: 0x00<<32 | 1 | 3<<48 | 1<<60}, // CREATE_QP
		{3: 0x1f << 32},                   // UPDATE_PE_SDS
		{3: 0x2b << 32},                   // SHMC_PAGES_ALLOCATED
		{3: 0x09<<32 | 1<<43},             // ALLOC_STAG
	} {
		c := e.Exec(w)
		if c.CCQE || !c.Error || c.Major != 0xffff || c.Minor != cqp.MinorHMCNotCommitted {
			t.Errorf("opcode %#x: %+v", w[3]>>32&0x3f, c)
		}
	}
	e.QueryFPM()
	e.CommitFPM()
	e.BackSDs()
	e.MustOK(e.Exec(devtest.SHMCPagesAllocated()), "SHMC after commit")
}

// TestCQPCreateErrors checks CCQPSTATUS ERR with CQPERRCODES for bad CQP
// host contexts, and that a good context then creates the CQP.
func TestCQPCreateErrors(t *testing.T) {
	e := devtest.New(t, devtest.Options{})
	d := e.Dev
	ring := uint64(e.Ring.IOVA())
	cases := []struct {
		name  string
		q0    uint64 // +0
		q1    uint64 // +8 ring base
		q4    uint64 // +32 versions
		pa    uint64
		minor uint16
	}{
		{"ring size encoding 0", 0 << 8, ring, 1 << 16, 0, cqp.MinorBadSize},
		{"ring size encoding 11", 11 << 8, ring, 1 << 16, 0, cqp.MinorBadSize},
		{"ring base unmapped", 5 << 8, 0x2000_0000, 1 << 16, 0, cqp.MinorPAFault},
		{"ring base misaligned", 5 << 8, ring + 64, 1 << 16, 0, cqp.MinorBadAlignment},
		{"HW major 2", 5 << 8, ring, 2 << 16, 0, cqp.MinorBadContext},
		{"protocol 3", 5<<8 | 3<<3, ring, 1 << 16, 0, cqp.MinorBadContext},
		{"context PA unmapped", 5 << 8, ring, 1 << 16, unmapped, cqp.MinorPAFault},
	}
	for _, tc := range cases {
		var b [64]byte
		binary.LittleEndian.PutUint64(b[0:], tc.q0)
		binary.LittleEndian.PutUint64(b[8:], tc.q1)
		binary.LittleEndian.PutUint64(b[32:], tc.q4)
		_ = e.Mem.Write(e.HostCtx.IOVA(), b[:])
		pa := uint64(e.HostCtx.IOVA())
		if tc.pa != 0 {
			pa = tc.pa
		}
		d.Write32(regs.CCQPSTATUS, 0)
		d.Write32(regs.CCQPHIGH, uint32(pa>>32))
		d.Write32(regs.CCQPLOW, uint32(pa))
		st := waitNonZero(t, d, regs.CCQPSTATUS)
		if st != regs.CCQPSTATUS_ERR || d.Read32(regs.CQPERRCODES) != 0xffff<<16|uint32(tc.minor) {
			t.Errorf("%s: CCQPSTATUS %#x CQPERRCODES %#x", tc.name, st, d.Read32(regs.CQPERRCODES))
		}
	}
	e.CreateCQP()
	e.QueryFPM()
	// Destroy: zero in both registers, CCQP_DONE clears.
	d.Write32(regs.CCQPHIGH, 0)
	d.Write32(regs.CCQPLOW, 0)
	for d.Read32(regs.CCQPSTATUS) != 0 {
	}
}

func waitNonZero(t *testing.T, d *device.Device, off regs.Offset) uint32 {
	t.Helper()
	for i := 0; ; i++ {
		if v := d.Read32(off); v != 0 {
			return v
		}
		if i > 50_000_000 {
			t.Fatalf("register %#x stays 0", uint32(off))
		}
	}
}

package uverbs

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Doorbell page layout (docs/hw-datapath.md "User doorbell page"): the page
// libirdma maps with the context's db_mmap_key and stores into with plain
// 32-bit writes.
const (
	// DoorbellSQ is the offset of the SQ doorbell (wqe_alloc_db): libirdma's
	// irdma_uk_qp_post_wr stores the QP id there after writing WQEs.
	DoorbellSQ = 0
	// DoorbellCQ is the offset of the CQ arm doorbell (cqe_alloc_db,
	// IRDMA_DB_CQ_OFFSET): irdma_uk_cq_request_notification stores the CQ
	// id there after updating the CQ shadow area's arm word.
	DoorbellCQ = 64
	// dbMmapKey is the context's db_mmap_key: the doorbell page is the
	// first mmap entry of the ucontext (rdma_user_mmap_entry_insert starts
	// at page offset 0).
	dbMmapKey = 0
)

// doorbellPage stands for the BAR0 page at DB_ADDR_OFFSET that irdma maps
// into a context (irdma_mmap, IRDMA_MMAP_IO_NC). Here it is a page of a
// memfd, mapped by the daemon and, through MMAP, by the program: the
// program's doorbell stores land in memory the data plane polls.
type doorbellPage struct {
	f   *os.File
	mem []byte
}

func newDoorbellPage() (*doorbellPage, error) {
	f, mem, err := newSharedPage("irdma-emu-doorbell")
	if err != nil {
		return nil, err
	}
	return &doorbellPage{f: f, mem: mem}, nil
}

func (p *doorbellPage) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&p.mem[off])) }

// takeSQ returns the last QP id stored in the SQ doorbell and clears it.
func (p *doorbellPage) takeSQ() uint32 { return take(p.word(DoorbellSQ)) }

// takeCQ returns the last CQ id stored in the CQ arm doorbell and clears it.
func (p *doorbellPage) takeCQ() uint32 { return take(p.word(DoorbellCQ)) }

// take swaps a doorbell word with 0, but only reads it when it is 0
// already: a polling worker reads the page often, and a read leaves the
// program's cache line shared where a swap would take it away.
func take(w *uint32) uint32 {
	if atomic.LoadUint32(w) == 0 {
		return 0
	}
	return atomic.SwapUint32(w, 0)
}

// ringCQ stores a CQ id into the arm doorbell, as a program would.
func (p *doorbellPage) ringCQ(id uint32) { atomic.StoreUint32(p.word(DoorbellCQ), id) }

func (p *doorbellPage) close() {
	_ = unix.Munmap(p.mem)
	p.mem = nil
	p.f.Close()
}

// takeUpPosted makes a command take effect after the work the program
// posted before it: on the device the post's doorbell store reaches the
// NIC ahead of the kernel's CQP command for a later verb, and the NIC
// fetches the WQE long before that command runs (emu/qp/intake.go). Every
// QP of the context is asked, since an AH, MR or MW a command ends may be
// named by any of them; the data plane returns at once for a QP with
// nothing posted.
func (s *Session) takeUpPosted() {
	dp := s.p.cfg.DataPlane
	if dp == nil {
		return
	}
	for id := range *s.qpIDs.Load() {
		dp.TakeUpPosted(id)
	}
}

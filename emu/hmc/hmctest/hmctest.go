// Package hmctest builds a committed, backed HMC for tests of the packages
// that keep contexts in HMC memory (emu/mr, emu/ah, emu/cqp, …): it plays
// the driver's part — COMMIT_FPM_VAL with chosen counts, then one
// UPDATE_PE_SDS per SD — the short way.
package hmctest

import (
	"encoding/binary"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Options select the committed counts and how SDs are backed.
type Options struct {
	// Counts overrides DefaultCounts for the types whose entry is non-zero.
	Counts [hmc.NumObjTypes]uint32
	// Paged backs every SD with a PD page instead of a direct 2 MB page.
	// The 512 PD entries point at the pages of one 2 MB region in reverse
	// order, so paged lookups that ignore the PD entry show up as wrong
	// addresses.
	Paged bool
	// Profile defaults to profile.GEN2().
	Profile *profile.Profile
}

// DefaultCounts are small counts for unit tests.
var DefaultCounts = [hmc.NumObjTypes]uint32{
	hmc.QP: 64, hmc.CQ: 128, hmc.ARP: 64, hmc.MR: 256, hmc.FSIMC: 16,
	hmc.FSIAV: 64, hmc.PBLE: 4096,
}

// Env is a committed HMC with every SD valid.
type Env struct {
	Mem     *hostmem.Memory
	HMC     *hmc.HMC
	Profile profile.Profile
	// Backing holds the 2 MB region behind each SD (direct or paged).
	Backing []*hostmem.Region
	// PDPages holds the PD page of each SD when Paged.
	PDPages []*hostmem.Region
}

// CommitBuffer returns a 208-byte COMMIT_FPM_VAL buffer with the counts at
// the docs/hw-controlpath.md "COMMIT_FPM_VAL buffer" offsets (what
// ctrl.c:irdma_sc_cfg_iw_fpm writes; APBVT and +120 stay 0).
func CommitBuffer(counts [hmc.NumObjTypes]uint32) []byte {
	buf := make([]byte, 208)
	for t := hmc.ObjType(0); t < hmc.NumObjTypes; t++ {
		if t == hmc.APBVT {
			continue
		}
		binary.LittleEndian.PutUint64(buf[hmc.CommitSlot(t):], uint64(counts[t]))
	}
	return buf
}

// New builds an Env; it fails tb on any error.
func New(tb testing.TB, opt Options) *Env {
	tb.Helper()
	p := profile.GEN2()
	if opt.Profile != nil {
		p = *opt.Profile
	}
	mem := hostmem.New()
	tb.Cleanup(func() { mem.Close() })
	h := hmc.New(mem, p)
	counts := DefaultCounts
	for t, c := range opt.Counts {
		if c != 0 {
			counts[t] = c
		}
	}
	if err := h.Commit(CommitBuffer(counts)); err != nil {
		tb.Fatalf("hmctest: Commit: %v", err)
	}
	e := &Env{Mem: mem, HMC: h, Profile: p}
	for sd := uint32(0); sd < h.SDCount(); sd++ {
		bp, err := mem.Alloc(hmc.DirectBPSize, hmc.DirectBPSize, "hmctest-sd")
		if err != nil {
			tb.Fatalf("hmctest: Alloc SD %d: %v", sd, err)
		}
		e.Backing = append(e.Backing, bp)
		entry := hmc.SDEntry{Index: sd, Write: true, PartSel: true, Valid: true,
			Type: hmc.SDDirect, PA: bp.IOVA(), BPCount: hmc.PDEntriesPerSD}
		if opt.Paged {
			pdp, err := mem.Alloc(hmc.PagedBPSize, 0, "hmctest-pd")
			if err != nil {
				tb.Fatalf("hmctest: Alloc PD page %d: %v", sd, err)
			}
			e.PDPages = append(e.PDPages, pdp)
			for i := uint64(0); i < hmc.PDEntriesPerSD; i++ {
				page := uint64(bp.IOVA()) + (hmc.PDEntriesPerSD-1-i)*hmc.PagedBPSize
				if err := mem.Store64(pdp.IOVA()+hostmem.IOVA(8*i), page|1); err != nil {
					tb.Fatalf("hmctest: PD entry: %v", err)
				}
			}
			entry.Type = hmc.SDPaged
			entry.PA = pdp.IOVA()
		}
		if err := h.SetSD(entry); err != nil {
			tb.Fatalf("hmctest: SetSD %d: %v", sd, err)
		}
	}
	return e
}

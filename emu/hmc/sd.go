package hmc

import (
	"fmt"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// SDType is the segment descriptor type (hmc.h enum irdma_sd_entry_type).
type SDType uint8

// SD types. On the wire PMSDTYPE is one bit: 0 paged, 1 direct.
const (
	SDInvalid SDType = 0 // IRDMA_SD_TYPE_INVALID
	SDPaged   SDType = 1 // IRDMA_SD_TYPE_PAGED: a 4 KB PD page of 512 PD entries
	SDDirect  SDType = 2 // IRDMA_SD_TYPE_DIRECT: one 2 MB backing page
)

func (t SDType) String() string {
	switch t {
	case SDInvalid:
		return "invalid"
	case SDPaged:
		return "paged"
	case SDDirect:
		return "direct"
	}
	return fmt.Sprintf("SDType(%d)", uint8(t))
}

// Fields of an UPDATE_PE_SDS entry (docs/hw-controlpath.md "UPDATE_PE_SDS";
// hmc.c:irdma_set_sd_entry / irdma_clr_sd_entry; defs.h IRDMA_PFHMC_*).
const (
	sdCmdIndexMask = 0xfff   // PMSDIDX [11:0] (the driver ORs the raw index)
	sdCmdPartSel   = 1 << 15 // PMSDPARTSEL
	sdCmdWrite     = 1 << 31 // PMSDWR
	sdDataValid    = 1 << 0  // PMSDVALID
	sdDataDirect   = 1 << 1  // PMSDTYPE: 1 direct, 0 paged
	sdDataBPShift  = 2       // PMSDBPCOUNT [11:2]
	sdDataBPMask   = 0x3ff
	sdDataAddrMask = ^uint64(0xfff) // PMSDDATALOW [31:12] and the high dword

	pdEntryValid    = 1 // PD entry: backing-page address | 1 (hmc.c:irdma_add_pd_table_entry)
	pdEntryAddrMask = ^uint64(0xfff)
)

// SDEntry is one decoded UPDATE_PE_SDS entry: the {cmd, data} pair of
// qw0/qw1, qw4/qw5, qw6/qw7 or of the overflow buffer.
type SDEntry struct {
	Index   uint32       // SD index, PMSDIDX [11:0]
	PartSel bool         // PMSDPARTSEL (bit 15; always set by irdma)
	Write   bool         // PMSDWR (bit 31; always set by irdma)
	Valid   bool         // PMSDVALID: set (true) or clear (false) the SD
	Type    SDType       // SDDirect or SDPaged (PMSDTYPE)
	PA      hostmem.IOVA // backing page (direct) or PD page (paged); bits [63:12]
	BPCount uint32       // PMSDBPCOUNT [11:2]: backing pages, 512 from irdma
}

// DecodeSDEntry decodes an UPDATE_PE_SDS entry. cmd is the SDCMD word (the
// caller strips ENTRY_VALID b63 of entries 1 and 2 or not; it is ignored).
func DecodeSDEntry(cmd, data uint64) SDEntry {
	e := SDEntry{
		Index:   uint32(cmd & sdCmdIndexMask),
		PartSel: cmd&sdCmdPartSel != 0,
		Write:   cmd&sdCmdWrite != 0,
		Valid:   data&sdDataValid != 0,
		Type:    SDPaged,
		PA:      hostmem.IOVA(data & sdDataAddrMask),
		BPCount: uint32(data >> sdDataBPShift & sdDataBPMask),
	}
	if data&sdDataDirect != 0 {
		e.Type = SDDirect
	}
	return e
}

// word is the SD table representation: the PMSDDATA word, 0 when invalid.
func (e SDEntry) word() uint64 {
	if !e.Valid {
		return 0
	}
	w := uint64(e.PA)&sdDataAddrMask | uint64(e.BPCount&sdDataBPMask)<<sdDataBPShift | sdDataValid
	if e.Type == SDDirect {
		w |= sdDataDirect
	}
	return w
}

func entryFromWord(idx uint32, w uint64) SDEntry {
	if w&sdDataValid == 0 {
		return SDEntry{Index: idx, Type: SDInvalid}
	}
	e := DecodeSDEntry(uint64(idx)|sdCmdWrite|sdCmdPartSel, w)
	return e
}

// SetSD programs one SD table entry (UPDATE_PE_SDS). A valid entry must
// carry PMSDWR, an SD index below SDCount, a non-zero address and, for a
// paged SD, a backing-page count of 1..512; the memory it points at (2 MB
// for direct, the 4 KB PD page for paged) must be mapped. A clear entry
// (Valid false) invalidates the SD. The hardware would accept a bad address
// and fault later; rejecting it here gives the CQP a clean error instead.
func (h *HMC) SetSD(e SDEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.st.Load()
	if l == nil {
		return &Error{Op: "SetSD", Err: ErrNotCommitted, SD: e.Index}
	}
	if !e.Write {
		return &Error{Op: "SetSD", Err: ErrSDEntry, SD: e.Index, Cause: fmt.Errorf("PMSDWR clear")}
	}
	if e.Index >= uint32(len(l.sds)) {
		return &Error{Op: "SetSD", Err: ErrSDIndex, SD: e.Index}
	}
	if !e.Valid {
		l.sds[e.Index].Store(0)
		return nil
	}
	var span uint64
	switch e.Type {
	case SDDirect:
		span = DirectBPSize
	case SDPaged:
		span = PagedBPSize
		if e.BPCount == 0 || e.BPCount > PDEntriesPerSD {
			return &Error{Op: "SetSD", Err: ErrSDEntry, SD: e.Index,
				Cause: fmt.Errorf("backing-page count %d", e.BPCount)}
		}
	default:
		return &Error{Op: "SetSD", Err: ErrSDEntry, SD: e.Index, Cause: fmt.Errorf("type %v", e.Type)}
	}
	if e.PA == 0 || uint64(e.PA)&^sdDataAddrMask != 0 {
		return &Error{Op: "SetSD", Err: ErrSDEntry, SD: e.Index,
			Cause: fmt.Errorf("address %#x", uint64(e.PA))}
	}
	if !h.mapped(e.PA, span) {
		return &Error{Op: "SetSD", Err: ErrSDBacking, SD: e.Index,
			Cause: fmt.Errorf("%v SD at %#x (%d bytes)", e.Type, uint64(e.PA), span)}
	}
	l.sds[e.Index].Store(e.word())
	return nil
}

// mapped reports whether [iova, iova+n) lies in one region.
func (h *HMC) mapped(iova hostmem.IOVA, n uint64) bool {
	r, ok := h.mem.Lookup(iova)
	if !ok {
		return false
	}
	end := uint64(iova) + n
	return end > uint64(iova) && end <= uint64(r.End())
}

// SD returns SD table entry idx as last programmed (Type SDInvalid when
// clear), and false if idx is beyond the table or nothing is committed.
func (h *HMC) SD(idx uint32) (SDEntry, bool) {
	l := h.st.Load()
	if l == nil || idx >= uint32(len(l.sds)) {
		return SDEntry{}, false
	}
	return entryFromWord(idx, l.sds[idx].Load()), true
}

// PFHMC_PDINV fields (defs.h IRDMA_PFHMC_PDINV_*).
const (
	pdInvSDMask  = 0xfff // PMSDIDX [11:0]
	pdInvPDShift = 16    // PMPDIDX [24:16]
	pdInvPDMask  = 0x1ff
)

// InvalidatePD handles a write of v to PFHMC_PDINV, which the driver issues
// after it writes or clears a PD entry (hmc.c:irdma_add_pd_table_entry,
// irdma_remove_pd_bp). This device keeps no PD cache: ObjectIOVA reads the
// PD entry from the PD page in host memory on every lookup, so a changed
// entry is seen at once and the invalidation has nothing to drop. It is
// counted (PDInvalidations) for tests and statistics. A driver that forgets
// PFHMC_PDINV is therefore not caught; hardware would use a stale entry.
func (h *HMC) InvalidatePD(v uint32) {
	h.pdInv.Add(1)
}

// DecodePDInv splits a PFHMC_PDINV value into the SD index (PMSDIDX
// [11:0]) and the PD index within the SD (PMPDIDX [24:16]).
func DecodePDInv(v uint32) (sd, pd uint32) {
	return v & pdInvSDMask, v >> pdInvPDShift & pdInvPDMask
}

// PDInvalidations returns the number of PFHMC_PDINV writes seen.
func (h *HMC) PDInvalidations() uint64 { return h.pdInv.Load() }

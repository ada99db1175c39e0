package mr

import (
	"fmt"
	"strings"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Access is a set of access rights. The low five bits are the ARIGHTS /
// STAGRIGHTS field of REG_MR, ALLOC_STAG, FAST_REG and BIND_MW (user.h
// IRDMA_ACCESS_FLAGS_*; docs/hw-controlpath.md "Access rights",
// docs/hw-datapath.md "Memory and NOP WQEs"). AccessRemoteAtomic is ours: on
// the wire it is REMOTE_ATOMIC_EN (REG_MR b61 on GEN_3, BIND_MW and FAST_REG
// REMOTE_ATOMICS_EN), not an ARIGHTS bit; 0x20 is the driver's ZERO_BASED
// flag, which never reaches the hardware as a right.
type Access uint8

// Access rights.
const (
	AccessLocalRead    Access = 0x01 // LOCALREAD (always set by the driver)
	AccessLocalWrite   Access = 0x02 // LOCALWRITE
	AccessRemoteRead   Access = 0x04 // REMOTEREAD (the driver sends 0x05)
	AccessRemoteWrite  Access = 0x08 // REMOTEWRITE (the driver sends 0x0a)
	AccessBind         Access = 0x10 // BIND_WINDOW
	AccessRemoteAtomic Access = 0x40 // REMOTE_ATOMIC_EN (not an ARIGHTS bit)

	// AccessRemote is every right a remote peer can use.
	AccessRemote = AccessRemoteRead | AccessRemoteWrite | AccessRemoteAtomic
	// ARightsMask is the 5-bit ARIGHTS/STAGRIGHTS field.
	ARightsMask Access = 0x1f
)

var accessNames = []struct {
	a Access
	s string
}{
	{AccessLocalRead, "LR"}, {AccessLocalWrite, "LW"}, {AccessRemoteRead, "RR"},
	{AccessRemoteWrite, "RW"}, {AccessBind, "BIND"}, {AccessRemoteAtomic, "RA"},
}

func (a Access) String() string {
	var parts []string
	for _, n := range accessNames {
		if a&n.a != 0 {
			parts = append(parts, n.s)
			a &^= n.a
		}
	}
	if a != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint8(a)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// validRights reports whether the rights are consistent: remote write and
// remote atomic need local write (IBA 10.6.3.1; ib_check_mr_access). The
// driver always sends LOCALWRITE with REMOTEWRITE (0x0a).
func validRights(a Access) bool {
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return false
	}
	return true
}

// PageSize is the HPAGESIZE encoding of REG_MR, ALLOC_STAG and FAST_REG
// (enum irdma_page_size; docs/hw-controlpath.md "STag WQEs").
type PageSize uint8

// Page sizes; 3 is reserved.
const (
	PageSize4K PageSize = 0
	PageSize2M PageSize = 1
	PageSize1G PageSize = 2
)

// Valid reports whether p is 4 KB, 2 MB or 1 GB.
func (p PageSize) Valid() bool { return p <= PageSize1G }

// Shift returns log2 of the page size (0 for a reserved encoding).
func (p PageSize) Shift() uint {
	switch p {
	case PageSize4K:
		return 12
	case PageSize2M:
		return 21
	case PageSize1G:
		return 30
	}
	return 0
}

// Bytes returns the page size in bytes (0 for a reserved encoding).
func (p PageSize) Bytes() uint64 {
	if !p.Valid() {
		return 0
	}
	return 1 << p.Shift()
}

func (p PageSize) String() string {
	switch p {
	case PageSize4K:
		return "4K"
	case PageSize2M:
		return "2M"
	case PageSize1G:
		return "1G"
	}
	return fmt.Sprintf("PageSize(%d)", uint8(p))
}

// PBLLevel is how a region's pages are found (docs/hw-controlpath.md "PBLEs").
type PBLLevel uint8

// PBL levels.
const (
	// Level0: no PBL; the region is contiguous from one bus address
	// (REG_MR reg_addr_pa, FAST_REG PBLADDR).
	Level0 PBLLevel = 0
	// Level1: consecutive PBLEs from the first index hold page addresses.
	Level1 PBLLevel = 1
	// Level2: root PBLEs hold PBLE indexes of leaves of up to 512 page
	// addresses (pble.c:get_lvl2_pble).
	Level2 PBLLevel = 2
)

// LevelFromLPBLSize decodes the LPBLSIZE field: 0 no PBL, 1 level 1, 3 level
// 2 (verbs.c:irdma_hwreg_mr; docs/hw-controlpath.md "What the driver leaves
// open"). 2 is not used by the driver and is rejected.
func LevelFromLPBLSize(v uint8) (PBLLevel, bool) {
	switch v {
	case 0:
		return Level0, true
	case 1:
		return Level1, true
	case 3:
		return Level2, true
	}
	return 0, false
}

// pblePerLeaf is the number of PBLEs in a level-2 leaf (PBLE_PER_PAGE).
const pblePerLeaf = 512

// Type is what an STag names.
type Type uint8

// STag types.
const (
	TypeMR  Type = 0 // memory region
	TypeMW1 Type = 1 // type-1 memory window (MWTYPE 1)
	TypeMW2 Type = 2 // type-2 memory window
)

func (t Type) String() string {
	switch t {
	case TypeMR:
		return "MR"
	case TypeMW1:
		return "MW1"
	case TypeMW2:
		return "MW2"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// State is the state of an STag table entry.
type State uint8

// STag states.
const (
	// StateFree: not allocated (never, or deallocated).
	StateFree State = 0
	// StateInvalid: allocated but unusable — a fast-register MR before
	// FAST_REG or after invalidation, an unbound memory window.
	StateInvalid State = 1
	// StateValid: usable for access.
	StateValid State = 2
)

func (s State) String() string {
	switch s {
	case StateFree:
		return "free"
	case StateInvalid:
		return "invalid"
	case StateValid:
		return "valid"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Span is a piece of a translated range: Len bytes at bus address IOVA.
type Span struct {
	IOVA hostmem.IOVA
	Len  uint64
}

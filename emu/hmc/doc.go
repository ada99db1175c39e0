// Package hmc is the device's host memory cache (HMC): the object counts and
// sizes it reports in QUERY_FPM_VAL, the flat FPM address space it lays out
// on COMMIT_FPM_VAL, and the segment-descriptor / page-descriptor tables
// (UPDATE_PE_SDS, PFHMC_PDINV) through which every object resolves to host
// memory (docs/hw-controlpath.md "QUERY_FPM_VAL buffer", "COMMIT_FPM_VAL
// buffer", "SD and PD backing"; our choices in docs/hmc.md).
//
// # FPM choices
//
// The counts and object sizes are firmware data the driver cannot know;
// GEN2Query holds ours and docs/hmc.md explains every value, together with
// what the driver's count selection (ctrl.c:irdma_cfg_fpm_val) commits from
// them. The device model keeps its contexts in HMC backing memory, as the
// hardware does: QP contexts in QP objects, CQ contexts in CQ objects, the
// MR/MW records of emu/mr in MR objects, ARP/AH/multicast entries of
// emu/ah in ARP/FSIAV/FSIMC objects, PBLEs in PBLE objects. Objects the
// firmware uses internally (XF, Q1, timers, hash table, …) are kept in Go
// instead and reported with the smallest size, so the driver backs them
// with little memory.
//
// # Layout
//
// Commit places the object types one after another in FPM space, each base
// aligned to the object size (at least 512 bytes, the unit of the committed
// base), APBVT first and PBLEs last at a 4 KB boundary; zero-count types
// get base 0. Because sizes are powers of two, an object of up to 4 KB
// never crosses a 4 KB backing page and the 8 KB APBVT entry never crosses
// a 2 MB SD. The SD table has one entry per 2 MB of the layout, the number
// the driver computes from the object with the highest base.
//
// # Lookup
//
// ObjectIOVA maps (type, index) → FPM address → SD → (PD) → IOVA on the
// data path without locks: the layout is immutable behind an atomic
// pointer and each SD is an atomic word. PD entries are not cached: they
// are read from the driver's PD page on every lookup, so PFHMC_PDINV
// (InvalidatePD) has nothing to invalidate and is only counted.
//
// Errors are *Error values wrapping a sentinel (ErrIndex, ErrSDInvalid, …)
// and, for host-memory faults, the hostmem.FaultError. Nothing panics,
// whatever the buffer or entry contents.
package hmc

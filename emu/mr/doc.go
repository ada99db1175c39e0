// Package mr is the device's memory registration: the STag table of MRs and
// memory windows, and the translation of an (STag, address, length) into
// host-memory spans that the data path reads and writes
// (docs/hw-controlpath.md "STag WQEs" to "PBLEs"; docs/hw-datapath.md "Memory
// and NOP WQEs", "AE to flush code").
//
// # STags
//
// An STag is a 24-bit index and an 8-bit key. The driver fills the top bits
// of the index with a random "driver key" and keeps max(ceil(log2(MR count)),
// 14) bits for the table index (hw.c:irdma_initialize_hw_rsrc). The device
// selects the entry with those low bits (IndexBits) and keeps the full 24-bit
// index and the key in the record, so the whole 32-bit STag must match
// (docs/hw-controlpath.md "What the driver leaves open"): different
// driver-key bits are reported as a key mismatch, like the 8-bit key. Index 0
// is never valid (the driver reserves it).
//
// # Records
//
// Each entry is a Record: state (free, invalid, valid), type (MR, type-1
// or type-2 window), PD, addressing (VA-based or zero-based), address,
// length, rights, page size, PBL level with the first PBLE index or the
// bus address of the first page, bound-window count, parent MR and bound
// QP of a window. The record is serialized into the entry's HMC MR object
// (Record.Encode documents the 64-byte layout), so contexts live in HMC
// memory as on hardware; the table keeps the decoded record behind an
// atomic pointer per entry as the device's context cache. Records are
// immutable: a change publishes a new one, after its HMC write succeeded.
//
// # Operations
//
// AllocSTag, RegisterNonShared and Dealloc are the CQP's ALLOC_STAG,
// REG_MR and DEALLOC_STAG; they fail with an *Error whose Reason the CQP
// maps to completion codes. FastRegister, Invalidate and BindMW are the SQ
// WQEs FAST_REG, LOCAL_INV (and the invalidations of SEND_WITH_INV and
// READ_WITH_INV) and BIND_MW; their errors also carry the AE the hardware
// raises. Every change is serialised by one mutex.
//
// Translate is the data path: lock-free, allocation-free, with every check
// the hardware makes (see its documentation for the order and the AE of
// each). PBLEs are read from the HMC PBLE object at each translation:
// level 1 from consecutive PBLEs, level 2 through root PBLEs that hold the
// PBLE index of a leaf of up to 512 entries (pble.c:get_lvl2_pble).
package mr

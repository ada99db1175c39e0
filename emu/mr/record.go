package mr

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// Record is one STag table entry: an MR or a memory window. Records are
// immutable once published; every change publishes a new one.
type Record struct {
	STag         uint32 // 24-bit STag index (driver-key bits included) << 8 | 8-bit key
	State        State
	Type         Type
	PD           uint32
	VABased      bool   // VA-based (true) or zero-based (false) addressing
	FastReg      bool   // allocated by ALLOC_STAG, so FAST_REG may (re)define it
	RemoteAccess bool   // REMACCENABLED: the remote rights are in force
	Access       Access // rights; for windows only the remote bits matter
	// VA is the first byte's address: the region's VA when VA-based, 0 when
	// zero-based. For a window it is the window's first byte in the parent
	// MR's address space, whatever the window's own addressing.
	VA        uint64
	FBO       uint64 // offset of the first byte in the first page (MRs)
	Length    uint64
	MaxLength uint64 // ALLOC_STAG length: what FAST_REG may map (0 for REG_MR regions)
	PageSize  PageSize
	Level     PBLLevel
	// Addr is the bus address of the first page (Level0) or the index of
	// the first PBLE (Level1: the page list; Level2: the root).
	Addr     uint64
	BoundMWs uint32 // windows bound to this MR
	Parent   uint32 // window: the parent MR's STag
	QP       uint32 // type-2 window: the QP it is bound to
	// MW1BindDontValidateKey is ALLOC_STAG MW1_BIND_DONT_VLDT_KEY.
	MW1BindDontValidateKey bool
}

// Index returns the 24-bit STag index (STag >> 8).
func (r *Record) Index() uint32 { return r.STag >> 8 }

// access returns the rights in force: an MR's remote read and write count
// only when REMACCENABLED is set. The remote-atomic right has its own
// enable (REMOTE_ATOMIC_EN, GEN_3) and stands without it: the driver
// derives REMACCENABLED from the read and write rights alone
// (ctrl.c:irdma_sc_mr_reg_non_shared), so an MR registered LOCAL_WRITE |
// REMOTE_ATOMIC, as rdma-core's test_atomic does, carries REMOTE_ATOMIC_EN
// with REMACCENABLED clear.
func (r *Record) access() Access {
	if r.Type == TypeMR && !r.RemoteAccess {
		return r.Access &^ (AccessRemoteRead | AccessRemoteWrite)
	}
	return r.Access
}

// HMC MR object layout (our own; the MR object size is 64 bytes, see
// docs/hmc.md). Little-endian:
//
//	+0  u32 STag (index << 8 | key)
//	+4  u8  state (0 free, 1 invalid, 2 valid)
//	+5  u8  type (0 MR, 1 MW type 1, 2 MW type 2)
//	+6  u8  flags: b0 VA-based, b1 remote access enabled, b2 fast-register,
//	        b3 MW1 bind-don't-validate-key
//	+7  u8  access rights (Access)
//	+8  u32 PD
//	+12 u8  page size (HPAGESIZE encoding)
//	+13 u8  PBL level (0, 1, 2)
//	+14 u16 0
//	+16 u64 VA
//	+24 u64 length
//	+32 u64 level 0: bus address of the first page; 1/2: first PBLE index
//	+40 u32 first-byte offset
//	+44 u32 bound window count
//	+48 u32 parent MR STag (windows)
//	+52 u32 bound QP (type-2 windows)
//	+56 u64 fast-register capacity (ALLOC_STAG length)
const (
	// RecordSize is the size of the serialized record.
	RecordSize = 64

	flagVABased      = 1 << 0
	flagRemoteAccess = 1 << 1
	flagFastReg      = 1 << 2
	flagMW1NoKey     = 1 << 3
)

// Encode serializes r into b (RecordSize bytes).
func (r *Record) Encode(b []byte) {
	_ = b[RecordSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], r.STag)
	b[4] = byte(r.State)
	b[5] = byte(r.Type)
	var f byte
	if r.VABased {
		f |= flagVABased
	}
	if r.RemoteAccess {
		f |= flagRemoteAccess
	}
	if r.FastReg {
		f |= flagFastReg
	}
	if r.MW1BindDontValidateKey {
		f |= flagMW1NoKey
	}
	b[6] = f
	b[7] = byte(r.Access)
	le.PutUint32(b[8:], r.PD)
	b[12] = byte(r.PageSize)
	b[13] = byte(r.Level)
	le.PutUint16(b[14:], 0)
	le.PutUint64(b[16:], r.VA)
	le.PutUint64(b[24:], r.Length)
	le.PutUint64(b[32:], r.Addr)
	le.PutUint32(b[40:], uint32(r.FBO))
	le.PutUint32(b[44:], r.BoundMWs)
	le.PutUint32(b[48:], r.Parent)
	le.PutUint32(b[52:], r.QP)
	le.PutUint64(b[56:], r.MaxLength)
}

// DecodeRecord parses a serialized record (RecordSize bytes).
func DecodeRecord(b []byte) Record {
	_ = b[RecordSize-1]
	le := binary.LittleEndian
	f := b[6]
	return Record{
		STag:                   le.Uint32(b[0:]),
		State:                  State(b[4]),
		Type:                   Type(b[5]),
		VABased:                f&flagVABased != 0,
		RemoteAccess:           f&flagRemoteAccess != 0,
		FastReg:                f&flagFastReg != 0,
		MW1BindDontValidateKey: f&flagMW1NoKey != 0,
		Access:                 Access(b[7]),
		PD:                     le.Uint32(b[8:]),
		PageSize:               PageSize(b[12]),
		Level:                  PBLLevel(b[13]),
		VA:                     le.Uint64(b[16:]),
		Length:                 le.Uint64(b[24:]),
		Addr:                   le.Uint64(b[32:]),
		FBO:                    uint64(le.Uint32(b[40:])),
		BoundMWs:               le.Uint32(b[44:]),
		Parent:                 le.Uint32(b[48:]),
		QP:                     le.Uint32(b[52:]),
		MaxLength:              le.Uint64(b[56:]),
	}
}

// iova is a helper for Level0 addresses.
func (r *Record) iova(off uint64) hostmem.IOVA { return hostmem.IOVA(r.Addr + off) }

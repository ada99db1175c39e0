package client

import (
	"fmt"
	"syscall"
)

// AccessFlags are ibv_access_flags.
type AccessFlags uint32

const (
	AccessLocalWrite   AccessFlags = 1
	AccessRemoteWrite  AccessFlags = 2
	AccessRemoteRead   AccessFlags = 4
	AccessRemoteAtomic AccessFlags = 8
	AccessMWBind       AccessFlags = 16
	AccessZeroBased    AccessFlags = 32
)

// MTU is enum ibv_mtu: 1 = 256 bytes … 5 = 4096 bytes.
type MTU uint8

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes (0 for an invalid value).
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes is pp_mtu_to_enum: 256, 512, 1024, 2048 or 4096, else 0.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
	id     uint32 // irdma pd_id
}

// AllocPD is ibv_alloc_pd: ALLOC_PD with irdma's alloc_pd response.
func (c *Context) AllocPD() (*PD, error) {
	var core wbuf
	core.u64(c.respAddr())
	n := allocPDRespSize + irdmaAllocPDRespSize
	r, err := c.run(legacyCmd(cmdAllocPD, core, nil, n), n)
	if err != nil {
		return nil, err
	}
	return &PD{ctx: c, handle: r.u32(0), id: r.u32(4)}, nil
}

// Handle is the uverbs handle; ID is irdma's PD number.
func (p *PD) Handle() uint32 { return p.handle }

// ID is irdma's pd_id.
func (p *PD) ID() uint32 { return p.id }

// Dealloc is ibv_dealloc_pd.
func (p *PD) Dealloc() error {
	var core wbuf
	core.u32(p.handle)
	_, err := p.ctx.run(legacyCmd(cmdDeallocPD, core, nil, 0), 0)
	return err
}

// MR is a registered memory region.
type MR struct {
	pd     *PD
	handle uint32
	LKey   uint32
	RKey   uint32
	Addr   uint64 // start of the region: the VA WQEs and peers use
	Length uint64
	Access AccessFlags
	Buf    []byte // the registered bytes (nil for ring registrations)
}

// RegMR is ibv_reg_mr on memory from Context.AllocBuffer (any sub-slice of
// it): REG_MR with irdma's reg_type MEM, hca_va = the buffer's address.
// Memory the daemon was not handed cannot be registered (EFAULT, as the
// kernel answers an address it cannot pin).
func (p *PD) RegMR(buf []byte, access AccessFlags) (*MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("client: REG_MR of an empty buffer: %w", syscall.EINVAL)
	}
	addr := addrOf(buf)
	if !p.ctx.arena.contains(addr, uint64(len(buf))) {
		return nil, fmt.Errorf("client: REG_MR of %#x+%d: not memory from AllocBuffer: %w", addr, len(buf), syscall.EFAULT)
	}
	m, err := p.regMR(addr, uint64(len(buf)), access, memRegMem, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	m.Buf = buf
	return m, nil
}

// regMR sends REG_MR with irdma_mem_reg_req.
func (p *PD) regMR(addr, length uint64, access AccessFlags, regType, cqPages, rqPages, sqPages uint16) (*MR, error) {
	var core, udata wbuf
	core.u64(p.ctx.respAddr())
	core.u64(addr)
	core.u64(length)
	core.u64(addr) // hca_va
	core.u32(p.handle)
	core.u32(uint32(access))
	udata.u16(regType)
	udata.u16(cqPages)
	udata.u16(rqPages)
	udata.u16(sqPages)
	r, err := p.ctx.run(legacyCmd(cmdRegMR, core, udata, regMRRespSize), regMRRespSize)
	if err != nil {
		return nil, err
	}
	return &MR{pd: p, handle: r.u32(0), LKey: r.u32(4), RKey: r.u32(8), Addr: addr, Length: length, Access: access}, nil
}

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error {
	var core wbuf
	core.u32(m.handle)
	_, err := m.pd.ctx.run(legacyCmd(cmdDeregMR, core, nil, 0), 0)
	return err
}

// SGE returns the scatter/gather element of n bytes at offset off of the
// region.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.Addr + uint64(off), Length: uint32(n), LKey: m.LKey}
}

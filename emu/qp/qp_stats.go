package qp

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// HWStat indexes the hardware counters, in the order of irdma's enum
// irdma_hw_stats_index (GEN_2 subset: IRDMA_HW_STAT_INDEX_MAX_GEN_2).
type HWStat uint8

const (
	StatRxVLANErr HWStat = iota
	StatIP4RxOcts
	StatIP4RxPkts
	StatIP4RxDiscard
	StatIP4RxTrunc
	StatIP4RxFrags
	StatIP4RxMcOcts
	StatIP4RxMcPkts
	StatIP6RxOcts
	StatIP6RxPkts
	StatIP6RxDiscard
	StatIP6RxTrunc
	StatIP6RxFrags
	StatIP6RxMcOcts
	StatIP6RxMcPkts
	StatIP4TxOcts
	StatIP4TxPkts
	StatIP4TxFrags
	StatIP4TxMcOcts
	StatIP4TxMcPkts
	StatIP6TxOcts
	StatIP6TxPkts
	StatIP6TxFrags
	StatIP6TxMcOcts
	StatIP6TxMcPkts
	StatIP4TxNoRoute
	StatIP6TxNoRoute
	StatTCPRxSegs
	StatTCPRxOptErr
	StatTCPRxProtoErr
	StatTCPTxSeg
	StatTCPRtxSeg
	StatUDPRxPkts
	StatUDPTxPkts
	StatRDMARxWrs
	StatRDMARxRds
	StatRDMARxSnds
	StatRDMATxWrs
	StatRDMATxRds
	StatRDMATxSnds
	StatRDMAVBnd
	StatRDMAVInv
	StatRxNPECNMarkedPkts
	StatRxRPCNPIgnored
	StatRxRPCNPHandled
	StatTxNPCNPSent
	NumHWStats
)

// StatSlot places a counter in the GATHER_STATS buffer: byte offset of
// its qword, bit shift in it, and width in bits.
type StatSlot struct {
	Offset uint16
	Shift  uint8
	Bits   uint8
}

// GEN2StatMap is icrdma_hw_stat_map (icrdma_hw.c): where the GEN_2
// hardware writes each counter into the 1024-byte GATHER_STATS buffer; the
// driver reads (qword >> shift) & mask(bits) (irdma_update_stats).
var GEN2StatMap = [NumHWStats]StatSlot{
	StatRxVLANErr: {0, 32, 24}, StatIP4RxOcts: {8, 0, 48}, StatIP4RxPkts: {16, 0, 48},
	StatIP4RxDiscard: {24, 32, 32}, StatIP4RxTrunc: {24, 0, 32}, StatIP4RxFrags: {32, 0, 48},
	StatIP4RxMcOcts: {40, 0, 48}, StatIP4RxMcPkts: {48, 0, 48}, StatIP6RxOcts: {56, 0, 48},
	StatIP6RxPkts: {64, 0, 48}, StatIP6RxDiscard: {72, 32, 32}, StatIP6RxTrunc: {72, 0, 32},
	StatIP6RxFrags: {80, 0, 48}, StatIP6RxMcOcts: {88, 0, 48}, StatIP6RxMcPkts: {96, 0, 48},
	StatIP4TxOcts: {104, 0, 48}, StatIP4TxPkts: {112, 0, 48}, StatIP4TxFrags: {120, 0, 48},
	StatIP4TxMcOcts: {128, 0, 48}, StatIP4TxMcPkts: {136, 0, 48}, StatIP6TxOcts: {144, 0, 48},
	StatIP6TxPkts: {152, 0, 48}, StatIP6TxFrags: {160, 0, 48}, StatIP6TxMcOcts: {168, 0, 48},
	StatIP6TxMcPkts: {176, 0, 48}, StatIP4TxNoRoute: {184, 32, 24}, StatIP6TxNoRoute: {184, 0, 24},
	StatTCPRxSegs: {192, 32, 48}, StatTCPRxOptErr: {200, 32, 24}, StatTCPRxProtoErr: {200, 0, 24},
	StatTCPTxSeg: {208, 0, 48}, StatTCPRtxSeg: {216, 32, 32}, StatUDPRxPkts: {224, 0, 48},
	StatUDPTxPkts: {232, 0, 48}, StatRDMARxWrs: {240, 0, 48}, StatRDMARxRds: {248, 0, 48},
	StatRDMARxSnds: {256, 0, 48}, StatRDMATxWrs: {264, 0, 48}, StatRDMATxRds: {272, 0, 48},
	StatRDMATxSnds: {280, 0, 48}, StatRDMAVBnd: {288, 0, 48}, StatRDMAVInv: {296, 0, 48},
	StatRxNPECNMarkedPkts: {304, 0, 48}, StatRxRPCNPIgnored: {312, 32, 16},
	StatRxRPCNPHandled: {312, 0, 32}, StatTxNPCNPSent: {320, 0, 32},
}

// GatherStatsBufSize is IRDMA_GATHER_STATS_BUF_SIZE.
const GatherStatsBufSize = 1024

// StatsInstance is one counter block. The data plane adds to it with Add
// (lock-free); GATHER_STATS reads it.
type StatsInstance struct {
	c [NumHWStats]atomic.Uint64
}

// Add adds n to counter s.
func (s *StatsInstance) Add(st HWStat, n uint64) {
	if st < NumHWStats {
		s.c[st].Add(n)
	}
}

// Get returns counter st.
func (s *StatsInstance) Get(st HWStat) uint64 {
	if st < NumHWStats {
		return s.c[st].Load()
	}
	return 0
}

// StatsBlock holds the function-wide counters and the stats instances
// MANAGE_STATS hands out (max_stat_inst, 128 on GEN_2).
type StatsBlock struct {
	Function StatsInstance // every counter of the function
	inst     []StatsInstance
	mu       sync.Mutex
	used     []bool // guarded by mu
}

// NewStatsBlock returns a block with n instances.
func NewStatsBlock(n uint32) *StatsBlock {
	return &StatsBlock{inst: make([]StatsInstance, n), used: make([]bool, n)}
}

// Instance returns instance i (nil if out of range).
func (b *StatsBlock) Instance(i uint32) *StatsInstance {
	if i >= uint32(len(b.inst)) {
		return nil
	}
	return &b.inst[i]
}

// Alloc reserves the lowest free instance, zeroed.
func (b *StatsBlock) Alloc() (uint32, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, u := range b.used {
		if !u {
			b.used[i] = true
			for j := range b.inst[i].c {
				b.inst[i].c[j].Store(0)
			}
			return uint32(i), true
		}
	}
	return 0, false
}

// Free releases instance i; false if it was not allocated.
func (b *StatsBlock) Free(i uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= uint32(len(b.used)) || !b.used[i] {
		return false
	}
	b.used[i] = false
	return true
}

// Allocated reports whether instance i is allocated.
func (b *StatsBlock) Allocated(i uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return i < uint32(len(b.used)) && b.used[i]
}

// EncodeGEN2 writes s into buf (at least GatherStatsBufSize bytes, zeroed
// by the caller) at the GEN_2 map's positions, each value truncated to its
// width as the hardware counter would wrap.
func (s *StatsInstance) EncodeGEN2(buf []byte) {
	for st, slot := range GEN2StatMap {
		off := int(slot.Offset)
		if off+8 > len(buf) {
			continue
		}
		v := s.c[st].Load() & (1<<slot.Bits - 1)
		q := binary.LittleEndian.Uint64(buf[off:])
		binary.LittleEndian.PutUint64(buf[off:], q|v<<slot.Shift)
	}
}

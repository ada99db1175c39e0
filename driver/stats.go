package driver

import (
	"encoding/binary"
	"sync"
	"syscall"
)

// hwStatMap is one entry of icrdma_hw_stat_map (icrdma_hw.c): where a
// counter sits in the GATHER_STATS buffer and how wide it is. The names
// are irdma_hw_stat_descs'.
type hwStatMap struct {
	name    string
	byteOff uint16
	bitOff  uint8
	mask    uint64
}

const (
	maxStats24 = 0xffffff
	maxStats32 = 0xffffffff
	maxStats48 = 0xffffffffffff
	maxStats56 = 0xffffffffffffff
)

// gen2StatMap is icrdma_hw_stat_map (GEN_2).
var gen2StatMap = []hwStatMap{
	{"rxVlanErrors", 0, 32, maxStats24},
	{"ip4InOctets", 8, 0, maxStats48},
	{"ip4InPkts", 16, 0, maxStats48},
	{"ip4InDiscards", 24, 32, maxStats32},
	{"ip4InTruncatedPkts", 24, 0, maxStats32},
	{"ip4InReasmRqd", 32, 0, maxStats48},
	{"ip4InMcastOctets", 40, 0, maxStats48},
	{"ip4InMcastPkts", 48, 0, maxStats48},
	{"ip6InOctets", 56, 0, maxStats48},
	{"ip6InPkts", 64, 0, maxStats48},
	{"ip6InDiscards", 72, 32, maxStats32},
	{"ip6InTruncatedPkts", 72, 0, maxStats32},
	{"ip6InReasmRqd", 80, 0, maxStats48},
	{"ip6InMcastOctets", 88, 0, maxStats48},
	{"ip6InMcastPkts", 96, 0, maxStats48},
	{"ip4OutOctets", 104, 0, maxStats48},
	{"ip4OutPkts", 112, 0, maxStats48},
	{"ip4OutSegRqd", 120, 0, maxStats48},
	{"ip4OutMcastOctets", 128, 0, maxStats48},
	{"ip4OutMcastPkts", 136, 0, maxStats48},
	{"ip6OutOctets", 144, 0, maxStats48},
	{"ip6OutPkts", 152, 0, maxStats48},
	{"ip6OutSegRqd", 160, 0, maxStats48},
	{"ip6OutMcastOctets", 168, 0, maxStats48},
	{"ip6OutMcastPkts", 176, 0, maxStats48},
	{"ip4OutNoRoutes", 184, 32, maxStats24},
	{"ip6OutNoRoutes", 184, 0, maxStats24},
	{"tcpInSegs", 192, 32, maxStats48},
	{"tcpInOptErrors", 200, 32, maxStats24},
	{"tcpInProtoErrors", 200, 0, maxStats24},
	{"tcpOutSegs", 208, 0, maxStats48},
	{"tcpRetransSegs", 216, 32, maxStats32},
	{"RxUDP", 224, 0, maxStats48},
	{"TxUDP", 232, 0, maxStats48},
	{"iwInRdmaWrites", 240, 0, maxStats48},
	{"iwInRdmaReads", 248, 0, maxStats48},
	{"iwInRdmaSends", 256, 0, maxStats48},
	{"iwOutRdmaWrites", 264, 0, maxStats48},
	{"iwOutRdmaReads", 272, 0, maxStats48},
	{"iwOutRdmaSends", 280, 0, maxStats48},
	{"iwRdmaBnd", 288, 0, maxStats48},
	{"iwRdmaInv", 296, 0, maxStats48},
	{"RxECNMrkd", 304, 0, maxStats56},
	{"cnpIgnored", 312, 32, maxStats24},
	{"cnpHandled", 312, 0, maxStats32},
	{"cnpSent", 320, 0, maxStats32},
}

// statsState is the VSI's irdma_vsi_pestat: the stats instance and the
// gather buffer (gather half, then the last gathered copy).
type statsState struct {
	mu      sync.Mutex
	buf     dmaMem
	instIdx uint8
	inst    bool
	last    []uint64
	total   []uint64
}

// statsInit is ctrl.c:irdma_vsi_stats_init for GEN_2: a 2 × 1024-byte
// gather buffer and a statistics instance from MANAGE_STATS (ALLOC_INST,
// OP_RETVAL = the index; irdma_get_stats_idx). Without an instance the
// function id is used.
func (d *Device) statsInit() {
	s := &d.stats
	var err error
	if s.buf, err = d.allocDMA(2*gatherStatsBuf, 0, "stats"); err != nil {
		d.log.Warn("stats buffer", errField(err))
		return
	}
	s.last = make([]uint64, len(gen2StatMap))
	s.total = make([]uint64, len(gen2StatMap))
	s.instIdx = uint8(d.cfg.HMCFnID)
	compl, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildManageStats(true, 0, false, d.cfg.HMCFnID), nil
	})
	if err == nil {
		s.inst = true
		s.instIdx = uint8(compl.OpRetVal)
	} else {
		d.log.Warn("MANAGE_STATS alloc", errField(err))
	}
}

// statsFree is irdma_vsi_stats_free: MANAGE_STATS free of the instance.
func (d *Device) statsFree() {
	s := &d.stats
	if !s.inst {
		return
	}
	_, _ = d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildManageStats(false, s.instIdx, false, d.cfg.HMCFnID), nil
	})
	s.inst = false
}

// HWStat is one hardware counter.
type HWStat struct {
	Name  string
	Value uint64
}

// statVal is irdma_stat_val.
func statVal(buf []byte, m hwStatMap) uint64 {
	if int(m.byteOff)+8 > len(buf) {
		return 0
	}
	return (binary.LittleEndian.Uint64(buf[m.byteOff:]) >> m.bitOff) & m.mask
}

// statDelta is irdma_stat_delta (roll-over aware).
func statDelta(newV, oldV, max uint64) uint64 {
	if newV >= oldV {
		return newV - oldV
	}
	return max - oldV + newV + 1
}

// GetHWStats is verbs.c:irdma_get_hw_stats for GEN_2 (irdma_cqp_gather_stats_cmd
// + irdma_update_stats): GATHER_STATS into the gather buffer with the
// stats instance, each counter extracted with the GEN_2 map and its delta
// since the last gather (wrap-aware at the counter width) added to the
// running 64-bit totals.
func (d *Device) GetHWStats() ([]HWStat, error) {
	if err := d.alive(); err != nil {
		return nil, err
	}
	s := &d.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.buf.valid() {
		return nil, syscall.ENOMEM
	}
	if _, err := d.cqp.exec(func(uint32) (cqpWQE, error) {
		return buildGatherStats(s.buf.pa, s.inst, s.instIdx, false, d.cfg.HMCFnID), nil
	}); err != nil {
		return nil, err
	}
	raw := make([]byte, gatherStatsBuf)
	if err := d.mem.Read(s.buf.at(0), raw); err != nil {
		return nil, syscall.EIO
	}
	out := make([]HWStat, len(gen2StatMap))
	for i, m := range gen2StatMap {
		v := statVal(raw, m)
		s.total[i] += statDelta(v, s.last[i], m.mask)
		s.last[i] = v
		out[i] = HWStat{Name: m.name, Value: s.total[i]}
	}
	_ = d.mem.Write(s.buf.at(gatherStatsBuf), raw) // last_gather_stats
	return out, nil
}

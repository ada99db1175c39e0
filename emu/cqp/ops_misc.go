package cqp

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/qp"
)

// extState is the bookkeeping of ops that have no domain table of their
// own. Owned by the engine goroutine.
type extState struct {
	shmcAllocated bool
	pmFn          [pmMaxVFs]bool
	apbvt         map[uint16]bool    // iWARP ports added by MANAGE_APBVT
	qhash         map[[8]uint64]bool // MANAGE_QUAD_HASH_TABLE_ENTRY keys
	wsNodes       map[uint16]wsNode  // WORK_SCHED_NODE nodes by id
	qsHandles     map[uint16]bool    // QS handles given to leaves
	upMap         [8]uint8           // UP_MAP: traffic class per user priority
}

type wsNode struct {
	parent   uint16
	leaf     bool
	qsHandle uint16
}

func (e *extState) init() {
	e.apbvt = map[uint16]bool{}
	e.qhash = map[[8]uint64]bool{}
	e.wsNodes = map[uint16]wsNode{}
	e.qsHandles = map[uint16]bool{}
}

// MANAGE_PUSH_PAGES fields (ctrl.c:irdma_sc_manage_push_page).
const (
	pushFreeBit = 62
	// InvalidPushPageIndex is IRDMA_INVALID_PUSH_PAGE_INDEX: the OP_RETVAL
	// with which the device declines a push page (docs/hw-controlpath.md
	// "Push pages").
	InvalidPushPageIndex = 0xffffffff
)

// managePushPages declines every push page: the allocation completes
// successfully with OP_RETVAL 0xFFFFFFFF, which irdma_alloc_push_page reads
// as "no push page" on every kernel version (the 256 threshold is not safe:
// docs/hw-controlpath.md "Push pages"). Push mode is optional; the WQE pages
// it would map are not modelled. A free of a page never given succeeds.
func (c *CQP) managePushPages(w *WQE) (result, *Error) {
	if bit(w.Hdr(), pushFreeBit) {
		return result{}, nil
	}
	return result{retval: InvalidPushPageIndex}, nil
}

// QUERY_RDMA_FEATURES (ctrl.c:irdma_sc_query_rdma_features,
// irdma_get_rdma_features; type.h enum irdma_feature_type).
const (
	featBufLenMask   = 0xffffffff // hdr [31:0] BUF_LEN
	featTypeShift    = 48         // [63:48] IRDMA_FEATURE_TYPE
	featCntShift     = 32         // entry 0 [47:32] IRDMA_FEATURE_CNT
	FeatureFWInfo    = 0
	FeatureHWVersion = 1
	FeatureFtnFlags  = 32
	// FtnAtomicsAllowed is IRDMA_ATOMICS_ALLOWED_BIT in FTN_FLAGS.
	FtnAtomicsAllowed = 1 << 1
)

// Features returns the feature entries the device reports: FW_INFO (with
// the count), HW_VERSION_INFO (the generation: our choice, the driver does
// not read it on GEN_2) and FTN_FLAGS (atomics per profile).
func (c *CQP) Features() []uint64 {
	p := c.cfg.Profile
	var ftn uint64
	if p.Atomics {
		ftn |= FtnAtomicsAllowed
	}
	f := []uint64{
		FeatureFWInfo<<featTypeShift | uint64(p.Identity.FWMajor)<<16 | uint64(p.Identity.FWMinor),
		FeatureHWVersion<<featTypeShift | uint64(p.Gen),
		FeatureFtnFlags<<featTypeShift | ftn,
	}
	f[0] |= uint64(len(f)) << featCntShift
	return f
}

func (c *CQP) queryRDMAFeatures(w *WQE) (result, *Error) {
	bufLen := w.Hdr() & featBufLenMask
	feats := c.Features()
	// Errata V2: never write more than BUF_LEN bytes; the count tells the
	// driver how many entries exist, and it retries with a larger buffer.
	n := min(uint64(len(feats)), bufLen/8)
	if n == 0 {
		return result{}, fail(MinorBufferTooSmall, "QUERY_RDMA_FEATURES BUF_LEN", nil)
	}
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], feats[i])
	}
	if err := c.cfg.Mem.Write(hostmem.IOVA(w.W[4]), b); err != nil {
		return result{}, fail(MinorPAFault, "feature buffer", err)
	}
	return result{bytes: len(b)}, nil
}

// MANAGE_APBVT and MANAGE_QUAD_HASH_TABLE_ENTRY (ctrl.c:
// irdma_sc_manage_apbvt_entry, irdma_sc_manage_qhash_table_entry).
//
// irdma issues both only for iWARP (the connection manager, cm.c); a RoCE
// function never sends them. The hardware tables they program are
// protocol-neutral, so the device executes them when the CQP was created
// for iWARP or "any" protocol (host context PROTOCOL_USED 1 or 0): it
// records the port or the hash entry and succeeds. On a CQP created for
// RoCE only (PROTOCOL_USED 2, what irdma's RoCE mode sets) they fail with
// MinorProtocol, so that a stray iWARP command is visible.
const (
	apbvtAddBit     = 62
	qhashManageHi   = 62 // [62:61] MANAGE: 0 delete, 1 add, 2 modify
	qhashManageLo   = 61
	qhashManageMask = 0x3 << qhashManageLo
)

func (c *CQP) iwarpAllowed() *Error {
	if c.protocol == ProtocolRoCE {
		return fail(MinorProtocol, "iWARP op on a RoCE-only CQP", nil)
	}
	return nil
}

func (c *CQP) manageAPBVT(w *WQE) (result, *Error) {
	if err := c.iwarpAllowed(); err != nil {
		return result{}, err
	}
	port := uint16(w.W[2])
	if bit(w.Hdr(), apbvtAddBit) {
		c.ext.apbvt[port] = true
	} else {
		delete(c.ext.apbvt, port)
	}
	return result{}, nil
}

func (c *CQP) manageQHash(w *WQE) (result, *Error) {
	if err := c.iwarpAllowed(); err != nil {
		return result{}, err
	}
	key := w.W
	key[3] &^= qhashManageMask | 1<<hdrValidBit
	switch field(w.Hdr(), qhashManageHi, qhashManageLo) {
	case 0:
		delete(c.ext.qhash, key)
	case 1, 2:
		c.ext.qhash[key] = true
	default:
		return result{}, fail(MinorBadContext, "QHASH MANAGE value", nil)
	}
	return result{}, nil
}

// WORK_SCHED_NODE fields (ctrl.c:irdma_sc_manage_ws_node; the newer, wider masks).
const (
	wsNodeIDMask  = 0x3fff // hdr [13:0]
	wsParentShift = 16     // [29:16]
	wsOpShift     = 52     // [55:52] NODEOP: 0 add, 1 modify, 2 delete
	wsLeafBit     = 61     // NODETYPE: 1 leaf
	wsOpAdd       = 0
	wsOpModify    = 1
	wsOpDelete    = 2
	wsMaxQSHandle = 0x3ff // QP context QSHANDLE is [25:16], 10 bits
	wsFirstHandle = 1
)

// workSchedNode keeps the scheduler tree the driver builds. Node ids are
// the driver's; an added leaf gets a QS handle from the device, returned
// in OP_RETVAL (utils.c:irdma_ws_cqp_cmd takes qs_handle from op_ret_val).
func (c *CQP) workSchedNode(w *WQE) (result, *Error) {
	h := w.Hdr()
	id := uint16(h & wsNodeIDMask)
	switch field(h, 55, wsOpShift) {
	case wsOpAdd:
		if _, ok := c.ext.wsNodes[id]; ok {
			return result{}, fail(MinorObjectExists, "WS node exists", nil)
		}
		n := wsNode{parent: uint16(field(h, 29, wsParentShift)), leaf: bit(h, wsLeafBit)}
		if n.leaf {
			for qs := uint16(wsFirstHandle); qs <= wsMaxQSHandle; qs++ {
				if !c.ext.qsHandles[qs] {
					n.qsHandle = qs
					break
				}
			}
			if n.qsHandle == 0 {
				return result{}, fail(MinorNoResource, "no QS handle left", nil)
			}
			c.ext.qsHandles[n.qsHandle] = true
		}
		c.ext.wsNodes[id] = n
		return result{retval: uint32(n.qsHandle)}, nil
	case wsOpModify:
		if _, ok := c.ext.wsNodes[id]; !ok {
			return result{}, fail(MinorObjectNotFound, "WS node does not exist", nil)
		}
		return result{}, nil
	case wsOpDelete:
		n, ok := c.ext.wsNodes[id]
		if !ok {
			return result{}, fail(MinorObjectNotFound, "WS node does not exist", nil)
		}
		delete(c.ext.qsHandles, n.qsHandle)
		delete(c.ext.wsNodes, id)
		return result{}, nil
	}
	return result{}, fail(MinorBadContext, "WS NODEOP", nil)
}

// MANAGE_STATS / GATHER_STATS fields (ctrl.c:irdma_sc_manage_stats_inst,
// irdma_sc_gather_stats).
const (
	statsInstMask   = 0x7f // hdr [6:0] INST_INDEX
	statsUseInstBit = 61   // GATHER_STATS USE_INST
	statsAllocBit   = 62   // MANAGE_STATS ALLOC_INST
)

func (c *CQP) manageStats(w *WQE) (result, *Error) {
	h := w.Hdr()
	if bit(h, statsAllocBit) {
		i, ok := c.cfg.Stats.Alloc()
		if !ok {
			return result{}, fail(MinorNoResource, "no stats instance left", nil)
		}
		// utils.c:irdma_cqp_stats_inst_cmd takes the index from OP_RETVAL.
		return result{retval: i}, nil
	}
	if !c.cfg.Stats.Free(uint32(h & statsInstMask)) {
		return result{}, fail(MinorObjectNotFound, "stats instance not allocated", nil)
	}
	return result{}, nil
}

// gatherStats writes the counters into the 1024-byte buffer at the GEN_2
// hw_stats_map positions (icrdma_hw.c icrdma_hw_stat_map). Without
// USE_INST the function-wide block is reported.
func (c *CQP) gatherStats(w *WQE) (result, *Error) {
	h := w.Hdr()
	src := &c.cfg.Stats.Function
	if bit(h, statsUseInstBit) {
		i := uint32(h & statsInstMask)
		if !c.cfg.Stats.Allocated(i) {
			return result{}, fail(MinorObjectNotFound, "stats instance not allocated", nil)
		}
		src = c.cfg.Stats.Instance(i)
	}
	buf := make([]byte, qp.GatherStatsBufSize)
	src.EncodeGEN2(buf)
	if err := c.cfg.Mem.Write(hostmem.IOVA(w.W[4]), buf); err != nil {
		return result{}, fail(MinorPAFault, "GATHER_STATS buffer", err)
	}
	return result{bytes: len(buf)}, nil
}

// upMap records the user-priority → traffic-class map (ctrl.c:irdma_sc_set_up_map).
func (c *CQP) upMap(w *WQE) (result, *Error) {
	for i := range c.ext.upMap {
		c.ext.upMap[i] = uint8(w.W[0] >> (8 * i))
	}
	return result{}, nil
}

package cqp

import (
	"encoding/binary"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// MANAGE_ARP fields (ctrl.c:irdma_sc_add_arp_cache_entry / _del_).
const (
	arpIdxMask      = 0xfff // hdr [11:0] MAT_ARPENTRYIDX
	arpValidBit     = 42    // ENTRYVALID
	arpPermanentBit = 43
	macMask         = uint64(1)<<48 - 1
)

func (c *CQP) manageARP(w *WQE) (result, *Error) {
	h := w.Hdr()
	idx := uint32(h & arpIdxMask)
	if err := c.checkIndex(ObjARP, idx); err != nil {
		return result{}, err
	}
	if c.cfg.AH == nil {
		return result{}, fail(MinorAHError, "no ARP table", nil)
	}
	valid := bit(h, arpValidBit)
	var mac [6]byte
	if valid {
		mac = macFromU64(w.W[2] & macMask)
	}
	if err := c.cfg.AH.SetARP(idx, mac, valid, bit(h, arpPermanentBit)); err != nil {
		return result{}, &Error{Status: statusOf(err, MinorAHError), Reason: "MANAGE_ARP", Err: err}
	}
	return result{}, nil
}

// CREATE/DESTROY_ADDR_HANDLE fields (uda.c:irdma_sc_access_ah, uda_d.h; the
// wide masks of newer kernels, docs/hw-controlpath.md "ARP, AH and multicast
// WQEs").
const (
	ahIdxMask       = 0xffffff // hdr [23:0] AVIDX
	ahIPv4Bit       = 59
	ahInsertVLANBit = 60
	ahLoopbackBit   = 62
)

// ipWords unpacks an address stored as hi qword = word0<<32|word1 and lo
// qword = word2<<32|word3 (IPv4: word 3 of lo only).
func ipWords(hi, lo uint64, v4 bool) [4]uint32 {
	if v4 {
		return [4]uint32{3: uint32(lo)}
	}
	return [4]uint32{uint32(hi >> 32), uint32(hi), uint32(lo >> 32), uint32(lo)}
}

func (c *CQP) accessAH(w *WQE) (result, *Error) {
	h := w.Hdr()
	idx := uint32(h & ahIdxMask)
	if err := c.checkIndex(ObjFSIAV, idx); err != nil {
		return result{}, err
	}
	if c.cfg.AH == nil {
		return result{}, fail(MinorAHError, "no AH table", nil)
	}
	var err error
	if w.Opcode() == OpDestroyAddrHandle {
		err = c.cfg.AH.DelAH(idx)
	} else {
		v4 := bit(h, ahIPv4Bit)
		err = c.cfg.AH.AddAH(AH{
			Index: idx, PD: uint32(field(w.W[1], 63, 48)) | uint32(field(w.W[2], 27, 20))<<16,
			SrcMAC: macFromU64(w.W[0] >> 16), VLANTag: uint16(w.W[1]), TC: uint8(field(w.W[1], 39, 32)),
			FlowLabel: uint32(field(w.W[2], 19, 0)), HopLimit: uint8(field(w.W[2], 39, 32)),
			ARPIndex: uint16(field(w.W[2], 63, 48)),
			DestIP:   ipWords(w.W[5], w.W[4], v4), SrcIP: ipWords(w.W[7], w.W[6], v4),
			IPv4: v4, InsertVLAN: bit(h, ahInsertVLANBit), DoLoopback: bit(h, ahLoopbackBit),
		})
	}
	if err != nil {
		return result{}, &Error{Status: statusOf(err, MinorAHError), Reason: "ADDR_HANDLE", Err: err}
	}
	return result{}, nil
}

// CREATE/MODIFY/DESTROY_MCAST_GRP fields (uda.c:irdma_access_mcast_grp, uda_d.h).
const (
	mgIdxMask       = 0x1fff // hdr [12:0] MGIDX
	mgVLANValidBit  = 59
	mgIPv4Bit       = 60
	mgCtxEntries    = 8 // IRDMA_MAX_MGS_PER_CTX
	mgCtxSize       = 8 * mgCtxEntries
	mgQPIDMask      = 0x3ffff // [17:0]
	mgValidEntryBit = 31
)

func (c *CQP) accessMcast(w *WQE) (result, *Error) {
	h := w.Hdr()
	idx := uint32(h & mgIdxMask)
	if err := c.checkIndex(ObjFSIMC, idx); err != nil {
		return result{}, err
	}
	if c.cfg.AH == nil {
		return result{}, fail(MinorAHError, "no multicast table", nil)
	}
	op := w.Opcode()
	if op == OpDestroyMcastGrp {
		if err := c.cfg.AH.DestroyMcast(idx); err != nil {
			return result{}, &Error{Status: statusOf(err, MinorAHError), Reason: "DESTROY_MCAST_GRP", Err: err}
		}
		return result{}, nil
	}
	var mg [mgCtxSize]byte
	if err := c.cfg.Mem.Read(hostmem.IOVA(w.W[4]), mg[:]); err != nil {
		return result{}, fail(MinorPAFault, "multicast group context", err)
	}
	v4 := bit(h, mgIPv4Bit)
	g := McastGroup{
		Index: idx, DestMAC: macFromU64(w.W[0] & macMask), HMCFnID: uint8(w.W[1] & 0x3f),
		VLANID: uint16(field(w.W[2], 43, 32)), VLANValid: bit(h, mgVLANValidBit),
		QSHandle: uint16(field(w.W[2], 9, 0)), IPv4: v4, DestIP: ipWords(w.W[7], w.W[6], v4),
	}
	for i := 0; i < mgCtxEntries; i++ {
		e := binary.LittleEndian.Uint64(mg[8*i:])
		g.Entries[i] = McastQP{QPID: uint32(e & mgQPIDMask), Valid: bit(e, mgValidEntryBit), DestPort: uint16(field(e, 47, 32))}
		if g.Entries[i].Valid {
			g.QPs = append(g.QPs, g.Entries[i])
		}
	}
	var err error
	if op == OpCreateMcastGrp {
		err = c.cfg.AH.CreateMcast(g)
	} else {
		err = c.cfg.AH.ModifyMcast(g)
	}
	if err != nil {
		return result{}, &Error{Status: statusOf(err, MinorAHError), Reason: "MCAST_GRP", Err: err}
	}
	return result{bytes: mgCtxSize}, nil
}

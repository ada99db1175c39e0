package hmc

import "fmt"

// ObjType is an HMC object type (hmc.h enum irdma_hmc_rsrc_type;
// docs/hw-controlpath.md "HMC object types"). The values are the driver's.
type ObjType uint8

// HMC object types.
const (
	QP       ObjType = 0  // QP contexts (IRDMA_HMC_IW_QP)
	CQ       ObjType = 1  // CQ contexts
	SRQ      ObjType = 2  // SRQ contexts; always 0 on GEN_2 (RESERVED in older hmc.h)
	HTE      ObjType = 3  // hash table entries
	ARP      ObjType = 4  // ARP cache
	APBVT    ObjType = 5  // APBVT entry (IRDMA_HMC_IW_APBVT_ENTRY): not queried, size 8192, count 1
	MR       ObjType = 6  // MR/MW (STag) table
	XF       ObjType = 7  // transmit FIFO
	XFFL     ObjType = 8  // XF free list
	Q1       ObjType = 9  // inbound RDMA READ queue
	Q1FL     ObjType = 10 // Q1 free list
	TIMER    ObjType = 11 // timers
	FSIMC    ObjType = 12 // multicast group contexts
	FSIAV    ObjType = 13 // address vectors (AH table)
	PBLE     ObjType = 14 // physical buffer list entries (8 bytes each)
	RRF      ObjType = 15 // RoCE read response FIFO
	RRFFL    ObjType = 16 // RRF free list
	HDR      ObjType = 17 // header templates
	MD       ObjType = 18 // MD
	OOISC    ObjType = 19 // iWARP out-of-order ISC
	OOISCFFL ObjType = 20 // OOISC free list
	// NumObjTypes is the number of object types (IRDMA_HMC_IW_MAX).
	NumObjTypes = 21
)

var objNames = [NumObjTypes]string{
	"QP", "CQ", "SRQ", "HTE", "ARP", "APBVT", "MR", "XF", "XFFL", "Q1",
	"Q1FL", "TIMER", "FSIMC", "FSIAV", "PBLE", "RRF", "RRFFL", "HDR", "MD",
	"OOISC", "OOISCFFL",
}

func (t ObjType) String() string {
	if int(t) < NumObjTypes {
		return objNames[t]
	}
	return fmt.Sprintf("ObjType(%d)", uint8(t))
}

// Buffer slots. QUERY_FPM_VAL (docs/hw-controlpath.md "QUERY_FPM_VAL buffer",
// ctrl.c:irdma_sc_parse_fpm_query_buf) and COMMIT_FPM_VAL ("COMMIT_FPM_VAL
// buffer", ctrl.c:irdma_sc_cfg_iw_fpm / irdma_sc_parse_fpm_commit_buf) put
// the object types at different byte offsets; -1 means "no slot".
var (
	querySlot = [NumObjTypes]int{
		QP: 8, CQ: 16, SRQ: 24, HTE: 32, ARP: 40, APBVT: -1, MR: 48, XF: 56,
		XFFL: 64, Q1: 72, Q1FL: 80, TIMER: 88, FSIMC: 96, FSIAV: 104,
		PBLE: 112, RRF: 128, RRFFL: 136, HDR: 144, MD: 152, OOISC: 160,
		OOISCFFL: 168,
	}
	commitSlot = [NumObjTypes]int{
		QP: 0, CQ: 8, SRQ: 16, HTE: 24, ARP: 32, APBVT: 40, MR: 48, XF: 56,
		XFFL: 64, Q1: 72, Q1FL: 80, TIMER: 88, FSIMC: 96, FSIAV: 104,
		PBLE: 112, RRF: 128, RRFFL: 136, HDR: 144, MD: 152, OOISC: 160,
		OOISCFFL: 168,
	}
)

// QuerySlot returns the byte offset of t's entry in the QUERY_FPM_VAL
// buffer, or -1 (APBVT is not in the query buffer).
func QuerySlot(t ObjType) int {
	if int(t) >= NumObjTypes {
		return -1
	}
	return querySlot[t]
}

// CommitSlot returns the byte offset of t's entry in the COMMIT_FPM_VAL
// buffer, or -1 for an unknown type.
func CommitSlot(t ObjType) int {
	if int(t) >= NumObjTypes {
		return -1
	}
	return commitSlot[t]
}

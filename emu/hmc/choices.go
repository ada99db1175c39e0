package hmc

import (
	"math/bits"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// ObjectQuery is one object type's QUERY_FPM_VAL entry: the largest count
// the driver may commit and the object size in bytes (a power of two,
// reported as its exponent).
type ObjectQuery struct {
	Max  uint32
	Size uint32
}

// QueryValues is everything QUERY_FPM_VAL reports. The object sizes are
// firmware data that the driver cannot know (docs/hw-controlpath.md "HMC
// object types"); these are the emulator's choices, explained one by one in
// docs/hmc.md.
type QueryValues struct {
	FirstPESDIndex uint16 // +0 FIRST_PE_SD_INDEX [13:0]
	MaxPESDs       uint32 // +0 MAX_PE_SDS [44:32]
	MaxCEQs        uint32 // +120 MAX_CEQS [9:0]
	HTMultiplier   uint32 // +120 HTMULTIPLIER [19:16]
	TimerBucket    uint32 // +120 TIMERBUCKET [47:32]
	MaxIRDEnc      uint8  // +120 MAX_IRD [53:50]; read only with FTN_FLAGS MANAGE_RSRC_VER2, which we do not offer
	XFBlockSize    uint32 // +64 [63:32]
	Q1BlockSize    uint32 // +80 [63:32]
	RRFBlockSize   uint32 // +136 [63:32]
	OOISCFBlock    uint32 // +168 [63:32]
	Objects        [NumObjTypes]ObjectQuery
}

// The emulator's FPM choices (docs/hmc.md has the table and the reasons).
const (
	// GEN2QPMax is the QP object count: 16 K QPs, enough for "ten thousand
	// idle QPs" (docs/architecture.md) at 8 MB of HMC backing.
	GEN2QPMax = 16384
	// GEN2MaxPESDs bounds the FPM space at 64 × 2 MB = 128 MB; the driver's
	// estimate for our maximum counts is 45 SDs (docs/hmc.md), of which it
	// backs 13 at bring-up and the PBLE share (32) on demand.
	GEN2MaxPESDs = 64

	gen2MaxCEQs      = 256
	gen2HTMultiplier = 1
	gen2TimerBucket  = 64
	gen2XFBlockSize  = 4
	gen2Q1BlockSize  = 64
	gen2RRFBlockSize = 64
	gen2FSIMCMax     = 4096 // IRDMA_UDA_MAX_FSI_MGS: the driver rejects mg_id ≥ 4096 (uda.c)
	gen2ARPMax       = 2048
	gen2MRMax        = 65536
	gen2FSIAVMax     = 65536
	gen2PBLEMax      = 8 << 20 // 64 MB of PBLEs: 32 GB of 4 KB pages
)

// Fixed sizes the driver imposes regardless of the query
// (ctrl.c:irdma_sc_parse_fpm_query_buf): free lists are 4 bytes, PBLEs 8,
// the APBVT entry 8192 with a maximum of 1.
const (
	freeListSize = 4
	pbleSize     = 8
	apbvtSize    = 8192
)

// GEN2Query returns the QUERY_FPM_VAL values the emulated E810 reports. The
// counts that depend on the QP count follow the driver's count selection
// (docs/hw-controlpath.md "FPM count selection", ctrl.c:irdma_cfg_fpm_val),
// so that every count the driver derives from GEN2QPMax QPs is within the
// maximum: Q1 from the profile's IRD, HTE from QP + FSIMC, XF/RRF/TIMER/HDR
// from QP.
func GEN2Query(p profile.Profile) QueryValues {
	qp := uint32(GEN2QPMax)
	ird := p.Limits.MaxIRD
	if ird == 0 {
		ird = 1
	}
	q := QueryValues{
		FirstPESDIndex: 0, // a PF (docs/hmc.md)
		MaxPESDs:       GEN2MaxPESDs,
		MaxCEQs:        min(gen2MaxCEQs, p.Limits.MaxCEQs, 1023),
		HTMultiplier:   gen2HTMultiplier,
		TimerBucket:    gen2TimerBucket,
		XFBlockSize:    gen2XFBlockSize,
		Q1BlockSize:    gen2Q1BlockSize,
		RRFBlockSize:   gen2RRFBlockSize,
	}
	o := &q.Objects
	// Objects the device model reads and writes.
	o[QP] = ObjectQuery{qp, 512}        // holds the 256-byte RoCE host context + device state
	o[CQ] = ObjectQuery{2 * qp, 128}    // CQ = min(2·QP, max): the driver never asks for more
	o[ARP] = ObjectQuery{gen2ARPMax, 8} // MAC + flags (emu/ah layout)
	o[MR] = ObjectQuery{gen2MRMax, 64}  // emu/mr record layout
	o[FSIMC] = ObjectQuery{gen2FSIMCMax, 128}
	o[FSIAV] = ObjectQuery{gen2FSIAVMax, 64}
	o[PBLE] = ObjectQuery{gen2PBLEMax, pbleSize}
	o[APBVT] = ObjectQuery{1, apbvtSize}
	// Firmware-internal objects the emulator keeps in Go instead: one
	// byte each, the smallest size the encoding allows, with maxima that
	// cover what the driver derives from GEN2QPMax.
	fsimc := o[FSIMC].Max
	o[HTE] = ObjectQuery{pow2ceil(roundUp(qp+fsimc, 512)) * q.HTMultiplier, 1}
	o[XF] = ObjectQuery{4 * q.XFBlockSize * qp, 1}
	o[XFFL] = ObjectQuery{o[XF].Max / q.XFBlockSize, freeListSize}
	o[Q1] = ObjectQuery{pow2ceil(2*ird*qp + 512), 1}
	o[Q1FL] = ObjectQuery{o[Q1].Max / q.Q1BlockSize, freeListSize}
	o[TIMER] = ObjectQuery{(roundUp(qp, 512)/512 + 1) * q.TimerBucket, 1}
	o[RRF] = ObjectQuery{32 * qp, 1}
	o[RRFFL] = ObjectQuery{o[RRF].Max / q.RRFBlockSize, freeListSize}
	o[HDR] = ObjectQuery{qp, 1}
	// Not offered: SRQ (GEN_3), MD, and the iWARP-only OOISC pair.
	o[SRQ] = ObjectQuery{0, 1}
	o[MD] = ObjectQuery{0, 1}
	o[OOISC] = ObjectQuery{0, 1}
	o[OOISCFFL] = ObjectQuery{0, freeListSize}
	return q
}

func roundUp(x, a uint32) uint32 { return (x + a - 1) / a * a }

// pow2ceil returns the smallest power of two ≥ x (x ≥ 1).
func pow2ceil(x uint32) uint32 {
	if x <= 1 {
		return 1
	}
	return 1 << bits.Len32(x-1)
}

// log2 returns the exponent of a power of two.
func log2(x uint32) uint8 { return uint8(bits.TrailingZeros32(x)) }

// Package mad holds typed byte-slice views of the management datagrams the
// communication manager exchanges on the GSI QP: the common MAD header
// (IBTA Vol 1 §13.4.2) and every CM attribute of IBTA Vol 1 chapter 12
// (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP; LAP/APR are
// named but not laid out, as cm does not serve them).
//
// A view is a []byte of a whole 256-byte MAD; field offsets are absolute
// (header included) and named after the IBTA tables, whose offsets and
// widths the kernel's include/rdma/ibta_vol1_c12.h also spells out
// (byte offset after the 24-byte header, bit offset from the byte's most
// significant bit, width). Getters and setters never check the length:
// callers validate with Check first (the views are for a MAD of Size
// bytes), as gVisor's header package does.
package mad

import (
	"encoding/binary"
	"errors"
)

// Size is the size of every MAD on a GSI QP (IBTA §13.4.1).
const Size = 256

// HeaderSize is the common MAD header (struct ib_mad_hdr).
const HeaderSize = 24

// Common MAD header values for CM MADs (cm.c:cm_format_mad_hdr).
const (
	BaseVersion  = 1    // IB_MGMT_BASE_VERSION
	ClassCM      = 0x07 // IB_MGMT_CLASS_CM
	ClassVersion = 2    // IB_CM_CLASS_VERSION
	MethodSend   = 0x03 // IB_MGMT_METHOD_SEND: every CM message
)

// AttrID is a CM attribute (IBTA Vol 1 §12.6 Table 102; cm_msgs.h).
type AttrID uint16

const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRREQ       AttrID = 0x0017
	AttrSIDRREP       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001A
)

var attrNames = map[AttrID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

// String names the attribute as IBTA does.
func (a AttrID) String() string {
	if n, ok := attrNames[a]; ok {
		return n
	}
	return "attr-0x" + hex16(uint16(a))
}

func hex16(v uint16) string {
	const d = "0123456789abcdef"
	return string([]byte{d[v>>12], d[v>>8&15], d[v>>4&15], d[v&15]})
}

// Header field offsets (struct ib_mad_hdr).
const (
	offBaseVersion   = 0
	offMgmtClass     = 1
	offClassVersion  = 2
	offMethod        = 3
	offStatus        = 4
	offClassSpecific = 6
	offTID           = 8
	offAttrID        = 16
	offAttrMod       = 20
)

// Header is a view of a MAD's common header.
type Header []byte

func (h Header) BaseVersion() uint8        { return h[offBaseVersion] }
func (h Header) MgmtClass() uint8          { return h[offMgmtClass] }
func (h Header) ClassVersion() uint8       { return h[offClassVersion] }
func (h Header) Method() uint8             { return h[offMethod] }
func (h Header) Status() uint16            { return be16(h, offStatus) }
func (h Header) ClassSpecific() uint16     { return be16(h, offClassSpecific) }
func (h Header) TID() uint64               { return binary.BigEndian.Uint64(h[offTID:]) }
func (h Header) AttrID() AttrID            { return AttrID(be16(h, offAttrID)) }
func (h Header) AttrMod() uint32           { return binary.BigEndian.Uint32(h[offAttrMod:]) }
func (h Header) SetStatus(v uint16)        { put16(h, offStatus, v) }
func (h Header) SetTID(v uint64)           { binary.BigEndian.PutUint64(h[offTID:], v) }
func (h Header) SetAttrMod(v uint32)       { binary.BigEndian.PutUint32(h[offAttrMod:], v) }
func (h Header) SetClassSpecific(v uint16) { put16(h, offClassSpecific, v) }

// InitCM writes a CM MAD header: base version 1, class CM, class version
// 2, method SEND, status 0, the attribute and the transaction ID; the
// attribute modifier is 0 (cm.c sends ECE options there; we offer none).
func (h Header) InitCM(attr AttrID, tid uint64) {
	h[offBaseVersion] = BaseVersion
	h[offMgmtClass] = ClassCM
	h[offClassVersion] = ClassVersion
	h[offMethod] = MethodSend
	put16(h, offStatus, 0)
	put16(h, offClassSpecific, 0)
	h.SetTID(tid)
	put16(h, offAttrID, uint16(attr))
	put16(h, offAttrID+2, 0)
	h.SetAttrMod(0)
}

// Errors of Check.
var (
	ErrTruncated       = errors.New("mad: shorter than 256 bytes")
	ErrBaseVersion     = errors.New("mad: base version not 1")
	ErrClass           = errors.New("mad: management class not CM (0x07)")
	ErrClassVersion    = errors.New("mad: CM class version not 2")
	ErrMethod          = errors.New("mad: method not SEND (0x03)")
	ErrUnknownAttr     = errors.New("mad: attribute not a CM message")
	ErrUnsupportedAttr = errors.New("mad: CM attribute not served (LAP, APR, ClassPortInfo)")
)

// Check validates b as a CM MAD and returns its attribute: at least Size
// bytes (a longer buffer is a GRH-less receive of more than one MAD: only
// the first Size bytes count), base version 1, class 0x07 version 2,
// method SEND, and an attribute from REQ to SIDR_REP.
func Check(b []byte) (AttrID, error) {
	if len(b) < Size {
		return 0, ErrTruncated
	}
	h := Header(b)
	switch {
	case h.BaseVersion() != BaseVersion:
		return 0, ErrBaseVersion
	case h.MgmtClass() != ClassCM:
		return 0, ErrClass
	case h.ClassVersion() != ClassVersion:
		return 0, ErrClassVersion
	case h.Method() != MethodSend:
		return 0, ErrMethod
	}
	a := h.AttrID()
	switch {
	case a >= AttrREQ && a <= AttrSIDRREP:
		return a, nil
	case a == AttrLAP || a == AttrAPR || a == AttrClassPortInfo:
		return a, ErrUnsupportedAttr
	}
	return a, ErrUnknownAttr
}

// Field helpers: big-endian words, bit fields counted from a byte's most
// significant bit as IBTA (and IBA_FIELD_BLOC) does.

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func be24(b []byte, off int) uint32 {
	return uint32(b[off])<<16 | uint32(b[off+1])<<8 | uint32(b[off+2])
}
func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }
func be64(b []byte, off int) uint64 { return binary.BigEndian.Uint64(b[off:]) }

func put16(b []byte, off int, v uint16) { binary.BigEndian.PutUint16(b[off:], v) }
func put24(b []byte, off int, v uint32) {
	b[off], b[off+1], b[off+2] = byte(v>>16), byte(v>>8), byte(v)
}
func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.BigEndian.PutUint64(b[off:], v) }

// bits reads width bits of byte off starting bit (0 = MSB).
func bits(b []byte, off, bit, width int) uint8 {
	return b[off] >> (8 - bit - width) & (1<<width - 1)
}

// setBits writes width bits of byte off starting at bit (0 = MSB); v is
// truncated to the width.
func setBits(b []byte, off, bit, width int, v uint8) {
	shift := 8 - bit - width
	mask := uint8(1<<width-1) << shift
	b[off] = b[off]&^mask | v<<shift&mask
}

func flag(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

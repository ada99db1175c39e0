package ah

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// AE codes of address resolution (user.h "Async Events codes";
// docs/hw-controlpath.md "AE codes"). The data path raises them when a lookup
// here fails.
const (
	AEROCEEmptyMCG          uint16 = 0x0380 // IRDMA_AE_ROCE_EMPTY_MCG
	AEROCEBadMCIPAddr       uint16 = 0x0381 // IRDMA_AE_ROCE_BAD_MC_IP_ADDR
	AEROCEBadMCQPID         uint16 = 0x0382 // IRDMA_AE_ROCE_BAD_MC_QPID
	AEMCGQPProtocolMismatch uint16 = 0x0383 // IRDMA_AE_MCG_QP_PROTOCOL_MISMATCH
	AEInvalidARPEntry       uint16 = 0x0401 // IRDMA_AE_INVALID_ARP_ENTRY
	AEStaleARPEntry         uint16 = 0x0403 // IRDMA_AE_STALE_ARP_ENTRY
	AEInvalidAHEntry        uint16 = 0x0406 // IRDMA_AE_INVALID_AH_ENTRY
)

// Reason says why an operation failed.
type Reason uint8

// Failure reasons.
const (
	ReasonNotCommitted Reason = iota + 1 // no committed HMC
	ReasonIndexRange                     // index ≥ the committed HMC count
	ReasonAlreadyValid                   // create on a valid entry
	ReasonNotValid                       // modify or destroy of an invalid entry
	ReasonBadARPIndex                    // AH ARP index ≥ the ARP count
	ReasonBadPD                          // PD id beyond MaxPDs
	ReasonHMC                            // the entry's HMC object is not reachable
)

var reasonNames = [...]string{"", "FPM not committed", "index out of range",
	"entry already valid", "entry not valid", "ARP index out of range",
	"PD id out of range", "HMC access failed"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// ErrAH is matched (errors.Is) by every *Error.
var ErrAH = errors.New("ah: operation failed")

// Error describes a failed table operation.
type Error struct {
	Op     string // "SetARP", "AddAH", "CreateMG", …
	Reason Reason
	Index  uint32
	Err    error // the hmc or hostmem error for ReasonHMC
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ah: %s %d: %s", e.Op, e.Index, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrAH.
func (e *Error) Is(target error) bool { return target == ErrAH }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of err, if it is an *Error.
func ReasonOf(err error) (Reason, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason, true
	}
	return 0, false
}

// Tables holds the ARP cache, the address handles and the multicast
// groups of a device. Changes (the CQP's MANAGE_ARP, CREATE/DESTROY_AH,
// CREATE/MODIFY/DESTROY_MCAST_GRP) are serialised by a mutex and written to
// the entry's HMC object before they are published; the lookups the data
// path makes (ARP, AH, MG, LookupMG) take no lock and do not allocate.
type Tables struct {
	mem   *hostmem.Memory
	h     *hmc.HMC
	maxPD uint32

	mu  sync.Mutex
	tab atomic.Pointer[tables]
}

type tables struct {
	gen    uint64
	arp    []atomic.Uint64 // arpValid | arpPermanent | MAC
	ah     []atomic.Pointer[AH]
	mg     []atomic.Pointer[MG]
	mgByIP atomic.Pointer[map[mgKey]uint32]
}

// NewTables returns the tables of a device. Their sizes follow the HMC's
// committed ARP, FSIAV and FSIMC counts and they are emptied by every new
// commit.
func NewTables(mem *hostmem.Memory, h *hmc.HMC, p profile.Profile) *Tables {
	t := &Tables{mem: mem, h: h, maxPD: p.Limits.MaxPDs}
	if t.maxPD == 0 {
		t.maxPD = 1 << 18
	}
	return t
}

// load is the data path's view: the current tables, or nil.
func (t *Tables) load() *tables {
	tb := t.tab.Load()
	if tb == nil || tb.gen != t.h.Generation() {
		return nil
	}
	return tb
}

// tables returns the current tables, building them after a (re)commit.
// Call with t.mu held.
func (t *Tables) tables(op string, idx uint32) (*tables, error) {
	gen := t.h.Generation()
	if tb := t.tab.Load(); tb != nil && tb.gen == gen {
		return tb, nil
	}
	if !t.h.Committed() {
		return nil, &Error{Op: op, Reason: ReasonNotCommitted, Index: idx}
	}
	tb := &tables{gen: gen,
		arp: make([]atomic.Uint64, t.h.Count(hmc.ARP)),
		ah:  make([]atomic.Pointer[AH], t.h.Count(hmc.FSIAV)),
		mg:  make([]atomic.Pointer[MG], t.h.Count(hmc.FSIMC)),
	}
	m := map[mgKey]uint32{}
	tb.mgByIP.Store(&m)
	t.tab.Store(tb)
	return tb, nil
}

// writeObj writes b to object idx of type ty.
func (t *Tables) writeObj(op string, ty hmc.ObjType, idx uint32, b []byte) error {
	if t.h.Size(ty) < uint32(len(b)) {
		return &Error{Op: op, Reason: ReasonHMC, Index: idx,
			Err: fmt.Errorf("%v object size %d < %d", ty, t.h.Size(ty), len(b))}
	}
	a, err := t.h.ObjectIOVA(ty, idx)
	if err == nil {
		err = t.mem.Write(a, b)
	}
	if err != nil {
		return &Error{Op: op, Reason: ReasonHMC, Index: idx, Err: err}
	}
	return nil
}

// MACToU64 packs a MAC the way the driver does (ether_addr_to_u64: mac[0] in
// bits 47:40), the format of MANAGE_ARP qw2 [47:0] and, shifted left by 16,
// of the AH and QP-context MAC fields (docs/hw-controlpath.md "MAC and IP
// byte order").
func MACToU64(mac [6]byte) uint64 {
	var v uint64
	for _, b := range mac {
		v = v<<8 | uint64(b)
	}
	return v
}

// MACFromU64 unpacks a MAC packed by MACToU64 (bits 47:0).
func MACFromU64(v uint64) [6]byte {
	var mac [6]byte
	for i := 5; i >= 0; i-- {
		mac[i] = byte(v)
		v >>= 8
	}
	return mac
}

// ARP cache entry: in HMC (the ARP object, 8 bytes) and in the table, one
// word with the MAC in [47:0] (MACToU64), valid in b48, permanent in b49.
const (
	arpMACMask   = 1<<48 - 1
	arpValid     = 1 << 48
	arpPermanent = 1 << 49
)

// SetARP adds or replaces ARP cache entry idx (MANAGE_ARP with ENTRYVALID,
// docs/hw-controlpath.md "ARP, AH and multicast WQEs"): the MAC of a
// destination that QP contexts (ARPIDX) and AHs (ARPINDEX) refer to.
func (t *Tables) SetARP(idx uint32, mac [6]byte, permanent bool) error {
	w := MACToU64(mac) | arpValid
	if permanent {
		w |= arpPermanent
	}
	return t.putARP("SetARP", idx, w)
}

// DelARP invalidates ARP cache entry idx (MANAGE_ARP without ENTRYVALID).
// Deleting an invalid entry succeeds.
func (t *Tables) DelARP(idx uint32) error { return t.putARP("DelARP", idx, 0) }

func (t *Tables) putARP(op string, idx uint32, w uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb, err := t.tables(op, idx)
	if err != nil {
		return err
	}
	if idx >= uint32(len(tb.arp)) {
		return &Error{Op: op, Reason: ReasonIndexRange, Index: idx}
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], w)
	if err := t.writeObj(op, hmc.ARP, idx, b[:]); err != nil {
		return err
	}
	tb.arp[idx].Store(w)
	return nil
}

// ARP returns the MAC of ARP cache entry idx, if valid.
func (t *Tables) ARP(idx uint32) ([6]byte, bool) {
	mac, _, ok := t.ARPEntry(idx)
	return mac, ok
}

// ARPEntry returns ARP cache entry idx with its permanent flag, if valid.
func (t *Tables) ARPEntry(idx uint32) (mac [6]byte, permanent, ok bool) {
	tb := t.load()
	if tb == nil || idx >= uint32(len(tb.arp)) {
		return mac, false, false
	}
	w := tb.arp[idx].Load()
	if w&arpValid == 0 {
		return mac, false, false
	}
	return MACFromU64(w & arpMACMask), w&arpPermanent != 0, true
}

// AH is an address handle (CREATE_ADDR_HANDLE, docs/hw-controlpath.md "ARP,
// AH and multicast WQEs", uda.c:irdma_sc_access_ah). IP addresses are four
// 32-bit words in the driver's order, each a host-order value of the
// big-endian address word (the driver ntohl()s them, docs/hw-controlpath.md
// "MAC and IP byte order"); an IPv4 address is word 3 — where the WQE carries
// it (qw4 / qw6 [31:0]) — with words 0..2 zero.
type AH struct {
	PD         uint32    // PDINDEXLO | PDINDEXHI << 16
	DestIP     [4]uint32 // qw5 [63:32], qw5 [31:0], qw4 [63:32], qw4 [31:0]
	SrcIP      [4]uint32 // qw7 / qw6 likewise
	IPv4       bool      // IPV4VALID
	SrcMAC     [6]byte   // qw0 [63:16]
	ARPIndex   uint16    // ARPINDEX: the destination MAC is ARP(ARPIndex)
	VLANTag    uint16    // VLANTAG, priority in [15:13]
	InsertVLAN bool      // INSERTVLANTAG
	TC         uint8     // traffic class / TOS
	FlowLabel  uint32    // FLOWLABEL [19:0]
	HopLimit   uint8     // HOPLIMIT (TTL for IPv4)
	Loopback   bool      // DOLOOPBACK
}

// Dest returns the destination address.
func (a *AH) Dest() netip.Addr { return wordsToAddr(a.DestIP, a.IPv4) }

// Src returns the source address.
func (a *AH) Src() netip.Addr { return wordsToAddr(a.SrcIP, a.IPv4) }

func wordsToAddr(w [4]uint32, ipv4 bool) netip.Addr {
	if ipv4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], w[3])
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	for i, x := range w {
		binary.BigEndian.PutUint32(b[4*i:], x)
	}
	return netip.AddrFrom16(b)
}

// AddrToWords converts an address to the driver's word order (see AH); an
// IPv4 (or IPv4-mapped) address gives ipv4 true and the address in word 3.
func AddrToWords(a netip.Addr) (w [4]uint32, ipv4 bool) {
	if a.Is4() || a.Is4In6() {
		b := a.Unmap().As4()
		w[3] = binary.BigEndian.Uint32(b[:])
		return w, true
	}
	b := a.As16()
	for i := range w {
		w[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return w, false
}

// HMC FSIAV object layout (our own; 64 bytes, docs/hmc.md):
//
//	+0  u64 source MAC [47:0] (MACToU64) | b48 valid | b49 IPv4 |
//	        b50 insert VLAN | b51 loopback
//	+8  u32 PD
//	+12 u16 VLAN tag
//	+14 u16 ARP index
//	+16 u32 flow label
//	+20 u8  TC, +21 u8 hop limit, +22 u16 0
//	+24 4×u32 destination IP words
//	+40 4×u32 source IP words
//	+56 u64 0
const (
	ahRecordSize = 64
	ahValid      = 1 << 48
	ahIPv4       = 1 << 49
	ahInsertVLAN = 1 << 50
	ahLoopback   = 1 << 51
)

func (a *AH) encode(b []byte, valid bool) {
	_ = b[ahRecordSize-1]
	clear(b[:ahRecordSize])
	if !valid {
		return
	}
	le := binary.LittleEndian
	w := MACToU64(a.SrcMAC) | ahValid
	if a.IPv4 {
		w |= ahIPv4
	}
	if a.InsertVLAN {
		w |= ahInsertVLAN
	}
	if a.Loopback {
		w |= ahLoopback
	}
	le.PutUint64(b[0:], w)
	le.PutUint32(b[8:], a.PD)
	le.PutUint16(b[12:], a.VLANTag)
	le.PutUint16(b[14:], a.ARPIndex)
	le.PutUint32(b[16:], a.FlowLabel&0xfffff)
	b[20] = a.TC
	b[21] = a.HopLimit
	for i := range 4 {
		le.PutUint32(b[24+4*i:], a.DestIP[i])
		le.PutUint32(b[40+4*i:], a.SrcIP[i])
	}
}

// AddAH creates address handle idx (CREATE_ADDR_HANDLE). idx must be below
// the committed FSIAV count and not in use; the ARP index must be below
// the ARP count (the entry itself may be added later).
func (t *Tables) AddAH(idx uint32, a AH) error { return t.putAH("AddAH", idx, &a, false) }

// ModifyAH replaces valid address handle idx (MODIFY_ADDR_HANDLE; not
// issued by upstream irdma).
func (t *Tables) ModifyAH(idx uint32, a AH) error { return t.putAH("ModifyAH", idx, &a, true) }

// DelAH destroys address handle idx (DESTROY_ADDR_HANDLE).
func (t *Tables) DelAH(idx uint32) error { return t.putAH("DelAH", idx, nil, true) }

func (t *Tables) putAH(op string, idx uint32, a *AH, mustExist bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb, err := t.tables(op, idx)
	if err != nil {
		return err
	}
	if idx >= uint32(len(tb.ah)) {
		return &Error{Op: op, Reason: ReasonIndexRange, Index: idx}
	}
	exists := tb.ah[idx].Load() != nil
	switch {
	case mustExist && !exists:
		return &Error{Op: op, Reason: ReasonNotValid, Index: idx}
	case !mustExist && exists:
		return &Error{Op: op, Reason: ReasonAlreadyValid, Index: idx}
	}
	var b [ahRecordSize]byte
	if a != nil {
		if a.PD >= t.maxPD {
			return &Error{Op: op, Reason: ReasonBadPD, Index: idx}
		}
		if uint32(a.ARPIndex) >= uint32(len(tb.arp)) {
			return &Error{Op: op, Reason: ReasonBadARPIndex, Index: idx}
		}
		a.FlowLabel &= 0xfffff
		a.encode(b[:], true)
	}
	if err := t.writeObj(op, hmc.FSIAV, idx, b[:]); err != nil {
		return err
	}
	tb.ah[idx].Store(a)
	return nil
}

// AH returns address handle idx, if valid.
func (t *Tables) AH(idx uint32) (AH, bool) {
	tb := t.load()
	if tb == nil || idx >= uint32(len(tb.ah)) {
		return AH{}, false
	}
	if a := tb.ah[idx].Load(); a != nil {
		return *a, true
	}
	return AH{}, false
}

// ResolveAH returns address handle idx with the destination MAC from its
// ARP entry — what the UD send path needs. It reports AEInvalidAHEntry or
// AEInvalidARPEntry (with ok false) when either is missing.
func (t *Tables) ResolveAH(idx uint32) (a AH, destMAC [6]byte, ae uint16, ok bool) {
	a, ok = t.AH(idx)
	if !ok {
		return a, destMAC, AEInvalidAHEntry, false
	}
	destMAC, ok = t.ARP(uint32(a.ARPIndex))
	if !ok {
		return a, destMAC, AEInvalidARPEntry, false
	}
	return a, destMAC, 0, true
}

package ah

import (
	"encoding/binary"
	"maps"

	"github.com/irdma-emu/irdma-emu/emu/hmc"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// MGEntries is the number of QPs in a multicast group context
// (IRDMA_MAX_MGS_PER_CTX).
const MGEntries = 8

// MGEntry is one entry of a multicast group context (uda.c:
// irdma_create_mg_ctx; uda_d.h IRDMA_UDA_MGCTX_*).
type MGEntry struct {
	QPID     uint32 // QPID [17:0]
	Valid    bool   // VALIDENT b31
	DestPort uint16 // DESTPORT [47:32]
}

// MG context entry fields.
const (
	mgQPIDMask     = 1<<18 - 1
	mgValidEnt     = 1 << 31
	mgDestPortShft = 32
	mgContextSize  = MGEntries * 8
)

func (e MGEntry) word() uint64 {
	if !e.Valid {
		return 0
	}
	return uint64(e.QPID&mgQPIDMask) | mgValidEnt | uint64(e.DestPort)<<mgDestPortShft
}

func entryFromWord(w uint64) MGEntry {
	return MGEntry{QPID: uint32(w & mgQPIDMask), Valid: w&mgValidEnt != 0,
		DestPort: uint16(w >> mgDestPortShft)}
}

// DecodeMGContext decodes the 64-byte MG context the driver builds for
// CREATE/MODIFY/DESTROY_MCAST_GRP (the buffer at qw4): eight qwords with
// QPID [17:0], VALIDENT b31, DESTPORT [47:32]. The driver packs the valid
// entries first. Short input decodes as far as it goes.
func DecodeMGContext(b []byte) [MGEntries]MGEntry {
	var e [MGEntries]MGEntry
	for i := range e {
		if len(b) < 8*(i+1) {
			break
		}
		e[i] = entryFromWord(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return e
}

// ReadMGContext reads and decodes the MG context at iova.
func (t *Tables) ReadMGContext(iova hostmem.IOVA) ([MGEntries]MGEntry, error) {
	var b [mgContextSize]byte
	if err := t.mem.Read(iova, b[:]); err != nil {
		return [MGEntries]MGEntry{}, err
	}
	return DecodeMGContext(b[:]), nil
}

// MG is a multicast group (CREATE_MCAST_GRP, docs/hw-controlpath.md "ARP, AH
// and multicast WQEs", uda.c:irdma_access_mcast_grp).
type MG struct {
	DestMAC   [6]byte   // qw0 (MACToU64 order)
	VLANID    uint16    // VLANID qw2 [43:32]
	VLANValid bool      // VLANVALID
	IPv4      bool      // IPV4VALID
	DestIP    [4]uint32 // qw7 / qw6 words, as for AH (IPv4 in word 3)
	QSHandle  uint16    // QS_HANDLE qw2 [9:0]
	Entries   [MGEntries]MGEntry
}

// QPs appends the QP ids of the valid entries to dst.
func (g *MG) QPs(dst []uint32) []uint32 {
	for _, e := range g.Entries {
		if e.Valid {
			dst = append(dst, e.QPID)
		}
	}
	return dst
}

// HMC FSIMC object layout (our own; 128 bytes, docs/hmc.md):
//
//	+0  u64 destination MAC [47:0] | b48 valid | b49 IPv4 | b50 VLAN valid
//	+8  u16 VLAN ID, +10 u16 QS handle, +12 u32 0
//	+16 4×u32 destination IP words
//	+32 8×u64 MG context entries in the CQP format (QPID, VALIDENT, DESTPORT)
//	+96 32 bytes 0
const (
	mgRecordSize = 128
	mgValid      = 1 << 48
	mgIPv4       = 1 << 49
	mgVLANValid  = 1 << 50
)

func (g *MG) encode(b []byte) {
	_ = b[mgRecordSize-1]
	clear(b[:mgRecordSize])
	if g == nil {
		return
	}
	le := binary.LittleEndian
	w := MACToU64(g.DestMAC) | mgValid
	if g.IPv4 {
		w |= mgIPv4
	}
	if g.VLANValid {
		w |= mgVLANValid
	}
	le.PutUint64(b[0:], w)
	le.PutUint16(b[8:], g.VLANID&0xfff)
	le.PutUint16(b[10:], g.QSHandle&0x3ff)
	for i := range 4 {
		le.PutUint32(b[16+4*i:], g.DestIP[i])
	}
	for i, e := range g.Entries {
		le.PutUint64(b[32+8*i:], e.word())
	}
}

// mgKey indexes groups by destination address for LookupMG.
type mgKey struct {
	ip   [4]uint32
	ipv4 bool
}

// CreateMG creates multicast group idx (CREATE_MCAST_GRP); idx must be
// below the committed FSIMC count and not in use.
func (t *Tables) CreateMG(idx uint32, g MG) error { return t.putMG("CreateMG", idx, &g, false) }

// ModifyMG replaces valid group idx (MODIFY_MCAST_GRP: the driver sends the
// whole context on every attach and detach).
func (t *Tables) ModifyMG(idx uint32, g MG) error { return t.putMG("ModifyMG", idx, &g, true) }

// DestroyMG destroys group idx (DESTROY_MCAST_GRP).
func (t *Tables) DestroyMG(idx uint32) error { return t.putMG("DestroyMG", idx, nil, true) }

func (t *Tables) putMG(op string, idx uint32, g *MG, mustExist bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb, err := t.tables(op, idx)
	if err != nil {
		return err
	}
	if idx >= uint32(len(tb.mg)) {
		return &Error{Op: op, Reason: ReasonIndexRange, Index: idx}
	}
	old := tb.mg[idx].Load()
	switch {
	case mustExist && old == nil:
		return &Error{Op: op, Reason: ReasonNotValid, Index: idx}
	case !mustExist && old != nil:
		return &Error{Op: op, Reason: ReasonAlreadyValid, Index: idx}
	}
	if g != nil {
		g.VLANID &= 0xfff
		g.QSHandle &= 0x3ff
		for i := range g.Entries {
			if g.Entries[i].Valid {
				g.Entries[i].QPID &= mgQPIDMask
			} else {
				g.Entries[i] = MGEntry{}
			}
		}
	}
	var b [mgRecordSize]byte
	g.encode(b[:])
	if err := t.writeObj(op, hmc.FSIMC, idx, b[:]); err != nil {
		return err
	}
	tb.mg[idx].Store(g)
	// Rebuild the address index (copy on write; few groups, rare changes).
	m := maps.Clone(*tb.mgByIP.Load())
	if old != nil {
		k := mgKey{old.DestIP, old.IPv4}
		if m[k] == idx {
			delete(m, k)
		}
	}
	if g != nil {
		m[mgKey{g.DestIP, g.IPv4}] = idx
	}
	tb.mgByIP.Store(&m)
	return nil
}

// MG returns multicast group idx, if valid.
func (t *Tables) MG(idx uint32) (MG, bool) {
	tb := t.load()
	if tb == nil || idx >= uint32(len(tb.mg)) {
		return MG{}, false
	}
	if g := tb.mg[idx].Load(); g != nil {
		return *g, true
	}
	return MG{}, false
}

// LookupMG finds the group whose destination address is dest (driver word
// order, see AH) — what the receive path does for a multicast packet. If
// two groups share an address the one created or modified last wins.
func (t *Tables) LookupMG(dest [4]uint32, ipv4 bool) (uint32, MG, bool) {
	tb := t.load()
	if tb == nil {
		return 0, MG{}, false
	}
	idx, ok := (*tb.mgByIP.Load())[mgKey{dest, ipv4}]
	if !ok {
		return 0, MG{}, false
	}
	g := tb.mg[idx].Load()
	if g == nil {
		return 0, MG{}, false
	}
	return idx, *g, true
}

package guest

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// PingpongDest is one side's record in the out-of-band TCP exchange of
// rdma-core's ibv_rc_pingpong / ibv_uc_pingpong / ibv_ud_pingpong (port
// 18515): "LLLL:QQQQQQ:PPPPPP:GGGG…" in hex, NUL-terminated, 52 bytes, sent
// in one write and read in one read. The GID's 32 hex digits are its 16
// bytes in wire order.
type PingpongDest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID [16]byte
}

// PingpongRecordLen is the record's size on the wire, NUL included.
const PingpongRecordLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// MappedGID is the RoCEv2 GID of an IPv4 address (::ffff:a.b.c.d), the
// entry rxe and irdma put at GID index 1 for the port's IPv4 address.
func MappedGID(a netip.Addr) [16]byte { return a.As16() }

// Marshal returns the 52-byte record.
func (d PingpongDest) Marshal() []byte {
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xffffff, d.PSN&0xffffff, hex.EncodeToString(d.GID[:]))
	return append([]byte(s), 0)
}

// ParsePingpongDest parses a record as rc_pingpong's sscanf does (hex,
// either case).
func ParsePingpongDest(b []byte) (PingpongDest, error) {
	s := strings.TrimRight(string(b), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return PingpongDest{}, fmt.Errorf("pingpong record %q: want LID:QPN:PSN:GID", s)
	}
	var d PingpongDest
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil {
			return PingpongDest{}, fmt.Errorf("pingpong record %q: %v", s, err)
		}
		v[i] = n
	}
	d.LID, d.QPN, d.PSN = uint16(v[0]), uint32(v[1]), uint32(v[2])
	g, err := hex.DecodeString(f[3])
	if err != nil {
		return PingpongDest{}, fmt.Errorf("pingpong record %q: GID: %v", s, err)
	}
	copy(d.GID[:], g)
	return d, nil
}

// GIDAddr returns the GID as an address (an IPv4-mapped GID unmaps to
// IPv4).
func (d PingpongDest) GIDAddr() netip.Addr { return netip.AddrFrom16(d.GID).Unmap() }

package netport

import "fmt"

// IBMTU is an InfiniBand path MTU in bytes: 256, 512, 1024, 2048 or 4096,
// or 0 for none.
type IBMTU int

// The IB MTUs.
const (
	IBMTU256  IBMTU = 256
	IBMTU512  IBMTU = 512
	IBMTU1024 IBMTU = 1024
	IBMTU2048 IBMTU = 2048
	IBMTU4096 IBMTU = 4096
)

// Enum returns the verbs encoding (enum ib_mtu: IB_MTU_256 = 1 …
// IB_MTU_4096 = 5) that ibv_query_port reports as active_mtu, 0 for none.
func (m IBMTU) Enum() uint8 {
	switch m {
	case IBMTU256:
		return 1
	case IBMTU512:
		return 2
	case IBMTU1024:
		return 3
	case IBMTU2048:
		return 4
	case IBMTU4096:
		return 5
	}
	return 0
}

// String returns the size, or "none".
func (m IBMTU) String() string {
	if m == 0 {
		return "none"
	}
	return fmt.Sprint(int(m))
}

// RoCEv2Overhead is what a RoCEv2 packet adds to its payload as ActiveMTU
// counts it: rxe's RXE_MAX_HDR_LENGTH, 80 bytes (eth_mtu_int_to_enum).
// irdma itself passes the netdev MTU to ib_mtu_int_to_enum without
// subtracting anything; the two agree for 1500 (1024) and for jumbo MTUs
// (4096) and differ only for netdev MTUs within 80 bytes above an IB MTU
// (4096..4175 gives irdma 4096 and rxe 2048), where a 4096-byte payload
// would not fit anyway. We follow rxe so that both ends of a link pick the
// same active MTU. (The longest RoCEv2 header chain, IPv6 + UDP + BTH +
// RETH + ImmDt + ICRC, is 84 bytes; rxe accepts that corner.)
const RoCEv2Overhead = 80

// ActiveMTU returns the port's active MTU for a netdev MTU: the largest IB
// MTU not above mtu − RoCEv2Overhead (1500 → 1024, 9000 → 4096, loopback's
// 65536 → 4096), or 0 when even 256 does not fit.
func ActiveMTU(mtu int) IBMTU {
	n := mtu - RoCEv2Overhead
	switch {
	case n >= 4096:
		return IBMTU4096
	case n >= 2048:
		return IBMTU2048
	case n >= 1024:
		return IBMTU1024
	case n >= 512:
		return IBMTU512
	case n >= 256:
		return IBMTU256
	}
	return 0
}

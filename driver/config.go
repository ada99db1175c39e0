package driver

import (
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Netdev is the network interface the RDMA function sits on: what irdma
// reads from its net_device (dev_addr, mtu, the inet/inet6 address lists,
// netif_carrier_ok && netif_running). The daemon implements it over
// netlink; tests use a StaticNetdev.
type Netdev interface {
	// MAC is the interface's Ethernet address (net_device dev_addr).
	MAC() net.HardwareAddr
	// MTU is the interface MTU in bytes.
	MTU() int
	// Addrs are the IPv4 and IPv6 addresses configured on the interface,
	// from which the RoCE v2 GID table is built.
	Addrs() []netip.Addr
	// LinkUp reports carrier and administrative state together.
	LinkUp() bool
}

// NetdevSpeed is optionally implemented by a Netdev to report its link
// speed (ib_get_eth_speed reads ethtool's); without it 100 Gb/s is
// assumed (E810).
type NetdevSpeed interface {
	SpeedMbps() int
}

// StaticNetdev is a Netdev with fixed values.
type StaticNetdev struct {
	HWAddr  net.HardwareAddr
	MTUSize int
	IPs     []netip.Addr
	Down    bool
	Mbps    int
}

func (s *StaticNetdev) MAC() net.HardwareAddr { return s.HWAddr }
func (s *StaticNetdev) MTU() int              { return s.MTUSize }
func (s *StaticNetdev) Addrs() []netip.Addr   { return s.IPs }
func (s *StaticNetdev) LinkUp() bool          { return !s.Down }

// SpeedMbps implements NetdevSpeed (0 means the default).
func (s *StaticNetdev) SpeedMbps() int { return s.Mbps }

// rsrcLimitsQP is hw.c:rsrc_limits_table[].qplimit, indexed by limits_sel.
var rsrcLimitsQP = [...]uint32{128, 1 << 10, 2 << 10, 4 << 10, 16 << 10, 64 << 10, 128 << 10, 256 << 10}

// LimitsSelQPs returns the QP limit irdma's limits_sel module parameter
// selects (hw.c rsrc_limits_table, 0..7); out-of-range selectors give the
// GEN_2 default, 7.
func LimitsSelQPs(sel int) uint32 {
	if sel < 0 || sel >= len(rsrcLimitsQP) {
		sel = DefaultLimitsSel
	}
	return rsrcLimitsQP[sel]
}

// DefaultLimitsSel is the limits_sel the GEN_2 PF driver uses
// (icrdma_if.c / main.c irdma_fill_device_info: rf->limits_sel = 7).
const DefaultLimitsSel = 7

// Config configures a driver instance.
type Config struct {
	// Profile is the device generation's constants (hw_attrs); the zero
	// value means profile.GEN2().
	Profile profile.Profile
	// Clock runs every driver timeout (CQP completions, PE ready, SQD
	// suspend). Nil means a wall clock.
	Clock timing.Clock
	// Logger receives driver diagnostics; nil means none.
	Logger *zap.Logger
	// Netdev supplies MAC, MTU, addresses and link state. Required.
	Netdev Netdev
	// QPLimit is the QP count the HMC setup asks for
	// (rsrc_limits_table[limits_sel].qplimit); 0 means LimitsSelQPs(DefaultLimitsSel).
	QPLimit uint32
	// MSIXVectors is how many MSI-X vectors the driver uses (vector 0
	// carries the AEQ and CEQ 0; vector i CEQ i); 0 means 2. Vectors the
	// device does not provide (nil channel) are not used.
	MSIXVectors int
	// CQPTimeout bounds each CQP command's completion; 0 means 5 s
	// (CQP_COMPL_WAIT_TIME_MS × CQP_TIMEOUT_THRESHOLD order of magnitude).
	CQPTimeout time.Duration
	// PushMode allocates push pages for user QPs on the move to RTS
	// (iwdev->push_mode; default off, as upstream).
	PushMode bool
	// HMCFnID is the PCI function number (PCI_FUNC(devfn)); 0 for the PF.
	HMCFnID uint16
	// VSINum is the VSI the function uses (iwdev->vsi_num).
	VSINum uint16
}

const (
	defaultCQPTimeout  = 5 * time.Second
	defaultMSIX        = 2
	peReadyTimeout     = 14 * time.Second // ctrl.c:irdma_wait_pe_ready: 14 polls of 1 s
	suspendTimeout     = 5 * time.Second  // IRDMA_EVENT_TIMEOUT_MS
	pollIntervalMin    = 20 * time.Microsecond
	pollIntervalMax    = time.Millisecond
	defaultLinkSpeedMb = 100000
)

package daemon

import (
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/internal/netport"
)

// netdev is the net_device the driver reads: the port model, whose carrier
// an operator can override (`link down` on the control socket) as pulling
// the cable would. The driver's QUERY_PORT and port events, the sysfs tree
// and the link all read the port state through it, so they agree.
type netdev struct {
	port       *netport.Port
	forcedDown atomic.Bool
}

var _ driver.Netdev = (*netdev)(nil)

func (n *netdev) MAC() net.HardwareAddr { return n.port.MAC() }
func (n *netdev) MTU() int              { return n.port.MTU() }
func (n *netdev) Addrs() []netip.Addr   { return n.port.Addrs() }

// LinkUp is the carrier as the device sees it: the interface's (netport),
// unless forced down.
func (n *netdev) LinkUp() bool { return !n.forcedDown.Load() && n.port.LinkUp() }

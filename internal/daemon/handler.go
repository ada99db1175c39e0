package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// DefaultHandler is the attach handler a daemon serves when its Config names
// none: the uverbs layer over the daemon's driver, with its doorbell pages
// polled by the data plane and neighbours resolved through the port model.
func DefaultHandler(d *Daemon) (attach.Handler, error) {
	p, err := uverbs.NewProvider(d.Driver(), uverbs.Config{Device: d.Name(), Mem: d.Device().Mem(),
		Resolver: Resolver{d}, Logger: d.log.Named("uverbs")})
	if err != nil {
		return nil, err
	}
	d.Engine().AddDoorbellSource(p)
	return uverbsHandler{p}, nil
}

// uverbsHandler is the uverbs provider with the daemon's shutdown step.
// Port events reach the provider's PortEvent (PortEventSink) directly.
type uverbsHandler struct{ *uverbs.Provider }

// Quiesce tells every user context the device is going away. The provider
// has no way yet to move its contexts' QPs to the error state on its own;
// until it has (a Quiesce of its own, which is then used), the QPs go to
// the error state — with flush completions written into the programs' CQ
// rings, which are the programs' memory — when the attach server closes
// each session and the driver destroys them (irdma_destroy_qp moves a live
// QP to error first).
func (h uverbsHandler) Quiesce(ctx context.Context) error {
	if q, ok := any(h.Provider).(Quiescer); ok {
		return q.Quiesce(ctx)
	}
	h.Provider.PortEvent(driver.AsyncEvent{Type: EventDeviceFatal})
	return nil
}

// ResolveTimeout bounds a neighbour lookup for uverbs (rdma_resolve_ip's
// timeout as ib_resolve_eth_dmac uses it is of this order).
const ResolveTimeout = 3 * time.Second

// Resolver answers the uverbs layer's neighbour lookups
// (rdma_addr_find_l2_eth_by_grh) through the daemon's port model.
type Resolver struct{ D *Daemon }

var _ uverbs.Resolver = Resolver{}

// Resolve implements uverbs.Resolver: the next hop's MAC from the
// neighbour table (resolving it if needed), and the default hop limit (the
// port model does not read the route's own).
func (r Resolver) Resolve(src, dst netip.Addr) (net.HardwareAddr, uint8, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	mac, err := r.D.Resolve(ctx, dst)
	if err != nil {
		var errno syscall.Errno
		switch {
		case errors.As(err, &errno):
			return nil, 0, errno
		case ctx.Err() != nil:
			return nil, 0, syscall.ETIMEDOUT
		default:
			return nil, 0, syscall.EHOSTUNREACH
		}
	}
	return net.HardwareAddr(mac[:]), 64, nil
}

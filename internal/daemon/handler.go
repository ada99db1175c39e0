package daemon

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// DefaultHandler is the attach handler a daemon serves when its Config names
// none: the uverbs layer over the daemon's driver, with its doorbell pages
// polled by the data plane and neighbours resolved through the port model.
func DefaultHandler(d *Daemon) (attach.Handler, error) {
	p, err := uverbs.NewProvider(d.Driver(), uverbs.Config{Device: d.Name(), Mem: d.Device().Mem(),
		Resolver: Resolver{d}, Logger: d.log.Named("uverbs"), DataPlane: d.Engine()})
	if err != nil {
		return nil, err
	}
	d.Engine().AddDoorbellSource(p)
	cma, err := newRdmaCM(d, cmManager(d))
	if err != nil {
		return nil, err
	}
	return muxHandler{uverbsHandler{p}, cma}, nil
}

// uverbsHandler is the uverbs provider with the daemon's shutdown step.
// Port events reach the provider's PortEvent (PortEventSink) directly.
type uverbsHandler struct{ *uverbs.Provider }

// Quiesce is the provider's: every user QP to the error state (flush
// completions in the programs' CQs), then IB_EVENT_DEVICE_FATAL to every
// context.
func (h uverbsHandler) Quiesce(ctx context.Context) error { return h.Provider.Quiesce(ctx) }

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

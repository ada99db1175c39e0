package daemon

import (
	"context"
	"net/netip"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/internal/netport"
	"github.com/irdma-emu/irdma-emu/rdmacm"
)

// newRdmaCM is the device's RDMA CM (rdmacm), served on the attach socket
// to connections whose HELLO says attach.HelloRdmaCM: a program's
// /dev/infiniband/rdma_cm follows the device its uverbs socket names
// (`exec --device`), docs/cm.md.
func newRdmaCM(d *Daemon, mgr *cm.Manager) (*rdmacm.Provider, error) {
	attr, err := d.drv.QueryDevice()
	if err != nil {
		return nil, err
	}
	return rdmacm.NewProvider(rdmacm.Config{
		Device:   d.Name(),
		NodeGUID: beUint64(attr.NodeGUID),
		Port:     func() netport.Info { return d.port.Info() },
		GIDs: func() [][16]byte {
			var out [][16]byte
			for _, g := range d.drv.GIDTable() {
				out = append(out, [16]byte(g.GID))
			}
			return out
		},
		Resolve: d.resolveLikeUverbs,
		CM:      mgr,
		Logger:  d.log.Named("rdmacm"),
	})
}

// resolveLikeUverbs is the next hop's MAC for ip as uverbs computes it
// for a QP's or AH's address vector (uverbs resolveDMAC, after
// ib_resolve_eth_dmac): the device's own MAC for its own and loopback
// addresses, else the neighbour table. Everyone who puts ip in the
// driver's ARP table must agree on its MAC: a second MAC for the same IP
// replaces the entry (irdma_add_arp) and fails the QPs holding the old
// index with IRDMA_AE_INVALID_ARP_ENTRY.
func (d *Daemon) resolveLikeUverbs(ctx context.Context, ip netip.Addr) ([6]byte, error) {
	ip = ip.Unmap()
	t := d.drv.GIDTable()
	local := ip.IsLoopback()
	for _, e := range t {
		local = local || e.Addr.Unmap() == ip
	}
	if local && len(t) > 0 {
		g := t[0].GID // the EUI-64 link-local GID of the netdev's MAC
		return [6]byte{g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]}, nil
	}
	return d.Resolve(ctx, ip)
}

// muxHandler serves both device files of a program on one attach socket:
// uverbs for /dev/infiniband/uverbsN, the RDMA CM for
// /dev/infiniband/rdma_cm.
type muxHandler struct {
	uverbsHandler
	cma *rdmacm.Provider
}

// Open implements attach.Handler.
func (h muxHandler) Open(p *attach.Peer) (attach.Session, attach.Welcome, error) {
	if p.Hello.Flags&attach.HelloRdmaCM != 0 {
		return h.cma.Open(p)
	}
	s, w, err := h.uverbsHandler.Open(p)
	w.Features |= attach.FeatureRdmaCM
	return s, w, err
}

// Quiesce tells every RDMA CM id the device is going
// (RDMA_CM_EVENT_DEVICE_REMOVAL) and lets the programs read it, then
// quiesces uverbs.
func (h muxHandler) Quiesce(ctx context.Context) error {
	h.cma.Remove(ctx)
	return h.uverbsHandler.Quiesce(ctx)
}

// RdmaCM returns the device's RDMA CM, or nil when the daemon's handler is
// not the default one.
func (d *Daemon) RdmaCM() *rdmacm.Provider {
	if h, ok := d.handler.(muxHandler); ok {
		return h.cma
	}
	return nil
}

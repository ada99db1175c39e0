package daemon

import (
	"fmt"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/cm/gsi"
)

// The communication manager of the device (docs/cm.md): QP1 driven
// through the driver half by the GSI agent, and the IBTA CM on it, as the
// kernel's ib_mad and ib_cm sit on irdma. The RDMA CM (ucma) is its
// consumer.

// startCM brings QP1 up and starts the CM on it. It runs once the data
// plane is up, so that QP1's transport exists for the first MAD.
func (d *Daemon) startCM() error {
	a, err := gsi.New(gsi.Config{Driver: d.drv, Mem: d.dev.Mem(), Resolve: d.Resolve})
	if err != nil {
		return fmt.Errorf("cm: %w", err)
	}
	attr, err := d.drv.QueryDevice()
	if err != nil {
		_ = a.Close()
		return fmt.Errorf("cm: %w", err)
	}
	var guid uint64
	for _, b := range attr.NodeGUID {
		guid = guid<<8 | uint64(b)
	}
	m, err := cm.NewManager(cm.Config{Transport: a, Clock: d.clock, CAGUID: guid, Port: 1, LookupGID: a.LookupGID})
	if err != nil {
		_ = a.Close()
		return fmt.Errorf("cm: %w", err)
	}
	a.SetReceiver(m.Deliver)
	d.gsi, d.cm = a, m
	return nil
}

// stopCM destroys every CM ID (sending the DREQs and REJs they owe while
// the data plane still runs) and QP1 with its resources.
func (d *Daemon) stopCM() error {
	if d.cm == nil {
		return nil
	}
	d.cm.Close()
	d.gsi.SetReceiver(nil)
	return d.gsi.Close()
}

// CM returns the device's communication manager: the RDMA CM creates its
// IDs there (cm.Manager.CreateID). After Close its methods fail with
// cm.ErrClosed.
func (d *Daemon) CM() *cm.Manager { return d.cm }

// GSI returns the agent that owns QP1 (its GID lookup and counters).
func (d *Daemon) GSI() *gsi.Agent { return d.gsi }

// CMStats are the CM's and the GSI agent's counters in `irdma-emu stats`
// (docs/cm.md names each).
type CMStats struct {
	MADsReceived      uint64   `json:"mads_received"`
	MADsSent          uint64   `json:"mads_sent"`
	Retransmits       uint64   `json:"retransmits"`
	Timeouts          uint64   `json:"timeouts"`
	DropTruncated     uint64   `json:"drop_truncated"`
	DropBadHeader     uint64   `json:"drop_bad_header"`
	DropBadAttribute  uint64   `json:"drop_bad_attribute"`
	DropUnknownCommID uint64   `json:"drop_unknown_comm_id"`
	AfterDestroy      uint64   `json:"after_destroy"`
	DropUnexpected    uint64   `json:"drop_unexpected"`
	DropDuplicate     uint64   `json:"drop_duplicate"`
	DropNoResources   uint64   `json:"drop_no_resources"`
	SendErrors        uint64   `json:"send_errors"`
	REJSent           uint64   `json:"rej_sent"`
	REJReceived       uint64   `json:"rej_received"`
	StaleRejected     uint64   `json:"stale_rejected"`
	IDs               uint64   `json:"ids"`
	Timewaits         uint64   `json:"timewaits"`
	GSI               GSIStats `json:"gsi"`
}

// GSIStats are QP1's counters.
type GSIStats struct {
	Received     uint64 `json:"received"`
	Sent         uint64 `json:"sent"`
	SendErrors   uint64 `json:"send_errors"`
	NoSendBuffer uint64 `json:"no_send_buffer"`
	RecvErrors   uint64 `json:"recv_errors"`
	Short        uint64 `json:"short"`
	ResolveFails uint64 `json:"resolve_fails"`
	AHs          uint64 `json:"ahs"`
	Resets       uint64 `json:"resets"`
}

func (d *Daemon) cmStats() CMStats {
	if d.cm == nil {
		return CMStats{}
	}
	s, g := d.cm.Stats(), d.gsi.Stats()
	return CMStats{MADsReceived: s.MADsReceived, MADsSent: s.MADsSent, Retransmits: s.Retransmits, Timeouts: s.Timeouts,
		DropTruncated: s.DropTruncated, DropBadHeader: s.DropBadHeader, DropBadAttribute: s.DropBadAttribute,
		DropUnknownCommID: s.DropUnknownCommID, AfterDestroy: s.AfterDestroy, DropUnexpected: s.DropUnexpected, DropDuplicate: s.DropDuplicate,
		DropNoResources: s.DropNoResources, SendErrors: s.SendErrors, REJSent: s.REJSent, REJReceived: s.REJReceived,
		StaleRejected: s.StaleRejected, IDs: s.IDs, Timewaits: s.Timewaits,
		GSI: GSIStats{Received: g.Received, Sent: g.Sent, SendErrors: g.SendErrors, NoSendBuffer: g.NoSendBuffer,
			RecvErrors: g.RecvErrors, Short: g.Short, ResolveFails: g.ResolveFails, AHs: g.AHs, Resets: g.Resets}}
}

// ownResources takes what QP1 holds (PD, CQ, MR, AHs, its buffer region,
// its data-plane transport; QP1's own id is reserved, which the driver's
// counts already leave out) out of the consumers' resource
// counts: they are the device's own, as the kernel's MAD agent objects
// are the kernel's, and a program's resources must return to the same
// baseline whatever peers the CM has talked to.
func (d *Daemon) ownResources(r *Resources) {
	if d.gsi == nil {
		return
	}
	g := d.gsi.Stats()
	r.PDs--
	r.CQs--
	r.MRs--
	r.AHs -= int(g.AHs)
	r.BusRegions--
	if _, ok := d.eng.QPStats(d.gsi.QPN()); ok {
		r.Transports--
	}
}

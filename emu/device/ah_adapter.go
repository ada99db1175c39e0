package device

import (
	"errors"

	"github.com/irdma-emu/irdma-emu/emu/ah"
	"github.com/irdma-emu/irdma-emu/emu/cqp"
)

// ahAdapter presents emu/ah's ARP, AH and multicast tables to the CQP.
type ahAdapter struct{ t *ah.Tables }

var _ cqp.AHTables = ahAdapter{}

func (a ahAdapter) SetARP(idx uint32, mac [6]byte, valid, permanent bool) error {
	if !valid {
		return ahStatus(a.t.DelARP(idx))
	}
	return ahStatus(a.t.SetARP(idx, mac, permanent))
}

func (a ahAdapter) AddAH(x cqp.AH) error {
	return ahStatus(a.t.AddAH(x.Index, ah.AH{
		PD: x.PD, DestIP: x.DestIP, SrcIP: x.SrcIP, IPv4: x.IPv4, SrcMAC: x.SrcMAC, ARPIndex: x.ARPIndex,
		VLANTag: x.VLANTag, InsertVLAN: x.InsertVLAN, TC: x.TC, FlowLabel: x.FlowLabel, HopLimit: x.HopLimit,
		Loopback: x.DoLoopback,
	}))
}

func (a ahAdapter) DelAH(idx uint32) error { return ahStatus(a.t.DelAH(idx)) }

func mg(g cqp.McastGroup) ah.MG {
	m := ah.MG{DestMAC: g.DestMAC, VLANID: g.VLANID, VLANValid: g.VLANValid, IPv4: g.IPv4, DestIP: g.DestIP,
		QSHandle: g.QSHandle}
	for i, e := range g.Entries {
		m.Entries[i] = ah.MGEntry{QPID: e.QPID, Valid: e.Valid, DestPort: e.DestPort}
	}
	return m
}

func (a ahAdapter) CreateMcast(g cqp.McastGroup) error {
	return ahStatus(a.t.CreateMG(g.Index, mg(g)))
}

func (a ahAdapter) ModifyMcast(g cqp.McastGroup) error {
	return ahStatus(a.t.ModifyMG(g.Index, mg(g)))
}

func (a ahAdapter) DestroyMcast(idx uint32) error { return ahStatus(a.t.DestroyMG(idx)) }

// ahError gives an emu/ah error its CQP completion code (docs/cqp-errors.md).
type ahError struct {
	err error
	st  cqp.Status
}

func (e *ahError) Error() string         { return e.err.Error() }
func (e *ahError) Unwrap() error         { return e.err }
func (e *ahError) CQPStatus() cqp.Status { return e.st }

func ahStatus(err error) error {
	if err == nil {
		return nil
	}
	minor := cqp.MinorAHError
	var ae *ah.Error
	if errors.As(err, &ae) {
		switch ae.Reason {
		case ah.ReasonNotCommitted:
			minor = cqp.MinorHMCNotCommitted
		case ah.ReasonIndexRange, ah.ReasonBadARPIndex:
			minor = cqp.MinorIndexRange
		case ah.ReasonAlreadyValid:
			minor = cqp.MinorObjectExists
		case ah.ReasonNotValid:
			minor = cqp.MinorObjectNotFound
		case ah.ReasonBadPD:
			minor = cqp.MinorBadContext
		case ah.ReasonHMC:
			minor = cqp.MinorPAFault
		}
	}
	return &ahError{err: err, st: cqp.Fail(minor)}
}

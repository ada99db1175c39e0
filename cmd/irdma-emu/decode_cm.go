package main

import (
	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// cmMAD summarises the CM MAD a packet carries: a UD SEND to QP1 (the GSI
// QP) whose payload is a MAD of management class 0x07 (IBTA Vol 1 §12).
// ok is false for any other packet; err is set for a GSI payload that is a
// CM MAD in name (class 0x07) but does not check.
func cmMAD(p *wire.Packet) (s mad.Summary, ok bool, err error) {
	if p.DETH == nil || p.BTH.DestQP() != wire.QPNGSI || len(p.Payload) < 2 || p.Payload[1] != mad.ClassCM {
		return s, false, nil
	}
	s, err = mad.Describe(p.Payload)
	return s, true, err
}

// jsonCM is the --json form of a CM MAD ("cm" in a packet's object).
type jsonCM struct {
	Attr         string  `json:"attr"`
	AttrID       uint16  `json:"attr_id"`
	TID          uint64  `json:"tid"`
	LocalCommID  uint32  `json:"local_comm_id"`
	RemoteCommID *uint32 `json:"remote_comm_id,omitempty"`
	ServiceID    *uint64 `json:"service_id,omitempty"`
	QPN          *uint32 `json:"qpn,omitempty"`
	StartingPSN  *uint32 `json:"starting_psn,omitempty"`
	Reason       *uint16 `json:"rej_reason,omitempty"`
	Rejected     string  `json:"message_rejected,omitempty"`
	MRAed        string  `json:"message_mraed,omitempty"`
	Status       *uint8  `json:"sidr_status,omitempty"`
	QKey         *uint32 `json:"qkey,omitempty"`
	Error        string  `json:"error,omitempty"`
}

func newJSONCM(s mad.Summary, err error) *jsonCM {
	j := &jsonCM{Attr: s.Attr.String(), AttrID: uint16(s.Attr)}
	if err != nil {
		j.Error = err.Error()
		return j
	}
	j.TID, j.LocalCommID = s.TID, s.LocalCommID
	if s.Has&mad.HasRemoteCommID != 0 {
		j.RemoteCommID = ptr(s.RemoteCommID)
	}
	if s.Has&mad.HasServiceID != 0 {
		j.ServiceID = ptr(s.ServiceID)
	}
	if s.Has&mad.HasQPN != 0 {
		j.QPN = ptr(s.QPN)
	}
	if s.Has&mad.HasPSN != 0 {
		j.StartingPSN = ptr(s.PSN)
	}
	if s.Has&mad.HasReason != 0 {
		j.Reason, j.Rejected = ptr(s.Reason), s.Rejected.String()
	}
	if s.Has&mad.HasMRAed != 0 {
		j.MRAed = s.MRAed.String()
	}
	if s.Has&mad.HasStatus != 0 {
		j.Status, j.QKey = ptr(s.Status), ptr(s.QKey)
	}
	return j
}

package mad

import (
	"fmt"
	"strings"
)

// Summary is what a capture reader shows of a CM MAD: the attribute and
// the fields that identify the connection and its parameters. Fields an
// attribute does not carry are zero (Has says which are set).
type Summary struct {
	Attr         AttrID
	TID          uint64
	LocalCommID  uint32 // REQ..DREP: the sender's; SIDR: the request ID
	RemoteCommID uint32
	ServiceID    uint64 // REQ, SIDR_REQ, SIDR_REP
	QPN          uint32 // REQ, REP: the sender's QP; DREQ: the receiver's; SIDR_REP: the UD QP
	PSN          uint32 // REQ, REP starting PSN
	Reason       uint16 // REJ
	Rejected     MsgResponse
	MRAed        MsgResponse
	Status       uint8 // SIDR_REP
	QKey         uint32
	Has          Fields
}

// Fields names which Summary fields an attribute carries.
type Fields uint16

const (
	HasRemoteCommID Fields = 1 << iota
	HasServiceID
	HasQPN
	HasPSN
	HasReason
	HasMRAed
	HasStatus
	HasQKey
)

// Describe checks b as a CM MAD and summarises it.
func Describe(b []byte) (Summary, error) {
	attr, err := Check(b)
	s := Summary{Attr: attr}
	if err != nil {
		return s, err
	}
	s.TID = Header(b).TID()
	ids := CommIDs(b)
	s.LocalCommID = ids.LocalCommID()
	switch attr {
	case AttrREQ:
		r := REQ(b)
		s.ServiceID, s.QPN, s.PSN = r.ServiceID(), r.LocalQPN(), r.StartingPSN()
		s.Has = HasServiceID | HasQPN | HasPSN
		return s, nil
	case AttrSIDRREQ:
		s.ServiceID = SIDRREQ(b).ServiceID()
		s.Has = HasServiceID
		return s, nil
	case AttrSIDRREP:
		r := SIDRREP(b)
		s.ServiceID, s.QPN, s.Status, s.QKey = r.ServiceID(), r.QPN(), r.Status(), r.QKey()
		s.Has = HasServiceID | HasQPN | HasStatus | HasQKey
		return s, nil
	}
	s.RemoteCommID = ids.RemoteCommID()
	s.Has = HasRemoteCommID
	switch attr {
	case AttrREP:
		r := REP(b)
		s.QPN, s.PSN = r.LocalQPN(), r.StartingPSN()
		s.Has |= HasQPN | HasPSN
	case AttrREJ:
		r := REJ(b)
		s.Reason, s.Rejected = r.Reason(), r.MessageRejected()
		s.Has |= HasReason
	case AttrMRA:
		s.MRAed = MRA(b).MessageMRAed()
		s.Has |= HasMRAed
	case AttrDREQ:
		s.QPN = DREQ(b).RemoteQPN()
		s.Has |= HasQPN
	}
	return s, nil
}

var msgNames = [...]string{MsgREQ: "REQ", MsgREP: "REP", MsgOther: "other", 3: "reserved"}

func (m MsgResponse) String() string { return msgNames[m&3] }

// String is the one-line form `irdma-emu decode` prints.
func (s Summary) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "cm=%v tid=%#x", s.Attr, s.TID)
	if s.Attr == AttrSIDRREQ || s.Attr == AttrSIDRREP {
		fmt.Fprintf(&sb, " reqid=%#x", s.LocalCommID)
	} else {
		fmt.Fprintf(&sb, " lcid=%#x", s.LocalCommID)
	}
	if s.Has&HasRemoteCommID != 0 {
		fmt.Fprintf(&sb, " rcid=%#x", s.RemoteCommID)
	}
	if s.Has&HasServiceID != 0 {
		fmt.Fprintf(&sb, " sid=%#016x", s.ServiceID)
	}
	if s.Has&HasQPN != 0 {
		fmt.Fprintf(&sb, " qpn=%#x", s.QPN)
	}
	if s.Has&HasPSN != 0 {
		fmt.Fprintf(&sb, " spsn=%d", s.PSN)
	}
	if s.Has&HasReason != 0 {
		fmt.Fprintf(&sb, " reason=%d rejected=%v", s.Reason, s.Rejected)
	}
	if s.Has&HasMRAed != 0 {
		fmt.Fprintf(&sb, " mraed=%v", s.MRAed)
	}
	if s.Has&HasStatus != 0 {
		fmt.Fprintf(&sb, " status=%d qkey=%#x", s.Status, s.QKey)
	}
	return sb.String()
}

package mad

import (
	"bytes"
	"testing"
)

// FuzzViews feeds arbitrary bytes to Check and to every view: nothing may
// panic, and for a MAD Check accepts, writing back every field a view
// reads leaves the bytes unchanged (the getters and setters cover the
// same bits).
func FuzzViews(f *testing.F) {
	for _, a := range []AttrID{AttrREQ, AttrMRA, AttrREJ, AttrREP, AttrRTU, AttrDREQ, AttrDREP, AttrSIDRREQ, AttrSIDRREP} {
		b := make([]byte, Size)
		Header(b).InitCM(a, 1)
		f.Add(b)
	}
	f.Add([]byte{1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		attr, err := Check(b)
		if err != nil {
			return
		}
		orig := bytes.Clone(b[:Size])
		m := b[:Size]
		switch attr {
		case AttrREQ:
			r := REQ(m)
			r.SetLocalCommID(r.LocalCommID())
			r.SetServiceID(r.ServiceID())
			r.SetLocalCAGUID(r.LocalCAGUID())
			r.SetLocalQKey(r.LocalQKey())
			r.SetLocalQPN(r.LocalQPN())
			r.SetResponderResources(r.ResponderResources())
			r.SetInitiatorDepth(r.InitiatorDepth())
			r.SetRemoteCMResponseTimeout(r.RemoteCMResponseTimeout())
			r.SetTransportServiceType(r.TransportServiceType())
			r.SetFlowControl(r.FlowControl())
			r.SetStartingPSN(r.StartingPSN())
			r.SetLocalCMResponseTimeout(r.LocalCMResponseTimeout())
			r.SetRetryCount(r.RetryCount())
			r.SetPKey(r.PKey())
			r.SetPathMTU(r.PathMTU())
			r.SetRNRRetryCount(r.RNRRetryCount())
			r.SetMaxCMRetries(r.MaxCMRetries())
			r.SetSRQ(r.SRQ())
			_, _, _, _ = r.LocalEECN(), r.RemoteEECN(), r.RDCExists(), r.ExtTransportType()
			for _, p := range []Path{r.Primary(), r.Alternate()} {
				p.SetLocalLID(p.LocalLID())
				p.SetRemoteLID(p.RemoteLID())
				p.SetLocalGID(p.LocalGID())
				p.SetRemoteGID(p.RemoteGID())
				p.SetFlowLabel(p.FlowLabel())
				p.SetPacketRate(p.PacketRate())
				p.SetTrafficClass(p.TrafficClass())
				p.SetHopLimit(p.HopLimit())
				p.SetSL(p.SL())
				p.SetSubnetLocal(p.SubnetLocal())
				p.SetLocalACKTimeout(p.LocalACKTimeout())
			}
			_ = r.PrivateData()
		case AttrMRA:
			r := MRA(m)
			r.SetMessageMRAed(r.MessageMRAed())
			r.SetServiceTimeout(r.ServiceTimeout())
			_ = r.PrivateData()
		case AttrREJ:
			r := REJ(m)
			r.SetMessageRejected(r.MessageRejected())
			r.SetRejectedInfoLength(r.RejectedInfoLength())
			r.SetReason(r.Reason())
			_, _ = r.ARI(), r.PrivateData()
		case AttrREP:
			r := REP(m)
			r.SetLocalQKey(r.LocalQKey())
			r.SetLocalQPN(r.LocalQPN())
			r.SetStartingPSN(r.StartingPSN())
			r.SetResponderResources(r.ResponderResources())
			r.SetInitiatorDepth(r.InitiatorDepth())
			r.SetTargetACKDelay(r.TargetACKDelay())
			r.SetFailoverAccepted(r.FailoverAccepted())
			r.SetFlowControl(r.FlowControl())
			r.SetRNRRetryCount(r.RNRRetryCount())
			r.SetSRQ(r.SRQ())
			r.SetLocalCAGUID(r.LocalCAGUID())
			_, _ = r.LocalEECN(), r.PrivateData()
		case AttrRTU:
			_ = RTU(m).PrivateData()
		case AttrDREP:
			_ = DREP(m).PrivateData()
		case AttrDREQ:
			r := DREQ(m)
			r.SetRemoteQPN(r.RemoteQPN())
			_ = r.PrivateData()
		case AttrSIDRREQ:
			r := SIDRREQ(m)
			r.SetRequestID(r.RequestID())
			r.SetPKey(r.PKey())
			r.SetServiceID(r.ServiceID())
			_ = r.PrivateData()
		case AttrSIDRREP:
			r := SIDRREP(m)
			r.SetRequestID(r.RequestID())
			r.SetStatus(r.Status())
			r.SetInfoLength(r.InfoLength())
			r.SetQPN(r.QPN())
			r.SetServiceID(r.ServiceID())
			r.SetQKey(r.QKey())
			_, _ = r.Info(), r.PrivateData()
		}
		c := CommIDs(m)
		c.SetLocalCommID(c.LocalCommID())
		c.SetRemoteCommID(c.RemoteCommID())
		if !bytes.Equal(orig, m) {
			t.Fatalf("%v: get/set changed the MAD:\n was %x\n now %x", attr, orig, m)
		}
	})
}

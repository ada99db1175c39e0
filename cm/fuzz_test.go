package cm

import (
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/cm/mad"
)

// FuzzManager feeds arbitrary MADs into a live CM: a listener, a
// connection in progress and an established one, with a consumer that
// accepts, answers and disconnects. Any input must leave the Manager
// consistent: no panic, every timer eventually quiet, and once every ID
// is destroyed and timewait is over, no ID, timewait or timer is left.
func FuzzManager(f *testing.F) {
	seeds := [][]byte{}
	for _, a := range []mad.AttrID{mad.AttrREQ, mad.AttrMRA, mad.AttrREJ, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ,
		mad.AttrDREP, mad.AttrSIDRREQ, mad.AttrSIDRREP} {
		b := newMAD(a, 5)
		mad.REQ(b).SetServiceID(svc)
		seeds = append(seeds, b)
	}
	for _, s := range seeds {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, sel uint8) {
		fb := newFabric(t)
		a, b := fb.node(1, nil), fb.node(2, func(c *Config) { c.MaxIDs = 8 })
		l := b.listen(svc)
		b.listen(0x0000000002110000 | uint64(sel))
		ida, idb := connect(t, fb, a, b, 0x11, 0x22, 1, 2)
		pending := a.newID()
		if err := pending.SendREQ(reqParam(a, b, 0x12, 3, "")); err != nil {
			t.Fatal(err)
		}
		// b answers whatever it gets the way rdma_cm would.
		b.react = func(id *ID, ev *Event) error {
			switch ev.Type {
			case EventREQReceived:
				if sel&1 == 0 {
					return id.SendREP(&REPParam{QPN: 0x40 + uint32(sel), StartingPSN: 9})
				}
				return id.SendMRA(MRAFlagDelay|10, nil)
			case EventREPReceived:
				return id.SendRTU(nil)
			case EventDREQReceived:
				return id.SendDREP(nil)
			case EventSIDRREQReceived:
				return id.SendSIDRREP(&SIDRREPParam{QPN: 5})
			}
			return nil
		}
		a.react = b.react
		// The input, as is and with the live comm IDs patched in (so that
		// it reaches the state machine, not only the lookups).
		from := Addr{SGID: b.gid, DGID: a.gid, HopLimit: 64, RemoteQPN: 1}
		b.m.Deliver(from, in)
		if len(in) >= mad.Size {
			p := append([]byte(nil), in...)
			ids := mad.CommIDs(p)
			switch sel % 4 {
			case 0:
				ids.SetLocalCommID(ida.LocalCommID())
				ids.SetRemoteCommID(idb.LocalCommID())
			case 1:
				ids.SetRemoteCommID(idb.LocalCommID())
			case 2:
				ids.SetRemoteCommID(pending.LocalCommID())
			}
			b.m.Deliver(from, p)
			to := Addr{SGID: a.gid, DGID: b.gid, HopLimit: 64, RemoteQPN: 1}
			a.m.Deliver(to, p)
		}
		fb.pump()
		fb.advance(time.Hour)
		for _, n := range []*node{a, b} {
			n.m.Close()
		}
		fb.pump()
		fb.advance(time.Hour)
		_ = l
		for _, n := range []*node{a, b} {
			if s := n.m.Stats(); s.IDs != 0 || s.Timewaits != 0 {
				t.Fatalf("left after Close: %+v", s)
			}
		}
		if fb.clk.Pending() != 0 {
			t.Fatalf("%d timers left", fb.clk.Pending())
		}
	})
}

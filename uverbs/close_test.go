package uverbs_test

import (
	"bytes"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/driver"
)

type baseline struct {
	attr    driver.DeviceAttr
	qps     int
	regions int
}

func snapshot(t *testing.T, e *env) baseline {
	t.Helper()
	at, err := e.d.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	return baseline{attr: at, qps: e.dev.QPs().Count(), regions: e.dev.Mem().NumRegions()}
}

// TestCloseFreesEverything: a program that exits with every kind of
// object alive — PDs, MRs (through /proc/self/mem and in shared memory),
// an MW, CQs on a channel, an RC QP at RTR, a UD QP attached to a
// multicast group, an AH — leaves the device as it found it, and the
// device keeps serving other contexts.
func TestCloseFreesEverything(t *testing.T) {
	e := newEnv(t)
	before := snapshot(t, e)
	keep := e.open(t)
	keep.ok(keep.raw(getContextCmd(5, 0)), "GET_CONTEXT (other context)")

	c := e.open(t)
	r := c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	async := r.fds[0].File
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(0x40000)
	buf := make([]byte, 3*4096)
	c.ok(c.raw(regMRCmd(addrOf(buf), uint64(len(buf)), 1, 7, 0, 0, 0, 0)), "REG_MR buffer")
	c.ok(c.raw(regMRCmd(a.addr+0x30000, 8192, 1, 1, 0, 0, 0, 0)), "REG_MR buffer in shared memory")
	c.ok(c.raw(legacy(14, 8, with(withResp(16), func(b []byte) { le.PutUint32(b[8:], 1); b[12] = 1 }))), "ALLOC_MW")
	c.ok(c.raw(regMRCmd(a.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ")
	c.ok(c.raw(regMRCmd(a.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR shadow")
	r = c.ok(c.raw(compChannelCmd()), "CREATE_COMP_CHANNEL")
	ch := r.fds[0].File
	r = c.ok(c.raw(createCQCmd(1, 256, 0, int32(ch.Fd()), a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
	cqh := u32(r.resp, 0)
	rc, _ := qpOnCQ(t, c, a, cqh, offQP, 0x55, 2)
	ud, _ := qpOnCQ(t, c, a, cqh, 0x14000, 0x66, 4)
	m := newModify(rc, 1|1<<3|1<<4|1<<5)
	m[96], m[104] = 1, 1
	c.ok(c.raw(m.legacy()), "INIT")
	m = newModify(rc, 0x129181).dest(gid4(peerIP), 1, 1, 1)
	m[96], m[98] = 2, 3
	c.ok(c.raw(m.ex(0, 0)), "RTR")
	m = newModify(ud, 1|1<<4|1<<5|1<<6)
	m[96], m[104] = 1, 1
	c.ok(c.raw(m.legacy()), "UD INIT")
	c.ok(c.raw(mcastCmd(30, gid4(netip.MustParseAddr("239.9.9.9")), ud)), "ATTACH_MCAST")
	r = c.ok(c.raw(createAHCmd(0, gid4(peerIP), 1, 1, true, 12)), "CREATE_AH")
	ahID := u32(r.resp, 4)
	if got, ok := e.dev.AHs().AH(ahID); !ok {
		t.Fatalf("AH %d not in the device", ahID)
	} else if mac, _ := e.dev.AHs().ARP(uint32(got.ARPIndex)); !bytes.Equal(mac[:], peerMAC) || got.HopLimit != 64 {
		t.Errorf("AH destination MAC %x hop limit %d, want %s and the route's 64", mac, got.HopLimit, peerMAC)
	}

	if mid := snapshot(t, e); mid.attr.MaxQP == before.attr.MaxQP || mid.qps == before.qps {
		t.Fatalf("objects not counted: %+v vs %+v", mid, before)
	}
	c.s.Close() // the program exits (its descriptors stay open here)
	c.done = true
	after := snapshot(t, e)
	for _, v := range []struct {
		name          string
		before, after uint32
	}{
		{"max_qp", before.attr.MaxQP, after.attr.MaxQP},
		{"max_cq", before.attr.MaxCQ, after.attr.MaxCQ},
		{"max_mr", before.attr.MaxMR, after.attr.MaxMR},
		{"max_pd", before.attr.MaxPD, after.attr.MaxPD},
	} {
		if v.before != v.after {
			t.Errorf("%s: %d before, %d after close", v.name, v.before, v.after)
		}
	}
	if after.qps != before.qps {
		t.Errorf("device QPs: %d before, %d after close", before.qps, after.qps)
	}
	if after.regions != before.regions {
		t.Errorf("bus regions: %d before, %d after close", before.regions, after.regions)
	}
	if _, ok := e.dev.AHs().AH(ahID); ok {
		t.Errorf("AH %d survived the close", ahID)
	}
	if n := e.p.Sessions(); n != 1 {
		t.Errorf("%d sessions open, want 1", n)
	}
	// The program's event descriptors see end of file: no writer is left.
	for _, fd := range []int{int(async.Fd()), int(ch.Fd())} {
		var b [16]byte
		if n, err := unix.Read(fd, b[:]); n != 0 || err != nil {
			t.Errorf("event descriptor after close: read %d, %v; want end of file", n, err)
		}
	}
	// The device still serves: the other context builds a QP.
	a2 := keep.arena(0x40000)
	keep.ok(keep.raw(allocPDCmd()), "ALLOC_PD")
	keep.ok(keep.raw(regMRCmd(a2.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ")
	keep.ok(keep.raw(regMRCmd(a2.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR shadow")
	r = keep.ok(keep.raw(createCQCmd(1, 256, 0, -1, a2.addr+offCQ, a2.addr+offCQShadow)), "CREATE_CQ")
	qpOnCQ(t, keep, a2, u32(r.resp, 0), offQP, 1, 2)
	keep.close()
	if after := snapshot(t, e); after.attr.MaxQP != before.attr.MaxQP || after.regions != before.regions {
		t.Errorf("after the second close: %+v, want %+v", after, before)
	}
}

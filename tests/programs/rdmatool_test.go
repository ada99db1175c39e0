package programs_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// The iproute2 `rdma` tool through `irdma-emu exec`: its NETLINK_RDMA
// socket is answered by the daemon (docs/attach.md "Netlink connections",
// package rdmanl), so it prints what it prints for a real irdma device.
// Every expected value comes from somewhere else than the netlink answer:
// the daemon's control socket (devinfo, stats), the program that owns the
// QP (its own "local address" line and pid), and the IBTA names of the
// port states (Vol 1 §14.2.5.6: ACTIVE is 4; PortPhysicalState 5 is
// LinkUp), as iproute2's rdma/link.c prints them.

// rdmaJSON runs `rdma ARGS… -j` on n and decodes its output.
func rdmaJSON(t *testing.T, n *node, out any, args ...string) {
	t.Helper()
	p := n.run(t, append(append([]string{"rdma"}, args...), "-j")...)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("rdma %s: exit %d\n%s", strings.Join(args, " "), code, dump(p))
	}
	if err := json.Unmarshal([]byte(p.stdout.String()), out); err != nil {
		t.Fatalf("rdma %s: %v\n%s", strings.Join(args, " "), err, dump(p))
	}
}

func TestRdmaTool(t *testing.T) {
	testenv.Program(t, "rdma", "iproute2")
	needPrograms(t, "ibv_rc_pingpong")
	nodes := startNodes(t, 2)
	n := nodes[0]
	di, err := n.Client(t).DevInfo()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("link", func(t *testing.T) {
		var links []struct {
			Ifname, State, PhysicalState, Netdev string
			Port, NetdevIndex                    int
		}
		var raw []map[string]any
		rdmaJSON(t, n, &raw, "link", "show")
		b, _ := json.Marshal(raw)
		// encoding/json matches field names case-insensitively but not
		// with underscores: map them by hand.
		fixed := strings.NewReplacer(`"physical_state"`, `"PhysicalState"`, `"netdev_index"`, `"NetdevIndex"`).Replace(string(b))
		if err := json.Unmarshal([]byte(fixed), &links); err != nil {
			t.Fatal(err)
		}
		if len(links) != 1 {
			t.Fatalf("rdma link show: %d links, want 1: %+v", len(links), raw)
		}
		l := links[0]
		if l.Ifname != di.Name || l.Port != 1 {
			t.Errorf("link %s/%d, want %s/1", l.Ifname, l.Port, di.Name)
		}
		if l.State != "ACTIVE" || l.PhysicalState != "LINK_UP" {
			t.Errorf("state %s physical_state %s, want ACTIVE LINK_UP (daemon: state %d phys %d)",
				l.State, l.PhysicalState, di.Ports[0].State, di.Ports[0].PhysState)
		}
		if l.Netdev != di.Emu.Netdev || l.NetdevIndex != di.Emu.Ifindex {
			t.Errorf("netdev %s index %d, want the daemon's %s index %d", l.Netdev, l.NetdevIndex, di.Emu.Netdev, di.Emu.Ifindex)
		}
		for _, k := range []string{"lid", "sm_lid", "lmc", "subnet_prefix"} {
			if _, ok := raw[0][k]; ok {
				t.Errorf("a RoCE port reports %s (fill_port_info reports it for IB only): %v", k, raw[0])
			}
		}
	})

	t.Run("dev", func(t *testing.T) {
		var devs []map[string]any
		rdmaJSON(t, n, &devs, "dev", "show")
		if len(devs) != 1 {
			t.Fatalf("rdma dev show: %v", devs)
		}
		d := devs[0]
		for k, want := range map[string]string{"ifname": di.Name, "node_type": "ca", "fw": di.Device.FWVer,
			"node_guid": di.Device.NodeGUID, "sys_image_guid": di.Device.SysImageGUID} {
			if got, _ := d[k].(string); got != want {
				t.Errorf("dev %s = %v, want %s", k, d[k], want)
			}
		}
	})

	t.Run("resource-qp", func(t *testing.T) {
		// A server has created its QP (RC, moved to INIT) and printed it
		// before it waits for the client.
		port := freePort(t)
		// stdbuf: the line must come before the program exits.
		s := n.run(t, "stdbuf", "-oL", "ibv_rc_pingpong", "-g", "1", "-p", port)
		waitListen(t, port, s)
		re := regexp.MustCompile(`local address: .*QPN 0x([0-9a-f]+)`)
		var qpn uint64
		for deadline := time.Now().Add(10 * time.Second); ; {
			if m := re.FindStringSubmatch(s.stdout.String()); m != nil {
				qpn, _ = strconv.ParseUint(m[1], 16, 32)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no local address line\n%s", dump(s))
			}
			time.Sleep(20 * time.Millisecond)
		}
		var qps []map[string]any
		rdmaJSON(t, n, &qps, "resource", "show", "qp")
		var found map[string]any
		for _, q := range qps {
			if v, _ := q["lqpn"].(float64); uint64(v) == qpn {
				found = q
			}
		}
		if found == nil {
			t.Fatalf("rdma resource show qp has no lqpn %d: %v", qpn, qps)
		}
		if found["type"] != "RC" || found["state"] != "INIT" || found["ifname"] != di.Name {
			t.Errorf("qp %d: %v, want type RC state INIT on %s", qpn, found, di.Name)
		}
		if pid, _ := found["pid"].(float64); int(pid) != s.cmd.Process.Pid {
			t.Errorf("qp %d: pid %v, want the server's %d", qpn, found["pid"], s.cmd.Process.Pid)
		}
		if found["comm"] != "ibv_rc_pingpong" {
			t.Errorf("qp %d: comm %v, want ibv_rc_pingpong", qpn, found["comm"])
		}
		// The summary counts what the daemon holds.
		var res []map[string]any
		rdmaJSON(t, n, &res, "resource", "show")
		st := n.stats(t).Resources
		if len(res) != 1 {
			t.Fatalf("rdma resource show: %v", res)
		}
		for k, want := range map[string]int{"qp": st.QPs, "cq": st.CQs, "pd": st.PDs} {
			if got, _ := res[0][k].(float64); int(got) != want {
				t.Errorf("resource summary %s = %v, daemon holds %d", k, res[0][k], want)
			}
		}
		// Every REG_MR is an MR to restrack, also libirdma's ring
		// registrations (reg_type QP and CQ: irdma_reg_user_mr returns an
		// ib_mr for them too), which hold no STag: at least the daemon's
		// STag-backed MRs, all the server's.
		var mrs []map[string]any
		rdmaJSON(t, n, &mrs, "resource", "show", "mr")
		if got, _ := res[0]["mr"].(float64); int(got) != len(mrs) || len(mrs) < st.MRs {
			t.Errorf("resource summary mr = %v, %d MRs listed, daemon holds %d STag MRs", res[0]["mr"], len(mrs), st.MRs)
		}
		for _, m := range mrs {
			if pid, _ := m["pid"].(float64); int(pid) != s.cmd.Process.Pid {
				t.Errorf("mr %v: not the server's (pid %d)", m, s.cmd.Process.Pid)
			}
		}
		c := nodes[1].run(t, "ibv_rc_pingpong", "-g", "1", "-p", port, n.addr.String())
		if code := c.wait(t, 90*time.Second, s); code != 0 {
			t.Fatalf("client: exit %d\n%s", code, dump(c, s))
		}
		s.wait(t, 30*time.Second, c)
	})

	t.Run("statistic", func(t *testing.T) {
		// After the pingpong above (between two daemons: real UDP
		// frames) the counters stand still: the tool's and the daemon's
		// reads give the same values.
		var stats []map[string]any
		rdmaJSON(t, n, &stats, "statistic", "show")
		hw := n.stats(t).Port.HW
		if len(stats) != 1 || len(hw) == 0 {
			t.Fatalf("rdma statistic show: %v; daemon counters %v", stats, hw)
		}
		nonzero := 0
		for _, c := range hw {
			got, ok := stats[0][c.Name].(float64)
			if !ok || uint64(got) != c.Value {
				t.Errorf("counter %s = %v, daemon %d", c.Name, stats[0][c.Name], c.Value)
			}
			if c.Value != 0 {
				nonzero++
			}
		}
		if nonzero == 0 {
			t.Errorf("every counter is 0 after a pingpong: %v", hw)
		}
	})
}

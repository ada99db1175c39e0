package programs_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

// nodeGUID is the node GUID of a daemon on lo at addr, as ibv_devices
// prints it: the EUI-64 of the synthetic MAC 02:00:a:b:c:d with the U/L bit
// flipped (docs/preload.md, "The sysfs tree").
func nodeGUID(n *node) string {
	a := n.addr.As4()
	return fmt.Sprintf("0000%02xfffe%02x%02x%02x", a[0], a[1], a[2], a[3])
}

// TestIbvDevices: with two daemons up, ibv_devices through each one's
// `irdma-emu exec` lists exactly that daemon's irdma0 with its node GUID.
func TestIbvDevices(t *testing.T) {
	needPrograms(t, "ibv_devices")
	row := regexp.MustCompile(`^\s+(\S+)\s+([0-9a-f]{16})\s*$`)
	for _, n := range startNodes(t, 2) {
		p := n.run(t, "ibv_devices")
		if code := p.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("exit status %d\n%s", code, dump(p))
		}
		var devs []string
		for _, l := range strings.Split(p.stdout.String(), "\n") {
			if m := row.FindStringSubmatch(l); m != nil {
				devs = append(devs, m[1]+" "+m[2])
			}
		}
		if want := "irdma0 " + nodeGUID(n); len(devs) != 1 || devs[0] != want {
			t.Errorf("devices %q, want exactly %q\n%s", devs, want, dump(p))
		}
		if !strings.Contains(p.stdout.String(), "node GUID") {
			t.Errorf("no header\n%s", dump(p))
		}
	}
}

// devinfoFields parses ibv_devinfo's "\tkey:\t\tvalue" lines (the first
// of each key; port lines included) and the GID lines.
func devinfoFields(out string) (map[string]string, []string) {
	f := map[string]string{}
	var gids []string
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(k, "GID[") {
			gids = append(gids, k+" "+v)
			continue
		}
		if _, seen := f[k]; !seen {
			f[k] = v
		}
	}
	return f, gids
}

// TestIbvDevinfo: ibv_devinfo -v shows the E810's identity (vendor 0x8086,
// part 5522 = 0x1592, hw_ver 0x2), no SRQ (GEN_2), one port PORT_ACTIVE
// on Ethernet with RoCE v2 GIDs: the link-local one and the daemon's own
// address IPv4-mapped at index 1 — each daemon its own. Firmware version
// and GUIDs agree with what the daemon says over its control socket.
func TestIbvDevinfo(t *testing.T) {
	needPrograms(t, "ibv_devinfo")
	for _, n := range startNodes(t, 2) {
		p := n.run(t, "ibv_devinfo", "-v")
		if code := p.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("exit status %d\n%s", code, dump(p))
		}
		out := p.stdout.String()
		f, gids := devinfoFields(out)
		c, err := daemon.Dial(n.Control)
		if err != nil {
			t.Fatal(err)
		}
		di, err := c.DevInfo()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		g := nodeGUID(n)
		guid := g[0:4] + ":" + g[4:8] + ":" + g[8:12] + ":" + g[12:16]
		for k, want := range map[string]string{
			"hca_id":         "irdma0",
			"transport":      "InfiniBand (0)",
			"vendor_id":      "0x8086",
			"vendor_part_id": "5522",
			"hw_ver":         "0x2",
			"fw_ver":         di.Device.FWVer,
			"node_guid":      guid,
			"sys_image_guid": guid,
			"phys_port_cnt":  "1",
			"max_srq":        "0",
			"atomic_cap":     "ATOMIC_NONE (0)",
			"port":           "1",
			"state":          "PORT_ACTIVE (4)",
			"phys_state":     "LINK_UP (5)",
			"link_layer":     "Ethernet",
			"max_mtu":        "4096 (5)",
			"active_mtu":     "4096 (5)", // lo's MTU is 65536
			"gid_tbl_len":    "32",
			"pkey_tbl_len":   "1",
		} {
			if f[k] != want {
				t.Errorf("[%s] %s: %q, want %q", n.addr, k, f[k], want)
			}
		}
		if di.Device.NodeGUID != guid {
			t.Errorf("[%s] the daemon's node_guid %s, want %s", n.addr, di.Device.NodeGUID, guid)
		}
		if len(gids) != 2 || !strings.HasPrefix(gids[0], "GID[  0] fe80::") || !strings.HasSuffix(gids[0], ", RoCE v2") ||
			gids[1] != "GID[  1] "+n.gid()+", RoCE v2" {
			t.Errorf("[%s] GIDs %q, want fe80::… and %s, both RoCE v2", n.addr, gids, n.gid())
		}
		if t.Failed() {
			t.Fatalf("ibv_devinfo -v on %s:\n%s", n.addr, dump(p))
		}
	}
}

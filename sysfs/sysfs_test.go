package sysfs

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

func TestFormats(t *testing.T) {
	// The tree measured with rdma-core 44: MAC 02:fc:00:00:00:01 gives
	// node_guid 00fc:00ff:fe00:0001 (docs/preload.md "The sysfs tree").
	mac, _ := net.ParseMAC("02:fc:00:00:00:01")
	if g := FormatGUID(GUIDFromMAC(mac)); g != "00fc:00ff:fe00:0001" {
		t.Errorf("GUID %s", g)
	}
	if g := FormatGID(LinkLocalGID(mac)); g != "fe80:0000:0000:0000:00fc:00ff:fe00:0001" {
		t.Errorf("link-local GID %s", g)
	}
	if g := FormatGID(AddrGID(netip.MustParseAddr("192.0.2.2"))); g != "0000:0000:0000:0000:0000:ffff:c000:0202" {
		t.Errorf("IPv4 GID %s", g)
	}
	if g := FormatGID(AddrGID(netip.MustParseAddr("2001:db8::1"))); g != "2001:0db8:0000:0000:0000:0000:0000:0001" {
		t.Errorf("IPv6 GID %s", g)
	}
	if m := Modalias(profile.GEN2().Identity); m != "pci:v00008086d00001592sv00008086sd00000002bc02sc00i00" {
		t.Errorf("modalias %s", m)
	}
	if g := GUIDFromMAC(nil); g != 0x020000fffe000000 {
		t.Errorf("zero MAC GUID %#x", g)
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lo() Device {
	mac, _ := net.ParseMAC("02:fc:00:00:00:01")
	return DefaultDevice("irdma0", 0, "lo", mac, []netip.Addr{netip.MustParseAddr("192.0.2.2")}, true, profile.GEN2())
}

func TestWriteTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "irdma0", "sysfs")
	if err := Write(root, lo()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"class/infiniband_verbs/abi_version":                "6\n",
		"class/infiniband_verbs/uverbs0/ibdev":              "irdma0\n",
		"class/infiniband_verbs/uverbs0/dev":                "231:192\n",
		"class/infiniband_verbs/uverbs0/abi_version":        "5\n",
		"class/infiniband/irdma0/node_type":                 "1: CA\n",
		"class/infiniband/irdma0/node_guid":                 "00fc:00ff:fe00:0001\n",
		"class/infiniband/irdma0/sys_image_guid":            "00fc:00ff:fe00:0001\n",
		"class/infiniband/irdma0/fw_ver":                    "1.60\n",
		"class/infiniband/irdma0/hw_rev":                    "2\n",
		"class/infiniband/irdma0/device/modalias":           "pci:v00008086d00001592sv00008086sd00000002bc02sc00i00\n",
		"class/infiniband/irdma0/device/vendor":             "0x8086\n",
		"class/infiniband/irdma0/device/device":             "0x1592\n",
		"class/infiniband/irdma0/ports/1/state":             "4: ACTIVE\n",
		"class/infiniband/irdma0/ports/1/phys_state":        "5: LinkUp\n",
		"class/infiniband/irdma0/ports/1/link_layer":        "Ethernet\n",
		"class/infiniband/irdma0/ports/1/lid":               "0x0\n",
		"class/infiniband/irdma0/ports/1/cap_mask":          "0x00050000\n",
		"class/infiniband/irdma0/ports/1/pkeys/0":           "0xffff\n",
		"class/infiniband/irdma0/ports/1/gids/0":            "fe80:0000:0000:0000:00fc:00ff:fe00:0001\n",
		"class/infiniband/irdma0/ports/1/gids/1":            "0000:0000:0000:0000:0000:ffff:c000:0202\n",
		"class/infiniband/irdma0/ports/1/gids/31":           "0000:0000:0000:0000:0000:0000:0000:0000\n",
		"class/infiniband/irdma0/ports/1/gid_attrs/ndevs/0": "lo\n",
		"class/infiniband/irdma0/ports/1/gid_attrs/ndevs/1": "lo\n",
		// librdmacm's check_abi_version_sysfs; the netdev's directory
		// under the PCI function (lo is ifindex 1 in every namespace).
		"class/misc/rdma_cm/abi_version":                "4\n",
		"class/misc/rdma_cm/dev":                        "10:123\n",
		"class/infiniband/irdma0/device/net/lo/ifindex": "1\n",
	}
	for rel, w := range want {
		if got := read(t, root, rel); got != w {
			t.Errorf("%s = %q, want %q", rel, got, w)
		}
	}
	// A type for every index of the table, ndevs only for used entries.
	for i := range 32 {
		if got := read(t, root, "class/infiniband/irdma0/ports/1/gid_attrs/types/"+strconv.Itoa(i)); got != "RoCE v2\n" {
			t.Errorf("types/%d = %q", i, got)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "class/infiniband/irdma0/ports/1/gid_attrs/ndevs/2")); !os.IsNotExist(err) {
		t.Errorf("ndevs/2 for an empty GID: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "class/infiniband/irdma0/ports/1/gids/32")); !os.IsNotExist(err) {
		t.Errorf("gids/32 beyond the table: %v", err)
	}
	fi, err := os.Stat(root)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("root mode %v %v", fi.Mode(), err)
	}
	fi, _ = os.Stat(filepath.Join(root, "class/infiniband/irdma0/node_guid"))
	if fi.Mode().Perm() != 0o444 {
		t.Errorf("file mode %v", fi.Mode())
	}
}

// TestRewriteAtomic: a reader that keeps reading the port state while the
// tree is rewritten with the link going up and down never misses a file,
// and no temporary directory is left behind.
func TestRewriteAtomic(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "sysfs")
	up, down := lo(), lo()
	down.Ports[0].State, down.Ports[0].PhysState = PortDown, PhysDisabled
	if err := Write(root, up); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var bad atomic.Value
	var reads atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(filepath.Join(root, "class/infiniband/irdma0/ports/1/state"))
			if err != nil {
				bad.Store(err.Error())
				return
			}
			if s := string(b); s != "4: ACTIVE\n" && s != "1: DOWN\n" {
				bad.Store("state " + s)
				return
			}
			reads.Add(1)
		}
	}()
	for i := range 30 {
		d := up
		if i%2 == 0 {
			d = down
		}
		if err := Write(root, d); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatalf("reader saw %v", v)
	}
	if got := read(t, root, "class/infiniband/irdma0/ports/1/state"); got != "4: ACTIVE\n" {
		t.Fatalf("final state %q", got)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("left behind: %v", names)
	}
	t.Logf("%d reads during 30 rewrites", reads.Load())
}

func TestWriteErrors(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sysfs")
	bad := []func(*Device){
		func(d *Device) { d.Name = "" },
		func(d *Device) { d.Name = "../x" },
		func(d *Device) { d.Uverbs = -1 },
		func(d *Device) { d.Ports = nil },
		func(d *Device) { d.Ports[0].GIDTableLen = 1 },
		func(d *Device) { d.Ports[0].GIDs[0].NetDev = "a/b" },
	}
	for i, f := range bad {
		d := lo()
		d.Ports = append([]Port(nil), d.Ports...)
		d.Ports = []Port{d.Ports[0]}
		d.Ports[0].GIDs = append([]GID(nil), d.Ports[0].GIDs...)
		f(&d)
		if err := Write(root, d); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
	if err := Write(root, lo(), lo()); err == nil {
		t.Error("the same device twice: no error")
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("a failed Write left a tree: %v", err)
	}
	// Two devices in one tree.
	d2 := lo()
	d2.Name, d2.Uverbs = "irdma1", 1
	if err := Write(root, lo(), d2); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "class/infiniband_verbs/uverbs1/dev"); got != "231:193\n" {
		t.Errorf("uverbs1/dev %q", got)
	}
}

// Package sysfs writes the fake sysfs tree that libibverbs reads (through
// SYSFS_PATH) to discover the emulated device: the uverbs class entry, the
// device's attributes, its ports, GID table and GID attributes, in the
// formats of the kernel's drivers/infiniband/core/sysfs.c
// (docs/preload.md "The sysfs tree" lists what rdma-core 44 reads,
// measured).
//
// A tree is described by Device values, which the daemon fills from its
// port model, and written by Write: built in a temporary directory next to
// the target and swapped in with one rename, so a program never sees half a
// tree; Write again when GIDs or link state change.
package sysfs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/profile"
)

// Kernel constants.
const (
	// UverbsABI is class/infiniband_verbs/abi_version: the uverbs ABI
	// libibverbs requires (IB_USER_VERBS_ABI_VERSION).
	UverbsABI = 6
	// DriverABI is uverbsN/abi_version: irdma's provider ABI
	// (IRDMA_ABI_VER, accepted by libirdma 44).
	DriverABI = 5
	// UverbsMajor is the uverbs character devices' major number
	// (IB_UVERBS_MAJOR); minors start at UverbsBaseMinor.
	UverbsMajor     = 231
	UverbsBaseMinor = 192
	// RdmaCMABI is class/misc/rdma_cm/abi_version: the rdma_ucm ABI
	// (RDMA_USER_CM_ABI_VERSION), which librdmacm reads when netlink
	// RDMA does not answer (check_abi_version_sysfs) and accepts 3–4.
	RdmaCMABI = 4
	// RdmaCMMajor and RdmaCMMinor are the misc device number the tree
	// gives /dev/infiniband/rdma_cm (the kernel's is a dynamic misc
	// minor; the preload reports the host's own if the host has the
	// device, so that librdmacm's st_rdev check against a netlink
	// answer holds).
	RdmaCMMajor = 10
	RdmaCMMinor = 123
)

// PortState is ib_port_state.
type PortState uint8

// Port states.
const (
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

var portStateText = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

// PhysState is the IB physical port state.
type PhysState uint8

// Physical states.
const (
	PhysPolling  PhysState = 2
	PhysDisabled PhysState = 3
	PhysLinkUp   PhysState = 5
)

var physStateText = [...]string{"", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
	"LinkUp", "LinkErrorRecovery", "Phy Test"}

// GIDTypeRoCEv2 is the only GID type irdma offers (its port immutable
// core_cap_flags are RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP).
const GIDTypeRoCEv2 = "RoCE v2"

// GID is one entry of a port's GID table.
type GID struct {
	GID    [16]byte
	Type   string // gid_attrs/types: GIDTypeRoCEv2 if empty
	NetDev string // gid_attrs/ndevs: a real netdev name, or "" for none
}

// Port is one port of the device (irdma has one, number 1).
type Port struct {
	State     PortState
	PhysState PhysState
	LinkLayer string // "Ethernet"
	Rate      string // e.g. "100 Gb/sec (4X EDR)"
	// CapMask is the port's port_cap_flags as the kernel's sysfs shows them
	// (without the IP_BASED_GIDS bit uverbs adds in QUERY_PORT).
	CapMask uint32
	// GIDTableLen is the GID table's length (gid_tbl_len of QUERY_PORT);
	// every index below it gets gids/N and gid_attrs/types/N files, unused
	// entries the zero GID.
	GIDTableLen int
	GIDs        []GID    // index i is GID i; fewer than GIDTableLen
	PKeys       []uint16 // pkeys/N; default {0xffff}
}

// Device describes one RDMA device and its uverbs character device.
type Device struct {
	Name   string // e.g. irdma0
	Uverbs int    // N of /dev/infiniband/uverbsN
	// Major and Minor are the character device's number (uverbsN/dev and
	// the st_rdev the preload fakes); zero means 231:192+N.
	Major, Minor uint32
	NodeGUID     uint64
	SysImageGUID uint64 // zero means NodeGUID
	FWVersion    string // fw_ver, e.g. "1.60"
	HWRev        string // hw_rev, if not empty
	HCAType      string // hca_type, if not empty (upstream irdma has none)
	BoardID      string // board_id, if not empty (upstream irdma has none)
	NodeDesc     string // node_desc, if not empty
	PCI          profile.Identity
	Ports        []Port
}

// DefaultDevice describes the device the daemon serves on one netdev: the
// E810 identity of p, the node GUID from the netdev's MAC (EUI-64, as irdma
// derives it), GID 0 the MAC's link-local GID (the kernel's default GID),
// then one GID per address (IPv4-mapped for IPv4), 32 entries, one port.
func DefaultDevice(name string, uverbs int, netdev string, mac net.HardwareAddr, addrs []netip.Addr, up bool, p profile.Profile) Device {
	gids := []GID{{GID: LinkLocalGID(mac), NetDev: netdev}}
	for _, a := range addrs {
		g := AddrGID(a)
		dup := false
		for _, o := range gids {
			dup = dup || o.GID == g
		}
		if !dup {
			gids = append(gids, GID{GID: g, NetDev: netdev})
		}
	}
	port := Port{
		State: PortActive, PhysState: PhysLinkUp,
		LinkLayer:   "Ethernet",
		Rate:        "100 Gb/sec (4X EDR)",
		CapMask:     1<<16 | 1<<18, // CM_SUP | REINIT_SUP (irdma_query_port)
		GIDTableLen: int(p.Limits.GIDTableLen),
		GIDs:        gids,
		PKeys:       []uint16{0xffff},
	}
	if port.GIDTableLen < len(gids) {
		port.GIDTableLen = len(gids)
	}
	if !up {
		port.State, port.PhysState = PortDown, PhysDisabled
	}
	guid := GUIDFromMAC(mac)
	return Device{
		Name:      name,
		Uverbs:    uverbs,
		NodeGUID:  guid,
		FWVersion: fmt.Sprintf("%d.%d", p.Identity.FWMajor, p.Identity.FWMinor),
		HWRev:     fmt.Sprintf("%x", uint8(p.UK.HWRev)),
		NodeDesc:  "irdma-emu " + name,
		PCI:       p.Identity,
		Ports:     []Port{port},
	}
}

// GUIDFromMAC is the EUI-64 of a 48-bit MAC with the universal/local bit
// flipped (addrconf_addr_eui48), irdma's node GUID. Other lengths give 0.
func GUIDFromMAC(mac net.HardwareAddr) uint64 {
	var m [6]byte
	if len(mac) == 6 {
		copy(m[:], mac)
	} else if len(mac) != 0 {
		return 0
	}
	b := [8]byte{m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
	var g uint64
	for _, x := range b {
		g = g<<8 | uint64(x)
	}
	return g
}

// LinkLocalGID is fe80::/64 with the MAC's EUI-64 interface identifier.
func LinkLocalGID(mac net.HardwareAddr) [16]byte {
	var g [16]byte
	g[0], g[1] = 0xfe, 0x80
	guid := GUIDFromMAC(mac)
	for i := range 8 {
		g[8+i] = byte(guid >> (56 - 8*i))
	}
	return g
}

// AddrGID is an address's RoCE v2 GID: the IPv6 address itself, or the
// IPv4-mapped IPv6 address.
func AddrGID(a netip.Addr) [16]byte {
	return a.Unmap().As16()
}

// FormatGUID is the kernel's node_guid format: four groups of 16 bits.
func FormatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// FormatGID is the kernel's %pI6 format: eight groups of four hex digits.
func FormatGID(g [16]byte) string {
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		fmt.Fprintf(&sb, "%02x%02x", g[i], g[i+1])
	}
	return sb.String()
}

// Modalias is the device's PCI modalias, which libirdma matches
// (VERBS_PCI_MATCH): class 02 (network), subclass 00.
func Modalias(id profile.Identity) string {
	return fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc02sc00i00",
		id.VendorID, id.DeviceID, id.SubsystemVendorID, id.SubsystemID)
}

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00\n") && len(s) < 64
}

func (d *Device) check() error {
	if !validName(d.Name) {
		return fmt.Errorf("sysfs: bad device name %q", d.Name)
	}
	if d.Uverbs < 0 || d.Uverbs > 9999 {
		return fmt.Errorf("sysfs: %s: uverbs index %d out of range", d.Name, d.Uverbs)
	}
	if len(d.Ports) == 0 {
		return fmt.Errorf("sysfs: %s: no port", d.Name)
	}
	for i, p := range d.Ports {
		if len(p.GIDs) > p.GIDTableLen {
			return fmt.Errorf("sysfs: %s port %d: %d GIDs, table of %d", d.Name, i+1, len(p.GIDs), p.GIDTableLen)
		}
		if p.GIDTableLen > 1<<16 {
			return fmt.Errorf("sysfs: %s port %d: GID table of %d", d.Name, i+1, p.GIDTableLen)
		}
		for j, g := range p.GIDs {
			if g.NetDev != "" && !validName(g.NetDev) {
				return fmt.Errorf("sysfs: %s port %d GID %d: bad netdev %q", d.Name, i+1, j, g.NetDev)
			}
			if strings.Contains(g.Type, "\n") {
				return fmt.Errorf("sysfs: %s port %d GID %d: bad type %q", d.Name, i+1, j, g.Type)
			}
		}
	}
	return nil
}

// files returns the device's files, relative to the tree's root.
func (d *Device) files() map[string]string {
	f := map[string]string{}
	put := func(path, format string, a ...any) { f[path] = fmt.Sprintf(format, a...) + "\n" }
	maj, min := d.Major, d.Minor
	if maj == 0 && min == 0 {
		maj, min = UverbsMajor, UverbsBaseMinor+uint32(d.Uverbs)
	}
	uv := fmt.Sprintf("class/infiniband_verbs/uverbs%d/", d.Uverbs)
	put(uv+"ibdev", "%s", d.Name)
	put(uv+"dev", "%d:%d", maj, min)
	put(uv+"abi_version", "%d", DriverABI)

	dev := "class/infiniband/" + d.Name + "/"
	put(dev+"node_type", "1: CA")
	put(dev+"node_guid", "%s", FormatGUID(d.NodeGUID))
	sys := d.SysImageGUID
	if sys == 0 {
		sys = d.NodeGUID
	}
	put(dev+"sys_image_guid", "%s", FormatGUID(sys))
	put(dev+"fw_ver", "%s", d.FWVersion)
	for name, v := range map[string]string{"hw_rev": d.HWRev, "hca_type": d.HCAType, "board_id": d.BoardID, "node_desc": d.NodeDesc} {
		if v != "" {
			put(dev+name, "%s", strings.TrimRight(v, "\n"))
		}
	}
	put(dev+"device/modalias", "%s", Modalias(d.PCI))
	put(dev+"device/vendor", "0x%04x", d.PCI.VendorID)
	put(dev+"device/device", "0x%04x", d.PCI.DeviceID)
	put(dev+"device/subsystem_vendor", "0x%04x", d.PCI.SubsystemVendorID)
	put(dev+"device/subsystem_device", "0x%04x", d.PCI.SubsystemID)
	put(dev+"device/revision", "0x%02x", d.PCI.Revision)
	// device/net/IFNAME: the netdev of the PCI function, where tools
	// built on librdmacm (and rdma-core's CM tests) look for the
	// device's interface and its IP addresses. The kernel's is a
	// directory of the netdev's attributes; ifindex is enough to find
	// it.
	if nd := d.netdev(); nd != "" {
		if ifi, err := net.InterfaceByName(nd); err == nil {
			put(dev+"device/net/"+nd+"/ifindex", "%d", ifi.Index)
		} else {
			put(dev+"device/net/"+nd+"/ifindex", "0")
		}
	}

	for i, p := range d.Ports {
		port := fmt.Sprintf("%sports/%d/", dev, i+1)
		put(port+"state", "%d: %s", p.State, lookup(portStateText[:], int(p.State)))
		put(port+"phys_state", "%d: %s", p.PhysState, lookup(physStateText[:], int(p.PhysState)))
		ll := p.LinkLayer
		if ll == "" {
			ll = "Ethernet"
		}
		put(port+"link_layer", "%s", ll)
		put(port+"rate", "%s", p.Rate)
		put(port+"cap_mask", "0x%08x", p.CapMask)
		put(port+"lid", "0x0")
		put(port+"sm_lid", "0x0")
		put(port+"lid_mask_count", "0")
		put(port+"sm_sl", "0")
		for j := range p.GIDTableLen {
			var g GID
			if j < len(p.GIDs) {
				g = p.GIDs[j]
			}
			put(fmt.Sprintf("%sgids/%d", port, j), "%s", FormatGID(g.GID))
			// Every index needs a type: libibverbs 44 fails the whole
			// query when one is missing.
			t := g.Type
			if t == "" {
				t = GIDTypeRoCEv2
			}
			put(fmt.Sprintf("%sgid_attrs/types/%d", port, j), "%s", t)
			if g.NetDev != "" && g.GID != ([16]byte{}) {
				put(fmt.Sprintf("%sgid_attrs/ndevs/%d", port, j), "%s", g.NetDev)
			}
		}
		pk := p.PKeys
		if len(pk) == 0 {
			pk = []uint16{0xffff}
		}
		for j, k := range pk {
			put(fmt.Sprintf("%spkeys/%d", port, j), "0x%04x", k)
		}
	}
	return f
}

// netdev is the device's network interface: the netdev of its GIDs.
func (d *Device) netdev() string {
	for _, p := range d.Ports {
		for _, g := range p.GIDs {
			if g.NetDev != "" {
				return g.NetDev
			}
		}
	}
	return ""
}

func lookup(t []string, i int) string {
	if i >= 0 && i < len(t) {
		return t[i]
	}
	return "UNKNOWN"
}

// Write writes the tree describing devs at root, replacing whatever is
// there in one step: the tree is built in a temporary directory beside
// root and exchanged with it (renameat2 RENAME_EXCHANGE; on file systems
// without it, two renames). Directories are 0755 and files 0444, like
// sysfs.
func Write(root string, devs ...Device) error {
	files := map[string]string{
		"class/infiniband_verbs/abi_version": fmt.Sprintf("%d\n", UverbsABI),
		// The rdma_cm misc device (ucma.c: misc_register, abi_version).
		"class/misc/rdma_cm/abi_version": fmt.Sprintf("%d\n", RdmaCMABI),
		"class/misc/rdma_cm/dev":         fmt.Sprintf("%d:%d\n", RdmaCMMajor, RdmaCMMinor),
	}
	seenName, seenUverbs := map[string]bool{}, map[int]bool{}
	for i := range devs {
		d := &devs[i]
		if err := d.check(); err != nil {
			return err
		}
		if seenName[d.Name] || seenUverbs[d.Uverbs] {
			return fmt.Errorf("sysfs: device %s (uverbs%d) given twice", d.Name, d.Uverbs)
		}
		seenName[d.Name], seenUverbs[d.Uverbs] = true, true
		for k, v := range d.files() {
			files[k] = v
		}
	}
	if len(devs) == 0 {
		// libibverbs wants the class directories even with no device.
		files["class/infiniband/.keep"] = ""
	}
	root = filepath.Clean(root)
	parent := filepath.Dir(root)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(root)+".new-")
	if err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	defer os.RemoveAll(tmp) // after an exchange, the old tree
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	for rel, content := range files {
		if strings.HasSuffix(rel, "/.keep") {
			if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(rel)), 0o755); err != nil {
				return fmt.Errorf("sysfs: %w", err)
			}
			continue
		}
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("sysfs: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			return fmt.Errorf("sysfs: %w", err)
		}
	}
	return swap(tmp, root)
}

// swap puts the tree at tmp in root's place.
func swap(tmp, root string) error {
	err := os.Rename(tmp, root)
	if err == nil {
		return nil
	}
	if _, serr := os.Lstat(root); serr != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, root, unix.RENAME_EXCHANGE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("sysfs: exchanging %s: %w", root, err)
	}
	// No RENAME_EXCHANGE here: a short window without a tree.
	old := tmp + ".old"
	if err := os.Rename(root, old); err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	defer os.RemoveAll(old)
	if err := os.Rename(tmp, root); err != nil {
		return fmt.Errorf("sysfs: %w", err)
	}
	return nil
}

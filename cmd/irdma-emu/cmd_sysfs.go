package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/sysfs"
)

func init() {
	register(&command{
		name:    "sysfs",
		summary: "write the fake sysfs tree libibverbs reads for a device (sysfs [--device NAME] DIR)",
		run:     runSysfs,
	})
}

const sysfsUsage = `usage: irdma-emu sysfs [--device NAME] [--uverbs N] [--netdev IF] [--ip ADDR,…] [--mac MAC] [--down] DIR

Writes the sysfs tree libibverbs reads through SYSFS_PATH to find the
emulated device (class/infiniband_verbs/uverbsN, class/infiniband/NAME with
its port, GID table and GID attributes), replacing DIR atomically. The
daemon writes the same tree from its port model into
<run-dir>/<device>/sysfs; this command writes one by hand, by default for
irdma0 on 127.0.0.1 over lo. The node GUID and GID 0 come from the MAC
(default: the netdev's).

flags:
`

func runSysfs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sysfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	device := fs.String("device", attach.DefaultDevice, "device name")
	uverbs := fs.Int("uverbs", 0, "N of /dev/infiniband/uverbsN")
	netdev := fs.String("netdev", "lo", "the netdev the GIDs belong to (must exist for libibverbs' if_nametoindex)")
	ips := fs.String("ip", "127.0.0.1", "comma-separated addresses, one GID each after the link-local GID")
	macFlag := fs.String("mac", "", "MAC address for the node GUID and GID 0 (default: the netdev's)")
	down := fs.Bool("down", false, "port DOWN instead of ACTIVE")
	fs.Usage = func() {
		fmt.Fprint(stderr, sysfsUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	var addrs []netip.Addr
	for _, s := range strings.Split(*ips, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			fmt.Fprintf(stderr, "irdma-emu sysfs: --ip: %v\n", err)
			return exitUsage
		}
		addrs = append(addrs, a)
	}
	var mac net.HardwareAddr
	if *macFlag != "" {
		m, err := net.ParseMAC(*macFlag)
		if err != nil || len(m) != 6 {
			fmt.Fprintf(stderr, "irdma-emu sysfs: --mac: want a 48-bit MAC, got %q\n", *macFlag)
			return exitUsage
		}
		mac = m
	} else if ifc, err := net.InterfaceByName(*netdev); err == nil {
		mac = ifc.HardwareAddr
	} else {
		fmt.Fprintf(stderr, "irdma-emu sysfs: warning: netdev %s: %v (libibverbs resolves GID netdevs by name)\n", *netdev, err)
	}
	if len(mac) != 6 {
		mac = make(net.HardwareAddr, 6) // lo has none
	}
	d := sysfs.DefaultDevice(*device, *uverbs, *netdev, mac, addrs, !*down, profile.GEN2())
	if err := sysfs.Write(fs.Arg(0), d); err != nil {
		fmt.Fprintf(stderr, "irdma-emu sysfs: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %s (uverbs%d) node_guid %s, %d GIDs\n", fs.Arg(0), d.Name, d.Uverbs,
		sysfs.FormatGUID(d.NodeGUID), len(d.Ports[0].GIDs))
	return exitOK
}

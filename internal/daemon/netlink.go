package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/rdmanl"
	"github.com/irdma-emu/irdma-emu/sysfs"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// netlinkHandler answers the programs' NETLINK_RDMA sockets (the preload
// turns each into an attach connection, docs/attach.md "Netlink
// connections") with the kernel's NLDEV answers about this daemon's device
// (package rdmanl).
type netlinkHandler struct{ d *Daemon }

var _ attach.NetlinkHandler = netlinkHandler{}

// OpenNetlink implements attach.NetlinkHandler.
func (h netlinkHandler) OpenNetlink(p *attach.Peer) (attach.NetlinkSession, error) {
	// netlink_capable(CAP_NET_ADMIN) of the opener: uid 0 stands for it
	// (the daemon sees the peer's credentials, not its capabilities).
	admin := p.Cred != nil && p.Cred.Uid == 0
	return &netlinkSession{r: rdmanl.Responder{Src: nlSource{h.d}, Port: p.Hello.Port, Admin: admin}}, nil
}

type netlinkSession struct{ r rdmanl.Responder }

func (s *netlinkSession) Request(msg []byte) [][]byte { return s.r.Handle(msg) }
func (s *netlinkSession) Close()                      {}

// nlSource is the daemon's knowledge in rdmanl's terms.
type nlSource struct{ d *Daemon }

// resourceLister is implemented by the uverbs provider (and handlers
// embedding it).
type resourceLister interface{ Resources() uverbs.Resources }

// uverbsABI is irdma's uverbs driver ABI (IRDMA_ABI_VER): what
// ib_uverbs_get_nl_info reports as CHARDEV_ABI (ops.uverbs_abi_ver), the
// same number as sysfs uverbsN/abi_version.
const uverbsABI = 5

func (s nlSource) Device() rdmanl.Device {
	d := s.d
	dev := rdmanl.Device{Index: uint32(d.cfg.Uverbs), Name: d.cfg.Name, Ports: 1, NodeType: 1, Protocol: "roce",
		DriverID: rdmanl.DriverIRDMA,
		Uverbs: rdmanl.Chardev{Name: fmt.Sprintf("uverbs%d", d.cfg.Uverbs), Major: sysfs.UverbsMajor,
			Minor: uint32(sysfs.UverbsBaseMinor + d.cfg.Uverbs), ABI: uverbsABI}}
	if a, err := d.drv.QueryDevice(); err == nil {
		dev.CapFlags = a.DeviceCapFlags
		dev.NodeGUID = beUint64(a.NodeGUID)
		dev.SysImageGUID = beUint64(a.SysImageGUID)
		dev.Ports = uint32(a.PhysPortCnt)
	}
	maj, min := d.drv.FWVersion()
	dev.FWVersion = fmt.Sprintf("%d.%d", maj, min) // irdma_get_dev_fw_str
	return dev
}

func (s nlSource) Port(n uint32) (rdmanl.Port, bool) {
	if n != 1 {
		return rdmanl.Port{}, false
	}
	pa, err := s.d.drv.QueryPort(1)
	if err != nil {
		return rdmanl.Port{}, false
	}
	info := s.d.port.Info()
	p := rdmanl.Port{Index: 1, CapFlags: uint64(pa.PortCapFlags), State: pa.State, PhysState: pa.PhysState}
	if info.Name != "" {
		p.Netdev, p.NetdevIndex = info.Name, uint32(info.Ifindex)
	}
	return p, true
}

func (s nlSource) Resources() rdmanl.Resources {
	rl, ok := s.d.handler.(resourceLister)
	if !ok {
		return rdmanl.Resources{}
	}
	u := rl.Resources()
	var r rdmanl.Resources
	for _, q := range u.QPs {
		r.QPs = append(r.QPs, rdmanl.QP{Owner: rdmanl.Owner{PID: q.PID}, Port: uint32(q.Port), LQPN: q.QPN,
			RQPN: q.DestQPN, RQPSN: q.RQPSN, SQPSN: q.SQPSN, Type: q.Type, State: q.State, PDN: q.PDN,
			PathMigState: 0}) // IB_MIG_MIGRATED: irdma has no APM
	}
	for _, c := range u.CQs {
		r.CQs = append(r.CQs, rdmanl.CQ{Owner: rdmanl.Owner{PID: c.PID}, CQN: c.CQN, CQE: c.CQE, Users: c.Users, CtxN: uint32(c.Ctx)})
	}
	for _, m := range u.MRs {
		r.MRs = append(r.MRs, rdmanl.MR{Owner: rdmanl.Owner{PID: m.PID}, MRN: m.MRN, RKey: m.RKey, LKey: m.LKey, Length: m.Length, PDN: m.PDN})
	}
	for _, p := range u.PDs {
		r.PDs = append(r.PDs, rdmanl.PD{Owner: rdmanl.Owner{PID: p.PID}, PDN: p.PDN, Users: p.Users, CtxN: uint32(p.Ctx)})
	}
	for _, q := range u.SRQs {
		r.SRQs = append(r.SRQs, rdmanl.SRQ{Owner: rdmanl.Owner{PID: q.PID}, SRQN: q.SRQN, PDN: q.PDN, QPNs: q.QPNs})
	}
	for _, c := range u.Ctxs {
		r.Ctxs = append(r.Ctxs, rdmanl.Ctx{Owner: rdmanl.Owner{PID: c.PID}, CtxN: uint32(c.Ctx)})
	}
	return r
}

func (s nlSource) Counters(port uint32) ([]rdmanl.Counter, error) {
	hw, err := s.d.drv.GetHWStats()
	if err != nil {
		return nil, err
	}
	out := make([]rdmanl.Counter, 0, len(hw))
	for _, c := range hw {
		out = append(out, rdmanl.Counter{Name: c.Name, Value: c.Value})
	}
	return out, nil
}

// Chardev answers for the global character devices the device's sysfs
// tree declares (class/misc/<name>/dev and abi_version): the fake files
// the preload reports by stat carry the same number, which librdmacm
// compares (cma.c check_abi_version_nl, ucma_open_device).
func (s nlSource) Chardev(name string) (rdmanl.Chardev, bool) {
	if strings.ContainsAny(name, "/.") || name == "" {
		return rdmanl.Chardev{}, false
	}
	dir := filepath.Join(s.d.paths.Sysfs, "class", "misc", name)
	dev, err := os.ReadFile(filepath.Join(dir, "dev"))
	if err != nil {
		return rdmanl.Chardev{}, false
	}
	majS, minS, ok := strings.Cut(strings.TrimSpace(string(dev)), ":")
	maj, err1 := strconv.ParseUint(majS, 10, 32)
	min, err2 := strconv.ParseUint(minS, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return rdmanl.Chardev{}, false
	}
	c := rdmanl.Chardev{Name: name, Major: uint32(maj), Minor: uint32(min)}
	if abi, err := os.ReadFile(filepath.Join(dir, "abi_version")); err == nil {
		c.ABI, _ = strconv.ParseUint(strings.TrimSpace(string(abi)), 10, 64)
	}
	return c, true
}

// CopyOnFork: the preload gives a fork child a private copy of the rings
// and the daemon keeps writing the parent's memory, which is what Linux
// ≥ 5.13 reports as copy-on-fork (a child never shares DMA pages).
func (s nlSource) CopyOnFork() bool { return true }

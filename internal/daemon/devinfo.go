package daemon

import (
	"fmt"
	"net"
	"os"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/netport"
)

// DevInfo is what `irdma-emu devinfo` shows: the device and port attributes
// as the driver's query verbs answer them (irdma_query_device,
// irdma_query_port, the GID cache) — the values libibverbs gets through
// the uverbs layer, under ibv_devinfo's names — plus the emulator's own
// lines.
type DevInfo struct {
	Name   string        `json:"hca_id"`
	Device DeviceAttrs   `json:"device"`
	Ports  []DevInfoPort `json:"ports"`
	Emu    EmuInfo       `json:"irdma_emu"`
}

// DeviceAttrs are ibv_device_attr_ex's fields as ibv_devinfo -v prints them.
type DeviceAttrs struct {
	Transport             string `json:"transport"` // "InfiniBand (0)": RoCE devices are IBV_TRANSPORT_IB
	FWVer                 string `json:"fw_ver"`    // libirdma's "%hu.%hu" of fw_ver's major and minor halves
	NodeGUID              string `json:"node_guid"`
	SysImageGUID          string `json:"sys_image_guid"`
	VendorID              uint32 `json:"vendor_id"`
	VendorPartID          uint32 `json:"vendor_part_id"`
	HWVer                 uint32 `json:"hw_ver"`
	PhysPortCnt           uint8  `json:"phys_port_cnt"`
	MaxMRSize             uint64 `json:"max_mr_size"`
	PageSizeCap           uint64 `json:"page_size_cap"`
	MaxQP                 uint32 `json:"max_qp"`
	MaxQPWR               uint32 `json:"max_qp_wr"`
	DeviceCapFlags        uint32 `json:"device_cap_flags"`    // the low 32 bits (uverbs QUERY_DEVICE)
	DeviceCapFlagsEx      uint64 `json:"device_cap_flags_ex"` // all 64 (QUERY_DEVICE_EX)
	MaxSGE                uint32 `json:"max_sge"`             // min(max_send_sge, max_recv_sge), as uverbs reports it
	MaxSGERd              uint32 `json:"max_sge_rd"`
	MaxCQ                 uint32 `json:"max_cq"`
	MaxCQE                uint32 `json:"max_cqe"`
	MaxMR                 uint32 `json:"max_mr"`
	MaxPD                 uint32 `json:"max_pd"`
	MaxQPRdAtom           uint32 `json:"max_qp_rd_atom"`
	MaxResRdAtom          uint32 `json:"max_res_rd_atom"`
	MaxQPInitRdAtom       uint32 `json:"max_qp_init_rd_atom"`
	AtomicCap             uint8  `json:"atomic_cap"`
	MaxMW                 uint32 `json:"max_mw"`
	MaxMcastGrp           uint32 `json:"max_mcast_grp"`
	MaxMcastQPAttach      uint32 `json:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach uint32 `json:"max_total_mcast_qp_attach"`
	MaxAH                 uint32 `json:"max_ah"`
	MaxSRQ                uint32 `json:"max_srq"`
	MaxPKeys              uint16 `json:"max_pkeys"`
	LocalCAAckDelay       uint8  `json:"local_ca_ack_delay"`
	MaxFastRegPageListLen uint32 `json:"max_fast_reg_page_list_len"`
	TimestampMask         uint64 `json:"completion_timestamp_mask"`
	HCACoreClock          uint64 `json:"hca_core_clock"` // kHz; irdma GEN_2 reports none, GEN_3 1 GHz
	NumCompVectors        int    `json:"num_comp_vectors"`
}

// DevInfoPort is ibv_port_attr as ibv_devinfo -v prints it, and the GIDs.
type DevInfoPort struct {
	Port         int          `json:"port"`
	State        uint8        `json:"state"`
	StateName    string       `json:"state_name"`
	MaxMTU       uint8        `json:"max_mtu"`
	ActiveMTU    uint8        `json:"active_mtu"`
	SMLID        uint16       `json:"sm_lid"`
	LID          uint16       `json:"port_lid"`
	LMC          uint8        `json:"port_lmc"`
	LinkLayer    string       `json:"link_layer"`
	MaxMsgSz     uint32       `json:"max_msg_sz"`
	PortCapFlags uint32       `json:"port_cap_flags"` // the driver's flags plus IP_BASED_GIDS, as uverbs adds it
	PKeyTblLen   uint16       `json:"pkey_tbl_len"`
	GIDTblLen    uint32       `json:"gid_tbl_len"`
	ActiveWidth  uint8        `json:"active_width"`
	ActiveSpeed  uint16       `json:"active_speed"`
	PhysState    uint8        `json:"phys_state"`
	GIDs         []DevInfoGID `json:"gids"`
}

// DevInfoGID is one used entry of the GID table.
type DevInfoGID struct {
	Index int    `json:"index"`
	GID   string `json:"gid"`
	Type  string `json:"type"`
}

// EmuInfo are the emulator's own lines: where the port sits, how the link
// meets the kernel, what it verifies, and the daemon's files.
type EmuInfo struct {
	Profile    string   `json:"profile"` // the device generation: "E810 (GEN_2)" or "E2100 (GEN_3)"
	Netdev     string   `json:"netdev"`
	Ifindex    int      `json:"ifindex"`
	MAC        string   `json:"mac"`
	NetdevMTU  int      `json:"netdev_mtu"`
	LinkMTU    int      `json:"link_mtu"`
	Transport  string   `json:"transport_mode"` // udp.Mode: send=udp,recv=packet
	ICRC       string   `json:"icrc_verification"`
	Faults     string   `json:"faults"`
	LinkAddrs  []string `json:"link_addrs"`
	ForcedDown bool     `json:"link_forced_down"`
	Socket     string   `json:"attach_socket"`
	Control    string   `json:"control_socket"`
	Sysfs      string   `json:"sysfs"`
	PID        int      `json:"pid"`
	UptimeS    float64  `json:"uptime_s"`
	HMCObjects int      `json:"hmc_objects"`
	HMCSDs     uint32   `json:"hmc_sds"`
}

// ibPortCapIPBasedGIDs is IB_UVERBS_PCF_IP_BASED_GIDS.
const ibPortCapIPBasedGIDs = 1 << 26

// DevInfo queries the driver for the device, the port and the GID table.
func (d *Daemon) DevInfo() (DevInfo, error) {
	a, err := d.drv.QueryDevice()
	if err != nil {
		return DevInfo{}, fmt.Errorf("query device: %w", err)
	}
	pa, err := d.drv.QueryPort(1)
	if err != nil {
		return DevInfo{}, fmt.Errorf("query port: %w", err)
	}
	info := d.port.Info()
	objs, sds := d.drv.HMCLayout()
	di := DevInfo{Name: d.cfg.Name}
	di.Device = DeviceAttrs{
		Transport:    "InfiniBand (0)",
		FWVer:        fmt.Sprintf("%d.%d", uint16(a.FWVer>>32), uint16(a.FWVer)),
		NodeGUID:     guidString(a.NodeGUID),
		SysImageGUID: guidString(a.SysImageGUID),
		VendorID:     a.VendorID, VendorPartID: a.VendorPartID, HWVer: a.HWVer,
		PhysPortCnt: a.PhysPortCnt, MaxMRSize: a.MaxMRSize, PageSizeCap: a.PageSizeCap,
		MaxQP: a.MaxQP, MaxQPWR: a.MaxQPWR,
		DeviceCapFlags: uint32(a.DeviceCapFlags), DeviceCapFlagsEx: a.DeviceCapFlags,
		MaxSGE: min(a.MaxSendSGE, a.MaxRecvSGE), MaxSGERd: a.MaxSGERd,
		MaxCQ: a.MaxCQ, MaxCQE: a.MaxCQE, MaxMR: a.MaxMR, MaxPD: a.MaxPD,
		MaxQPRdAtom: a.MaxQPRdAtom, MaxQPInitRdAtom: a.MaxQPInitRdAtom, AtomicCap: a.AtomicCap,
		MaxMW: a.MaxMW, MaxMcastGrp: a.MaxMcastGrp, MaxMcastQPAttach: a.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: a.MaxTotalMcastQPAttach, MaxAH: a.MaxAH, MaxPKeys: a.MaxPKeys,
		MaxFastRegPageListLen: a.MaxFastRegPageListLen, TimestampMask: a.TimestampMask,
		HCACoreClock: a.HCACoreClock, NumCompVectors: a.NumCompVectors,
	}
	p := DevInfoPort{Port: 1, State: pa.State, StateName: netport.PortState(pa.State).String(),
		MaxMTU: uint8(pa.MaxMTU), ActiveMTU: uint8(pa.ActiveMTU), LID: pa.LID, LinkLayer: "Ethernet",
		MaxMsgSz: pa.MaxMsgSz, PortCapFlags: pa.PortCapFlags, PKeyTblLen: pa.PKeyTblLen,
		GIDTblLen: pa.GIDTblLen, ActiveWidth: pa.ActiveWidth, ActiveSpeed: pa.ActiveSpeed, PhysState: pa.PhysState}
	if pa.IPGIDs {
		p.PortCapFlags |= ibPortCapIPBasedGIDs
	}
	for i, g := range d.drv.GIDTable() {
		p.GIDs = append(p.GIDs, DevInfoGID{Index: i, GID: netport.GID(g.GID).String(), Type: gidTypeName(g.Type)})
	}
	di.Ports = []DevInfoPort{p}
	prof := d.dev.Profile()
	di.Emu = EmuInfo{
		Profile: ProfileName(prof),
		Netdev:  info.Name, Ifindex: info.Ifindex, MAC: net.HardwareAddr(info.MAC[:]).String(), NetdevMTU: info.MTU,
		LinkMTU:    d.link.MTU(),
		Transport:  d.link.Mode().String(),
		ICRC:       ICRCMatrix(d.link.Mode()),
		Faults:     "none",
		LinkAddrs:  addrStrings(d.link.Addrs()),
		ForcedDown: d.nd.forcedDown.Load(),
		Socket:     d.paths.Socket, Control: d.paths.Control, Sysfs: d.paths.Sysfs,
		PID:        os.Getpid(),
		UptimeS:    d.clock.Now().Seconds(),
		HMCObjects: len(objs), HMCSDs: sds,
	}
	if f := d.link.Faults(); f.Enabled() {
		di.Emu.Faults = f.String()
	}
	return di, nil
}

// ProfileName is how devinfo and stats name the device's generation.
func ProfileName(p profile.Profile) string { return fmt.Sprintf("%s (%v)", p.Name, p.Gen) }

// guidString is ibv_devinfo's GUID format: four groups of 16 bits.
func guidString(b [8]byte) string {
	v := beUint64(b)
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(v>>48), uint16(v>>32), uint16(v>>16), uint16(v))
}

func gidTypeName(t driver.GIDType) string {
	switch t {
	case driver.GIDTypeRoCE:
		return "RoCE v1"
	case driver.GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("type %d", t)
}

// ICRCMatrix says, for a link mode, which received frames' ICRCs are
// verified (docs/transport.md, "Modes").
func ICRCMatrix(m udp.Mode) string {
	if m.Recv == udp.IOPacket {
		return "every received frame verified (AF_PACKET sees the IP header as sent); bad ones dropped"
	}
	return "IPv4: verified when the sender's IP ID is 0 (irdma-emu senders), else unverifiable and accepted (rxe); IPv6: verified; bad ones dropped"
}

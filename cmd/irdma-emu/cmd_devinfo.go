package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/internal/daemon"
)

func init() {
	register(&command{
		name:    "devinfo",
		summary: "show a running device as ibv_devinfo does, plus its transport (devinfo [--device NAME] [-v])",
		run:     runDevinfo,
	})
}

const devinfoUsage = `usage: irdma-emu devinfo [--device NAME] [-v] [--json]

Shows a running device the way 'ibv_devinfo' (with -v: 'ibv_devinfo -v')
does, with the values the driver's query verbs answer — what libibverbs
sees through the uverbs layer — followed by the emulator's own lines: the
interface, the link's transport mode (send=udp,recv=packet) and which
received ICRCs it can verify, the faults injected, the daemon's files.

Exit status: 0; 1 if the daemon cannot be reached or fails the query;
2 usage.

flags:
`

// ctlFlags are the flags the tools use to find a daemon's control socket.
type ctlFlags struct {
	device, runDir, control string
}

func (c *ctlFlags) register(fs *flag.FlagSet) {
	def := os.Getenv(attach.EnvDevice)
	if def == "" {
		def = attach.DefaultDevice
	}
	fs.StringVar(&c.device, "device", def, "device name ($"+attach.EnvDevice+")")
	fs.StringVar(&c.runDir, "run-dir", "", "the daemon's run directory (default $"+attach.EnvRunDir+", else "+attach.DefaultRunDir+")")
	fs.StringVar(&c.control, "control", "", "control socket (default <run-dir>/<device>.ctl)")
}

func (c *ctlFlags) dial() (*daemon.Client, error) {
	if c.control != "" {
		return daemon.Dial(c.control)
	}
	return daemon.DialDevice(c.runDir, c.device)
}

// parseToolFlags parses a tool's flags: exitOK/exitUsage and done=true when
// the command should end at once.
func parseToolFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(fs.Output(), "irdma-emu %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, true
	}
	return 0, false
}

func runDevinfo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("devinfo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf ctlFlags
	cf.register(fs)
	verbose := fs.Bool("v", false, "print every attribute (ibv_devinfo -v)")
	fs.BoolVar(verbose, "verbose", false, "same as -v")
	jsonOut := fs.Bool("json", false, "print the attributes as one JSON object")
	fs.Usage = func() {
		fmt.Fprint(stderr, devinfoUsage)
		fs.PrintDefaults()
	}
	if code, done := parseToolFlags(fs, args); done {
		return code
	}
	c, err := cf.dial()
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu devinfo: %v\n", err)
		return exitFail
	}
	defer c.Close()
	di, err := c.DevInfo()
	if err != nil {
		fmt.Fprintf(stderr, "irdma-emu devinfo: %v\n", err)
		return exitFail
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(di); err != nil {
			return exitFail
		}
		return exitOK
	}
	fmt.Fprint(stdout, formatDevinfo(di, *verbose))
	return exitOK
}

// formatDevinfo prints di in ibv_devinfo's layout (rdma-core's
// libibverbs/examples/devinfo.c), then the emulator's section.
func formatDevinfo(di daemon.DevInfo, verbose bool) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	a := di.Device
	p("hca_id:\t%s\n", di.Name)
	p("\ttransport:\t\t\t%s\n", a.Transport)
	if a.FWVer != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p("\tnode_guid:\t\t\t%s\n", a.NodeGUID)
	p("\tsys_image_guid:\t\t\t%s\n", a.SysImageGUID)
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if verbose {
		p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
		p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
		p("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
		p("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
		p("\tdevice_cap_flags:\t\t0x%08x\n", a.DeviceCapFlags)
		b.WriteString(deviceCapFlagNames(a.DeviceCapFlags))
		p("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
		p("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERd)
		p("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
		p("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
		p("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
		p("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
		p("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
		p("\tmax_ee_rd_atom:\t\t\t%d\n", 0)
		p("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRdAtom)
		p("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
		p("\tmax_ee_init_rd_atom:\t\t%d\n", 0)
		p("\tatomic_cap:\t\t\t%s (%d)\n", atomicCapName(a.AtomicCap), a.AtomicCap)
		p("\tmax_ee:\t\t\t\t%d\n", 0)
		p("\tmax_rdd:\t\t\t%d\n", 0)
		p("\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
		p("\tmax_raw_ipv6_qp:\t\t%d\n", 0)
		p("\tmax_raw_ethy_qp:\t\t%d\n", 0)
		p("\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
		p("\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
		p("\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
		p("\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
		p("\tmax_fmr:\t\t\t%d\n", 0)
		p("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
		p("\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
		p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)
		for _, t := range []string{"general_odp_caps", "rc_odp_caps", "uc_odp_caps", "ud_odp_caps", "xrc_odp_caps"} {
			p("\t%s:\n", t)
			if t != "general_odp_caps" {
				p("\t\t\t\t\tNO SUPPORT\n")
			}
		}
		if a.TimestampMask != 0 {
			p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.TimestampMask)
		} else {
			p("\tcompletion_timestamp_mask not supported\n")
		}
		if a.HCACoreClock != 0 {
			p("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
		} else {
			p("\tcore clock not supported\n")
		}
		p("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlagsEx)
		p("\ttso_caps:\n")
		p("\t\tmax_tso:\t\t\t0\n")
		p("\trss_caps:\n")
		p("\t\tmax_rwq_indirection_tables:\t\t\t0\n")
		p("\t\tmax_rwq_indirection_table_size:\t\t\t0\n")
		p("\t\trx_hash_function:\t\t\t\t0x0\n")
		p("\t\trx_hash_fields_mask:\t\t\t\t0x0\n")
		p("\tmax_wq_type_rq:\t\t\t0\n")
		p("\tpacket_pacing_caps:\n")
		p("\t\tqp_rate_limit_min:\t0kbps\n")
		p("\t\tqp_rate_limit_max:\t0kbps\n")
		p("\ttag matching not supported\n")
		p("\tnum_comp_vectors:\t\t%d\n", a.NumCompVectors)
	}
	for _, port := range di.Ports {
		p("\t\tport:\t%d\n", port.Port)
		p("\t\t\tstate:\t\t\t%s (%d)\n", port.StateName, port.State)
		p("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuName(port.MaxMTU), port.MaxMTU)
		p("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuName(port.ActiveMTU), port.ActiveMTU)
		p("\t\t\tsm_lid:\t\t\t%d\n", port.SMLID)
		p("\t\t\tport_lid:\t\t%d\n", port.LID)
		p("\t\t\tport_lmc:\t\t0x%02x\n", port.LMC)
		p("\t\t\tlink_layer:\t\t%s\n", port.LinkLayer)
		if verbose {
			p("\t\t\tmax_msg_sz:\t\t0x%x\n", port.MaxMsgSz)
			p("\t\t\tport_cap_flags:\t\t0x%08x\n", port.PortCapFlags)
			p("\t\t\tport_cap_flags2:\t0x%04x\n", 0)
			p("\t\t\tmax_vl_num:\t\tinvalid value (0)\n")
			p("\t\t\tbad_pkey_cntr:\t\t0x0\n")
			p("\t\t\tqkey_viol_cntr:\t\t0x0\n")
			p("\t\t\tsm_sl:\t\t\t0\n")
			p("\t\t\tpkey_tbl_len:\t\t%d\n", port.PKeyTblLen)
			p("\t\t\tgid_tbl_len:\t\t%d\n", port.GIDTblLen)
			p("\t\t\tsubnet_timeout:\t\t0\n")
			p("\t\t\tinit_type_reply:\t0\n")
			p("\t\t\tactive_width:\t\t%sX (%d)\n", widthName(port.ActiveWidth), port.ActiveWidth)
			p("\t\t\tactive_speed:\t\t%s (%d)\n", speedName(port.ActiveSpeed), port.ActiveSpeed)
			p("\t\t\tphys_state:\t\t%s (%d)\n", physStateName(port.PhysState), port.PhysState)
			for _, g := range port.GIDs {
				p("\t\t\tGID[%3d]:\t\t%s, %s\n", g.Index, g.GID, g.Type)
			}
		}
		p("\n")
	}
	e := di.Emu
	p("irdma-emu:\n")
	p("\tprofile:\t\t\t%s\n", e.Profile)
	p("\tnetdev:\t\t\t\t%s (ifindex %d, mtu %d)\n", e.Netdev, e.Ifindex, e.NetdevMTU)
	p("\tmac:\t\t\t\t%s\n", e.MAC)
	p("\ttransport_mode:\t\t\t%s\n", e.Transport)
	p("\ticrc_verification:\t\t%s\n", e.ICRC)
	p("\tlink_addrs:\t\t\t%s (UDP/4791, link mtu %d)\n", strings.Join(e.LinkAddrs, " "), e.LinkMTU)
	p("\tfaults:\t\t\t\t%s\n", e.Faults)
	if e.ForcedDown {
		p("\tlink:\t\t\t\tforced down (irdma-emu control: link up)\n")
	}
	if verbose {
		p("\tattach_socket:\t\t\t%s\n", e.Socket)
		p("\tcontrol_socket:\t\t\t%s\n", e.Control)
		p("\tsysfs:\t\t\t\t%s\n", e.Sysfs)
		p("\thmc:\t\t\t\t%d object types, %d SDs\n", e.HMCObjects, e.HMCSDs)
		p("\tpid:\t\t\t\t%d (up %.0f s)\n", e.PID, e.UptimeS)
	}
	return b.String()
}

// deviceCapFlagNames lists the set IBV_DEVICE_* flags as ibv_devinfo does.
func deviceCapFlagNames(f uint32) string {
	names := []struct {
		bit  uint32
		name string
	}{
		{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"},
		{1 << 3, "RAW_MULTI"}, {1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"},
		{1 << 6, "UD_AV_PORT_ENFORCE"}, {1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"},
		{1 << 9, "INIT_TYPE"}, {1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"},
		{1 << 12, "RC_RNR_NAK_GEN"}, {1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"},
		{1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"}, {1 << 20, "XRC"},
		{1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"}, {1 << 24, "MEM_WINDOW_TYPE_2B"},
		{1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"}, {1 << 29, "MANAGED_FLOW_STEERING"},
	}
	var b strings.Builder
	known := uint32(0)
	for _, n := range names {
		known |= n.bit
		if f&n.bit != 0 {
			fmt.Fprintf(&b, "\t\t\t\t\t%s\n", n.name)
		}
	}
	if u := f &^ known; u != 0 {
		fmt.Fprintf(&b, "\t\t\t\t\tUnknown flags: 0x%X\n", u)
	}
	return b.String()
}

func atomicCapName(c uint8) string {
	switch c {
	case 0:
		return "ATOMIC_NONE"
	case 1:
		return "ATOMIC_HCA"
	case 2:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

func mtuName(m uint8) string {
	if m >= 1 && m <= 5 {
		return fmt.Sprint(128 << m)
	}
	return "invalid MTU"
}

func widthName(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedName(s uint16) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	case 256:
		return "200.0 Gbps"
	}
	return "invalid speed"
}

func physStateName(s uint8) string {
	names := map[uint8]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
		5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
	if n, ok := names[s]; ok {
		return n
	}
	return "invalid physical state"
}

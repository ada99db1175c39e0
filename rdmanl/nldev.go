package rdmanl

// Netlink message types and flags (include/uapi/linux/netlink.h).
const (
	nlmsgNoop    = 0x1
	nlmsgError   = 0x2
	nlmsgDone    = 0x3
	nlmsgMinType = 0x10

	flagRequest = 0x1
	flagMulti   = 0x2
	flagAck     = 0x4
	flagDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	// flagCapped: the error message carries only the request's header
	// (NETLINK_CAP_ACK; netlink_ack sets it when it leaves the payload out).
	flagCapped = 0x100
)

// Client is RDMA_NL_NLDEV, the netlink client of the device interface;
// a message's type is client<<10 + command (RDMA_NL_GET_TYPE).
const Client = 5

// Type is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd).
func Type(cmd uint16) uint16 { return Client<<10 + cmd }

// NLDEV commands (enum rdma_nldev_command).
const (
	CmdGet         = 1
	CmdSet         = 2
	CmdNewLink     = 3
	CmdDelLink     = 4
	CmdPortGet     = 5
	CmdSysGet      = 6
	CmdSysSet      = 7
	CmdResGet      = 9
	CmdResQPGet    = 10
	CmdResCMIDGet  = 11
	CmdResCQGet    = 12
	CmdResMRGet    = 13
	CmdResPDGet    = 14
	CmdGetChardev  = 15
	CmdStatSet     = 16
	CmdStatGet     = 17
	CmdStatDel     = 18
	CmdResQPRaw    = 19
	CmdResCQRaw    = 20
	CmdResMRRaw    = 21
	CmdResCtxGet   = 22
	CmdResSRQGet   = 23
	CmdStatStatus  = 24
	CmdResSRQRaw   = 25
	CmdNewDev      = 26
	CmdDelDev      = 27
	CmdMonitor     = 28
	CmdFRMRPoolGet = 29
	CmdFRMRPoolSet = 30
)

// NLDEV attributes (enum rdma_nldev_attr), the ones this package reads or
// writes.
const (
	AttrPad                 = 0
	AttrDevIndex            = 1  // u32
	AttrDevName             = 2  // string
	AttrPortIndex           = 3  // u32
	AttrCapFlags            = 4  // u64
	AttrFWVersion           = 5  // string
	AttrNodeGUID            = 6  // u64
	AttrSysImageGUID        = 7  // u64
	AttrPortState           = 12 // u8
	AttrPortPhysState       = 13 // u8
	AttrDevNodeType         = 14 // u8
	AttrResSummary          = 15 // nested
	AttrResSummaryEntry     = 16 // nested
	AttrResSummaryEntryName = 17 // string
	AttrResSummaryEntryCurr = 18 // u64
	AttrResQP               = 19 // nested
	AttrResQPEntry          = 20 // nested
	AttrResLQPN             = 21 // u32
	AttrResRQPN             = 22 // u32
	AttrResRQPSN            = 23 // u32
	AttrResSQPSN            = 24 // u32
	AttrResPathMigState     = 25 // u8
	AttrResType             = 26 // u8
	AttrResState            = 27 // u8
	AttrResPID              = 28 // u32
	AttrResKernName         = 29 // string
	AttrResCQ               = 35 // nested
	AttrResCQEntry          = 36 // nested
	AttrResCQE              = 37 // u32
	AttrResUsecnt           = 38 // u64
	AttrResMR               = 40 // nested
	AttrResMREntry          = 41 // nested
	AttrResRKey             = 42 // u32
	AttrResLKey             = 43 // u32
	AttrResIOVA             = 44 // u64
	AttrResMRLen            = 45 // u64
	AttrResPD               = 46 // nested
	AttrResPDEntry          = 47 // nested
	AttrResLocalDMALKey     = 48 // u32
	AttrNdevIndex           = 50 // u32
	AttrNdevName            = 51 // string
	AttrResPDN              = 60 // u32
	AttrResCQN              = 61 // u32
	AttrResMRN              = 62 // u32
	AttrResCtxN             = 64 // u32
	AttrSysNetnsMode        = 66 // u8
	AttrDevProtocol         = 67 // string
	AttrChardevType         = 69 // string
	AttrChardevName         = 70 // string
	AttrChardevABI          = 71 // u64
	AttrChardev             = 72 // u64 (huge_encode_dev)
	AttrUverbsDriverID      = 73 // u32
	AttrStatMode            = 74 // u32
	AttrStatRes             = 75 // u32
	AttrStatHWCounters      = 80 // nested
	AttrStatHWCounterEntry  = 81 // nested
	AttrStatHWCounterName   = 82 // string
	AttrStatHWCounterValue  = 83 // u64
	AttrDevDim              = 84 // u8
	AttrResCtx              = 86 // nested
	AttrResCtxEntry         = 87 // nested
	AttrResSRQ              = 88 // nested
	AttrResSRQEntry         = 89 // nested
	AttrResSRQN             = 90 // u32
	AttrMinRange            = 91 // u32
	AttrMaxRange            = 92 // u32
	AttrSysCopyOnFork       = 93 // u8
	AttrStatHWCounterIndex  = 94 // u32
	AttrSysPrivQKeyMode     = 96 // u8
	AttrSysMonitorMode      = 103
	AttrMax                 = 119 // RDMA_NLDEV_ATTR_MAX in rdma-core 65's uapi copy
)

package driver

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/emu/regs"
	"github.com/irdma-emu/irdma-emu/emu/timing"
)

// Device is one RDMA PCI function as the driver holds it: irdma's
// irdma_pci_f, irdma_sc_dev and irdma_device in one value. Open brings it
// up (irdma_ctrl_init_hw + irdma_rt_init_hw); Close tears it down. Its
// verbs are safe for concurrent use.
type Device struct {
	hw         HW
	mem        *hostmem.Memory
	prof       profile.Profile
	regs       regs.Layout
	clock      timing.Clock
	log        *zap.Logger
	netdev     Netdev
	cfg        Config
	cqpTimeout time.Duration

	dmaMu      sync.Mutex
	dmaRegions map[*hostmem.Region]struct{}

	objMem dmaMem // irdma rf->obj_mem: CQP context, FPM buffers, CCQ shadow
	objOff int

	cqp   *cqp
	ccq   *ccq
	ccqUp atomic.Bool

	// QUERY_RDMA_FEATURES results (dev->feature_info[]).
	featureInfo [maxFeatures]uint64
	fwMajor     uint16
	fwMinor     uint16
	ukAttrs     profile.UKAttrs // uk_attrs after the feature query (atomics)

	hmc      hmcInfo
	fpmQuery dmaMem
	fpmCmt   dmaMem
	sds      *sdTable
	pble     *pblePool

	ceqs       []*ceq
	aeq        *aeq
	msixCount  int
	stop       chan struct{}
	wg         sync.WaitGroup
	irqRunning bool

	// irdma_initialize_hw_rsrc
	maxQP, maxCQ, maxMR, maxPD, maxAH, maxMCG, arpSize uint32
	maxCQE                                             uint32
	mrStagMask                                         uint32
	qpIDs, cqIDs, mrIDs, pdIDs, ahIDs, mcgIDs, arpIDs  *idBitmap
	srqIDs                                             *idBitmap // GEN_3 only

	tblMu    sync.RWMutex
	qpTable  map[uint32]*QP
	cqTable  map[uint32]*CQ
	srqTable map[uint32]*SRQ

	arpMu sync.Mutex
	arp   map[arpKey]*arpEntry

	ws     wsTree
	stats  statsState
	mcMu   sync.Mutex
	mcList []*mcGroup
	ahMu   sync.Mutex
	ahHash map[ahKey]*AH
	state  atomic.Int32
	// irdma's cleanup_wq work (AE disconnects): workWG counts it, workMu
	// orders its Adds against Close's Wait, and workShut (under workMu)
	// starts no more once Close waits (beginWork, waitWork).
	workWG   sync.WaitGroup
	workMu   sync.Mutex
	workShut bool

	// CCQE errors per CQP opcode and the last major << 16 | minor
	// (irdma's cqp_cmd_stats and debug log).
	cqpErrs    [64]atomic.Uint64
	cqpLastErr [64]atomic.Uint32
	closeMu    sync.Mutex
}

// Device lifecycle states.
const (
	stateDown int32 = iota
	stateUp
	stateClosed
)

// ErrClosed is returned by verbs on a device that has been closed.
var ErrClosed = errors.New("irdma: device closed")

// Open brings a device up in the order of irdma_ctrl_init_hw and
// irdma_rt_init_hw (docs/hw-controlpath.md "Bring-up order"): wait for the
// protocol engine, create the CQP, query the RDMA features, size and commit
// the HMC and back it with SDs, set up the resource bitmaps, create the CCQ
// and CEQ 0, arm the CCQ, allocate the statistics instance, create the
// remaining CEQs, the PBLE pool and the AEQ. On failure everything created so
// far is torn down and the error returned.
func Open(hw HW, cfg Config) (*Device, error) {
	if hw == nil || cfg.Netdev == nil {
		return nil, fmt.Errorf("%w: Open needs a HW and a Netdev", syscall.EINVAL)
	}
	if cfg.Profile.Gen == 0 {
		cfg.Profile = profile.GEN2()
	}
	if err := cfg.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", syscall.EINVAL, err)
	}
	// GEN_2 (E810) and the emulator's GEN_3 (E2100: profile.GEN3, whose
	// host-context and register layouts stay GEN_2's).
	if cfg.Profile.Gen != profile.Gen2 && cfg.Profile.Gen != profile.Gen3 {
		return nil, fmt.Errorf("%w: only GEN_2 and GEN_3 are supported", syscall.EOPNOTSUPP)
	}
	if cfg.Clock == nil {
		cfg.Clock = timing.NewWall()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.QPLimit == 0 {
		cfg.QPLimit = LimitsSelQPs(DefaultLimitsSel)
	}
	if cfg.MSIXVectors <= 0 {
		cfg.MSIXVectors = defaultMSIX
	}
	if cfg.CQPTimeout <= 0 {
		cfg.CQPTimeout = defaultCQPTimeout
	}
	if len(cfg.Netdev.MAC()) != 6 {
		return nil, fmt.Errorf("%w: netdev MAC %v", syscall.EINVAL, cfg.Netdev.MAC())
	}
	d := &Device{
		hw:         hw,
		mem:        hw.Mem(),
		prof:       cfg.Profile,
		regs:       cfg.Profile.Regs,
		clock:      cfg.Clock,
		log:        cfg.Logger,
		netdev:     cfg.Netdev,
		cfg:        cfg,
		cqpTimeout: cfg.CQPTimeout,
		dmaRegions: map[*hostmem.Region]struct{}{},
		qpTable:    map[uint32]*QP{},
		cqTable:    map[uint32]*CQ{},
		srqTable:   map[uint32]*SRQ{},
		arp:        map[arpKey]*arpEntry{},
		ahHash:     map[ahKey]*AH{},
		stop:       make(chan struct{}),
	}
	d.ukAttrs = cfg.Profile.UK
	if d.mem == nil {
		return nil, fmt.Errorf("%w: HW has no memory", syscall.EINVAL)
	}
	if err := d.bringUp(); err != nil {
		d.teardown()
		return nil, err
	}
	d.state.Store(stateUp)
	return d, nil
}

// Close tears the device down (irdma_ib_unregister_device →
// irdma_rt_deinit_hw → irdma_ctrl_deinit_hw): remaining verbs objects
// are destroyed, then the AEQ, CEQs, PBLE backing, CCQ, HMC SDs and CQP,
// and every DMA region is released. Close is idempotent.
func (d *Device) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.state.Load() == stateClosed {
		return nil
	}
	d.destroyAllObjects()
	d.state.Store(stateClosed)
	return d.teardown()
}

func (d *Device) alive() error {
	if d.state.Load() != stateUp {
		return ErrClosed
	}
	return nil
}

func (d *Device) ccqReady() bool { return d.ccqUp.Load() }

// objAlloc is irdma_obj_aligned_mem: carve size bytes, aligned to align,
// from the 8 KB obj_mem region.
func (d *Device) objAlloc(size int, align int) (uint64, error) {
	off := (d.objOff + align - 1) / align * align
	if off+size > d.objMem.size {
		return 0, syscall.ENOMEM
	}
	d.objOff = off + size
	return d.objMem.pa + uint64(off), nil
}

// MAC returns the netdev MAC as an array.
func (d *Device) mac() [6]byte {
	var m [6]byte
	copy(m[:], d.netdev.MAC())
	return m
}

// trace logs a CQP WQE at debug level (print_hex_dump_debug "WQE: …").
func (d *Device) trace(what string, idx uint32, w cqpWQE) {
	if ce := d.log.Check(zap.DebugLevel, what); ce != nil {
		ce.Write(zap.Uint32("wqe_idx", idx), zap.Uint64s("qw", w[:]))
	}
}

func errField(err error) zap.Field              { return zap.Error(err) }
func u64Field(k string, v uint64) zap.Field     { return zap.Uint64(k, v) }
func hostIOVA(i int) hostmem.IOVA               { return hostmem.IOVA(i) }
func macString(m [6]byte) string                { return net.HardwareAddr(m[:]).String() }
func (d *Device) profileFields() profile.Fields { return d.prof.Fields }

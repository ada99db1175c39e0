package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Sim is a world in virtual time: devices, each with its driver, data
// plane (a stepped emu/engine) and NIC model, joined by Wires.
type Sim struct {
	loop  *Loop
	p     timing.Pipeline
	nodes []*Node
	tr    *tracer
	// dirty: the program posted (a doorbell, a receive) since the engines
	// were last polled.
	dirty bool
}

// Node is one host: a device brought up by the driver half, its engine in
// stepped mode, and its NIC model.
type Node struct {
	s   *Sim
	Idx int
	Dev *device.Device
	Drv *driver.Device
	Eng *engine.Engine
	NIC *NIC
	IP  netip.Addr
	MAC wire.MAC
	gid uint8 // the GID index of IP
	PD  *driver.PD
}

// WorldConfig configures New.
type WorldConfig struct {
	Pipeline  timing.Pipeline
	LinkMTU   int       // IP MTU of the links (0: 4200, carries PMTU 4096)
	Delay     timing.Ps // propagation (negative: the pipeline's)
	Loss      float64   // probability a frame is lost, each direction
	Seed      uint64
	Trace     io.Writer
	TraceMax  uint64 // events (0: 2 000 000)
	NodeCount int    // 0: 2
}

// New builds a world of NodeCount devices, the first two joined by a
// cable. Devices come up through driver.Open on the real device model,
// the control path running as it does in the daemon; the data path is
// then driven only by the loop.
func New(cfg WorldConfig) (*Sim, error) {
	if cfg.NodeCount == 0 {
		cfg.NodeCount = 2
	}
	if cfg.LinkMTU == 0 {
		cfg.LinkMTU = 4200
	}
	if cfg.TraceMax == 0 {
		cfg.TraceMax = 2_000_000
	}
	s := &Sim{loop: NewLoop(), p: cfg.Pipeline, tr: newTracer(cfg.Trace, cfg.TraceMax)}
	s.loop.after = s.settle
	for i := 0; i < cfg.NodeCount; i++ {
		n, err := s.newNode(i, cfg.LinkMTU)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	delay := cfg.Delay
	if delay < 0 {
		delay = s.p.Propagation
	}
	a, b := s.nodes[0].NIC, s.nodes[1].NIC
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6972646d612d656d)) // "irdma-em"
	a.out = &Wire{s: s, from: a, to: b, delay: delay, loss: cfg.Loss, rng: rng}
	b.out = &Wire{s: s, from: b, to: a, delay: delay, loss: cfg.Loss, rng: rng}
	return s, nil
}

func (s *Sim) newNode(i int, mtu int) (*Node, error) {
	dev, err := device.New(device.Config{Clock: s.loop, Model: s.p.Linear()})
	if err != nil {
		return nil, err
	}
	ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
	mac := wire.MAC{0x02, 0x00, 0x00, 0x00, 0x00, byte(i + 1)}
	drv, err := driver.Open(dev, driver.Config{
		Netdev:     &driver.StaticNetdev{HWAddr: net.HardwareAddr(mac[:]), MTUSize: mtu, IPs: []netip.Addr{ip}},
		CQPTimeout: 10 * time.Second,
	})
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("sim: device %d: %w", i, err)
	}
	n := &Node{s: s, Idx: i, Dev: dev, Drv: drv, IP: ip, MAC: mac}
	gidx := -1
	for j, g := range drv.GIDTable() {
		if g.Addr == ip {
			gidx = j
		}
	}
	if gidx < 0 {
		n.close()
		return nil, fmt.Errorf("sim: device %d: no GID for %v", i, ip)
	}
	n.gid = uint8(gidx)
	eng, err := engine.New(dev, engine.Config{Stepped: true, Workers: 1, Scan: engine.ScanConfig{Disabled: true},
		GIDs: []netip.Addr{ip}})
	if err != nil {
		n.close()
		return nil, err
	}
	n.Eng = eng
	n.NIC = newNIC(s, i, &s.p, mac, mtu, dev.Meter())
	if err := eng.AttachLink(n.NIC); err != nil {
		n.close()
		return nil, err
	}
	if err := eng.Start(); err != nil {
		n.close()
		return nil, err
	}
	if n.PD, err = drv.AllocPD(false, 0); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *Node) close() {
	if n.Eng != nil {
		n.Eng.Close()
	}
	if n.Drv != nil {
		n.Drv.Close()
	}
	n.Dev.Close()
}

// Close tears the world down.
func (s *Sim) Close() error {
	for _, n := range s.nodes {
		n.close()
	}
	return nil
}

// Loop returns the event loop.
func (s *Sim) Loop() *Loop { return s.loop }

// Nodes returns the hosts.
func (s *Sim) Nodes() []*Node { return s.nodes }

// pollEngines runs every engine until none has work left: the real code's
// reaction to what the last event delivered.
func (s *Sim) pollEngines() {
	for {
		did := false
		for _, n := range s.nodes {
			if n.Eng.Poll() {
				did = true
			}
		}
		if !did {
			return
		}
	}
}

// settle runs after every event: the engines react, and the CQEs they
// wrote are scheduled.
func (s *Sim) settle() {
	if !s.dirty && !s.loop.timerFired {
		// Only posts and device timers make work for an engine outside
		// rxDone, which polls them itself.
		return
	}
	s.dirty, s.loop.timerFired = false, false
	s.pollEngines()
	now := s.loop.now
	for _, n := range s.nodes {
		n.NIC.checkCQs(now)
	}
}

// Conn is one RC connection: a QP on each of two nodes, with a CQ pair
// and a registered buffer each.
type Conn struct {
	Side [2]*Endpoint
}

// Endpoint is one side of a Conn.
type Endpoint struct {
	Node         *Node
	QP           *driver.QP
	SCQ, RCQ     *driver.CQ
	SW, RW       *CQWatch
	Model        *QPModel
	Buf          *hostmem.Region
	MR           *driver.MR
	maxInline    int
	wrs          []driver.SendWR
	rwrs         []driver.RecvWR
	sges, rsges  []driver.SGE
	recvs        int // receives posted and not yet completed
	posted, done int
}

// ConnSpec sizes a Conn.
type ConnSpec struct {
	SQ, RQ  int // work requests
	BufSize int
	PMTU    int
	Inline  int // max inline data (≤ 101 on GEN_2)
	// InlinePayload: the scenario's WRs carry their payload inline.
	InlinePayload bool
}

// Connect creates an RC QP on nodes a and b connected to each other.
func (s *Sim) Connect(a, b int, sp ConnSpec) (*Conn, error) {
	c := &Conn{}
	na, nb := s.nodes[a], s.nodes[b]
	for i, n := range []*Node{na, nb} {
		e, err := n.newEndpoint(sp)
		if err != nil {
			return nil, err
		}
		c.Side[i] = e
	}
	mtu := driver.MTU4096
	switch sp.PMTU {
	case 256:
		mtu = driver.MTU256
	case 512:
		mtu = driver.MTU512
	case 1024:
		mtu = driver.MTU1024
	case 2048:
		mtu = driver.MTU2048
	}
	for i, e := range c.Side {
		peer := c.Side[1-i]
		d := e.Node.Drv
		init := &driver.QPAttr{QPState: driver.QPSInit, PKeyIndex: 0, PortNum: 1,
			QPAccessFlags: driver.AccessRemoteWrite | driver.AccessRemoteRead | driver.AccessLocalWrite}
		if err := d.ModifyQP(e.QP, init, driver.QPAttrState|driver.QPAttrPKeyIndex|driver.QPAttrPort|driver.QPAttrAccessFlags); err != nil {
			return nil, fmt.Errorf("sim: INIT: %w", err)
		}
		rtr := &driver.QPAttr{QPState: driver.QPSRTR, PathMTU: mtu, DestQPNum: peer.QP.ID(), RQPSN: 0,
			MaxDestRdAtomic: 16, MinRNRTimer: 12,
			AH: driver.AHAttr{GRH: true, SGIDIndex: e.Node.gid, HopLimit: 64, DGID: gidOf(peer.Node.IP),
				DMAC: peer.Node.MAC, PortNum: 1}}
		if err := d.ModifyQP(e.QP, rtr, driver.QPAttrState|driver.QPAttrAV|driver.QPAttrPathMTU|driver.QPAttrDestQPN|
			driver.QPAttrRQPSN|driver.QPAttrMaxDestRdAtomic|driver.QPAttrMinRNRTimer); err != nil {
			return nil, fmt.Errorf("sim: RTR: %w", err)
		}
		rts := &driver.QPAttr{QPState: driver.QPSRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0, MaxRdAtomic: 16}
		if err := d.ModifyQP(e.QP, rts, driver.QPAttrState|driver.QPAttrTimeout|driver.QPAttrRetryCnt|
			driver.QPAttrRNRRetry|driver.QPAttrSQPSN|driver.QPAttrMaxQPRdAtomic); err != nil {
			return nil, fmt.Errorf("sim: RTS: %w", err)
		}
	}
	for i, e := range c.Side {
		peer := c.Side[1-i]
		e.Model = e.Node.NIC.AddQP(e.QP.ID(), peer.QP.ID(), sp.InlinePayload)
	}
	return c, nil
}

func gidOf(a netip.Addr) driver.GID { return driver.GID(netip.AddrFrom16(a.As16()).As16()) }

func (n *Node) newEndpoint(sp ConnSpec) (*Endpoint, error) {
	d := n.Drv
	e := &Endpoint{Node: n, maxInline: sp.Inline}
	var err error
	if e.SCQ, err = d.CreateCQ(driver.CQAttr{CQE: sp.SQ + 16}); err != nil {
		return nil, fmt.Errorf("sim: send CQ: %w", err)
	}
	if e.RCQ, err = d.CreateCQ(driver.CQAttr{CQE: sp.RQ + 16}); err != nil {
		return nil, fmt.Errorf("sim: receive CQ: %w", err)
	}
	e.QP, _, err = d.CreateQP(n.PD, driver.QPInitAttr{Type: driver.QPTypeRC, SendCQ: e.SCQ, RecvCQ: e.RCQ,
		Cap: driver.QPCap{MaxSendWR: uint32(sp.SQ), MaxRecvWR: uint32(sp.RQ), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: uint32(sp.Inline)}})
	if err != nil {
		return nil, fmt.Errorf("sim: create QP: %w", err)
	}
	size := max(sp.BufSize, 64)
	if e.Buf, err = n.Dev.Mem().Alloc(size, 4096, "sim buffer"); err != nil {
		return nil, err
	}
	va := uint64(e.Buf.IOVA())
	if e.MR, err = d.RegPhysMR(n.PD, va, uint64(size), driver.AccessLocalWrite|driver.AccessRemoteWrite|driver.AccessRemoteRead, va); err != nil {
		return nil, fmt.Errorf("sim: MR: %w", err)
	}
	e.SW = n.NIC.WatchCQ(n.Dev.CQs().Get(e.SCQ.ID()))
	e.RW = n.NIC.WatchCQ(n.Dev.CQs().Get(e.RCQ.ID()))
	return e, nil
}

// Package gsi is the GSI agent of one device: QP1 created and driven
// through the driver half's kernel-mode verbs, as the kernel's MAD layer
// (drivers/infiniband/core/mad.c, ib_mad_port_open) drives QP1 on irdma.
// It carries the CM's MADs: it implements cm.Transport (UD SENDs to the
// peer's QP1 with the GSI Q_Key 0x80010000, through an address handle per
// destination) and hands every received MAD, with the sender's address
// from the GRH and the completion, to a receiver (cm.Manager.Deliver).
//
// Buffers: one host-memory region registered once (a physical MR, as
// ib_mad maps its buffers with the PD's DMA lkey), cut into 296-byte
// receive slots (40 bytes of GRH room, IBTA §11.4.1.2, + a 256-byte MAD)
// and 256-byte send slots. Completions are polled by one goroutine woken
// by the CQ's completion event, so that the CM's handlers never run on
// the driver's interrupt goroutine.
package gsi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/cm/mad"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/driver/uk"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Sizes (ib_mad.h: IB_MGMT_MAD_SIZE, struct ib_grh).
const (
	grhSize  = 40
	recvSlot = grhSize + mad.Size
	// Default queue depths: mad.c's mad_recvq_size / mad_sendq_size
	// default to 512; the CM of one emulated device needs far fewer.
	DefaultRecvDepth = 128
	DefaultSendDepth = 128
	maxAHs           = 1024
)

// Config configures an Agent.
type Config struct {
	Driver *driver.Device
	Mem    *hostmem.Memory // the device's host memory (for the buffers)
	// Resolve returns the next hop's MAC for a destination IP (the
	// daemon's neighbour lookup); used when a cm.Addr carries no DMAC.
	Resolve   func(ctx context.Context, ip netip.Addr) ([6]byte, error)
	RecvDepth int
	SendDepth int
}

// Stats are the agent's counters.
type Stats struct {
	Received     uint64 // MADs handed to the receiver
	Sent         uint64 // UD SENDs posted
	SendErrors   uint64 // send completions in error, or posts refused
	NoSendBuffer uint64 // SendMAD with every send slot in flight
	RecvErrors   uint64 // receive completions in error
	Short        uint64 // receives shorter than GRH + MAD (dropped)
	ResolveFails uint64 // no MAC for a destination
	AHs          uint64 // address handles cached
	Resets       uint64 // QP1 re-created after a fatal QP event
}

// ErrNoSendBuffer is returned by SendMAD when every send slot is in
// flight (the CM's retry timer sends it again).
var ErrNoSendBuffer = errors.New("gsi: no free send buffer")

// Agent is QP1 of one device.
type Agent struct {
	cfg  Config
	d    *driver.Device
	pd   *driver.PD
	cq   *driver.CQ
	qp   *driver.QP
	reg  *hostmem.Region
	mr   *driver.MR
	mac  [6]byte
	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	recv atomic.Pointer[func(from cm.Addr, b []byte)]

	// wqMu serialises posting and polling: the driver's CQ poll moves the
	// QP's SQ ring tail (irdma_uk_cq_poll_cmpl under the CQ lock) while a
	// post reads it under the QP lock, a race the C driver tolerates and
	// Go does not.
	wqMu sync.Mutex

	mu     sync.Mutex
	closed bool
	free   []int // free send slots
	ahs    map[ahKey]*driver.AH

	needReset atomic.Bool

	received, sent, sendErrors, noSendBuf, recvErrors, short, resolveFails, resets atomic.Uint64
}

type ahKey struct {
	sgid uint8
	dgid [16]byte
	dmac [6]byte
	fl   uint32
	tc   uint8
	hl   uint8
}

// wrID tags: the high bit marks a send slot.
const sendTag = 1 << 63

// New creates QP1 on the device and brings it to RTS (ib_mad's
// ib_mad_port_start: INIT with the GSI Q_Key and P_Key index 0, RTR, RTS
// with SQ PSN 0), with its receives posted.
func New(cfg Config) (_ *Agent, err error) {
	if cfg.Driver == nil || cfg.Mem == nil {
		return nil, errors.New("gsi: Config.Driver and Config.Mem are required")
	}
	if cfg.RecvDepth <= 0 {
		cfg.RecvDepth = DefaultRecvDepth
	}
	if cfg.SendDepth <= 0 {
		cfg.SendDepth = DefaultSendDepth
	}
	d := cfg.Driver
	a := &Agent{cfg: cfg, d: d, wake: make(chan struct{}, 1), done: make(chan struct{}), ahs: map[ahKey]*driver.AH{}}
	defer func() {
		if err != nil {
			a.release()
		}
	}()
	if a.pd, err = d.AllocPD(false, 0); err != nil {
		return nil, fmt.Errorf("gsi: PD: %w", err)
	}
	if a.cq, err = d.CreateCQ(driver.CQAttr{CQE: cfg.RecvDepth + cfg.SendDepth,
		CompHandler: func(*driver.CQ) { a.kick() }}); err != nil {
		return nil, fmt.Errorf("gsi: CQ: %w", err)
	}
	size := cfg.RecvDepth*recvSlot + cfg.SendDepth*mad.Size
	if a.reg, err = cfg.Mem.Alloc(size, 4096, "gsi-mads"); err != nil {
		return nil, fmt.Errorf("gsi: buffers: %w", err)
	}
	base := uint64(a.reg.IOVA())
	if a.mr, err = d.RegPhysMR(a.pd, base, uint64(size), driver.AccessLocalWrite, base); err != nil {
		return nil, fmt.Errorf("gsi: MR: %w", err)
	}
	if err = a.openQP(); err != nil {
		return nil, err
	}
	for i := range cfg.SendDepth {
		a.free = append(a.free, i)
	}
	if attr, qerr := d.QueryDevice(); qerr == nil {
		copy(a.mac[:], macFromGUID(attr.NodeGUID))
	}
	if _, err = d.ReqNotifyCQ(a.cq, driver.CQNextComp); err != nil {
		return nil, fmt.Errorf("gsi: arm CQ: %w", err)
	}
	a.wg.Add(1)
	go a.run()
	return a, nil
}

// openQP creates QP1, brings it to RTS and posts every receive slot.
func (a *Agent) openQP() error {
	d, cfg := a.d, a.cfg
	q, _, err := d.CreateQP(a.pd, driver.QPInitAttr{Type: driver.QPTypeGSI, SendCQ: a.cq, RecvCQ: a.cq,
		Cap:          driver.QPCap{MaxSendWR: uint32(cfg.SendDepth), MaxRecvWR: uint32(cfg.RecvDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
		EventHandler: func(_ *driver.QP, ev driver.AsyncEvent) { a.qpEvent(ev) }})
	if err != nil {
		return fmt.Errorf("gsi: QP1: %w", err)
	}
	a.qp = q
	for _, step := range []struct {
		attr driver.QPAttr
		mask driver.QPAttrMask
	}{
		{driver.QPAttr{QPState: driver.QPSInit, QKey: wire.GSIQKey, PKeyIndex: 0, PortNum: 1},
			driver.QPAttrState | driver.QPAttrQKey | driver.QPAttrPKeyIndex},
		{driver.QPAttr{QPState: driver.QPSRTR}, driver.QPAttrState},
		{driver.QPAttr{QPState: driver.QPSRTS, SQPSN: 0}, driver.QPAttrState | driver.QPAttrSQPSN},
	} {
		if err = d.ModifyQP(q, &step.attr, step.mask); err != nil {
			return fmt.Errorf("gsi: QP1 to state %d: %w", step.attr.QPState, err)
		}
	}
	for i := range cfg.RecvDepth {
		if err = a.postRecvLocked(i); err != nil {
			return fmt.Errorf("gsi: receive %d: %w", i, err)
		}
	}
	return nil
}

// qpEvent is QP1's event handler (the driver's AEQ goroutine): a fatal
// error leaves QP1 in ERROR, which would end the device's CM, so the
// poller re-creates it (the kernel's MAD layer only logs "Fatal error on
// MAD QP"; an emulator that must keep serving does better).
func (a *Agent) qpEvent(ev driver.AsyncEvent) {
	switch ev.Type {
	case driver.EventQPFatal, driver.EventQPReqErr, driver.EventQPAccessErr:
		a.needReset.Store(true)
		a.kick()
	}
}

// reset destroys QP1 and makes it again: its in-flight sends and
// receives are gone (the driver skips the CQEs of a destroyed QP), so
// every slot is free again; cached AHs go too, in case one of them was
// the cause (an ARP entry replaced under it).
func (a *Agent) reset() {
	a.wqMu.Lock()
	defer a.wqMu.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	for k, ah := range a.ahs {
		_ = a.d.DestroyAH(ah)
		delete(a.ahs, k)
	}
	a.free = a.free[:0]
	for i := range a.cfg.SendDepth {
		a.free = append(a.free, i)
	}
	a.mu.Unlock()
	_ = a.d.DestroyQP(a.qp)
	a.qp = nil
	if err := a.openQP(); err != nil {
		a.recvErrors.Add(1)
		return
	}
	a.resets.Add(1)
}

// macFromGUID undoes the EUI-64 node GUID (irdma: the port MAC with
// ff:fe inserted and the U/L bit flipped).
func macFromGUID(g [8]byte) []byte {
	return []byte{g[0] ^ 0x02, g[1], g[2], g[5], g[6], g[7]}
}

// SetReceiver names the function every received MAD goes to; nil drops
// them. It may be called at any time.
func (a *Agent) SetReceiver(f func(from cm.Addr, b []byte)) {
	if f == nil {
		a.recv.Store(nil)
		return
	}
	a.recv.Store(&f)
}

// QPN is the agent's QP number (1, the GSI QP).
func (a *Agent) QPN() uint32 { return wire.QPNGSI }

// Stats returns the counters.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	n := len(a.ahs)
	a.mu.Unlock()
	return Stats{Received: a.received.Load(), Sent: a.sent.Load(), SendErrors: a.sendErrors.Load(),
		NoSendBuffer: a.noSendBuf.Load(), RecvErrors: a.recvErrors.Load(), Short: a.short.Load(),
		ResolveFails: a.resolveFails.Load(), AHs: uint64(n), Resets: a.resets.Load()}
}

func (a *Agent) kick() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) recvAddr(i int) uint64 { return uint64(a.reg.IOVA()) + uint64(i*recvSlot) }
func (a *Agent) sendOff(i int) int     { return a.cfg.RecvDepth*recvSlot + i*mad.Size }

func (a *Agent) postRecv(i int) error {
	a.wqMu.Lock()
	defer a.wqMu.Unlock()
	return a.postRecvLocked(i)
}

func (a *Agent) postRecvLocked(i int) error {
	if a.qp == nil {
		return errors.New("gsi: no QP1")
	}
	_, err := a.d.PostRecv(a.qp, []driver.RecvWR{{WrID: uint64(i),
		SGList: []driver.SGE{{Addr: a.recvAddr(i), Length: recvSlot, LKey: a.mr.LKey()}}}})
	return err
}

// run polls the CQ whenever its completion event fires: receives go to
// the receiver and are posted again, sends free their slot.
func (a *Agent) run() {
	defer a.wg.Done()
	for {
		select {
		case <-a.done:
			return
		case <-a.wake:
		}
		if a.needReset.Swap(false) {
			a.reset()
		}
		for {
			a.wqMu.Lock()
			wcs, err := a.d.PollCQ(a.cq, 32)
			a.wqMu.Unlock()
			if err != nil {
				break
			}
			for i := range wcs {
				a.complete(&wcs[i])
			}
			if len(wcs) == 32 {
				continue
			}
			// Re-arm, and poll again if completions slipped in meanwhile.
			if n, err := a.d.ReqNotifyCQ(a.cq, driver.CQNextComp|driver.CQReportMissedEvents); err != nil || n == 0 {
				break
			}
		}
	}
}

func (a *Agent) complete(wc *driver.WorkCompletion) {
	if wc.WrID&sendTag != 0 {
		if wc.Status != uk.WCSuccess {
			a.sendErrors.Add(1)
		}
		a.mu.Lock()
		a.free = append(a.free, int(wc.WrID&^sendTag))
		a.mu.Unlock()
		return
	}
	i := int(wc.WrID)
	if i < 0 || i >= a.cfg.RecvDepth {
		return
	}
	if wc.Status != uk.WCSuccess {
		// A flushed receive (QP going to error at Close) is not reposted.
		a.recvErrors.Add(1)
		return
	}
	buf := a.reg.Bytes()[i*recvSlot : (i+1)*recvSlot]
	if int(wc.ByteLen) < recvSlot {
		a.short.Add(1)
	} else if f := a.recv.Load(); f != nil {
		from := a.source(buf[:grhSize], wc)
		a.received.Add(1)
		(*f)(from, buf[grhSize:recvSlot])
	}
	if err := a.postRecv(i); err != nil {
		a.recvErrors.Add(1)
	}
}

// source reads the sender's address from the GRH room (RoCEv2: an IPv4
// header in its last 20 bytes, or the IPv6 header; ib_init_ah_attr_from_wc)
// and the completion (source QP, source MAC).
func (a *Agent) source(grh []byte, wc *driver.WorkCompletion) cm.Addr {
	var from cm.Addr
	var src, dst netip.Addr
	if wc.NetHdrIPv4 {
		ip := grh[20:40]
		from.TrafficClass = ip[1]
		src = netip.AddrFrom4([4]byte(ip[12:16]))
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
	} else {
		from.TrafficClass = grh[0]<<4 | grh[1]>>4
		from.FlowLabel = uint32(grh[1]&0x0f)<<16 | uint32(grh[2])<<8 | uint32(grh[3])
		src = netip.AddrFrom16([16]byte(grh[8:24]))
		dst = netip.AddrFrom16([16]byte(grh[24:40]))
	}
	from.DGID = netip.AddrFrom16(src.As16()).As16()
	from.SGID = netip.AddrFrom16(dst.As16()).As16()
	if idx, ok := a.LookupGID(from.SGID); ok {
		from.SGIDIndex = idx
	}
	// The answer goes back with the default hop limit, as a route
	// lookup gives it (the received one is already decremented).
	from.HopLimit = 64
	if wc.Flags&uk.WCWithSMAC != 0 {
		from.DMAC = wc.SMAC
	}
	from.RemoteQPN = wc.SrcQP
	return from
}

// LookupGID finds gid in port 1's GID table (RoCE v2 entries first, the
// type the CM's paths use).
func (a *Agent) LookupGID(gid [16]byte) (uint8, bool) {
	pa, err := a.d.QueryPort(1)
	if err != nil {
		return 0, false
	}
	found, idx := false, uint8(0)
	for i := 0; i < int(pa.GIDTblLen) && i < 256; i++ {
		e, err := a.d.QueryGID(1, i)
		if err != nil || e.GID != driver.GID(gid) {
			continue
		}
		if e.Type == driver.GIDTypeRoCEv2 {
			return uint8(i), true
		}
		if !found {
			found, idx = true, uint8(i)
		}
	}
	return idx, found
}

// SendMAD posts mad as a UD SEND to the peer's QP1 (cm.Transport).
func (a *Agent) SendMAD(to cm.Addr, b []byte) error {
	if len(b) < mad.Size {
		return errors.New("gsi: MAD shorter than 256 bytes")
	}
	ah, err := a.ah(to)
	if err != nil {
		return err
	}
	// Slot and post under wqMu: a QP1 reset (which frees every slot)
	// cannot come between them.
	a.wqMu.Lock()
	defer a.wqMu.Unlock()
	a.mu.Lock()
	if a.closed || a.qp == nil {
		a.mu.Unlock()
		return errors.New("gsi: agent closed")
	}
	if len(a.free) == 0 {
		a.mu.Unlock()
		a.noSendBuf.Add(1)
		return ErrNoSendBuffer
	}
	slot := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	a.mu.Unlock()
	off := a.sendOff(slot)
	copy(a.reg.Bytes()[off:off+mad.Size], b[:mad.Size])
	qpn := to.RemoteQPN
	if qpn == 0 {
		qpn = wire.QPNGSI
	}
	_, err = a.d.PostSend(a.qp, []driver.SendWR{{WrID: sendTag | uint64(slot), Opcode: uk.WRSend,
		Flags: uk.SendSignaled, SGList: []driver.SGE{{Addr: uint64(a.reg.IOVA()) + uint64(off), Length: mad.Size, LKey: a.mr.LKey()}},
		AHID: ah.ID(), RemoteQPN: qpn, RemoteQKey: wire.GSIQKey}})
	if err != nil {
		a.sendErrors.Add(1)
		a.mu.Lock()
		a.free = append(a.free, slot)
		a.mu.Unlock()
		return err
	}
	a.sent.Add(1)
	return nil
}

// ah returns the address handle for to, creating and caching it (the
// kernel CM keeps one per cm_id's av; a cache per destination is the same
// for a device's few peers).
//
// The destination MAC is found exactly as uverbs finds it for a user AH
// (uverbs resolveDMAC, ib_resolve_eth_dmac): the device's own addresses
// get the device's MAC, others the daemon's neighbour lookup; to.DMAC is
// used only without a resolver (tests on the in-process link). One MAC
// per IP matters: the driver keeps one ARP entry per IP and replaces it
// when an AH names another MAC (irdma_add_arp), which would leave every
// other holder of the old entry pointing at a freed index.
func (a *Agent) ah(to cm.Addr) (*driver.AH, error) {
	dmac, err := a.dmac(to)
	if err != nil {
		return nil, err
	}
	k := ahKey{sgid: to.SGIDIndex, dgid: to.DGID, dmac: dmac, fl: to.FlowLabel, tc: to.TrafficClass, hl: to.HopLimit}
	a.mu.Lock()
	if ah := a.ahs[k]; ah != nil {
		a.mu.Unlock()
		return ah, nil
	}
	a.mu.Unlock()
	hl := to.HopLimit
	if hl == 0 {
		hl = 64
	}
	ah, err := a.d.CreateAH(a.pd, driver.AHAttr{DGID: driver.GID(to.DGID), FlowLabel: to.FlowLabel, SGIDIndex: to.SGIDIndex,
		HopLimit: hl, TrafficClass: to.TrafficClass, GRH: true, DMAC: dmac, PortNum: 1}, false)
	if err != nil {
		return nil, fmt.Errorf("gsi: AH: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		_ = a.d.DestroyAH(ah)
		return nil, errors.New("gsi: agent closed")
	}
	if o := a.ahs[k]; o != nil {
		_ = a.d.DestroyAH(ah)
		return o, nil
	}
	// Another MAC for the same destination replaces the old AH (its ARP
	// entry is gone), and the cache stays bounded.
	for k2, o := range a.ahs {
		if (k2.dgid == k.dgid && k2.dmac != k.dmac) || len(a.ahs) >= maxAHs {
			_ = a.d.DestroyAH(o)
			delete(a.ahs, k2)
		}
	}
	a.ahs[k] = ah
	return ah, nil
}

// dmac is the destination MAC for to (see ah).
func (a *Agent) dmac(to cm.Addr) ([6]byte, error) {
	if _, own := a.LookupGID(to.DGID); own || driver.GID(to.DGID).Addr().IsLoopback() {
		return a.ownMAC(), nil
	}
	if a.cfg.Resolve == nil {
		if to.DMAC == ([6]byte{}) {
			a.resolveFails.Add(1)
			return [6]byte{}, errors.New("gsi: destination MAC unknown")
		}
		return to.DMAC, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := a.cfg.Resolve(ctx, driver.GID(to.DGID).Addr())
	if err != nil {
		a.resolveFails.Add(1)
		return [6]byte{}, fmt.Errorf("gsi: no MAC for %v: %w", driver.GID(to.DGID).Addr(), err)
	}
	return m, nil
}

// ownMAC is the netdev's MAC as uverbs recovers it: from GID 0, the EUI-64
// link-local GID (addrconf_addr_eui48).
func (a *Agent) ownMAC() [6]byte {
	e, err := a.d.QueryGID(1, 0)
	if err != nil {
		return a.mac
	}
	g := e.GID
	return [6]byte{g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]}
}

// Close stops the poller and destroys QP1, its CQ, AHs, MR and PD.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	close(a.done)
	a.wg.Wait()
	return a.release()
}

func (a *Agent) release() error {
	var errs []error
	d := a.d
	if a.qp != nil {
		errs = append(errs, d.DestroyQP(a.qp))
	}
	a.mu.Lock()
	for k, ah := range a.ahs {
		errs = append(errs, d.DestroyAH(ah))
		delete(a.ahs, k)
	}
	a.mu.Unlock()
	if a.cq != nil {
		_, _, err := d.DestroyCQ(a.cq)
		errs = append(errs, err)
	}
	if a.mr != nil {
		errs = append(errs, d.DeregMR(a.mr))
	}
	if a.reg != nil {
		errs = append(errs, a.cfg.Mem.Unmap(a.reg))
	}
	if a.pd != nil {
		errs = append(errs, d.DeallocPD(a.pd))
	}
	return errors.Join(errs...)
}

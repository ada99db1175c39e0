package rdmacm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/internal/netport"
)

// Config describes the device a Provider serves.
type Config struct {
	// Device is the device's name (irdma0), for logs.
	Device string
	// NodeGUID is the device's node GUID as sysfs shows it: librdmacm
	// finds the verbs device of an id by it (ucma_get_device).
	NodeGUID uint64
	// Port returns the port's current state: addresses, GID table, MTU,
	// MAC.
	Port func() netport.Info
	// GIDs returns the port's GID table as programs see it (sysfs, and
	// QUERY_GID of uverbs): entry i is GID index i.
	GIDs func() [][16]byte
	// Resolve returns the next hop's MAC for an address (the neighbour
	// table, the device's own MAC for its own addresses), as
	// rdma_resolve_ip's addr_resolve does. It must give the MAC uverbs
	// gives for the same address (the REQ's path carries it to the CM's
	// address handle, and the driver's ARP table has one MAC per IP).
	Resolve func(ctx context.Context, ip netip.Addr) ([6]byte, error)
	// CM is the device's IBTA CM; nil serves everything but connections
	// (CONNECT fails with ENODEV, listens never get requests).
	CM *cm.Manager
	// Logger receives id and channel events; nil means none.
	Logger *zap.Logger
}

// Provider is the RDMA CM of one device: every channel, id and port
// binding of the programs using it. It is an attach.Handler for HELLOs
// with attach.HelloRdmaCM.
type Provider struct {
	cfg Config
	log *zap.Logger

	mu       sync.Mutex
	ids      map[uint32]*cmID    // every id with a handle (the kernel's ctx_idr)
	mcs      map[uint32]*mcast   // multicast handles (multicast_idr)
	channels map[uint32]*Channel // by token
	binds    map[bindKey][]*cmID // port space+port → the ids bound there
	// listens are the cm package listens this Provider holds, one per
	// service ID, shared by every listener of that port (several
	// listeners on one port differ by address; cma.c's bind list).
	listens  map[uint64]*cm.ID
	nextID   uint32
	nextMC   uint32
	nextTok  uint32
	closed   bool
	removing bool
}

type bindKey struct {
	ps   uint16
	port uint16
}

// NewProvider returns the RDMA CM of a device.
func NewProvider(cfg Config) (*Provider, error) {
	if cfg.Port == nil || cfg.Resolve == nil || cfg.GIDs == nil {
		return nil, errors.New("rdmacm: Config needs Port, GIDs and Resolve")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Provider{cfg: cfg, log: log, ids: map[uint32]*cmID{}, mcs: map[uint32]*mcast{},
		channels: map[uint32]*Channel{}, binds: map[bindKey][]*cmID{}, listens: map[uint64]*cm.ID{},
		nextTok: 1}, nil
}

var _ attach.Handler = (*Provider)(nil)

// Open implements attach.Handler: one open of /dev/infiniband/rdma_cm.
func (p *Provider) Open(peer *attach.Peer) (attach.Session, attach.Welcome, error) {
	if peer.Hello.Flags&attach.HelloRdmaCM == 0 {
		return nil, attach.Welcome{}, syscall.EPROTO
	}
	// A blocking pipe: the program's descriptor shares the open file
	// description, and its O_NONBLOCK must be the program's own (the
	// preload reads it to decide whether GET_EVENT waits).
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, attach.Welcome{}, syscall.ENOMEM
	}
	r, w := os.NewFile(uintptr(fds[0]), "rdma_cm-ready"), os.NewFile(uintptr(fds[1]), "rdma_cm-signal")
	ch := &Channel{p: p, pr: r, pw: w, mem: peer.Mem, ids: map[uint32]*cmID{}}
	if peer.Cred != nil {
		ch.pid = peer.Cred.Pid
	} else {
		ch.pid = int32(peer.Hello.PID)
	}
	p.mu.Lock()
	if p.closed || p.removing {
		p.mu.Unlock()
		ch.closeFiles()
		return nil, attach.Welcome{}, syscall.ENODEV
	}
	for p.channels[p.nextTok] != nil || p.nextTok == 0 {
		p.nextTok++
	}
	ch.token = p.nextTok
	p.nextTok++
	p.channels[ch.token] = ch
	p.mu.Unlock()
	p.log.Debug("rdma_cm channel open", zap.Uint32("token", ch.token), zap.Int32("pid", ch.pid), zap.String("program", peer.Hello.Program))
	return ch, attach.Welcome{Device: p.cfg.Device, ABIVersion: ABIVersion, Features: attach.FeatureRdmaCM}, nil
}

// Counts are the Provider's live objects, for statistics and tests.
type Counts struct {
	Channels, IDs, Multicasts, Listens int
}

// Counts returns how many channels, ids, multicast joins and CM listens
// exist now.
func (p *Provider) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ch := range p.channels {
		n += len(ch.ids)
	}
	return Counts{Channels: len(p.channels), IDs: n, Multicasts: len(p.mcs), Listens: len(p.listens)}
}

// Remove is the device going away (daemon shutdown): every id gets
// RDMA_CM_EVENT_DEVICE_REMOVAL, as cma_process_remove delivers it, and
// new channels are refused. It then waits, until ctx is done or at most
// removalWait, for the programs to take those events (or close their
// channels): the attach server closes the connections next, and a program
// must see DEVICE_REMOVAL, not a broken device file.
func (p *Provider) Remove(ctx context.Context) {
	p.mu.Lock()
	if p.removing {
		p.mu.Unlock()
		return
	}
	p.removing = true
	var drop []*cm.ID
	for _, ch := range p.channels {
		for _, id := range ch.ids {
			if id.state == stateDestroying {
				continue
			}
			id.state = stateDeviceRemoval
			if id.cmid != nil {
				drop = append(drop, id.cmid)
				id.cmid = nil
			}
			ch.queue(&event{id: id, typ: EventDeviceRemoval})
		}
	}
	for sid, l := range p.listens {
		drop = append(drop, l)
		delete(p.listens, sid)
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Destroy()
	}
	ctx, cancel := context.WithTimeout(ctx, removalWait)
	defer cancel()
	for !p.removalTaken() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// removalWait bounds how long shutdown waits for programs to read
// DEVICE_REMOVAL.
const removalWait = 2 * time.Second

// removalTaken reports whether no channel still holds a DEVICE_REMOVAL.
func (p *Provider) removalTaken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.channels {
		for _, ev := range ch.events {
			if ev.typ == EventDeviceRemoval {
				return false
			}
		}
	}
	return true
}

// randPSN is a random 24-bit starting PSN (cma.c: get_random_u32() &
// 0xffffff at id creation).
func randPSN() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:]) & 0xffffff
}

// allocHandle takes a free id handle; p.mu held.
func (p *Provider) allocHandle(id *cmID) {
	for {
		p.nextID++
		if p.nextID >= 1<<31 {
			p.nextID = 1
		}
		if p.ids[p.nextID] == nil {
			break
		}
	}
	id.handle = p.nextID
	id.hasHandle = true
	p.ids[id.handle] = id
}

// device addresses and GIDs ------------------------------------------------

// ownsAddr reports whether ip is one of the port's addresses.
func (p *Provider) ownsAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, a := range p.cfg.Port().Addrs {
		if a.Unmap() == ip {
			return true
		}
	}
	return false
}

// pickSource chooses our address for reaching dst: the port's first
// address of dst's family (the port has few; a route lookup would pick
// one of the host's, which need not be the device's).
func (p *Provider) pickSource(dst netip.Addr) (netip.Addr, bool) {
	dst = dst.Unmap()
	addrs := p.cfg.Port().Addrs
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() == dst.Is4() && a.IsLinkLocalUnicast() == dst.IsLinkLocalUnicast() {
			return a, true
		}
	}
	for _, a := range addrs {
		if a.Unmap().Is4() == dst.Is4() {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// gidIndex finds the GID table index of a RoCE v2 GID (index 0, the
// link-local default GID, only for a link-local address).
func (p *Provider) gidIndex(gid [16]byte) (int, bool) {
	for i, g := range p.cfg.GIDs() {
		if g == gid {
			return i, true
		}
	}
	return 0, false
}

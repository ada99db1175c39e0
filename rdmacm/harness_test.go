package rdmacm

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/internal/netport"
)

// wire carries MADs between the Managers of the test's devices by GID,
// each on its own goroutine as a GSI QP's receive path would.
type wire struct {
	mu    sync.Mutex
	nodes map[[16]byte]*cm.Manager
	drop  func(mad []byte) bool
}

type port struct {
	w   *wire
	gid [16]byte
}

func (p *port) SendMAD(to cm.Addr, b []byte) error {
	p.w.mu.Lock()
	m := p.w.nodes[to.DGID]
	drop := p.w.drop
	p.w.mu.Unlock()
	if m == nil || (drop != nil && drop(b)) {
		return nil // lost on the wire
	}
	b = append([]byte(nil), b...)
	// As the receiver's GSI QP sees it, ready to answer: our GID is
	// its source, the sender's its destination.
	from := to
	from.SGID, from.DGID = to.DGID, to.SGID
	from.RemoteQPN = 1
	go m.Deliver(from, b)
	return nil
}

// device is one Provider with its cm.Manager.
type device struct {
	p    *Provider
	m    *cm.Manager
	addr netip.Addr
	mac  [6]byte
}

func newDevice(t *testing.T, w *wire, addr string, n byte) *device {
	t.Helper()
	a := netip.MustParseAddr(addr)
	gid := a.As16()
	mac := [6]byte{2, 0, 0, 0, 0, n}
	ll := [16]byte{0: 0xfe, 1: 0x80, 15: n}
	guid := uint64(0x0200_00ff_fe00_0000) | uint64(n)
	m, err := cm.NewManager(cm.Config{Transport: &port{w: w, gid: gid}, Clock: timing.NewWall(), CAGUID: guid, Port: 1,
		Timewait:  50 * time.Millisecond,
		LookupGID: func(g [16]byte) (uint8, bool) { return 1, g == gid }})
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.nodes[gid] = m
	w.mu.Unlock()
	info := netport.Info{Name: "test0", MAC: mac, MTU: 1500, ActiveMTU: netport.IBMTU1024, State: netport.PortActive,
		Addrs: []netip.Addr{a}, Present: true}
	p, err := NewProvider(Config{Device: "irdma" + string('0'+n), NodeGUID: guid, CM: m,
		Port: func() netport.Info { return info },
		GIDs: func() [][16]byte { return [][16]byte{ll, gid} },
		Resolve: func(ctx context.Context, ip netip.Addr) ([6]byte, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.nodes[ip.As16()] == nil {
				<-ctx.Done()
				return [6]byte{}, ctx.Err()
			}
			return [6]byte{2, 0, 0, 0, 0, 0xee}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return &device{p: p, m: m, addr: a, mac: mac}
}

func newWire() *wire { return &wire{nodes: map[[16]byte]*cm.Manager{}} }

// channel is a test program's open of rdma_cm: the Channel, the
// readiness descriptor as the program gets it, and buffers in this
// process's memory the Channel writes responses into through
// /proc/self/mem, as for a program.
type channel struct {
	t     *testing.T
	ch    *Channel
	ready int
	token uint32
	resp  []byte
}

func (d *device) open(t *testing.T) *channel {
	t.Helper()
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, w, err := d.p.Open(&attach.Peer{Hello: attach.Hello{Version: 1, PID: uint32(os.Getpid()), Flags: attach.HelloRdmaCM},
		Cred: &unix.Ucred{Pid: int32(os.Getpid())}, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	if w.ABIVersion != ABIVersion || w.Features&attach.FeatureRdmaCM == 0 {
		t.Fatalf("welcome %+v", w)
	}
	c := &channel{t: t, ch: s.(*Channel), resp: make([]byte, 4096)}
	hdr := make([]byte, 8)
	le.PutUint32(hdr, CmdChannel)
	r := c.ch.Command(hdr)
	if r.Status != HdrSize || len(r.FDs) != 1 || r.FDs[0].Offset != 4 {
		t.Fatalf("channel grant %+v", r)
	}
	c.token = le.Uint32(r.Resp)
	c.ready = int(r.FDs[0].File.Fd())
	f := r.FDs[0].File
	t.Cleanup(func() { f.Close() })
	t.Cleanup(func() { c.close() })
	return c
}

func (c *channel) close() {
	if c.ch != nil {
		c.ch.Close()
		c.ch = nil
	}
}

// raw writes one command: header (cmd, in = len(body), out) and body. It
// returns write()'s result as an errno (0 for success).
func (c *channel) raw(cmd uint32, out int, body []byte) syscall.Errno {
	b := make([]byte, HdrSize+len(body))
	le.PutUint32(b, cmd)
	le.PutUint16(b[4:], uint16(len(body)))
	le.PutUint16(b[6:], uint16(out))
	copy(b[HdrSize:], body)
	r := c.ch.Command(b)
	if r.Status < 0 {
		return syscall.Errno(-r.Status)
	}
	if int(r.Status) != len(b) {
		c.t.Fatalf("command %d: status %d for %d bytes", cmd, r.Status, len(b))
	}
	return 0
}

// respAddr is the address of the response buffer.
func (c *channel) respAddr() uint64 {
	clear(c.resp)
	return uint64(uintptr(unsafe.Pointer(&c.resp[0])))
}

func (c *channel) must(what string, e syscall.Errno) {
	c.t.Helper()
	if e != 0 {
		c.t.Fatalf("%s: %v", what, e)
	}
}

func (c *channel) createID(uid uint64, ps uint16) uint32 {
	c.t.Helper()
	b := make([]byte, sizeCreateID)
	le.PutUint64(b, uid)
	le.PutUint64(b[8:], c.respAddr())
	le.PutUint16(b[16:], ps)
	c.must("CREATE_ID", c.raw(CmdCreateID, 4, b))
	runtime.KeepAlive(c.resp)
	return le.Uint32(c.resp)
}

func (c *channel) destroyID(h uint32) (int, syscall.Errno) {
	b := make([]byte, sizeDestroyID)
	le.PutUint64(b, c.respAddr())
	le.PutUint32(b[8:], h)
	e := c.raw(CmdDestroyID, 4, b)
	return int(le.Uint32(c.resp)), e
}

func sockaddr(ap string) []byte {
	a := netip.MustParseAddrPort(ap)
	b := make([]byte, 28)
	sockAddr{v6: a.Addr().Is6(), addr: a.Addr(), port: a.Port()}.put(b)
	return b
}

func (c *channel) bindIP(h uint32, ap string) syscall.Errno {
	b := make([]byte, sizeBindIP)
	copy(b[8:36], sockaddr(ap))
	le.PutUint32(b[36:], h)
	return c.raw(CmdBindIP, 0, b)
}

func (c *channel) listen(h uint32, backlog int) syscall.Errno {
	b := make([]byte, sizeListen)
	le.PutUint32(b, h)
	le.PutUint32(b[4:], uint32(backlog))
	return c.raw(CmdListen, 0, b)
}

func (c *channel) resolveIP(h uint32, dst string, ms uint32) syscall.Errno {
	b := make([]byte, sizeResolveIP)
	copy(b[28:56], sockaddr(dst))
	le.PutUint32(b[56:], h)
	le.PutUint32(b[60:], ms)
	return c.raw(CmdResolveIP, 0, b)
}

func (c *channel) simple(cmd uint32, h uint32, size int) syscall.Errno {
	b := make([]byte, size)
	le.PutUint32(b, h)
	return c.raw(cmd, 0, b)
}

func (c *channel) connect(h, qpn uint32, pd []byte) syscall.Errno {
	b := make([]byte, sizeConnect)
	cp := b[:sizeConnParam]
	le.PutUint32(cp[cpQPN:], qpn)
	copy(cp[cpPrivateData:], pd)
	cp[cpPrivateDataLen] = uint8(len(pd))
	cp[cpRespRes], cp[cpInitDepth] = 4, 4
	cp[cpRetryCount], cp[cpRNRRetryCount] = 7, 7
	cp[cpValid] = 1
	le.PutUint32(b[272:], h)
	return c.raw(CmdConnect, 0, b)
}

func (c *channel) accept(h uint32, uid uint64, qpn uint32, valid bool) syscall.Errno {
	b := make([]byte, sizeAccept)
	le.PutUint64(b, uid)
	cp := b[8 : 8+sizeConnParam]
	le.PutUint32(cp[cpQPN:], qpn)
	cp[cpRespRes], cp[cpInitDepth] = 2, 2
	cp[cpRNRRetryCount] = 7
	if valid {
		cp[cpValid] = 1
	}
	le.PutUint32(b[280:], h)
	return c.raw(CmdAccept, 0, b)
}

func (c *channel) initQPAttr(h, state uint32) ([]byte, syscall.Errno) {
	b := make([]byte, sizeInitQPAttr)
	le.PutUint64(b, c.respAddr())
	le.PutUint32(b[8:], h)
	le.PutUint32(b[12:], state)
	e := c.raw(CmdInitQPAttr, sizeQPAttr, b)
	return append([]byte(nil), c.resp[:sizeQPAttr]...), e
}

func (c *channel) queryRoute(h uint32) ([]byte, syscall.Errno) {
	b := make([]byte, sizeQuery)
	le.PutUint64(b, c.respAddr())
	le.PutUint32(b[8:], h)
	e := c.raw(CmdQueryRoute, sizeQueryRouteResp, b)
	return append([]byte(nil), c.resp[:sizeQueryRouteResp]...), e
}

// ev is a received rdma_ucm_event_resp.
type ev struct {
	uid    uint64
	id     uint32
	typ    uint32
	status int32
	param  []byte
}

// getEvent waits for the readiness descriptor, as the preload does, then
// takes the event.
func (c *channel) getEvent() ev {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := make([]byte, sizeGetEvent)
		le.PutUint64(b, c.respAddr())
		e := c.raw(CmdGetEvent, sizeEventResp, b)
		if e == 0 {
			r := c.resp
			return ev{uid: le.Uint64(r), id: le.Uint32(r[8:]), typ: le.Uint32(r[12:]), status: int32(le.Uint32(r[16:])),
				param: append([]byte(nil), r[20:20+sizeUDParam]...)}
		}
		if e != syscall.EAGAIN {
			c.t.Fatalf("GET_EVENT: %v", e)
		}
		if time.Now().After(deadline) {
			c.t.Fatal("no event in 10 s")
		}
		fds := []unix.PollFd{{Fd: int32(c.ready), Events: unix.POLLIN}}
		_, _ = unix.Poll(fds, 1000)
	}
}

func (c *channel) expect(typ uint32) ev {
	c.t.Helper()
	e := c.getEvent()
	if e.typ != typ {
		c.t.Fatalf("event %d (status %d), want %d", e.typ, e.status, typ)
	}
	return e
}

// readable reports whether the readiness descriptor polls readable now.
func (c *channel) readable() bool {
	fds := []unix.PollFd{{Fd: int32(c.ready), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n == 1 && fds[0].Revents&unix.POLLIN != 0
}

// waitReadable blocks on the readiness descriptor (at most a second).
func waitReadable(c *channel) {
	fds := []unix.PollFd{{Fd: int32(c.ready), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, 1000)
}

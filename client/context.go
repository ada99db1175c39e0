package client

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver/uk"
)

// Feature flags of the ucontext response (irdma_feature_flags).
const (
	FeatureRTSAE     uint64 = 0x1
	FeatureCQResize  uint64 = 0x2
	FeatureAtomicOps uint64 = 0x40
)

// Doorbell page offsets (docs/hw-datapath.md "User doorbell page").
const (
	dbSQOffset = 0  // wqe_alloc_db: the QP id
	dbCQOffset = 64 // IRDMA_DB_CQ_OFFSET: the CQ id after an arm
)

// UContext is what GET_CONTEXT answered: the device's uk_attrs and the
// doorbell page key (irdma_alloc_ucontext_resp).
type UContext struct {
	NumCompVectors uint32
	MaxPDs         uint32
	MaxQPs         uint32
	KernelVer      uint8
	FeatureFlags   uint64
	DBMmapKey      uint64
	HWRev          uint8
	Limits         uk.Limits
}

// Context is one open of the device: one attach connection, one
// ucontext, its doorbell page and its shared memory. Its methods may be
// called from several goroutines.
type Context struct {
	conn    *attach.Conn
	arena   *arena
	device  string
	sysfs   string // the device's fake sysfs tree (SYSFS_PATH)
	abiVer  uint32 // uverbs driver ABI from HELLO
	uctx    UContext
	userVer uint8 // the userspace_ver the daemon accepted

	asyncFile *os.File // GET_CONTEXT's async_fd
	db        []byte   // the doorbell page
	ntf       *notify  // the post notification; nil when the daemon offers none
	pd0       *PD      // the provider's internal PD (CQ ring registrations)

	// respBuf is the address every command names as its response buffer:
	// the daemon returns the response in its reply instead of writing
	// there (docs/attach.md), but like the kernel it may refuse a command
	// whose response address is NULL, so it names real memory.
	respBuf []byte

	dbRetry atomic.Int64 // time.Duration between doorbell retries; 0: none

	mu      sync.Mutex
	handles uint64         // user_handle source
	cqs     map[uint64]*CQ // by user_handle, for completion events
	qps     map[uint64]*QP // by user_handle, for async events
	closed  bool
}

// Open opens the emulated device: target is a device name (its socket is
// <run dir>/<name>.sock, the run dir from IRDMA_EMU_RUN_DIR or
// /run/irdma-emu) or the path of an attach socket; empty means
// $IRDMA_EMU_SOCKET, else the default device. It sends HELLO without a
// /proc/self/mem descriptor (everything the device reaches is shared
// memory from AllocBuffer), then what libirdma 44 sends when libibverbs
// opens the device: GET_CONTEXT (userspace_ver 5, falling back to 4), an
// mmap of the doorbell page with db_mmap_key, and ALLOC_PD for the
// provider's internal PD.
func Open(target string) (*Context, error) {
	sock := target
	switch {
	case target == "":
		if s := os.Getenv(attach.EnvSocket); s != "" {
			sock = s
		} else {
			sock = attach.SocketPath(attach.RunDir(), deviceDefault())
		}
	case !strings.ContainsRune(target, '/'):
		sock = attach.SocketPath(attach.RunDir(), target)
	}
	conn, err := attach.Dial(sock)
	if err != nil {
		return nil, fmt.Errorf("client: cannot reach the daemon at %s: %w", sock, err)
	}
	c := &Context{conn: conn, cqs: map[uint64]*CQ{}, qps: map[uint64]*QP{}, respBuf: make([]byte, 512)}
	c.dbRetry.Store(int64(DefaultDoorbellRetry))
	ok := false
	defer func() {
		if !ok {
			c.teardown()
		}
	}()
	rep, err := conn.Hello(attach.Hello{PID: uint32(os.Getpid()), Program: programName()}, nil)
	if err != nil {
		return nil, fmt.Errorf("client: HELLO: %w", err)
	}
	c.device = rep.Device
	c.abiVer = rep.ABIVersion
	c.sysfs = attach.SysfsPath(filepath.Dir(sock), c.device)
	c.arena = newArena(conn)
	if err := c.getContext(); err != nil {
		return nil, err
	}
	if err := c.mapDoorbell(); err != nil {
		return nil, err
	}
	if rep.Features&attach.FeatureNotify != 0 && os.Getenv(EnvNotify) != "0" {
		if err := c.setupNotify(); err != nil {
			return nil, err
		}
	}
	if c.pd0, err = c.AllocPD(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func deviceDefault() string {
	if d := os.Getenv(attach.EnvDevice); d != "" {
		return d
	}
	return attach.DefaultDevice
}

func programName() string {
	if len(os.Args) > 0 {
		return filepath.Base(os.Args[0])
	}
	return "irdma-emu-client"
}

// DefaultDoorbellRetry is 0: one doorbell per post, as libirdma rings.
// The daemon rings every QP of a context when the context's shared
// doorbell word changes, so an overwritten QP id loses nothing.
const DefaultDoorbellRetry time.Duration = 0

// SetDoorbellRetry sets the interval of the doorbell retries of CQ.Poll;
// 0 turns them off, leaving one doorbell per post as libirdma rings.
func (c *Context) SetDoorbellRetry(d time.Duration) { c.dbRetry.Store(int64(max(d, 0))) }

// Device is the device's name (irdma0).
func (c *Context) Device() string { return c.device }

// UContext returns what GET_CONTEXT answered.
func (c *Context) UContext() UContext { return c.uctx }

// Limits are the uk limits the rings are sized and checked with.
func (c *Context) Limits() uk.Limits { return c.uctx.Limits }

// AtomicsSupported reports whether the device advertises
// IRDMA_FEATURE_ATOMIC_OPS.
func (c *Context) AtomicsSupported() bool { return c.uctx.FeatureFlags&FeatureAtomicOps != 0 }

func (c *Context) nextHandle() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handles++
	return c.handles
}

func (c *Context) respAddr() uint64 { return addrOf(c.respBuf) }

// exec sends one command and returns its response, padded with zeros to
// respLen (libibverbs zeroes the response buffer before the write), and
// the descriptors that came with it.
func (c *Context) exec(cmd []byte, respLen int) (rbuf, []*os.File, error) {
	command := le.Uint32(cmd)
	res, err := c.conn.Command(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", cmdName(command), err)
	}
	if res.Status < 0 {
		for _, f := range res.Files {
			f.Close()
		}
		return nil, nil, &CmdError{Cmd: cmdName(command), Errno: syscall.Errno(-res.Status)}
	}
	if int(res.Status) != len(cmd) {
		for _, f := range res.Files {
			f.Close()
		}
		return nil, nil, fmt.Errorf("client: %s: write returned %d of %d bytes: %w", cmdName(command), res.Status, len(cmd), syscall.EIO)
	}
	resp := res.Resp
	if len(resp) > respLen {
		resp = resp[:respLen]
	}
	if len(resp) < respLen {
		resp = append(resp, make([]byte, respLen-len(resp))...)
	}
	return rbuf(resp), res.Files, nil
}

// run is exec for commands that return no descriptors.
func (c *Context) run(cmd []byte, respLen int) (rbuf, error) {
	r, files, err := c.exec(cmd, respLen)
	for _, f := range files {
		f.Close()
	}
	return r, err
}

func (c *Context) getContext() error {
	var r rbuf
	var files []*os.File
	var err error
	for _, ver := range []uint8{irdmaABIVer, 4} {
		var core, udata wbuf
		core.u64(c.respAddr())
		udata.u32(0)
		udata.u8(ver)
		udata.zero(3)
		r, files, err = c.exec(legacyCmd(cmdGetContext, core, udata, getContextRespSize+irdmaUctxRespSize), getContextRespSize+irdmaUctxRespSize)
		if err == nil {
			c.userVer = ver
			break
		}
	}
	if err != nil {
		return err
	}
	for i, f := range files {
		if i == 0 {
			c.asyncFile = f
		} else {
			f.Close()
		}
	}
	const o = getContextRespSize
	u := UContext{
		NumCompVectors: r.u32(4),
		MaxPDs:         r.u32(o),
		MaxQPs:         r.u32(o + 4),
		KernelVer:      r.u8(o + 12),
		FeatureFlags:   r.u64(o + 16),
		DBMmapKey:      r.u64(o + 24),
		HWRev:          r.u8(o + 62),
	}
	if u.HWRev == 0 {
		// A legacy (i40iw) kernel answers without hw_rev; GEN_1 rings are
		// not what this client writes.
		return fmt.Errorf("client: GET_CONTEXT: no hw_rev (legacy i40iw device): %w", syscall.EOPNOTSUPP)
	}
	u.Limits = uk.Limits{
		MaxWQFrags:  int(r.u32(o + 32)),
		MaxReadSGEs: int(r.u32(o + 36)),
		MaxInline:   int(r.u32(o + 40)),
		MaxRQQuanta: r.u32(o + 44),
		MaxWQQuanta: r.u32(o + 48),
		MinCQSize:   int(r.u32(o + 52)),
		MaxCQSize:   int(r.u32(o + 56)),
		MaxSQChunk:  uint32(r.u16(o + 60)),
		// libirdma 44 does not ask for min_hw_wq_size and uses
		// IRDMA_QP_SW_MIN_WQSIZE, the GEN_2 value.
		MinWQSize: uk.GEN2.MinWQSize,
		AtomicsOK: u.FeatureFlags&FeatureAtomicOps != 0,
	}
	if u.Limits.MaxSQChunk == 0 || u.Limits.MaxWQQuanta == 0 || u.Limits.MaxRQQuanta == 0 {
		return fmt.Errorf("client: GET_CONTEXT: incomplete uk attributes %+v: %w", u.Limits, syscall.EPROTO)
	}
	c.uctx = u
	return nil
}

// mapDoorbell maps the doorbell page as irdma_mmap does: 4 KiB, read and
// write, shared, at the db_mmap_key offset of the device.
func (c *Context) mapDoorbell() error {
	f, off, err := c.conn.Mmap(attach.MmapRequest{
		Offset: c.uctx.DBMmapKey, Length: pageSize,
		Prot: unix.PROT_READ | unix.PROT_WRITE, Flags: unix.MAP_SHARED,
	})
	if err != nil {
		return fmt.Errorf("client: mmap of the doorbell page: %w", err)
	}
	defer f.Close()
	if off%pageSize != 0 {
		return fmt.Errorf("client: doorbell page at unaligned offset %#x: %w", off, syscall.EINVAL)
	}
	db, err := unix.Mmap(int(f.Fd()), int64(off), pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return os.NewSyscallError("mmap doorbell", err)
	}
	c.db = db
	return nil
}

// ring stores v into the doorbell page at off: the 32-bit store
// db_wr32 makes. Doorbells are hints the device polls for; ordering
// after the WQE's header store comes from both being atomic.
func (c *Context) ring(off int, v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.db[off])), v)
}

// EnvNotify set to 0 keeps the client from asking NOTIFY (as
// IRDMA_EMU_NOTIFY=0 does for the preload): the daemon then polls the
// context's doorbell page with backoff.
const EnvNotify = "IRDMA_EMU_NOTIFY"

// notify is the post notification of docs/attach.md "NOTIFY": the daemon
// keeps polling 1 while its engine polls the doorbell pages and 0 once it
// parked; a post that finds 0 sets its QP's bit and writes the eventfd.
type notify struct {
	efd        *os.File
	page       []byte
	polling    *uint32
	notified   *uint64
	suppressed *uint64
	bitsOff    uint32 // the QP bits (attach.NotifyQPBits)
	bits       uint32 // their count; 0: the daemon names no QP
}

// setupNotify asks NOTIFY and maps the notify page.
func (c *Context) setupNotify() error {
	rep, efd, pf, err := c.conn.Notify(attach.NotifyRequest{Flags: attach.NotifyQPBits})
	if err != nil {
		return fmt.Errorf("client: NOTIFY: %w", err)
	}
	defer pf.Close()
	page, err := unix.Mmap(int(pf.Fd()), int64(rep.PageOffset), attach.NotifyPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		efd.Close()
		return os.NewSyscallError("mmap notify page", err)
	}
	c.ntf = &notify{efd: efd, page: page,
		polling:    (*uint32)(unsafe.Pointer(&page[rep.PollingOff])),
		notified:   (*uint64)(unsafe.Pointer(&page[rep.CountersOff])),
		suppressed: (*uint64)(unsafe.Pointer(&page[rep.CountersOff+8]))}
	if rep.Flags&attach.NotifyQPBits != 0 {
		c.ntf.bitsOff, c.ntf.bits = rep.QPBitsOff, rep.QPBits
	}
	return nil
}

// ringSQ stores a QP id into the SQ doorbell, then tells a parked engine
// (notify): the post path of libirdma's irdma_uk_qp_post_wr followed by
// the preload's wrapper (docs/preload.md "Wake-up on post").
func (c *Context) ringSQ(qpid uint32) {
	c.ring(dbSQOffset, qpid)
	n := c.ntf
	if n == nil {
		return
	}
	// The doorbell store and this load are both atomic, hence sequentially
	// consistent (the Go memory model): the store is visible before the
	// load, the fence the daemon's Park pairs with.
	if atomic.LoadUint32(n.polling) != 0 {
		atomic.AddUint64(n.suppressed, 1)
		return
	}
	if n.bits != 0 {
		// Name the QP before the eventfd is written. A bit already set is
		// a notification the daemon has not taken yet; its pass over the
		// bits, after the write that follows that bit, serves this post.
		b := qpid % n.bits
		m := uint64(1) << (b % 64)
		if atomic.OrUint64((*uint64)(unsafe.Pointer(&n.page[n.bitsOff+8*(b/64)])), m)&m != 0 {
			atomic.AddUint64(n.notified, 1)
			return
		}
	}
	var one [8]byte
	one[0] = 1 // little-endian 1
	if _, err := unix.Write(int(n.efd.Fd()), one[:]); err == nil {
		atomic.AddUint64(n.notified, 1)
	}
}

// Close ends the context: the daemon destroys everything it still holds
// for this connection (as the kernel does on the last close of a uverbs
// file), then the doorbell page and the shared memory are unmapped —
// every slice from AllocBuffer is invalid afterwards. Objects not
// destroyed before are simply forgotten.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	return c.teardown()
}

func (c *Context) teardown() error {
	var err error
	if c.conn != nil {
		err = c.conn.Close()
	}
	if c.db != nil {
		unix.Munmap(c.db)
		c.db = nil
	}
	if n := c.ntf; n != nil {
		n.efd.Close()
		unix.Munmap(n.page)
		c.ntf = nil
	}
	if c.arena != nil {
		c.arena.close()
	}
	if c.asyncFile != nil {
		c.asyncFile.Close()
	}
	return err
}

// AllocBuffer returns n bytes of zeroed memory the device can reach
// (page-aligned shared memory handed to the daemon), for registration with
// PD.RegMR. It stays valid until FreeBuffer or Close.
func (c *Context) AllocBuffer(n int) ([]byte, error) { return c.arena.alloc(n) }

// FreeBuffer returns a buffer from AllocBuffer. Deregister its MRs first.
func (c *Context) FreeBuffer(b []byte) error { return c.arena.free(b) }

// DeviceAttr is ibv_device_attr as QUERY_DEVICE reports it.
type DeviceAttr struct {
	FWVer                 uint64
	NodeGUID              uint64 // host order of the big-endian GUID
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	AtomicCap             uint32
	MaxMW                 uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxSRQ                uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
}

// QueryDevice is ibv_query_device (the legacy QUERY_DEVICE command, as
// perftest issues it).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var core wbuf
	core.u64(c.respAddr())
	r, err := c.run(legacyCmd(cmdQueryDevice, core, nil, queryDeviceResp), queryDeviceResp)
	if err != nil {
		return DeviceAttr{}, err
	}
	return DeviceAttr{
		FWVer: r.u64(0), NodeGUID: r.be64(8), SysImageGUID: r.be64(16), MaxMRSize: r.u64(24), PageSizeCap: r.u64(32),
		VendorID: r.u32(40), VendorPartID: r.u32(44), HWVer: r.u32(48), MaxQP: r.u32(52), MaxQPWR: r.u32(56),
		DeviceCapFlags: r.u32(60), MaxSGE: r.u32(64), MaxSGERd: r.u32(68), MaxCQ: r.u32(72), MaxCQE: r.u32(76),
		MaxMR: r.u32(80), MaxPD: r.u32(84), MaxQPRdAtom: r.u32(88), MaxResRdAtom: r.u32(96),
		MaxQPInitRdAtom: r.u32(100), AtomicCap: r.u32(108), MaxMW: r.u32(120), MaxMcastGrp: r.u32(132),
		MaxMcastQPAttach: r.u32(136), MaxTotalMcastQPAttach: r.u32(140), MaxAH: r.u32(144), MaxSRQ: r.u32(156),
		MaxPKeys: r.u16(168), LocalCAAckDelay: r.u8(170), PhysPortCnt: r.u8(171),
	}, nil
}

// Port states (enum ibv_port_state) and link layers.
const (
	PortDown   = 1
	PortInit   = 2
	PortArmed  = 3
	PortActive = 4

	LinkLayerInfiniBand = 1
	LinkLayerEthernet   = 2
)

// PortAttr is ibv_port_attr as QUERY_PORT reports it.
type PortAttr struct {
	State         uint8
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTableLen   uint32
	PortCapFlags  uint32
	MaxMsgSize    uint32
	PKeyTableLen  uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	SubnetTimeout uint8
}

// QueryPort is ibv_query_port.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	var core wbuf
	core.u64(c.respAddr())
	core.u8(port)
	core.zero(7)
	r, err := c.run(legacyCmd(cmdQueryPort, core, nil, queryPortRespSize), queryPortRespSize)
	if err != nil {
		return PortAttr{}, err
	}
	return PortAttr{
		PortCapFlags: r.u32(0), MaxMsgSize: r.u32(4), BadPKeyCntr: r.u32(8), QKeyViolCntr: r.u32(12),
		GIDTableLen: r.u32(16), PKeyTableLen: r.u16(20), LID: r.u16(22), SMLID: r.u16(24),
		State: r.u8(26), MaxMTU: MTU(r.u8(27)), ActiveMTU: MTU(r.u8(28)), LMC: r.u8(29), MaxVLNum: r.u8(30),
		SMSL: r.u8(31), SubnetTimeout: r.u8(32), ActiveWidth: r.u8(34), ActiveSpeed: r.u8(35),
		PhysState: r.u8(36), LinkLayer: r.u8(37), Flags: r.u8(38),
	}, nil
}

// GID is a 16-byte port GID in network order.
type GID [16]byte

// String prints the GID as inet_ntop(AF_INET6) does (::ffff:a.b.c.d for
// IPv4-mapped GIDs), the form ibv_rc_pingpong prints.
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// IsZero reports an all-zero GID (an unused table entry).
func (g GID) IsZero() bool { return g == GID{} }

// InterfaceID is the low 64 bits, which ibv_rc_pingpong tests to decide
// whether a GRH is needed.
func (g GID) InterfaceID() uint64 { return le.Uint64(g[8:]) }

// ParseGID reads a GID in the sysfs form (eight groups of four hex
// digits) or any IPv6 / IPv4 notation (IPv4 becomes ::ffff:a.b.c.d).
func ParseGID(s string) (GID, error) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		return GID{}, fmt.Errorf("client: bad GID %q: %w", s, syscall.EINVAL)
	}
	return GID(a.As16()), nil
}

// SysfsPath is the device's fake sysfs tree, where the kernel's GID
// table lives for libibverbs and for this client.
func (c *Context) SysfsPath() string { return c.sysfs }

func (c *Context) portDir(port uint8) string {
	return filepath.Join(c.sysfs, "class", "infiniband", c.device, "ports", strconv.Itoa(int(port)))
}

// QueryGID is ibv_query_gid: like libibverbs without netlink, it reads
// the device's sysfs GID table (ports/N/gids/I), which the daemon keeps
// current beside its socket.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	if index < 0 {
		return GID{}, fmt.Errorf("client: GID index %d: %w", index, syscall.EINVAL)
	}
	b, err := os.ReadFile(filepath.Join(c.portDir(port), "gids", strconv.Itoa(index)))
	if err != nil {
		return GID{}, fmt.Errorf("client: GID %d of port %d: %w", index, port, err)
	}
	return ParseGID(string(b))
}

// GIDType is the GID's type as sysfs reports it ("RoCE v2").
func (c *Context) GIDType(port uint8, index int) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.portDir(port), "gid_attrs", "types", strconv.Itoa(index)))
	if err != nil {
		return "", fmt.Errorf("client: GID type %d of port %d: %w", index, port, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// FindGID returns the index of gid in the port's table, for choosing the
// -g index of an address.
func (c *Context) FindGID(port uint8, gid GID) (int, error) {
	ents, err := os.ReadDir(filepath.Join(c.portDir(port), "gids"))
	if err != nil {
		return -1, fmt.Errorf("client: GID table of port %d: %w", port, err)
	}
	for _, e := range ents {
		i, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := c.QueryGID(port, i); err == nil && g == gid {
			return i, nil
		}
	}
	return -1, fmt.Errorf("client: GID %s not in the table of port %d: %w", gid, port, syscall.ENOENT)
}

// Async event types (enum ibv_event_type).
type EventType uint32

const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPKeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
	EventWQFatal          EventType = 19
)

var eventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change", "WQ fatal",
}

// String is ibv_event_type_str.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// AsyncEvent is one record of the asynchronous event descriptor
// (ib_uverbs_async_event_desc), resolved to the object it names.
type AsyncEvent struct {
	Type    EventType
	Element uint64 // the object's user_handle, or the port number
	QP      *QP    // QP events
	CQ      *CQ    // CQ events
	Port    uint8  // port events
}

// ErrTimeout is returned by the event waits when nothing arrived in time.
var ErrTimeout = errors.New("client: timed out")

// GetAsyncEvent is ibv_get_async_event: it waits up to timeout (forever if
// timeout < 0) for the next asynchronous event.
func (c *Context) GetAsyncEvent(timeout time.Duration) (AsyncEvent, error) {
	if c.asyncFile == nil {
		return AsyncEvent{}, fmt.Errorf("client: no async event descriptor: %w", syscall.ENODEV)
	}
	var b [asyncEventSize]byte
	if err := readRecord(c.asyncFile, b[:], timeout); err != nil {
		return AsyncEvent{}, err
	}
	ev := AsyncEvent{Element: le.Uint64(b[:]), Type: EventType(le.Uint32(b[8:]))}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Type {
	case EventCQErr:
		ev.CQ = c.cqs[ev.Element]
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventClientReregister, EventGIDChange, EventDeviceFatal:
		ev.Port = uint8(ev.Element)
	case EventSRQErr, EventSRQLimitReached, EventWQFatal:
	default:
		ev.QP = c.qps[ev.Element]
		if ev.QP != nil {
			ev.QP.asyncEvents.Add(1)
		}
	}
	return ev, nil
}

// readRecord reads one fixed-size record from an event descriptor, waiting
// with poll so that the descriptor's blocking mode (shared with the
// daemon's copy) is left alone. timeout < 0 waits forever.
func readRecord(f *os.File, b []byte, timeout time.Duration) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	got := 0
	for got < len(b) {
		ms := -1
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				if got == 0 {
					return ErrTimeout
				}
				left = time.Second // finish a record already begun
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		var n int
		var rerr error
		ready := false
		cerr := sc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			var pn int
			for {
				pn, rerr = unix.Poll(fds, ms)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr != nil || pn == 0 {
				return
			}
			ready = true
			for {
				n, rerr = unix.Read(int(fd), b[got:])
				if rerr != syscall.EINTR {
					break
				}
			}
		})
		switch {
		case cerr != nil:
			return cerr
		case rerr == syscall.EAGAIN:
			continue
		case rerr != nil:
			return fmt.Errorf("client: event read: %w", rerr)
		case ready && n == 0:
			// Readable with nothing to read: end of file, the daemon
			// closed its side.
			return fmt.Errorf("client: event descriptor closed by the daemon: %w", syscall.EIO)
		}
		got += n
	}
	return nil
}

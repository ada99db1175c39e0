package uverbs_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/device"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// The tests play the program: this process is the client, its memory the
// program's memory, its descriptor table the one the async and channel
// descriptors land in. Command buffers are written by hand from the
// layouts of ib_user_verbs.h and irdma-abi.h, field by field at fixed
// offsets, independently of the package's own decoding.

var le = binary.LittleEndian

var (
	testMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x20, 0x30}
	testIP  = netip.MustParseAddr("192.0.2.2")
	peerIP  = netip.MustParseAddr("192.0.2.9")
	peerMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0xaa, 0xbb, 0xcc}
)

type env struct {
	dev *device.Device
	d   *driver.Device
	p   *uverbs.Provider
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv with the provider's configuration amended by f.
func newEnvWith(t *testing.T, f func(*uverbs.Config)) *env {
	t.Helper()
	return newEnvProfile(t, profile.GEN2(), f)
}

// newEnvProfile is newEnvWith on a device of profile prof.
func newEnvProfile(t *testing.T, prof profile.Profile, f func(*uverbs.Config)) *env {
	t.Helper()
	dev, err := device.New(device.Config{Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	d, err := driver.Open(dev, driver.Config{
		Netdev:     &driver.StaticNetdev{HWAddr: testMAC, MTUSize: 1500, IPs: []netip.Addr{testIP}},
		CQPTimeout: 5 * time.Second,
		Profile:    prof,
	})
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	cfg := uverbs.Config{Mem: dev.Mem(), Resolver: &uverbs.StaticResolver{
		Neighbours: map[netip.Addr]net.HardwareAddr{peerIP: peerMAC}}}
	if f != nil {
		f(&cfg)
	}
	p, err := uverbs.NewProvider(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("driver close: %v", err)
		}
		if err := dev.Close(); err != nil {
			t.Errorf("device close: %v", err)
		}
	})
	return &env{dev: dev, d: d, p: p}
}

// client is one connection: a Session driven directly.
type client struct {
	t    *testing.T
	s    attach.Session
	fds  []*os.File // descriptors received (async file, channels)
	maps [][]byte
	done bool
}

func (e *env) open(t *testing.T) *client {
	t.Helper()
	cred := &unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, w, err := e.p.Open(&attach.Peer{Hello: attach.Hello{Version: 1, PID: uint32(os.Getpid()), Program: "test"},
		Cred: cred, Mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	if w.Device != "irdma0" || w.ABIVersion != 5 {
		t.Fatalf("welcome %+v", w)
	}
	c := &client{t: t, s: s}
	t.Cleanup(c.close)
	return c
}

func (c *client) close() {
	if !c.done {
		c.done = true
		c.s.Close()
	}
	for _, f := range c.fds {
		f.Close()
	}
	c.fds = nil
	for _, m := range c.maps {
		unix.Munmap(m)
	}
	c.maps = nil
}

// reply is a command's outcome.
type reply struct {
	status int32
	addr   uint64
	resp   []byte
	fds    []attach.FD
}

func (c *client) raw(cmd []byte) reply {
	c.t.Helper()
	r := c.s.Command(cmd)
	for _, f := range r.FDs {
		c.fds = append(c.fds, f.File)
	}
	return reply{status: r.Status, addr: r.RespAddr, resp: r.Resp, fds: r.FDs}
}

// errno returns the errno of a failed reply, 0 for success.
func (r reply) errno() syscall.Errno {
	if r.status >= 0 {
		return 0
	}
	return syscall.Errno(-r.status)
}

// legacy builds a legacy write() buffer: the 8-byte header (command,
// in_words and out_words in 4-byte units, the header counted in
// in_words) and the body.
func legacy(command uint32, outBytes int, body []byte) []byte {
	b := make([]byte, 8+len(body))
	le.PutUint32(b, command)
	le.PutUint16(b[4:], uint16(len(b)/4))
	le.PutUint16(b[6:], uint16(outBytes/4))
	copy(b[8:], body)
	return b
}

// extended builds an extended write() buffer: the header (in/out words
// in 8-byte units, headers excluded), ib_uverbs_ex_cmd_hdr (response,
// provider in/out words, reserved), the core request and the provider's.
func extended(command uint32, resp uint64, core []byte, outBytes int, prov []byte, provOut int) []byte {
	b := make([]byte, 24+len(core)+len(prov))
	le.PutUint32(b, command|0x80000000)
	le.PutUint16(b[4:], uint16(len(core)/8))
	le.PutUint16(b[6:], uint16(outBytes/8))
	le.PutUint64(b[8:], resp)
	le.PutUint16(b[16:], uint16(len(prov)/8))
	le.PutUint16(b[18:], uint16(provOut/8))
	copy(b[24:], core)
	copy(b[24+len(core):], prov)
	return b
}

// fakeResp is the response address the tests put in commands: any
// non-zero value (the daemon never writes there; the client would).
const fakeResp = 0x7f0000001000

func (c *client) ok(r reply, what string) reply {
	c.t.Helper()
	if r.status < 0 {
		c.t.Fatalf("%s: errno %v", what, r.errno())
	}
	return r
}

// arena is a piece of shared memory handed over with MEM: a memfd mapped
// in this process.
type arena struct {
	mem  []byte
	addr uint64
}

func (c *client) arena(size int) *arena {
	c.t.Helper()
	fd, err := unix.MemfdCreate("test-arena", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		c.t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		c.t.Fatal(err)
	}
	c.maps = append(c.maps, m)
	a := &arena{mem: m, addr: uint64(uintptr(unsafe.Pointer(&m[0])))}
	f := os.NewFile(uintptr(fd), "test-arena")
	if err := c.s.Mem(attach.MemRequest{Addr: a.addr, Length: uint64(size)}, f); err != nil {
		c.t.Fatalf("MEM: %v", err)
	}
	return a
}

// u32 and friends read a response field.
func u32(b []byte, off int) uint32 { return le.Uint32(b[off:]) }
func u64(b []byte, off int) uint64 { return le.Uint64(b[off:]) }
func u16(b []byte, off int) uint16 { return le.Uint16(b[off:]) }

package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// namePrefix starts the name of every namespace the harness makes; the
// creating process's pid follows, so that a later run can tell a leftover
// of a killed run (its pid is gone) from a namespace in use.
const namePrefix = "iemu-"

var (
	nsSeq       atomic.Uint32
	sweepOnce   sync.Once
	runNetnsDir = "/run/netns"
)

// Netns is a network namespace of the harness. Everything a test puts on
// the guest's network lives in it (the tap, QEMU, host-side programs,
// captures), so no traffic reaches the machine's own network, and parallel
// harness instances never see each other.
type Netns struct {
	Name   string
	handle netns.NsHandle
	nl     *netlink.Handle
	ino    uint64

	mu     sync.Mutex
	procs  []*HostProc
	closed bool
}

// NewNetns creates a namespace with a unique name and its loopback up.
// It is made with `ip netns add`, which also makes /run/netns a shared
// mount: a namespace deleted while another instance's `ip netns exec`
// mount namespace exists is then really released.
func NewNetns(ctx context.Context) (*Netns, error) {
	sweepOnce.Do(sweepStale)
	name := fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), nsSeq.Add(1))
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	n := &Netns{Name: name}
	var err error
	if n.handle, err = netns.GetFromName(name); err != nil {
		n.Close()
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(n.handle), &st); err == nil {
		n.ino = st.Ino
	}
	if n.nl, err = netlink.NewHandleAt(n.handle); err != nil {
		n.Close()
		return nil, err
	}
	lo, err := n.nl.LinkByName("lo")
	if err == nil {
		err = n.nl.LinkSetUp(lo)
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("%s: lo up: %w", name, err)
	}
	return n, nil
}

// Inode identifies the namespace itself (not its name): after Close no
// process or file descriptor may refer to it any more.
func (n *Netns) Inode() uint64 { return n.ino }

// Do runs fn on an OS thread switched into the namespace. Sockets fn
// creates belong to the namespace for their whole life, so a Go test can
// be a host-side peer of the guest without a separate program.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	// A fresh goroutine, so that a thread whose namespace could not be
	// restored is never handed back to the scheduler: it stays locked and
	// exits with the goroutine.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			errc <- fmt.Errorf("setns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen opens a listener inside the namespace.
func (n *Netns) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket opens a packet socket (UDP) inside the namespace.
func (n *Netns) ListenPacket(network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.Do(func() (err error) {
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return c, err
}

// DialContext connects from inside the namespace.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// AddTap creates a persistent tap device with addr on it, up. QEMU
// attaches to it by name; its carrier comes up when QEMU opens it.
func (n *Netns) AddTap(name string, addr netip.Prefix) error {
	var err error
	// The tap ioctls act on the namespace of the calling thread, not the
	// netlink handle's, so they run inside Do.
	err = n.Do(func() error {
		return netlink.LinkAdd(&netlink.Tuntap{
			LinkAttrs: netlink.LinkAttrs{Name: name},
			Mode:      netlink.TUNTAP_MODE_TAP,
			Flags:     netlink.TUNTAP_NO_PI,
		})
	})
	if err != nil {
		return fmt.Errorf("%s: tap %s: %w", n.Name, name, err)
	}
	link, err := n.nl.LinkByName(name)
	if err != nil {
		return err
	}
	if err := n.nl.AddrAdd(link, &netlink.Addr{IPNet: prefixIPNet(addr)}); err != nil {
		return fmt.Errorf("%s: address %v on %s: %w", n.Name, addr, name, err)
	}
	return n.nl.LinkSetUp(link)
}

func prefixIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Netlink returns a netlink handle bound to the namespace, for links,
// addresses, routes and neighbours a scenario adds.
func (n *Netns) Netlink() *netlink.Handle { return n.nl }

// Command returns a command that runs inside the namespace through
// `ip netns exec` (which execs the program, so the pid is the program's).
// It gets its own process group, killed with the command, and dies with
// the test process. The caller starts and waits for it; prefer Start,
// which also stops it at Close.
func (n *Netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return killGroup(cmd, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// HostProc is a host-side program running in the namespace.
type HostProc struct {
	Cmd  *exec.Cmd
	name string
	out  *syncBuffer
	done chan struct{}
	err  error
}

// Start runs a program inside the namespace with its output collected;
// Close stops it if it is still running. Its standard output and error are
// also copied, line by line, to logf when that is not nil.
func (n *Netns) Start(ctx context.Context, logf func(string, ...any), name string, args ...string) (*HostProc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%s: namespace closed", n.Name)
	}
	p := &HostProc{name: filepath.Base(name), out: &syncBuffer{}, done: make(chan struct{})}
	p.Cmd = n.Command(ctx, name, args...)
	var w interface{ Write([]byte) (int, error) } = p.out
	if logf != nil {
		w = &teeLines{buf: p.out, logf: logf, prefix: "host " + p.name + ": "}
	}
	p.Cmd.Stdout = w
	p.Cmd.Stderr = w
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

// Wait waits for the program to exit and returns its error.
func (p *HostProc) Wait() error { <-p.done; return p.err }

// Done is closed when the program has exited.
func (p *HostProc) Done() <-chan struct{} { return p.done }

// Output returns what the program printed so far.
func (p *HostProc) Output() string { return p.out.String() }

// Stop sends SIGTERM to the program's process group, SIGKILL after
// grace, and waits for it.
func (p *HostProc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = killGroup(p.Cmd, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = killGroup(p.Cmd, syscall.SIGKILL)
		<-p.done
	}
	return p.err
}

// Close stops the programs started with Start and deletes the namespace
// (its tap goes with it). Safe to call more than once.
func (n *Netns) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	procs := n.procs
	n.mu.Unlock()
	var errs []error
	for _, p := range procs {
		_ = p.Stop(3 * time.Second)
	}
	if n.nl != nil {
		// Delete our links explicitly: a device is only freed with its
		// namespace once nothing refers to the namespace any more.
		if links, err := n.nl.LinkList(); err == nil {
			for _, l := range links {
				if l.Attrs().Name != "lo" {
					_ = n.nl.LinkDel(l)
				}
			}
		}
		n.nl.Close()
	}
	if n.handle.IsOpen() {
		n.handle.Close()
	}
	if out, err := exec.Command("ip", "netns", "delete", n.Name).CombinedOutput(); err != nil {
		if _, serr := os.Stat(filepath.Join(runNetnsDir, n.Name)); serr == nil {
			errs = append(errs, fmt.Errorf("ip netns delete %s: %w: %s", n.Name, err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}

// sweepStale deletes namespaces left by harness processes that no longer
// exist (a test binary killed by a signal runs no cleanup; its QEMU and
// helpers died with it through Pdeathsig, but the named namespace stays).
func sweepStale() {
	ents, err := os.ReadDir(runNetnsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = exec.Command("ip", "netns", "delete", e.Name()).Run()
		}
	}
}

// NamespaceInUse reports the processes and file descriptors that still
// refer to the network namespace with inode ino ("pid 123" or
// "pid 123 fd 7"); empty once it is gone.
func NamespaceInUse(ino uint64) []string {
	var users []string
	want := fmt.Sprintf("net:[%d]", ino)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", p.Name(), "ns/net")); err == nil && l == want {
			users = append(users, "pid "+p.Name())
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && l == want {
				users = append(users, "pid "+p.Name()+" fd "+fd.Name())
			}
		}
	}
	return users
}

// syncBuffer is a bytes.Buffer safe for a writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// teeLines writes to buf and logs every complete line.
type teeLines struct {
	buf    *syncBuffer
	logf   func(string, ...any)
	prefix string
	mu     sync.Mutex
	part   []byte
}

func (t *teeLines) Write(p []byte) (int, error) {
	t.buf.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.logf("%s%s", t.prefix, strings.TrimRight(string(t.part[:i]), "\r"))
		t.part = t.part[i+1:]
	}
	return len(p), nil
}

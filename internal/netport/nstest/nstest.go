// Package nstest makes throw-away network namespaces, veth pairs and
// addresses for tests that need a real network (emu/link/udp,
// internal/netport). Everything it creates is removed when the test ends,
// also when it fails. It needs root; NeedRoot skips loudly otherwise.
package nstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/internal/testenv"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NeedRoot stops a test that needs root (namespaces, veth, AF_PACKET,
// nftables): a skip that says what was not run, or a failure where the
// dependencies are required (CI runs as root; internal/testenv).
func NeedRoot(tb testing.TB) {
	tb.Helper()
	testenv.Root(tb)
}

// NS is a named network namespace (ip netns), deleted when the test ends.
type NS struct {
	Name   string
	Handle *netlink.Handle // netlink in the namespace
	ns     netns.NsHandle
}

var seq atomic.Int64

// New makes a namespace with its loopback up.
func New(tb testing.TB) *NS {
	tb.Helper()
	NeedRoot(tb)
	name := fmt.Sprintf("irdmaemu-%d-%d", os.Getpid(), seq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	n := &NS{Name: name}
	tb.Cleanup(func() {
		if n.Handle != nil {
			n.Handle.Close()
		}
		n.ns.Close()
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	h, err := netns.GetFromName(name)
	if err != nil {
		tb.Fatal(err)
	}
	n.ns = h
	if n.Handle, err = netlink.NewHandleAt(h); err != nil {
		tb.Fatal(err)
	}
	lo, err := n.Handle.LinkByName("lo")
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.Handle.LinkSetUp(lo); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Path is the namespace's bind mount, for udp.Config.NetNS.
func (n *NS) Path() string { return "/var/run/netns/" + n.Name }

// NsHandle returns the namespace handle (owned by n).
func (n *NS) NsHandle() netns.NsHandle { return n.ns }

// Do runs fn with the calling goroutine's thread in the namespace, so that
// the sockets fn opens belong to it.
func (n *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(n.ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return err // the thread stays locked and dies with the goroutine
	}
	runtime.UnlockOSThread()
	return ferr
}

// Command returns a command that runs in the namespace.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command in the namespace and returns its standard output; it
// fails the test if the command fails.
func (n *NS) Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	cmd := n.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), n.Name, err, stderr.String())
	}
	return string(out)
}

// Sysctl sets a sysctl inside the namespace.
func (n *NS) Sysctl(tb testing.TB, key, val string) {
	tb.Helper()
	n.Run(tb, "sysctl", "-q", "-w", key+"="+val)
}

// Link returns the interface called name.
func (n *NS) Link(tb testing.TB, name string) netlink.Link {
	tb.Helper()
	l, err := n.Handle.LinkByName(name)
	if err != nil {
		tb.Fatalf("%s: link %s: %v", n.Name, name, err)
	}
	return l
}

// MAC returns the hardware address of interface name.
func (n *NS) MAC(tb testing.TB, name string) net.HardwareAddr {
	tb.Helper()
	return n.Link(tb, name).Attrs().HardwareAddr
}

// AddAddr adds an address (CIDR) to interface ifname; IPv6 addresses skip
// duplicate address detection so that they are usable at once.
func (n *NS) AddAddr(tb testing.TB, ifname, cidr string) {
	tb.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		tb.Fatal(err)
	}
	if a.IP.To4() == nil {
		a.Flags |= unix.IFA_F_NODAD
	}
	if err := n.Handle.AddrAdd(n.Link(tb, ifname), a); err != nil {
		tb.Fatalf("%s: add %s to %s: %v", n.Name, cidr, ifname, err)
	}
	if a.IP.To4() != nil {
		return
	}
	// Even without DAD, Linux inserts the local route of an IPv6 address
	// from the addrconf work queue (addrconf_dad_work →
	// addrconf_dad_completed), a moment later: until then a datagram to
	// it is dropped (Ip6InAddrErrors). Wait for the route.
	want := "local " + a.IP.String() + " "
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(n.Run(tb, "ip", "-o", "-6", "route", "show", "table", "local"), want) {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %s never got its local route", n.Name, cidr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// DelAddr removes an address (CIDR) from interface ifname.
func (n *NS) DelAddr(tb testing.TB, ifname, cidr string) {
	tb.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.Handle.AddrDel(n.Link(tb, ifname), a); err != nil {
		tb.Fatalf("%s: delete %s from %s: %v", n.Name, cidr, ifname, err)
	}
}

// SetUp sets interface ifname up or down.
func (n *NS) SetUp(tb testing.TB, ifname string, up bool) {
	tb.Helper()
	l := n.Link(tb, ifname)
	var err error
	if up {
		err = n.Handle.LinkSetUp(l)
	} else {
		err = n.Handle.LinkSetDown(l)
	}
	if err != nil {
		tb.Fatalf("%s: set %s up=%v: %v", n.Name, ifname, up, err)
	}
}

// Veth joins namespaces a and b with a veth pair, nameA in a and nameB in
// b, both up, with the given MTU (0: 1500).
func Veth(tb testing.TB, a *NS, nameA string, b *NS, nameB string, mtu int) {
	tb.Helper()
	if mtu == 0 {
		mtu = 1500
	}
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: nameA, MTU: mtu},
		PeerName:      nameB,
		PeerNamespace: netlink.NsFd(int(b.ns)),
		PeerMTU:       uint32(mtu),
	}
	if err := a.Handle.LinkAdd(v); err != nil {
		tb.Fatalf("veth %s/%s: %v", nameA, nameB, err)
	}
	a.SetUp(tb, nameA, true)
	b.SetUp(tb, nameB, true)
	a.WaitRunning(tb, nameA)
	b.WaitRunning(tb, nameB)
}

// WaitRunning waits until interface ifname can transmit: operationally
// up and its queueing discipline attached. Linux does both from the
// linkwatch work, up to a second after the link is set up; until then the
// device has the noop qdisc, which drops what is sent to it without an
// error (an AF_PACKET frame sent then is simply lost).
func (n *NS) WaitRunning(tb testing.TB, ifname string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := n.Run(tb, "ip", "-o", "link", "show", "dev", ifname)
		if strings.Contains(out, "state UP") && !strings.Contains(out, "qdisc noop") {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %s not running: %s", n.Name, ifname, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Capture is tcpdump running in a namespace.
type Capture struct {
	File string
	cmd  *exec.Cmd
	done chan struct{} // closed when tcpdump has exited
	err  error         // its exit status, set before done is closed
	once sync.Once
}

// StartCapture runs tcpdump on interface ifname of n, writing every UDP/4791
// frame to a pcap file in the test's temporary directory, and waits until
// it is listening. --immediate-mode hands each packet to tcpdump at once
// (otherwise libpcap's TPACKET_V3 ring holds a block for up to a second and
// frames captured just before the stop are counted "received by filter"
// but never written), -U writes each at once, and -B gives the kernel
// buffer room (measured: docs/interop.md "Measured: the guest's network
// and what rxe accepts").
func StartCapture(tb testing.TB, n *NS, ifname string) *Capture {
	tb.Helper()
	testenv.Tool(tb, "tcpdump")
	file := tb.TempDir() + "/" + ifname + ".pcap"
	cmd := n.Command("tcpdump", "-i", ifname, "-n", "-U", "--immediate-mode", "-B", "32768", "-s", "0", "-w", file, "udp", "port", "4791")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("tcpdump: %v", err)
	}
	c := &Capture{File: file, cmd: cmd, done: make(chan struct{})}
	listening := make(chan struct{})
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "listening on") {
				said = true
				close(listening)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		c.err = cmd.Wait()
		close(c.done)
	}()
	tb.Cleanup(func() { c.stop() })
	select {
	case <-listening:
	case <-c.done:
		tb.Fatalf("tcpdump exited: %v\n%s", c.err, log.String())
	case <-time.After(10 * time.Second):
		tb.Fatalf("tcpdump did not start listening\n%s", log.String())
	}
	return c
}

// Stop waits until the file stops growing, stops tcpdump and returns the
// file's name.
func (c *Capture) Stop(tb testing.TB) string {
	tb.Helper()
	last := int64(-1)
	for range 50 {
		st, err := os.Stat(c.File)
		if err == nil && st.Size() == last {
			break
		}
		if err == nil {
			last = st.Size()
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.stop()
	return c.File
}

func (c *Capture) stop() {
	c.once.Do(func() {
		// ip netns exec execs tcpdump in place, so the pid is
		// tcpdump's.
		_ = c.cmd.Process.Signal(os.Interrupt)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// Prefix parses a CIDR and returns its address, for tests that need both.
func Prefix(cidr string) netip.Addr {
	return netip.MustParsePrefix(cidr).Addr()
}

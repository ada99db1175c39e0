package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/timing"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// IO is how one direction of a link meets the kernel.
type IO uint8

// The I/O kinds.
const (
	// IOAuto lets New choose (see Mode).
	IOAuto IO = iota
	// IOUDP is an ordinary UDP socket bound to the port's address and
	// port 4791: no privilege needed.
	IOUDP
	// IOPacket is an AF_PACKET socket (CAP_NET_RAW): whole frames,
	// unchanged, in both directions.
	IOPacket
)

var ioText = [...]string{IOAuto: "auto", IOUDP: "udp", IOPacket: "packet"}

// String returns "auto", "udp" or "packet".
func (k IO) String() string {
	if int(k) < len(ioText) {
		return ioText[k]
	}
	return fmt.Sprintf("io(%d)", uint8(k))
}

func parseIO(s string) (IO, bool) {
	for i, name := range ioText {
		if s == name {
			return IO(i), true
		}
	}
	return 0, false
}

// Mode is how a link sends and how it receives. The zero Mode is automatic
// in both directions: New picks udp sending and, when the process may open
// an AF_PACKET socket (CAP_NET_RAW), packet receiving, else udp receiving
// (docs/transport.md has the matrix and the reasons).
type Mode struct {
	Send, Recv IO
	// NoGSO keeps UDP sending to one datagram per frame. By default runs
	// of equal frames to one destination go out as one UDP segmentation
	// offload send (gso.go), which loopback and veth carry to the
	// receiver uncut: a capture there (tcpdump -i lo) shows one large
	// datagram per run instead of the frames. The daemon's own capture
	// (--pcap) records the frames either way.
	NoGSO bool
	// WaitInPoller makes the receive rings wait for datagrams in the Go
	// poller, as they did before they waited in ppoll(2) on a thread of
	// their own (mmsg_linux.go): larger receive batches under a stream
	// and a quicker wake-up when the programs yield the CPU (the Go
	// client), a late one — a tail of milliseconds — when they spin
	// (perftest; docs/transport.md "Waiting for datagrams").
	WaitInPoller bool
}

// String returns the compact form ParseMode reads, "send=udp,recv=packet"
// (",gso=off" when NoGSO, ",wait=poller" when WaitInPoller). It is what
// `irdma-emu devinfo` shows as the transport.
func (m Mode) String() string {
	s := "send=" + m.Send.String() + ",recv=" + m.Recv.String()
	if m.NoGSO {
		s += ",gso=off"
	}
	if m.WaitInPoller {
		s += ",wait=poller"
	}
	return s
}

// ParseMode reads a mode for a daemon flag: "auto", "udp" or "packet" for
// both directions, or "send=K,recv=K" (either may be left out: auto),
// either form optionally followed by ",gso=on" or ",gso=off" and by
// ",wait=thread" or ",wait=poller", each at most once, in any order.
func ParseMode(s string) (Mode, error) {
	s = strings.TrimSpace(s)
	var noGSO, poller bool
	seen := map[string]bool{}
	for {
		head, tail, ok := cutLast(s, ",")
		if !ok {
			break
		}
		opt := strings.ReplaceAll(tail, " ", "")
		key, _, _ := strings.Cut(opt, "=")
		switch opt {
		case "gso=off":
			noGSO = true
		case "gso=on":
		case "wait=poller":
			poller = true
		case "wait=thread":
		default:
			key = ""
		}
		if key == "" {
			break
		}
		if seen[key] {
			return Mode{}, fmt.Errorf("udp: transport mode %q: %s= given twice", s, key)
		}
		seen[key] = true
		s = head
	}
	m, err := parseDirections(s)
	if err != nil {
		return Mode{}, err
	}
	m.NoGSO, m.WaitInPoller = noGSO, poller
	return m, nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// parseDirections reads the send and receive kinds of a mode.
func parseDirections(s string) (Mode, error) {
	s = strings.TrimSpace(s)
	if k, ok := parseIO(s); ok {
		return Mode{Send: k, Recv: k}, nil
	}
	var m Mode
	seen := map[string]bool{}
	for elem := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(elem), "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		k, kok := parseIO(val)
		if !ok || !kok || seen[key] || (key != "send" && key != "recv") {
			return Mode{}, fmt.Errorf("udp: transport mode %q: want auto, udp, packet or send=K,recv=K with K one of those, optionally followed by ,gso=off and ,wait=poller", s)
		}
		seen[key] = true
		if key == "send" {
			m.Send = k
		} else {
			m.Recv = k
		}
	}
	return m, nil
}

// Set parses s into m, so that a *Mode is a flag.Value.
func (m *Mode) Set(s string) error {
	v, err := ParseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Config configures a UDP link.
type Config struct {
	// Addrs are the port's IP addresses, the IP halves of its GIDs. The
	// link binds one UDP socket to each address and port 4791, sends
	// frames whose source is that address from it and receives on it.
	// At least one; IPv4-mapped addresses are taken as IPv4. An IPv6
	// link-local address needs Ifindex (its zone).
	Addrs []netip.Addr

	// Ifindex is the interface the addresses sit on: the zone of
	// link-local IPv6 addresses, the interface packet sending writes to,
	// and where MAC and MTU come from when not given. 0: the interface
	// holding Addrs[0] (an address inside a loopback interface's prefix,
	// such as any 127.0.0.0/8 address, belongs to it).
	Ifindex int

	// MAC is the port's Ethernet address: the destination MAC of the
	// headers the link writes in front of received datagrams. Zero: the
	// interface's (all zero on loopback).
	MAC wire.MAC

	// MTU is the largest IP packet sent, MinMTU..link.MaxMTU; 0: the
	// interface's MTU, capped at link.MaxMTU (loopback's 65536 is more
	// than a buffer holds).
	MTU int

	// Mode chooses the socket kinds; the zero Mode is automatic.
	Mode Mode

	// Pool is where received frames and injected duplicates come from;
	// nil: link.NewPool(link.DefaultPoolSize). The receive side keeps
	// BatchSize packets per socket posted.
	Pool *link.Pool

	// BatchSize is the most datagrams read per recvmmsg and handed to
	// the Receiver at once; 0: link.DefaultBatchSize.
	BatchSize int

	// Faults are injected into what this link sends (link.ParseFaults,
	// the daemon's --fault flag).
	Faults link.Faults

	// HoldTimeout bounds how long a frame held back for reordering by a
	// number of frames waits for them: a link has no "in flight" that
	// ends, so when traffic stops the held frame goes out after this.
	// 0: DefaultHoldTimeout.
	HoldTimeout time.Duration

	// Clock stamps received frames (link.Packet.Time) and times held
	// frames; nil: a new wall clock.
	Clock timing.Clock

	// SocketBuffer is SO_RCVBUF and SO_SNDBUF in bytes (forced past
	// net.core.rmem_max/wmem_max when the process has CAP_NET_ADMIN);
	// 0: DefaultSocketBuffer.
	SocketBuffer int

	// NetNS is the path of the network namespace to open the sockets in
	// (/var/run/netns/NAME, /proc/PID/ns/net); "": the caller's.
	NetNS string

	// Logger reports socket errors the data path counts; nil: none.
	Logger *zap.Logger
}

// Defaults.
const (
	// DefaultHoldTimeout: long enough for a burst to overtake a held
	// frame, short against RoCE retransmission timeouts (ibv_rc_pingpong
	// asks for timeout 14: 4.096 µs × 2^14 ≈ 67 ms).
	DefaultHoldTimeout = time.Millisecond

	// DefaultSocketBuffer holds about 4000 maximum-size RoCEv2 datagrams
	// (the kernel charges each its truesize, more than its length): a burst
	// of several receive batches while the device is busy, and the windows
	// of several QPs streaming at once before their requesters halve them
	// (emu/qp window.go). 4 MiB made sixteen 64 KiB WRITE streams lose
	// 130 windows a run, 16 MiB 6–8 (docs/performance.md "The requester
	// window"). Memory is charged only while datagrams wait.
	DefaultSocketBuffer = 16 << 20

	// maxBatch bounds BatchSize: sendmmsg and recvmmsg take at most
	// UIO_MAXIOV (1024) messages per call.
	maxBatch = 1024
)

// Config errors.
var (
	ErrNoAddr           = errors.New("udp: no address")
	ErrPacketNotAllowed = errors.New("udp: packet mode needs CAP_NET_RAW")
)

func (c *Config) fill() error {
	if len(c.Addrs) == 0 {
		return ErrNoAddr
	}
	for i, a := range c.Addrs {
		if !a.IsValid() || a.Unmap().IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("udp: address %v cannot be a port address", a)
		}
		c.Addrs[i] = a.Unmap().WithZone("")
	}
	if c.Pool == nil {
		c.Pool = link.NewPool(link.DefaultPoolSize)
	}
	if c.BatchSize == 0 {
		c.BatchSize = link.DefaultBatchSize
	}
	if c.BatchSize < 1 || c.BatchSize > maxBatch {
		return fmt.Errorf("udp: batch size %d not in 1..%d", c.BatchSize, maxBatch)
	}
	if c.HoldTimeout == 0 {
		c.HoldTimeout = DefaultHoldTimeout
	}
	if c.HoldTimeout < 0 || c.HoldTimeout > link.MaxReorderDelay {
		return fmt.Errorf("udp: hold timeout %v not in 0..%v", c.HoldTimeout, link.MaxReorderDelay)
	}
	if c.Clock == nil {
		c.Clock = timing.NewWall()
	}
	if c.SocketBuffer == 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	if c.SocketBuffer < 0 {
		return fmt.Errorf("udp: socket buffer %d < 0", c.SocketBuffer)
	}
	if c.MTU != 0 && (c.MTU < link.MinMTU || c.MTU > link.MaxMTU) {
		return fmt.Errorf("udp: MTU %d not in %d..%d", c.MTU, link.MinMTU, link.MaxMTU)
	}
	if c.Mode.Send > IOPacket || c.Mode.Recv > IOPacket {
		return fmt.Errorf("udp: bad mode %v", c.Mode)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c.Faults.Validate()
}

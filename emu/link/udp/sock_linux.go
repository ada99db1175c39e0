package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// udpSock is one UDP socket bound to one of the port's addresses and port
// 4791. It sends every frame whose source is that address (so the UDP
// source port of everything the port sends from it is 4791: rxe does not
// check the source port, docs/roce.md "UDP ports and checksum") and
// receives what peers send to it. A socket bound to 4791 is needed in
// every mode: without one the kernel answers each RoCEv2 datagram with an
// ICMP port unreachable.
type udpSock struct {
	addr netip.Addr // unmapped, no zone
	port uint16
	file *os.File
	raw  syscall.RawConn
	v4   bool // an IPv4 socket: its destinations are sockaddr_in

	// noGSO is set once the kernel refused a GSO send from this socket
	// (gso.go gsoFallback).
	noGSO atomic.Bool
}

// openUDP binds addr:4791 and sets the options the link relies on. With
// discard, everything the socket receives is dropped by a socket filter
// before it is queued: packet receive mode reads the same datagrams from
// its AF_PACKET socket and needs this one only so that the kernel does not
// answer them with port unreachable. (The drops show in the kernel's
// UDP InErrors counter.) scope is the interface index of a link-local
// IPv6 address (scopeOf).
//
// Only a socket a goroutine waits on in the Go poller (pollable: a receive
// ring with WaitInPoller) is registered there (outOfPoller).
func openUDP(addr netip.Addr, scope uint32, bufSize int, discard, pollable bool) (*udpSock, error) {
	ap := netip.AddrPortFrom(addr, wire.RoCEv2Port)
	if scope != 0 {
		ap = netip.AddrPortFrom(addr.WithZone(strconv.FormatUint(uint64(scope), 10)), wire.RoCEv2Port)
	}
	var family int
	var sa unix.Sockaddr
	if addr.Is6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(wire.RoCEv2Port), Addr: addr.As16(), ZoneId: scope}
	} else {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(wire.RoCEv2Port), Addr: addr.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|sockNonblock(pollable), 0)
	if err != nil {
		return nil, fmt.Errorf("udp: socket for %v: %w", ap, err)
	}
	if addr.Is6() {
		// As net.ListenUDP("udp6") does: the socket is IPv6 only, so
		// that an IPv4 address of the port gets its own socket.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("udp: IPV6_V6ONLY on %v: %w", ap, err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("udp: bind %v: %w", ap, err)
	}
	if err := setUDPOptions(fd, addr.Is6(), bufSize, discard); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("udp: socket options on %v: %w", ap, err)
	}
	f := os.NewFile(uintptr(fd), "udp "+ap.String())
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &udpSock{addr: addr, port: wire.RoCEv2Port, file: f, raw: raw, v4: addr.Is4()}, nil
}

// Out of the poller. The Go runtime registers every non-blocking
// descriptor it wraps with its epoll instance, edge-triggered for reading
// and writing, whether or not a goroutine ever waits on it. Each datagram
// a socket sends then wakes the runtime thread blocked in epoll_wait when
// the kernel frees it (sock_wfree → the socket's write-space callback), and
// each frame an AF_PACKET socket receives wakes it beside the ring's own
// ppoll (sock_def_readable): a thread woken to find no goroutine ready,
// on a CPU a spinning program holds. Two daemons' ib_write_lat -s 8 had
// 62–65 % of the runtime's wake-ups find nothing to run
// (docs/performance.md "Sockets out of the poller"). The link never waits
// in the poller for a send (sendmmsg with MSG_DONTWAIT; a full buffer is a
// counted drop) nor, by default, for a receive (waitRecv): its sockets
// are left in blocking mode, which os.NewFile does not register, and every
// call on them passes MSG_DONTWAIT.

// sockNonblock returns SOCK_NONBLOCK for a socket that waits in the
// poller, 0 for one kept out of it.
func sockNonblock(pollable bool) int {
	if pollable {
		return unix.SOCK_NONBLOCK
	}
	return 0
}

func setUDPOptions(fd int, v6 bool, bufSize int, discard bool) error {
	type opt struct {
		level, name, val int
		what             string
	}
	var opts []opt
	if v6 {
		opts = []opt{
			// Never fragment locally: a frame too big for the path is
			// EMSGSIZE (counted), as DF makes it for IPv4.
			{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO, "IPV6_MTU_DISCOVER"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1, "IPV6_RECVHOPLIMIT"},
			{unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"},
			// rxe sends IPv6 with UDP checksum 0 (rxe_net.c
			// prepare_udp_hdr), which RFC 8200 forbids outside tunnels;
			// Linux drops such datagrams unless the socket accepts them.
			{unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX"},
		}
	} else {
		opts = []opt{
			// DF on every datagram; with the socket unconnected this
			// makes Linux send IP ID 0 (ip_select_ident_segs), so the
			// device's ICRC, computed over ID 0, holds on the wire.
			{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO, "IP_MTU_DISCOVER"},
			{unix.IPPROTO_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO"},
			{unix.IPPROTO_IP, unix.IP_RECVTTL, 1, "IP_RECVTTL"},
			{unix.IPPROTO_IP, unix.IP_RECVTOS, 1, "IP_RECVTOS"},
		}
	}
	// The kernel's count of datagrams dropped for a full receive buffer,
	// with every read (sock_recv_drops), so that overflow is counted.
	opts = append(opts, opt{unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1, "SO_RXQ_OVFL"})
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.val); err != nil {
			return fmt.Errorf("%s: %w", o.what, err)
		}
	}
	setBuffers(fd, bufSize)
	// Coalesced datagrams whole (gro.go); a discarding socket then drops
	// a GSO send once instead of cutting it up first.
	setGRO(fd)
	if discard {
		return attachFilter(fd, dropAll)
	}
	return nil
}

// setBuffers sets SO_RCVBUF and SO_SNDBUF, past the sysctl maxima
// (net.core.rmem_max, 208 KiB by default) when the process may
// (CAP_NET_ADMIN, SO_RCVBUFFORCE); otherwise the kernel caps the value
// silently, which is still the best available.
func setBuffers(fd, n int) {
	if n <= 0 {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n)
	}
}

// dropAll is a classic BPF program that accepts nothing.
var dropAll = []bpf.Instruction{bpf.RetConstant{Val: 0}}

func attachFilter(fd int, prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return err
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fp := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp)
	runtime.KeepAlive(f)
	if err != nil {
		return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
	}
	return nil
}

// htons converts a 16-bit value to network byte order (sockaddr_ll's
// protocol field is big-endian; this code runs on little-endian hosts
// and big-endian ones alike).
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// packetSock is an AF_PACKET socket, wrapped in an *os.File so that the Go
// poller serves it.
type packetSock struct {
	fd   int
	file *os.File
	raw  syscall.RawConn
}

func (p *packetSock) close() error { return p.file.Close() }

// openPacket opens an AF_PACKET socket of type typ. It returns
// ErrPacketNotAllowed when the process lacks CAP_NET_RAW.
func openPacket(typ int, pollable bool) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, typ|sockNonblock(pollable)|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return -1, ErrPacketNotAllowed
		}
		return -1, fmt.Errorf("udp: AF_PACKET socket: %w", err)
	}
	return fd, nil
}

func wrapPacket(fd int, name string) (*packetSock, error) {
	f := os.NewFile(uintptr(fd), name)
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packetSock{fd: fd, file: f, raw: raw}, nil
}

// openPacketRecv opens the packet-mode receive socket: SOCK_RAW with
// PACKET_VNET_HDR, so that each packet comes after a virtio header saying
// whether it is a GSO packet to cut (gro.go; the header is refused on
// SOCK_DGRAM sockets), bound to every interface of the namespace (ifindex
// 0: frames for the port's addresses reach it on lo when the sender is
// local, whatever interface holds the address). The link-layer header in
// front of the IP header is Ethernet's on loopback, veth and Ethernet, and
// none on IP tunnels (gro.go buildPacketMsg). It ignores outgoing frames
// (PACKET_IGNORE_OUTGOING, Linux 4.20; the filter also rejects them, since
// without it a loopback frame is seen twice, once leaving and once
// arriving), and its filter passes only UDP to 4791 for the port's
// addresses. The filter is attached before the bind so that nothing
// unfiltered is ever queued.
func openPacketRecv(addrs []netip.Addr, bufSize int, pollable bool) (*packetSock, error) {
	fd, err := openPacket(unix.SOCK_RAW, pollable)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*packetSock, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
		return fail(fmt.Errorf("udp: PACKET_IGNORE_OUTGOING: %w", err))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fail(fmt.Errorf("udp: PACKET_VNET_HDR: %w", err))
	}
	if err := attachFilter(fd, packetFilter(addrs)); err != nil {
		return fail(fmt.Errorf("udp: packet filter: %w", err))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
		return fail(fmt.Errorf("udp: SO_RXQ_OVFL: %w", err))
	}
	setBuffers(fd, bufSize)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL)}); err != nil {
		return fail(fmt.Errorf("udp: bind AF_PACKET: %w", err))
	}
	ps, err := wrapPacket(fd, "packet-rx")
	if err != nil {
		return fail(err)
	}
	return ps, nil
}

// openPacketSend opens the packet-mode send socket: SOCK_RAW, bound to the
// port's interface with protocol 0, so that it receives nothing and sends
// frames exactly as the device built them (MACs, IP ID, UDP source port).
func openPacketSend(ifindex, bufSize int) (*packetSock, error) {
	fd, err := openPacket(unix.SOCK_RAW, false)
	if err != nil {
		return nil, err
	}
	setBuffers(fd, bufSize)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("udp: bind AF_PACKET to ifindex %d: %w", ifindex, err)
	}
	ps, err := wrapPacket(fd, "packet-tx")
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return ps, nil
}

// canPacket reports whether the process may open AF_PACKET sockets.
func canPacket() bool {
	fd, err := openPacket(unix.SOCK_DGRAM, false)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// packetFilter returns the classic BPF program of the packet receive
// socket. Its loads are relative to the network header (SKF_NET_OFF,
// include/uapi/linux/filter.h), whatever link-layer header the device
// puts in front:
//
//	pkttype != PACKET_OUTGOING
//	IPv4: protocol UDP, not a fragment, UDP dport 4791, daddr one of ours
//	IPv6: next header UDP (RoCEv2 has no extension headers), dport 4791,
//	      daddr one of ours
//
// When the addresses are too many for 8-bit jump offsets the address test
// is left out; the receive path checks the destination again anyway.
func packetFilter(addrs []netip.Addr) []bpf.Instruction {
	if p, ok := buildPacketFilter(addrs, true); ok {
		return p
	}
	p, _ := buildPacketFilter(addrs, false)
	return p
}

// netOff is SKF_NET_OFF (-0x100000) as the unsigned offset of a classic
// BPF load: the kernel reads such loads from the network header on
// (bpf_internal_load_pointer_neg_helper).
const netOff = 0xfff00000

// label names a jump target of the filter assembler.
type label int

const (
	lNone label = iota
	lAccept
	lReject
	lIPv4
	lIPv6
	lNext // the next address block
)

type insn struct {
	in     bpf.Instruction
	jt, jf label // for JumpIf
	ja     label // for Jump
}

func buildPacketFilter(addrs []netip.Addr, byAddr bool) ([]bpf.Instruction, bool) {
	var p []insn
	add := func(in bpf.Instruction) { p = append(p, insn{in: in}) }
	jeq := func(v uint32, jt, jf label) {
		p = append(p, insn{in: bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, jt: jt, jf: jf})
	}
	pos := map[label]int{}
	var nextPos []int // where each IPv6 address block starts, in order

	add(bpf.LoadExtension{Num: bpf.ExtType})
	jeq(unix.PACKET_OUTGOING, lReject, lNone)
	add(bpf.LoadExtension{Num: bpf.ExtProto})
	jeq(unix.ETH_P_IP, lIPv4, lNone)
	jeq(unix.ETH_P_IPV6, lIPv6, lReject)

	pos[lIPv4] = len(p)
	add(bpf.LoadAbsolute{Off: netOff + 9, Size: 1})
	jeq(unix.IPPROTO_UDP, lNone, lReject)
	add(bpf.LoadAbsolute{Off: netOff + 6, Size: 2})
	p = append(p, insn{in: bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: ipv4FlagMF | ipv4FragMask}, jt: lReject, jf: lNone})
	add(bpf.LoadMemShift{Off: netOff})
	add(bpf.LoadIndirect{Off: netOff + 2, Size: 2})
	jeq(wire.RoCEv2Port, lNone, lReject)
	if byAddr {
		add(bpf.LoadAbsolute{Off: netOff + 16, Size: 4})
		for _, a := range addrs {
			if a.Is4() {
				b := a.As4()
				jeq(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]), lAccept, lNone)
			}
		}
		p = append(p, insn{in: bpf.Jump{}, ja: lReject})
	} else {
		p = append(p, insn{in: bpf.Jump{}, ja: lAccept})
	}

	pos[lIPv6] = len(p)
	add(bpf.LoadAbsolute{Off: netOff + 6, Size: 1})
	jeq(unix.IPPROTO_UDP, lNone, lReject)
	add(bpf.LoadAbsolute{Off: netOff + wire.IPv6Size + 2, Size: 2})
	jeq(wire.RoCEv2Port, lNone, lReject)
	if byAddr {
		for _, a := range addrs {
			if !a.Is6() {
				continue
			}
			nextPos = append(nextPos, len(p))
			b := a.As16()
			for w := range 4 {
				add(bpf.LoadAbsolute{Off: netOff + 24 + 4*uint32(w), Size: 4})
				v := uint32(b[4*w])<<24 | uint32(b[4*w+1])<<16 | uint32(b[4*w+2])<<8 | uint32(b[4*w+3])
				if w < 3 {
					jeq(v, lNone, lNext)
				} else {
					jeq(v, lAccept, lNext)
				}
			}
		}
		nextPos = append(nextPos, len(p)) // the reject below ends the chain
		p = append(p, insn{in: bpf.Jump{}, ja: lReject})
	} else {
		p = append(p, insn{in: bpf.Jump{}, ja: lAccept})
	}
	pos[lAccept] = len(p)
	add(bpf.RetConstant{Val: 1 << 18})
	pos[lReject] = len(p)
	add(bpf.RetConstant{Val: 0})

	// Resolve the labels; lNext is the first address block after the
	// instruction.
	target := func(i int, l label) int {
		if l == lNext {
			for _, np := range nextPos {
				if np > i {
					return np
				}
			}
			return pos[lReject]
		}
		return pos[l]
	}
	out := make([]bpf.Instruction, len(p))
	for i, x := range p {
		switch in := x.in.(type) {
		case bpf.JumpIf:
			for _, jl := range []struct {
				l   label
				dst *uint8
			}{{x.jt, &in.SkipTrue}, {x.jf, &in.SkipFalse}} {
				if jl.l == lNone {
					continue
				}
				d := target(i, jl.l) - i - 1
				if d < 0 || d > 255 {
					return nil, false
				}
				*jl.dst = uint8(d)
			}
			out[i] = in
		case bpf.Jump:
			in.Skip = uint32(target(i, x.ja) - i - 1)
			out[i] = in
		default:
			out[i] = x.in
		}
	}
	return out, true
}

// interfaceFor returns the index of the interface that holds addr: the
// one with addr among its addresses, else a loopback interface whose
// prefix contains it (any 127.0.0.0/8 address is local on lo).
func interfaceFor(addr netip.Addr) (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, err
	}
	loop := 0
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if pfx.Addr().Unmap() == addr {
				return ifc.Index, nil
			}
			if ifc.Flags&net.FlagLoopback != 0 && pfx.Masked().Contains(addr) && loop == 0 {
				loop = ifc.Index
			}
		}
	}
	if loop != 0 {
		return loop, nil
	}
	return 0, fmt.Errorf("udp: no interface holds %v", addr)
}

// scopeOf returns the IPv6 scope of addr on interface ifindex: the index
// for link-local addresses, 0 otherwise.
func scopeOf(addr netip.Addr, ifindex int) uint32 {
	if addr.Is6() && addr.IsLinkLocalUnicast() && ifindex > 0 {
		return uint32(ifindex)
	}
	return 0
}

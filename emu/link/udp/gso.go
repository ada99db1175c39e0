package udp

import (
	"bytes"
	"encoding/binary"
	"errors"

	"go.uber.org/zap"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// UDP segmentation offload (GSO) on the send path.
//
// On loopback and veth most of a datagram's cost is the kernel's work per
// skb, on both sides (docs/performance.md "Self-kicks, in-device ICRC,
// syscalls per packet": 2.2–2.8 µs per 4 KiB datagram for sender and
// loopback receive together with sendmmsg, 0.6–1.0 µs with GSO). A
// sendmsg with a UDP_SEGMENT control message (Linux 4.18) hands the
// kernel one buffer that it cuts into datagrams of gso_size bytes, the
// last one possibly shorter, each with its own IP and UDP header; on
// loopback and veth the cut happens only at the receiving socket, or not
// at all for a socket with UDP_GRO. RoCEv2 packets are complete datagrams
// with their own ICRC, so consecutive frames to one destination with the
// same TOS and TTL and the same length (the last may be shorter) go out as
// one send: the middle packets of a multi-packet message, and also equal
// packets of different messages.
//
// The one field the kernel writes differently is the IPv4 ID: segment i
// carries the super-packet's ID plus i (af_inet.c inet_gso_segment), and
// the super-packet's ID is 0, as for every datagram of this unconnected
// DF socket (ip_select_ident_segs). The ICRC covers the ID, so segment i
// is resealed for ID i (wire.ICRCIDDeltas, which changes the ICRC by the
// ID's difference only, so a frame the fault injector corrupted stays
// corrupted). IPv6 has no ID.

// Limits of one GSO send.
const (
	// maxGSOSegments is UDP_MAX_SEGMENTS of Linux 4.18 to 6.8 (64; later
	// kernels take 128): more segments fail with EINVAL.
	maxGSOSegments = 64
	// maxGSOPayload is the most UDP payload one datagram may carry, GSO
	// or not: the IPv4 total length is 16 bits (measured: 16 × 4 124
	// bytes fail with EMSGSIZE). IPv6 keeps to it too: a send whose whole
	// IP packet is longer than 64 KiB was measured to reach a receiver
	// on loopback cut up by the kernel, not whole.
	maxGSOPayload = 0xffff - wire.IPv4MinimumSize - wire.UDPSize
	// gsoCmsgSpace is CMSG_SPACE(sizeof(u16)), the UDP_SEGMENT message.
	gsoCmsgSpace = 24
)

// planSends fills g.out with what one socket sends for g.msgs: each
// message alone, or runs of them as one GSO send when the link and the
// socket may (g.segs[k] frames in out[k], starting at msgs[g.first[k]]).
func (l *Link) planSends(g *txGroup) {
	g.out, g.segs, g.first, g.iov = g.out[:0], g.segs[:0], g.first[:0], g.iov[:0]
	gso := l.gso && !g.sock.noGSO.Load()
	for j := 0; j < len(g.msgs); {
		k := j + 1
		if gso {
			k = g.runEnd(j)
		}
		g.first = append(g.first, j)
		g.segs = append(g.segs, k-j)
		if k-j == 1 {
			g.out = append(g.out, g.msgs[j])
			j = k
			continue
		}
		for m := j; m < k; m++ {
			g.iov = append(g.iov, g.msgs[m].Buffers[0])
		}
		s := g.slots[j]
		n := len(g.msgs[j].OOB)
		n += putCmsgUint16(s.oob[n:], unix.IPPROTO_UDP, unix.UDP_SEGMENT, uint16(len(s.bufs[0])))
		// Buffers point into g.iov once it has stopped growing (below).
		g.out = append(g.out, ipv4.Message{OOB: s.oob[:n], Addr: g.msgs[j].Addr})
		if g.sock.v4 {
			g.renumber(j, k, false)
		}
		j = k
	}
	iov := 0
	for k := range g.out {
		if g.segs[k] > 1 {
			g.out[k].Buffers = g.iov[iov : iov+g.segs[k]]
			iov += g.segs[k]
		}
	}
}

// countGSO counts the GSO sends among msgs [i, i+n) of segs, which went
// out.
func (l *Link) countGSO(segs []int, i, n int) {
	var sends, frames uint64
	for _, s := range segs[i : i+n] {
		if s > 1 {
			sends++
			frames += uint64(s)
		}
	}
	if sends > 0 {
		l.c.gsoSends.Add(sends)
		l.c.gsoFrames.Add(frames)
	}
}

// runEnd returns the end of the run of messages from j that one GSO send
// can carry: one destination, the same control messages (TOS, TTL), the
// same length but for a shorter last one, within the kernel's limits.
func (g *txGroup) runEnd(j int) int {
	first := g.slots[j]
	size := len(first.bufs[0])
	total := size
	k := j + 1
	for ; k < len(g.msgs) && k-j < maxGSOSegments; k++ {
		s := g.slots[k]
		n := len(s.bufs[0])
		if n > size || total+n > maxGSOPayload || !first.sameDest(s) || !bytes.Equal(g.msgs[j].OOB, g.msgs[k].OOB) {
			break
		}
		total += n
		if n < size {
			return k + 1
		}
	}
	return k
}

// sameDest reports whether two datagrams go to the same address.
func (s *txSlot) sameDest(o *txSlot) bool {
	return s.addr.Port == o.addr.Port && s.addr.Zone == o.addr.Zone && bytes.Equal(s.addr.IP, o.addr.IP)
}

// renumber moves the ICRCs of the IPv4 datagrams msgs[j+1:k] of one GSO
// send from ID 0, which kernelHeaders sealed them for, to the segment's ID
// (1, 2, …), or back with undo. Their IP headers have no options:
// kernelHeaders refuses frames with any, since the socket sends none.
func (g *txGroup) renumber(j, k int, undo bool) {
	for m := j + 1; m < k; m++ {
		pkt := g.slots[m].bufs[0]
		d := g.deltas(wire.IPv4MinimumSize, len(pkt))
		if d == nil {
			continue // no ICRC shape: kernelHeaders refused it already
		}
		id := uint16(m - j)
		from, to := uint16(0), id
		if undo {
			from, to = id, 0
		}
		end := len(pkt) - wire.ICRCSize
		binary.LittleEndian.PutUint32(pkt[end:], binary.LittleEndian.Uint32(pkt[end:])^d.Delta(from, to))
	}
}

// deltas returns the ICRC ID deltas for a shape, computing them on first
// use; a group keeps the few shapes a link sends (the full-size packet and
// the last, shorter ones).
func (g *txGroup) deltas(ipHL, pktLen int) *wire.ICRCIDDeltas {
	for i := range g.shapes {
		if hl, n := g.shapes[i].Shape(); hl == ipHL && n == pktLen {
			return &g.shapes[i]
		}
	}
	d := &g.shapes[g.nextShape%len(g.shapes)]
	g.nextShape++
	if !d.Reset(ipHL, pktLen) {
		return nil
	}
	return d
}

// gsoRefused reports whether a GSO send failed because the route cannot
// take one (no checksum offload on the egress device: EIO; a kernel or
// route that refuses the segment size or count: EINVAL; a kernel without
// UDP_SEGMENT sends the whole buffer as one datagram: EMSGSIZE), as
// opposed to a loss that would meet the datagrams one by one as well.
func gsoRefused(err error) bool {
	for _, e := range []error{unix.EIO, unix.EINVAL, unix.EMSGSIZE, unix.EOPNOTSUPP, unix.ENOPROTOOPT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// gsoFallback sends out[k], a GSO send the kernel refused, as separate
// datagrams, and sends every later datagram of the socket that way.
func (l *Link) gsoFallback(g *txGroup, k int, err error) {
	if !g.sock.noGSO.Swap(true) {
		l.c.gsoRefused.Add(1)
		l.log.Warn("UDP segmentation offload refused; sending one datagram per packet from this address",
			zap.Stringer("addr", g.sock.addr), zap.Error(err))
	}
	j := g.first[k]
	end := j + g.segs[k]
	if g.sock.v4 {
		g.renumber(j, end, true)
	}
	l.sendMsgs(g, g.msgs[j:end], nil)
}

// putCmsgUint16 writes one control message carrying a u16 (UDP_SEGMENT:
// udp_cmsg_send takes exactly CMSG_LEN(2)) and returns its aligned size.
func putCmsgUint16(b []byte, level, typ int32, v uint16) int {
	binary.NativeEndian.PutUint16(putCmsgHeader(b, level, typ, 2), v)
	return unix.CmsgSpace(2)
}

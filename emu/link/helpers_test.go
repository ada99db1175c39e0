package link_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// frameOpts shapes a test frame.
type frameOpts struct {
	payload int  // RoCEv2 payload bytes (SEND Only)
	ipv6    bool // IPv6 instead of IPv4
	vlan    bool // an 802.1Q tag
}

var (
	ipA4 = netip.MustParseAddr("192.0.2.1")
	ipB4 = netip.MustParseAddr("192.0.2.2")
	ipA6 = netip.MustParseAddr("2001:db8::1")
	ipB6 = netip.MustParseAddr("2001:db8::2")

	payloadPattern = func() []byte {
		b := make([]byte, wire.MaxPMTU)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}()
)

// buildInto writes an RC SEND Only frame with sequence number seq into p:
// seq is the BTH PSN (mod 2^24) and also the low four bytes of the source
// MAC, outside the RoCEv2 packet, so that a frame corrupted inside its
// RoCEv2 part can still be identified.
func buildInto(tb testing.TB, p *link.Packet, seq uint32, o frameOpts) {
	tb.Helper()
	src := wire.MAC{0x02, 0x5e}
	binary.BigEndian.PutUint32(src[2:], seq)
	ff := wire.FrameFields{
		Dst: wire.MAC{0x02, 0, 0, 0, 0, 0x0b}, Src: src,
		SrcIP: ipA4, DstIP: ipB4, HopLimit: 64, SrcPort: 0xc000 | uint16(seq&0xfff),
	}
	if o.ipv6 {
		ff.SrcIP, ff.DstIP = ipA6, ipB6
	}
	if o.vlan {
		ff.VLAN = &wire.VLANFields{Priority: 3, ID: 100}
	}
	pf := wire.PacketFields{BTH: wire.BTHFields{
		Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x12, AckReq: true,
		PSN: wire.PSN(seq) & wire.PSNMask,
	}}
	n, err := wire.BuildFrame(p.Buf(), &ff, &pf, payloadPattern[:o.payload])
	if err != nil {
		tb.Fatalf("BuildFrame: %v", err)
	}
	p.Data = p.Buf()[:n]
}

// newFrame takes a packet from pool and builds frame seq into it.
func newFrame(tb testing.TB, pool *link.Pool, seq uint32, o frameOpts) *link.Packet {
	tb.Helper()
	p := pool.Get()
	if p == nil {
		tb.Fatalf("pool exhausted: %+v", pool.Stats())
	}
	buildInto(tb, p, seq, o)
	return p
}

// frames builds frames first..first+n-1.
func frames(tb testing.TB, pool *link.Pool, first, n int, o frameOpts) []*link.Packet {
	tb.Helper()
	pkts := make([]*link.Packet, n)
	for i := range pkts {
		pkts[i] = newFrame(tb, pool, uint32(first+i), o)
	}
	return pkts
}

// seqOf returns the sequence number buildInto put into a frame.
func seqOf(frame []byte) uint32 {
	if len(frame) < 12 {
		return ^uint32(0)
	}
	return binary.BigEndian.Uint32(frame[8:12])
}

// rxFrame is what a recorder keeps of a received frame.
type rxFrame struct {
	seq  uint32
	time time.Duration
	icrc link.ICRCStatus
	data []byte
}

// recorder is a Receiver that copies and releases what it receives.
type recorder struct {
	mu      sync.Mutex
	frames  []rxFrame
	states  []link.State
	batches int
	maxSeen int // largest batch
	inCall  bool
	overlap bool // Receive was entered while another call ran
	onRecv  func(pkts []*link.Packet)
	arrived chan struct{} // if set, signalled (non-blocking) per batch
}

func (r *recorder) Receive(pkts []*link.Packet) {
	r.mu.Lock()
	if r.inCall {
		r.overlap = true
	}
	r.inCall = true
	r.batches++
	r.maxSeen = max(r.maxSeen, len(pkts))
	for _, p := range pkts {
		r.frames = append(r.frames, rxFrame{seq: seqOf(p.Data), time: p.Time, icrc: p.ICRC, data: bytes.Clone(p.Data)})
	}
	on := r.onRecv
	r.mu.Unlock()
	if on != nil {
		on(pkts)
	}
	for _, p := range pkts {
		p.Release()
	}
	r.mu.Lock()
	r.inCall = false
	r.mu.Unlock()
	if r.arrived != nil {
		select {
		case r.arrived <- struct{}{}:
		default:
		}
	}
}

func (r *recorder) LinkStateChanged(s link.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}

func (r *recorder) got() []rxFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rxFrame(nil), r.frames...)
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

func (r *recorder) seqs() []uint32 {
	var s []uint32
	for _, f := range r.got() {
		s = append(s, f.seq)
	}
	return s
}

func (r *recorder) stateLog() []link.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]link.State(nil), r.states...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// linkGoroutines returns the stacks of the goroutines a pair starts: the
// delivery goroutines and the wall clock's timer functions.
func linkGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "emu/link.(*direction)") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// checkNoLinkGoroutines fails if goroutines of this package outlive the
// links that started them (wireguard-go's goroutineLeakCheck, narrowed to
// our own goroutines so that it does not depend on the runtime's).
func checkNoLinkGoroutines(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := linkGoroutines()
		if g == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("goroutines left running:\n%s", g)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

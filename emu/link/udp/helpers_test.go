package udp_test

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
	"github.com/irdma-emu/irdma-emu/emu/link/udp"
	"github.com/irdma-emu/irdma-emu/emu/wire"
	"github.com/irdma-emu/irdma-emu/internal/testaddr"
)

var (
	// Two loopback addresses of this test binary's own (internal/testaddr):
	// other packages' tests bind UDP 4791 on loopback at the same time.
	loPair = testaddr.MustPick(3)
	lo2    = loPair[0]
	lo3    = loPair[1]
	lo4    = loPair[2]
	lo6    = netip.MustParseAddr("::1")

	payloadPattern = func() []byte {
		b := make([]byte, wire.MaxPMTU)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}()
)

// frameSpec describes a test frame: which opcode, addresses and header
// values, and a sequence number carried in the PSN (and, for opcodes with
// a payload, in its first four bytes).
type frameSpec struct {
	op       wire.Opcode
	src, dst netip.Addr
	srcPort  uint16 // 0: 4791, the UDP link's own
	payload  int
	tclass   uint8
	hop      uint8
	ipID     uint16
	seq      uint32
	dstQP    uint32
	srcMAC   wire.MAC
	dstMAC   wire.MAC
}

// build writes the frame into a pool packet with emu/wire.
func build(tb testing.TB, pool *link.Pool, s frameSpec) *link.Packet {
	tb.Helper()
	p := pool.Get()
	if p == nil {
		tb.Fatalf("pool exhausted: %+v", pool.Stats())
	}
	if s.srcPort == 0 {
		s.srcPort = wire.RoCEv2Port
	}
	if s.hop == 0 {
		s.hop = 64
	}
	if s.dstQP == 0 {
		s.dstQP = 0x11
	}
	ff := wire.FrameFields{
		Dst: s.dstMAC, Src: s.srcMAC,
		SrcIP: s.src, DstIP: s.dst,
		TrafficClass: s.tclass, HopLimit: s.hop, IPID: s.ipID,
		SrcPort: s.srcPort,
	}
	pf := wire.PacketFields{BTH: wire.BTHFields{
		Opcode: s.op, PKey: wire.DefaultPKey, DestQP: s.dstQP, AckReq: true,
		PSN: wire.PSN(s.seq) & wire.PSNMask,
	}}
	pf.DETH = wire.DETHFields{QKey: 0x11111111, SrcQP: 0x22}
	pf.RETH = wire.RETHFields{VA: 0x1000, RKey: 0x1234, DMALen: uint32(s.payload)}
	pf.AETH = wire.AETHFields{Syndrome: 0x1f, MSN: s.seq & 0xffffff}
	pf.ImmDt = wire.ImmDtFields{Imm: 0xdeadbeef}
	payload := bytes.Clone(payloadPattern[:s.payload])
	if len(payload) >= 4 {
		binary.BigEndian.PutUint32(payload, s.seq)
	}
	n, err := wire.BuildFrame(p.Buf(), &ff, &pf, payload)
	if err != nil {
		tb.Fatalf("BuildFrame %v: %v", s.op, err)
	}
	p.Data = p.Buf()[:n]
	return p
}

// rx is a received frame, copied.
type rx struct {
	data []byte
	icrc link.ICRCStatus
	time time.Duration
}

// recorder is a Receiver that copies and releases what it receives.
type recorder struct {
	mu      sync.Mutex
	frames  []rx
	states  []link.State
	inCall  bool
	overlap bool
	keep    bool // keep copies (off for load tests)
	count   int
	batches int
	maxSeen int
}

func newRecorder() *recorder { return &recorder{keep: true} }

func (r *recorder) Receive(pkts []*link.Packet) {
	r.mu.Lock()
	if r.inCall {
		r.overlap = true
	}
	r.inCall = true
	r.batches++
	r.maxSeen = max(r.maxSeen, len(pkts))
	for _, p := range pkts {
		if r.keep {
			r.frames = append(r.frames, rx{data: bytes.Clone(p.Data), icrc: p.ICRC, time: p.Time})
		}
		r.count++
	}
	r.inCall = false
	r.mu.Unlock()
	for _, p := range pkts {
		p.Release()
	}
}

func (r *recorder) LinkStateChanged(s link.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *recorder) got() []rx {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rx(nil), r.frames...)
}

func (r *recorder) stateLog() []link.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]link.State(nil), r.states...)
}

// waitFor polls cond until it holds or 10 s pass.
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

// newLink opens a link and closes it at the end of the test, checking that
// its goroutines are gone and its buffers back in the pool.
func newLink(tb testing.TB, cfg udp.Config) *udp.Link {
	tb.Helper()
	if cfg.Pool == nil {
		cfg.Pool = link.NewPool(0)
	}
	l, err := udp.New(cfg)
	if err != nil {
		tb.Fatalf("udp.New(%v): %v", cfg.Addrs, err)
	}
	pools, loaded := leakChecked.LoadOrStore(tb, &poolSet{})
	ps := pools.(*poolSet)
	if !loaded {
		// Registered before the first link's Close, so it runs after
		// every link of the test is closed (cleanups run last first).
		tb.Cleanup(func() {
			leakChecked.Delete(tb)
			checkNoLinkGoroutines(tb)
			ps.mu.Lock()
			defer ps.mu.Unlock()
			for _, p := range ps.pools {
				if n := p.Outstanding(); n != 0 {
					tb.Errorf("%d packets outstanding after Close", n)
				}
			}
		})
	}
	ps.mu.Lock()
	ps.pools = append(ps.pools, cfg.Pool)
	ps.mu.Unlock()
	tb.Cleanup(func() {
		if err := l.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return l
}

type poolSet struct {
	mu    sync.Mutex
	pools []*link.Pool
}

// leakChecked holds the tests whose goroutine check is registered.
var leakChecked sync.Map

// linkGoroutines returns the stacks of goroutines running this package's
// code.
func linkGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "emu/link/udp.(*") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// checkNoLinkGoroutines fails if goroutines of this package outlive their
// links (wireguard-go's goroutineLeakCheck, narrowed to our goroutines).
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

// roceOf returns the UDP payload (BTH..ICRC) of a frame and its parse.
func roceOf(tb testing.TB, frame []byte) (wire.Frame, []byte) {
	tb.Helper()
	var f wire.Frame
	if err := wire.ParseFrame(frame, &f); err != nil {
		tb.Fatalf("ParseFrame: %v\n% x", err, frame)
	}
	return f, f.Packet.Raw
}

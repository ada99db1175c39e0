package daemon

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/irdma-emu/irdma-emu/emu/link"
)

// capture records the frames crossing the port (--pcap): what the device
// hands the link to send, before the fault injector, and what the link
// delivers, as the device receives it (on a UDP socket the link rebuilt the
// Ethernet and IP headers in front of the datagram). Timestamps are the
// daemon's clock. The data path never sees a capture error: the first one
// stops the capture, is logged, and is returned by close.
type capture struct {
	epoch time.Time

	mu     sync.Mutex
	bw     *bufio.Writer // guarded by mu
	write  func(gopacket.CaptureInfo, []byte) error
	flushf func() error
	err    error // guarded by mu
	n      uint64
	// dirty gets a token when a frame is written into an empty buffer
	// (pending, guarded by mu): the flusher sleeps on it, so an idle
	// daemon's capture costs no wake-up.
	dirty   chan struct{}
	pending bool
}

// captureSnaplen is the snapshot length in the file header: every frame
// whole.
const captureSnaplen = link.BufferSize

// newCapture starts a capture on w: pcapng when ng, else pcap with
// nanosecond timestamps, Ethernet link type either way.
func newCapture(w io.Writer, ng bool, epoch time.Time) (*capture, error) {
	c := &capture{epoch: epoch, bw: bufio.NewWriterSize(w, 256<<10), dirty: make(chan struct{}, 1)}
	if ng {
		nw, err := pcapgo.NewNgWriterInterface(c.bw, pcapgo.NgInterface{
			Name:                "irdma-emu",
			Comment:             "frames sent and received by the emulated port",
			LinkType:            layers.LinkTypeEthernet,
			SnapLength:          captureSnaplen,
			TimestampResolution: 9,
		}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "irdma-emu"}})
		if err != nil {
			return nil, fmt.Errorf("pcapng: %w", err)
		}
		c.write = nw.WritePacket
		// The pcapng writer buffers on its own, in front of ours.
		c.flushf = func() error {
			if err := nw.Flush(); err != nil {
				return err
			}
			return c.bw.Flush()
		}
	} else {
		pw := pcapgo.NewWriterNanos(c.bw)
		if err := pw.WriteFileHeader(captureSnaplen, layers.LinkTypeEthernet); err != nil {
			return nil, fmt.Errorf("pcap: %w", err)
		}
		c.write = pw.WritePacket
		c.flushf = c.bw.Flush
	}
	// The header is on disk at once: a reader of a fresh capture sees a
	// valid, empty file rather than nothing.
	if err := c.flushf(); err != nil {
		return nil, err
	}
	return c, nil
}

// isPcapng says whether a file name asks for pcapng.
func isPcapng(name string) bool {
	return strings.HasSuffix(strings.ToLower(name), ".pcapng")
}

// record writes the frames of pkts, all stamped now (clock time since the
// epoch).
func (c *capture) record(now time.Duration, pkts []*link.Packet) {
	ts := c.epoch.Add(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	for _, p := range pkts {
		if p == nil {
			continue
		}
		c.recordLocked(ts, p.Data)
	}
}

// recordAt writes received frames, each at its arrival time on the link's
// clock (the daemon's clock too).
func (c *capture) recordAt(pkts []*link.Packet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	for _, p := range pkts {
		if p == nil {
			continue
		}
		c.recordLocked(c.epoch.Add(p.Time), p.Data)
	}
}

func (c *capture) recordLocked(ts time.Time, frame []byte) {
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: len(frame)}
	if err := c.write(ci, frame); err != nil {
		c.err = fmt.Errorf("capture: %w", err)
		return
	}
	c.n++
	if !c.pending {
		c.pending = true
		select {
		case c.dirty <- struct{}{}:
		default:
		}
	}
}

// flush writes out what is buffered; a capture is flushed within a second
// of its first unflushed frame while the daemon runs, so the file can be
// read during a run.
func (c *capture) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = false
	if c.err == nil {
		if err := c.flushf(); err != nil {
			c.err = fmt.Errorf("capture: %w", err)
		}
	}
	return c.err
}

// frames returns how many frames were written.
func (c *capture) frames() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

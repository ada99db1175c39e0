package link

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// captureTap writes the frames crossing a pair to a pcap file. The data
// path never sees its errors: the first one stops the capture and is
// returned by Close.
type captureTap struct {
	epoch time.Time

	mu  sync.Mutex
	bw  *bufio.Writer  // guarded by mu
	w   *pcapgo.Writer // guarded by mu
	err error          // guarded by mu
}

// captureSnaplen is the pcap header's snapshot length: every frame is
// written whole.
const captureSnaplen = BufferSize

func newCaptureTap(w io.Writer, epoch time.Time) (*captureTap, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	pw := pcapgo.NewWriterNanos(bw)
	if err := pw.WriteFileHeader(captureSnaplen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("link: capture: %w", err)
	}
	return &captureTap{epoch: epoch, bw: bw, w: pw}, nil
}

// write records frame as seen at clock time now.
func (t *captureTap) write(now time.Duration, frame []byte) {
	ci := gopacket.CaptureInfo{
		Timestamp:     t.epoch.Add(now),
		CaptureLength: len(frame),
		Length:        len(frame),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	if err := t.w.WritePacket(ci, frame); err != nil {
		t.err = fmt.Errorf("link: capture: %w", err)
	}
}

// flush writes out what is buffered and returns the capture's first error.
func (t *captureTap) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		if err := t.bw.Flush(); err != nil {
			t.err = fmt.Errorf("link: capture: %w", err)
		}
	}
	return t.err
}

//go:build uverbs_engine

// The data-path test wires the data plane (emu/engine), which is built
// elsewhere and may be mid-change: it only builds with -tags
// uverbs_engine, so the package's own tests never depend on it.
//
//	go test -tags uverbs_engine -run TestE2EPingpongData ./uverbs/

package uverbs_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/emu/engine"
	"github.com/irdma-emu/irdma-emu/emu/link"
	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// loopLink is a link whose sent frames come back to the same port, in
// order, from one goroutine: both QPs of the test live on one device.
type loopLink struct {
	r    atomic.Pointer[link.Receiver]
	ch   chan []*link.Packet
	pool *link.Pool
	mac  wire.MAC
	done chan struct{}
}

func newLoopLink(mac net.HardwareAddr) *loopLink {
	l := &loopLink{ch: make(chan []*link.Packet, 1024), pool: link.NewPool(link.DefaultPoolSize), done: make(chan struct{})}
	copy(l.mac[:], mac)
	go func() {
		defer close(l.done)
		for b := range l.ch {
			if r := l.r.Load(); r != nil {
				(*r).Receive(b)
				continue
			}
			for _, p := range b {
				p.Release()
			}
		}
	}()
	return l
}

func (l *loopLink) Send(pkts []*link.Packet) error {
	b := append([]*link.Packet(nil), pkts...)
	l.ch <- b
	return nil
}
func (l *loopLink) Attach(r link.Receiver) {
	if r == nil {
		l.r.Store(nil)
		return
	}
	l.r.Store(&r)
}
func (l *loopLink) State() link.State { return link.StateUp }
func (l *loopLink) MTU() int          { return 1500 }
func (l *loopLink) MAC() wire.MAC     { return l.mac }
func (l *loopLink) BatchSize() int    { return link.DefaultBatchSize }
func (l *loopLink) Pool() *link.Pool  { return l.pool }
func (l *loopLink) Stats() link.Stats { return link.Stats{} }
func (l *loopLink) Close() error      { close(l.ch); <-l.done; return nil }

// TestE2EPingpongData runs ibv_rc_pingpong, ibv_ud_pingpong (polling,
// completion events, payload checks) and perftest's ib_write_bw and
// ib_send_lat end to end: the data plane
// polls the contexts' doorbell pages (Provider.Poll as a DoorbellSource)
// and scans the user rings.
func TestE2EPingpongData(t *testing.T) {
	dm := startDaemon(t)
	e, err := engine.New(dm.dev, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLoopLink(net.HardwareAddr{0x02, 0xfc, 0x00, 0x00, 0x00, 0x01})
	if err := e.AttachLink(l); err != nil {
		t.Fatal(err)
	}
	dm.dp.set(e)
	e.AddDoorbellSource(dm.p)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		e.Close()
		l.Close()
	}()
	pp := []string{"-d", "irdma0", "-g", "1", "-n", "100"}
	pt := []string{"-d", "irdma0", "-x", "1", "-n", "200", "-F"}
	for _, tc := range []struct {
		name, tool string
		args       []string
		want       string // in the client's output
	}{
		{"rc-poll", "ibv_rc_pingpong", pp, "100 iters"},
		{"rc-events", "ibv_rc_pingpong", append([]string{"-e"}, pp...), "100 iters"},
		{"rc-check", "ibv_rc_pingpong", append([]string{"-c", "-s", "8192"}, pp...), "100 iters"},
		{"ud", "ibv_ud_pingpong", append([]string{"-s", "1024"}, pp...), "100 iters"},
		{"ud-events", "ibv_ud_pingpong", append([]string{"-s", "1024", "-e"}, pp...), "100 iters"},
		{"write-bw", "ib_write_bw", append([]string{"-s", "65536"}, pt...), "65536      200"},
		// ib_send_lat defaults to 236 bytes inline; the E810 takes 101
		// (libirdma refuses the QP itself, as on hardware).
		{"send-lat", "ib_send_lat", append([]string{"-s", "64", "-I", "64"}, pt...), "t_avg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := needTool(t, tc.tool)
			port := fmt.Sprint(freePort(t))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"-p", port}, tc.args...)
			var sout bytes.Buffer
			srv := dm.cmd(ctx, tool, args...)
			srv.Stdout, srv.Stderr = &sout, &sout
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			_, cout, cdone := startClient(t, ctx, dm, tool, append(args, "127.0.0.1"))
			cerr := <-cdone
			serr := srv.Wait()
			t.Logf("server: %v\n%s", serr, sout.String())
			t.Logf("client: %v\n%s", cerr, cout.String())
			if cerr != nil || serr != nil {
				t.Fatalf("%s failed: client %v, server %v", tc.tool, cerr, serr)
			}
			if !strings.Contains(cout.String(), tc.want) {
				t.Errorf("client output lacks %q", tc.want)
			}
		})
	}
}

package uverbs

import (
	"errors"
	"math/bits"
	"os"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
)

// The post notification (docs/attach.md "NOTIFY", docs/dataplane.md "Idle
// and wake-up on post"). The doorbell page is shared memory: a program's
// store into it is not trapped, so a parked engine would never see it. A
// context that asked NOTIFY gets an eventfd and a notify page; the engine
// publishes in the page whether it polls (Provider.Park and Unpark), and
// the program, after its post and a full fence, writes the eventfd only
// when the page says parked. A goroutine per context reads the eventfd
// through the netpoller and rings the context's QPs, which wakes their
// workers.

// Notify page layout.
const (
	notifyPollingOff  = 0   // u32: 1 while the engine polls, 0 parked (daemon writes)
	notifyCountersOff = 64  // u64 notified, u64 suppressed (the program writes), a cache line of their own
	notifyQPBitsOff   = 128 // u64 words to the page's end: a bit per QP id, modulo notifyQPBits (both write)
	notifyQPBits      = 8 * (attach.NotifyPageSize - notifyQPBitsOff)
)

// notifier is one context's notification channel.
type notifier struct {
	efd  *os.File // the daemon's end of the eventfd: non-blocking, in the netpoller
	page *os.File // the notify page's memfd
	mem  []byte   // its mapping
	done chan struct{}
	// dead is set when the reader stopped on its own (an error no retry
	// fixes): the context is polled with backoff from then on (Park).
	dead atomic.Bool
	// named is set while the client names the QPs it notifies in the
	// page's QP bits (attach.NotifyQPBits, as the last NOTIFY asked).
	named atomic.Bool
}

func newNotifier() (*notifier, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	page, mem, err := newSharedPage("irdma-emu-notify")
	if err != nil {
		unix.Close(efd)
		return nil, err
	}
	// A non-blocking descriptor becomes a pollable os.File: Read parks in
	// the netpoller, no thread blocks in read(2).
	return &notifier{efd: os.NewFile(uintptr(efd), "irdma-emu-notify-eventfd"), page: page, mem: mem,
		done: make(chan struct{})}, nil
}

func (n *notifier) word32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&n.mem[off])) }
func (n *notifier) word64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&n.mem[off])) }

// setPolling publishes the engine's state. The store is sequentially
// consistent (XCHG on amd64): the poll that follows a Park reads the
// doorbell words after it, which is the engine's half of the fence pair.
func (n *notifier) setPolling(polling bool) {
	v := uint32(0)
	if polling {
		v = 1
	}
	atomic.StoreUint32(n.word32(notifyPollingOff), v)
}

// counters reads what the program counted: posts it notified, posts that
// needed no notification.
func (n *notifier) counters() (notified, suppressed uint64) {
	return atomic.LoadUint64(n.word64(notifyCountersOff)), atomic.LoadUint64(n.word64(notifyCountersOff + 8))
}

// Notify implements attach.Notifier. A client that asks attach.NotifyQPBits
// gets the page's QP bits; the flags of the last NOTIFY hold.
func (s *Session) Notify(req attach.NotifyRequest) (attach.NotifyGrant, error) {
	p := s.p
	if s.closed {
		return attach.NotifyGrant{}, eIO
	}
	if p.cfg.DataPlane == nil {
		return attach.NotifyGrant{}, eOPNOTSUPP
	}
	if s.ntf.Load() == nil {
		n, err := newNotifier()
		if err != nil {
			s.log.Warn("uverbs: NOTIFY", zap.Error(err))
			return attach.NotifyGrant{}, eNOMEM
		}
		p.nmu.Lock()
		n.setPolling(!p.parked)
		s.ntf.Store(n)
		p.notifiers[s] = n
		p.nmu.Unlock()
		go s.readNotify(n)
	}
	n := s.ntf.Load()
	named := req.Flags&attach.NotifyQPBits != 0
	n.named.Store(named)
	e, err := attach.DupFile(n.efd)
	if err != nil {
		return attach.NotifyGrant{}, eMFILE
	}
	f, err := attach.DupFile(n.page)
	if err != nil {
		e.Close()
		return attach.NotifyGrant{}, eMFILE
	}
	g := attach.NotifyGrant{EventFD: e, Page: f, PollingOff: notifyPollingOff, CountersOff: notifyCountersOff}
	if named {
		g.Flags, g.QPBitsOff, g.QPBits = attach.NotifyQPBits, notifyQPBitsOff, notifyQPBits
	}
	return g, nil
}

// readNotify is the context's notification reader: every read of the
// eventfd (one or more coalesced notifications) notifies the QPs named in
// the page's QP bits, or, for a client that names none, all the context's
// QPs — as the SQ doorbell word names only the last ringer
// (Provider.Poll). The data plane wakes those with a WQE at their SQ fetch
// index, running them on this goroutine when their worker is parked
// (engine.Engine.Notify). Whatever the program writes — any count, any
// bits, from any thread, or nothing after closing its copy — costs at most
// a look at each of the context's QPs: a bit rings only a QP of this
// context.
func (s *Session) readNotify(n *notifier) {
	defer close(n.done)
	p := s.p
	var b [8]byte
	for {
		k, err := n.efd.Read(b[:])
		if err != nil {
			if !errors.Is(err, os.ErrClosed) && !s.closing.Load() {
				// Not our Close: give the context back to the backoff
				// poll rather than leave its posts unseen.
				s.log.Warn("uverbs: notification eventfd", zap.Error(err))
				n.dead.Store(true)
				p.cfg.DataPlane.Kick()
			}
			return
		}
		if k != len(b) || s.closing.Load() {
			continue
		}
		p.notifyWakeups.Add(1)
		qps := *s.qpIDs.Load()
		if !n.named.Load() {
			for id := range qps {
				p.cfg.DataPlane.Notify(id)
			}
			continue
		}
		// The client set its QP's bit before it wrote the eventfd, so the
		// bit is set by now. A post that finds its QP's bit set writes no
		// eventfd (docs/attach.md), so the bits stay set while their QPs
		// run: the posts a program makes meanwhile are taken up by that
		// run or the next without a notification each. Then they are
		// cleared, and each QP is rung once more for what was posted
		// between its run and the clear (Notify passes over a QP with
		// nothing posted); a post after that finds its bit clear and
		// writes the eventfd, read next.
		hi := s.qpHi.Load()
		for w := range notifyQPBits / 64 {
			word := n.word64(notifyQPBitsOff + 8*w)
			v := atomic.LoadUint64(word)
			if v == 0 {
				continue
			}
			s.ringBits(w, v, hi, qps, true)
			atomic.AndUint64(word, ^v)
			s.ringBits(w, v, hi, qps, false)
		}
	}
}

// ringBits rings the QPs of this context that the bits v of notify word w
// name (a bit names every QP id that is its index modulo notifyQPBits, up
// to hi), counting them when first.
func (s *Session) ringBits(w int, v uint64, hi uint32, qps map[uint32]*driver.QP, first bool) {
	p := s.p
	for ; v != 0; v &= v - 1 {
		for id := uint32(64*w + bits.TrailingZeros64(v)); id <= hi; id += notifyQPBits {
			if _, ok := qps[id]; ok {
				if first {
					p.notifyNamed.Add(1)
				}
				p.cfg.DataPlane.Notify(id)
			}
		}
	}
}

// stopNotify ends the context's notification: off the provider's list
// (Park and Unpark no longer write its page), the reader stopped, the
// page unmapped; its counters go to the provider's totals.
func (s *Session) stopNotify() {
	n := s.ntf.Load()
	if n == nil {
		return
	}
	p := s.p
	p.nmu.Lock()
	delete(p.notifiers, s)
	a, b := n.counters()
	p.notifiedGone += a
	p.suppressedGone += b
	p.nmu.Unlock()
	n.efd.Close()
	<-n.done
	s.ntf.Store(nil)
	_ = unix.Munmap(n.mem)
	n.mem = nil
	n.page.Close()
}

// newSharedPage creates a sealed one-page memfd and maps it.
func newSharedPage(name string) (*os.File, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.Ftruncate(fd, pageSize); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	// Neither side may shrink it under the other's mapping.
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	mem, err := unix.Mmap(fd, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), name), mem, nil
}

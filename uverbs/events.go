package uverbs

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// An eventFile is one of the kernel's uverbs event files
// (uverbs_main.c: the async event file of GET_CONTEXT, a completion
// channel of CREATE_COMP_CHANNEL) made of a pipe: the program reads fixed
// records from the read end it was passed (struct ib_uverbs_comp_event_desc,
// 8 bytes, or struct ib_uverbs_async_event_desc, 16 bytes), and poll()
// says readable while one is pending, exactly as on the kernel's file.
//
// The kernel counts an event for its object (comp_events_reported,
// async_events_reported, events_reported) when the program reads it
// (ib_uverbs_event_read: ++(*event->counter)), and drops the unread
// events of an object it destroys (ib_uverbs_release_ucq,
// ib_uverbs_release_uevent). libibverbs' destroy waits until the program
// has acknowledged as many events as the destroy response reports, so the
// count must be exactly the events read. The daemon cannot see the
// program's read(), but a pipe is FIFO and the daemon knows what it wrote:
// the records still unread are the last FIONREAD (TIOCINQ)/size of those written, so
// every record before them has been read. settle credits those. To drop
// an object's unread records, purge drains the pipe through its own
// non-blocking open of the read end and writes the others back in order.
type eventFile struct {
	mu      sync.Mutex
	recSize int
	w       int // write end, O_NONBLOCK, the daemon's alone
	r       int // the daemon's own O_NONBLOCK open of the read end; -1 if none
	rdup    bool
	queue   []pending // written, oldest first, not yet known to be read
	closed  bool
	dropped atomic.Uint64
}

type pending struct {
	cnt *eventCounter
	rec [16]byte
}

// eventCounter counts the events of one object the program has read.
type eventCounter struct{ n atomic.Uint32 }

// pipeSize is the pipe's capacity (F_SETPIPE_SZ; unprivileged processes
// may go up to /proc/sys/fs/pipe-max-size, 1 MiB by default): 32768
// completion events or 16384 asynchronous ones may wait unread.
const pipeSize = 256 << 10

// newEventFile creates an event file of recSize-byte records and returns
// the read end to pass to the program.
func newEventFile(recSize int, name string) (*eventFile, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	rd, w := p[0], p[1]
	if err := unix.SetNonblock(w, true); err != nil {
		unix.Close(rd)
		unix.Close(w)
		return nil, nil, err
	}
	_, _ = unix.FcntlInt(uintptr(w), unix.F_SETPIPE_SZ, pipeSize)
	ef := &eventFile{recSize: recSize, w: w, r: -1}
	// A new open of the pipe through /proc is a separate open file
	// description: the daemon may read it non-blocking without touching
	// the flags of the program's descriptor.
	if r, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", rd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		ef.r = r
	} else if r, err := unix.FcntlInt(uintptr(rd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		// Without /proc: FIONREAD still works on a duplicate, purging
		// does not (it would have to read with the program's flags).
		ef.r, ef.rdup = r, true
	}
	return ef, os.NewFile(uintptr(rd), name), nil
}

// unreadLocked is the number of records still in the pipe.
func (ef *eventFile) unreadLocked() int {
	if ef.r < 0 {
		return len(ef.queue)
	}
	n, err := unix.IoctlGetInt(ef.r, unix.TIOCINQ)
	if err != nil || n < 0 {
		return len(ef.queue)
	}
	return (n + ef.recSize - 1) / ef.recSize
}

// settleLocked credits the records the program has read.
func (ef *eventFile) settleLocked() {
	read := len(ef.queue) - ef.unreadLocked()
	if read <= 0 {
		return
	}
	for _, p := range ef.queue[:read] {
		if p.cnt != nil {
			p.cnt.n.Add(1)
		}
	}
	ef.queue = append(ef.queue[:0:0], ef.queue[read:]...)
}

// push queues one record for cnt's object (nil: not counted, a port
// event). It never blocks: with the pipe full the event is lost, as the
// kernel loses one when its GFP_ATOMIC allocation fails.
func (ef *eventFile) push(cnt *eventCounter, rec []byte) bool {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	if ef.closed {
		return false
	}
	ef.settleLocked()
	var p pending
	p.cnt = cnt
	copy(p.rec[:], rec)
	n, err := unix.Write(ef.w, p.rec[:ef.recSize])
	if err != nil || n != ef.recSize {
		ef.dropped.Add(1)
		return false
	}
	ef.queue = append(ef.queue, p)
	return true
}

// reported returns how many of cnt's events the program has read.
func (ef *eventFile) reported(cnt *eventCounter) uint32 {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	if !ef.closed {
		ef.settleLocked()
	}
	return cnt.n.Load()
}

// purge drops cnt's unread records from the pipe, keeping the others in
// order, and returns how many of cnt's events the program had read.
func (ef *eventFile) purge(cnt *eventCounter) uint32 {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	if ef.closed {
		return cnt.n.Load()
	}
	ef.settleLocked()
	mine := false
	for _, p := range ef.queue {
		mine = mine || p.cnt == cnt
	}
	if !mine || ef.r < 0 || ef.rdup {
		return cnt.n.Load()
	}
	buf := make([]byte, len(ef.queue)*ef.recSize+ef.recSize)
	got := 0
	for got < len(buf) {
		n, err := unix.Read(ef.r, buf[got:])
		if n <= 0 || err != nil {
			break
		}
		got += n
	}
	k := min(got/ef.recSize, len(ef.queue))
	// The records before the k drained were read by the program meanwhile.
	for _, p := range ef.queue[:len(ef.queue)-k] {
		if p.cnt != nil {
			p.cnt.n.Add(1)
		}
	}
	var keep []pending
	for _, p := range ef.queue[len(ef.queue)-k:] {
		if p.cnt == cnt {
			continue
		}
		if n, err := unix.Write(ef.w, p.rec[:ef.recSize]); err != nil || n != ef.recSize {
			ef.dropped.Add(1)
			continue
		}
		keep = append(keep, p)
	}
	ef.queue = keep
	return cnt.n.Load()
}

// close releases the daemon's ends; the program keeps its own.
func (ef *eventFile) close() {
	ef.mu.Lock()
	defer ef.mu.Unlock()
	if ef.closed {
		return
	}
	ef.closed = true
	unix.Close(ef.w)
	if ef.r >= 0 {
		unix.Close(ef.r)
	}
	ef.queue = nil
}

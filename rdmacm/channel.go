package rdmacm

import (
	"os"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/cm"
)

// Channel is one open of /dev/infiniband/rdma_cm (the kernel's struct
// ucma_file): its ids and its queue of events. It is an attach.Session.
//
// Readiness: the program's descriptor is the read end of a pipe whose
// write end the daemon holds. The daemon keeps exactly one byte in the
// pipe while events are queued and none otherwise, so poll, epoll and
// select on the program's descriptor report POLLIN exactly as ucma_poll
// does, with no interposition. GET_EVENT never blocks in the daemon
// (EAGAIN when the queue is empty); the preload waits on the descriptor
// and asks again (docs/cm.md "The channel").
type Channel struct {
	p     *Provider
	token uint32
	pid   int32
	mem   *os.File // the program's /proc/self/mem, or nil

	pr, pw *os.File // the readiness pipe (daemon's ends)

	// Under p.mu:
	ids       map[uint32]*cmID
	events    []*event
	signalled bool // the pipe holds its byte
	granted   bool // CmdChannel answered
	closed    bool
}

var _ attach.Session = (*Channel)(nil)

// event is one queued rdma_ucm_event_resp.
type event struct {
	id     *cmID  // the id it is reported on (the listener for CONNECT_REQUEST)
	mc     *mcast // for MULTICAST_JOIN/ERROR
	newID  *cmID  // CONNECT_REQUEST: the id the request created
	typ    uint32
	status int32
	// param is the conn or ud param, already in ABI layout.
	param [sizeUDParam]byte
}

// queue appends an event and makes the descriptor readable; p.mu held.
func (ch *Channel) queue(ev *event) {
	if ch.closed {
		return
	}
	ch.events = append(ch.events, ev)
	if !ch.signalled {
		if _, err := unix.Write(int(ch.pw.Fd()), []byte{1}); err == nil {
			ch.signalled = true
		}
	}
}

// unsignal drains the pipe's byte once the queue is empty; p.mu held. The
// byte is read only when poll says it is there, so a program that read
// it behind our back (a raw read system call) cannot block the daemon.
func (ch *Channel) unsignal() {
	if len(ch.events) != 0 || !ch.signalled {
		return
	}
	ch.signalled = false
	fds := []unix.PollFd{{Fd: int32(ch.pr.Fd()), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0 {
		var b [16]byte
		_, _ = unix.Read(int(ch.pr.Fd()), b[:])
	}
}

// removeEvents drops the queued events of id (and, when mc is not nil,
// only those of mc); p.mu held. It returns the ids of dropped
// CONNECT_REQUESTs, whose CM ids the caller destroys.
func (ch *Channel) removeEvents(id *cmID, mc *mcast) []*cmID {
	var orphans []*cmID
	kept := ch.events[:0]
	for _, ev := range ch.events {
		drop := (mc == nil && ev.id == id) || (mc != nil && ev.mc == mc)
		if !drop {
			kept = append(kept, ev)
			continue
		}
		if ev.newID != nil {
			orphans = append(orphans, ev.newID)
		}
	}
	for i := len(kept); i < len(ch.events); i++ {
		ch.events[i] = nil
	}
	ch.events = kept
	ch.unsignal()
	return orphans
}

func (ch *Channel) closeFiles() {
	ch.pr.Close()
	ch.pw.Close()
	if ch.mem != nil {
		ch.mem.Close()
	}
}

// Mmap implements attach.Session: the rdma_cm device has no mmap.
func (ch *Channel) Mmap(attach.MmapRequest) (*os.File, uint64, error) {
	return nil, 0, syscall.ENODEV
}

// Mem implements attach.Session: not used by the rdma_cm device.
func (ch *Channel) Mem(_ attach.MemRequest, memfd *os.File) error {
	memfd.Close()
	return syscall.EINVAL
}

// Close implements attach.Session: the last close of the file destroys
// every id of the channel (ucma_close), which sends REJ or DREQ for
// connections in progress.
func (ch *Channel) Close() {
	p := ch.p
	p.mu.Lock()
	ch.closed = true
	var destroy []*cm.ID
	for _, id := range ch.ids {
		destroy = append(destroy, p.destroyLocked(id)...)
	}
	for _, ev := range ch.events {
		if ev.newID != nil {
			destroy = append(destroy, p.releaseLocked(ev.newID)...)
		}
	}
	ch.events = nil
	delete(p.channels, ch.token)
	p.mu.Unlock()
	for _, c := range destroy {
		c.Destroy()
	}
	p.dropUnusedListens()
	ch.closeFiles()
	p.log.Debug("rdma_cm channel closed", zap.Uint32("token", ch.token))
}

// Command implements attach.Session: one write() on the rdma_cm device.
func (ch *Channel) Command(b []byte) attach.CmdReply {
	if len(b) < HdrSize {
		return fail(syscall.EINVAL)
	}
	cmd := le.Uint32(b)
	in := int(le.Uint16(b[4:]))
	out := int(le.Uint16(b[6:]))
	if cmd == CmdChannel {
		return ch.grant()
	}
	// ucma_write: the command number, then in against the write's length,
	// then a command without a handler.
	if cmd >= numCmds {
		return fail(syscall.EINVAL)
	}
	if in+HdrSize > len(b) {
		return fail(syscall.EINVAL)
	}
	if cmd == CmdGetOption {
		return fail(syscall.ENOSYS)
	}
	// The kernel copies sizeof(struct) from the program whatever in says;
	// we have the write's bytes only, and read what lies past them as
	// zeros.
	body := b[HdrSize:]
	r := ch.dispatch(cmd, body, out)
	if r.err != nil {
		return fail(r.err)
	}
	rep := attach.CmdReply{Status: int32(len(b))}
	if r.resp != nil && r.respAddr != 0 {
		if ch.mem != nil {
			// copy_to_user: written here so that a bad response address
			// is EFAULT with the command undone, as the kernel does it.
			if _, err := ch.mem.WriteAt(r.resp, int64(r.respAddr)); err != nil {
				if r.undo != nil {
					r.undo()
				}
				return fail(syscall.EFAULT)
			}
		} else {
			rep.RespAddr, rep.Resp = r.respAddr, r.resp
		}
	}
	return rep
}

// result is a command's outcome.
type result struct {
	err      error
	respAddr uint64
	resp     []byte
	undo     func() // undoes the command when the response cannot be written
}

func fail(err error) attach.CmdReply {
	return attach.CmdReply{Status: attach.Errno(err)}
}

// grant answers CmdChannel: the readiness descriptor and the channel's
// token (which the preload substitutes for descriptor numbers in
// MIGRATE_ID). Response: u32 token, s32 fd (patched by the client).
func (ch *Channel) grant() attach.CmdReply {
	ch.p.mu.Lock()
	again := ch.granted
	ch.granted = true
	ch.p.mu.Unlock()
	if again {
		return fail(syscall.EINVAL)
	}
	fd, err := unix.FcntlInt(ch.pr.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fail(syscall.EMFILE)
	}
	resp := make([]byte, 8)
	le.PutUint32(resp, ch.token)
	return attach.CmdReply{Status: HdrSize, RespAddr: 1, Resp: resp,
		FDs: []attach.FD{{File: os.NewFile(uintptr(fd), "rdma_cm-ready"), Offset: 4}}}
}

// readUser reads n bytes of the program's memory at addr (copy_from_user
// of SET_OPTION's optval).
func (ch *Channel) readUser(addr uint64, n int) ([]byte, error) {
	if ch.mem == nil {
		return nil, syscall.EFAULT
	}
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if _, err := ch.mem.ReadAt(b, int64(addr)); err != nil {
		return nil, syscall.EFAULT
	}
	return b, nil
}

// WRITE_CM_EVENT ---------------------------------------------------------

// cmdWriteCMEvent is ucma_write_cm_event: a program queues an event of
// its own on one of its ids, USER (rdma_write_cm_event) or INTERNAL
// (librdmacm's rdma_resolve_addrinfo reports ADDRINFO_RESOLVED so), with
// the status and the 64-bit argument it gives, which GET_EVENT returns in
// the param's first 8 bytes. Any other event type is EINVAL, before the
// id is looked up.
func (p *Provider) cmdWriteCMEvent(ch *Channel, handle, typ uint32, status int32, arg uint64) result {
	if typ != EventUser && typ != EventInternal {
		return result{err: syscall.EINVAL}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.lookup(ch, handle)
	if err != nil {
		return result{err: err}
	}
	ev := &event{id: id, typ: typ, status: status}
	le.PutUint64(ev.param[:], arg)
	ch.queue(ev)
	return result{}
}

package uverbs_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/cq"
)

// waitRecord reads one record of n bytes from an event descriptor, or
// fails after a timeout.
func waitRecord(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	fd := int(f.Fd())
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if k, err := unix.Poll(pfd, 5000); err != nil || k != 1 {
		t.Fatalf("no event within 5 s (%v)", err)
	}
	b := make([]byte, n)
	if got, err := unix.Read(fd, b); err != nil || got != n {
		t.Fatalf("read event: %d bytes, %v", got, err)
	}
	return b
}

// pending returns the bytes waiting unread in an event descriptor.
func pending(t *testing.T, f *os.File) int {
	t.Helper()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually waits for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// ctxWithCQ sets up a context, a PD (handle 0), the CQ registrations
// (handles 1, 2) and optionally a channel, and returns the client, the
// arena, the async descriptor and the channel descriptor.
func ctxWithCQ(t *testing.T, e *env) (*client, *arena, *os.File) {
	c := e.open(t)
	r := c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	async := r.fds[0].File
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	a := c.arena(arenaSize)
	c.ok(c.raw(regMRCmd(a.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ ring")
	c.ok(c.raw(regMRCmd(a.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ shadow")
	return c, a, async
}

func reqNotifyCmd(cq uint32, solicited uint32) []byte {
	b := make([]byte, 8)
	le.PutUint32(b, cq)
	le.PutUint32(b[4:], solicited)
	return legacy(23, 0, b)
}

// TestCompletionEvents: completion events reach the CQ's channel as
// ib_uverbs_comp_event_desc records; DESTROY_CQ reports the events the
// program read and drops the ones it did not.
func TestCompletionEvents(t *testing.T) {
	e := newEnv(t)
	c, a, _ := ctxWithCQ(t, e)
	r := c.ok(c.raw(compChannelCmd()), "CREATE_COMP_CHANNEL")
	ch := r.fds[0].File
	r = c.ok(c.raw(createCQCmd(0x1122334455667788, 64, 0, int32(ch.Fd()), a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
	cqh, cqID := u32(r.resp, 0), u32(r.resp, 8)
	dcq := e.dev.CQs().Get(cqID)

	post := func() {
		t.Helper()
		if err := dcq.Post(&cq.CQE{PayloadLen: 64, QPCtx: 0xabc, SQ: true}); err != nil {
			t.Fatalf("post CQE: %v", err)
		}
	}
	// Arm through the kernel command (the shadow area's arm word), then a
	// CQE: one event.
	c.ok(c.raw(reqNotifyCmd(cqh, 0)), "REQ_NOTIFY_CQ")
	if v := le.Uint64(a.mem[offCQShadow+32:]); v&(1<<14) == 0 || v&(1<<15) == 0 || v>>16&3 != 1 {
		t.Fatalf("shadow arm word %#x after REQ_NOTIFY_CQ", v)
	}
	post()
	rec := waitRecord(t, ch, 8)
	if got := le.Uint64(rec); got != 0x1122334455667788 {
		t.Fatalf("comp event cq_handle %#x", got)
	}
	// Not armed: a CQE raises nothing.
	post()
	time.Sleep(50 * time.Millisecond)
	if n := pending(t, ch); n != 0 {
		t.Fatalf("%d bytes pending on the channel without an arm", n)
	}
	// Armed again: a second event, left unread.
	c.ok(c.raw(reqNotifyCmd(cqh, 0)), "REQ_NOTIFY_CQ")
	post()
	eventually(t, "the second event", func() bool { return pending(t, ch) == 8 })

	r = c.ok(c.raw(destroyCmd(20, cqh, 8)), "DESTROY_CQ")
	if comp, async := u32(r.resp, 0), u32(r.resp, 4); comp != 1 || async != 0 {
		t.Errorf("DESTROY_CQ reported %d completion, %d async events; want 1 (read), 0", comp, async)
	}
	if n := pending(t, ch); n != 0 {
		t.Errorf("the destroyed CQ's unread event is still in the channel (%d bytes)", n)
	}
}

// TestCompletionEventsOrderKept: dropping one CQ's unread events keeps
// another CQ's on the same channel, in order.
func TestCompletionEventsOrderKept(t *testing.T) {
	e := newEnv(t)
	c, a, _ := ctxWithCQ(t, e)
	c.ok(c.raw(regMRCmd(a.addr+0x10000, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ2 ring")
	c.ok(c.raw(regMRCmd(a.addr+0x13000, 64, 0, 1, 2, 1, 0, 0)), "REG_MR CQ2 shadow")
	r := c.ok(c.raw(compChannelCmd()), "CREATE_COMP_CHANNEL")
	ch := r.fds[0].File
	r = c.ok(c.raw(createCQCmd(0xa1, 64, 0, int32(ch.Fd()), a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ 1")
	h1, id1 := u32(r.resp, 0), u32(r.resp, 8)
	r = c.ok(c.raw(createCQCmd(0xb2, 64, 0, int32(ch.Fd()), a.addr+0x10000, a.addr+0x13000)), "CREATE_CQ 2")
	h2, id2 := u32(r.resp, 0), u32(r.resp, 8)
	fire := func(h, id uint32, want int) {
		c.ok(c.raw(reqNotifyCmd(h, 0)), "REQ_NOTIFY_CQ")
		if err := e.dev.CQs().Get(id).Post(&cq.CQE{QPCtx: 1}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "an event", func() bool { return pending(t, ch) == want })
	}
	fire(h2, id2, 8)
	fire(h1, id1, 16)
	fire(h2, id2, 24)
	r = c.ok(c.raw(destroyCmd(20, h1, 8)), "DESTROY_CQ 1")
	if u32(r.resp, 0) != 0 {
		t.Errorf("CQ 1 reported %d events read", u32(r.resp, 0))
	}
	for range 2 {
		if got := le.Uint64(waitRecord(t, ch, 8)); got != 0xb2 {
			t.Errorf("after dropping CQ 1's event: got an event for %#x", got)
		}
	}
	r = c.ok(c.raw(destroyCmd(20, h2, 8)), "DESTROY_CQ 2")
	if u32(r.resp, 0) != 2 {
		t.Errorf("CQ 2 reported %d events read, want 2", u32(r.resp, 0))
	}
}

// qpOnCQ creates a QP (RC or UD) on CQ handle cqh with rings at off.
func qpOnCQ(t *testing.T, c *client, a *arena, cqh uint32, off uint64, userHandle uint64, qpType uint8) (uint32, uint32) {
	t.Helper()
	c.ok(c.raw(regMRCmd(a.addr+off, 32768+64, 0, 1, 1, 0, 4, 4)), "REG_MR QP")
	r := c.ok(c.raw(createQPCmd(userHandle, 0, cqh, cqh, 256, 512, 1, 1, 0, qpType, a.addr+off, 1)), "CREATE_QP")
	return u32(r.resp, 0), u32(r.resp, 4)
}

// TestAsyncEvents: an AE that moves a QP to error raises IB_EVENT_QP_FATAL
// on the async file; DESTROY_QP reports the events read and drops the
// unread ones; port events reach every context.
func TestAsyncEvents(t *testing.T) {
	e := newEnv(t)
	c, a, async := ctxWithCQ(t, e)
	r := c.ok(c.raw(createCQCmd(7, 64, 0, -1, a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
	cqh, cqID := u32(r.resp, 0), u32(r.resp, 8)
	q1, qpn1 := qpOnCQ(t, c, a, cqh, offQP, 0x5151, 2)
	q2, qpn2 := qpOnCQ(t, c, a, cqh, 0x14000, 0x5252, 2)
	for _, h := range []uint32{q1, q2} {
		m := newModify(h, 1|1<<3|1<<4|1<<5)
		m[96], m[104] = 1, 1
		c.ok(c.raw(m.legacy()), "MODIFY_QP INIT")
	}
	ae := func(qpn uint32) {
		if err := e.dev.Events().PostAE(cq.AEQE{ID: qpn, Code: cq.AELLPTooManyRetries, Source: cq.AESourceSQ}); err != nil {
			t.Fatal(err)
		}
	}
	ae(qpn1)
	rec := waitRecord(t, async, 16)
	if el, typ := le.Uint64(rec), le.Uint32(rec[8:]); el != 0x5151 || typ != uint32(driver.EventQPFatal) ||
		le.Uint32(rec[12:]) != 0 {
		t.Fatalf("async event %x: want element 0x5151, QP_FATAL", rec)
	}
	ae(qpn2)
	eventually(t, "the second QP's event", func() bool { return pending(t, async) == 16 })

	r = c.ok(c.raw(destroyCmd(27, q1, 4)), "DESTROY_QP 1")
	if u32(r.resp, 0) != 1 {
		t.Errorf("DESTROY_QP 1 events_reported %d, want 1", u32(r.resp, 0))
	}
	r = c.ok(c.raw(destroyCmd(27, q2, 4)), "DESTROY_QP 2")
	if u32(r.resp, 0) != 0 {
		t.Errorf("DESTROY_QP 2 events_reported %d, want 0 (unread)", u32(r.resp, 0))
	}
	if n := pending(t, async); n != 0 {
		t.Errorf("the destroyed QP's unread event is still queued (%d bytes)", n)
	}

	// A CQ error (CQ overflow AE) is an IB_EVENT_CQ_ERR for the CQ.
	if err := e.dev.Events().PostAE(cq.AEQE{ID: cqID, Code: cq.AECQOperationError,
		Source: cq.AESourceCQ}); err != nil {
		t.Fatal(err)
	}
	rec = waitRecord(t, async, 16)
	if el, typ := le.Uint64(rec), le.Uint32(rec[8:]); el != 7 || typ != uint32(driver.EventCQErr) {
		t.Errorf("CQ event %x: want element 7 (the CQ's user_handle), CQ_ERR", rec)
	}
	r = c.ok(c.raw(destroyCmd(20, cqh, 8)), "DESTROY_CQ")
	if u32(r.resp, 4) != 1 {
		t.Errorf("DESTROY_CQ async_events_reported %d, want 1", u32(r.resp, 4))
	}

	// Port events go to every context, element = port 1.
	c2 := e.open(t)
	r = c2.ok(c2.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	async2 := r.fds[0].File
	e.p.PortEvent(driver.AsyncEvent{Type: driver.EventPortErr})
	for _, f := range []*os.File{async, async2} {
		rec := waitRecord(t, f, 16)
		if le.Uint64(rec) != 1 || le.Uint32(rec[8:]) != uint32(driver.EventPortErr) {
			t.Errorf("port event %x", rec)
		}
	}
}

// TestQuiesce: the device going away raises IB_EVENT_DEVICE_FATAL on
// every context; afterwards only destroys run, and nobody can open.
func TestQuiesce(t *testing.T) {
	e := newEnv(t)
	c := e.open(t)
	r := c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	async := r.fds[0].File
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	if err := e.p.Quiesce(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, async, 16)
	if le.Uint64(rec) != 0 || le.Uint32(rec[8:]) != 8 {
		t.Errorf("quiesce event %x: want element 0, IB_EVENT_DEVICE_FATAL", rec)
	}
	if r := c.raw(allocPDCmd()); r.errno() != syscall.EIO {
		t.Errorf("ALLOC_PD after quiesce: %v, want EIO", r.errno())
	}
	c.ok(c.raw(handleCmd(4, 0)), "DEALLOC_PD after quiesce")
	if _, _, err := e.p.Open(&attach.Peer{}); err != syscall.EIO {
		t.Errorf("open after quiesce: %v, want EIO", err)
	}
}

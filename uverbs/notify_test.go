package uverbs_test

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/uverbs"
)

// fakeDataPlane records what the provider asks of the engine.
type fakeDataPlane struct {
	rung  chan uint32
	kicks atomic.Int32
}

func (f *fakeDataPlane) Notify(qpid uint32)  { f.rung <- qpid }
func (f *fakeDataPlane) Kick()               { f.kicks.Add(1) }
func (f *fakeDataPlane) TakeUpPosted(uint32) {}

// ring waits for the next QP rung.
func (f *fakeDataPlane) ring(t *testing.T, what string) uint32 {
	t.Helper()
	select {
	case id := <-f.rung:
		return id
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no doorbell", what)
		return 0
	}
}

// notifyGrant asks NOTIFY of c's session and maps the page read-write, as
// the preload does (it counts its posts there).
func notifyGrant(t *testing.T, c *client) (*os.File, []byte) {
	t.Helper()
	return notifyGrantFlags(t, c, 0)
}

// notifyGrantFlags is notifyGrant asking NOTIFY with flags.
func notifyGrantFlags(t *testing.T, c *client, flags uint32) (*os.File, []byte) {
	t.Helper()
	g, err := c.s.(attach.Notifier).Notify(attach.NotifyRequest{Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Page.Close()
	want := attach.NotifyGrant{EventFD: g.EventFD, Page: g.Page, CountersOff: 64}
	if flags&attach.NotifyQPBits != 0 {
		want.Flags, want.QPBitsOff, want.QPBits = attach.NotifyQPBits, 128, 8*(4096-128)
	}
	if g != want {
		t.Fatalf("grant %+v, want %+v", g, want)
	}
	m, err := unix.Mmap(int(g.Page.Fd()), 0, attach.NotifyPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	c.fds = append(c.fds, g.EventFD)
	return g.EventFD, m
}

func polling(page []byte) uint32 { return atomic.LoadUint32((*uint32)(unsafe.Pointer(&page[0]))) }

func notifyWrite(t *testing.T, efd *os.File, v uint64) {
	t.Helper()
	var b [8]byte
	le.PutUint64(b[:], v)
	if _, err := unix.Write(int(efd.Fd()), b[:]); err != nil {
		t.Fatal(err)
	}
}

// TestNotify: a context that asked NOTIFY sees the engine's state in its
// page (parked until Unpark, polling until Park), a write of its eventfd
// rings every QP of the context, whatever count it carries, and neither a
// closed copy of the eventfd nor the context's end troubles the daemon;
// its counters are summed into the provider's. A context that did not ask
// is polled with backoff once it has a QP (Park answers true, and its
// first QP kicked the engine).
func TestNotify(t *testing.T) {
	dp := &fakeDataPlane{rung: make(chan uint32, 16)}
	e := newEnvWith(t, func(c *uverbs.Config) { c.DataPlane = dp })
	c, a, _ := ctxWithCQ(t, e)
	efd, page := notifyGrant(t, c)
	if polling(page) != 0 {
		t.Fatal("a new notify page says polling before any Unpark")
	}
	e.p.Unpark()
	if polling(page) != 1 {
		t.Fatal("Unpark not published")
	}
	if e.p.Park() {
		t.Fatal("Park asks for backoff with only a notifying context")
	}
	if polling(page) != 0 {
		t.Fatal("Park not published")
	}
	r := c.ok(c.raw(createCQCmd(7, 64, 0, -1, a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
	cqh := u32(r.resp, 0)
	_, qpn1 := qpOnCQ(t, c, a, cqh, offQP, 0x51, 2)
	_, qpn2 := qpOnCQ(t, c, a, cqh, 0x14000, 0x52, 2)
	if k := dp.kicks.Load(); k != 0 {
		t.Fatalf("a notifying context's QPs kicked the engine %d times", k)
	}
	// One write rings both QPs.
	notifyWrite(t, efd, 1)
	got := map[uint32]bool{dp.ring(t, "notification"): true, dp.ring(t, "notification"): true}
	if !got[qpn1] || !got[qpn2] {
		t.Fatalf("rung %v, want QPs %d and %d", got, qpn1, qpn2)
	}
	// Any count is a notification; the largest one the kernel takes too.
	notifyWrite(t, efd, 0xfffffffffffffffe)
	dp.ring(t, "a huge count")
	dp.ring(t, "a huge count")
	// A short write is refused by the eventfd itself.
	if _, err := unix.Write(int(efd.Fd()), []byte{1, 2, 3}); err != syscall.EINVAL {
		t.Fatalf("3-byte eventfd write: %v", err)
	}
	// The program closes its copy: NOTIFY again gives a working one.
	efd.Close()
	efd2, page2 := notifyGrant(t, c)
	notifyWrite(t, efd2, 1)
	dp.ring(t, "after a second NOTIFY")
	dp.ring(t, "after a second NOTIFY")
	// The program's counters.
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&page2[64])), 5)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&page2[72])), 7)
	st := e.p.Stats()
	if st.NotifyContexts != 1 || st.NotifyWakeups != 3 || st.Notified != 5 || st.Suppressed != 7 {
		t.Fatalf("stats %+v", st)
	}
	// A context without NOTIFY: its first QP kicks the engine, and Park
	// asks for backoff.
	l, la, _ := ctxWithCQ(t, e)
	r = l.ok(l.raw(createCQCmd(8, 64, 0, -1, la.addr+offCQ, la.addr+offCQShadow)), "CREATE_CQ")
	qpOnCQ(t, l, la, u32(r.resp, 0), offQP, 0x61, 2)
	if k := dp.kicks.Load(); k != 1 {
		t.Fatalf("%d kicks for a context that cannot notify", k)
	}
	if !e.p.Park() {
		t.Fatal("Park asks no backoff with a context that cannot notify")
	}
	l.close()
	if e.p.Park() {
		t.Fatal("backoff after the context that could not notify closed")
	}
	// The notifying context ends: its reader stops, its counts stay.
	c.close()
	st = e.p.Stats()
	if st.NotifyContexts != 0 || st.Notified != 5 || st.Suppressed != 7 {
		t.Fatalf("stats after close %+v", st)
	}
	select {
	case id := <-dp.rung:
		t.Fatalf("QP %d rung after the context closed", id)
	default:
	}
}

// TestNotifyNamed: a context that asked attach.NotifyQPBits has only the
// QPs whose bits it set rung, each bit cleared by the pass that rings it:
// rung while the bit is held (the program's posts meanwhile notify
// nothing), then once more after it is cleared, for what was posted in
// between (the engine passes over a QP with nothing posted, this fake does
// not); a bit of another context's QP, of no QP, or no bit at all rings
// nothing, and every bit set rings each of the context's QPs twice so. A
// NOTIFY without the flag brings back the ring of every QP, once.
func TestNotifyNamed(t *testing.T) {
	dp := &fakeDataPlane{rung: make(chan uint32, 16)}
	e := newEnvWith(t, func(c *uverbs.Config) { c.DataPlane = dp })
	c, a, _ := ctxWithCQ(t, e)
	efd, page := notifyGrantFlags(t, c, attach.NotifyQPBits)
	r := c.ok(c.raw(createCQCmd(7, 64, 0, -1, a.addr+offCQ, a.addr+offCQShadow)), "CREATE_CQ")
	cqh := u32(r.resp, 0)
	_, qpn1 := qpOnCQ(t, c, a, cqh, offQP, 0x51, 2)
	_, qpn2 := qpOnCQ(t, c, a, cqh, 0x14000, 0x52, 2)
	l, la, _ := ctxWithCQ(t, e)
	r = l.ok(l.raw(createCQCmd(8, 64, 0, -1, la.addr+offCQ, la.addr+offCQShadow)), "CREATE_CQ")
	_, other := qpOnCQ(t, l, la, u32(r.resp, 0), offQP, 0x61, 2)

	word := func(i uint32) *uint64 { return (*uint64)(unsafe.Pointer(&page[128+8*i])) }
	set := func(ids ...uint32) {
		for _, id := range ids {
			id %= 8 * (4096 - 128)
			atomic.OrUint64(word(id/64), 1<<(id%64))
		}
	}
	// next names want, notifies, and checks that it is the next QP rung:
	// whatever an earlier notification rang too would come first.
	next := func(what string, want uint32) {
		t.Helper()
		set(want)
		notifyWrite(t, efd, 1)
		for _, pass := range []string{"held", "cleared"} {
			if id := dp.ring(t, what); id != want {
				t.Fatalf("%s, bit %s: QP %d rung, want %d", what, pass, id, want)
			}
		}
	}
	next("QP 2 named", qpn2)
	next("QP 1 named", qpn1)
	for i := range uint32(8 * (4096 - 128) / 64) {
		if v := atomic.LoadUint64(word(i)); v != 0 {
			t.Fatalf("word %d still %#x after the passes", i, v)
		}
	}
	// Another context's QP, an id no QP has: nothing.
	set(other, 0x3ff)
	notifyWrite(t, efd, 1)
	next("after foreign bits", qpn2)
	// A write with no bit set: nothing.
	notifyWrite(t, efd, 1)
	next("after an empty notification", qpn1)
	// Every bit: each of the context's QPs once a pass.
	for i := range uint32(8 * (4096 - 128) / 64) {
		atomic.StoreUint64(word(i), ^uint64(0))
	}
	notifyWrite(t, efd, 1)
	got := map[uint32]int{}
	for range 4 {
		got[dp.ring(t, "every bit")]++
	}
	if got[qpn1] != 2 || got[qpn2] != 2 {
		t.Fatalf("every bit rang %v, want QPs %d and %d twice", got, qpn1, qpn2)
	}
	// The reader may still be clearing the words after the context's QPs;
	// it reads the next notification only once that pass is done.
	next("after every bit", qpn2)
	for i := range uint32(8 * (4096 - 128) / 64) {
		if v := atomic.LoadUint64(word(i)); v != 0 {
			t.Fatalf("word %d still %#x after every bit", i, v)
		}
	}
	// Writes close together coalesce into one read of the eventfd.
	if st := e.p.Stats(); st.NotifyNamed != 7 || st.NotifyWakeups < 6 || st.NotifyWakeups > 8 {
		t.Fatalf("stats %+v: want 7 QPs named in 6 to 8 wake-ups", st)
	}
	// NOTIFY without the flag: every QP again, whatever the bits say.
	efd, page = notifyGrantFlags(t, c, 0)
	notifyWrite(t, efd, 1)
	got = map[uint32]int{}
	got[dp.ring(t, "unnamed")]++
	got[dp.ring(t, "unnamed")]++
	if got[qpn1] != 1 || got[qpn2] != 1 {
		t.Fatalf("an unnamed notification rang %v, want QPs %d and %d", got, qpn1, qpn2)
	}
	select {
	case id := <-dp.rung:
		t.Fatalf("QP %d rung once too often", id)
	case <-time.After(50 * time.Millisecond):
	}
	_ = page
}

package rdmacm

import (
	"syscall"
	"testing"
)

// TestBadCommands: malformed commands, commands in the wrong state and ids
// of another channel get the errnos of the kernel's ucma.c/cma.c, and
// never disturb the channel or another one.
func TestBadCommands(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c, other := d.open(t), d.open(t)
	idle := c.createID(1, PSTCP)
	bound := c.createID(2, PSTCP)
	c.must("bind", c.bindIP(bound, "10.0.0.1:5000"))
	theirs := other.createID(3, PSTCP)
	mc := make([]byte, sizeJoinIPMcast)

	body := func(n int, set func(b []byte)) []byte {
		b := make([]byte, n)
		if set != nil {
			set(b)
		}
		return b
	}
	bind := func(h uint32, sa []byte) []byte {
		return body(sizeBindIP, func(b []byte) { copy(b[8:36], sa); le.PutUint32(b[36:], h) })
	}
	idOnly := func(n int, h uint32) []byte { return body(n, func(b []byte) { le.PutUint32(b, h) }) }
	withResp := func(n int, addr uint64, h uint32) []byte {
		return body(n, func(b []byte) { le.PutUint64(b, addr); le.PutUint32(b[8:], h) })
	}
	sib := make([]byte, 28)
	le.PutUint16(sib, afIB)
	const badPtr = 8 // never mapped

	cases := []struct {
		name string
		raw  []byte // whole write(), when set
		cmd  uint32
		out  int
		body []byte
		want syscall.Errno
	}{
		{name: "short write", raw: []byte{1, 0, 0, 0, 0, 0, 0}, want: syscall.EINVAL},
		{name: "unknown command", cmd: numCmds, want: syscall.EINVAL},
		{name: "huge command number", cmd: 0xffff_fff0, want: syscall.EINVAL},
		{name: "in beyond the write", raw: []byte{0, 0, 0, 0, 40, 0, 4, 0, 1, 2}, want: syscall.EINVAL},
		{name: "GET_OPTION", cmd: CmdGetOption, body: make([]byte, 8), want: syscall.ENOSYS},
		{name: "CREATE_ID out too small", cmd: CmdCreateID, out: 3, body: body(sizeCreateID, func(b []byte) { le.PutUint16(b[16:], PSTCP) }), want: syscall.ENOSPC},
		{name: "CREATE_ID bad port space", cmd: CmdCreateID, out: 4, body: body(sizeCreateID, func(b []byte) { le.PutUint16(b[16:], 0x999) }), want: syscall.EINVAL},
		{name: "CREATE_ID bad response pointer", cmd: CmdCreateID, out: 4, body: body(sizeCreateID, func(b []byte) { le.PutUint64(b[8:], badPtr); le.PutUint16(b[16:], PSTCP) }), want: syscall.EFAULT},
		{name: "DESTROY_ID no such id", cmd: CmdDestroyID, out: 4, body: withResp(sizeDestroyID, c.respAddr(), 999999), want: syscall.ENOENT},
		{name: "DESTROY_ID another channel's id", cmd: CmdDestroyID, out: 4, body: withResp(sizeDestroyID, c.respAddr(), theirs), want: syscall.EINVAL},
		{name: "DESTROY_ID out too small", cmd: CmdDestroyID, out: 0, body: withResp(sizeDestroyID, c.respAddr(), idle), want: syscall.ENOSPC},
		{name: "BIND_IP twice", cmd: CmdBindIP, body: bind(bound, sockaddr("10.0.0.1:5001")), want: syscall.EINVAL},
		{name: "BIND_IP not our address", cmd: CmdBindIP, body: bind(idle, sockaddr("192.0.2.55:1")), want: syscall.EADDRNOTAVAIL},
		{name: "BIND_IP AF_IB", cmd: CmdBindIP, body: bind(idle, sib), want: syscall.EAFNOSUPPORT},
		{name: "BIND_IP port in use", cmd: CmdBindIP, body: bind(idle, sockaddr("10.0.0.1:5000")), want: syscall.EADDRINUSE},
		{name: "BIND_IP another channel's id", cmd: CmdBindIP, body: bind(theirs, sockaddr("10.0.0.1:5002")), want: syscall.EINVAL},
		{name: "BIND reserved not zero", cmd: CmdBind, body: body(sizeBind, func(b []byte) {
			le.PutUint32(b, idle)
			le.PutUint16(b[4:], 16)
			le.PutUint16(b[6:], 1)
			copy(b[8:], sockaddr("10.0.0.1:1"))
		}), want: syscall.EINVAL},
		{name: "BIND size not the family's", cmd: CmdBind, body: body(sizeBind, func(b []byte) { le.PutUint32(b, idle); le.PutUint16(b[4:], 28); copy(b[8:], sockaddr("10.0.0.1:1")) }), want: syscall.EINVAL},
		{name: "RESOLVE_ROUTE before the address", cmd: CmdResolveRoute, body: idOnly(sizeResolveRoute, idle), want: syscall.EINVAL},
		{name: "RESOLVE_IP wildcard destination", cmd: CmdResolveIP, body: body(sizeResolveIP, func(b []byte) { copy(b[28:], sockaddr("0.0.0.0:1")); le.PutUint32(b[56:], bound) }), want: syscall.EINVAL},
		{name: "CONNECT without valid", cmd: CmdConnect, body: body(sizeConnect, func(b []byte) { le.PutUint32(b[272:], idle) }), want: syscall.EINVAL},
		{name: "CONNECT before the route", cmd: CmdConnect, body: body(sizeConnect, func(b []byte) { b[cpValid] = 1; le.PutUint32(b[272:], bound) }), want: syscall.EINVAL},
		{name: "ACCEPT on an idle id", cmd: CmdAccept, body: body(sizeAccept, func(b []byte) { b[8+cpValid] = 1; le.PutUint32(b[280:], idle) }), want: syscall.EINVAL},
		{name: "REJECT without a request", cmd: CmdReject, body: idOnly(sizeReject, bound), want: syscall.EINVAL},
		{name: "DISCONNECT unconnected", cmd: CmdDisconnect, body: idOnly(sizeDisconnect, bound), want: syscall.EINVAL},
		{name: "GET_EVENT out too small", cmd: CmdGetEvent, out: sizeEventResp - 1, body: body(sizeGetEvent, func(b []byte) { le.PutUint64(b, c.respAddr()) }), want: syscall.ENOSPC},
		{name: "GET_EVENT nothing queued", cmd: CmdGetEvent, out: sizeEventResp, body: body(sizeGetEvent, func(b []byte) { le.PutUint64(b, c.respAddr()) }), want: syscall.EAGAIN},
		{name: "INIT_QP_ATTR without a device", cmd: CmdInitQPAttr, out: sizeQPAttr, body: withResp(sizeInitQPAttr, c.respAddr(), idle), want: syscall.EINVAL},
		{name: "INIT_QP_ATTR out too small", cmd: CmdInitQPAttr, out: 10, body: withResp(sizeInitQPAttr, c.respAddr(), bound), want: syscall.ENOSPC},
		{name: "QUERY_ROUTE out too small", cmd: CmdQueryRoute, out: 100, body: withResp(sizeQuery, c.respAddr(), bound), want: syscall.ENOSPC},
		{name: "QUERY_ROUTE bad response pointer", cmd: CmdQueryRoute, out: sizeQueryRouteResp, body: withResp(sizeQuery, badPtr, bound), want: syscall.EFAULT},
		{name: "QUERY unknown option", cmd: CmdQuery, out: 512, body: body(sizeQuery, func(b []byte) { le.PutUint64(b, c.respAddr()); le.PutUint32(b[8:], bound); le.PutUint32(b[12:], 9) }), want: syscall.ENOSYS},
		{name: "SET_OPTION bad optval", cmd: CmdSetOption, body: body(sizeSetOption, func(b []byte) { le.PutUint64(b, badPtr); le.PutUint32(b[8:], idle); le.PutUint32(b[20:], 1) }), want: syscall.EFAULT},
		{name: "SET_OPTION TOS of 4 bytes", cmd: CmdSetOption, body: body(sizeSetOption, func(b []byte) { le.PutUint64(b, c.respAddr()); le.PutUint32(b[8:], idle); le.PutUint32(b[20:], 4) }), want: syscall.EINVAL},
		{name: "SET_OPTION unknown level", cmd: CmdSetOption, body: body(sizeSetOption, func(b []byte) {
			le.PutUint64(b, c.respAddr())
			le.PutUint32(b[8:], idle)
			le.PutUint32(b[12:], 77)
			le.PutUint32(b[20:], 1)
		}), want: syscall.ENOSYS},
		{name: "SET_OPTION huge optlen", cmd: CmdSetOption, body: body(sizeSetOption, func(b []byte) { le.PutUint64(b, c.respAddr()); le.PutUint32(b[8:], idle); le.PutUint32(b[20:], 1<<30) }), want: syscall.ENOMEM},
		{name: "JOIN_IP_MCAST unicast address", cmd: CmdJoinIPMcast, out: 4, body: func() []byte { copy(mc[16:], sockaddr("10.0.0.9:0")); le.PutUint32(mc[44:], bound); return mc }(), want: syscall.EINVAL},
		{name: "JOIN_MCAST bad flags", cmd: CmdJoinMcast, out: 4, body: body(sizeJoinMcast, func(b []byte) {
			le.PutUint32(b[16:], bound)
			le.PutUint16(b[20:], 16)
			le.PutUint16(b[22:], 5)
			copy(b[24:], sockaddr("239.1.1.1:0"))
		}), want: syscall.EINVAL},
		{name: "LEAVE_MCAST no such join", cmd: CmdLeaveMcast, out: 4, body: withResp(sizeDestroyID, c.respAddr(), 4242), want: syscall.ENOENT},
		{name: "MIGRATE_ID fd not open", cmd: CmdMigrateID, body: body(sizeMigrateID, func(b []byte) {
			le.PutUint64(b, c.respAddr())
			le.PutUint32(b[8:], idle)
			le.PutUint32(b[12:], migrateBadFD)
		}), want: syscall.ENOENT},
		{name: "MIGRATE_ID fd not rdma_cm", cmd: CmdMigrateID, body: body(sizeMigrateID, func(b []byte) {
			le.PutUint64(b, c.respAddr())
			le.PutUint32(b[8:], idle)
			le.PutUint32(b[12:], migrateNotUcma)
		}), want: syscall.EINVAL},
		{name: "MIGRATE_ID unknown channel", cmd: CmdMigrateID, body: body(sizeMigrateID, func(b []byte) { le.PutUint64(b, c.respAddr()); le.PutUint32(b[8:], idle); le.PutUint32(b[12:], 0x7777) }), want: syscall.ENOENT},
		{name: "second channel grant", raw: []byte{1, 0x4d, 0x45, 0x49, 0, 0, 8, 0}, want: syscall.EINVAL},
	}
	before := d.p.Counts()
	for _, tc := range cases {
		var got syscall.Errno
		if tc.raw != nil {
			r := c.ch.Command(tc.raw)
			if r.Status < 0 {
				got = syscall.Errno(-r.Status)
			}
		} else {
			got = c.raw(tc.cmd, tc.out, tc.body)
		}
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if after := d.p.Counts(); after != before {
		t.Errorf("objects changed: %+v → %+v", before, after)
	}
	// Both channels still work.
	for _, ch := range []*channel{c, other} {
		h := ch.createID(9, PSUDP)
		if _, e := ch.destroyID(h); e != 0 {
			t.Errorf("channel after the bad commands: %v", e)
		}
	}
}

// TestGetEventFault: an event whose response cannot be written stays
// queued, and the descriptor stays readable (ucma_get_event copies
// before it dequeues).
func TestGetEventFault(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c := d.open(t)
	h := c.createID(1, PSTCP)
	c.must("resolve", c.resolveIP(h, "10.0.0.1:1", 1000))
	for !c.readable() {
		waitReadable(c)
	}
	b := make([]byte, sizeGetEvent)
	le.PutUint64(b, 8)
	if e := c.raw(CmdGetEvent, sizeEventResp, b); e != syscall.EFAULT {
		t.Fatalf("GET_EVENT to a bad pointer: %v", e)
	}
	if !c.readable() {
		t.Fatal("the event was lost with the fault")
	}
	c.expect(EventAddrResolved)
	if c.readable() {
		t.Fatal("readable with the queue empty")
	}
	n, _ := c.destroyID(h)
	if n != 1 {
		t.Fatalf("events reported %d, want 1", n)
	}
}

// TestWriteCMEvent: WRITE_CM_EVENT queues a USER or INTERNAL event on the
// program's own id with its status and 64-bit argument (ucma.c
// ucma_write_cm_event; librdmacm's rdma_resolve_addrinfo reports
// ADDRINFO_RESOLVED through it); another event type is EINVAL, an id that
// is not there ENOENT, another channel's EINVAL, and nothing is queued
// for them.
func TestWriteCMEvent(t *testing.T) {
	w := newWire()
	d := newDevice(t, w, "10.0.0.1", 1)
	c, other := d.open(t), d.open(t)
	h := c.createID(0x77, PSTCP)
	theirs := other.createID(3, PSTCP)
	write := func(id, typ uint32, status int32, arg uint64) syscall.Errno {
		b := make([]byte, sizeWriteCMEvent)
		le.PutUint32(b, id)
		le.PutUint32(b[8:], typ)
		le.PutUint32(b[12:], uint32(status))
		le.PutUint64(b[16:], arg)
		return c.raw(CmdWriteCMEvent, 0, b)
	}
	for _, tc := range []struct {
		name   string
		id     uint32
		typ    uint32
		status int32
		arg    uint64
		want   syscall.Errno
	}{
		{"ESTABLISHED", h, EventEstablished, 0, 1, syscall.EINVAL},
		{"ADDRINFO_RESOLVED (16)", h, 16, 0, 1, syscall.EINVAL},
		{"no such id", 4242, EventUser, 0, 1, syscall.ENOENT},
		{"another channel's id", theirs, EventUser, 0, 1, syscall.EINVAL},
	} {
		if got := write(tc.id, tc.typ, tc.status, tc.arg); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if c.readable() || other.readable() {
		t.Fatal("a refused WRITE_CM_EVENT queued an event")
	}
	c.must("USER", write(h, EventUser, -5, 0x1122334455667788))
	c.must("INTERNAL", write(h, EventInternal, 0, 16))
	e := c.expect(EventUser)
	if e.uid != 0x77 || e.id != h || e.status != -5 || le.Uint64(e.param) != 0x1122334455667788 {
		t.Errorf("USER event: uid %#x id %d status %d arg %#x; want uid 0x77 id %d status -5 arg 0x1122334455667788",
			e.uid, e.id, e.status, le.Uint64(e.param), h)
	}
	if e := c.expect(EventInternal); le.Uint64(e.param) != 16 || e.status != 0 {
		t.Errorf("INTERNAL event: status %d arg %d, want 0 and 16", e.status, le.Uint64(e.param))
	}
	if n, _ := c.destroyID(h); n != 2 {
		t.Errorf("events reported %d, want 2", n)
	}
}

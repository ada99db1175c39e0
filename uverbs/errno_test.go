package uverbs_test

import (
	"net/netip"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
)

// fixture is a context with one of everything, for the bad-input table:
// PD 0, CQ ring and shadow registrations 1 and 2, CQ 3 (on a channel), QP
// rings 4 and RC QP 5 (INIT), UD QP rings 6 and UD QP 7 (INIT), MR 8 (a
// buffer, reg_type MEM, on PD 0).
type fixture struct {
	e        *env
	c        *client // the context
	bare     *client // a file without a context
	other    *client // another context
	a        *arena
	ch       *os.File
	async    *os.File
	buf      []byte // a buffer of this process (not in a MEM range)
	bufAddr  uint64
	pdOther  uint32
	qpRC     uint32
	qpUD     uint32
	mcastGID [16]byte
}

func newFixture(t *testing.T) *fixture {
	e := newEnv(t)
	f := &fixture{e: e}
	c := e.open(t)
	f.c = c
	r := c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	f.async = r.fds[0].File
	c.ok(c.raw(allocPDCmd()), "ALLOC_PD")
	f.a = c.arena(0x40000)
	c.ok(c.raw(regMRCmd(f.a.addr+offCQ, 8192, 0, 1, 2, 2, 0, 0)), "REG_MR CQ")
	c.ok(c.raw(regMRCmd(f.a.addr+offCQShadow, 64, 0, 1, 2, 1, 0, 0)), "REG_MR shadow")
	r = c.ok(c.raw(compChannelCmd()), "CREATE_COMP_CHANNEL")
	f.ch = r.fds[0].File
	c.ok(c.raw(createCQCmd(1, 256, 0, int32(f.ch.Fd()), f.a.addr+offCQ, f.a.addr+offCQShadow)), "CREATE_CQ")
	q, _ := qpOnCQ(t, c, f.a, 3, offQP, 0x55, 2)
	f.qpRC = q
	q, _ = qpOnCQ(t, c, f.a, 3, 0x14000, 0x66, 4)
	f.qpUD = q
	for _, h := range []uint32{f.qpRC, f.qpUD} {
		m := newModify(h, 1|1<<4|1<<5)
		m[96], m[104] = 1, 1
		if h == f.qpRC {
			le.PutUint32(m[68:], 1|1<<3|1<<4|1<<5)
		} else {
			le.PutUint32(m[68:], 1|1<<4|1<<5|1<<6) // UD: QKEY instead of ACCESS_FLAGS
		}
		c.ok(c.raw(m.legacy()), "MODIFY_QP INIT")
	}
	f.buf = make([]byte, 8192)
	f.bufAddr = addrOf(f.buf)
	c.ok(c.raw(regMRCmd(f.bufAddr, 4096, 0, 1, 0, 0, 0, 0)), "REG_MR buffer")
	f.bare = e.open(t)
	f.other = e.open(t)
	f.other.ok(f.other.raw(getContextCmd(5, 0)), "GET_CONTEXT other")
	f.mcastGID = gid4(netip.MustParseAddr("239.1.2.3"))
	return f
}

func queryPortCmd(port uint8, outBytes int) []byte {
	b := make([]byte, 16)
	le.PutUint64(b, fakeResp)
	b[8] = port
	return legacy(2, outBytes, b)
}

func createAHCmd(pd uint32, dgid [16]byte, sgid, port uint8, global bool, outBytes int) []byte {
	b := make([]byte, 56)
	le.PutUint64(b, fakeResp)
	le.PutUint64(b[8:], 0x77)
	le.PutUint32(b[16:], pd)
	copy(b[24:40], dgid[:])
	b[44] = sgid
	b[45] = 64
	if global {
		b[53] = 1
	}
	b[54] = port
	return legacy(5, outBytes, b)
}

func mcastCmd(command uint32, gid [16]byte, qp uint32) []byte {
	b := make([]byte, 24)
	copy(b, gid[:])
	le.PutUint32(b[16:], qp)
	return legacy(command, 0, b)
}

func exQueryDeviceCmd(compMask uint32, prov []byte) []byte {
	core := make([]byte, 8)
	le.PutUint32(core, compMask)
	return extended(1, fakeResp, core, 304, prov, 0)
}

// with returns a copy of b with f applied.
func with(b []byte, f func([]byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

// TestBadInput: each malformed or invalid command gets the errno the
// uverbs core or irdma returns for it, and nothing else changes.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	other := gid4(netip.MustParseAddr("192.0.2.200"))
	notRoot := os.Getuid() != 0
	type tc struct {
		name string
		c    func(*fixture) *client
		cmd  []byte
		want syscall.Errno
	}
	ctxc := func(f *fixture) *client { return f.c }
	cases := []tc{
		// ib_uverbs_write and verify_hdr
		{"short header", ctxc, []byte{0, 0, 0, 0}, syscall.EINVAL},
		{"bits outside the command mask", ctxc, legacy(0x100|3, 12, make([]byte, 8)), syscall.EINVAL},
		{"unknown command", ctxc, legacy(41, 0, nil), syscall.EOPNOTSUPP},
		{"unknown command 0xff", ctxc, legacy(0xff, 0, nil), syscall.EOPNOTSUPP},
		{"unknown extended command", ctxc, extended(60, 0, nil, 0, nil, 0), syscall.EOPNOTSUPP},
		{"command without a handler (MODIFY_AH)", ctxc, legacy(6, 0, make([]byte, 8)), syscall.EOPNOTSUPP},
		{"command without a handler, bad length", ctxc, with(legacy(6, 0, make([]byte, 8)), func(b []byte) { b[4] = 9 }), syscall.EINVAL},
		{"REREG_MR without flags", ctxc, legacy(11, 8, with(make([]byte, 48), func(b []byte) { le.PutUint64(b, fakeResp) })), syscall.EINVAL},
		{"REREG_MR flag 8", ctxc, legacy(11, 8, with(make([]byte, 48), func(b []byte) { le.PutUint64(b, fakeResp); b[12] = 8 })), syscall.EINVAL},
		{"REREG_MR no such MR", ctxc, legacy(11, 8, with(make([]byte, 48), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[8:], 999); b[12] = 4 })), syscall.EINVAL},
		{"CREATE_SRQ (no SRQ)", ctxc, legacy(32, 16, make([]byte, 32)), syscall.EOPNOTSUPP},
		{"EX_MODIFY_CQ (no modify_cq)", ctxc, legacy(0x80000039, 0, make([]byte, 8)), syscall.EOPNOTSUPP},
		{"in_words disagrees with the length", ctxc, with(queryPortCmd(1, 40), func(b []byte) { b[4]++ }), syscall.EINVAL},
		{"request shorter than the command", ctxc, legacy(2, 40, make([]byte, 8)), syscall.ENOSPC},
		{"response room too small", ctxc, queryPortCmd(1, 36), syscall.ENOSPC},
		{"NULL response", ctxc, with(queryPortCmd(1, 40), func(b []byte) { le.PutUint64(b[8:], 0) }), syscall.EFAULT},
		{"trailing garbage", ctxc, legacy(4, 0, []byte{5, 0, 0, 0, 1, 0, 0, 0}), syscall.EOPNOTSUPP},
		{"extended: shorter than its headers", ctxc, with(legacy(0, 0, make([]byte, 8)), func(b []byte) { le.PutUint32(b, 0x80000001) }), syscall.EINVAL},
		{"extended: words disagree", ctxc, with(exQueryDeviceCmd(0, nil), func(b []byte) { b[4] = 2 }), syscall.EINVAL},
		{"extended: request too short", ctxc, extended(1, fakeResp, nil, 304, nil, 0), syscall.ENOSPC},
		{"extended: reserved header word", ctxc, with(exQueryDeviceCmd(0, nil), func(b []byte) { b[20] = 1 }), syscall.EINVAL},
		{"extended: response but no room", ctxc, extended(1, fakeResp, make([]byte, 8), 0, nil, 0), syscall.EINVAL},
		{"extended: response room too small", ctxc, extended(1, fakeResp, make([]byte, 8), 176, nil, 0), syscall.ENOSPC},
		{"extended: room but no response", ctxc, extended(1, 0, make([]byte, 8), 304, nil, 0), syscall.EINVAL},
		// before GET_CONTEXT
		{"QUERY_DEVICE without a context", func(f *fixture) *client { return f.bare }, legacy(1, 176, withResp(8)), syscall.EINVAL},
		{"ALLOC_PD without a context", func(f *fixture) *client { return f.bare }, allocPDCmd(), syscall.EINVAL},
		{"DEALLOC_PD without a context", func(f *fixture) *client { return f.bare }, handleCmd(4, 0), syscall.ENOENT},
		// GET_CONTEXT
		{"second GET_CONTEXT", ctxc, getContextCmd(5, 0), syscall.EINVAL},
		{"userspace_ver 3", func(f *fixture) *client { return f.bare }, getContextCmd(3, 0), syscall.EINVAL},
		{"userspace_ver 6", func(f *fixture) *client { return f.bare }, getContextCmd(6, 0), syscall.EINVAL},
		{"GET_CONTEXT without udata", func(f *fixture) *client { return f.bare }, legacy(0, 88, withResp(8)), syscall.EINVAL},
		{"GET_CONTEXT, libi40iw response", func(f *fixture) *client { return f.bare }, with(getContextCmd(5, 0), func(b []byte) { b[6] = (8 + 16) / 4 }), syscall.EOPNOTSUPP},
		{"GET_CONTEXT, response too short", func(f *fixture) *client { return f.bare }, with(getContextCmd(5, 0), func(b []byte) { b[6] = (8 + 12) / 4 }), syscall.EINVAL},
		// handles
		{"DEALLOC_PD unknown handle", ctxc, handleCmd(4, 99), syscall.ENOENT},
		{"DEALLOC_PD with a CQ handle", ctxc, handleCmd(4, 3), syscall.EINVAL},
		{"DEALLOC_PD in use", ctxc, handleCmd(4, 0), syscall.EBUSY},
		{"DEREG_MR with a PD handle", ctxc, handleCmd(13, 0), syscall.EINVAL},
		{"another context's PD", func(f *fixture) *client { return f.other }, handleCmd(4, 0), syscall.ENOENT},
		{"another context's PD in REG_MR", func(f *fixture) *client { return f.other }, regMRCmd(0x10000, 4096, 0, 1, 0, 0, 0, 0), syscall.EINVAL},
		// REG_MR
		{"REG_MR start and hca_va offsets differ", ctxc, with(regMRCmd(0x10000, 4096, 0, 1, 0, 0, 0, 0), func(b []byte) { le.PutUint64(b[32:], 0x10008) }), syscall.EINVAL},
		{"REG_MR remote write without local write", ctxc, regMRCmd(0x10000, 4096, 0, 2, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR unknown access bit", ctxc, regMRCmd(0x10000, 4096, 0, 1<<15, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR on-demand paging", ctxc, regMRCmd(0x10000, 4096, 0, 1<<6, 0, 0, 0, 0), syscall.EOPNOTSUPP},
		{"REG_MR bad PD", ctxc, regMRCmd(0x10000, 4096, 9, 1, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR length 0", ctxc, regMRCmd(0x10000, 0, 0, 1, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR over max_mr_size", ctxc, regMRCmd(0x10000, 1<<50, 0, 1, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR without udata", ctxc, legacy(9, 12, with(make([]byte, 40), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint64(b[16:], 4096) })), syscall.EINVAL},
		{"REG_MR unmapped memory", ctxc, regMRCmd(0x1000, 4096, 0, 1, 0, 0, 0, 0), syscall.EFAULT},
		{"REG_MR wraps", ctxc, regMRCmd(^uint64(0)-4095, 8192, 0, 1, 0, 0, 0, 0), syscall.EINVAL},
		{"REG_MR CQ ring outside shared memory", ctxc, regMRCmd(addrOf(make([]byte, 16384)), 8192, 0, 1, 2, 2, 0, 0), syscall.EFAULT},
		{"REG_MR unknown reg_type", ctxc, regMRCmd(f.a.addr+0x30000, 4096, 0, 1, 7, 0, 0, 0), syscall.EINVAL},
		{"REG_MR QP rings with too few pages", ctxc, regMRCmd(f.a.addr+0x30000, 8192, 0, 1, 1, 0, 4, 4), syscall.EINVAL},
		// ALLOC_MW
		{"ALLOC_MW type 3", ctxc, legacy(14, 8, with(make([]byte, 16), func(b []byte) { le.PutUint64(b, fakeResp); b[12] = 3 })), syscall.EINVAL},
		{"ALLOC_MW bad PD", ctxc, legacy(14, 8, with(make([]byte, 16), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[8:], 3); b[12] = 1 })), syscall.EINVAL},
		// CQ
		{"CREATE_CQ comp_vector out of range", ctxc, createCQCmd(1, 64, 99, -1, 0, 0), syscall.EINVAL},
		{"CREATE_CQ channel is stdin", ctxc, createCQCmd(1, 64, 0, 0, 0, 0), syscall.EBADF},
		{"CREATE_CQ channel is a closed descriptor", ctxc, createCQCmd(1, 64, 0, 1000000, 0, 0), syscall.EBADF},
		{"CREATE_CQ ring not registered", ctxc, createCQCmd(1, 64, 0, -1, 0x123000, 0x124000), syscall.EPROTO},
		{"CREATE_CQ udata too short", ctxc, legacy(18, 16, with(make([]byte, 32+4), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[24:], ^uint32(0)) })), syscall.EINVAL},
		{"CREATE_CQ response udata too short", ctxc, with(createCQCmd(1, 64, 0, -1, 0, 0), func(b []byte) { b[6] = 3 }), syscall.EINVAL},
		{"EX_CREATE_CQ comp_mask", ctxc, extended(18, fakeResp, with(make([]byte, 32), func(b []byte) { b[16] = 0xff; b[17] = 0xff; b[18] = 0xff; b[19] = 0xff; b[20] = 1 }), 16, make([]byte, 16), 8), syscall.EINVAL},
		{"EX_CREATE_CQ unknown flag", ctxc, extended(18, fakeResp, with(make([]byte, 32), func(b []byte) { le.PutUint32(b[16:], ^uint32(0)); b[24] = 2 }), 16, make([]byte, 16), 8), syscall.EOPNOTSUPP},
		{"DESTROY_CQ in use by QPs", ctxc, destroyCmd(20, 3, 8), syscall.EBUSY},
		{"RESIZE_CQ bad handle", ctxc, legacy(19, 8, with(make([]byte, 24), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[8:], 0) })), syscall.EINVAL},
		{"RESIZE_CQ ring not registered", ctxc, legacy(19, 8, with(make([]byte, 24), func(b []byte) {
			le.PutUint64(b, fakeResp)
			le.PutUint32(b[8:], 3)
			le.PutUint32(b[12:], 512)
			le.PutUint64(b[16:], 0x999000)
		})), syscall.ENOMEM},
		{"POLL_CQ (no kernel poll of a user ring)", ctxc, legacy(21, 8, with(make([]byte, 16), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[8:], 3) })), syscall.EOPNOTSUPP},
		{"REQ_NOTIFY_CQ bad handle", ctxc, reqNotifyCmd(5, 0), syscall.EINVAL},
		// QP
		{"CREATE_QP type GSI", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 1, 0, 0), syscall.EINVAL},
		{"CREATE_QP type UC", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 3, 0, 0), syscall.EOPNOTSUPP},
		{"CREATE_QP bad PD", ctxc, createQPCmd(1, 42, 3, 3, 256, 512, 1, 1, 0, 2, 0, 0), syscall.EINVAL},
		{"CREATE_QP bad send CQ", ctxc, createQPCmd(1, 0, 0, 0, 256, 512, 1, 1, 0, 2, 0, 0), syscall.EINVAL},
		{"CREATE_QP bad recv CQ", ctxc, createQPCmd(1, 0, 3, 77, 256, 512, 1, 1, 0, 2, 0, 0), syscall.EINVAL},
		{"CREATE_QP on an SRQ", ctxc, with(createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 2, 0, 0), func(b []byte) { b[8+54] = 1 }), syscall.EINVAL},
		{"CREATE_QP too much inline", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 200, 2, 0, 0), syscall.EINVAL},
		{"CREATE_QP too many SGEs", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 14, 1, 0, 2, 0, 0), syscall.EINVAL},
		{"CREATE_QP udata too short", ctxc, legacy(24, 56, with(make([]byte, 56+8), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[20:], 3); le.PutUint32(b[24:], 3); b[53] = 2 })), syscall.EINVAL},
		{"CREATE_QP rings not registered", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 2, 0xabc000, 0), syscall.ENODATA},
		{"CREATE_QP ring size no hardware size fits", ctxc, createQPCmd(1, 0, 3, 3, 100, 512, 1, 1, 0, 2, 0xabc000, 0), syscall.EINVAL},
		{"EX_CREATE_QP create flags", ctxc, extended(24, fakeResp, with(make([]byte, 64), func(b []byte) {
			le.PutUint32(b[12:], 3)
			le.PutUint32(b[16:], 3)
			b[45] = 2
			le.PutUint32(b[52:], 1<<1)
		}), 40, make([]byte, 16), 24), syscall.EOPNOTSUPP},
		{"EX_CREATE_QP unknown create flag", ctxc, extended(24, fakeResp, with(make([]byte, 64), func(b []byte) { b[45] = 2; le.PutUint32(b[52:], 1<<20) }), 40, make([]byte, 16), 24), syscall.EINVAL},
		{"EX_CREATE_QP comp_mask", ctxc, extended(24, fakeResp, with(make([]byte, 64), func(b []byte) { b[45] = 2; b[48] = 2 }), 40, make([]byte, 16), 24), syscall.EINVAL},
		{"MODIFY_QP bad handle", ctxc, newModify(3, 1).legacy(), syscall.EINVAL},
		{"MODIFY_QP state beyond ERR", ctxc, legacyModify(with(newModify(5, 1), func(b []byte) { b[96] = 7 })), syscall.EINVAL},
		{"MODIFY_QP attribute beyond the legacy mask", ctxc, newModify(5, 1<<21).legacy(), syscall.EOPNOTSUPP},
		{"MODIFY_QP INIT to RTS", ctxc, legacyModify(with(newModify(5, 1), func(b []byte) { b[96] = 3 })), syscall.EINVAL},
		{"MODIFY_QP port 2", ctxc, legacyModify(with(newModify(5, 1<<5), func(b []byte) { b[104] = 2 })), syscall.EINVAL},
		{"MODIFY_QP AV without GRH", ctxc, legacyModify(with(newModify(5, 1|1<<7), func(b []byte) { b[96] = 2; b[31] = 1 })), syscall.EINVAL},
		{"MODIFY_QP AV port 2", ctxc, legacyModify(with(newModify(5, 0x129181).dest(other, 1, 64, 1), func(b []byte) { b[96] = 2; b[31] = 2 })), syscall.EINVAL},
		{"MODIFY_QP AV SGID beyond the table", ctxc, legacyModify(with(newModify(5, 0x129181).dest(gid4(peerIP), 40, 64, 1), func(b []byte) { b[96] = 2 })), syscall.EINVAL},
		{"MODIFY_QP AV empty SGID", ctxc, legacyModify(with(newModify(5, 0x129181).dest(gid4(peerIP), 5, 64, 1), func(b []byte) { b[96] = 2 })), syscall.ENODATA},
		{"MODIFY_QP AV unreachable", ctxc, legacyModify(with(newModify(5, 0x129181).dest(other, 1, 64, 1), func(b []byte) { b[96] = 2; b[98] = 3 })), syscall.ETIMEDOUT},
		{"MODIFY_QP alternate path", ctxc, legacyModify(with(newModify(5, 1<<14), func(b []byte) { b[108] = 1; b[63] = 1 })), syscall.EINVAL},
		{"EX_MODIFY_QP rate limit", ctxc, newModify(5, 1<<25).ex(0, 0), syscall.EOPNOTSUPP},
		{"EX_MODIFY_QP beyond the mask", ctxc, newModify(5, 1<<26).ex(0, 0), syscall.EOPNOTSUPP},
		{"EX_MODIFY_QP response udata too short", ctxc, func() []byte {
			core := make([]byte, 120)
			copy(core, newModify(5, 1<<4))
			return extended(26, fakeResp, core, 8, make([]byte, 8), 8)
		}(), syscall.EINVAL},
		{"QUERY_QP bad handle", ctxc, queryQPCmd(0, 0), syscall.EINVAL},
		{"POST_SEND short WR", ctxc, legacy(28, 4, with(make([]byte, 24+16), func(b []byte) {
			le.PutUint64(b, fakeResp)
			le.PutUint32(b[8:], 5)
			le.PutUint32(b[12:], 1)
			le.PutUint32(b[20:], 16)
		})), syscall.EINVAL},
		{"POST_SEND WRs beyond the buffer", ctxc, legacy(28, 4, with(make([]byte, 24), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[12:], 1000); le.PutUint32(b[20:], 56) })), syscall.ENOSPC},
		{"POST_SEND (no kernel post to a user ring)", ctxc, legacy(28, 4, with(make([]byte, 24+56), func(b []byte) {
			le.PutUint64(b, fakeResp)
			le.PutUint32(b[8:], 5)
			le.PutUint32(b[12:], 1)
			le.PutUint32(b[20:], 56)
		})), syscall.EOPNOTSUPP},
		{"POST_RECV short WR", ctxc, legacy(29, 4, with(make([]byte, 24), func(b []byte) { le.PutUint64(b, fakeResp); le.PutUint32(b[20:], 8) })), syscall.EINVAL},
		{"DESTROY_QP unknown", ctxc, destroyCmd(27, 1234, 4), syscall.ENOENT},
		{"OPEN_QP (no XRC domains)", ctxc, legacy(40, 32, with(make([]byte, 32), func(b []byte) { le.PutUint64(b, fakeResp) })), syscall.EINVAL},
		// AH and multicast
		{"CREATE_AH port 2", ctxc, createAHCmd(0, gid4(peerIP), 1, 2, true, 12), syscall.EINVAL},
		{"CREATE_AH bad PD", ctxc, createAHCmd(3, gid4(peerIP), 1, 1, true, 12), syscall.EINVAL},
		{"CREATE_AH without GRH", ctxc, createAHCmd(0, gid4(peerIP), 1, 1, false, 12), syscall.EINVAL},
		{"CREATE_AH SGID beyond the table", ctxc, createAHCmd(0, gid4(peerIP), 33, 1, true, 12), syscall.EINVAL},
		{"CREATE_AH unreachable", ctxc, createAHCmd(0, other, 1, 1, true, 12), syscall.ETIMEDOUT},
		{"CREATE_AH response udata too short", ctxc, createAHCmd(0, gid4(peerIP), 1, 1, true, 8), syscall.EINVAL},
		{"DESTROY_AH unknown", ctxc, handleCmd(8, 77), syscall.ENOENT},
		{"ATTACH_MCAST on an RC QP", ctxc, mcastCmd(30, gid4(netip.MustParseAddr("239.1.2.3")), 5), syscall.EINVAL},
		{"ATTACH_MCAST unicast GID", ctxc, mcastCmd(30, gid4(peerIP), 7), syscall.EINVAL},
		{"ATTACH_MCAST bad QP", ctxc, mcastCmd(30, gid4(netip.MustParseAddr("239.1.2.3")), 3), syscall.EINVAL},
		{"DETACH_MCAST not attached", ctxc, mcastCmd(31, gid4(netip.MustParseAddr("239.1.2.3")), 7), syscall.EINVAL},
		// device queries
		{"QUERY_PORT 0", ctxc, queryPortCmd(0, 40), syscall.EINVAL},
		{"QUERY_PORT 2", ctxc, queryPortCmd(2, 40), syscall.EINVAL},
		{"EX_QUERY_DEVICE comp_mask", ctxc, exQueryDeviceCmd(1, nil), syscall.EINVAL},
		{"EX_QUERY_DEVICE provider data", ctxc, exQueryDeviceCmd(0, make([]byte, 8)), syscall.EINVAL},
	}
	if notRoot {
		cases = append(cases,
			tc{"CREATE_QP raw packet without CAP_NET_RAW", ctxc, createQPCmd(1, 0, 3, 3, 256, 512, 1, 1, 0, 8, 0, 0), syscall.EPERM},
			tc{"MODIFY_QP privileged Q_Key", ctxc, legacyModify(with(newModify(7, 1<<6), func(b []byte) { le.PutUint32(b[72:], 0x80000001) })), syscall.EPERM})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c(f)
			r := c.raw(tc.cmd)
			if r.errno() != tc.want {
				t.Errorf("got status %d (%v), want %v", r.status, r.errno(), tc.want)
			}
			if r.status < 0 && (r.resp != nil || len(r.fds) != 0) {
				t.Errorf("a failed command answered %d bytes and %d descriptors", len(r.resp), len(r.fds))
			}
		})
	}
	// The fixture is intact: its QP is still in INIT, its PD still busy.
	r := f.c.ok(f.c.raw(queryQPCmd(5, 0)), "QUERY_QP")
	if r.resp[108] != 1 {
		t.Errorf("QP state %d after the bad commands", r.resp[108])
	}
	// Multicast: attach, attach again (no-op), destroy refused while
	// attached, detach.
	g := gid4(netip.MustParseAddr("239.1.2.3"))
	f.c.ok(f.c.raw(mcastCmd(30, g, 7)), "ATTACH_MCAST")
	f.c.ok(f.c.raw(mcastCmd(30, g, 7)), "ATTACH_MCAST again")
	if r := f.c.raw(destroyCmd(27, 7, 4)); r.errno() != syscall.EBUSY {
		t.Errorf("DESTROY_QP with an attachment: %v, want EBUSY", r.errno())
	}
	f.c.ok(f.c.raw(mcastCmd(31, g, 7)), "DETACH_MCAST")
	f.c.ok(f.c.raw(destroyCmd(27, 7, 4)), "DESTROY_QP")
}

// legacyModify wraps a modified ib_uverbs_modify_qp as MODIFY_QP.
func legacyModify(b []byte) []byte { return legacy(26, 0, b) }

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// withResp is a zeroed body of n bytes starting with the response pointer.
func withResp(n int) []byte {
	b := make([]byte, n)
	le.PutUint64(b, fakeResp)
	return b
}

// TestMmapAndMem: the doorbell page is the only mmap entry; MEM ranges
// must be page-aligned and may not overlap.
func TestMmapAndMem(t *testing.T) {
	e := newEnv(t)
	c := e.open(t)
	if _, _, err := c.s.Mmap(attach.MmapRequest{Length: 4096, Flags: unix.MAP_SHARED}); err != syscall.EINVAL {
		t.Errorf("MMAP before GET_CONTEXT: %v, want EINVAL", err)
	}
	c.ok(c.raw(getContextCmd(5, 0)), "GET_CONTEXT")
	for _, tc := range []struct {
		name string
		req  attach.MmapRequest
	}{
		{"unknown key", attach.MmapRequest{Offset: 4096, Length: 4096, Flags: unix.MAP_SHARED}},
		{"private mapping", attach.MmapRequest{Length: 4096, Flags: unix.MAP_PRIVATE}},
		{"two pages", attach.MmapRequest{Length: 8192, Flags: unix.MAP_SHARED}},
	} {
		if _, _, err := c.s.Mmap(tc.req); err != syscall.EINVAL {
			t.Errorf("MMAP %s: %v, want EINVAL", tc.name, err)
		}
	}
	memfd := func() *os.File {
		fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, 1<<20)
		return os.NewFile(uintptr(fd), "t")
	}
	for _, tc := range []struct {
		name string
		req  attach.MemRequest
		want error
	}{
		{"unaligned address", attach.MemRequest{Addr: 0x10000100, Length: 4096}, syscall.EINVAL},
		{"unaligned length", attach.MemRequest{Addr: 0x10000000, Length: 100}, syscall.EINVAL},
		{"zero length", attach.MemRequest{Addr: 0x10000000}, syscall.EINVAL},
		{"wraps", attach.MemRequest{Addr: ^uint64(0) - 4095, Length: 8192}, syscall.EINVAL},
		{"ok", attach.MemRequest{Addr: 0x10000000, Length: 65536}, nil},
		{"overlap", attach.MemRequest{Addr: 0x1000f000, Length: 8192}, syscall.EEXIST},
		{"beyond the file", attach.MemRequest{Addr: 0x20000000, Length: 2 << 20}, syscall.EINVAL},
	} {
		if err := c.s.Mem(tc.req, memfd()); err != tc.want && !(tc.want == syscall.EINVAL && err != nil) {
			t.Errorf("MEM %s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

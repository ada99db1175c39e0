package preload_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/attach/attachtest"
	"github.com/irdma-emu/irdma-emu/emu/profile"
	"github.com/irdma-emu/irdma-emu/internal/testenv"
)

// uverbs write() command numbers (ib_user_verbs.h).
const (
	cmdGetContext = 0
	cmdQueryPort  = 2
	cmdAllocPD    = 3
	cmdDeallocPD  = 4
	cmdRegMR      = 9
	cmdDeregMR    = 13
	cmdCreateCQ   = 18
	cmdDestroyCQ  = 20
	cmdCreateQP   = 24
	cmdQueryQP    = 25
	cmdModifyQP   = 26
	cmdDestroyQP  = 27
)

// regMR is one REG_MR the canned responder saw.
type regMR struct {
	start, length uint64
	regType       uint16 // irdma_mem_reg_req.reg_type: 0 MEM, 1 QP, 2 CQ
	inArena       bool   // [start, start+length) lies in a MEM range
	viaProcMem    bool   // readable through the HELLO /proc/self/mem
}

// responder answers just enough of the uverbs commands, with fixed values,
// for libirdma to allocate and register its rings. It is not the daemon's
// command semantics (those live with the driver half); it is a probe of
// where the real provider's memory lands.
type responder struct {
	mu    sync.Mutex
	regs  []regMR
	cmds  []uint32
	async []*os.File
	next  uint32
}

func (r *responder) handle(ss *attachtest.Session, cmd []byte) attach.CmdReply {
	if len(cmd) < 16 {
		return attach.CmdReply{Status: -int32(syscall.EINVAL)}
	}
	op := le.Uint32(cmd)
	outLen := int(le.Uint16(cmd[6:])) * 4
	respAddr := le.Uint64(cmd[8:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, op)
	r.next++
	h := r.next
	ok := func(resp []byte, fds ...attach.FD) attach.CmdReply {
		if len(resp) > outLen {
			resp = resp[:outLen]
		}
		return attach.CmdReply{Status: int32(len(cmd)), RespAddr: respAddr, Resp: resp, FDs: fds}
	}
	resp := make([]byte, outLen)
	switch op {
	case cmdGetContext:
		p := profile.GEN2()
		rd, wr, err := os.Pipe()
		if err != nil {
			return attach.CmdReply{Status: -int32(syscall.EMFILE)}
		}
		wr.Close()
		r.async = append(r.async, rd)
		le.PutUint32(resp[4:], 1) // num_comp_vectors
		u := resp[8:]             // irdma_alloc_ucontext_resp
		le.PutUint32(u[0:], 1024) // max_pds
		le.PutUint32(u[4:], 1024) // max_qps
		u[12] = 2                 // kernel_ver
		le.PutUint64(u[16:], p.UK.FeatureFlags)
		le.PutUint64(u[24:], 0x10000) // db_mmap_key
		le.PutUint32(u[32:], p.UK.MaxHWWQFrags)
		le.PutUint32(u[36:], p.UK.MaxHWReadSGEs)
		le.PutUint32(u[40:], p.UK.MaxHWInline)
		le.PutUint32(u[44:], p.UK.MaxHWRQQuanta)
		le.PutUint32(u[48:], p.UK.MaxHWWQQuanta)
		le.PutUint32(u[52:], p.UK.MinHWCQSize)
		le.PutUint32(u[56:], p.UK.MaxHWCQSize)
		le.PutUint16(u[60:], uint16(p.UK.MaxHWSQChunk))
		u[62] = uint8(p.UK.HWRev)
		dup, err := attach.DupFile(rd)
		if err != nil {
			return attach.CmdReply{Status: -int32(syscall.EMFILE)}
		}
		return ok(resp, attach.FD{File: dup, Offset: 0})
	case cmdAllocPD:
		le.PutUint32(resp, h)
		le.PutUint32(resp[4:], h) // pd_id
		return ok(resp)
	case cmdRegMR:
		m := regMR{start: le.Uint64(cmd[16:]), length: le.Uint64(cmd[24:])}
		if len(cmd) >= 50 {
			m.regType = le.Uint16(cmd[48:])
		}
		_, m.inArena = ss.ReadMem(m.start, int(m.length))
		if ss.Peer.Mem != nil {
			b := make([]byte, m.length)
			_, err := ss.Peer.Mem.ReadAt(b, int64(m.start))
			m.viaProcMem = err == nil
		}
		r.regs = append(r.regs, m)
		le.PutUint32(resp, h)
		le.PutUint32(resp[4:], h<<8|0x12) // lkey
		le.PutUint32(resp[8:], h<<8|0x12) // rkey
		return ok(resp)
	case cmdCreateCQ:
		cqe := le.Uint32(cmd[24:])
		le.PutUint32(resp, h)
		le.PutUint32(resp[4:], cqe)
		le.PutUint32(resp[8:], h) // cq_id
		le.PutUint32(resp[12:], cqe)
		return ok(resp)
	case cmdCreateQP:
		// max_send_wr .. max_inline_data echo the request (the provider
		// already rounded them), then irdma_create_qp_resp.
		copy(resp[8:28], cmd[40:60])
		le.PutUint32(resp, h)
		le.PutUint32(resp[4:], h)     // qpn
		le.PutUint32(resp[32:], h)    // qp_id
		copy(resp[36:44], cmd[40:48]) // actual_sq_size, actual_rq_size
		return ok(resp)
	case cmdQueryPort:
		le.PutUint32(resp[0:], 1<<16|1<<18|1<<26)
		le.PutUint32(resp[4:], 0x7fffffff)
		le.PutUint32(resp[16:], 32) // gid_tbl_len
		le.PutUint16(resp[20:], 1)  // pkey_tbl_len
		resp[26], resp[27], resp[28] = 4, 5, 3
		resp[34], resp[35], resp[36], resp[37] = 2, 32, 5, 2 // width 4X, EDR, LinkUp, Ethernet
		return ok(resp)
	case cmdQueryQP, cmdModifyQP, cmdDeallocPD, cmdDeregMR, cmdDestroyCQ, cmdDestroyQP:
		return ok(resp)
	}
	return attach.CmdReply{Status: -int32(syscall.ENOSYS)}
}

// TestRealProviderArena runs the real ibv_rc_pingpong (real libibverbs and
// libirdma) against canned answers up to the point where it has created and
// moved its QP, and checks where libirdma's memory landed: every REG_MR of
// reg_type CQ or QP (CQ ring, CQ shadow area, SQ+RQ+shadow) inside the
// arena's MEM ranges, and the program's own buffer (reg_type MEM:
// memalign(page_size, 4096) in ibv_rc_pingpong's pp_init_ctx) inside them
// too — or, with IRDMA_EMU_ARENA=rings, outside them and reachable through
// /proc/self/mem.
func TestRealProviderArena(t *testing.T) {
	t.Run("default", func(t *testing.T) { realProviderArena(t, true) })
	// ibv_fork_init: libibverbs marks every registration MADV_DONTFORK, on
	// arena pages.
	t.Run("fork-safe", func(t *testing.T) { realProviderArena(t, true, "RDMAV_FORK_SAFE=1") })
	t.Run("rings", func(t *testing.T) { realProviderArena(t, false, "IRDMA_EMU_ARENA=rings") })
}

func realProviderArena(t *testing.T, bufInArena bool, extraEnv ...string) {
	l := lib(t)
	pp := testenv.Tool(t, "ibv_rc_pingpong")
	testenv.Libirdma(t)
	dir := t.TempDir()
	root := tree(t, dir)
	r := &responder{}
	s := attachtest.Start(t, dir, "irdma0", attachtest.Config{OnCommand: r.handle})
	// A port nobody listens on: the client stops after setting up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(pp, "-d", "irdma0", "-g", "1", "-p", fmt.Sprint(port), "127.0.0.1")
	cmd.Env = env(l, root, s.Path, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("ibv_rc_pingpong: %v\nstdout:\n%s\nstderr:\n%s", runErr, stdout.String(), stderr.String())
	if !strings.Contains(stderr.String()+stdout.String(), "Couldn't connect") {
		t.Fatalf("ibv_rc_pingpong did not get as far as connecting")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.async {
		f.Close()
	}
	var cq, qp, mem int
	for _, m := range r.regs {
		switch m.regType {
		case 1, 2:
			if m.regType == 1 {
				qp++
			} else {
				cq++
			}
			if !m.inArena {
				t.Errorf("REG_MR reg_type %d %#x+%d is not in the arena", m.regType, m.start, m.length)
			}
		case 0:
			mem++
			if m.inArena != bufInArena {
				t.Errorf("the program's buffer %#x+%d in the arena: %v, want %v", m.start, m.length, m.inArena, bufInArena)
			}
			if !bufInArena && !m.viaProcMem {
				t.Errorf("the program's buffer %#x+%d is not readable through /proc/self/mem", m.start, m.length)
			}
		}
	}
	// ibv_rc_pingpong: one buffer, the CQ ring and the CQ shadow area, the
	// QP's SQ+RQ+shadow.
	if cq != 2 || qp != 1 || mem != 1 {
		t.Errorf("REG_MRs: %d CQ, %d QP, %d MEM; want 2, 1, 1 (%+v)", cq, qp, mem, r.regs)
	}
	if !strings.Contains(stderr.String(), "from libirdma-rdmav34.so") {
		t.Errorf("no arena allocation from libirdma in the debug log")
	}
}

package uverbs

import (
	"errors"
	"fmt"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/irdma-emu/irdma-emu/attach"
	"github.com/irdma-emu/irdma-emu/driver"
	"github.com/irdma-emu/irdma-emu/emu/hostmem"
)

// createCompChannel is ib_uverbs_create_comp_channel: a completion event
// file, passed as the response's fd.
func (s *Session) createCompChannel(a *bundle) error {
	if _, err := a.request(szCreateCompChannel); err != nil {
		return err
	}
	if s.uctx == nil {
		return eINVAL
	}
	if len(s.channels) >= s.p.cfg.Limits.MaxChannels {
		return eMFILE
	}
	ef, prog, err := newEventFile(szCompEventDesc, "uverbs-comp-channel")
	if err != nil {
		return eMFILE
	}
	var st unix.Stat_t
	if err := unix.Fstat(ef.w, &st); err != nil {
		ef.close()
		prog.Close()
		return eMFILE
	}
	ch := &compChannel{ef: ef, dev: st.Dev, ino: st.Ino}
	a.cleanup = append(a.cleanup, ef.close)
	a.fds = append(a.fds, attach.FD{File: prog, Offset: 0})
	a.respond(make([]byte, szCompChannelResp)) // fd: patched in by the client
	s.channels = append(s.channels, ch)
	a.cleanup = append(a.cleanup, func() { s.channels = s.channels[:len(s.channels)-1] })
	return nil
}

// lookupChannel is ib_uverbs_lookup_comp_file: the program's descriptor
// number must name a completion channel of this context (-EBADF
// otherwise, lookup_get_fd_uobject). The daemon never learns the number
// the client installed its descriptor under, so it looks at the
// program's descriptor table: /proc/<pid>/fd/<fd> is the same pipe as one
// of the context's channels. Without access to it (another user, no
// /proc), a context with a single channel uses that one.
func (s *Session) lookupChannel(fd int32) (*compChannel, error) {
	pid := int(s.peer.Hello.PID)
	if s.peer.Cred != nil {
		pid = int(s.peer.Cred.Pid)
	}
	var st unix.Stat_t
	err := unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), &st)
	if err == nil {
		for _, ch := range s.channels {
			if st.Dev == ch.dev && st.Ino == ch.ino {
				return ch, nil
			}
		}
		return nil, eBADF
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EBADF) {
		return nil, eBADF
	}
	if len(s.channels) == 1 {
		s.log.Debug("uverbs: cannot read the program's descriptors; using its only completion channel",
			zap.Int32("fd", fd), zap.Error(err))
		return s.channels[0], nil
	}
	s.log.Warn("uverbs: cannot resolve a completion channel descriptor", zap.Int32("fd", fd), zap.Error(err))
	return nil, eBADF
}

// cqCreate are the fields of ib_uverbs_ex_create_cq the legacy command
// maps to (ib_uverbs_create_cq → create_cq).
type cqCreate struct {
	userHandle  uint64
	cqe         uint32
	compVector  uint32
	compChannel int32
	flags       uint32
}

func (s *Session) createCQ(a *bundle) error {
	req, err := a.request(szCreateCQ)
	if err != nil {
		return err
	}
	return s.doCreateCQ(a, cqCreate{userHandle: get64(req, 8), cqe: get32(req, 16), compVector: get32(req, 20),
		compChannel: int32(get32(req, 24))}, false)
}

// exCreateCQ is ib_uverbs_ex_create_cq: comp_mask and reserved must be 0.
func (s *Session) exCreateCQ(a *bundle) error {
	req, err := a.request(szExCreateCQ)
	if err != nil {
		return err
	}
	if get32(req, 20) != 0 || get32(req, 28) != 0 {
		return eINVAL
	}
	return s.doCreateCQ(a, cqCreate{userHandle: get64(req, 0), cqe: get32(req, 8), compVector: get32(req, 12),
		compChannel: int32(get32(req, 16)), flags: get32(req, 24)}, true)
}

// doCreateCQ is uverbs_cmd.c:create_cq with irdma_create_cq for a user
// CQ: the ring and the shadow area are the registrations (reg_type CQ)
// named by irdma_create_cq_req.
func (s *Session) doCreateCQ(a *bundle, c cqCreate, ex bool) error {
	if int(c.compVector) >= s.p.d.NumCompVectors() {
		return eINVAL
	}
	if err := s.canAlloc(); err != nil {
		return err
	}
	var ch *compChannel
	if c.compChannel >= 0 {
		var err error
		if ch, err = s.lookupChannel(c.compChannel); err != nil {
			return err
		}
	}
	// irdma_create_cq: cq_validate_flags, then the udata lengths.
	if c.flags&^1 != 0 {
		return eOPNOTSUPP
	}
	if len(a.udIn) < szCQReqMin || a.udOutLen < szCQResp {
		return eINVAL
	}
	ureq := a.udata(szCQReq)
	co := &cqObj{userHandle: c.userHandle, ch: ch, shadowVA: get64(ureq, 8)}
	attr := driver.CQAttr{
		CQE:        int(int32(c.cqe)), // int entries = attr->cqe
		CompVector: int(c.compVector),
		Flags:      c.flags,
		User:       &driver.UserCQ{Ctx: s.uctx, CQBuf: get64(ureq, 0), ShadowArea: co.shadowVA},
		// ib_uverbs_comp_handler: an event for the CQ's channel, if any.
		CompHandler: func(*driver.CQ) { s.compEvent(co) },
		// ib_uverbs_cq_event_handler
		EventHandler: func(_ *driver.CQ, ev driver.AsyncEvent) {
			if !co.dead.Load() {
				s.asyncEvent(&co.async, co.userHandle, uint32(ev.Type))
			}
		},
	}
	cq, err := s.p.d.CreateCQ(attr)
	if err != nil {
		if err == ePROTO {
			s.log.Debug("uverbs: CREATE_CQ names no CQ registration", zap.Uint64("user_cq_buf", get64(ureq, 0)),
				zap.Uint64("user_shadow_area", co.shadowVA))
		}
		return err
	}
	co.cq = cq
	co.handle = s.h.alloc(object{kindCQ, co})
	resp := make([]byte, szExCreateCQResp)
	put32(resp, 0, co.handle)
	put32(resp, 4, uint32(cq.CQE()))
	if ex {
		put32(resp, 12, a.responseLength(szExCreateCQResp))
		a.respond(resp)
	} else {
		a.respond(resp[:szCreateCQResp])
	}
	u := make([]byte, szCQResp)
	put32(u, 0, cq.ID())
	put32(u, 4, cq.Size())
	a.udataOut(u)
	return nil
}

// compEvent queues a struct ib_uverbs_comp_event_desc on the CQ's
// channel (ib_uverbs_comp_handler).
func (s *Session) compEvent(co *cqObj) {
	if co.ch == nil || co.dead.Load() || s.closing.Load() {
		return
	}
	var rec [szCompEventDesc]byte
	put64(rec[:], 0, co.userHandle)
	if !co.ch.ef.push(&co.comp, rec[:]) {
		s.log.Warn("uverbs: completion event lost (channel full)", zap.Uint64("cq_handle", co.userHandle))
	}
}

// resizeCQ is ib_uverbs_resize_cq with irdma_resize_cq: the new ring is
// the registration named by irdma_resize_cq_req.user_cq_buffer.
func (s *Session) resizeCQ(a *bundle) error {
	req, err := a.request(szResizeCQ)
	if err != nil {
		return err
	}
	co, err := s.readCQ(get32(req, 8))
	if err != nil {
		return err
	}
	if s.p.d.UKAttrs().FeatureFlags&2 == 0 { // IRDMA_FEATURE_CQ_RESIZE
		return eOPNOTSUPP
	}
	if len(a.udIn) < szResizeCQReq {
		return eINVAL
	}
	buf := get64(a.udata(szResizeCQReq), 0)
	if err := s.p.d.ResizeCQ(co.cq, int(int32(get32(req, 12))), s.uctx, buf); err != nil {
		return err
	}
	resp := make([]byte, szResizeCQResp)
	put32(resp, 0, uint32(co.cq.CQE()))
	a.respond(resp)
	return nil
}

// destroyCQ is ib_uverbs_destroy_cq: the CQ goes (-EBUSY while a QP uses
// it), its unread events are dropped (ib_uverbs_release_ucq), and the
// response counts the events the program read — exactly what
// ibv_destroy_cq waits to see acknowledged.
func (s *Session) destroyCQ(a *bundle) error {
	req, err := a.request(szDestroyCQ)
	if err != nil {
		return err
	}
	h := get32(req, 8)
	v, err := s.h.lookup(h, kindCQ)
	if err != nil {
		return err
	}
	co := v.(*cqObj)
	if _, _, err := s.p.d.DestroyCQ(co.cq); err != nil {
		return err
	}
	co.dead.Store(true)
	s.h.remove(h)
	var comp, async uint32
	if co.ch != nil {
		comp = co.ch.ef.purge(&co.comp)
	}
	if ef := s.async.Load(); ef != nil {
		async = ef.purge(&co.async)
	}
	resp := make([]byte, szDestroyCQResp)
	put32(resp, 0, comp)
	put32(resp, 4, async)
	a.respond(resp)
	return nil
}

// reqNotifyCQ is ib_uverbs_req_notify_cq. libirdma arms its CQs itself
// (the shadow area's arm word, then the CQ doorbell); a program that asks
// the kernel instead gets the same: irdma_uk_cq_request_notification's
// update of shadow qword 4 — ARM_SEQ_NUM + 1, ARM_NEXT_SE, ARM_NEXT unless
// solicited only — and the doorbell hint. (irdma itself has no kernel
// mapping of a user CQ's shadow area.) The result is ignored, as
// ib_req_notify_cq's is.
func (s *Session) reqNotifyCQ(a *bundle) error {
	req, err := a.request(szReqNotifyCQ)
	if err != nil {
		return err
	}
	co, err := s.readCQ(get32(req, 0))
	if err != nil {
		return err
	}
	if iova, ok := s.mem.iova(co.shadowVA + 32); ok && iova%8 == 0 {
		armShadow(s.p.mem, iova, get32(req, 4) != 0)
		if s.dbPage != nil {
			s.dbPage.ringCQ(co.cq.ID())
		}
	}
	return nil
}

// armShadow updates a CQ shadow area's arm word (qword 4): SW_CQ_SELECT
// [13:0] kept, ARM_NEXT [14], ARM_NEXT_SE [15] always set, ARM_SEQ_NUM
// [17:16] incremented.
func armShadow(mem *hostmem.Memory, iova hostmem.IOVA, solicited bool) {
	v, err := mem.Load64(iova)
	if err != nil {
		return
	}
	seq := (v>>16 + 1) & 3
	n := v&0x3fff | 1<<15 | seq<<16
	if !solicited {
		n |= 1 << 14
	}
	_ = mem.Store64(iova, n)
}

// pollCQ is ib_uverbs_poll_cq. A user CQ's ring is the program's: there
// is no kernel-mode poll of it (irdma's poll_cq would walk a ring it never
// mapped), so after the checks the command is -EOPNOTSUPP.
func (s *Session) pollCQ(a *bundle) error {
	req, err := a.request(szPollCQ)
	if err != nil {
		return err
	}
	if _, err := s.readCQ(get32(req, 8)); err != nil {
		return err
	}
	return eOPNOTSUPP
}
